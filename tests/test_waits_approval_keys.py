"""An approval id names its key: an answer can release only the call it was made for.

Before: ``approval_id`` was ``approval:<call id>``, the same for the same call of every
key's run (the first tool call of each key's first record: ``approval:r0/.../c0``). An
answer built from key ``k``'s request and sent with key ``j`` (a reviewer's tool indexing
requests by id alone, as the ids invited, or a key field copied wrongly) approved ``j``'s
held call, with ``j``'s arguments, which no one had seen: another customer's email went
out. Now the id ends with a tag of its key (``...@<16 hex digits>``), so ids differ across
keys, and an answer carrying another key's approval id goes to the error output at once,
saying to send it with its request's key; the call it reached stays held.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pytest
from support import waits_agents as wa
from support.crash import read_counts

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import ApprovalRequest, ResourceDescriptor, ResourceType
from flink_agents_py.integrations.chat_models import ScriptedChatModel

pytestmark = pytest.mark.timeout(120)


def _requests(job) -> dict[str, ApprovalRequest]:
    return {r.key: r for o in list(job.result.outputs) if (r := ApprovalRequest.of(o))}


def _answers(result) -> dict[str, str]:
    return {o["key"]: o["answer"] for o in result.outputs if "answer" in o}


def test_the_same_call_of_two_keys_runs_has_two_approval_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    job = AgentsExecutionEnvironment.local().from_list(
        [{"key": "k", "to": "k@x.org"}, {"key": "j", "to": "j@x.org"}, {"key": 7, "to": "7@x"},
         {"key": "7", "to": "seven@x"}])
    result = job.connect([]).apply(wa.make_mailer(timeout_s=60)).run()
    ids = [r.approval_id for o in result.outputs if (r := ApprovalRequest.of(o))]
    assert len(ids) == 4 and len(set(ids)) == 4, ids  # 7 and "7" are two keys too
    assert all(re.fullmatch(r"approval:r0/.+/c0@[0-9a-f]{16}", i) for i in ids), ids


def test_an_answer_sent_with_another_keys_key_releases_nothing_and_says_so(
        tmp_path: pathlib.Path, monkeypatch):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    job = AgentsExecutionEnvironment.local().from_list(
        [{"key": "k", "to": "k@x.org"}, {"key": "j", "to": "j@x.org"}])

    def answers():
        reqs = _requests(job)
        yield {**reqs["k"].approve(by="ann"), "key": "j"}  # k's approval, sent with key j
        yield reqs["j"].reject("not this one")             # j's own answer still counts

    result = job.connect(answers()).apply(wa.make_mailer(timeout_s=600)).run()
    [error] = result.errors
    assert (error.key, error.error_type, error.execution_id) == (
        "j", "UnmatchedEventError", "outside event 0")
    assert "an approval requested for another key than 'j'" in error.message
    assert "ApprovalRequest.key" in error.message
    got = _answers(result)
    assert "rejected by its reviewer: not this one" in got["j"]  # j's call stayed held
    assert "was not approved" in got["k"]                        # k's answer never reached k
    assert read_counts(str(tmp_path)) == {}                      # no email went out


def test_an_answer_with_its_own_key_still_releases_its_call(tmp_path, monkeypatch):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    job = AgentsExecutionEnvironment.local().from_list(
        [{"key": ("a", 1), "to": "a1@x"}, {"key": ("a", "1"), "to": "a-1@x"}])

    def answers():
        reqs = {json.dumps(r.key): r for o in list(job.result.outputs)
                if (r := ApprovalRequest.of(o))}  # a tuple key comes as a list
        yield reqs['["a", 1]'].approve()
        yield json.loads(json.dumps(reqs['["a", "1"]'].reject("no")))  # as read from a topic

    result = job.connect(answers()).apply(wa.make_mailer(timeout_s=600)).run()
    assert result.errors == []
    got = _answers(result)
    assert got[("a", 1)] == "sent to a1@x" and "rejected" in got[("a", "1")]
    assert read_counts(str(tmp_path)) == {("email", "a1@x"): 1}


def two_emails(request: Any) -> Any:
    """Scripted model: two emails in one turn (to the user's address, and a copy)."""
    from flink_agents_py.api import ChatMessage, MessageRole, ToolCall

    if not request.tool_results:
        to = request.messages[-1].content
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id=f"t{i}", name="send_email", arguments={"to": f"{i}{to}", "body": "hi"})
            for i in (1, 2)])
    return " | ".join(str(m.content) for m in request.tool_results)


