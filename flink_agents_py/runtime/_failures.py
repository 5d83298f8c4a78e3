"""Failure text: bounded, redacted tracebacks that name the user's file and line.

Every place that records a failure (an ``ErrorRecord``, a durable call record, a failed
invocation, a tool result, a chat's answer, the event log, the log line) keeps the same
text, made here, and only when something failed (the hot path formats nothing).

A failure that crosses a boundary (a tool run by the built-in tool action, a model call of
the chat action, an internal sub-agent's action, a durable call recorded before a restore)
is carried as text and re-attached to the exception the caller sees as its ``__cause__``,
an ``OriginalFailure``: Python's own formatting (``logging``'s ``exc_info``,
``traceback.print_exc``) then shows the original failure too, as ``multiprocessing`` does for
a worker's exception.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import traceback
from typing import Any

from ..api import UsageError, mask_secrets
from ..api.internal import clip, error_text, shown_key, validation_masked
from ._terminal import log_text

__all__ = ["FailureLog", "FailureMessage", "OriginalFailure", "OWN_NOTE", "TOOL_FAILURES",
           "unless_stopping",
           "TRACEBACK_MAX_CHARS", "TRACEBACK_MAX_FRAMES", "clip", "error_text", "failure_text",
           "format_failure", "never_awaited", "redact_text", "reported_error",
           "unless_cancelled", "with_original", "with_recorded"]

TRACEBACK_MAX_FRAMES = 40
"""Frames kept per exception of a chain (the first 3 and the deepest ones)."""

TRACEBACK_MAX_CHARS = 8000
"""The longest failure text kept (the end is kept: the deepest frames and the error)."""


_MAX_CHAIN = 6

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


TOOL_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit, asyncio.CancelledError)
"""What a tool call reports to the model as the tool's failure: any ``Exception``, a
``SystemExit`` (a wrapped command-line tool's ``sys.exit``) and a ``CancelledError`` of the
tool's own (``unless_cancelled``); ``KeyboardInterrupt`` and the call's own cancellation go
on."""


PROCESS_STOPS: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit)
"""What an action raises that stops the process instead of failing the action."""


def unless_stopping(error: BaseException) -> None:
    """Raise ``error`` again when it stops the process rather than failing an action.

    An action that raises any other ``BaseException`` (an ``asyncio.CancelledError`` or a
    ``GeneratorExit`` of its own, a ``BaseException`` subclass of the user's) fails that
    action alone: its error record names the key and the event, and the key goes on. Before,
    such an error left the operator's callback with the action still live, so a Flink job
    restored into the same action and raised again, without end. The core steps an action's
    coroutine itself (it awaits no asyncio task), so no such error is the runtime cancelling
    it; only ``KeyboardInterrupt`` and ``SystemExit`` (``PROCESS_STOPS``) end the process.

    Args:
        error: what the action raised.

    Raises:
        KeyboardInterrupt: ``error``, when it is one.
        SystemExit: ``error``, when it is one.
    """
    if isinstance(error, PROCESS_STOPS):
        raise error


def unless_cancelled(error: BaseException) -> None:
    """Raise ``error`` again when it is the running task's own cancellation.

    A ``CancelledError`` a tool raises while its task was not asked to stop (it awaited
    something cancelled inside) is the tool's failure; one while the task is being
    cancelled is the call's cancellation (Python 3.10, which cannot tell: always that).

    Args:
        error: what the tool raised.

    Raises:
        asyncio.CancelledError: ``error``, when it is the task's own cancellation.
    """
    if not isinstance(error, asyncio.CancelledError):
        return
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    if cancelling is None or cancelling() > 0:
        raise error


def redact_text(text: str) -> str:
    """``text`` with known secrets and secret-looking substrings replaced by ``[REDACTED]``.

    The values of ``api_key_env`` variables and other registered secrets, in their escaped
    and encoded forms, then ``SECRET_VALUE_PATTERNS`` (``api.mask_secrets``).

    Returns:
        The masked text.
    """
    return mask_secrets(text)


class OriginalFailure(Exception):
    """A failure that happened elsewhere, as its recorded traceback text.

    Set as the ``__cause__`` of the exception a caller sees (``with_original``), so the
    original file and line stay visible after the failure crossed an action, a chat, a
    sub-agent call or a restore.

    Args:
        text: the original failure's text (from ``format_failure``).
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n" + self.text

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.text,))


