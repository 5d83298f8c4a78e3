"""The review-analysis job's delegate rating (``--rating delegate``), on the local runner.

An orchestrator model delegates each review to the ``reviewer`` internal sub-agent through
its ``_subagent_reviewer`` callable and answers with the reviewer's rating; with the scripted
models the results must equal the ``model`` rating's, row for row. ``--mode delegate`` is the
older spelling of ``--rating delegate``.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import ChatMessage, MessageRole, ResourceType
from flink_agents_py.api._subagents import SUBAGENT_DESCRIPTION_MARKER
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import ResourceEnvironment
from flink_agents_py.testing import ScriptedRequest
from jobs.review_analysis import DEFAULT_INPUT, build_agent, main, read_records
from jobs.review_analysis.scripted import scripted_orchestrator

pytestmark = pytest.mark.timeout(300)


def read_jsonl(path: pathlib.Path) -> list[Any]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def run_main(tmp_path: pathlib.Path, *args: str) -> tuple[list[Any], list[Any]]:
    out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--output", str(out), *args]) == 0
    return read_jsonl(out), read_jsonl(out.with_suffix(".errors.jsonl"))


def test_delegate_rating_gives_the_model_scores_for_50_lines(tmp_path):
    direct, direct_errors = run_main(tmp_path, "--limit", "50", "--rating", "model")
    delegate, delegate_errors = run_main(tmp_path, "--limit", "50", "--rating", "delegate")
    scores = {name: {r["line"]: r["score"] for r in rows if r["kind"] == "review"}
              for name, rows in (("direct", direct), ("delegate", delegate))}
    assert len(scores["direct"]) == 50
    assert scores["delegate"] == scores["direct"]
    # the output format stays the same: the same review, product_summary and advice rows
    assert {r["kind"] for r in delegate} == {"review", "product_summary", "product_advice"}
    assert delegate == direct
    assert direct_errors == delegate_errors == []


def test_default_rating_of_the_scripted_model_is_model_and_mode_is_its_older_spelling(
        tmp_path):
    assert build_agent("scripted").rating == "model"
    assert build_agent("local").rating == "hybrid"
    assert build_agent("scripted", "delegate").rating == "delegate"
    default, _ = run_main(tmp_path, "--limit", "5")
    assert run_main(tmp_path, "--limit", "5", "--mode", "direct")[0] == default
    assert run_main(tmp_path, "--limit", "5", "--rating", "model")[0] == default
    delegate, _ = run_main(tmp_path, "--limit", "5", "--rating", "delegate")
    assert run_main(tmp_path, "--limit", "5", "--mode", "delegate")[0] == delegate


def test_unknown_or_contradicting_ratings_are_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="--rating 'relay'"):
        build_agent("scripted", "relay")
    with pytest.raises(ValueError, match="--model 'gpt'"):
        build_agent("gpt")
    out = str(tmp_path / "x.jsonl")
    for args in (["--mode", "relay"], ["--rating", "relay"],
                 ["--mode", "delegate", "--rating", "hybrid"],
                 ["--mode", "direct", "--rating", "delegate"]):
        with pytest.raises(SystemExit) as e:
            main(["--runner", "local", "--model", "scripted", "--output", out, *args])
        assert e.value.code == 2
    assert "--mode direct contradicts --rating delegate" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_delegate_mode_goes_through_the_reviewer_callable():
    agent = build_agent("scripted", "delegate")
    setup = ResourceEnvironment(AgentPlan.from_agent(agent)).get(
        "orchestrator_model", ResourceType.CHAT_MODEL)
    [callable_] = setup.callables()
    assert callable_.name == "_subagent_reviewer"
    assert callable_.description.endswith(SUBAGENT_DESCRIPTION_MARKER)
    assert callable_.parameters["required"] == ["review"]
    assert callable_.parameters["properties"]["review"]["type"] == "string"

    records, _ = read_records(DEFAULT_INPUT, limit=6)
    res = (AgentsExecutionEnvironment.local()
           .from_list(records, key_selector=lambda r: r["id"]).apply(agent).run())
    assert res.errors == []
    assert sum(1 for o in res.outputs if o["kind"] == "review") == 6
    assert res.counters["subagent_calls"] == 6  # one delegation per review


def test_scripted_orchestrator_calls_the_reviewer_then_answers_with_its_rating():
    user = ChatMessage(content="Review: love it")
    first = scripted_orchestrator(ScriptedRequest(messages=[user]))
    [call] = first.tool_calls
    assert (call.name, call.arguments) == ("_subagent_reviewer", {"review": "love it"})
    rating = {"reasons": ["says 'love'"], "score": 4}
    done = [user, first, ChatMessage(role=MessageRole.TOOL, tool_call_id=call.id,
                                     content=json.dumps([rating]))]
    assert scripted_orchestrator(ScriptedRequest(messages=done)) == rating
    failed = [*done[:2], ChatMessage(role=MessageRole.TOOL, tool_call_id=call.id,
                                     content="Error: delegation failed")]
    assert scripted_orchestrator(ScriptedRequest(messages=failed)) == "Error: delegation failed"
