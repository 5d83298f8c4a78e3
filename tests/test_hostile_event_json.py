"""An event's JSON read from outside names its class only among the classes already defined.

``Event.from_json`` (Apache Flink Agents' reader, which a program calls on a Kafka record, a
file line, a server's answer) and ``event_from_json`` took the event class tag (``$class``,
``module:qualname``) of the JSON and imported that module when the class was not defined yet:
a record could make the process import any installed module (and run its top-level code).
Now a tag selects among the ``Event`` subclasses this process has defined; any other tag is a
``ValueError`` naming the tag and where, and nothing is imported. The runtime's own stored
form (keyed state, written by ``Event.to_json``) still imports the module its tag names, so a
restore in a fresh worker rebuilds its class.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents_py.api import Event
from flink_agents_py.api.internal import event_from_json, stored_event_from_json

ROOT = Path(__file__).resolve().parent.parent

EVIL = """
import os, pathlib
pathlib.Path(os.environ["FAPY_MARK"]).write_text("imported")
from flink_agents_py.api import Event
class Bad(Event):
    text: str = ""
"""


@pytest.fixture
def evil_module(tmp_path, monkeypatch):
    """A module on the path that leaves a mark when imported; its name and the mark."""
    name = f"fapy_evil_{os.getpid()}_{tmp_path.name[-6:]}".replace("-", "_")
    (tmp_path / f"{name}.py").write_text(EVIL)
    mark = tmp_path / "mark"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FAPY_MARK", str(mark))
    yield name, mark
    sys.modules.pop(name, None)


@pytest.mark.parametrize(
    "tag_of",
    [
        lambda m: f"{m}:Bad",
        lambda m: f"{m}.Bad",
        lambda m: "os:system",
        lambda m: "subprocess:Popen",
    ],
)
def test_event_from_json_imports_nothing_for_an_unknown_tag(evil_module, tag_of):
    name, mark = evil_module
    tag = tag_of(name)
    before = set(sys.modules)
    text = json.dumps({"type": "Bad", "text": "x", "$class": tag})
    with pytest.raises(ValueError, match=r"Event\.from_json's text: its '\$class' tag") as e:
        Event.from_json(text)
    assert repr(tag) in str(e.value)
    with pytest.raises(ValueError, match="record 7: .*names no Event subclass"):
        event_from_json(json.loads(text), "record 7")
    assert not mark.exists()
    assert name not in sys.modules and set(sys.modules) <= before | {name}


def test_a_tag_that_is_not_text_is_refused_by_name():
    with pytest.raises(ValueError, match=r"tag \"\{'a': 1\}\""):
        event_from_json({"type": "X", "$class": {"a": 1}}, "x")


def test_a_tag_of_a_class_already_defined_still_rebuilds_it(evil_module):
    name, _mark = evil_module
    module = __import__(name)
    back = Event.from_json(json.dumps({"type": "Bad", "text": "hi", "$class": f"{name}:Bad"}))
    assert type(back) is module.Bad and back.text == "hi"


def test_the_runtimes_own_stored_form_still_imports_its_class(evil_module):
    """Keyed state (written by ``to_json``) is restored in a fresh worker: it may import."""
    name, mark = evil_module
    back = stored_event_from_json({"type": "Bad", "text": "kept", "$class": f"{name}:Bad"})
    assert mark.exists() and type(back).__name__ == "Bad" and back.text == "kept"
    # a tag naming no event class there: rebuilt as its type's class, as before
    plain = stored_event_from_json({"type": "Other", "attributes": {}, "$class": "os:getcwd"})
    assert type(plain) is Event and plain.type == "Other"


SCRIPT = """
import json, os, sys
from flink_agents_py.api import Event

line = sys.stdin.readline()  # a record of a topic, read the Flink Agents way
try:
    Event.from_json(line)
except ValueError as e:
    print("refused:", e)
print("imported" if os.path.exists(os.environ["FAPY_MARK"]) else "not imported")
"""


def test_a_users_script_reading_a_hostile_record_imports_nothing(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "evil_mod.py").write_text(EVIL)
    (tmp_path / "reader.py").write_text(SCRIPT)
    mark = tmp_path / "mark"
    proc = subprocess.run(
        [sys.executable, "reader.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        input=json.dumps({"type": "Bad", "$class": "evil_mod:Bad"}) + "\n",
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}", "FAPY_MARK": str(mark)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused: Event.from_json's text: its '$class' tag 'evil_mod:Bad'" in proc.stdout
    assert proc.stdout.strip().endswith("not imported"), proc.stdout
    assert not mark.exists()


def test_a_base_event_of_a_type_a_class_owns_round_trips_by_its_tag(evil_module):
    """``Event(type=T)`` where class ``T`` owns the type: its form names ``Event`` itself."""
    name, _mark = evil_module
    module = __import__(name)
    base = Event(type="Bad", attributes={"n": 1})
    data = base.to_json()
    assert data["$class"] == "flink_agents_py.api._events:Event"
    for back in (
        event_from_json(data),
        stored_event_from_json(data),
        Event.from_json(json.dumps(data)),
    ):
        assert type(back) is Event and back.attributes == {"n": 1}
    assert type(event_from_json({k: v for k, v in data.items() if k != "$class"})) is module.Bad
