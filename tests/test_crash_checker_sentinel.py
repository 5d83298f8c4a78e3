"""The checker catches what a crash-everywhere run in one process cannot see.

- Side effects and nondeterministic reads of action code outside durable calls (an e-mail
  over a socket, a file write, a process, the clock, a random number): the I/O sentinel
  names the file and line; one that a crash repeats is reported as done again.
- Durable calls made in a set's iteration order: restores in another process, under
  another ``PYTHONHASHSEED``, make them in another order.
- A failure reads compactly (each distinct finding once), and the "served" line counts what
  the restores served from recorded outcomes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest
from support import unsafe_agents as ua

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety, model_from_turns, tool_call

pytestmark = pytest.mark.timeout(180)

AGENTS_FILE = ua.__file__


class MailServer:
    """A TCP server on 127.0.0.1 that counts the e-mails (lines) it receives."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.mails: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(1024):
                    data += chunk
            with self._lock:
                self.mails.extend(data.decode().splitlines())

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def mail() -> Iterator[MailServer]:
    server = MailServer()
    yield server
    server.close()


def _wait_for(condition, limit_s: float = 60.0) -> bool:
    """Poll ``condition`` until it holds or ``limit_s`` passes (the server thread lags)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _sighting(report, fragment: str, kind_text: str) -> str:
    """The report's sighting at the line of ``fragment`` in unsafe_agents.py."""
    where = f"{AGENTS_FILE}:{ua.line_of(fragment)}:"
    found = [s for s in report.sightings if s.startswith(where) and kind_text in s]
    assert found, (where, report.sightings)
    return found[0]


def test_an_email_sent_outside_a_durable_call_is_named_with_its_line(mail):
    report = check_replay_safety(ua.Mailer(), [{"key": "a", "port": mail.port},
                                               {"key": "b", "port": mail.port}])
    assert not report.ok
    # the e-mail really went out again after a restore: that is what is reported
    assert _wait_for(lambda: mail.mails.count("mail for a") > 1), mail.mails
    line = _sighting(report, "# MAILER-CONNECT", "socket.connect to ('127.0.0.1'")
    assert "in action support.unsafe_agents:Mailer.notify" in line
    assert "make it a durable call" in line
    repeated = [f for f in report.distinct if f.kind == "side effect repeated"]
    assert repeated and "socket.connect" in repeated[0].message
    assert "done again after the restore" in repeated[0].message
    assert repeated[0].points  # with the crash points that repeat it
    with pytest.raises(AssertionError, match="socket.connect") as info:
        report.assert_ok()
    assert f"{AGENTS_FILE}:{ua.line_of('# MAILER-CONNECT')}" in str(info.value)


def test_an_email_sent_by_a_helper_of_a_plain_action_is_named_at_the_helper(mail):
    report = check_replay_safety(ua.HelperMailer(), [{"key": "a", "port": mail.port}],
                                 other_process=False)
    line = _sighting(report, "# SEND-MAIL", "socket.connect")
    assert "in action support.unsafe_agents:HelperMailer.notify" in line
    assert len(report.sightings) == 1


def test_the_same_effects_inside_durable_calls_are_not_reported(mail, tmp_path, monkeypatch):
    from flink_agents_py.testing import _sentinel

    # as if tmp_path were not a temporary directory: the durable file write is still fine
    monkeypatch.setattr(_sentinel, "temp_roots", lambda: ("/nonexistent-temp/",))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    (tmp_path / "lazy_helper.py").write_text("VALUE = 1\n")
    report = check_replay_safety(
        ua.DurableMailer(), [{"key": "a", "port": mail.port, "outbox": str(tmp_path / "o"),
                              "lazy": str(tmp_path)}], other_process=False)
    report.assert_ok()
    assert report.sightings == [] and report.calls == 4
    assert list((tmp_path / "__pycache__").glob("lazy_helper*.pyc"))  # it was written
    sys.modules.pop("lazy_helper", None)