def with_original(error: BaseException, text: str | None) -> BaseException:
    """Attach ``text`` (an original failure's traceback) to ``error``'s cause chain.

    A rebuilt failure may have a rebuilt cause (``raise ... from e``): the text goes at the
    end of that chain, so ``error.__cause__`` stays what the live path had.

    Returns:
        ``error`` (unchanged when ``text`` is empty or its chain ends in one already).
    """
    last, depth = error, 0
    while last.__cause__ is not None and depth < 8:
        last, depth = last.__cause__, depth + 1
    if text and last.__cause__ is None and not isinstance(last, OriginalFailure):
        last.__cause__ = OriginalFailure(text)
    return error


OWN_NOTE = "flink-agents-py:"
"""How the notes the runtime adds to an exception start (they are not recorded with it)."""
_RECORDED_NOTE = f"{OWN_NOTE} where it failed, as recorded before this replay:\n"


def with_recorded(error: BaseException, text: str | None) -> BaseException:
    """Keep a replayed failure's recorded traceback beside its chain, not in it.

    A replayed exception has the ``__cause__`` and ``__context__`` the live run's had
    (rebuilt from its record); the traceback text recorded where it was raised is kept
    apart, so ``e.__cause__`` is not an ``OriginalFailure`` where the live run had none: as
    a note (``e.__notes__``, shown by Python's formatting after the message), and for the
    failure's text (``format_failure``: as if it were the cause).

    Args:
        error: the exception rebuilt from a record.
        text: the recorded traceback (``None`` or ``""``: none).

    Returns:
        ``error``.
    """
    if text:
        try:
            error._agents_recorded = text  # type: ignore[attr-defined]
            notes = [*(getattr(error, "__notes__", None) or ()), _RECORDED_NOTE + text]
            setattr(error, "__notes__", notes)  # noqa: B010 - (``add_note``: Python 3.11+)
        except Exception:  # noqa: BLE001 - an exception that takes no attributes
            return with_original(error, text)
    return error


def _internal_dirs() -> tuple[str, ...]:
    here = os.path.dirname(os.path.abspath(__file__))
    return tuple(os.path.join(os.path.dirname(os.path.abspath(m.__file__ or "")), "")
                 for m in (asyncio, concurrent.futures)) + (os.path.join(here, ""),)


_INTERNAL_DIRS = _internal_dirs()
_INTERNAL_FILES = (os.path.abspath(threading.__file__ or ""),)


def _internal(frame: traceback.FrameSummary) -> bool:
    name = frame.filename
    return name.startswith(_INTERNAL_DIRS) or name in _INTERNAL_FILES


def _frame_lines(frame: traceback.FrameSummary) -> str:
    text = f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n'
    if frame.line:
        text += f"    {frame.line.strip()}\n"
    return text


def _stack(error: BaseException, max_frames: int) -> str:
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    parts: list[str] = []
    hidden = 0
    for i, frame in enumerate(frames):
        # the runtime's own frames (and asyncio's, the executor's) between user frames say
        # nothing to a user: one line stands for them; the deepest frame is always shown
        if _internal(frame) and i < len(frames) - 1:
            hidden += 1
            continue
        if hidden:
            parts.append(f"  [... {hidden} runtime frame{'s' if hidden > 1 else ''} ...]\n")
            hidden = 0
        parts.append(_frame_lines(frame))
    if len(parts) > max_frames:
        head = 3
        tail = max(max_frames - head, 1)
        omitted = len(parts) - head - tail
        parts = [*parts[:head], f"  [... {omitted} frames omitted ...]\n", *parts[-tail:]]
    if not parts:
        return ""
    return "Traceback (most recent call last):\n" + "".join(parts)


