"""What the core hands out at a run's edges.

The run's input event, error records, and the result of one host callback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Annotated, Any, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainSerializer
from pydantic_core import to_jsonable_python

from ...api import Event, InputEvent, SerializationError
from ...api.internal import (
    KEY_TYPES,
    MaskedStr,
    cut_masked,
    key_json,
    mask_known_value,
    shown_key,
    stored_event_from_json,
)
from .._chat_request import request_event
from .._failures import clip, unless_stopping
from .._serde import from_json_value, is_tagged_model, to_json_value, unshared
from .._terminal import log_text
from .._typed_fields import TYPED_KEY

__all__ = ["ErrorRecord", "StepResult", "input_event", "input_record", "event_of",
           "RejectedKey", "select_key", "rejected_record", "shown_input", "input_form",
           "unqueued_record", "UnreadableRecord"]

log = logging.getLogger("flink_agents_py.runtime")

_PLAIN = frozenset({str, int, float, bool, type(None)})
_INPUT_KEYS = frozenset({"id", "type", "attributes", "input"})
_TEXT = frozenset({str})


class ErrorRecord(BaseModel):
    """An action that failed, as emitted on the error output.

    Attributes:
        key: the record key.
        seq: the input's position in its key's sequence.
        action: the failing action's name.
        execution_id: the failing execution's identity.
        error_type: the exception's type name.
        message: the exception's message (known secrets and secret-looking values masked
            when the record is made, by whoever makes it: ``api.mask_secrets``).
        input: the input record of the run (the secrets this process knows masked in its
            strings when the record is made: ``api.internal.mask_known_value``; a value that
            merely looks like a key is left as it is, the record being the user's data).
        traceback: where it failed: the traceback with the user's files and lines, and the
            original failure's when it crossed a boundary (a tool, a chat model call, a
            sub-agent, a restore); bounded and redacted (see ``runtime._failures``).
        source: where the run's input was read, when its source says so (a record of
            ``from_kafka``: ``"topic T partition P offset O"``); ``None`` otherwise.
        file: the file a bad line was read from (its real path, as the ``"file"`` of the
            reader's error row on Flink); ``None`` when the record is not a file's bad line.

    Its JSON form (``model_dump(mode="json")``, the rows of Flink's error output) keeps a
    float NaN or infinity of the input as it was (``NaN`` in JSON text), not ``None``: a
    record rejected for its NaN key shows that key. Its ``key`` there is the key's JSON form
    (``runtime.key_json``: a tuple a list, a ``UUID`` ``{"uuid": "..."}``;
    ``runtime.key_from_json`` gives the key back).
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")

    key: Annotated[Any, PlainSerializer(key_json, when_used="json")]
    seq: int
    action: str
    execution_id: str
    error_type: str
    message: MaskedStr
    input: Annotated[Any, AfterValidator(mask_known_value)] = None
    traceback: MaskedStr | None = None
    source: str | None = None
    file: str | None = None

    def json_row(self) -> dict[str, Any]:
        """Its JSON form, as the Flink error output carries it.

        An input pydantic cannot write (nested deeper than its 255 levels) is shown by its
        bounded ``repr`` (``shown_input``), so that the row, and the job, go on.

        Returns:
            ``model_dump(mode="json")``.
        """
        try:
            return self.model_dump(mode="json")
        except (ValueError, RecursionError):  # PydanticSerializationError is a ValueError
            return self.model_copy(update={"input": shown_input(self.input)}).model_dump(
                mode="json")

    def __str__(self) -> str:
        """One line: key, position, error (``print(error)``; ``repr`` has every field)."""
        from .._unread import error_line

        return error_line(self)


@dataclass
class StepResult:
    """What one ``advance`` produced.

    Attributes:
        outputs: ``OutputEvent.output`` values, in emission order.
        errors: failed actions.
        busy: the key still has a run in flight or queued inputs (the host must wake it
            again when I/O completes; see ``AgentCore.wait_for``). A parked run is not
            busy: only an outside event or a timer moves it on.
        parked: the key's run is parked (``RunState.parked``): every action in flight waits
            for an outside event or a timer, and the host keeps nothing of it in memory.
        timers: deadlines of waits opened, in the host clock's milliseconds: the host calls
            ``AgentCore.on_timers`` for the key at (or after) each; ``None``: none.
        ended_timers: set when a run of the key that had waits ended: the deadlines of its
            waits that had not fired (of no use any more). The host deletes those timers
            and the key's end-of-input timer, then registers ``timers`` (and the end-of-input
            timer again when ``parked``); ``None``: no such run ended.
    """

    outputs: list[Any] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    busy: bool = False
    parked: bool = False
    timers: list[int] | None = None
    ended_timers: list[int] | None = None


def input_record(stored: Any) -> Any:
    """A queued input record (its stored JSON form) as the agent's error output shows it.

    A pydantic model is the model again.

    Returns:
        The record.
    """
    return from_json_value(stored) if is_tagged_model(stored) else stored


def _rebuilt(value: Any) -> Any:
    """A copy of stored JSON-form data with its tagged pydantic models rebuilt.

    A model that cannot be rebuilt here (its class cannot be imported in this process, or it
    rejects its stored fields) stays its fields, with a warning once per class.

    Returns:
        The copy (plain data is copied, so an action may change it freely).
    """
    try:
        return _rebuilt_walk(value)
    except RecursionError:  # nested deeper than the stack has room for here
        return _rebuilt_deep(value)


def _rebuilt_walk(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        if len(value) == 2 and "$model" in value and "data" in value:  # is_tagged_model
            inner = value["data"]
            if value["$model"] is None and type(inner) is dict:  # an escaped plain dict
                return {k: v if type(v) in _PLAIN else _rebuilt_walk(v) for k, v in inner.items()}
            model = _model_or_none(value)
            return _rebuilt_walk(value["data"]) if model is None else model[0]
        return {k: v if type(v) in _PLAIN else _rebuilt_walk(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _PLAIN else _rebuilt_walk(v) for v in value]
    return value


def _model_or_none(tagged: dict[str, Any]) -> tuple[Any] | None:
    """``(model,)`` rebuilt from a tagged model's stored form, or ``None`` (warned once)."""
    try:
        return (from_json_value(tagged),)
    except Exception as e:  # noqa: BLE001 - the fields still reach the action
        tag = str(tagged["$model"])
        if tag not in _UNREBUILT:
            _UNREBUILT.add(tag)
            log.warning("an input of model class %s reaches its action as a dict: "
                        "the class cannot be rebuilt here (%s: %s); define it in a "
                        "module the workers can import", tag, type(e).__name__, e)
        return None


def _rebuilt_deep(value: Any) -> Any:
    """``_rebuilt`` without recursion, for a value nested deeper than the stack has room for.

    Returns:
        The copy.
    """
    root: list[Any] = [None]
    todo: list[tuple[Any, Any, Any]] = [(root, 0, value)]  # (container, slot, stored value)
    while todo:
        target, slot, item = todo.pop()
        if type(item) is dict and len(item) == 2 and "$model" in item and "data" in item:
            inner = item["data"]
            if item["$model"] is None and type(inner) is dict:  # an escaped plain dict
                item = inner
            else:
                model = _model_or_none(item)
                if model is None:
                    todo.append((target, slot, inner))
                else:
                    target[slot] = model[0]
                continue
        if type(item) is dict:
            copy: Any = dict(item)
            todo.extend((copy, k, v) for k, v in item.items() if type(v) not in _PLAIN)
        elif type(item) is list:
            copy = list(item)
            todo.extend((copy, i, v) for i, v in enumerate(item) if type(v) not in _PLAIN)
        else:
            copy = item
        target[slot] = copy
    return root[0]


_UNREBUILT: set[str] = set()
"""Model tags already warned about by ``_rebuilt``."""


def input_event(event_id: str, stored: Any,
                fresh: Any = None) -> tuple[InputEvent, dict[str, Any]]:
    """The ``InputEvent`` of a run and its JSON form, from the input's stored JSON form.

    The input was checked when it was queued, so its JSON form is built directly (no second
    walk): it is the stored form, pydantic models tagged with their class, so a replay
    rebuilds the same types. The event's ``input`` is a copy with the models rebuilt (an
    input that was a ``ProductReview`` is one in the action, on every path).

    Args:
        event_id: the event's id.
        stored: the input's stored JSON form.
        fresh: the record ``stored`` was made from, when no one else holds it (the Flink
            operator's freshly decoded record), else ``None``. A flat ``dict`` of exact
            ``str`` keys and exact scalar values is what a copy of ``stored`` would be, type
            for type, so it reaches the action as it is (no second copy); any other record
            (a ``dict`` subclass, a tuple, a model, a nested value) gets the copy, so that
            the action sees the same types as after a replay.

    Returns:
        The event and its JSON form.
    """
    data: dict[str, Any] = {"id": event_id, "type": "InputEvent", "attributes": {},
                            "input": stored}
    if type(stored) in _PLAIN:
        value = stored
    elif type(fresh) is dict and _PLAIN.issuperset(map(type, fresh.values())) \
            and _TEXT.issuperset(map(type, fresh)):
        value = fresh
    else:  # ``_rebuilt`` inline (a Python call fewer per record)
        try:
            value = _rebuilt_walk(stored)
        except RecursionError:
            value = _rebuilt_deep(stored)
    return _construct_input(event_id, {}, value), data


def _slot_setters() -> tuple[Any, ...] | None:
    """Setters of the instance attributes ``model_construct`` sets (``None``: not found)."""
    try:
        return tuple(BaseModel.__dict__[name].__set__ for name in (
            "__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))
    except (KeyError, AttributeError):
        return None


_SETTERS = _slot_setters()
_FAST_INPUT = (_SETTERS is not None and not InputEvent.__pydantic_post_init__
               and not InputEvent.__private_attributes__
               and InputEvent.model_config.get("extra") != "allow"
               and set(InputEvent.model_fields) == _INPUT_KEYS | {"attachments"})
"""Whether ``InputEvent`` can be built as ``model_construct`` would, minus its generality
(its ``attachments`` empty: a record's input event has none, and its JSON form leaves
them out)."""


def _construct_input(event_id: str, attributes: dict[str, Any], value: Any) -> InputEvent:
    """``InputEvent.model_construct(id=..., type=..., attributes=..., input=...)``, faster.

    It sets the instance attributes pydantic documents on ``BaseModel`` (``__dict__``,
    ``__pydantic_fields_set__``, ``__pydantic_extra__``, ``__pydantic_private__``), as
    ``model_construct`` does, without its per-field loop (``_FAST_INPUT`` says when the
    model is simple enough; a test compares both).

    Returns:
        The event.
    """
    if not _FAST_INPUT or _SETTERS is None:
        return InputEvent.model_construct(id=event_id, type=InputEvent.EVENT_TYPE,
                                          attributes=attributes, input=value)
    set_dict, set_fields, set_extra, set_private = _SETTERS
    event = InputEvent.__new__(InputEvent)
    set_dict(event, {"id": event_id, "type": InputEvent.EVENT_TYPE, "attributes": attributes,
                     "attachments": {}, "input": value})
    set_fields(event, {"id", "type", "attributes", "input"})
    set_extra(event, None)
    set_private(event, None)
    return event


def event_of(data: dict[str, Any]) -> Event:
    """The event an action gets from an event's JSON form (a fresh object per action).

    Returns:
        The event (an ``InputEvent`` is built without validating again: its JSON form is
        the runtime's own), sharing no list or dict with ``data``: a change the action makes
        to its event in place is not in the form a restore rebuilds it from.
    """
    if data.get("type") == "InputEvent" and data.keys() == _INPUT_KEYS:
        value = data["input"]
        return _construct_input(data["id"], dict(data["attributes"]),
                                value if type(value) in _PLAIN else _rebuilt(value))
    if data.get("type") == "ChatRequestEvent":  # its usual form built as validated
        request = request_event(data)  # (``_chat_request``; else validated below)
        if request is not None:
            return request
    data = unshared(data)  # (validation keeps a value typed ``Any`` as given: not the stored)
    typed = data.get(TYPED_KEY)
    if typed is not None:  # fields typed Any holding models, stored tagged (``_typed_fields``)
        data = {k: v for k, v in data.items() if k != TYPED_KEY}
        for name in typed:
            if name in data:
                data[name] = _rebuilt(data[name])
    return stored_event_from_json(data)  # (keyed state: the runtime's own form)


class RejectedKey(NamedTuple):
    """The key ``select_key`` gives a record its key selector failed on.

    On Flink it travels as the record's key to the agent operator, which sends the record
    to the error output instead of running it (so the job keeps running).

    Attributes:
        error_type: the exception's type name.
        message: its message (secret-looking values redacted).
        traceback: where it failed (``format_failure``).
    """

    error_type: str
    message: str
    traceback: str

    @classmethod
    def of(cls, error: BaseException) -> RejectedKey:
        """The rejection of a record by ``error`` (message redacted, traceback bounded)."""
        from .._failures import error_text, format_failure, redact_text

        return cls(type(error).__name__, redact_text(error_text(error)), format_failure(error))


def select_key(key_selector: Callable[[Any], Any], record: Any) -> Any:
    """``key_selector(record)``, or a ``RejectedKey`` when that fails.

    It fails when the selector raises or gives an unhashable key (runs and state are
    found by the key).

    Args:
        key_selector: the user's function from a record to its key.
        record: the input record.

    A record that did not load where the key is taken (``UnreadableRecord``: the first
    Python step of a Flink job could not unpickle or convert it) has no key to take: it is
    rejected as such (``UnreadableRecord.rejection``), the selector not called.

    Returns:
        The key, or a ``RejectedKey`` describing the failure.
    """
    if type(record) is UnreadableRecord:
        return record.rejection()
    try:
        key = key_selector(record)
    except BaseException as e:  # noqa: BLE001 - a bad record is reported, not fatal
        unless_stopping(e)  # (a CancelledError of its own too: ``_failures``)
        return RejectedKey.of(e)
    try:
        hash(key)
    except TypeError as e:  # a dict, a list: say it is the key, and what to do
        return RejectedKey.of(TypeError(
            f"the key is {shown_key(key)} of type {type(key).__name__}, which cannot key "
            f"state ({e}): a key is {KEY_TYPES}; convert it in the key selector"))
    except Exception as e:  # noqa: BLE001 - its own __hash__ raised
        return RejectedKey.of(e)
    return key


def input_form(record: Any, key: Any, key_value: Callable[[Any], Any]) -> Any:
    """``record``'s JSON form, as keyed state holds it.

    Args:
        record: an input record.
        key: its key's identity.
        key_value: the key's value from its identity (for the message only).

    Returns:
        The JSON form.

    Raises:
        SerializationError: when it has none, the message naming the key (cut: a key comes
            from a record, of any size).
    """
    try:
        return to_json_value(record, "input record")
    except SerializationError:
        where = f"input record of key {shown_key(key_value(key))}"
        if type(record) is UnreadableRecord:  # the host could not decode it: say so
            raise SerializationError(
                f"{where}: the {record.what} could not be decoded ({record.error}); it is not "
                "run, and the key goes on with its next record") from None
        # Flink Agents hands a dataclass input on as the dict of its fields (its e2e skills
        # agent reads ``Operation(**event.input)``): so does this
        try:
            record = _dataclasses_as_dicts(record)
        except RecursionError:  # nested deeper than the stack: the walk says so, by path
            return to_json_value(record, where)
        try:
            return to_json_value(record, "input record")
        except SerializationError:  # again, for a message that names the key
            return to_json_value(record, where)


def _dataclasses_as_dicts(value: Any) -> Any:
    """``value`` with each dataclass instance in it (in dicts, lists, tuples) as its fields' dict.

    Returns:
        The converted value; ``value`` itself when it holds no dataclass instance.
    """
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _dataclasses_as_dicts(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _dataclasses_as_dicts(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_dataclasses_as_dicts(v) for v in value]
    return value


class UnreadableRecord:
    """An input record its host could not decode, handed on in the record's place.

    The Flink operator's input converter makes one for a keyed row whose record fails to
    unpickle (``flink._fast_input``), instead of failing the task: ``AgentCore.on_input``
    then gives the error record of an input with no JSON form, naming the key and why, and
    the key goes on with its next record.

    Args:
        what: what the record was (``"pickled record of 812 bytes"``).
        error: what decoding raised, as ``Type: message`` (bounded).
        excerpt: the record's first bytes, printable.
    """

    __slots__ = ("what", "error", "excerpt")

    def __init__(self, what: str, error: str, excerpt: str) -> None:
        self.what, self.error, self.excerpt = what, error, excerpt

    def __repr__(self) -> str:
        return f"<{self.what} that could not be decoded ({self.error}): {self.excerpt}>"

    def rejection(self) -> RejectedKey:
        """The rejection of this record where its key is to be taken: it has none.

        Returns:
            A ``SerializationError`` rejection naming the record, why, and its first bytes.
        """
        return RejectedKey.of(SerializationError(
            f"the {self.what} could not be decoded, so no key could be taken from it "
            f"({self.error}); it starts {self.excerpt}"))


SHOWN_INPUT_CHARS = 1000
"""The longest ``repr`` of an input with no JSON form kept in its error record."""


def shown_input(record: Any) -> str:
    """An input with no JSON form, as its error record shows it: its ``repr``, bounded.

    The ``repr`` escapes what has no printable form (a lone surrogate), so the error record
    itself always reaches the error output.

    Returns:
        The text (cut at ``SHOWN_INPUT_CHARS`` characters, with how many there were).
    """
    try:
        text = repr(record)
    except Exception as e:  # noqa: BLE001 - a record whose repr fails is still reported
        text = f"<{type(record).__name__}: repr failed: {type(e).__name__}>"
    if len(text) > SHOWN_INPUT_CHARS:
        text = f"{cut_masked(text, SHOWN_INPUT_CHARS)}... ({len(text):,} chars)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unqueued_record(key: Any, record: Any, error: Exception, where: str,
                    source: str | None) -> ErrorRecord:
    """The error record of an input that has no JSON form, so is not queued.

    Args:
        key: the key's value.
        record: the input (shown by ``shown_input``).
        error: why it has no JSON form.
        where: its position (``execution_id``), e.g. ``"record 8"``.
        source: where it was read (``ErrorRecord.source``), when known.

    Returns:
        The record, action ``"<input>"``.
    """
    return ErrorRecord(key=key, seq=-1, action="<input>", execution_id=where,
                       error_type=type(error).__name__, message=str(error),
                       input=shown_input(record), source=source)


_REJECTION_KINDS = 1024
"""How many ``(error type, place)`` of rejected records get their traceback at WARNING."""


def rejected_record(rejected: RejectedKey, record: Any, where: str,
                    source: str | None = None,
                    seen: set[tuple[str, str]] | None = None) -> ErrorRecord:
    """The error record (logged at WARNING) of an input its key selector failed on.

    Args:
        rejected: what ``select_key`` returned.
        record: the input record, kept in the error record as it is; one that holds a
            value pydantic cannot serialize (an object of a class of its own) as
            ``shown_input`` shows it, so that the host can still write the error record out
            (the Flink operator sends its JSON form).
        where: the record's position, e.g. ``"record 3"`` (local) or ``"record"`` (Flink).
        source: where the record was read (``ErrorRecord.source``), when known.
        seen: the ``(error type, place raised)`` whose traceback the run (or operator) has
            logged: a later rejection of the same kind logs one line, its traceback at
            DEBUG (a thousand records without a ``"key"`` wrote a thousand identical
            tracebacks, as failed actions no longer do); ``None``: every traceback.

    Returns:
        An ``ErrorRecord`` with ``key=None`` and ``action="<key_selector>"``.
    """
    try:
        to_jsonable_python(record)
    except Exception:  # noqa: BLE001 - PydanticSerializationError, or a value's own failure
        record = shown_input(record)
    text, message = log_text(rejected.traceback or ""), log_text(clip(rejected.message))
    places = re.findall(r'File "[^"]*", line \d+', text)
    kind = (rejected.error_type, places[-1] if places else "")
    if seen is None or not text or (kind not in seen and len(seen) < _REJECTION_KINDS):
        if seen is not None and text:
            seen.add(kind)
        log.warning("%s rejected before it ran: %s: %s\n%s", where, rejected.error_type,
                    message, text)
    else:
        log.warning("%s rejected before it ran: %s: %s (traceback: in the error record, at "
                    "the first such rejection, and at DEBUG)", where, rejected.error_type,
                    message)
        log.debug("traceback of the rejection of %s:\n%s", where, text)
    return ErrorRecord(key=None, seq=-1, action="<key_selector>", execution_id=where,
                       error_type=rejected.error_type, message=rejected.message, input=record,
                       traceback=rejected.traceback, source=source)


def bad_line(line: Any, where: str) -> ErrorRecord:
    """The error record (logged at WARNING) of a line ``read_json_lines`` could not read.

    A ``LineResult`` given to the local runner as a record (``from_list(read_json_lines(
    path))``) runs its ``record``; one whose line is bad is this row instead: before, each
    ran as a record itself (a tuple, under the key ``None``) and failed in the action.

    Args:
        line: the ``LineResult``, its ``error`` set.
        where: its position among the records, e.g. ``"record 3"``.

    Returns:
        An ``ErrorRecord`` with ``action="<input>"``, ``source`` the line (``"line 1"``),
        ``file`` the file the reader names (``None`` when it names none).
    """
    row = line.error
    file = row.get("file")
    error = ErrorRecord(key=None, seq=-1, action="<input>", execution_id=where,
                        error_type="BadRecordError", message=str(row.get("error")),
                        input=row.get("value"), source=f"line {line.line}",
                        file=file if isinstance(file, str) else None)
    log.warning("%s (line %d) rejected before it ran: BadRecordError: %s", where, line.line,
                log_text(clip(error.message)))
    return error
