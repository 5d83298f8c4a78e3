"""A chat started by a ``ChatRequestEvent`` keeps its setup's digest, as ``ctx.chat`` does.

The built-in chat action's model calls recorded the name of the setup and the messages, not
the setup: a run restored after a deploy that changed the setup's options, its model, its
``prompt=`` or what it offers the model (its tools, their descriptions) was handed the old
setup's recorded answer without a word (a journaled answer, or one recorded before another
model call of the same action). Each model call of a chat action now keeps the digest of
its setup's configuration: a change is the ``arguments changed`` warning naming the setup,
a divergence in strict mode, a finding of ``check_upgrade_safety``; records written before
(no digest) are not compared on it. A ``ctx.chat``'s own model calls are left to its call.
"""

from __future__ import annotations

import itertools
import json
import logging
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.harness import KEY, new_core, resume, run_to_end, snapshot_of

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    FunctionTool,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    qualified_name,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState, SqliteJournal
from flink_agents_py.runtime.recorder._state import CallKind
from flink_agents_py.testing import check_upgrade_safety, model_from_function, tool_calls

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)

SAID = "the configuration of the chat model setup it asks changed"


def stock(item: str) -> dict[str, Any]:
    """Units in stock.

    Args:
        item: the item.
    """
    return {"item": item, "units": 3}


def price(item: str) -> float:
    """The price of an item.

    Args:
        item: the item.
    """
    return 2.5


def _model(request: Any) -> Any:
    if not request.tool_results:
        return tool_calls(ToolCall(name="stock", arguments={"item": "tea"}))
    return f"in stock: {request.tool_results[0].content}"


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content="tea?")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        text = event.response.message.content if event.response else event.error
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": text}))


class StrictShop(Shop):
    replay = "strict"


class ChatShop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="tea?")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": reply.message.content}))


def shop(
    cls: type[Agent] = Shop,
    tools: tuple[str, ...] = ("stock",),
    tool_doc: str | None = None,
    **setup: Any,
) -> Agent:
    agent = cls()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_model))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=list(tools), **setup),
    )
    tool = (
        stock
        if tool_doc is None
        else FunctionTool(func=qualified_name(stock), description=tool_doc)
    )
    agent.add_resource("stock", ResourceType.TOOL, tool)
    agent.add_resource("price", ResourceType.TOOL, price)
    return agent


RECORDS = [{"key": "a"}, {"key": "b"}]


@pytest.fixture
def journals(tmp_path):
    """A factory of new, empty journals (a chat's model answer replays from its journal)."""
    n = itertools.count()
    return lambda: SqliteJournal(str(tmp_path / f"j{next(n)}.db"))


CHANGES = [
    {"options": {"temperature": 0.9}},
    {"model": "bigger"},
    {"prompt": "Answer in French."},
    {"tools": ("stock", "price")},
    {"tool_doc": "Units in stock, by warehouse."},
]
IDS = ["temperature", "model", "prompt", "tools", "tool_description"]


@pytest.mark.parametrize("change", CHANGES, ids=IDS)
def test_a_chat_events_changed_setup_is_a_finding(change, journals):
    report = check_upgrade_safety(
        shop(), shop(**change), RECORDS, journal_factory=journals, other_process=False
    )
    assert not report.ok
    found = [f for f in report.findings if SAID in f]
    assert found and all(
        "_chat_model_action" in f and ("(model)" in f or "model model" in f) for f in found
    ), report.findings


def test_the_same_setup_is_safe(journals):
    check_upgrade_safety(
        shop(), shop(), RECORDS, journal_factory=journals, other_process=False
    ).assert_ok()


@pytest.mark.parametrize("change", CHANGES[:2], ids=IDS[:2])
def test_strict_replay_diverges_naming_the_setup(change, journals):
    report = check_upgrade_safety(
        shop(StrictShop),
        shop(StrictShop, **change),
        RECORDS,
        journal_factory=journals,
        other_process=False,
    )
    divergences = [d for p in report.points for d in p.divergences]
    assert any(SAID in d and "strict replay" in d for d in divergences), report.findings


def test_a_structured_answer_asked_again_replays_its_first_answer_with_the_check():
    # no journal: the first answer is recorded in keyed state while the action asks again
    def answers(request: Any) -> str:
        return "not json" if len(request.messages) == 1 else '{"units": 3}'

    def build(**setup: Any) -> Agent:
        class Structured(Shop):
            @action(InputEvent)
            @staticmethod
            def ask(event: InputEvent, ctx: RunnerContext) -> None:
                ctx.send_event(
                    ChatRequestEvent(
                        model="model",
                        messages=[ChatMessage(content="tea?")],
                        output_schema={"type": "object", "required": ["units"]},
                    )
                )

        agent = Structured()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answers))
        agent.add_resource(
            "model",
            ResourceType.CHAT_MODEL,
            ResourceDescriptor(ChatModelSetup, connection="conn", **setup),
        )
        return agent

    report = check_upgrade_safety(
        build(), build(options={"temperature": 0.1}), RECORDS, other_process=False
    )
    assert any(SAID in f for f in report.findings), report.findings
    check_upgrade_safety(build(), build(), RECORDS, other_process=False).assert_ok()


def test_a_ctx_chat_is_flagged_once_by_its_own_call(journals):
    # its model calls run in the chat's invocation: the chat's call says it, they do not
    report = check_upgrade_safety(
        shop(ChatShop),
        shop(ChatShop, model="bigger"),
        RECORDS,
        journal_factory=journals,
        other_process=False,
    )
    found = [f for f in report.findings if SAID in f]
    assert found and not any("_chat_model_action/c" in f for f in found), report.findings


