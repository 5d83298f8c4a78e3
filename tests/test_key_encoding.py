"""Stable key encodings (``runtime.KeyEncoding``) and keys on the local runner.

The default (``"json"``) encoding is what Flink's keyed state is partitioned by: its text for
a key must never change (a change moves the key to another key group, and its state is not
found after a restore), so the exact forms are pinned here. The local runner keys records
as Flink's default encoding does: ``1``, ``True`` and ``1.0`` are three keys.
"""

from __future__ import annotations

import enum
import json
import pathlib
import pickle
import subprocess
import sys
import textwrap

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.runtime import (
    JSON_KEYS,
    PICKLE_KEYS,
    KeyEncodingError,
    KeyEncodingMismatchError,
    RejectedKey,
    decode_key,
    encode_key,
    key_encoding,
    mismatch_message,
)

PINNED = [
    ("alpha", "alpha"),
    ("", ""),
    ("ünï ключ", "ünï ключ"),
    (1, "\x1f1"),
    (-3, "\x1f-3"),
    (2**70, "\x1f1180591620717411303424"),
    (True, "\x1ftrue"),
    (False, "\x1ffalse"),
    (1.0, "\x1f1.0"),
    (2.5, "\x1f2.5"),
    (1e16, "\x1f1e+16"),
    (-0.0, "\x1f-0.0"),
    (None, "\x1fnull"),
    ((), "\x1f[]"),
    (("t", 1), '\x1f["t",1]'),
    (("t", True, 1.0, None, ("ü",)), '\x1f["t",true,1.0,null,["ü"]]'),
    ("\x1f1", '\x1f"\\u001f1"'),  # a string that looks like an encoded key stays a string
    ("\x1eX", '\x1f"\\u001eX"'),
]


@pytest.mark.parametrize(("key", "encoded"), PINNED, ids=[repr(k) for k, _ in PINNED])
def test_each_key_has_one_fixed_encoding_and_comes_back_in_its_own_type(key, encoded):
    assert encode_key(key) == encoded
    back = decode_key(encoded)
    assert back == key and type(back) is type(key)
    if isinstance(key, tuple):
        assert [type(x) for x in back] == [type(x) for x in key]


def test_keys_equal_in_python_are_distinct_keys():
    keys = [1, True, 1.0, "1", "\x1f1", "true", ("t", 1), ("t", True), ("t", 1.0), 0, False,
            0.0, -0.0, None, "null", "", ()]
    assert len({encode_key(k) for k in keys}) == len(keys)


class Color(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize("key", [frozenset({1}), bytearray(b"raw"), Color.RED, float("nan"),
                                 float("inf"), ("t", object()), 3j],
                         ids=["frozenset", "bytearray", "IntEnum", "nan", "inf",
                              "tuple-object", "complex"])
def test_a_key_without_a_stable_encoding_is_refused_naming_what_to_do(key):
    with pytest.raises(KeyEncodingError) as e:
        encode_key(key)
    message = str(e.value)
    assert "key" in message
    if isinstance(key, float):
        assert "finite" in message
    else:
        assert type(key if not isinstance(key, tuple) else key[1]).__name__ in message
        assert "key_encoding='pickle'" in message and "str(key)" in message


class KeyEcho(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key}))


def test_a_record_rejected_for_its_nan_key_shows_the_nan_and_why():
    """The error row shows the record as it was, in its JSON form too (the rows of Flink's
    error output): ``nan``, not ``None``, which would read as a record keyed ``None``."""
    records = [{"key": float("nan"), "text": "a"}, {"key": float("-inf"), "text": "b"},
               {"key": "ok", "text": "c"}]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(KeyEcho()).run()
    assert res.outputs == [{"key": "ok"}]
    nan_row, inf_row = (e.model_dump(mode="json") for e in res.errors)
    assert nan_row["input"]["key"] != nan_row["input"]["key"]  # NaN itself
    assert inf_row["input"]["key"] == float("-inf")
    assert nan_row["error_type"] == "KeyEncodingError"
    assert nan_row["message"].startswith("the key is nan: a key must be a finite number (NaN "
                                         "is not equal to itself")
    assert "give such records a key of their own in the key selector" in nan_row["message"]
    assert '"key":NaN' in res.errors[0].model_dump_json()


