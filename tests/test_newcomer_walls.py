"""Walls a newcomer who knows Apache Flink Agents' Python API met in their first two hours.

Each test runs a user's own program from a temporary directory outside the repository, with
the venv's interpreter and the repository on ``PYTHONPATH`` (as a user of a source checkout
runs it), and checks what the user sees.
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
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PY if VENV_PY.exists() else Path(sys.executable))


def run_user_program(
    tmp_path: Path, code: str, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as ``main.py`` in ``tmp_path`` (outside the repository)."""
    assert ROOT not in tmp_path.resolve().parents, "the program must be outside the repository"
    (tmp_path / "main.py").write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout_s, check=False)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


# -- apache-beam's "Failed to import GCSFileSystem" in a Flink Agents program ----------------

def test_importing_compat_quiets_beams_optional_filesystems(tmp_path):
    # what beam logs when PyFlink starts it; the filter must be in place by then, and a
    # Flink Agents program imports flink_agents_py.compat, never flink_agents_py.flink
    proc = run_user_program(tmp_path, """
        import logging
        import sys
        from flink_agents_py.compat import Agent  # noqa: F401
        assert "flink_agents_py.flink" not in sys.modules
        beam = logging.getLogger("apache_beam.io.filesystems")
        beam.warning("Failed to import GCSFileSystem; loading of this filesystem will be "
                     "skipped. Error details: cannot import name 'storage' from 'google.cloud'")
        beam.warning("Failed to import LocalFileSystem")  # a broken install still shows
        print("done")
    """)
    assert "GCSFileSystem" not in proc.stderr
    assert "Failed to import LocalFileSystem" in proc.stderr


@pytest.mark.flink
def test_a_flink_agents_program_building_a_plain_environment_prints_no_beam_warning(tmp_path):
    pytest.importorskip("pyflink")
    # Flink Agents' quickstarts: pyflink and the agents' names imported, then a plain
    # environment (which starts apache-beam in this process); no job is run
    proc = run_user_program(tmp_path, """
        import sys
        from pyflink.datastream import StreamExecutionEnvironment
        from flink_agents_py.compat import AgentsExecutionEnvironment

        env = StreamExecutionEnvironment.get_execution_environment()
        assert "apache_beam.io.filesystems" in sys.modules  # beam has started
        AgentsExecutionEnvironment.get_execution_environment(env)
        print("done")
    """)
    assert proc.stdout.strip().endswith("done")
    assert "Failed to import" not in proc.stderr and "GCSFileSystem" not in proc.stderr


# -- Flink Agents configuration: a typo in a key, a value an option cannot take -------------

AGENT = """
    from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, InputEvent,
                                        OutputEvent, RunnerContext, action)

    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def echo(event, ctx: RunnerContext):
            ctx.send_event(OutputEvent(output={"in": event.input,
                                               "mine": ctx.config.get("num-async-thread")}))
"""


def test_a_config_key_one_letter_off_an_option_is_named_with_the_option(tmp_path):
    proc = run_user_program(tmp_path, AGENT + """
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set_int("num-async-thread", 4)   # the option is num-async-threads
    env.get_config().set_str("my-app.region", "eu")   # a program's own key: no word
    out = env.from_list([{"key": "k", "value": 1}]).apply(Echo()).to_list()
    env.execute()
    print(out)
    """)
    [warning] = [line for line in proc.stderr.splitlines() if "num-async-thread" in line]
    assert "did you mean 'num-async-threads'?" in warning
    assert "my-app.region" not in proc.stderr
    # still the program's own key, as Flink Agents keeps it
    assert proc.stdout.strip().splitlines()[-1] == "[{'k': {'in': 1, 'mine': 4}}]"


def test_a_value_an_option_cannot_take_is_refused_naming_the_key():
    from flink_agents_py.api import UsageError
    from flink_agents_py.compat import AgentExecutionOptions, AgentsExecutionEnvironment

    config = AgentsExecutionEnvironment.get_execution_environment().get_config()
    # before: taken, then every agent applied failed its plan with "chat_model resource
    # 'x': error_policy: Input should be 'fail', 'retry' or 'ignore'", a field never written
    with pytest.raises(UsageError, match=r"'error-handling-strategy': 'rety' is not one of "
                                         r"retry, fail, ignore"):
        config.set_str("error-handling-strategy", "rety")
    with pytest.raises(UsageError, match=r"'max-retries': 'three' is not an int"):
        config.set_str(AgentExecutionOptions.MAX_RETRIES.key, "three")
    with pytest.raises(UsageError, match=r"'num-async-threads': 'many' is not an int"):
        config.set(AgentExecutionOptions.NUM_ASYNC_THREADS, "many")
    # what Flink Agents' programs write is taken
    config.set_str("error-handling-strategy", "RETRY").set_int("max-retries", 5)
    config.set(AgentExecutionOptions.NUM_ASYNC_THREADS, "8")
    assert config.chat_defaults() == {"error_policy": "retry", "retry_max_attempts": 6}


# -- the sub-agents page's async (pub/sub) setup, as a user copies it ------------------------