def _as_written_before(state: InMemoryKeyState, journal_path: pathlib.Path) -> None:
    """Drop the setup digests of model calls, as the code before them wrote their records."""
    import sqlite3

    assert state.run is not None
    for rec in state.run.inflight.values():
        for call in rec.calls.values():
            if call.kind is CallKind.MODEL:
                call.shape = None
    with sqlite3.connect(journal_path) as db:
        for call_id, text in db.execute("select call_id, record from outcomes").fetchall():
            data = json.loads(text)
            if data.get("kind") == CallKind.MODEL.value:
                data["shape"] = None
                db.execute(
                    "update outcomes set record = ? where call_id = ?", (json.dumps(data), call_id)
                )


@pytest.mark.parametrize("before", [False, True], ids=["new_records", "records_before"])
def test_records_written_before_the_digest_replay_quietly(before, tmp_path, caplog):
    """A model answer journaled before a restore: warned about unless its record has no digest."""
    path = tmp_path / "journal.db"
    core = new_core(AgentPlan.from_agent(shop()), journal=SqliteJournal(str(path)))
    state = InMemoryKeyState()
    core.on_input(KEY, {"key": KEY}, state)  # the model call has started: the checkpoint
    point = snapshot_of(state, "json")
    run_to_end(core, state)  # its answer is journaled
    core.close()
    if before:
        _as_written_before(point, path)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, new = resume(
            AgentPlan.from_agent(shop(options={"temperature": 0.9})),
            point,
            journal=SqliteJournal(str(path)),
        )
    assert errors == [] and len(outputs) == 1, (outputs, errors)
    assert new.counters["calls_replayed"] >= 1
    warned = [r.getMessage() for r in caplog.records if SAID in r.getMessage()]
    assert bool(warned) is not before, warned


def test_a_users_program_from_their_own_directory(tmp_path):
    (tmp_path / "desk.py").write_text(
        textwrap.dedent("""
        from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatRequestEvent,
            ChatResponseEvent, InputEvent, OutputEvent, ResourceDescriptor, ResourceType,
            action)
        from flink_agents_py.testing import model_from_function

        class Desk(Agent):
            @action(InputEvent)
            @staticmethod
            def ask(event, ctx):
                ctx.send_event(ChatRequestEvent(model="llm",
                                                messages=[ChatMessage(content="hi")]))

            @action(ChatResponseEvent)
            @staticmethod
            def answer(event, ctx):
                ctx.send_event(OutputEvent(output=event.response.message.content))

        def build(temperature):
            desk = Desk()
            desk.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                              model_from_function(lambda request: "hello"))
            desk.add_resource("llm", ResourceType.CHAT_MODEL, ResourceDescriptor(
                ChatModelSetup, connection="conn", options={"temperature": temperature}))
            return desk
    """)
    )
    (tmp_path / "check.py").write_text(
        textwrap.dedent("""
        import itertools, json
        import desk
        from flink_agents_py.runtime import SqliteJournal
        from flink_agents_py.testing import check_upgrade_safety

        n = itertools.count()
        journals = lambda: SqliteJournal(f"j{next(n)}.db")
        out = {}
        for t in (0.2, 0.7):
            report = check_upgrade_safety(desk.build(0.2), desk.build(t), [{"key": "k"}],
                                          journal_factory=journals, other_process=False)
            out[str(t)] = {"ok": report.ok, "findings": report.findings}
        print(json.dumps(out))
    """)
    )
    proc = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["0.2"]["ok"], out
    assert not out["0.7"]["ok"] and any(
        SAID in f and "(llm)" in f for f in out["0.7"]["findings"]
    ), out


# -- a fallback's answer: the fallback setups' configurations are in the digest too --------
def _down(request: Any) -> str:
    raise ConnectionError("the primary model is down")


def _backup(request: Any) -> str:
    return "from the backup"


def with_backup(cls: type[Agent] = Shop, **backup: Any) -> Agent:
    agent = cls()
    agent.add_resource("down", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_down))
    agent.add_resource("up", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_backup))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="down", fallbacks=["backup"]),
    )
    agent.add_resource(
        "backup",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="up", **backup),
    )
    return agent


@pytest.mark.parametrize("cls", [Shop, ChatShop], ids=["chat_event", "ctx_chat"])
def test_a_changed_fallback_that_answered_is_a_finding(cls, journals):
    report = check_upgrade_safety(
        with_backup(cls),
        with_backup(cls, options={"temperature": 0.9}),
        RECORDS,
        journal_factory=journals,
        other_process=False,
    )
    assert any(SAID in f and "fallbacks" in f for f in report.findings), report.findings
    check_upgrade_safety(
        with_backup(cls), with_backup(cls), RECORDS, journal_factory=journals, other_process=False
    ).assert_ok()


def test_a_record_written_before_the_fallbacks_digest_is_not_compared():
    from flink_agents_py.runtime.recorder._call_changes import changed_defaults

    assert changed_defaults("$setup=aaaaaaaa", "$setup=aaaaaaaa,$fallbacks=bbbbbbbb") == []
    assert changed_defaults(
        "$setup=aaaaaaaa,$fallbacks=bbbbbbbb", "$setup=aaaaaaaa,$fallbacks=cccccccc"
    ) == [("$fallbacks", "configured")]
