"""An approval answer that arrives before its call is held is checked like any other.

An answer may reach the run before the tool call it approves is held (the request was out
before a restore made the run go through it again; a reviewer's tool answers ahead): it is
held for the wait as an early event and taken when the wait opens. Before, it was taken as
it came: ``"yes"`` or ``{"approved": "true"}`` was read as a rejection, silently, where the
same answer after the wait opened goes to the error output and the call stays held.
"""

from __future__ import annotations

import pathlib

import pytest
from support import waits_agents as wa
from support.crash import read_counts

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ApprovalRequest,
    ChatMessage,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)

pytestmark = pytest.mark.timeout(120)


class GoThenMail(Agent):
    """Waits for ``go-<key>``, then asks its model to email ``record["to"]`` (held)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.wait_for(f"go-{ctx.key}", timeout_s=600)
        response = await ctx.chat("m", [ChatMessage(content=event.input["to"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": response.message.content}))


def go_then_mail() -> Agent:
    agent = GoThenMail()
    for kind, resources in wa.make_mailer(timeout_s=600).resources.items():
        for name, descriptor in resources.items():
            agent.add_resource(name, kind, descriptor)
    return agent


def _approval_id() -> str:
    """The approval id the held call of key ``k`` gets (ids are made in program order)."""
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "to": "k@x.org"}])
              .connect([{"key": "k", "correlation_id": "go-k", "payload": 1}])
              .apply(go_then_mail()).run())
    [req] = [r for o in result.outputs if (r := ApprovalRequest.of(o))]
    return req.approval_id


@pytest.mark.parametrize("payload", ["yes", {"approved": "true"}, None])
def test_an_early_answer_that_cannot_be_read_is_refused_and_the_call_stays_held(
        tmp_path: pathlib.Path, monkeypatch, payload):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    approval_id = _approval_id()
    answer = {"key": "k", "correlation_id": approval_id, "payload": payload}
    events = [answer,  # the run waits for go-k: held for a wait to open
              {"key": "k", "correlation_id": "go-k", "payload": 1},
              ApprovalRequest(approval_id=approval_id, key="k", tool="send_email",
                              arguments={}, tool_call_id="t1").approve(by="ann")]
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "to": "k@x.org"}])
              .connect(events).apply(go_then_mail()).run())
    [error] = result.errors
    assert (error.key, error.error_type, error.execution_id) == (
        "k", "ExternalEventError", "outside event 0")
    assert f"the answer to approval {approval_id!r} cannot be read" in error.message
    assert "the call stays held" in error.message and error.input == answer
    answers = [o["answer"] for o in result.outputs if "answer" in o]
    assert answers == ["sent to k@x.org"]  # before: "... rejected by its reviewer ..."
    assert read_counts(str(tmp_path)) == {("email", "k@x.org"): 1}


def test_an_early_answer_that_can_be_read_is_taken_as_the_wait_opens(
        tmp_path: pathlib.Path, monkeypatch):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    approval_id = _approval_id()
    events = [{"key": "k", "correlation_id": approval_id, "payload": {"approved": False,
                                                                      "reason": "no"}},
              {"key": "k", "correlation_id": "go-k", "payload": 1}]
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "to": "k@x.org"}])
              .connect(events).apply(go_then_mail()).run())
    assert result.errors == []
    [answer] = [o["answer"] for o in result.outputs if "answer" in o]
    assert "rejected by its reviewer: no" in answer
    assert read_counts(str(tmp_path)) == {}


def test_an_answer_s_details_cannot_decide_it_in_the_method_s_place():
    req = ApprovalRequest(approval_id="a1", key="k", tool="send_email", arguments={},
                          tool_call_id="t1")
    with pytest.raises(TypeError, match=r"reject\(\) decides 'approved' itself"):
        req.reject("spam", approved=True)  # before: an answer approving the call
    with pytest.raises(TypeError, match=r"approve\(\) decides 'approved' itself"):
        req.approve(approved=False)
    assert req.reject("spam", by="ann")["payload"] == {"approved": False, "reason": "spam",
                                                       "by": "ann"}
    assert req.approve(by="ann")["payload"] == {"approved": True, "by": "ann"}
