"""Flink Agents' memory events in its event log and listeners, and its run-begin event.

Ported from apache/flink-agents ``python/flink_agents/e2e_tests/e2e_tests_integration/
memory_event_logging_test.py`` (commit b2bb753698980a6ee625a035305e57dc5b3f7b64,
Apache-2.0), with its imports changed: an agent writing ``user.tier`` to short-term memory,
``agent-run.begin-event`` on, the file event log at ``VERBOSE``; the log must hold a
``_short_term_write_event`` (no action listens to it) and one ``_agent_run_begin_event`` per
input, each right after its ``_input_event`` line, the first with an empty snapshot and a
later one with the earlier run's write. Its memory events page (``docs/content/docs/
development/memory/memory_events.md``) says memory events reach the event log and the
listeners, listened to or not.

Before this port: ``EventType.AgentRunBeginEvent`` was an ``AttributeError`` and the option
changed nothing (no run-begin event was sent); a write event was sent only when an action of
the agent listened to it, so neither the event log nor a listener ever saw one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)

AGENT = '''
    # Ported from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
    # memory_event_logging_test.py (commit b2bb75369898, Apache-2.0): only the imports changed.
    from flink_agents_py.compat import Agent
    from flink_agents_py.compat import AgentExecutionOptions
    from flink_agents_py.compat import action
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import EventType
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from flink_agents_py.compat import RunnerContext


    class MemoryWritingAgent(Agent):
        """Agent whose input action writes short-term memory."""

        @action(EventType.InputEvent)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            """Write STM and send an output event."""
            input_data = InputEvent.from_event(event).input
            ctx.short_term_memory.set("user.tier", "gold")
            ctx.send_event(OutputEvent(output={"processed": input_data["review"]}))
'''

CHECKS = """
    def _read_ordered_records(event_log_dir):
        log_files = list(event_log_dir.glob("events-*.log"))
        assert len(log_files) == 1, (
            f"Expected one event log file in {event_log_dir}, found {len(log_files)}"
        )
        with log_files[0].open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]


    def check(event_log_dir, inputs):
        records = _read_ordered_records(event_log_dir)

        types = [r["eventType"] for r in records]
        assert EventType.AgentRunBeginEvent in types
        assert EventType.ShortTermWriteEvent in types

        write = next(r for r in records if r["eventType"] == EventType.ShortTermWriteEvent)
        assert write["event"]["attributes"]["value"]["user.tier"] == "gold"
        assert "key" in write["event"]["attributes"]

        begins = [r for r in records if r["eventType"] == EventType.AgentRunBeginEvent]
        assert len(begins) == len(inputs)
        assert begins[0]["event"]["attributes"]["value"] == {}
        assert begins[-1]["event"]["attributes"]["value"].get("user.tier") == "gold"

        for i, record in enumerate(records):
            if record["eventType"] == EventType.AgentRunBeginEvent:
                assert i > 0, "run-begin must not be the first log line"
                assert records[i - 1]["eventType"] == EventType.InputEvent, (
                    f"run-begin at line {i} should directly follow an _input_event line"
                )
        print("CHECKED", json.dumps(types))
"""

LOCAL = """
    import json
    import tempfile
    from pathlib import Path

    from memory_writing_agent import *  # noqa: F403
    {checks}

    event_log_dir = Path(tempfile.mkdtemp(dir=".")) / "event_log"
    inputs = [{{"id": 7, "review": f"input-{{i}}"}} for i in range(3)]
    agents_env = AgentsExecutionEnvironment.get_execution_environment()
    agents_env.get_config().set_str("baseLogDir", str(event_log_dir))
    agents_env.get_config().set(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT, True)
    agents_env.get_config().set_str("event-log.level", "VERBOSE")
    out = agents_env.from_list([{{"key": str(r["id"]), "value": r}} for r in inputs]).apply(
        MemoryWritingAgent()).to_list()
    agents_env.execute()
    print("OUT", json.dumps(out))
    check(event_log_dir, inputs)
