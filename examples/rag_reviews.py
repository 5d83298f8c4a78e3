r"""RAG over the shipped product reviews: "what do customers say about sizing of product X?".

The shape of Apache Flink Agents' RAG example (``MyRAGAgent``): an input question becomes a
``ContextRetrievalRequestEvent``; the built-in context retrieval action searches the vector
store and answers with a ``ContextRetrievalResponseEvent``; the agent puts the documents into
its prompt and sends a ``ChatRequestEvent``; the chat answer becomes the output. Offline:
embeddings by the embedded all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0), the store an
embedded Chroma under ``--db``, and by default a deterministic extractive "chat model" that
quotes the retrieved reviews (``--model local``: the embedded llama.cpp model instead).

    python examples/rag_reviews.py --product B010RRWKT4 \\
        --question "What do customers say about the sizing?"

The first run indexes the reviews (one document per product and distinct review text,
embedded once per distinct text); later runs reuse the index in ``--db``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    MessageRole,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
    embedding_model_connection,
    embedding_model_setup,
    format_context,
    prompt,
    vector_store,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.integrations.embedding_models import MiniLMEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

DEFAULT_REVIEWS = (pathlib.Path(__file__).resolve().parent.parent / "jobs" / "data"
                   / "product_reviews.jsonl")
COLLECTION = "product_reviews"
DEFAULT_DB = str(pathlib.Path("out") / "rag-db")  # under out/, which git ignores
SETTINGS = {"db": DEFAULT_DB, "model": "scripted"}  # set by main() before the agent is built


def quote_reviews(request: Any) -> str:
    """The offline stand-in for a chat model: quote the numbered reviews of the prompt."""
    text = request.last_user_text
    quotes = re.findall(r"^\d+\. (.+)$", text, flags=re.M)
    if not quotes:
        return "No customer reviews match the question."
    lines = [f'- "{q[:160]}"' for q in quotes[:3]]
    return f"Customers say ({len(quotes)} matching reviews):\n" + "\n".join(lines)


class ReviewRAGAgent(Agent):
    """Answers a question about one product from its reviews."""

    @prompt
    @staticmethod
    def context_enhanced_prompt() -> Prompt:
        """The question with the retrieved reviews."""
        return Prompt.from_text(
            "Based on the following customer reviews, answer the question.\n\n"
            "Reviews:\n{context}\n\nQuestion:\n{user_query}\n\n"
            "Answer briefly, from the reviews only.", role=MessageRole.USER)

    @embedding_model_connection
    @staticmethod
    def minilm() -> ResourceDescriptor:
        """all-MiniLM-L6-v2, in-process."""
        return ResourceDescriptor(MiniLMEmbeddingModel)

    @embedding_model_setup
    @staticmethod
    def text_embedder() -> ResourceDescriptor:
        """The embedding model the store uses."""
        return ResourceDescriptor(EmbeddingModelSetup, connection="minilm")

    @vector_store
    @staticmethod
    def knowledge_base() -> ResourceDescriptor:
        """The indexed reviews."""
        return ResourceDescriptor(ChromaVectorStore, embedding_model="text_embedder",
                                  persist_directory=SETTINGS["db"], collection=COLLECTION)

    @chat_model_connection
    @staticmethod
    def answerer() -> Any:
        """Extractive by default; the embedded llama.cpp model with --model local."""
        if SETTINGS["model"] == "local":
            from flink_agents_py.integrations.chat_models import LlamaCppChatModel
            return ResourceDescriptor(LlamaCppChatModel, max_tokens=200)
        return ScriptedChatModel.from_function(quote_reviews)

    @chat_model_setup
    @staticmethod
    def chat_model() -> ResourceDescriptor:
        """The chat setup the agent asks."""
        return ResourceDescriptor(ChatModelSetup, connection="answerer")

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask the retrieval action for the product's reviews closest to the question."""
        ctx.short_term_memory.set("question", event.input["question"])
        ctx.send_event(ContextRetrievalRequestEvent(
            query=event.input["question"], vector_store="knowledge_base", max_results=5,
            filters={"product": event.input["product"]}))

    @action(ContextRetrievalResponseEvent)
    @staticmethod
    def process_retrieved_context(event: ContextRetrievalResponseEvent,
                                  ctx: RunnerContext) -> None:
        """Put the documents into the prompt and ask the chat model."""
        if event.error:
            ctx.send_event(OutputEvent(output={"product": ctx.key, "error": event.error}))
            return
        template = ctx.get_resource("context_enhanced_prompt", ResourceType.PROMPT)
        text = template.format_string(context=format_context(event.documents),
                                      user_query=event.query)
        ctx.send_event(ChatRequestEvent(
            model="chat_model", messages=[ChatMessage(role=MessageRole.USER, content=text)]))

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        """Emit the answer."""
        answer = event.response.message.content if event.response else None
        ctx.send_event(OutputEvent(output={
            "product": ctx.key, "question": ctx.short_term_memory.get("question"),
            "answer": answer, "error": event.error}))


def populate_knowledge_base(reviews: pathlib.Path, db: str, max_docs: int | None,
                            only_product: str | None = None) -> int:
    """Index the reviews (once per database); returns how many documents the store holds."""
    store = ChromaVectorStore(persist_directory=db, collection=COLLECTION)
    if store.size() > 0:
        return store.size()
    seen: set[tuple[str, str]] = set()
    rows = []
    for line in reviews.read_text().splitlines():
        r = json.loads(line)
        if only_product is not None and r["id"] != only_product:
            continue
        if (r["id"], r["review"]) not in seen and r["review"].strip():
            seen.add((r["id"], r["review"]))
            rows.append(r)
        if max_docs is not None and len(rows) >= max_docs:
            break
    model = MiniLMEmbeddingModel()
    texts = sorted({r["review"] for r in rows})
    vectors = dict(zip(texts, model.embed(texts), strict=True))
    store.add([Document(content=r["review"], metadata={"product": r["id"]},
                        embedding=vectors[r["review"]]) for r in rows])
    return store.size()


def main(argv: list[str] | None = None) -> int:
    """Index the reviews if needed, then answer the question with the agent."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reviews", default=str(DEFAULT_REVIEWS), help="reviews JSON lines")
    ap.add_argument("--db", default=DEFAULT_DB,
                    help="the Chroma directory (index; default out/rag-db, git-ignored)")
    ap.add_argument("--product", default="B010RRWKT4")
    ap.add_argument("--question", default="What do customers say about the sizing?")
    ap.add_argument("--max-docs", type=int, default=None,
                    help="index at most this many (product, review) documents")
    ap.add_argument("--index-only-product", action="store_true",
                    help="index the asked product's reviews only (a quicker first run)")
    ap.add_argument("--model", choices=["scripted", "local"], default="scripted")
    args = ap.parse_args(argv)
    SETTINGS.update(db=os.path.abspath(args.db), model=args.model)

    n = populate_knowledge_base(pathlib.Path(args.reviews), SETTINGS["db"], args.max_docs,
                                args.product if args.index_only_product else None)
    print(f"knowledge base: {n} documents in {SETTINGS['db']}", file=sys.stderr)
    env = AgentsExecutionEnvironment.local()
    record = {"key": args.product, "product": args.product, "question": args.question}
    result = env.from_list([record]).apply(ReviewRAGAgent()).run()
    for out in result.outputs:
        print(json.dumps(out, ensure_ascii=False))
    for err in result.errors:
        print(f"error: {err}", file=sys.stderr)
    return 0 if result.outputs and not result.errors else 1


if __name__ == "__main__":
    sys.exit(main())
