"""The how-to pages' local-runner examples run as a user who copies them runs them.

Each case assembles one program from a page's Python blocks (in page order, as the page
says to put them together: later blocks use the agent of earlier ones), with at most a few
lines around them standing for what the page leaves to the user (its records, its agent),
writes it into a directory outside the repository and runs it with the venv's interpreter.
The examples assert what the pages say they give; a case checks the printed lines the page
shows too. Pages tested on their own: the README (test_docs.py), the tutorial
(test_docs_tutorial.py), the ReAct page (test_docs_react.py), the approval page
(test_docs_approval.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(180)


def blocks(page: str) -> list[str]:
    """The ```python blocks of ``docs/<page>``, in order."""
    return re.findall(r"^```python[^\n]*\n(.*?)^```$", (DOCS / page).read_text(), re.S | re.M)


def run(tmp_path: Path, *parts: str, timeout_s: float = 150) -> subprocess.CompletedProcess[str]:
    """Run ``parts`` (page blocks, or dedented glue) as one script in ``tmp_path``."""
    assert ROOT not in tmp_path.resolve().parents, "the program must be outside the repository"
    (tmp_path / "example.py").write_text("\n".join(textwrap.dedent(p) for p in parts))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(PYTHON), "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    return proc


def test_testing_page_blocks_run_in_order(tmp_path):
    # the agent, model_from_turns, model_from_function, rules, budgets, snapshot and restore
    assert len(blocks("how-to/testing.md")) == 6
    run(tmp_path, *blocks("how-to/testing.md"))


def test_replay_safety_page_checks_the_testing_pages_agent(tmp_path):
    # run as a script, the agent is in __main__: the page says the other process is skipped
    page = blocks("how-to/replay-safety.md")
    check, journal, upgrade = page[0], page[1], page[3]
    assert "check_replay_safety(shop(fresh_model())" in check
    assert "check_upgrade_safety" in upgrade
    proc = run(tmp_path, *blocks("how-to/testing.md"), check, journal, upgrade)
    assert "result                      ok" in proc.stdout
    assert "in another process          skipped:" in proc.stdout


def test_override_resources_page_blocks_run_in_order(tmp_path):
    page = blocks("how-to/override-resources.md")
    assert len(page) == 4
    proc = run(tmp_path, *page[:3], "print(outputs)", *page[3:], """
        print(AgentsExecutionEnvironment.local()
              .from_list([{"key": "a", "question": "q"}]).apply(TestShop()).collect())
    """)
    assert proc.stdout.splitlines() == ["['ok']", "['ok']"]


def test_debugging_page_prints_the_traceback_it_shows(tmp_path):
    page = (DOCS / "how-to" / "debugging.md").read_text()
    shown = re.search(r"^prints\n\n```\n(.*?)^```$", page, re.S | re.M).group(1).splitlines()
    proc = run(tmp_path, blocks("how-to/debugging.md")[0])
    printed = proc.stdout.splitlines()
    assert len(printed) == len(shown), proc.stdout
    for got, want in zip(printed, shown, strict=True):
        if want.lstrip().startswith('File "'):  # the user's own path
            want = re.sub(r'"[^"]+"', f'"{tmp_path.resolve() / "example.py"}"', want)
        assert got == want


def test_flow_control_page_tests_against_the_throttling_provider(tmp_path):
    # the page's agent and records: a chat per record, through the setup "smart" on "gpt"
    setup = """
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                         OutputEvent, ResourceDescriptor, ResourceType, action)
        from flink_agents_py.integrations.chat_models import OpenAIChatModel

        class Asker(Agent):
            @action(InputEvent)
            @staticmethod
            async def ask(event, ctx):
                answer = await ctx.chat("smart", [ChatMessage(content=str(event.input["n"]))])
                ctx.send_event(OutputEvent(output=answer.message.content))

        agent = Asker()
        agent.add_resource("smart", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="gpt", model="gpt-4o"))
        env = AgentsExecutionEnvironment.local()
        records = [{"key": f"k{n % 10}", "n": n} for n in range(60)]
    """
    throttling = [b for b in blocks("how-to/flow-control.md") if "ThrottlingProvider(" in b]
    assert len(throttling) == 1
    proc = run(tmp_path, setup, throttling[0])
    assert re.fullmatch(r"\d+ of \d+ requests answered 429\n", proc.stdout), proc.stdout


@pytest.mark.flink
@pytest.mark.timeout(400)
def test_run_on_flink_table_example_prints_the_row_it_shows(tmp_path):
    pytest.importorskip("pyflink")
    [table] = [b for b in blocks("how-to/run-on-flink.md") if "from_table(" in b]
    shown = [ln[2:] for ln in table.splitlines() if ln.startswith("# <Row")]
    proc = run(tmp_path, table, timeout_s=360)
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("<Row")] == shown


def test_resources_page_mcp_server_and_its_tool_run_as_copied(tmp_path):
    # the page's server file and its declaration; a scripted model calls the server's tool.
    # Before, the page named a server it never showed and started it with a bare "python"
    server, declare = [b for b in blocks("concepts/resources.md") if "MCPServer" in b
                       or "McpServer" in b]
    (tmp_path / "calc_server.py").write_text(textwrap.dedent(server))
    agent = """
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, ChatMessage, InputEvent, OutputEvent, action
        from flink_agents_py.testing import model_from_turns, tool_call

        class Calc(Agent):
            @action(InputEvent)
            @staticmethod
            async def ask(event, ctx):
                reply = await ctx.chat("model", [ChatMessage(content=event.input["q"])])
                ctx.send_event(OutputEvent(output=reply.message.content))

        agent = Calc()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           model_from_turns([tool_call("add", a=2, b=3), "five"]))
    """
    pytest.importorskip("mcp")
    proc = run(tmp_path, "from flink_agents_py.api import ResourceType", agent, declare, """
        result = AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "2+3?"}]) \\
            .apply(agent).run()
        print(result.outputs, result.errors, result.metrics["tool_calls"])
    """, timeout_s=120)
    assert proc.stdout.strip() == "['five'] [] {'add': 1}", proc.stdout + proc.stderr


def test_durability_page_reconciler_example_is_replay_safe(tmp_path):
    # the page had no example of a durable call with a reconciler (what it takes, when it
    # runs) nor of checking one: its block runs as copied, and the check passes
    [block] = blocks("concepts/durability.md")
    proc = run(tmp_path, block, """
        looked_up = []
        page_find_charge = find_charge

        def find_charge(order):  # the reconciler's lambda finds this one: it says it ran
            looked_up.append(order)
            return page_find_charge(order)

        check_replay_safety(Payer(), [{"key": "a", "order": "o1", "amount": 12.5}],
                            other_process=False).assert_ok()
        print("looked up", looked_up)
    """)
    assert re.search(r"^  result +ok$", proc.stdout, re.M), proc.stdout
    assert "looked up ['o1']" in proc.stdout  # at the point where the charge was in flight


@pytest.mark.flink
@pytest.mark.timeout(400)
def test_input_errors_page_flink_example_shows_bad_lines_and_failed_records(tmp_path):
    # before, the page's Flink example read the file and never took the line errors: a
    # bad line vanished; now it collects them with the outputs and the failed records
    pytest.importorskip("pyflink")
    (tmp_path / "reviews.jsonl").write_text(
        '{"key": "a", "text": "good"}\nnot json\n{"key": "b", "txt": "typo"}\n')
    agent = """
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, action

        class MyAgent(Agent):
            @action(InputEvent)
            @staticmethod
            def on_input(event, ctx):
                ctx.send_event(OutputEvent(output=event.input["text"]))
    """
    proc = run(tmp_path, agent, blocks("how-to/input-errors.md")[1], timeout_s=360)
    printed = proc.stdout.splitlines()
    assert "good" in printed, proc.stdout
    assert any("'kind': 'error'" in line and "'line': 1" in line and "not JSON" in line
               for line in printed), proc.stdout
    assert any("'key': 'b'" in line and "KeyError" in line for line in printed), proc.stdout


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_run_on_flink_upgrade_example_reads_its_folder_on(tmp_path):
    # before, the page said a job to stop and upgrade reads "a FileSource with
    # monitor_continuously" and showed none; read_lines_file read one file to its end
    pytest.importorskip("pyflink")
    page = blocks("how-to/run-on-flink.md")
    [main] = [b for b in page if "monitor_interval_s=" in b]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.jsonl").write_text('{"key": "a", "text": "hi"}\nnot json\n')
    (tmp_path / "my_agents.py").write_text(page[0])
    (tmp_path / "main.py").write_text(main.replace("/data/inbox", str(inbox)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([str(PYTHON), "-u", "main.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line.rstrip("\n"))
            if "'text': 'HI'" in line:  # the first file's record: put a second file there
                (inbox / ".b.tmp").write_text('{"key": "b", "text": "later"}\n')
                (inbox / ".b.tmp").rename(inbox / "b.jsonl")
            if "'text': 'LATER'" in line:
                break
    finally:
        proc.kill()
        proc.wait()
    out = "\n".join(seen)
    assert "OUT> {'key': 'a', 'text': 'HI'}" in out, out[-3000:]
    assert "ERR> {'kind': 'error', 'line': 1" in out, out[-3000:]
    assert "OUT> {'key': 'b', 'text': 'LATER'}" in out, out[-3000:]


def test_limits_page_fan_out_runs_with_the_local_per_key_keyword_it_names(tmp_path):
    # the page's fan-out agent, on the local runner with the keywords the page names for it
    fan_out = [b for b in blocks("how-to/limits.md") if "class FanOut" in b]
    assert len(fan_out) == 1
    page = (DOCS / "how-to/limits.md").read_text()
    local_call = "AgentsExecutionEnvironment.local(max_in_flight=8, max_in_flight_per_key=2)"
    assert local_call in page
    glue = f"""
        from flink_agents_py import AgentsExecutionEnvironment
        env = {local_call}
        print(env.from_list([{{"key": "hot"}}, {{"key": "cold"}}]).apply(FanOut()).collect())
    """
    proc = run(tmp_path, fan_out[0], glue)
    assert proc.stdout.strip() == str([sum(i * i for i in range(64))] * 2)


def test_replay_safety_page_side_by_side_upgrade_names_the_changed_default(tmp_path):
    # Found by a newcomer: v2 written as a copy of v1's module made check_upgrade_safety
    # report a divergence by name at every call (a deploy keeps the module's name), hiding
    # the changed default; the page now shows how to check old and new code side by side.
    page = {b.splitlines()[0]: b for b in blocks("how-to/replay-safety.md")}
    v1 = page["# weather_v1.py, the code in production"]
    v2 = page["# weather_v2.py, the code to deploy: only the default unit changed"]
    (tmp_path / "weather_v1.py").write_text(v1)
    (tmp_path / "weather_v2.py").write_text(v2)
    [check] = [b for b in page.values() if "check_upgrade_safety(weather_v1" in b]
    proc = run(tmp_path, check, "print(report)")
    assert proc.stdout.startswith("False\n"), proc.stdout
    assert "the default value of its parameter 'unit' changed" in proc.stdout
    assert "divergences                 0" in proc.stdout


def test_input_errors_page_says_truly_that_the_trace_does_not_show_a_record_with_no_json_form(
    tmp_path,
):
    # Found by a newcomer: the trace said "anomalies: none" for a run with two error rows
    # (records with no JSON form, never run); the page now says where to read them.
    page = (DOCS / "how-to/input-errors.md").read_text()
    assert "`flink-agents-py trace` neither shows nor counts it" in page
    proc = run(tmp_path, """
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, action

        class Echo(Agent):
            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                ctx.send_event(OutputEvent(output=event.input["n"]))

        records = [{"key": "a", "n": 1}, {"key": "b", "n": {1, 2}}]
        result = AgentsExecutionEnvironment.local(event_log="events.jsonl").from_list(
            records).apply(Echo()).run()
        print(result.outputs, [e.error_type for e in result.errors])
    """)
    assert proc.stdout.strip() == "[1] ['SerializationError']"
    trace = subprocess.run([str(PYTHON), "-m", "flink_agents_py", "trace", "events.jsonl"],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=60)
    assert "runs: 1 shown of 1" in trace.stdout and "anomalies: none" in trace.stdout
    assert "key b" not in trace.stdout and '"b"' not in trace.stdout