def _only(error: BaseException) -> str:
    recorded = getattr(error, "_agents_recorded", None)  # (``with_recorded``: shown apart)
    error = validation_masked(error)  # what pydantic quotes, masked before it cuts it
    text = "".join(traceback.format_exception_only(type(error), error))
    return text.replace(_RECORDED_NOTE + recorded + "\n", "") if isinstance(recorded, str) \
        else text


def format_failure(error: BaseException, *, max_frames: int = TRACEBACK_MAX_FRAMES,
                   max_chars: int = TRACEBACK_MAX_CHARS) -> str:
    """The traceback of ``error`` and its causes, bounded and redacted.

    Like Python's own, oldest cause first; an ``OriginalFailure`` cause is its recorded
    text. Runs of runtime frames between user frames are folded into one line, each
    exception keeps at most ``max_frames`` frames (its first 3 and its deepest), secret-looking
    values are replaced (``redact_text``), and a text longer than ``max_chars`` keeps its end.

    Args:
        error: the exception (its ``__traceback__`` is read, not changed).
        max_frames: frames kept per exception of the chain.
        max_chars: the longest text returned (``<= 0``: no limit).

    Returns:
        The text, ending with the exception's type and message.
    """
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    exc: BaseException | None = error
    link = ""
    while exc is not None and id(exc) not in seen and len(chain) < _MAX_CHAIN:
        seen.add(id(exc))
        chain.append((exc, link))
        recorded = getattr(exc, "_agents_recorded", None)
        if isinstance(recorded, str):  # a replayed failure: its chain is in the recorded text
            chain.append((OriginalFailure(recorded), _CAUSE))
            break
        if exc.__cause__ is not None:
            exc, link = exc.__cause__, _CAUSE
        elif exc.__context__ is not None and not exc.__suppress_context__:
            exc, link = exc.__context__, _CONTEXT
        else:
            exc = None
    out: list[str] = []
    for exc, link_after in reversed(chain):
        if isinstance(exc, OriginalFailure):
            out.append(exc.text.rstrip("\n") + "\n")
        else:
            out.append(_stack(exc, max_frames) + _only(exc))
        if link_after:
            out.append(link_after)
    text = redact_text("".join(out)).rstrip("\n")
    if 0 < max_chars < len(text):
        marker = f"[... {len(text) - max_chars} chars omitted ...]\n"
        keep = max(max_chars - len(marker) - 24, 0)
        marker = f"[... {len(text) - keep} chars omitted ...]\n"
        text = marker + text[len(text) - keep:]
    return text


def failure_text(error: BaseException) -> str:
    """``format_failure(error)``, made once per exception object and traceback.

    The text is cached on the exception while its ``__traceback__`` stays the same (a
    re-raised exception gets a longer traceback, and a new text).

    Returns:
        The failure's text.
    """
    tb, depth = error.__traceback__, 0
    while tb is not None:
        depth += 1
        tb = tb.tb_next
    mark = (id(error.__traceback__), depth)  # plain values: the exception stays picklable
    cached = getattr(error, "_agents_failure_text", None)
    if isinstance(cached, tuple) and len(cached) == 2 and cached[0] == mark:
        return str(cached[1])
    text = format_failure(error)
    try:
        error._agents_failure_text = (mark, text)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type without a __dict__
        pass
    return text


class FailureMessage(str):
    """A failed durable call's message, as the core hands it to ``Observer.call_finished``.

    The failure's ``traceback`` (text, or ``None``) is attached.
    """

    traceback: str | None

    def __new__(cls, message: str, traceback: str | None = None) -> FailureMessage:
        self = super().__new__(cls, message)
        self.traceback = traceback
        return self


_SHOWN_ID_CHARS = 160
"""The longest execution id a log line shows whole (a chain of actions makes it long)."""


def shown_execution_id(execution_id: str) -> str:
    """``execution_id`` for a log line: whole when short, else its start and its end.

    An execution id grows by two segments per action of an event chain (8 KB at the
    ``EventChainLimitError`` limit); the error record keeps it whole.

    Returns:
        The id, or ``r0/ping/e0/.../e0/ping/e0/ping (2,001 segments)``.
    """
    if len(execution_id) <= _SHOWN_ID_CHARS:
        return execution_id
    parts = execution_id.split("/")
    return f"{'/'.join(parts[:3])}/.../{'/'.join(parts[-5:])} ({len(parts):,} segments)"


