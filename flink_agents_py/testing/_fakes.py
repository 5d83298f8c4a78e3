"""Test doubles: scripted chat models from a function or a list of turns, and call counters.

Both models are ``ScriptedChatModel`` connections (a real connection, not a mock), so an
agent's chat and tool rounds, durable calls and replays run as they do with a provider.
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..api import ChatMessage, MessageRole, ToolCall
from ..integrations.chat_models import ScriptedChatModel, ScriptedRequest
from ..integrations.internal import (
    ANSWER_TYPES,
    is_answer,
    script_answer,
    tool_call_message,
)

__all__ = ["CallCounter", "model_from_function", "model_from_turns", "tool_call", "tool_calls"]


def tool_call(name: str, id: str | None = None, /, **arguments: Any) -> ToolCall:
    """One tool call a scripted model makes: ``tool_call("lookup", q="shoes")``.

    Args:
        name: the tool's name (as offered to the model).
        id: the call's id (default: ``call_<name>``); ids must differ within one turn.
        **arguments: the tool's arguments.

    Returns:
        The ``ToolCall``.
    """
    return ToolCall(id=id or f"call_{name}", name=name, arguments=arguments)


def tool_calls(*calls: ToolCall) -> ChatMessage:
    """An assistant message calling ``calls`` (one turn of a scripted model).

    Args:
        *calls: the tool calls (``tool_call(...)``).

    Returns:
        The message.

    Raises:
        ValueError: when two calls share an id.
    """
    return tool_call_message(calls)


def model_from_function(fn: Callable[[ScriptedRequest], Any],
                        **fields: Any) -> ScriptedChatModel:
    """A chat model connection answering by ``fn(request)``.

    Register it as the connection of a chat model setup:
    ``agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(fn))``.

    Args:
        fn: takes the ``ScriptedRequest`` (messages, tools, output schema, options; helpers
            ``last_user_text`` and ``tool_results``) and returns the answer, as a turn of
            ``model_from_turns``: a ``str``, a JSON ``dict`` or ``list`` (sent as JSON text),
            a ``ChatMessage`` (e.g. ``tool_calls(...)``), a ``ChatResponse``, a ``ToolCall``
            or a list of them. Anything else (``None`` included) fails the chat with a
            ``TypeError`` naming ``fn``. It must answer the same request the same way every
            time (replays and the replay-safety checker rely on it).
        **fields: other fields of the connection, e.g. ``flow_control=FlowControl(...)``
            to test flow control against it.

    Returns:
        The connection (its ``calls`` and ``requests`` tell what it answered). It pickles
        (a lambda or closure ``fn`` with cloudpickle, as Flink ships it).
    """
    return ScriptedChatModel.from_function(fn, **fields)


class _Turns:
    """Answers the n-th model turn of an exchange with ``turns[n]`` (picklable)."""

    def __init__(self, turns: Sequence[Any]) -> None:
        if not turns:
            raise ValueError("model_from_turns needs at least one turn")
        for i, t in enumerate(turns):
            if not is_answer(t) and not callable(t):
                raise TypeError(f"turn {i} is a {type(t).__name__}: a turn is {ANSWER_TYPES}, "
                                "or a function of the request returning one")
        self.turns = list(turns)

    def __call__(self, request: ScriptedRequest) -> Any:
        n = 0
        for m in reversed(request.messages):
            if m.role == MessageRole.USER:
                break
            n += m.role == MessageRole.ASSISTANT
        if n >= len(self.turns):
            raise IndexError(f"the scripted model has {len(self.turns)} turns; this request "
                             f"is turn {n + 1} of its exchange (assistant messages after the "
                             "last user message + 1)")
        turn = self.turns[n]
        if is_answer(turn):
            return script_answer(turn, f"turns[{n}]")
        return script_answer(turn(request), turn, f"turns[{n}]")


def model_from_turns(turns: Iterable[Any], **fields: Any) -> ScriptedChatModel:
    """A chat model connection that plays ``turns`` in order within each exchange.

    The turn answering a request is chosen by the conversation, not by a global counter:
    the first turn answers a request whose last message is the user's, the second one the
    request after one assistant message (e.g. with the tool results of the first turn's
    calls), and so on. So every key, every ``ctx.chat`` and every replay gets the same
    answers, however requests interleave.

    Args:
        turns: each a ``str``, a JSON ``dict`` or ``list`` (sent as JSON text), a
            ``ChatMessage``, a ``ChatResponse``, a ``ToolCall`` or a list of them (an
            assistant message calling those tools), or a function of the request.
        **fields: other fields of the connection, e.g. ``flow_control=FlowControl(...)``.

    Returns:
        The connection. A request past the last turn fails with ``IndexError`` (the chat
        fails, as a provider error would).

    Raises:
        ValueError: when there is no turn.
        TypeError: for a turn of another type (names its position).
    """
    return ScriptedChatModel.from_function(_Turns(list(turns)), **fields)


class CallCounter:
    """Counts calls by name, thread-safely (tools and fakes run on executor threads).

    ``counter.wrap(fn)`` returns ``fn`` counting its calls under its name (signature,
    docstring and qualified name kept, so it is a tool like ``fn``); ``counter.count(name)``
    counts by hand; ``counter[name]`` reads. Pass ``counter.reset`` as the ``reset`` of
    ``check_replay_safety``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()

    def __getstate__(self) -> dict[str, Any]:
        # picklable (the checker sends ``counter.reset`` to another process): counts only
        with self._lock:
            return {"counts": dict(self._counts)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._counts = collections.Counter(state["counts"])

    def count(self, name: str, n: int = 1) -> int:
        """Add ``n`` calls of ``name``.

        Args:
            name: the counter's name.
            n: how many calls to add.

        Returns:
            The counter's new value.
        """
        with self._lock:
            self._counts[name] += n
            return self._counts[name]

    def wrap(self, fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
        """``fn``, counting each call under ``name``.

        The wrapper is a closure: fine on the local runner; on Flink, count inside the
        function instead (workers do not share this process's counters anyway).

        Args:
            fn: the function.
            name: the counter's name (default: ``fn.__name__``).

        Returns:
            The counting wrapper.
        """
        label = name or fn.__name__

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count(label)
            return fn(*args, **kwargs)

        return counted

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._counts[name]

    @property
    def total(self) -> int:
        """All calls counted."""
        with self._lock:
            return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        """The counts by name (a copy)."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Set every count back to zero."""
        with self._lock:
            self._counts.clear()

    def __repr__(self) -> str:
        return f"CallCounter({self.as_dict()})"
