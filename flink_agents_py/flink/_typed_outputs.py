"""Outputs of a declared type: ``to_table(schema, output_type)`` and ``to_datastream(output_type)``.

An agent's outputs are Python values; a table (or a typed stream) holds values of declared
types. ``OutputContract`` says what a declared type takes, and is used twice:

- in the agent operator (``AgentCore``'s ``output_check``): an output the type cannot hold
  (a value of the wrong type, ``None``, a value outside a column's range, a null in a
  ``NOT NULL`` column, a value with the wrong number of fields) does not leave the agent: it
  becomes an error record of its run on the error output (``errors_datastream()``), with its
  key, its input's position (``seq``), the action that sent it and a message naming the
  field, the column type and the value. The key's other outputs, and other keys, go on.
- in the map after the operator (``TypedOutputs``), which turns each output into its typed
  value (a ``Row`` of the declared fields, an int in a float column as a float). What reaches
  it and does not fit (the operator was built for another declared type, or without one)
  is logged and left out, never failing the job; likewise an error record PyFlink sent to
  the main output: it does so when the job being run does not include the error output
  (a table run with ``table.execute()``, ``execute_sql`` or a statement set is translated
  from the table alone, without ``errors_datastream()``), and a typed column could not hold
  it (the job failed with a clipped ``TypeError`` naming an ``OutputTag``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyflink.datastream import OutputTag

from ..api.internal import cut_masked, mask_secrets
from ..runtime.internal import key_from_json

__all__ = ["OutputContract", "OutputTypeError", "TypedOutputs", "contract_of"]

log = logging.getLogger("flink_agents_py.flink")

_INT_BITS = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64}
"""The integer column types checked, by their width in bits."""

_CHECKED = {"STRING": "a str", "CHAR": "a one-character str", "BOOLEAN": "a bool",
            "FLOAT": "a float or an int", "DOUBLE": "a float or an int", "BIG_INT": "an int",
            **{kind: "an int" for kind in _INT_BITS}}
"""The column types checked, with what a value must be."""

_SHOWN = 200
"""The most characters of an output a message quotes."""


class OutputTypeError(TypeError):
    """An agent output that its declared type (``to_table``, ``to_datastream``) cannot hold."""


def _shown(value: Any, limit: int = _SHOWN) -> str:
    """``repr(value)`` cut at ``limit`` characters; what its type is when its ``repr`` fails."""
    try:
        text = repr(value)
    except Exception as e:  # noqa: BLE001 - a value whose repr fails is still named
        return f"<{type(value).__name__}: repr failed: {type(e).__name__}>"
    return text if len(text) <= limit else f"{cut_masked(text, limit)}... ({len(text):,} chars)"


def _kind(type_info: Any) -> str | None:
    """The name of a basic type checked (``"STRING"``, ``"INT"``...), else ``None``."""
    name = getattr(getattr(type_info, "_basic_type", None), "name", None)
    return name if name in _CHECKED else None


def _field_kinds(row_type: Any) -> list[str | None]:
    """The checked kinds of a row type's fields (``None``: not checked).

    Returns:
        One entry per field: ``"STRING"``, ``"INT"``... for a basic type in ``_CHECKED``.
    """
    return [_kind(t) for t in row_type.get_field_types()]


def _fits(kind: str, value: Any) -> bool:
    if kind in ("STRING", "CHAR"):
        return type(value) is str and (kind == "STRING" or len(value) == 1)
    if kind == "BOOLEAN":
        return type(value) is bool
    if not isinstance(value, int) or isinstance(value, bool):
        return kind in ("FLOAT", "DOUBLE") and isinstance(value, float)
    bits = _INT_BITS.get(kind)
    return bits is None or -(1 << (bits - 1)) <= value < 1 << (bits - 1)


def _misfit(where: str, kind: str, value: Any, output: Any) -> str:
    bits = _INT_BITS.get(kind)
    beyond = (f", beyond the range of {bits}-bit integers"
              if bits is not None and type(value) is int else "")
    return (
        f"{where} of the agent output {_shown(output)} is {_shown(value, 100)} "
        f"({type(value).__name__}{beyond}), which its declared {kind} column cannot hold: "
        f"emit {_CHECKED[kind]} there, or None for null")


def _checked(names: list[str], kinds: list[str | None], values: list[Any], output: Any,
             not_null: frozenset[str] = frozenset()) -> list[Any]:
    """``values`` as the declared columns hold them (an int in a float column as a float).

    Returns:
        The values.

    Raises:
        OutputTypeError: naming the field, its column type, the value and the output, for
            a value the column cannot hold (Flink failed the job with a bare Java
            ``ClassCastException`` naming none of them), or a null in a ``NOT NULL`` column.
    """
    for i, (kind, value) in enumerate(zip(kinds, values, strict=False)):
        if value is None:
            if names[i] in not_null:
                raise OutputTypeError(
                    f"to_table: field {names[i]!r} of the agent output {_shown(output)} is "
                    f"missing or None, and the schema declares it NOT NULL: emit a value there")
            continue
        if kind is None:
            continue
        if not _fits(kind, value):
            raise OutputTypeError(_misfit(f"to_table: field {names[i]!r}", kind, value, output))
        if kind in ("FLOAT", "DOUBLE") and type(value) is not float:
            values[i] = float(value)
    return values


def _output_as_row(names: list[str], output: Any, kinds: list[str | None] | None = None,
                   not_null: frozenset[str] = frozenset()) -> Any:
    """An agent's output as a ``Row`` of the declared fields (``to_table``).

    A dict gives its values by field name (a field it lacks is null); a ``Row``, tuple or
    list its values in order; any other value fills a one-field row.

    Args:
        names: the declared field names.
        output: the agent's output.
        kinds: the declared field types, as ``_field_kinds`` gives them (``None``: not
            checked).
        not_null: the fields the schema declares ``NOT NULL``.

    Returns:
        A ``pyflink.common.Row``.

    Raises:
        OutputTypeError: when the output is ``None`` or cannot fill the declared fields, or
            a value does not fit its field's type (says which output, and which field).
    """
    from pyflink.common import Row

    if output is None:
        raise OutputTypeError(f"to_table: the agent output is None, which is no row of the "
                              f"declared fields {names}: emit a dict by field name")
    if isinstance(output, dict):
        values = [output.get(n) for n in names]
    elif isinstance(output, (Row, tuple, list)) and len(output) == len(names):
        values = list(output)
    elif len(names) == 1 and not isinstance(output, (Row, tuple, list)):
        values = [output]
    else:
        raise OutputTypeError(f"to_table: the agent output {_shown(output)} does not fit the "
                              f"declared fields {names}: emit a dict by field name")
    return Row(*(values if kinds is None else _checked(names, kinds, values, output, not_null)))


@dataclass(frozen=True)
class OutputContract:
    """What a declared output type takes, and each output as that type holds it (picklable).

    Attributes:
        where: the call that declared it (``"to_table"``, ``"to_datastream"``), for messages.
        names: a row type's field names; ``None``: not a row type.
        kinds: the checked kinds of the row's fields, or of the value (one entry).
        not_null: the row fields the table schema declares ``NOT NULL`` (or its primary key).
    """

    where: str
    names: tuple[str, ...] | None
    kinds: tuple[str | None, ...]
    not_null: frozenset[str] = frozenset()

    def convert(self, output: Any) -> Any:
        """``output`` as the declared type holds it.

        Returns:
            A ``Row`` for a row type; the value (an int as a float for a float type) else.

        Raises:
            OutputTypeError: naming the field, the type and the value, when it cannot.
        """
        if self.names is not None:
            return _output_as_row(list(self.names), output, list(self.kinds), self.not_null)
        kind = self.kinds[0]
        if output is None:
            raise OutputTypeError(f"{self.where}: the agent output is None, which its declared "
                                  f"{kind or 'output'} type cannot hold: emit a value")
        if kind is None:
            return output
        if not _fits(kind, output):
            raise OutputTypeError(_misfit(f"{self.where}: the value", kind, output, output))
        return float(output) if kind in ("FLOAT", "DOUBLE") else output

    def __call__(self, output: Any) -> Any:
        """``convert``: the check ``AgentCore`` runs on each output (see the module doc)."""
        return self.convert(output)


def _not_null_columns(schema: Any) -> frozenset[str]:
    """The columns a ``pyflink.table.Schema`` declares ``NOT NULL`` (its primary key's too).

    Returns:
        Their names (none for a schema that cannot be read this way).
    """
    found: set[str] = set()
    try:
        j_schema = schema._j_schema
        for column in j_schema.getColumns():
            data_type = getattr(column, "getDataType", lambda: None)()
            if data_type is None:
                continue
            try:
                nullable = data_type.getLogicalType().isNullable()
            except Exception:  # noqa: BLE001 - an unresolved type (given as text)
                text = str(data_type.toString()).strip("[] ").upper()  # "[INT NOT NULL]"
                nullable = not text.endswith("NOT NULL")
            if not nullable:
                found.add(str(column.getName()))
        key = j_schema.getPrimaryKey()
        if key.isPresent():
            found.update(str(n) for n in key.get().getColumnNames())
    except Exception:  # noqa: BLE001 - another kind of schema: Flink checks it
        return frozenset()
    return frozenset(found)


def contract_of(output_type: Any, schema: Any = None, where: str = "to_table"
                ) -> OutputContract | None:
    """The contract of a declared output type (``Types...``, or wrapped in ``ExternalTypeInfo``).

    Returns:
        The contract; ``None`` for no type, or a type that holds any Python value
        (``Types.PICKLED_BYTE_ARRAY()``).
    """
    from pyflink.common.typeinfo import ExternalTypeInfo, PickledBytesTypeInfo, RowTypeInfo

    type_info = output_type._type_info if isinstance(output_type, ExternalTypeInfo) \
        else output_type  # Flink Agents' examples wrap the row type
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return None
    if isinstance(type_info, RowTypeInfo):
        not_null = _not_null_columns(schema) if schema is not None else frozenset()
        return OutputContract(where, tuple(type_info.get_field_names()),
                              tuple(_field_kinds(type_info)), not_null)
    return OutputContract(where, None, (_kind(type_info),))


class TypedOutputs:
    """The map after the agent operator: each output as its declared type holds it.

    A ``flat_map`` function (picklable): an output that does not fit, or an error record
    PyFlink sent to the main output, is logged at WARNING and left out (see the module doc).

    Args:
        contract: the declared type's contract.
        echo: also print these warnings on the worker's standard output (set for a job on
            a local MiniCluster: a table run there has no error output, and the only stream
            of its Python workers that reaches the program's console is their standard
            output; their log records and standard error go to Flink's log file, where a
            failed record or a left-out output was lost without a word).
    """

    def __init__(self, contract: OutputContract, echo: bool = False) -> None:
        self.contract = contract
        self.echo = echo

    def __call__(self, value: Any) -> Iterator[Any]:
        """The typed value of ``value``; nothing for what cannot be one.

        Yields:
            The typed value.
        """
        if type(value) is tuple and len(value) == 2 and isinstance(value[0], OutputTag):
            _log_unrouted(self.contract.where, value[1], getattr(self, "echo", False))
            return
        try:
            converted = self.contract.convert(value)
        except OutputTypeError as e:
            message = f"{self.contract.where}: an agent output is left out: {e}"
            log.warning("%s", message)
            if getattr(self, "echo", False):
                # (see the class docstring; standard output has no log filter to mask it)
                print(f"WARNING {log.name}: {mask_secrets(message)}", flush=True)
            return
        yield converted


def _log_unrouted(where: str, record: Any, echo: bool = False) -> None:
    """Log an error record that reached the main output (the job has no error output).

    Args:
        where: the call that declared the type (``to_table``).
        record: the error record (its JSON form, a dict).
        echo: also print the warning on standard output (see ``TypedOutputs``).
    """
    if isinstance(record, dict):
        key = record.get("key")
        try:
            key = key_from_json(key)  # the row holds the key's JSON form: a UUID as a UUID
        except ValueError:
            pass
        about = (f"key {_shown(key, 100)} (input {record.get('seq')}, action "
                 f"{record.get('action')!r}): {record.get('error_type')}: "
                 f"{cut_masked(str(record.get('message')), 500)}")
    else:
        about = _shown(record, 500)
    message = (
        f"{where}: an error record of the agent, for {about}. It is left out of the output: "
        "this job was run without the agent's error output (a table run with table.execute(), "
        "execute_insert, execute_sql or a statement set translates the table alone, without "
        "errors_datastream()). To collect error records, take errors_datastream() and run "
        "the job with env.execute() (statement_set.attach_as_datastream() adds table inserts "
        "to it)")
    log.warning("%s", message)
    if echo:
        print(f"WARNING {log.name}: {mask_secrets(message)}", flush=True)  # see TypedOutputs