def test_the_flink_key_of_a_failing_selector_or_an_unencodable_key_is_a_rejected_key():
    def boom(record):
        raise KeyError("no key field")

    for selector, record, error in [(boom, {}, "KeyError"),
                                    (lambda r: r["k"], {"k": {1, 2}}, "TypeError"),
                                    (lambda r: r["k"], {"k": 3j}, "KeyEncodingError")]:
        identity = JSON_KEYS.flink_key(selector, record)
        assert type(identity) is str  # a Flink STRING key, whatever went wrong
        rejected = JSON_KEYS.rejected(identity)
        assert type(rejected) is RejectedKey and rejected.error_type == error, rejected
    assert JSON_KEYS.rejected(JSON_KEYS.flink_key(lambda r: r, "\x1eX")) is None
    # pickled keys are the key itself (PyFlink pickles it), as the previous release had them
    assert PICKLE_KEYS.flink_key(lambda r: r["k"], {"k": ("t", 1)}) == ("t", 1)
    assert type(PICKLE_KEYS.rejected(PICKLE_KEYS.flink_key(boom, {}))) is RejectedKey


def test_a_rejected_record_that_pydantic_cannot_serialize_keeps_its_repr():
    """Its error row has a JSON form (the Flink operator sends it): an opaque object was a
    ``PydanticSerializationError`` that ended the job; a NaN stays itself."""
    from support.hostile_key_agents import Opaque

    def boom(record):
        raise KeyError("no key field")

    res = (AgentsExecutionEnvironment.local()
           .from_list([{"obj": Opaque(1)}, {"x": float("nan")}], key_selector=boom)
           .apply(KeyEcho()).run())
    opaque, nan = (e.model_dump(mode="json") for e in res.errors)
    assert opaque["input"] == "{'obj': Opaque(1)}" and opaque["error_type"] == "KeyError"
    assert nan["input"]["x"] != nan["input"]["x"]


def test_a_key_flink_cannot_hold_or_whose_repr_raises_is_a_rejected_key_not_a_crash():
    """Each was an exception out of the key selector, which ended the Flink job."""
    from support.hostile_key_agents import ReprRaises, UnhashableReprRaises

    def fails_quoting(record):
        raise ValueError(f"no key for {record['q']}")

    for selector, record, error, says in [
            (lambda r: r["k"], {"k": ReprRaises()}, "KeyEncodingError",
             "the key is <ReprRaises: repr failed: RuntimeError> of type ReprRaises"),
            (lambda r: r["k"], {"k": UnhashableReprRaises()}, "TypeError",
             "the key is <UnhashableReprRaises: repr failed: RuntimeError>"),
            (lambda r: r["k"], {"k": "a\ud800"}, "KeyEncodingError",
             "the key is 'a\\ud800': it holds a lone surrogate ('\\ud800' at index 1)"),
            (lambda r: r["k"], {"k": (1, ("é\udfff",))}, "KeyEncodingError",
             "the key[1][0] is 'é\\udfff': it holds a lone surrogate"),
            (fails_quoting, {"q": "\ud800"}, "ValueError", "no key for \ud800")]:
        identity = JSON_KEYS.flink_key(selector, record)
        identity.encode("utf-8")  # a Java string can hold it
        rejected = JSON_KEYS.rejected(identity)
        assert type(rejected) is RejectedKey and rejected.error_type == error, rejected
        assert rejected.message.startswith(says), rejected.message
    assert encode_key("ünï ключ") == "ünï ключ"  # valid text that is not ASCII is its own key


