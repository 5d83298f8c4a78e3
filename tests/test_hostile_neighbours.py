"""Hostile input next to defects fixed before: each test is what an attacker would try.

- A record (or a durable call's result) holding a dict shaped like the runtime's stored form
  of a pydantic model (``{"$model": "pkg.mod:Class", "data": ...}``) is data: the module it
  names is never imported, nothing it names is called, and the action, the durable call's
  caller and the output see the dict exactly as it was sent.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    SerializationError,
    action,
)
from flink_agents_py.runtime._serde import from_json_value, to_json_value

EVIL_MODULE = "hostile_neighbours_planted"


@pytest.fixture()
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable module that writes a file when imported and when its class is called.

    Returns:
        The file it writes (absent while nothing imported or called it).
    """
    marker = tmp_path / "imported.txt"
    (tmp_path / f"{EVIL_MODULE}.py").write_text(textwrap.dedent(f"""
        with open({str(marker)!r}, "a") as f:
            f.write("imported\\n")


        class Payload:
            @staticmethod
            def model_validate(data):
                with open({str(marker)!r}, "a") as f:
                    f.write("called\\n")
                return "replaced by the planted class"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    sys.modules.pop(EVIL_MODULE, None)


def _tag_shaped(data: Any) -> dict[str, Any]:
    return {"$model": f"{EVIL_MODULE}:Payload", "data": data}


class EchoAgent(Agent):
    """Echoes its input, and what a durable call returned of the input's ``payload``."""

    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        """Output the input as the action saw it and the durable call's result."""
        returned = ctx.durable_execute(_identity, event.input["payload"])
        ctx.send_event(OutputEvent(output={"seen": event.input, "returned": returned}))


def _identity(value: Any) -> Any:
    return value


def test_a_record_shaped_like_a_stored_model_is_data_never_imported_or_called(planted):
    payload = {"nested": [_tag_shaped({"x": 1})], **_tag_shaped({"y": 2})}
    record = {"key": "k", "payload": _tag_shaped({"z": 3}), "more": payload}
    result = AgentsExecutionEnvironment.local().from_list([record]).apply(EchoAgent()).run()
    assert result.errors == []
    assert result.outputs == [{"seen": record, "returned": _tag_shaped({"z": 3})}]
    assert not planted.exists(), planted.read_text()
    assert EVIL_MODULE not in sys.modules


@pytest.mark.parametrize("value", [
    _tag_shaped({"a": 1}),
    {"$model": None, "data": {"a": 1}},
    {"$model": 7, "data": [1]},
    [{"k": _tag_shaped(_tag_shaped("deep"))}],
])
def test_a_tag_shaped_plain_value_survives_its_stored_form(planted, value):
    assert from_json_value(to_json_value(value, "test")) == value
    assert not planted.exists()


def test_a_stored_tag_naming_something_that_is_not_a_model_is_refused_not_called(planted):
    with pytest.raises(SerializationError, match="not a pydantic model"):
        from_json_value(_tag_shaped({"a": 1}))
    assert planted.read_text() == "imported\n"  # the class was looked up, never called
