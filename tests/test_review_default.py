"""The main job's ratings and advice: committee, hybrid, advice rows, the default model path."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from jobs.review_analysis import DEFAULT_INPUT, build_agent, main
from jobs.review_analysis.advice import (
    advice_due,
    advice_schema,
    end_of_input_markers,
    themes_of,
    tidy_suggestion,
)
from jobs.review_analysis.models import ADVICE_SCHEMA, Advice, ProductDigest
from jobs.review_analysis.scoring import lexicon_rating
from jobs.review_analysis.scripted import scripted_advice

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLEAN_ENV = dict(os.environ)
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").is_dir() else sys.executable

SMALL_INPUT = "\n".join([
    '{"id": "P1", "review": "Love it, great fit", "ts": 1}',
    '{"id": "P2", "review": "Broke after a day, bad", "ts": 2}',
    '{"id": "P1", "review": "comfortable and soft"}',
    '{"id": "P1", "review": "Way too small, had to return them"}',
    '{"id": "P3", "review": "terrible, returned it"}',
]) + "\n"

ADVICE_KEYS = {"kind", "id", "line", "count", "mean_score", "final", "suggestions"}


def read_jsonl(path: pathlib.Path) -> list[Any]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# ------------------------------------------------------------------ the fast scorer
def test_fast_rating_is_deterministic_and_follows_the_committee():
    pytest.importorskip("vaderSentiment")
    from jobs.review_analysis.scoring import fast_rating, vader_score

    texts = [json.loads(x)["review"] for x in DEFAULT_INPUT.read_text().splitlines()[:200]]
    first = [fast_rating(t) for t in texts]
    assert [fast_rating(t) for t in texts] == first  # same verdicts, run after run
    for t, f in zip(texts, first, strict=True):
        assert f.rating == lexicon_rating(t)  # a confident score is the lexicon's
        assert f.lexicon == f.rating.score and f.vader == vader_score(t)
        if abs(f.lexicon - f.vader) >= 2:
            assert f.unsure == "disagree"
    assert any(f.unsure for f in first) and not all(f.unsure for f in first)
    # clear cases are confident
    assert fast_rating("I love them, so comfortable and great!").unsure is None
    assert fast_rating("I love them, so comfortable and great!").rating.score == 5
    assert fast_rating("Terrible, cheap and broken. Worst purchase.").unsure is None
    assert fast_rating("Terrible, cheap and broken. Worst purchase.").rating.score == 1
    # the lexicon found no opinion word: its 3 is no vote, whatever VADER says
    assert fast_rating("They run big. Order a full size smaller.").unsure == "no opinion"
    loves = fast_rating("My daughter loves them.")  # not in the lexicon; VADER says 4
    assert (loves.lexicon, loves.vader, loves.unsure) == (3, 4, "no opinion")


def test_hybrid_agent_asks_the_model_only_when_unsure_and_keeps_the_committee_on_failure():
    """The default agent: confident reviews keep the committee's rating without a chat; an
    unsure one gets the model's rating (counted in ``model_rated``); an unusable answer
    leaves the committee's rating and no error row."""
    pytest.importorskip("vaderSentiment")
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import ResourceDescriptor
    from flink_agents_py.integrations.chat_models import ScriptedChatModel
    from jobs.review_analysis.scoring import fast_rating

    texts = ["I love them, so comfortable and great!",  # confident: 5, no chat
             "My daughter loves them.",                   # no opinion -> the model: 5
             "Gracias"]                                   # no opinion -> unusable answer
    assert [fast_rating(t).unsure for t in texts] == [None, "no opinion", "no opinion"]
    agent = build_agent("scripted", "hybrid")
    agent.override_resource("review_connection", ResourceDescriptor(ScriptedChatModel, rules=[
        {"when": "loves", "reply_json": {"reasons": ["loves them"], "score": 5}},
        {"when": "Gracias", "reply": "I cannot rate that."},
        # the chat sends an invalid answer back once (output_retries)
        {"when": "^Your answer cannot be used", "reply": "Still no."}],
        # asked about a confident review, the model would change its row
        default_reply='{"reasons": ["asked"], "score": 1}'))
    records = [{"id": "P", "line": i, "review": t} for i, t in enumerate(texts)]
    result = AgentsExecutionEnvironment.local().from_list(
        records, key_selector=lambda r: r["id"]).apply(agent).run()
    assert result.errors == []
    reviews = [o for o in result.outputs if o["kind"] == "review"]
    assert [(r["line"], r["score"], r["reasons"]) for r in reviews] == [
        (0, 5, lexicon_rating(texts[0]).reasons),
        (1, 5, ["loves them"]),
        (2, 3, lexicon_rating(texts[2]).reasons)]  # the committee's rating stands
    summaries = [o for o in result.outputs if o["kind"] == "product_summary"]
    assert [s["model_rated"] for s in summaries] == [0, 1, 1]