KEYS_V0 = ["alpha", "ünï ключ", 7, -3, 2.5, True, ("t", 1), None]


def test_the_savepoint_fixtures_hold_the_keys_as_pyflink_pickled_them_in_each_mode():
    # the committed savepoints of the previous release: thread mode pickled each key with
    # pickle (protocol 4 on this Python), process mode with cloudpickle (protocol 5), so the
    # same key had other bytes, another key group, by execution mode
    import cloudpickle

    root = pathlib.Path(__file__).parent / "fixtures" / "savepoint_v0"
    for folder, dumps in (("savepoint", pickle.dumps), ("savepoint_process", cloudpickle.dumps)):
        metadata = (root / folder / "_metadata").read_bytes()
        for key in KEYS_V0[:-1]:  # PyFlink keeps a None key as a null field
            assert dumps(key) in metadata, (folder, key)
    assert pickle.dumps("alpha") != cloudpickle.dumps("alpha")


def test_a_restored_key_pickled_otherwise_names_what_to_do():
    import cloudpickle

    PICKLE_KEYS.check_restored(pickle.dumps(("t", 1)), ("t", 1))  # as this job pickles it
    with pytest.raises(KeyEncodingMismatchError, match="process mode") as e:
        PICKLE_KEYS.check_restored(cloudpickle.dumps(("t", 1)), ("t", 1))
    assert "key_encoding='pickle'" in str(e.value)
    JSON_KEYS.check_restored("alpha", "alpha")  # Flink checks the serializer of STRING keys
    # the operator's error, in Flink's trace, comes back to ``execute`` as it is
    trace = f"java.lang.RuntimeException: ...\nkeys.KeyEncodingMismatchError: {e.value}\n\tat x"
    assert mismatch_message(RuntimeError(trace), PICKLE_KEYS) == str(e.value)


def test_key_encodings_by_name_and_across_pickling():
    assert key_encoding("json") is JSON_KEYS and key_encoding("pickle") is PICKLE_KEYS
    for keys in (JSON_KEYS, PICKLE_KEYS):
        assert pickle.loads(pickle.dumps(keys)) is keys
    with pytest.raises(ValueError, match="'json'.*'pickle'"):
        key_encoding("utf8")


def test_flinks_refusal_of_a_key_serializer_names_the_option_to_pass():
    flink = ("Caused by: org.apache.flink.util.StateMigrationException: The new key serializer "
             "(RowSerializer@5aa4fdd9) must be compatible with the previous key serializer")
    assert "key_encoding='pickle'" in mismatch_message(RuntimeError(flink), JSON_KEYS)
    assert "key_encoding='json'" in mismatch_message(RuntimeError(flink), PICKLE_KEYS)
    assert mismatch_message(RuntimeError("TaskManager lost"), JSON_KEYS) is None


class CountPerKey(Agent):
    """Counts its key's records in short-term memory, after one durable call."""

    @action(InputEvent)
    @staticmethod
    async def count(event: InputEvent, ctx: RunnerContext) -> None:
        stm = ctx.short_term_memory
        stm.set("seen", stm.get("seen", 0) + 1)
        echoed = await ctx.durable_execute_async(str, event.input["n"])
        ctx.send_event(OutputEvent(output={"key": repr(ctx.key), "type": type(ctx.key).__name__,
                                           "n": echoed, "seen": stm.get("seen")}))


THREE = [1, True, 1.0, ("t", 1), ("t", True)]


def test_the_local_runner_keys_1_true_and_1_0_apart_as_flink_does():
    records = [{"key": k, "n": n} for n, k in enumerate(THREE * 2)]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(CountPerKey()).run()
    assert not result.errors
    got = {(o["key"], o["type"], o["seen"]) for o in result.outputs}
    assert got == {(repr(k), type(k).__name__, s) for k in THREE for s in (1, 2)}
    # the keyed outputs carry each key in its own type
    assert sorted((type(k).__name__, o["seen"]) for k, o in result.keyed_outputs) == sorted(
        (type(k).__name__, s) for k in THREE for s in (1, 2))