def _two_mailer():
    agent = wa.make_mailer(timeout_s=600)
    agent.override_resource("conn", ResourceDescriptor(
        ScriptedChatModel, function=f"{__name__}:two_emails"), ResourceType.CHAT_MODEL_CONNECTION)
    return agent


def test_calls_held_before_the_upgrade_keep_their_approval_ids(tmp_path, monkeypatch):
    """Calls parked by a version whose ids had no key tag are answered by their old ids.

    The first answer wakes the run, which re-enters the other held call: it keeps its wait
    (no second request for it, no second wait under a new id).
    """
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    records = [{"key": "k", "to": "@x.org"}]
    snaps: list = []
    first = AgentsExecutionEnvironment.local().from_list(records).connect([]).apply(_two_mailer())
    first.run(on_step=lambda job: snaps.append(job.snapshot()))
    requests = [r for o in first.result.outputs if (r := ApprovalRequest.of(o))]
    assert len(requests) == 2
    snap = next(s for s in snaps if any(k["run"] and k["run"]["parked"] for k in s["keys"]))
    text = json.dumps(snap)
    tag = requests[0].approval_id.rpartition("@")[2]
    assert tag in text
    snap = json.loads(text.replace("@" + tag, ""))  # the state the older version wrote
    answers = [{**r.approve(), "correlation_id": r.approval_id.rpartition("@")[0]}
               for r in requests]
    second = (AgentsExecutionEnvironment.local().from_list(records)
              .connect(answers).apply(_two_mailer()))
    result = second.restore(snap).run()
    assert result.errors == []
    assert [o for o in result.outputs if ApprovalRequest.of(o)] == []  # none asked again
    assert _answers(result) == {"k": "sent to 1@x.org | sent to 2@x.org"}
    assert read_counts(str(tmp_path)) == {("email", "1@x.org"): 1, ("email", "2@x.org"): 1}


USER_MODULE = '''
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, MessageRole,
                                 OutputEvent, ResourceDescriptor, ResourceType, RunnerContext,
                                 ToolCall, action, tool)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


@tool(requires_approval=True, approval_timeout_s=3600)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


def script(request):
    if not request.tool_results:
        order = request.messages[-1].content
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="r1", name="refund", arguments={"order": order, "amount": 10})])
    return " | ".join(str(m.content) for m in request.tool_results)


class Desk(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("m", [ChatMessage(content=event.input["order"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": r.message.content}))


def make() -> Desk:
    agent = Desk()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:script"))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["refund"]))
    agent.add_resource("refund", ResourceType.TOOL, refund)
    return agent
'''

USER_SCRIPT = '''
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import ApprovalRequest
from desk import make

job = AgentsExecutionEnvironment.local().from_list(
    [{"key": "ann", "order": "o-1"}, {"key": "bob", "order": "o-2"}])
by_id = {}  # a reviewer's index by approval id alone


def answers():
    for out in list(job.result.outputs):
        if (req := ApprovalRequest.of(out)) is not None:
            by_id[req.approval_id] = req
    yield {**by_id[next(iter(by_id))].approve(), "key": "bob"}  # ann's answer, keyed bob
    for req in by_id.values():
        yield req.approve()


result = job.connect(answers()).apply(make()).run()
print(json.dumps({"ids": len(by_id),
                  "outputs": sorted([o["key"], o["answer"]] for o in result.outputs
                                    if "answer" in o),
                  "errors": [[e.key, e.error_type, e.message] for e in result.errors]}))
'''


def test_a_reviewers_index_by_id_alone_answers_each_key_from_a_users_module(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "desk.py").write_text(USER_MODULE)
    (tmp_path / "main.py").write_text(USER_SCRIPT)
    root = pathlib.Path(__file__).resolve().parents[1]
    python = root / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([str(python if python.exists() else sys.executable), "main.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ids"] == 2  # before: 1 (both keys' requests had one id; bob's overwrote ann's)
    assert got["outputs"] == [["ann", "refunded 10 on o-1"], ["bob", "refunded 10 on o-2"]]
    [(key, kind, message)] = got["errors"]
    assert (key, kind) == ("bob", "UnmatchedEventError")
    assert "an approval requested for another key than 'bob'" in message