def _rows_of(tmp_path: pathlib.Path, rating: str) -> tuple[list[Any], list[Any]]:
    out = tmp_path / f"{rating}.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress", "--limit", "300",
                 "--rating", rating, "--output", str(out)]) == 0
    return read_jsonl(out), read_jsonl(out.with_suffix(".errors.jsonl"))


def test_every_rating_goes_through_the_one_action_and_counts_who_rated():
    """``--model scripted`` answers with the lexicon, the committee's confident rating: so
    ``committee``, ``hybrid`` and ``model`` give the same rows but for ``model_rated``, which
    counts the chats: none, the unsure reviews, every review."""
    pytest.importorskip("vaderSentiment")
    import tempfile

    from jobs.review_analysis.scoring import fast_rating

    with tempfile.TemporaryDirectory() as d:
        runs = {r: _rows_of(pathlib.Path(d), r) for r in ("committee", "hybrid", "model")}
    assert all(errors == [] for _, errors in runs.values())

    def without_model_rated(rows: list[Any]) -> list[Any]:
        return [{k: v for k, v in r.items() if k != "model_rated"} for r in rows]

    committee = runs["committee"][0]
    assert {r["kind"] for r in committee} == {"review", "product_summary", "product_advice"}
    assert without_model_rated(runs["hybrid"][0]) == without_model_rated(committee)
    assert without_model_rated(runs["model"][0]) == without_model_rated(committee)
    texts = [json.loads(x)["review"] for x in DEFAULT_INPUT.read_text().splitlines()[:300]]
    unsure: dict[str, int] = {}
    for r in committee:
        if r["kind"] == "review":
            unsure[r["id"]] = unsure.get(r["id"], 0) + bool(fast_rating(texts[r["line"]]).unsure)
    assert 0 < sum(unsure.values()) < 300

    def last_model_rated(rows: list[Any]) -> dict[str, int]:
        return {r["id"]: r["model_rated"] for r in rows if r["kind"] == "product_summary"}

    assert set(last_model_rated(committee).values()) == {0}
    assert last_model_rated(runs["hybrid"][0]) == unsure
    counts = {r["id"]: r["count"] for r in committee if r["kind"] == "product_summary"}
    assert last_model_rated(runs["model"][0]) == counts


@pytest.mark.parametrize("rating", ["hybrid", "delegate"])
def test_ratings_are_replay_safe(rating):
    """Crashed at every point a checkpoint could be taken and restored, the agent emits what
    an uncrashed run emits and repeats no recorded chat (the crash checker)."""
    pytest.importorskip("vaderSentiment")
    from flink_agents_py.testing import check_replay_safety
    from jobs.review_analysis import parse_line
    from jobs.review_analysis.advice import end_of_input_markers

    lines = DEFAULT_INPUT.read_text().splitlines()
    records = [parse_line(i, lines[i]) for i in (0, 1, 4, 5, 3078)]  # 4 and 3078 are unsure
    report = check_replay_safety(build_agent("scripted", rating),
                                 records + end_of_input_markers(records),
                                 key_selector=lambda r: r["id"], max_points=40)
    report.assert_ok()
    assert report.calls > 0


# ------------------------------------------------------------------ product advice
def test_advice_policy_and_end_markers():
    assert [n for n in range(1, 3300) if advice_due(n)] == [200, 400, 800, 1600, 3200]
    records = [{"id": "A", "line": 0}, {"id": "B", "line": 1}, {"id": "A", "line": 4}]
    assert end_of_input_markers(records) == [
        {"kind": "end_of_input", "id": "B", "line": 1},
        {"kind": "end_of_input", "id": "A", "line": 4}]
    assert themes_of("Way too small and the sole came off") == ["size and fit", "durability"]
    assert ADVICE_SCHEMA["properties"]["suggestions"]["maxItems"] == 3
    digest = ProductDigest(product="P", count=1, mean_score=2.0, histogram={"2": 1}, critical=1,
                           themes={"size and fit": 1, "durability": 1}, complaints=["x"],
                           praises=[])
    assert advice_schema(digest)["properties"]["suggestions"]["maxItems"] == 1
    assert ADVICE_SCHEMA["properties"]["suggestions"]["maxItems"] == 3  # not changed
    cut = ("Improve the sole, as it may fall off over time. This could lead to discomfort and "
           "a negative experience for many of the customers who wear them every")
    assert tidy_suggestion(cut[:140]) == "Improve the sole, as it may fall off over time."
    assert tidy_suggestion("  Fix   the  size chart. ") == "Fix the size chart."
    assert tidy_suggestion("Show the real colour,") == "Show the real colour."


