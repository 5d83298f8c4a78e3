"""Mistakes in an agents document that passed, and are now named at their line."""

from __future__ import annotations

import pytest

from flink_agents_py.yaml import YamlError, load_agents

HEAD = """\
agents:
  - name: a
    actions:
      - {name: go, function: "support.yaml_helpers:start", on: [InputEvent]}
"""


@pytest.mark.parametrize("cls", ["support.yaml_helpers:ReviewDone",
                                 "flink_agents_py.api:InputEvent"])
def test_an_action_naming_an_event_class_is_refused_at_its_function(cls):
    """An ``Event`` class takes ``*args``, so it passed the ``(event, ctx)`` check, and every
    record failed at run time with ``ReviewDone() takes at most 0 positional argument(s)``."""
    with pytest.raises(YamlError) as info:
        load_agents(HEAD.replace("support.yaml_helpers:start", cls))
    assert info.value.problems == [
        f"<string>:4: agents[0].actions[0].function: {cls!r} is a class, not a function: name "
        f"the function taking (event, ctx) that the action runs"]

