"""``check_upgrade_safety``: the old agent's state at every crash point, restored into the new.

Over the scenario agents and their upgraded twins (tests/support/upgrade_agents.py): a safe
upgrade reports nothing; a reorder, changed arguments and a call dropped from the middle are
reported, each with the line of the new code that made the call.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap

import pytest
from support import upgrade_agents as ua
from support.restorable_agents import ARG_VERSION

import flink_agents_py.testing
from flink_agents_py.runtime import SqliteJournal
from flink_agents_py.testing import UpgradeSafetyReport, check_upgrade_safety

pytestmark = pytest.mark.timeout(180)

INPUTS = [{"key": "a", "x": 1}, {"key": "a", "x": 2}, {"key": "b", "x": 3}]


def _reset() -> None:
    ARG_VERSION["v"] = 1


def _check(new, **options) -> UpgradeSafetyReport:
    return check_upgrade_safety(ua.Restorable(), new, INPUTS, reset=_reset, **options)


def _chat_inputs(d: str) -> list[dict]:
    open(os.path.join(d, "crashed"), "w").close()  # no "slow first attempt" in the fakes
    scenarios = ["after_output_before_run_complete", "mid_batch", "after_model_before_tool"]
    return [{"key": k, "dir": d, "scenario": s} for k, s in
            [("a", scenarios[0]), ("b", scenarios[1]), ("a", scenarios[2]), ("c", scenarios[0])]]


def test_it_is_public_and_documented():
    assert "check_upgrade_safety" in flink_agents_py.testing.__all__
    assert "UpgradeSafetyReport" in flink_agents_py.testing.__all__
    assert "Args:" in (check_upgrade_safety.__doc__ or "")


def test_a_safe_upgrade_reports_nothing():
    report = _check(ua.RestorableWithAudit())
    report.assert_ok()
    assert report.distinct == [] and len(report.points) == report.points_total > 2
    # not vacuous: restores handed recorded outcomes to the new code
    assert sum(p.replayed for p in report.points) > 0 and report.served > 0
    assert "upgrade safety of Restorable -> RestorableWithAudit" in report.table


def test_the_same_agent_is_a_safe_upgrade_of_itself():
    report = _check(ua.Restorable())
    report.assert_ok()
    assert sum(p.replayed for p in report.points) > 0


def test_a_renamed_action_in_flight_is_reported_by_name():
    report = _check(ua.RestorableRenamed())
    assert not report.ok
    # a divergence per key and run in flight, naming the action and the fix; the job ran on
    found = [f.message for f in report.distinct]
    assert found and all("ReplayDivergence" in m or "diverged" in m for m in found)
    assert all("action 'on_input' in flight" in m and "no action of that name" in m
               and "ctx.patched" in m for m in found)
    assert not [m for m in found if m.startswith("recovery failed")]


def test_a_safe_upgrade_with_a_journal_reports_nothing(tmp_path):
    n = itertools.count()
    report = _check(ua.RestorableWithAudit(),
                    journal_factory=lambda: SqliteJournal(str(tmp_path / f"j{next(n)}.db")))
    report.assert_ok()
    assert report.journal


def test_reordered_calls_are_reported_as_divergences_with_the_new_line():
    report = _check(ua.RestorableReordered())
    assert not report.ok and report.divergences > 0
    found = report.distinct
    assert all(f.kind == "divergence" for f in found), report.table
    assert "recorded function 'support.restorable_agents:stamp', now calling function " \
           "'support.restorable_agents:fetch'" in found[0].message
    assert f"{ua.__file__}" in found[0].detail and "fetch" in found[0].detail
    # one finding per run in flight, with the points that hit it
    assert len(found) < report.divergences and all(f.points for f in found)
    with pytest.raises(AssertionError, match="not safe for runs in flight"):
        report.assert_ok()


def test_changed_arguments_at_a_recorded_call_are_reported():
    report = _check(ua.RestorableNewArguments())
    assert not report.ok
    # replayed by identity (what the runtime only warns about) is a finding here
    changed = [f for f in report.findings if "calls with other arguments" in f]
    # naming the call, then what changed, as the runtime's warning says it
    assert changed and all("/on_input: recorded outcomes handed to calls with other arguments: "
                           "c1 (support.restorable_agents:fetch) (durable call " in f
                           and "its arguments changed" in f for f in changed), report.table
    assert all(f.points for f in report.distinct)


def test_the_same_change_guarded_by_ctx_patched_reports_nothing():
    # the upgrade recipe (docs/concepts/replay-divergence.md): runs recorded by the old code
    # keep the old arguments, new runs take the new ones
    report = _check(ua.RestorablePatched())
    report.assert_ok()
    assert sum(p.replayed for p in report.points) > 0


def test_a_call_dropped_from_the_middle_is_reported():
    report = _check(ua.RestorableFewerCalls())
    assert not report.ok
    assert any("'support.restorable_agents:lookup', now calling function "
               "'support.restorable_agents:compute'" in f for f in report.findings)


def test_the_chat_agent_with_a_new_answer_text_is_a_safe_upgrade(tmp_path):
    report = check_upgrade_safety(ua.DurableChatAgent(), ua.DurableChatNewAnswer(),
                                  _chat_inputs(str(tmp_path)))
    report.assert_ok()
    assert report.calls > 0


def test_the_chat_agent_with_a_new_call_before_its_audit_is_not(tmp_path):
    report = check_upgrade_safety(ua.DurableChatAgent(), ua.DurableChatNoteFirst(),
                                  _chat_inputs(str(tmp_path)))
    assert report.divergences > 0
    assert all("audit_after_output" in f.message for f in report.distinct)
    assert "recorded function 'support.durability_agents:audit', now calling function " \
           "'support.upgrade_agents:note'" in report.table


USER_V1 = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def greet(name: str, style: str) -> str:
    return f"{style} {name}"


def sign(text: str) -> str:
    return text + " -- bot"


class Greeter(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        text = await ctx.durable_execute_async(greet, event.input["name"], "hello")
        signed = await ctx.durable_execute_async(sign, text)
        ctx.send_event(OutputEvent(output=signed))
'''

USER_V2 = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from greeter_v1 import greet, sign


class Greeter(Agent):
    """v2: a warmer greeting (other arguments for a recorded call)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        text = await ctx.durable_execute_async(greet, event.input["name"], "warm hello")
        signed = await ctx.durable_execute_async(sign, text)
        ctx.send_event(OutputEvent(output=signed))


