"""Figures of the embedded knowledge defaults on this machine.

- all-MiniLM-L6-v2 (``MiniLMEmbeddingModel``): embeddings per second over the shipped reviews'
  distinct texts, and the process's resident memory once loaded;
- embedded Chroma (``ChromaVectorStore``, a local path): insert rate, and query latency (p50,
  p95 over ``--queries`` queries, top 10, with and without a metadata filter) at each size of
  ``--sizes`` (384-dimensional unit vectors drawn at random: embedding 100k texts here would
  take most of an hour; the store's cost depends on count and dimension, not on content),
  with its size on disk and the process's resident memory.

    python -m bench.knowledge_figures [--sizes 10000,100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import resource
import statistics
import tempfile
import time

from flink_agents_py.api import Document, VectorStoreQuery
from flink_agents_py.integrations.embedding_models import MiniLMEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

REVIEWS = pathlib.Path(__file__).resolve().parent.parent / "jobs" / "data" / "product_reviews.jsonl"


def rss_mb() -> float:
    """Peak resident memory of this process, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def embedding_figures() -> dict:
    texts = sorted({json.loads(line)["review"] for line in REVIEWS.read_text().splitlines()})
    model = MiniLMEmbeddingModel()
    t0 = time.perf_counter()
    model.open()
    load_s = time.perf_counter() - t0
    model.embed(texts[:8])  # warm-up
    t0 = time.perf_counter()
    result = model.embed_with_usage(texts)
    secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t in texts[:50]:
        model.embed(t)
    single_ms = (time.perf_counter() - t0) / 50 * 1000
    return {"texts": len(texts), "tokens": result.token_usage.total_tokens,
            "mean_tokens": round(result.token_usage.total_tokens / len(texts), 1),
            "load_s": round(load_s, 2), "batch_texts_per_s": round(len(texts) / secs, 1),
            "single_text_ms": round(single_ms, 1), "truncated": len(result.truncated),
            "rss_mb_after_load": round(rss_mb(), 1)}


def _unit(rng: random.Random, dim: int) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(dim)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def store_figures(size: int, queries: int, dim: int = 384) -> dict:
    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as d:
        store = ChromaVectorStore(persist_directory=d, collection="bench", batch_size=5000)
        t0 = time.perf_counter()
        batch = 5000
        for s in range(0, size, batch):
            store.add([Document(id=f"d{i}", content=f"document {i}",
                                metadata={"product": f"p{i % 100}"}, embedding=_unit(rng, dim))
                       for i in range(s, min(size, s + batch))])
        insert_s = time.perf_counter() - t0
        qs = [_unit(rng, dim) for _ in range(queries)]

        def lat(filters: dict | None) -> list[float]:
            out = []
            for q in qs:
                t = time.perf_counter()
                store.query(VectorStoreQuery(query_embedding=q, limit=10, filters=filters))
                out.append((time.perf_counter() - t) * 1000)
            return sorted(out)

        plain, filtered = lat(None), lat({"product": "p7"})
        disk = sum(f.stat().st_size for f in pathlib.Path(d).rglob("*") if f.is_file())
        return {"vectors": size, "insert_per_s": round(size / insert_s),
                "query_p50_ms": round(statistics.median(plain), 2),
                "query_p95_ms": round(plain[int(0.95 * len(plain)) - 1], 2),
                "filtered_p50_ms": round(statistics.median(filtered), 2),
                "filtered_p95_ms": round(filtered[int(0.95 * len(filtered)) - 1], 2),
                "disk_mb": round(disk / 2**20, 1), "rss_mb": round(rss_mb(), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description="embedded knowledge defaults: figures")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-embeddings", action="store_true")
    args = ap.parse_args()
    if not args.skip_embeddings:
        print(json.dumps({"embeddings": embedding_figures()}), flush=True)
    for size in (int(s) for s in args.sizes.split(",")):
        print(json.dumps({"store": store_figures(size, args.queries)}), flush=True)


if __name__ == "__main__":
    main()
