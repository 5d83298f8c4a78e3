"""The keyed input's conversion in a thread-mode TaskManager, without PyFlink's ``Row``.

A keyed stream's element reaches PyFlink's embedded operation as its Java form of ``Row(key,
record)``, and the operation's input converter (``RowDataConverter``) builds a PyFlink
``Row`` of it for every record (a ``Row()``, six ``Row.__setattr__`` calls, its field names
and kind) of which the keyed function's wrapper then passes on only the record
(``process_element(value[1], ctx)``): the key is the keyed state backend's current key,
read through the context. In the TaskManager that ``Row`` cost 11 us of a chat's operator
thread (2026-12-06, ``bench._java_calls``), as much as the chat's run written to keyed
state. ``adopt_record_input`` gives the agent operator's own operation a converter that
converts the record field alone, as the ``Row``'s converter would have, and hands it on as
``(None, record)``: the same record object reaches ``process_element``.

Only the one operation whose main function is the calling operator is changed, only when it
is PyFlink's one-input operation with a two-field row converter (a keyed stream's), and only
in thread mode (process mode runs its functions through Beam, another code path); anything
else leaves PyFlink's converter in place.

A record that fails to convert (its pickle raises as it loads: a class whose ``__reduce__``
or ``__setstate__`` fails here) failed the task with PyFlink's converter, and so the job, at
every restart, for ever. Here it is handed on as an ``UnreadableRecord`` saying what it was
and what loading raised: the operator sends it to the error output under its key (not run,
``SerializationError``), and the key goes on with its next record.

The agent's key step (``key_by``'s map) converts its input the same way when it is the job's
first Python step (``from_datastream(env.from_collection(records))``: a Java source's
pickles): its selector (``FirstStepKeys``) gives that step's operation a converter that hands
a record failing to load or convert on as an ``UnreadableRecord`` (``LoadingInput``), which
no key can be taken from (``select_key``): the operator sends it to the error output
(``<key_selector>``, key ``None``), as process mode's key step does with the records' pickles
(``_keyed_input.seal_pickled``). Before, it failed the task there. A key step chained to a
Python step of the program gets that step's objects: nothing is converted, nothing changed.
"""

from __future__ import annotations

import logging
import pickle
import sys
from types import FrameType
from typing import Any

from pyflink.datastream.functions import KeySelector

from ..api.internal import cut_masked
from ..runtime.internal import UnreadableRecord
from ._fresh import fresh_reduce

__all__ = ["FirstStepKeys", "LoadingInput", "RecordOfKeyedRow", "adopt_record_input",
           "unreadable"]

log = logging.getLogger(__name__)

_FRAMES = 8
"""How many callers of ``open`` to look through for PyFlink's operation (it is 3 up)."""


class RecordOfKeyedRow:
    """An input converter: a keyed stream's ``Row(key, record)`` to ``(None, record)``.

    Only ``to_internal``: PyFlink converts an operation's input with nothing else.

    Args:
        field: PyFlink's converter of the record field (the row converter's second).
    """

    __slots__ = ("_field", "_pickled")

    def __init__(self, field: Any) -> None:
        self._field = field
        from pyflink.fn_execution.embedded.converters import PickleDataConverter

        self._pickled = type(field) is PickleDataConverter  # (its ``to_internal``, inline)

    def to_internal(self, value: Any) -> Any:
        """The record of a row as the ``Row`` converter reads it: ``(kind, [key, record])``.

        Returns:
            ``(None, record)``: the keyed function's wrapper reads index 1 only.
        """
        if value is None:
            return None
        record = value[1][1]
        try:
            if self._pickled:
                return None, (pickle.loads(record) if record is not None else None)
            return None, self._field.to_internal(record)
        except Exception as e:  # noqa: BLE001 - the record's own failure, not the task's
            return None, unreadable(record, e, self._pickled)


class LoadingInput:
    """An input converter handing a record that fails to convert on as its stand-in.

    Args:
        converter: PyFlink's converter of the operation's input.
        pickled: whether it is PyFlink's pickle converter (whose ``to_internal`` is inlined
            here); ``None``: found from its type.
    """

    __slots__ = ("_converter", "_pickled")

    def __init__(self, converter: Any, pickled: bool | None = None) -> None:
        self._converter = converter
        if pickled is None:
            from pyflink.fn_execution.embedded.converters import PickleDataConverter

            pickled = type(converter) is PickleDataConverter
        self._pickled = pickled

    def to_internal(self, value: Any) -> Any:
        """The record ``value`` holds, or an ``UnreadableRecord`` when converting it raised.

        Returns:
            The record (``None`` for ``None``, as PyFlink's converters give).
        """
        try:
            if self._pickled:
                return pickle.loads(value) if value is not None else None
            return self._converter.to_internal(value)
        except Exception as e:  # noqa: BLE001 - the record's own failure, not the task's
            return unreadable(value, e, self._pickled)


