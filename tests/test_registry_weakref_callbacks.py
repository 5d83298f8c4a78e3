"""Per-object registries whose entries a weakref callback drops, entered by that callback.

The flow controller of a connection (``runtime._flow``), the stand-in connection of a setup
that calls its own model (``runtime._own_chat``) and an agent-wide spend ledger
(``runtime._budgets``) are each kept in a registry under a lock, and dropped by a weakref
callback, which takes the same lock, when their object is collected. The cyclic garbage
collector runs such callbacks at any allocation, so on a thread that already holds the
lock too (making another connection's controller): with a plain lock that thread waited for
itself, and every model call of the job behind it (a CI run hung in its crash checker with
every I/O thread stuck in ``flow_controller``). Here the last reference of a registered
object is dropped while its registry's lock is held on the thread, as the collector would,
in a thread of its own so that a hang fails the test instead of stalling it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest

from flink_agents_py.api import Budget, ChatModelSetup
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.runtime import _budgets, _flow, _own_chat
from flink_agents_py.runtime._per_object import PerObject


def _connection() -> Any:
    return OpenAIChatModel(base_url="http://127.0.0.1:1/v1")


def _setup() -> Any:
    return ChatModelSetup(connection="conn", model="m", budget=Budget(max_tokens=10))


REGISTRIES: dict[str, tuple[Callable[[], Any], Callable[[Any], Any], Any]] = {
    "flow controllers": (_connection, _flow.flow_controller, _flow._CONTROLLERS),
    "own-chat stand-ins": (_setup, _own_chat._stand_in, _own_chat._STAND_INS),
    "spend ledgers": (_setup, _budgets.agent_spend, _budgets._LEDGERS),
}


@pytest.mark.parametrize("name", sorted(REGISTRIES))
def test_an_object_collected_while_its_registry_is_held_is_forgotten_without_a_hang(name):
    make, register, registry = REGISTRIES[name]
    outcome: list[Any] = []

    def scenario() -> None:
        obj = make()
        register(obj)
        key = id(obj)
        assert key in registry._entries
        with registry._lock:  # as inside the registry's own section, on this thread
            del obj  # the last reference: the weakref callback runs here and now
            gc.collect()
            outcome.append(key not in registry._entries)
        again = make()
        outcome.append(register(again) is register(again))  # still usable afterwards

    worker = threading.Thread(target=scenario, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), f"the {name} registry's lock hung its own thread"
    assert outcome == [True, True]


def test_a_value_is_kept_per_live_object_and_an_id_reused_by_another_object_is_not_confused():
    registry: PerObject[list[int]] = PerObject()
    made: list[int] = []

    class Thing:
        pass

    def make() -> list[int]:
        made.append(1)
        return [len(made)]

    first = Thing()
    value = registry.get_or_make(first, make)
    assert registry.get_or_make(first, make) is value and registry.get(first) is value
    assert registry.get(Thing()) is None and len(made) == 1
    del first
    gc.collect()
    assert len(registry) == 0  # dropped with its object
    again = Thing()  # may reuse the freed id: it still gets a value of its own
    assert registry.get(again) is None and registry.get_or_make(again, make) == [2]