def test_the_async_subagent_example_of_the_page_runs_in_a_users_module(tmp_path):
    # before, its methods were '...' and nothing said how to make a RunStatus: a newcomer's
    # guess (RunStatus(state="SUCCEEDED")) failed each call with a pydantic ValidationError
    page = (ROOT / "docs" / "concepts" / "subagents.md").read_text()
    [block] = [b for b in re.findall(r"^```python\n(.*?)^```$", page, re.S | re.M)
               if "class RemoteRunSetup(AsyncSubagentSetup)" in b]
    (tmp_path / "my_app").mkdir()
    (tmp_path / "my_app" / "__init__.py").write_text("")
    (tmp_path / "my_app" / "remote.py").write_text(block)
    proc = run_user_program(tmp_path, """
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, InputEvent, OutputEvent, ResourceDescriptor,
                                         ResourceType, action)

        class Caller(Agent):
            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                result = await (await ctx.submit_subagent("remote_run", {"text": event.input["t"]}))
                ctx.send_event(OutputEvent(output={"ok": result.success, "value": result.result,
                                                   "error": result.error}))

        agent = Caller()
        agent.add_resource("remote_run", ResourceType.AGENT, ResourceDescriptor(
            clazz="my_app.remote.RemoteRunSetup", endpoint="http://runs:8080",
            description="Summarises a text remotely.", input_schema='{"type":"object"}',
            status_poll_interval_millis=20))
        result = AgentsExecutionEnvironment.local().from_list([{"key": "a", "t": "hi"}]).apply(
            agent).run()
        from my_app.remote import RUNS
        print(result.errors, result.outputs, [run["polls"] for run in RUNS.values()])
    """)
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "[] [{'ok': True, 'value': {'summary': \"{'text': 'hi'}\"}, 'error': None}] [2]"


# -- a durable call whose result has no JSON form ------------------------------------------

def test_a_durable_results_refusal_names_the_function_and_what_to_return(tmp_path):
    # before: "result of durable call r0/fetch/c0: Receipt at $ has no JSON form": neither
    # which function returned it nor what it may return instead
    (tmp_path / "shop.py").write_text(textwrap.dedent("""
        class Receipt:
            def __init__(self, total):
                self.total = total

        def charge(amount):
            return Receipt(amount)
    """))
    proc = run_user_program(tmp_path, """
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
        from shop import charge

        class Till(Agent):
            @action(InputEvent)
            @staticmethod
            def fetch(event, ctx):
                receipt = ctx.durable_execute(charge, 3)
                ctx.send_event(OutputEvent(output=receipt.total))

        result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
            Till()).run()
        [error] = result.errors
        print(error.error_type, "|", error.message)
    """)
    kind, message = proc.stdout.strip().splitlines()[-1].split(" | ")
    assert kind == "SerializationError"
    assert message.startswith("result of durable call r0/fetch/c0 (shop:charge): Receipt at $ "
                              "has no JSON form; a durable call's result is recorded as JSON: ")
    assert "pydantic model defined at module level" in message


# -- a typo in a ScriptedChatModel's function name ------------------------------------------

def test_a_scripted_models_misspelt_function_stops_the_run_naming_the_connection(tmp_path):
    # before: every record's chat failed, each with "ResourceError: 'shop' has no attribute
    # path 'answr'", naming neither the connection nor its field
    (tmp_path / "shop.py").write_text(textwrap.dedent("""
        from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                         OutputEvent, ResourceDescriptor, action,
                                         chat_model_connection, chat_model_setup)
        from flink_agents_py.integrations.chat_models import ScriptedChatModel

        def answer(request):
            return "fine"

        class Shop(Agent):
            @chat_model_connection
            @staticmethod
            def conn() -> ResourceDescriptor:
                return ResourceDescriptor(ScriptedChatModel, function="shop:answr")

            @chat_model_setup
            @staticmethod
            def model() -> ResourceDescriptor:
                return ResourceDescriptor(ChatModelSetup, connection="conn")

            @action(InputEvent)
            @staticmethod
            async def ask(event, ctx):
                reply = await ctx.chat("model", [ChatMessage(content="hi")])
                ctx.send_event(OutputEvent(output=reply.message.content))
    """))
    proc = run_user_program(tmp_path, """
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import ResourceError
        from shop import Shop

        try:
            AgentsExecutionEnvironment.local().from_list(
                [{"key": "a"}, {"key": "b"}]).apply(Shop()).run()
        except ResourceError as e:
            print("refused:", e)
    """)
    assert proc.stdout.strip().splitlines()[-1] == (
        "refused: chat model connection 'conn' (ScriptedChatModel): function='shop:answr': "
        "'shop' has no attribute path 'answr' (did you mean 'answer'?)")


def test_a_bare_function_name_is_told_the_form_it_needs():
    from flink_agents_py.api import ResourceError
    from flink_agents_py.integrations.chat_models import ScriptedChatModel

    with pytest.raises(ResourceError, match=r"function='answer': 'answer' is not a "
                                            r"fully-qualified name like 'pkg.module:function'"):
        ScriptedChatModel(function="answer").check()


# -- flink-agents-py trace given a file that is not our event log -----------------------------

