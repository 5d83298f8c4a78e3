"""The error output is the framework's own: a secret it knows never leaves through it.

A record that holds the value of a registered secret (an API key an upstream system wrote
into an event, say) and whose run fails reaches the error output with the run's input: the
known secret is masked there, wherever it sits in the record (a value, a key, a list, a
longer text); a value that merely looks like a key is the user's data and is kept.
"""

from __future__ import annotations

import json
import os

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
    register_secret,
)


class Fails(Agent):
    @action(InputEvent)
    @staticmethod
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("fail"):
            raise RuntimeError("cannot work on this record")
        ctx.send_event(OutputEvent(output=event.input))


def test_a_known_secret_in_a_failed_runs_input_is_masked_on_the_error_output():
    secret = f"Zq8-local-{os.urandom(12).hex()}"
    register_secret(secret, "$TEST_ERROR_RECORD_KEY")
    look_alike = "sk-" + "a" * 40  # a value shaped like a key, not one this process knows
    records = [
        {"key": "a", "fail": True, "token": secret, "notes": [f"Bearer {secret}!"],
         secret: "as a field name", "other": look_alike},
        {"key": "b", "fail": False, "n": 1},
    ]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Fails()).run()
    assert res.outputs == [records[1]]  # the good record is not lost
    [error] = res.errors
    shown = json.dumps(error.model_dump(mode="json"))
    assert secret not in shown
    assert error.key == "a" and error.error_type == "RuntimeError"
    assert error.input["other"] == look_alike and error.input["key"] == "a"
    assert error.input["token"] != secret and error.input["notes"][0].startswith("Bearer ")
    assert "as a field name" in error.input.values()