class PoliteGreeter(Agent):
    """v2': the same calls; only the output changes, after the last call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        text = await ctx.durable_execute_async(greet, event.input["name"], "hello")
        signed = await ctx.durable_execute_async(sign, text)
        ctx.send_event(OutputEvent(output=signed + " (thank you)"))
'''

USER_TEST = '''
import greeter_v1
import greeter_v2
from flink_agents_py.testing import check_upgrade_safety

RECORDS = [{"key": "a", "name": "Ada"}, {"key": "b", "name": "Bo"}]


def test_v2_changes_a_recorded_call():
    report = check_upgrade_safety(greeter_v1.Greeter(), greeter_v2.Greeter(), RECORDS)
    print(report.table)
    assert not report.ok
    assert any("calls with other arguments" in f for f in report.findings)


def test_polite_v2_is_safe():
    check_upgrade_safety(greeter_v1.Greeter(), greeter_v2.PoliteGreeter(), RECORDS).assert_ok()
'''


def test_a_user_checks_an_upgrade_of_their_own_module_from_their_own_directory(tmp_path):
    project = tmp_path / "user_project"
    project.mkdir()
    (project / "greeter_v1.py").write_text(textwrap.dedent(USER_V1))
    (project / "greeter_v2.py").write_text(textwrap.dedent(USER_V2))
    (project / "test_upgrade.py").write_text(textwrap.dedent(USER_TEST))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
    assert "upgrade safety of greeter_v1.Greeter -> greeter_v2.Greeter" in proc.stdout


# -- like check_replay_safety: another process, another hash seed, and the I/O sentinel -------
def test_new_code_making_calls_in_a_sets_order_diverges_when_restored_in_another_process():
    from support import unsafe_agents as unsafe

    report = check_upgrade_safety(unsafe.FanOut(), unsafe.FanOut(), [{"key": "a"}],
                                  hash_seeds=[11, 12])
    assert all(p.ok for p in report.points), "in one process the order never changes"
    assert report.elsewhere and {p.seed for p in report.elsewhere} == {11, 12}
    assert not report.ok and "PYTHONHASHSEED=" in "\n".join(report.findings)
    fixed = check_upgrade_safety(unsafe.SortedFanOut(), unsafe.SortedFanOut(), [{"key": "a"}],
                                 hash_seeds=[11, 12])
    fixed.assert_ok()
    assert len(fixed.elsewhere) == len(fixed.points) == fixed.points_total
    assert "restored again (PYTHONHASHSEED=11, 12)" in fixed.other_process


def test_clock_random_and_process_starts_of_the_new_code_are_reported_with_their_lines():
    from support import unsafe_agents as unsafe

    report = check_upgrade_safety(unsafe.CarefulGambler(), unsafe.Gambler(),
                                  [{"key": "a"}, {"key": "b"}], other_process=False)
    assert not report.ok
    for marker, what in [("# GAMBLER-CLOCK", "time.time()"),
                         ("# GAMBLER-RANDOM", "random.choice()"),
                         ("# GAMBLER-PROCESS", "subprocess.Popen")]:
        where = f"{unsafe.__file__}:{unsafe.line_of(marker)}:"
        assert [s for s in report.sightings if s.startswith(where) and what in s], \
            (marker, report.sightings)
    assert len(report.sightings) == 3  # each site once
    assert "outside durable calls" in report.table


def test_a_file_write_the_new_code_repeats_after_a_restore_is_reported(tmp_path):
    from support import unsafe_agents as unsafe

    outbox = tmp_path / "outbox.txt"
    report = check_upgrade_safety(
        unsafe.Scribe(), unsafe.Scribe(),
        [{"key": "a", "outbox": str(outbox), "ledger": str(tmp_path / "ledger.txt")}],
        other_process=False)
    repeated = [f for f in report.distinct if f.kind == "side effect repeated"]
    assert len(repeated) == 1, report.table
    assert f"{unsafe.__file__}:{unsafe.line_of('# SCRIBE-WRITE')}" in repeated[0].message