def test_scripted_advice_rows_have_the_documented_shape(tmp_path, capsys):
    src = tmp_path / "reviews.jsonl"
    src.write_text(SMALL_INPUT)
    out = tmp_path / "out.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--input", str(src), "--output", str(out)]) == 0
    assert "5 review results, 3 products, 0 errors, 13 output rows" in capsys.readouterr().err
    rows = read_jsonl(out)
    advice = [r for r in rows if r["kind"] == "product_advice"]
    # one final row per product, right after its last review (rows are sorted by line)
    assert [(a["id"], a["line"], a["count"], a["final"]) for a in advice] == [
        ("P2", 1, 1, True), ("P1", 3, 3, True), ("P3", 4, 1, True)]
    for a in advice:
        assert set(a) == ADVICE_KEYS
        Advice.model_validate({"suggestions": a["suggestions"]})
        assert all(isinstance(s, str) and s for s in a["suggestions"])
        i = rows.index(a)
        assert rows[i - 1]["kind"] == "product_summary" and rows[i - 1]["id"] == a["id"]
        assert a["mean_score"] == rows[i - 1]["mean_score"]
    p1 = advice[1]
    # one critical review: one suggestion, for the first of its themes (ties by name)
    assert p1["suggestions"] == ["Order and delivery: 1 of 1 critical reviews mention it; "
                                 "check order accuracy, packing and the returns experience."]
    summaries = [r for r in rows if r["kind"] == "product_summary"]
    assert all(s["model_rated"] == s["count"] for s in summaries)  # scripted: all by the model
    again = tmp_path / "again.jsonl"
    main(["--runner", "local", "--model", "scripted", "--no-progress",
          "--input", str(src), "--output", str(again)])
    assert again.read_bytes() == out.read_bytes()


def test_scripted_advice_refreshes_at_thresholds(tmp_path):
    out = tmp_path / "out.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--output", str(out)]) == 0
    rows = read_jsonl(out)
    advice = [r for r in rows if r["kind"] == "product_advice"]
    products = {r["id"] for r in rows if r["kind"] == "review"}
    assert sorted(a["id"] for a in advice if a["final"]) == sorted(products)
    refreshes = [a for a in advice if not a["final"]]
    assert refreshes and {a["count"] for a in refreshes} == {200}
    assert all(a["suggestions"] for a in advice)


def test_scripted_advice_without_complaints():
    class Req:
        last_user_text = ("Product X: 2 reviews, mean rating 5.00 of 5 (5 stars: 2, 4 stars: 0, "
                          "3 stars: 0, 2 stars: 0, 1 stars: 0).\nNo recurring complaint theme "
                          "(0 critical reviews).")

    assert scripted_advice(Req()) == {
        "suggestions": ["Keep the product as it is: no recurring complaint in 2 reviews."]}


def test_evaluate_mode_emits_no_final_advice(tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"line": 0, "id": "B010RRWKT4", "score": 5}\n')
    out = tmp_path / "ev.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--output", str(out), "--evaluate", str(labels)]) == 0
    assert {r["kind"] for r in read_jsonl(out)} == {"review", "product_summary"}


# ------------------------------------------------------------------ the default model path
def _default_model_or_skip() -> pathlib.Path:
    try:
        import llama_cpp  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means: no usable llama.cpp
        pytest.skip(f"llama-cpp-python is not usable: {type(e).__name__}: {e}")
    pytest.importorskip("vaderSentiment")
    from flink_agents_py.integrations.chat_models._gguf import (
        CACHED_MODEL_FILE,
        cached_gguf,
        models_dir,
    )

    path = cached_gguf()
    if path is None:
        pytest.skip(f"the default model is not cached at {models_dir() / CACHED_MODEL_FILE} "
                    "(make setup fetches it)")
    return path


@pytest.mark.model
@pytest.mark.flink
@pytest.mark.timeout(900)
def test_default_model_path_on_ten_reviews(tmp_path):
    _default_model_or_skip()
    out = tmp_path / "default.jsonl"
    env = {k: v for k, v in CLEAN_ENV.items() if k != "FLINK_AGENTS_PY_GGUF"}
    proc = subprocess.run([PYTHON, "-m", "jobs.review_analysis", "--no-progress", "--limit", "10",
                           "--output", str(out)],  # defaults: --runner flink --model local
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=880)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "(flink runner, local model)" in proc.stderr
    rows = read_jsonl(out)
    errors = read_jsonl(out.with_suffix(".errors.jsonl"))
    assert errors == []
    reviews = [r for r in rows if r["kind"] == "review"]
    assert sorted(r["line"] for r in reviews) == list(range(10))
    assert all(r["score"] in (1, 2, 3, 4, 5) and r["reasons"] for r in reviews)
    last_summary: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["kind"] == "product_summary":
            last_summary[r["id"]] = r
    assert sum(s["model_rated"] for s in last_summary.values()) >= 1  # e.g. line 4 is unsure
    advice = [r for r in rows if r["kind"] == "product_advice"]
    assert sorted(a["id"] for a in advice) == sorted(last_summary)
    for a in advice:
        assert set(a) == ADVICE_KEYS and a["final"]
        assert 1 <= len(a["suggestions"]) <= 3, a
        assert all(isinstance(s, str) and s.strip() for s in a["suggestions"])
