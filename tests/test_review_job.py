"""The review-analysis job: rating, parsing, both runners, evaluation, the embedded model."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest

from flink_agents_py.api import ChatMessage, MessageRole, ResourceDescriptor
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.testing import ScriptedRequest
from jobs.review_analysis import DEFAULT_INPUT, main, parse_line
from jobs.review_analysis.evaluation import evaluate
from jobs.review_analysis.models import Rating
from jobs.review_analysis.scoring import lexicon_rating
from jobs.review_analysis.scripted import scripted_rating

ROOT = pathlib.Path(__file__).resolve().parents[1]

# os.environ as it was before any in-process Flink job of this pytest run: a PyFlink job in
# loopback mode leaves PYFLINK_GATEWAY_DISABLED=true (and more) behind, and a job started with
# it inherited refuses to launch its gateway
CLEAN_ENV = dict(os.environ)
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").is_dir() else sys.executable
LABELS = ROOT.parent / "shared" / "data" / "review_labels_dev.jsonl"
SHIPPED_REVIEWS = 3163
SHIPPED_PRODUCTS = 31

# line numbers are 0-based and count blank lines
SMALL_INPUT = "\n".join([
    '{"id": "P1", "review": "Love it, great fit", "ts": 1}',       # 0: 5
    '{"id": "P2", "review": "Broke after a day, bad", "ts": 2}',   # 1: 1
    'not json {',                                                  # 2: malformed
    '{"id": "P1", "review": "comfortable and soft"}',              # 3: 5
    '',                                                            # 4: blank (skipped)
    '{"id": "P2", "text": "no review field"}',                     # 5: missing 'review'
    '{"id": "P1", "review": "it is a shoe"}',                      # 6: 3
    '{"id": "P3", "review": "terrible, returned it"}',             # 7: 1
]) + "\n"
SMALL_SCORES = {0: 5, 1: 1, 3: 5, 6: 3, 7: 1}
SMALL_IDS = {0: "P1", 1: "P2", 3: "P1", 6: "P1", 7: "P3"}


def read_jsonl(path: pathlib.Path) -> list[Any]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def run_job(*args: str, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([PYTHON, "-m", "jobs.review_analysis", "--no-progress", *args],
                          cwd=ROOT, env={**CLEAN_ENV, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture
def small_input(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "reviews.jsonl"
    p.write_text(SMALL_INPUT)
    return p


def check_small_results(out: pathlib.Path) -> None:
    """The results and errors of SMALL_INPUT, from either runner."""
    rows = read_jsonl(out)
    reviews = [r for r in rows if r["kind"] == "review"]
    assert {r["line"]: r["score"] for r in reviews} == SMALL_SCORES
    assert {r["line"]: r["id"] for r in reviews} == SMALL_IDS
    assert all(r["reasons"] for r in reviews)
    summaries = [r for r in rows if r["kind"] == "product_summary"]
    assert len(summaries) == len(reviews)  # one updated summary per review
    by_product: dict[str, list[dict[str, Any]]] = {}
    for s in summaries:  # rows are sorted by line
        by_product.setdefault(s["id"], []).append(s)
    assert {p: [(s["line"], s["count"], s["mean_score"]) for s in ss]
            for p, ss in by_product.items()} == {
        "P1": [(0, 1, 5.0), (3, 2, 5.0), (6, 3, 4.3333)],
        "P2": [(1, 1, 1.0)],
        "P3": [(7, 1, 1.0)],
    }
    errors = read_jsonl(out.with_suffix(".errors.jsonl"))
    assert [(e["kind"], e["line"], e["id"]) for e in errors] == [
        ("error", 2, None), ("error", 5, None)]
    assert errors[0]["error"].startswith("line 2: not JSON")
    assert errors[1]["error"] == "line 5: field 'review' must be a string"


# ------------------------------------------------------------------ fast
def test_lexicon_rating_scores_and_reasons():
    assert lexicon_rating("I love it, great and comfortable") == Rating(
        reasons=["says 'love'", "says 'great'", "says 'comfortable'"], score=5)
    assert lexicon_rating("Nice").score == 4
    assert lexicon_rating("nice but small").score == 3
    assert lexicon_rating("It is a shoe.") == Rating(reasons=["no strong opinion words"], score=3)
    assert lexicon_rating("cheap, it broke").score == 1
    assert lexicon_rating("Bad.").score == 2
    text = "Great shoes, but they broke and I returned them. Love the color though!"
    assert lexicon_rating(text) == lexicon_rating(text)


def test_scripted_model_rates_deterministically():
    req = ScriptedRequest(messages=[
        ChatMessage(role=MessageRole.SYSTEM, content="rate"),
        ChatMessage(content="Review: love them, so comfortable"),
    ])
    assert scripted_rating(req) == {"reasons": ["says 'love'", "says 'comfortable'"], "score": 5}
    conn = ResourceDescriptor(ScriptedChatModel,
                              function="jobs.review_analysis.scripted:scripted_rating").build()
    answers = {conn.chat(req.messages).message.content for _ in range(3)}
    assert len(answers) == 1
    assert json.loads(answers.pop()) == scripted_rating(req)


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"review": "x"}', "field 'id' must be a non-empty string"),
    ('{"id": "", "review": "x"}', "field 'id' must be a non-empty string"),
    ('{"id": "P", "review": 5}', "field 'review' must be a string"),
    ('{"id": "P"}', "field 'review' must be a string"),
])
def test_parse_line_errors_name_the_line(text, problem):
    with pytest.raises(ValueError) as e:
        parse_line(41, text)
    assert str(e.value).startswith("line 41: ")
    assert problem in str(e.value)


def test_parse_line_ok():
    assert parse_line(3, '{"id": "P", "review": "ok", "ts": 9, "x": 1}') == {
        "line": 3, "id": "P", "review": "ok", "ts": 9}


def test_local_runner_small_input(small_input, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--input", str(small_input), "--output", str(out)]) == 0
    assert ("5 review results, 3 products, 2 errors, 13 output rows"
            in capsys.readouterr().err)
    check_small_results(out)
    again = tmp_path / "again.jsonl"  # deterministic end to end
    main(["--runner", "local", "--model", "scripted", "--no-progress",
          "--input", str(small_input), "--output", str(again)])
    assert again.read_bytes() == out.read_bytes()


def test_evaluate_math():
    outputs = [
        {"kind": "review", "line": 1, "score": 5},
        {"kind": "review", "line": 2, "score": 3},
        {"kind": "review", "line": 3, "score": 1},
        {"kind": "product_summary", "line": 4, "count": 1, "mean_score": 5.0},
    ]
    labels = [
        {"line": 1, "score": 4},  # within 1: hit
        {"line": 2, "score": 3},  # exact: hit
        {"line": 3, "score": 3},  # off by 2: miss
        {"line": 4, "score": 5},  # only a summary on that line: miss
        {"line": 9, "score": 1},  # not rated: miss
    ]
    assert evaluate(outputs, labels) == pytest.approx(2 / 5)
    assert evaluate(outputs, []) == 0.0
    assert evaluate([], labels) == 0.0
    assert evaluate(outputs, labels[:2]) == 1.0


@pytest.mark.skipif(not LABELS.is_file(), reason=f"no label file at {LABELS}")
def test_evaluate_with_scripted_model_prints_agreement(tmp_path, capsys):
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--input", str(DEFAULT_INPUT), "--output", str(tmp_path / "ev.jsonl"),
                 "--evaluate", str(LABELS)]) == 0
    captured = capsys.readouterr()
    last = captured.out.strip().splitlines()[-1]
    assert re.fullmatch(r"agreement: [01]\.\d\d", last), last
    n_labels = len(read_jsonl(LABELS))
    assert f"{n_labels} review results" in captured.err  # exactly the labelled lines


# ------------------------------------------------------------------ Flink (MiniCluster, subprocess)
@pytest.fixture(scope="module")
def full_runs(tmp_path_factory) -> dict[str, Any]:
    """The shipped reviews through both runners (one Flink job).

    The Flink run has the bar forced on (``FLINK_AGENTS_PY_PROGRESS=1``, as a terminal
    would show it) and ``--no-progress`` given, which must silence it.
    """
    d = tmp_path_factory.mktemp("full")
    flink = run_job("--model", "scripted", "--output", str(d / "flink.jsonl"),
                    env={"FLINK_AGENTS_PY_PROGRESS": "1"})
    local = run_job("--model", "scripted", "--runner", "local", "--output", str(d / "local.jsonl"))
    return {"dir": d, "flink_stderr": flink.stderr, "local_stderr": local.stderr}


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_full_job_on_flink_rates_every_review(full_runs):
    d = full_runs["dir"]
    rows = read_jsonl(d / "flink.jsonl")
    reviews = [r for r in rows if r["kind"] == "review"]
    assert len(reviews) == SHIPPED_REVIEWS
    assert sorted(r["line"] for r in reviews) == list(range(SHIPPED_REVIEWS))
    assert all(r["score"] in (1, 2, 3, 4, 5) for r in reviews)
    # the scripted review model is the lexicon: each row carries exactly its rating, through
    # the agent's ctx.chat as through the request/response actions it replaced
    lines = DEFAULT_INPUT.read_text().splitlines()  # a row's line is its 0-based line number
    assert all(Rating(score=r["score"], reasons=r["reasons"])
               == lexicon_rating(json.loads(lines[r["line"]])["review"]) for r in reviews)
    summaries = [r for r in rows if r["kind"] == "product_summary"]
    assert len({s["id"] for s in summaries}) == SHIPPED_PRODUCTS
    last: dict[str, dict[str, Any]] = {}
    for s in summaries:
        last[s["id"]] = s
    counts: dict[str, int] = {}
    for r in reviews:
        counts[r["id"]] = counts.get(r["id"], 0) + 1
    assert {p: s["count"] for p, s in last.items()} == counts
    assert read_jsonl(d / "flink.errors.jsonl") == []
    assert (f"{SHIPPED_REVIEWS} review results, {SHIPPED_PRODUCTS} products, 0 errors"
            in full_runs["flink_stderr"])
    assert "(flink runner, scripted model)" in full_runs["flink_stderr"]


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_full_job_flink_and_local_outputs_identical(full_runs):
    d = full_runs["dir"]
    assert (d / "flink.jsonl").read_bytes() == (d / "local.jsonl").read_bytes()
    assert (d / "flink.errors.jsonl").read_bytes() == (d / "local.errors.jsonl").read_bytes()
    assert "(local runner, scripted model)" in full_runs["local_stderr"]


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_no_progress_silences_the_bar_on_flink(full_runs):
    from test_flink_progress import bar_lines

    stderr = full_runs["flink_stderr"]
    assert "review results" in stderr  # the run's own summary still comes
    assert not bar_lines(stderr) and "agent (starting)" not in stderr


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_flink_runner_reports_bad_lines_and_completes(small_input, tmp_path):
    out = tmp_path / "flink.jsonl"
    proc = run_job("--model", "scripted", "--input", str(small_input), "--output", str(out))
    assert "5 review results, 3 products, 2 errors, 13 output rows" in proc.stderr
    check_small_results(out)  # same line numbers (blank line counted) as the local runner


# ------------------------------------------------------------------ the embedded model
@pytest.mark.model
@pytest.mark.timeout(600)
def test_local_model_rates_five_reviews(tmp_path):
    try:
        import llama_cpp  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means: no usable llama.cpp
        pytest.skip(f"llama-cpp-python is not usable: {type(e).__name__}: {e}")
    from flink_agents_py.integrations.chat_models._gguf import find_gguf_model

    try:
        find_gguf_model()
    except FileNotFoundError as e:
        pytest.skip(f"no GGUF model: {e}")
    out = tmp_path / "model.jsonl"
    run_job("--runner", "local", "--limit", "5", "--output", str(out))
    reviews = [r for r in read_jsonl(out) if r["kind"] == "review"]
    errors = read_jsonl(out.with_suffix(".errors.jsonl"))
    assert len(reviews) == 5, f"errors: {errors}"
    assert sorted(r["line"] for r in reviews) == [0, 1, 2, 3, 4]
    assert all(r["score"] in (1, 2, 3, 4, 5) for r in reviews)
