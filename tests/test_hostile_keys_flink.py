"""Records a key selector fails on reach the error output, whatever they hold; the job goes on.

One MiniCluster job (thread mode) over records that used to end the job: a record holding an
object pydantic cannot serialize whose key selector fails (the operator sends an error row's
JSON form), a key whose ``repr`` raises, a string key (alone or in a tuple) holding a lone
surrogate (a Java string cannot hold it), a selector whose message quotes one. Good records
of one key are around each of them and must all run, in order. An error row of a record with
a huge key quotes the key bounded (its message held all 100,000 characters).
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import hostile_key_agents as hk  # noqa: E402

BAD: dict[str, dict[str, Any]] = {
    "selector fails on an opaque record": {"fail": "it", "obj": hk.Opaque(3)},
    "repr raises": {"k": hk.ReprRaises()},
    "unhashable, repr raises": {"k": hk.UnhashableReprRaises()},
    "lone surrogate": {"k": "a\ud800b"},
    "lone surrogate in a tuple": {"k": ("t", "x\udc80")},
    "selector quotes a lone surrogate": {"fail": "z\ud800"},
}


HUGE_KEY = "H" * 100_000


@pytest.fixture(scope="module")
def rows() -> dict[str, list[Any]]:
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    records: list[dict[str, Any]] = []
    for n, bad in enumerate(BAD.values()):
        records += [{"k": "good", "n": 2 * n}, {**bad, "n": -1}, {"k": "good", "n": 2 * n + 1}]
    records.append({"k": HUGE_KEY, "n": {1, 2}})  # a key of any size, a record with no JSON form
    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    applied = (agents.from_datastream(env.from_collection(records, type_info=pickled),
                                      key_selector=hk.key_of).apply(hk.Echo()))
    out = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    got: dict[str, list[Any]] = {"out": [], "err": []}
    with out.execute_and_collect("hostile-keys") as results:
        for kind, value in results:
            got[kind].append(value)
    return got


@pytest.mark.timeout(300)
def test_rejected_records_are_error_rows_and_the_good_records_all_run_in_order(rows):
    assert rows["out"] == [{"key": "good", "n": n} for n in range(2 * len(BAD))]
    rejected = [e for e in rows["err"] if e["action"] == "<key_selector>"]
    assert len(rejected) == len(BAD) == len(rows["err"]) - 1
    assert all(e["key"] is None for e in rejected)


@pytest.mark.timeout(300)
def test_a_rejected_record_with_no_json_form_is_shown_by_its_repr(rows):
    [opaque] = [e for e in rows["err"] if e["message"] == "no key for it"]
    assert opaque["error_type"] == "ValueError"
    assert opaque["input"] == "{'fail': 'it', 'obj': Opaque(3), 'n': -1}"


@pytest.mark.timeout(300)
def test_a_key_whose_repr_raises_is_named_by_its_type(rows):
    messages = {e["error_type"]: e["message"] for e in rows["err"]
                if "repr failed" in e["message"]}
    assert "the key is <ReprRaises: repr failed: RuntimeError> of type ReprRaises" in (
        messages["KeyEncodingError"])
    assert "the key is <UnhashableReprRaises: repr failed: RuntimeError>" in (
        messages["TypeError"])


@pytest.mark.timeout(300)
def test_a_key_holding_a_lone_surrogate_is_refused_naming_where(rows):
    surrogate = sorted(e["message"] for e in rows["err"] if "lone surrogate" in e["message"])
    assert len(surrogate) == 2, surrogate
    assert surrogate[0].startswith("the key is 'a\\ud800b': it holds a lone surrogate "
                                   "('\\ud800' at index 1)")
    assert surrogate[1].startswith("the key[1] is 'x\\udc80': it holds a lone surrogate")
    [quoted] = [e for e in rows["err"] if e["message"] == "no key for z\ud800"]
    assert quoted["error_type"] == "ValueError"


@pytest.mark.timeout(300)
def test_an_error_row_quotes_a_huge_key_bounded(rows):
    [error] = [e for e in rows["err"] if e["action"] == "<input>"]
    assert error["key"] == HUGE_KEY and error["error_type"] == "SerializationError"
    assert error["message"].startswith("input record of key 'HHH")
    assert "... (100,002 chars): a set at $.n has no JSON form" in error["message"]
    assert len(error["message"]) < 400  # the key itself is in the row, once