class FailureLog:
    """Logs failed actions, without writing thousands of identical tracebacks.

    The traceback at WARNING the first time an action fails with an error type at a place
    (the file and line it was raised at), then one line at WARNING and the traceback at DEBUG.

    Args:
        logger: where to log.
        distinct: how many ``(action, error type, place)`` get their traceback at WARNING.
    """

    def __init__(self, logger: logging.Logger, distinct: int = 1024) -> None:
        self.logger = logger
        self.distinct = distinct
        self._seen: set[tuple[str, str, str]] = set()

    def action_failed(self, execution_id: str, action: str, key: Any, error: BaseException,
                      message: str, text: str) -> None:
        """Log one failed action execution (``message`` and ``text`` already redacted).

        The message is cut to ``MESSAGE_MAX_CHARS`` (the error record keeps it whole, and
        the traceback is bounded already) and both are escaped (``log_text``).
        """
        tb = error.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        place = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
        kind = (action, type(error).__name__, place)
        execution_id = shown_execution_id(execution_id)
        message, text = log_text(clip(message)), log_text(text)  # may quote a record, a model
        shown = shown_key(key)  # bounded: a key comes from a record, of any size
        if kind not in self._seen and len(self._seen) < self.distinct:
            self._seen.add(kind)
            self.logger.warning("action %s failed for key %s: %s: %s\n%s", execution_id, shown,
                                type(error).__name__, message, text)
            return
        self.logger.warning("action %s failed for key %s: %s: %s (traceback: in the error "
                            "record, at the first such failure, and at DEBUG)", execution_id,
                            shown, type(error).__name__, message)
        self.logger.debug("traceback of action %s:\n%s", execution_id, text)


def reported_error(event: Any) -> str:
    """What to add to the message of an action that failed handling ``event``.

    An event can carry an error (a failed chat's ``ChatResponseEvent`` has ``error`` set and
    no ``response``); an action that does not check it fails on something else (``'NoneType'
    object has no attribute 'message'``), and the error that explains it would be seen
    nowhere. So it is named in the failure.

    Returns:
        ``" (while handling <type> <id>, which carries an error: <error>)"``, or ``""``.
    """
    error = getattr(event, "error", None)
    if not isinstance(error, str) or not error:
        return ""
    return (f" (while handling {getattr(event, 'type', type(event).__name__)} "
            f"{getattr(event, 'id', '')}, which carries an error: {error})")


def never_awaited(action: str, calls: dict[int, Any]) -> UsageError | None:
    """The misuse of a plain (``def``) action that made calls it had to await.

    A lazy call (``ctx.chat``) starts only when awaited and a wait or sleep waits only when
    awaited (``_calls.unawaited``), which a plain function cannot do. (A
    ``durable_execute_async`` call a plain action does not await has started: the action
    completes once its outcome is recorded, see ``_completion``.)

    Args:
        action: the action's name.
        calls: the ``DurableCall`` objects the action made (by ordinal).

    Returns:
        The error to fail the action with, or ``None``.
    """
    if not calls:  # the usual plain action: no calls at all
        return None
    from .context._calls import unawaited, unawaited_effect

    made = sorted({m for m in map(unawaited, calls.values()) if m})
    if not made:
        return None
    sites = list(dict.fromkeys(f"{m} at {c.site}" for c in calls.values()
                               if (m := unawaited(c)) and getattr(c, "site", "")))
    effects = "; ".join(dict.fromkeys(unawaited_effect(m) for m in made))
    example = ("await ctx.sleep(...)" if made == ["ctx.sleep(...)"]
               else "value = await ctx.wait_for(...)" if "ctx.wait_for(...)" in made
               else "response = await ctx.chat(...)")
    return UsageError(
        f"action {action!r} is not async, but it made durable calls that take effect only "
        f"when awaited ({', '.join(sites or made)}), {effects}. Declare it 'async def' and "
        f"'await' them (e.g. {example})")
