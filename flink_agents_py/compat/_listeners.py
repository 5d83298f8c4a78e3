"""Apache Flink Agents' event listeners (its main branch, newer than 0.3).

Its ``api/listener/event_listener.py``: an ``EventListener`` class with a no-argument
constructor and ``on_event_processed(context, event)``, named in the configuration's
``AgentConfigOptions.EVENT_LISTENERS`` (the class, or its text ``module:Class`` /
``module:Class.on_event_processed``, which is ``str(cls)``), is called with an
``EventContext`` (``eventType``, ``timestamp``) for every event the agent processes, before
its actions; what it raises is logged and changes nothing. Here each listener is an
``Observer`` of the agent's operator (``event_dispatched``), locally and on Flink.
"""

from __future__ import annotations

import datetime
import inspect
import logging
from abc import ABC, ABCMeta, abstractmethod
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..api import Event
from ..api.internal import import_qualified
from ..observability.internal import APACHE_EVENT_TYPES
from ..runtime import Observer

__all__ = ["EventContext", "EventListener", "ListenersObserver"]

log = logging.getLogger(__name__)


class EventContext(BaseModel):
    """What a listener is told with an event: its type and when it was processed."""

    eventType: str  # noqa: N815 - Flink Agents' name
    timestamp: str


class _ListenerMeta(ABCMeta):
    def __str__(cls) -> str:
        """``module:Qualname.on_event_processed``, how Flink Agents names a listener class.

        Raises:
            ValueError: for a class defined inside a function (it cannot be imported).
        """  # noqa: DOC201
        if "<locals>" in cls.__qualname__:
            raise ValueError(f"Cannot instantiate local class in '{cls.__qualname__}': "
                             "move the listener class to the module level")
        module = inspect.getmodule(cls)
        name = module.__name__ if module is not None else cls.__module__
        file = getattr(module, "__file__", None)
        if name == "__main__" and file:
            name = Path(str(file)).stem
        return f"{name}:{cls.__qualname__}.on_event_processed"


class EventListener(ABC, metaclass=_ListenerMeta):
    """Called for each event an agent processes (Flink Agents' listener interface)."""

    @abstractmethod
    def on_event_processed(self, context: EventContext, event: Event) -> None:
        """Look at ``event`` (before the actions it triggers run); do not raise."""


def _listener(spec: Any) -> Any:
    """An instance of the listener ``spec`` names (a class, its text, or an instance)."""
    if isinstance(spec, str):
        path = spec.strip().removesuffix(".on_event_processed")
        spec = import_qualified(path)
    return spec() if isinstance(spec, type) else spec


class ListenersObserver(Observer):
    """Calls each configured listener's ``on_event_processed`` for every dispatched event.

    Args:
        listeners: the ``EVENT_LISTENERS`` value: listener classes, their text, or instances.
    """

    def __init__(self, listeners: Any) -> None:
        specs = [listeners] if isinstance(listeners, (str, type)) else list(listeners or ())
        self._specs = specs
        self._listeners: list[Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_specs": self._specs, "_listeners": None}  # built again where it runs

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        """Tell each listener (one that raises is logged; the event goes on)."""
        if self._listeners is None:
            self._listeners = [_listener(s) for s in self._specs]
        context = EventContext(
            eventType=APACHE_EVENT_TYPES.get(event.type, event.type),
            timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat())
        for listener in self._listeners:
            try:
                listener.on_event_processed(context, event)
            except Exception:
                log.exception("event listener %s raised on event %s (%s); ignored",
                              type(listener).__name__, event.id, event.type)