"""


def run(tmp_path: Path, main: str, timeout: int = 100) -> subprocess.CompletedProcess[str]:
    """Write the agent module and ``main`` into ``tmp_path`` and run ``main`` there."""
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "memory_writing_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [str(PYTHON), "main.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_memory_event_logging_program_on_the_local_runner(tmp_path):
    proc = run(tmp_path, textwrap.dedent(LOCAL).format(checks=textwrap.dedent(CHECKS)))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    assert (
        'OUT [{"7": {"processed": "input-0"}}, {"7": {"processed": "input-1"}}, '
        '{"7": {"processed": "input-2"}}]' in lines
    )
    [checked] = [line for line in lines if line.startswith("CHECKED ")]
    assert (
        json.loads(checked[8:])
        == ["_input_event", "_agent_run_begin_event", "_output_event", "_short_term_write_event"]
        * 3
    )
    # the events routed to no action on purpose are not reported as dropped by mistake
    assert "trigger no action" not in proc.stderr


LISTENED = """
    import json
    from flink_agents_py.compat import (
        Agent, AgentConfigOptions, AgentExecutionOptions, AgentRunBeginEvent,
        AgentsExecutionEnvironment, Event, EventContext, EventListener, EventType, InputEvent,
        MemoryEvent, OutputEvent, RunnerContext, action)

    SEEN = []


    class Recorder(EventListener):
        def on_event_processed(self, context: EventContext, event: Event) -> None:
            if MemoryEvent.is_memory_type(event.type):
                SEEN.append([context.eventType, MemoryEvent.from_event(event).value])


    class Visits(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def visit(event: Event, ctx: RunnerContext) -> None:
            stm = ctx.short_term_memory
            stm.set("visits", (stm.get("visits") or 0) + 1)
            stm.set("user.tier", "gold")
            stm.set("blob", b"\\x00\\xff")
            ctx.sensory_memory.set("seen", True)
            ctx.send_event(OutputEvent(output=stm.get("visits")))

        @action(EventType.AgentRunBeginEvent)
        @staticmethod
        def begun(event: Event, ctx: RunnerContext) -> None:
            assert isinstance(event, AgentRunBeginEvent)
            ctx.send_event(OutputEvent(output=["begin", event.key, event.value]))


    def run(begin):
        env = AgentsExecutionEnvironment.get_execution_environment()
        env.get_config().set(AgentConfigOptions.EVENT_LISTENERS, [Recorder])
        if begin:
            env.get_config().set(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT, True)
        out = env.from_list([{"key": "u", "value": 1}, {"key": "u", "value": 2}]).apply(
            Visits()).to_list()
        env.execute()
        return out

    print("BEGIN", json.dumps(run(True)))
    print("SEEN", json.dumps(SEEN))
    SEEN.clear()
    print("PLAIN", json.dumps(run(False)))
"""


def test_listeners_see_memory_events_and_an_action_takes_the_run_begin_event(tmp_path):
    proc = run(tmp_path, LISTENED)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    out = {
        line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
        for line in proc.stdout.splitlines()
        if line.split(" ", 1)[0] in {"BEGIN", "SEEN", "PLAIN"}
    }
    # the snapshot is taken before the run's actions: empty, then the first run's values
    # (dotted paths; bytes as base64 text, as Flink Agents' JSON writes a byte[])
    begun = [o["u"] for o in out["BEGIN"] if isinstance(o["u"], list)]
    assert begun == [
        ["begin", "u", {}],
        ["begin", "u", {"visits": 1, "user.tier": "gold", "blob": "AP8="}],
    ]
    assert [o["u"] for o in out["BEGIN"] if not isinstance(o["u"], list)] == [1, 2]
    assert ["_short_term_write_event", {"visits": 1, "user.tier": "gold", "blob": "AP8="}] in out[
        "SEEN"
    ]
    assert ["_sensory_write_event", {"seen": True}] in out["SEEN"]
    # the option off (its default): no run-begin event
    assert out["PLAIN"] == [{"u": 1}, {"u": 2}]