class FirstStepKeys(KeySelector):
    """The agent's key step's selector in thread mode (see the module docstring).

    ``get_key`` is the selector itself (an attribute: no call of this object's per record).

    Args:
        key_of: the selector (``KeyEncoding.flink_key`` of the user's, as ``shipped``).
    """

    def __init__(self, key_of: Any) -> None:
        object.__setattr__(self, "get_key", key_of)

    def get_key(self, value: Any) -> Any:  # (shadowed by the instance's attribute)
        """The key of ``value`` (``key_of``'s).

        Returns:
            What ``key_of`` gives.
        """
        return self.__dict__["get_key"](value)

    def open(self, runtime_context: Any) -> None:
        """Give the key step's operation ``LoadingInput`` when it converts this step's input."""
        adopt_loading_input(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return fresh_reduce(self)


def adopt_loading_input(keys: FirstStepKeys) -> bool:
    """Give the operation whose main function calls ``keys`` a ``LoadingInput`` converter.

    Call from ``keys.open`` (PyFlink's key step opens it, four frames up of its operation).

    Returns:
        Whether the converter was replaced (not when the key step is chained to another
        Python step, nor outside a thread-mode TaskManager).
    """
    try:
        from pyflink.fn_execution.embedded.operations import OneInputFunctionOperation
    except ImportError:  # not in a thread-mode TaskManager (no ``pemja``)
        return False
    frame: FrameType | None = sys._getframe(2)  # (this, then ``keys.open``)
    step = None
    for _ in range(_FRAMES):  # the key step's function: its ``open`` called ``keys.open``
        if frame is None:
            return False
        candidate = frame.f_locals.get("self") if frame.f_code.co_name == "open" else None
        if getattr(getattr(candidate, "_key_selector_open_func", None), "__self__",
                   None) is keys:
            step = candidate
            break
        frame = frame.f_back
    if step is None:
        return False
    operation = _opening_operation(step, OneInputFunctionOperation)
    converter = getattr(operation, "_input_data_converter", None)
    if operation is None or converter is None or type(converter) is LoadingInput:
        return False
    operation._input_data_converter = LoadingInput(converter)
    log.debug("agent key step: a record that fails to load becomes an error row")
    return True


_EXCERPT_BYTES = 64
"""How many of an unreadable record's first bytes its error record shows."""


def unreadable(record: Any, error: Exception, pickled: bool) -> UnreadableRecord:
    """The stand-in of a record that failed to convert (see the module docstring).

    Also process mode's, for a ``Sealed`` record that fails to load (``_keyed_input``).

    Returns:
        The stand-in, naming the record's size and what converting it raised.
    """
    size = len(record) if isinstance(record, (bytes, bytearray)) else None
    what = f"{'pickled ' if pickled else ''}record" + (f" of {size:,} bytes" if size else "")
    text = str(error)
    why = f"{type(error).__name__}: {cut_masked(text, 500)}" + ("..." if len(text) > 500 else "")
    if isinstance(record, (bytes, bytearray)):
        shown = repr(bytes(record[:_EXCERPT_BYTES]))  # masked as a text the length of the
        # key past it (a secret standing across the cut leaves no piece behind)
        excerpt = shown if not size or size <= _EXCERPT_BYTES else cut_masked(
            repr(bytes(record[:_EXCERPT_BYTES + 4 * 1024])), len(shown)) + "..."
    else:
        excerpt = f"a {type(record).__name__}"
    log.debug("agent operator: a keyed input record could not be converted: %s", why)
    return UnreadableRecord(what, why, excerpt)


def adopt_record_input(function: Any) -> bool:
    """Give ``function``'s PyFlink operation the record-only input converter, when it is one.

    Call from the function's ``open`` (PyFlink's operation opens it, three frames up).

    Args:
        function: the keyed process function being opened.

    Returns:
        Whether the converter was replaced.
    """
    try:
        from pyflink.fn_execution.embedded.converters import RowDataConverter
        from pyflink.fn_execution.embedded.operations import OneInputFunctionOperation
    except ImportError:  # not in a thread-mode TaskManager (no ``pemja``)
        return False
    operation = _opening_operation(function, OneInputFunctionOperation)
    if operation is None:
        return False
    converter = getattr(operation, "_input_data_converter", None)
    fields = getattr(converter, "_field_data_converters", None)
    if type(converter) is not RowDataConverter or fields is None or len(fields) != 2:
        return False
    operation._input_data_converter = RecordOfKeyedRow(fields[1])
    log.debug("agent operator: the keyed input's records are converted without a Row")
    return True


def _opening_operation(function: Any, kind: type) -> Any:
    """The PyFlink operation of type ``kind`` up the stack whose main function is ``function``.

    Returns:
        The operation, or ``None``.
    """
    frame: FrameType | None = sys._getframe(2)
    for _ in range(_FRAMES):
        if frame is None:
            return None
        if frame.f_code.co_name == "open":  # (other frames' locals are not looked at)
            candidate = frame.f_locals.get("self")
            if type(candidate) is kind and _opens(candidate, function):
                return candidate
        frame = frame.f_back
    return None


def _opens(operation: Any, function: Any) -> bool:
    """Whether ``operation``'s main operation opens ``function`` (its ``open_func``'s closure)."""
    main = getattr(operation, "_main_operation", None)
    opener = getattr(main, "_open_func", None)
    cells = getattr(opener, "__closure__", None) or ()
    for cell in cells:
        try:
            if cell.cell_contents is function:
                return True
        except ValueError:  # an empty cell
            continue
    return False