def test_a_local_record_with_an_unencodable_key_goes_to_the_errors_and_the_rest_runs():
    records = [{"key": "a", "n": 0}, {"key": 3j, "n": 1}, {"key": "a", "n": 2}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(CountPerKey()).run()
    assert [o["n"] for o in result.outputs] == ["0", "2"]
    [error] = result.errors
    assert error.error_type == "KeyEncodingError" and error.execution_id == "record 1"
    assert "key_encoding='pickle'" in error.message and "complex" in error.message


USER_RUN = '''
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from my_counter import CountPerKey

KEYS = [1, True, 1.0, ("t", 1), ("t", True)]
records = [{"key": k, "n": n} for n, k in enumerate(KEYS * 2)]
job = AgentsExecutionEnvironment.local().from_list(records).apply(CountPerKey())
if sys.argv[1] == "crash":
    cut = job.run(max_steps=7)  # the process dies with runs of several keys in flight
    json.dump(job.snapshot(), open("checkpoint.json", "w"))
    print(json.dumps({"outputs": cut.outputs, "errors": len(cut.errors)}))
else:
    result = job.restore(json.load(open("checkpoint.json"))).run()
    print(json.dumps({"outputs": result.outputs, "errors": len(result.errors)}))
'''


def test_a_local_snapshot_restores_keys_equal_in_python_apart(tmp_path):
    # a user's module and script, outside the repository: crash, then restore the snapshot
    agent = textwrap.dedent('''
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


        class CountPerKey(Agent):
            @action(InputEvent)
            @staticmethod
            async def count(event: InputEvent, ctx: RunnerContext) -> None:
                stm = ctx.short_term_memory
                stm.set("seen", stm.get("seen", 0) + 1)
                echoed = await ctx.durable_execute_async(str, event.input["n"])
                ctx.send_event(OutputEvent(output={
                    "key": repr(ctx.key), "type": type(ctx.key).__name__, "n": echoed,
                    "seen": stm.get("seen")}))
        ''')
    (tmp_path / "my_counter.py").write_text(agent)
    (tmp_path / "run.py").write_text(USER_RUN)

    def python(*args: str) -> str:
        done = subprocess.run([sys.executable, "run.py", *args], cwd=tmp_path, timeout=120,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    before = json.loads(python("crash"))
    snapshot = json.loads((tmp_path / "checkpoint.json").read_text())
    assert len(snapshot["keys"]) == len(THREE)  # five keys, not the two Python would see
    assert any(k["run"] is not None for k in snapshot["keys"])  # runs in flight
    restored = json.loads(python("restore"))
    assert before["errors"] == restored["errors"] == 0
    # every record's output once across the crash; each key kept its own memory
    done = sorted((o["key"], o["type"], o["seen"])
                  for o in before["outputs"] + restored["outputs"])
    assert done == sorted((repr(k), type(k).__name__, s) for k in THREE for s in (1, 2))


def test_error_messages_and_log_lines_quote_a_huge_key_bounded(caplog):
    """A key comes from a record, of any size: an error row's message and the log line of a
    failed action quoted all of it (2 MB of text per failure)."""
    key = "K" * 50_000

    class Fails(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            raise ValueError("no")

    res = (AgentsExecutionEnvironment.local()
           .from_list([{"key": key, "v": {1}}, {"key": key}]).apply(Fails()).run())
    unstorable, failed = res.errors
    assert (unstorable.action, failed.action) == ("<input>", "on_input")
    assert unstorable.key == key and len(unstorable.message) < 400, unstorable.message
    assert "... (50,002 chars)" in unstorable.message
    lines = [r.getMessage() for r in caplog.records if "failed for key" in r.getMessage()]
    assert lines and all(len(line) < 1000 for line in lines), [len(x) for x in lines]
