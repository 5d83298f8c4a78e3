"""An approval request carries its run's key as the key itself, whatever the key's type.

Before: ``ApprovalRequest.key`` was a plain ``Any`` field dumped by pydantic's defaults.
For a run keyed by a UUID, a date, a datetime or a ``Decimal`` the request said the key as
bare text (``"0000...-0007"``), so ``request.approve()`` sent the answer with a string
key: it was refused as an answer "for another key", and the held call timed out as not
approved, however often the reviewer approved it. For a tuple key the request read back
with ``ApprovalRequest.of`` had a list, so the docs' recipe (a set of ``(req.key,
req.approval_id)``) failed with ``TypeError: unhashable type: 'list'``, and ``req.key`` was
not equal to the run's key. Now the request dumps its key in the keys' JSON form (as
``ExternalEvent`` does: a tuple as an array, a tagged type as ``{tag: text}``) and reads
that form back as the key.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest
from support import waits_agents as wa

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import ApprovalRequest, ExternalEvent

pytestmark = pytest.mark.timeout(120)

KEYS = [("cust", 7), ("a", ("b", 1)), uuid.UUID(int=7), datetime.date(2026, 1, 2),
        datetime.datetime(2026, 1, 2, 3, 4, 5), decimal.Decimal("1.50")]


@pytest.mark.parametrize("key", KEYS, ids=lambda k: type(k).__name__)
def test_an_approval_of_a_run_keyed_by_any_key_type_is_released_by_approve(
        key: Any, tmp_path, monkeypatch):
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    job = AgentsExecutionEnvironment.local().from_list([{"key": key, "to": "x@ok.org"}])
    seen: list[ApprovalRequest] = []

    def answers():  # the how-to's recipe: requests answered by (key, id)
        answered = set()
        while True:
            new = [req for out in list(job.result.outputs)
                   if (req := ApprovalRequest.of(out)) is not None
                   and (req.key, req.approval_id) not in answered]
            if not new:
                return
            for req in new:
                seen.append(req)
                answered.add((req.key, req.approval_id))
                yield req.approve(by="ann")

    result = job.connect(answers()).apply(wa.make_mailer()).run()
    assert result.errors == []
    [req] = seen
    assert req.key == key and type(req.key) is type(key)
    [answer] = [o["answer"] for o in result.outputs if "answer" in o]
    assert answer == "sent to x@ok.org"  # approved, not timed out


@pytest.mark.parametrize("key", KEYS, ids=lambda k: type(k).__name__)
def test_a_request_read_back_from_json_has_the_key_and_its_answer_is_json(key: Any):
    # a reviewer's service reads the requests from a topic and writes the answers to one
    request = ApprovalRequest(approval_id="approval:r0/x/c0@0123456789abcdef", key=key,
                              tool="t", arguments={}, tool_call_id="c")
    back = ApprovalRequest.of(json.loads(json.dumps(request.model_dump(mode="json"))))
    assert back is not None and back.key == key and hash((back.key, back.approval_id))
    for answer in (back.approve(by="ann"), back.reject("no")):
        sent = json.loads(json.dumps(answer))  # JSON as it is: no default= needed
        assert ExternalEvent.key_of(sent) == key
        assert ExternalEvent.of(sent).correlation_id == request.approval_id


@pytest.mark.parametrize("key", [uuid.UUID(int=7), datetime.date(2026, 1, 2),
                                 datetime.datetime(2026, 1, 2, 3, 4, 5)],
                         ids=lambda k: type(k).__name__)
def test_an_event_keyed_by_a_tagged_keys_text_says_keys_are_typed(key: Any):
    # an answer a reviewer's own service built from the key as text (str(key)): it is for
    # the string key, which has no run; the error says how to send the key
    text = str(key) if not isinstance(key, (datetime.date, datetime.datetime)) \
        else key.isoformat()
    result = (AgentsExecutionEnvironment.local().from_list([{"key": key, "timeout_s": 60}])
              .connect([{"key": text, "correlation_id": f"go-{key}", "payload": 1}])
              .apply(wa.Approver()).run())
    [err] = [e for e in result.errors if e.action == "<outside>"]
    assert "is in flight" in err.message and "keys are typed" in err.message, err.message
    tag = {uuid.UUID: "uuid", datetime.date: "date", datetime.datetime: "datetime"}[type(key)]
    assert f"its JSON form {{'{tag}': '{text}'}}" in err.message, err.message


def test_a_users_own_module_keyed_by_uuids_gets_its_approvals_through(tmp_path):
    # as a user runs it: their agent module in their own directory, records keyed by UUID
    (tmp_path / "refunds.py").write_text(textwrap.dedent('''
        import uuid
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, ApprovalRequest, ChatMessage, InputEvent,
            MessageRole, OutputEvent, ResourceDescriptor, ResourceType, ToolCall, action, tool)
        from flink_agents_py.api import ChatModelSetup
        from flink_agents_py.integrations.chat_models import ScriptedChatModel

        @tool(requires_approval=True, approval_timeout_s=3600)
        def refund(order: str) -> str:
            """Refund an order."""
            return f"refunded {order}"

        def script(request):
            if not request.tool_results:
                return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[ToolCall(
                    id="c1", name="refund", arguments={"order": request.messages[-1].content})])
            return request.tool_results[-1].content

        class Refunds(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event, ctx):
                r = await ctx.chat("m", [ChatMessage(content=event.input["order"])])
                ctx.send_event(OutputEvent(output={"order": event.input["order"],
                                                   "answer": r.message.content}))

        agent = Refunds()
        agent.add_resource("refund", ResourceType.TOOL, refund)
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           ResourceDescriptor(ScriptedChatModel, function="refunds:script"))
        agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", tools=["refund"]))
        records = [{"key": uuid.UUID(int=n), "order": f"o{n}"} for n in (1, 2)]
        job = AgentsExecutionEnvironment.local().from_list(records)

        def answers():
            answered = set()
            while True:
                new = [q for o in list(job.result.outputs)
                       if (q := ApprovalRequest.of(o)) and (q.key, q.approval_id) not in answered]
                if not new:
                    return
                for q in new:
                    answered.add((q.key, q.approval_id))
                    yield q.approve(by="ann")

        result = job.connect(answers()).apply(agent).run()
        for o in result.outputs:
            if "answer" in o:
                print("OUT", o["order"], o["answer"])
        for e in result.errors:
            print("ERROR", e.message)
        '''))
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "refunds.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["OUT o1 refunded o1", "OUT o2 refunded o2"], \
        proc.stdout