def test_a_file_write_outside_temporary_directories_is_reported(tmp_path, monkeypatch):
    from flink_agents_py.testing import _sentinel

    # as if tmp_path were not a temporary directory (a user's outbox folder)
    monkeypatch.setattr(_sentinel, "temp_roots", lambda: ("/nonexistent-temp/",))
    outbox = tmp_path / "outbox.txt"
    report = check_replay_safety(ua.Scribe(), [{"key": "a", "outbox": str(outbox),
                                                "ledger": str(tmp_path / "ledger.txt")}],
                                 other_process=False)
    line = _sighting(report, "# SCRIBE-WRITE", "for writing")
    assert repr(str(outbox)) in line
    # the ledger is written by a durable call: not reported
    assert not any("ledger" in s for s in report.sightings)


def test_a_scratch_file_in_a_temporary_directory_is_reported_when_a_crash_repeats_it(tmp_path):
    outbox = tmp_path / "outbox.txt"
    report = check_replay_safety(ua.Scribe(), [{"key": "a", "outbox": str(outbox),
                                                "ledger": str(tmp_path / "ledger.txt")}],
                                 other_process=False)
    assert report.sightings == []  # a temporary directory: scratch space...
    repeated = [f for f in report.distinct if f.kind == "side effect repeated"]
    assert len(repeated) == 1, report.table  # ...but written again after a restore
    assert f"{AGENTS_FILE}:{ua.line_of('# SCRIBE-WRITE')}" in repeated[0].message
    assert outbox.read_text().count("mail for a") > 1


def test_clock_random_and_process_starts_are_reported_once_each():
    report = check_replay_safety(ua.Gambler(), [{"key": "a"}, {"key": "b"}],
                                 other_process=False)
    assert not report.ok
    clock = _sighting(report, "# GAMBLER-CLOCK", "time.time()")
    assert "its value differs on replay" in clock
    _sighting(report, "# GAMBLER-RANDOM", "random.choice()")
    _sighting(report, "# GAMBLER-PROCESS", "subprocess.Popen")
    assert len(report.sightings) == 3  # each site once, however many runs and keys
    check_replay_safety(ua.CarefulGambler(), [{"key": "a"}, {"key": "b"}]).assert_ok()


def test_clock_and_random_names_imported_from_their_modules_are_reported_too():
    report = check_replay_safety(ua.Dater(), [{"key": "a"}], other_process=False)
    _sighting(report, "# DATER-NOW", "datetime.now()")
    _sighting(report, "# DATER-COIN", "random.random()")
    _sighting(report, "# DATER-TODAY", "date.today()")
    assert len(report.sightings) == 3, report.sightings
    # restored afterwards: the module's names are the originals again
    import datetime
    import random

    assert ua.datetime is datetime.datetime and ua.coin is random.random


def test_calls_in_a_sets_order_diverge_when_restored_in_another_process():
    report = check_replay_safety(ua.FanOut(), [{"key": "a"}], hash_seeds=[11, 12])
    assert all(p.ok for p in report.points), "in one process the order never changes"
    assert report.elsewhere and {p.seed for p in report.elsewhere} == {11, 12}
    assert not report.ok
    found = "\n".join(report.findings)
    assert "PYTHONHASHSEED=" in found
    assert "another order" in found or "calls with other arguments" in found, found
    # the user's line that made the call, once per distinct finding
    text = str(report)
    assert f'File "{AGENTS_FILE}"' in text
    assert text.count("Traceback") == 0

    fixed = check_replay_safety(ua.SortedFanOut(), [{"key": "a"}], hash_seeds=[11, 12])
    fixed.assert_ok()
    assert len(fixed.elsewhere) == len(fixed.points) == fixed.points_total
    assert "restored again (PYTHONHASHSEED=11, 12)" in fixed.other_process


REPO = os.path.dirname(os.path.dirname(os.path.dirname(AGENTS_FILE)))
FEW_LITERAL = '{"alpha", "beta", "gamma"}'  # as unsafe_agents.FEW is written