def test_trace_of_flink_agents_event_log_files_says_which_file_it_reads(tmp_path):
    # before: "no run in events-....log" (exit 1), as if the job had run nothing
    run_user_program(tmp_path, AGENT + """
    from flink_agents_py.compat import AgentConfigOptions
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(AgentConfigOptions.BASE_LOG_DIR, "apache-log")
    out = env.from_list([{"key": "k", "value": 1}]).apply(Echo()).to_list()
    env.execute()
    """)
    [apache_log] = (tmp_path / "apache-log").iterdir()
    (tmp_path / "notes.txt").write_text("not an event log\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def trace(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PYTHON, "-m", "flink_agents_py", "trace", str(path)],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=60, check=False)

    proc = trace(apache_log)
    assert proc.returncode == 2, proc.stderr
    assert "it is Apache Flink Agents' event log" in proc.stderr
    assert "give the file a job's event_log= writes" in proc.stderr
    proc = trace(tmp_path / "notes.txt")
    assert proc.returncode == 2
    assert "notes.txt: no line of it is a JSON record; give the file" in proc.stderr


# -- create_stream_environment: extra_config keys a parameter overrides -----------------------

def test_extra_config_setting_what_a_parameter_overrides_is_refused():
    pytest.importorskip("pyflink")
    from flink_agents_py.api import UsageError
    from flink_agents_py.flink import create_stream_environment

    # before: a job of parallelism 1, the "4" dropped without a word (set_parallelism runs
    # after the configuration is read), and likewise the interval
    with pytest.raises(UsageError, match=r"extra_config sets 'parallelism.default' \('4'\), "
                                         r"which parallelism= \(default 1\) overrides: pass "
                                         r"parallelism=4 instead"):
        create_stream_environment(extra_config={"parallelism.default": "4"})
    with pytest.raises(UsageError, match=r"'execution.checkpointing.interval' \('5 s'\) and "
                                         r"checkpoint_interval_ms=1000 overrides it"):
        create_stream_environment(checkpoint_interval_ms=1000,
                                  extra_config={"execution.checkpointing.interval": "5 s"})
    with pytest.raises(UsageError, match=r"'execution.runtime-mode' \('BATCH'\), which it "
                                         r"overrides: an agent job runs in STREAMING mode"):
        create_stream_environment(extra_config={"execution.runtime-mode": "BATCH"})


# -- how a local (MiniCluster) job restarts from its last checkpoint ------------------------

def test_the_run_on_flink_page_restarts_a_local_job_the_way_the_tested_example_does():
    # before: no page said how to start `python main.py` again from a kept checkpoint (only
    # `flink run -s` on a cluster); examples/approvals_kafka.py does it, and
    # tests/test_waits_kafka.py kills it and restores it from its last chk-N
    page = (ROOT / "docs" / "how-to" / "run-on-flink.md").read_text()
    section = page.split("### Restart a local job from its last checkpoint", 1)[1]
    section = section.split("\n### ", 1)[0]
    example = (ROOT / "examples" / "approvals_kafka.py").read_text()
    keys = {"execution.checkpointing.dir",
            "execution.checkpointing.externalized-checkpoint-retention",
            "execution.state-recovery.path"}
    assert keys <= set(re.findall(r'"(execution\.[a-z.-]+)"', example))
    for key in keys:
        assert f'"{key}"' in section, key
    assert '"RETAIN_ON_CANCELLATION"' in section and "RETAIN_ON_CANCELLATION" in example
    assert "_metadata" in section and "_metadata" in (ROOT / "tests" / "test_waits_kafka.py"
                                                       ).read_text()


# -- an environment option misspelt ----------------------------------------------------------

def test_a_misspelt_environment_option_names_the_one_meant(tmp_path):
    # before: "TypeError: LocalExecutionEnvironment.__init__() got an unexpected keyword
    # argument 'max_inflight'", naming a class the user never wrote and nothing to use
    proc = run_user_program(tmp_path, """
        from flink_agents_py import AgentsExecutionEnvironment
        try:
            AgentsExecutionEnvironment.local(max_inflight=4)
        except TypeError as e:
            print(e)
    """)
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("AgentsExecutionEnvironment.local() takes no option 'max_inflight' "
                           "(did you mean 'max_in_flight'?); its options: max_in_flight, ")


def test_a_misspelt_flink_environment_option_is_refused_before_the_environment_is_read():
    pytest.importorskip("pyflink")
    from flink_agents_py import AgentsExecutionEnvironment

    with pytest.raises(TypeError, match=r"AgentsExecutionEnvironment.flink\(env\) takes no "
                                        r"option 'progres' \(did you mean 'progress'\?\)"):
        AgentsExecutionEnvironment.flink(object(), progres=True)


def test_the_compat_environment_names_a_misspelt_option_too():
    from flink_agents_py.compat import AgentsExecutionEnvironment

    with pytest.raises(TypeError, match=r"takes no option 'max_inflight' \(did you mean "
                                        r"'max_in_flight'\?\)"):
        AgentsExecutionEnvironment.get_execution_environment(max_inflight=3)
