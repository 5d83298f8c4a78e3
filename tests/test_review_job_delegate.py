"""The review-analysis job's delegate mode (``--mode delegate``), on the local runner.

An orchestrator model delegates each review to the ``reviewer`` internal sub-agent through
its ``_subagent_reviewer`` callable and answers with the reviewer's rating; with the scripted
models the results must equal the direct mode's, row for row.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `jobs` is not installed
    sys.path.insert(0, str(ROOT))

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    SUBAGENT_DESCRIPTION_MARKER,
    ChatMessage,
    MessageRole,
    ResourceType,
)
from flink_agents_py.integrations.chat_models._scripted import ScriptedRequest  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402
from flink_agents_py.runtime import ResourceEnvironment  # noqa: E402
from jobs.review_analysis import (  # noqa: E402
    DEFAULT_INPUT,
    ReviewAnalysisAgent,
    ReviewOrchestratorAgent,
    build_agent,
    main,
    parse_line,
    read_lines,
    scripted_orchestrator,
)

pytestmark = pytest.mark.timeout(300)


def read_jsonl(path: pathlib.Path) -> list[Any]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def run_main(tmp_path: pathlib.Path, *args: str) -> tuple[list[Any], list[Any]]:
    out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--output", str(out), *args]) == 0
    return read_jsonl(out), read_jsonl(out.with_suffix(".errors.jsonl"))


def test_delegate_mode_gives_the_direct_scores_for_50_lines(tmp_path):
    direct, direct_errors = run_main(tmp_path, "--limit", "50", "--mode", "direct")
    delegate, delegate_errors = run_main(tmp_path, "--limit", "50", "--mode", "delegate")
    scores = {name: {r["line"]: r["score"] for r in rows if r["kind"] == "review"}
              for name, rows in (("direct", direct), ("delegate", delegate))}
    assert len(scores["direct"]) == 50
    assert scores["delegate"] == scores["direct"]
    # the output format stays the same: the same review, product_summary and advice rows
    assert {r["kind"] for r in delegate} == {"review", "product_summary", "product_advice"}
    assert delegate == direct
    assert direct_errors == delegate_errors == []


def test_default_mode_is_direct(tmp_path):
    assert isinstance(build_agent("scripted"), ReviewAnalysisAgent)
    assert isinstance(build_agent("scripted", mode="delegate"), ReviewOrchestratorAgent)
    default, _ = run_main(tmp_path, "--limit", "5")
    direct, _ = run_main(tmp_path, "--limit", "5", "--mode", "direct")
    assert default == direct


def test_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--mode"):
        build_agent("scripted", mode="relay")
    with pytest.raises(SystemExit):
        main(["--runner", "local", "--model", "scripted", "--mode", "relay",
              "--output", str(tmp_path / "x.jsonl")])


def test_delegate_mode_goes_through_the_reviewer_callable():
    agent = build_agent("scripted", mode="delegate")
    setup = ResourceEnvironment(AgentPlan.from_agent(agent)).get(
        "orchestrator_model", ResourceType.CHAT_MODEL)
    [callable_] = setup.callables()
    assert callable_.name == "_subagent_reviewer"
    assert callable_.description.endswith(SUBAGENT_DESCRIPTION_MARKER)
    assert callable_.parameters["required"] == ["review"]
    assert callable_.parameters["properties"]["review"]["type"] == "string"

    records = [parse_line(n, t) for n, t in read_lines(DEFAULT_INPUT, limit=6)]
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