def _order(seed: int) -> str:
    """The iteration order of ``unsafe_agents.FEW`` in a process with this seed."""
    return subprocess.run([sys.executable, "-c", f"print(list({FEW_LITERAL}))"],
                          env={**os.environ, "PYTHONHASHSEED": str(seed)}, capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_a_set_of_three_strings_is_caught_under_a_seed_that_orders_it_otherwise():
    assert ua.FEW == eval(FEW_LITERAL)  # noqa: S307 - our own literal
    here = _order(0)
    other = next(s for s in range(1, 60) if _order(s) != here)
    code = ("import sys; sys.path.insert(0, 'tests'); from support import unsafe_agents as u\n"
            "from flink_agents_py.testing import check_replay_safety\n"
            f"r = check_replay_safety(u.FewFanOut(), [{{'key': 'a'}}], hash_seeds=[{other}])\n"
            "assert all(p.ok for p in r.points) and not r.ok, r.table\n"
            "print('caught', r.divergences + r.mismatches)\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": "0"},
                          capture_output=True, text=True, timeout=170, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "caught" in proc.stdout


def test_an_agent_defined_in_a_test_function_is_restored_in_this_process_only_and_says_why():
    class Local(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            done = await ctx.durable_execute_async(ua.confirm, ctx.key)
            ctx.send_event(OutputEvent(output=done))

    with pytest.warns(UserWarning, match="restores in another process skipped: .*<locals>"):
        report = check_replay_safety(Local(), [{"key": "a"}])
    report.assert_ok()
    assert report.elsewhere == []
    assert report.other_process.startswith("skipped: ")
    assert "<locals>" in report.other_process and "module:qualname" in report.other_process
    assert "skipped: " in report.table


def test_a_failure_shows_each_distinct_finding_once():
    report = check_replay_safety(ua.FanOut(), [{"key": "a"}, {"key": "b"}], hash_seeds=[3])
    distinct = report.distinct
    assert len(distinct) < len(report.findings)
    with pytest.raises(AssertionError) as info:
        report.assert_ok()
    message = str(info.value)
    for f in distinct[:10]:
        # once, not once per crash point (440 findings here); a message may also stand inside
        # another distinct finding's (a slow machine's run can give two that differ by kind)
        alike = sum(1 for g in distinct if f.message in g.message)
        assert 1 <= message.count(f.message) <= alike, f.message
    # one source line per distinct divergence, not one per crash point
    shown = message.count(f'File "{AGENTS_FILE}"')
    assert 0 < shown <= sum(1 for f in distinct if f.kind == "divergence")


class Asker(Agent):
    """The docs' sample: one ``ctx.chat`` with a tool round per record."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        from flink_agents_py.api import ChatMessage

        reply = await ctx.chat("model", [ChatMessage(content=event.input["question"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": reply.message.content}))


def price_of(item: str) -> dict:
    """The price of an item.

    Args:
        item: the item's name.
    """
    return {"item": item, "price": len(item)}


def test_an_error_a_recovery_raises_shows_its_traceback_once_per_key():
    ua.SEEN.clear()
    report = check_replay_safety(ua.Forgetful(), [{"key": "a"}, {"key": "b"}],
                                 other_process=False)
    failing = [p for p in report.points if p.problems]
    assert len(failing) > 2  # several crash points fail the same way...
    with pytest.raises(AssertionError) as info:
        report.assert_ok()
    message = str(info.value)
    for key in ("a", "b"):  # ...each key's error is shown once, with the user's line
        assert message.count(f"ValueError: seen {key} before") == 1, message
    assert message.count(f'File "{AGENTS_FILE}", line {ua.line_of("# FORGETFUL-RAISE")}') == 2


def _asker() -> Asker:
    from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType

    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_turns([
        tool_call("price_of", item="apple"),
        lambda request: "apple costs " + str(json.loads(request.tool_results[0].content)["price"]),
    ]))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["price_of"]))
    agent.add_resource("price_of", ResourceType.TOOL, price_of)
    return agent


def test_served_counts_the_recorded_outcomes_a_restore_did_not_run_again():
    report = check_replay_safety(_asker(), [{"key": "a", "question": "apple?"},
                                            {"key": "b", "question": "pear?"}])
    report.assert_ok()
    first, last = report.points[0], report.points[-1]
    assert first.served == 0 and first.executed == report.calls  # a fresh start runs all
    # at the last point everything was recorded: the restore serves it all, runs nothing
    assert last.served == report.calls and last.executed == 0
    assert report.served > 0 and "served after restores" in report.table
    assert all(p.served <= report.calls for p in report.points)


# -- the way a user runs it: their own module, their own pytest, outside this repository -------
USER_AGENTS = '''
"""A user's agents: one fans out over a set, one stamps its output with the clock."""
import time

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

REGIONS = {f"region-{i}" for i in range(20)}


def publish(region: str) -> str:
    return f"published {region}"


class FanOut(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        done = [await ctx.durable_execute_async(publish, r) for r in REGIONS]
        ctx.send_event(OutputEvent(output=len(done)))


class SortedFanOut(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        done = [await ctx.durable_execute_async(publish, r) for r in sorted(REGIONS)]
        ctx.send_event(OutputEvent(output=len(done)))


class Stamper(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        if time.time() > 0:  # STAMP
            await ctx.durable_execute_async(publish, ctx.key)
        ctx.send_event(OutputEvent(output="ok"))
'''

USER_TEST = '''
import region_agents
from flink_agents_py.testing import check_replay_safety


def test_fan_out_over_a_set_is_caught_in_another_process():
    report = check_replay_safety(region_agents.FanOut(), [{"key": "a"}])
    print(report.table)
    assert report.points and all(p.ok for p in report.points)
    assert report.elsewhere and not report.ok


def test_sorted_fan_out_passes_everywhere():
    report = check_replay_safety(region_agents.SortedFanOut(), [{"key": "a"}])
    report.assert_ok()
    assert len(report.elsewhere) == report.points_total


def test_a_clock_read_is_named_by_its_line():
    report = check_replay_safety(region_agents.Stamper(), [{"key": "a"}])
    assert not report.ok
    line = next(i for i, text in enumerate(open(region_agents.__file__), 1) if "# STAMP" in text)
    assert any(s.startswith(f"{region_agents.__file__}:{line}: time.time()")
               for s in report.sightings), report.sightings
'''


def test_a_user_checks_their_own_module_from_their_own_directory(tmp_path):
    project = tmp_path / "user_project"
    project.mkdir()
    (project / "region_agents.py").write_text(textwrap.dedent(USER_AGENTS))
    (project / "test_regions.py").write_text(textwrap.dedent(USER_TEST))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout
    assert "PYTHONHASHSEED=" in proc.stdout


def test_bad_seeds_are_refused_naming_what_is_wrong(monkeypatch):
    with pytest.raises(ValueError, match="hash_seeds must be >= 1"):
        check_replay_safety(ua.SortedFanOut(), [{"key": "a"}], hash_seeds=0)
    monkeypatch.setenv("PYTHONHASHSEED", "5")
    with pytest.raises(ValueError, match=r"other than this process's PYTHONHASHSEED \(5\)"):
        check_replay_safety(ua.SortedFanOut(), [{"key": "a"}], hash_seeds=[5])


def test_a_call_counter_travels_to_another_process_with_its_counts():
    import pickle

    from flink_agents_py.testing import CallCounter

    counter = CallCounter()
    counter.count("mail", 2)
    copy = pickle.loads(pickle.dumps(counter))
    assert copy["mail"] == 2
    copy.count("mail")
    assert copy["mail"] == 3 and counter["mail"] == 2


def test_an_agent_defined_by_exec_without_a_module_says_so():
    """Code run by ``exec`` without ``__name__`` in its globals (a notebook cell runner, a
    docs snippet) gives functions whose ``__module__`` is None: the reason names that, not
    a module called 'None'."""
    scope: dict = {"Agent": Agent, "action": action, "InputEvent": InputEvent,
                   "OutputEvent": OutputEvent, "RunnerContext": RunnerContext, "ua": ua}
    exec("class Exec(Agent):\n"
         "    @action(InputEvent)\n"
         "    @staticmethod\n"
         "    async def go(event, ctx):\n"
         "        done = await ctx.durable_execute_async(ua.confirm, ctx.key)\n"
         "        ctx.send_event(OutputEvent(output=done))\n", scope)
    with pytest.warns(UserWarning, match="restores in another process skipped: .*no module"):
        report = check_replay_safety(scope["Exec"](), [{"key": "a"}])
    report.assert_ok()
    assert "'None'" not in report.other_process and "exec()" in report.other_process
