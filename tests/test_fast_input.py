"""A keyed record reaches the agent operator without PyFlink building a ``Row`` of it.

Issue 31, part 4: in a thread-mode TaskManager PyFlink's keyed operation converted every
input to a ``Row(key, record)`` and passed on only the record (11 us of a chat's operator
thread). ``_fast_input.adopt_record_input`` gives the operator's own operation a converter of
the record field alone. Driven here through PyFlink's own embedded operation
(``OneInputFunctionOperation`` made from a function proto, as the TaskManager makes it) with
Java's side faked: the same records (pickled or typed) must reach ``process_element``, and
no ``Row`` is built.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

pytest.importorskip("pyflink")


@pytest.fixture
def embedded(monkeypatch):
    """PyFlink's embedded (thread-mode) modules, importable outside a TaskManager.

    They look up Java classes when imported (``pemja.findClass``): stand-ins here, and the
    modules imported with them are forgotten afterwards.
    """
    import sys
    from unittest import mock

    import pemja

    before = set(sys.modules)
    monkeypatch.setattr(pemja, "findClass", lambda name: mock.MagicMock(name=name), raising=False)
    from pyflink.fn_execution.embedded import converters, operations

    yield converters, operations
    for name in set(sys.modules) - before:
        del sys.modules[name]


class _JavaContext:
    def timerService(self) -> Any:  # noqa: N802 - Java's name
        return object()

    def getCurrentKey(self) -> Any:  # noqa: N802
        return "k"


def _operation(function: Any, operations: Any, input_converter: Any) -> Any:
    import cloudpickle  # as PyFlink ships a function
    from pyflink.fn_execution import flink_fn_execution_pb2 as pb

    proto = pb.UserDefinedDataStreamFunction(
        function_type=pb.UserDefinedDataStreamFunction.KEYED_PROCESS,
        payload=cloudpickle.dumps(function),
        key_type_info=pb.TypeInfo(type_name=pb.TypeInfo.STRING),
    )
    from pyflink.fn_execution.embedded.converters import PickleDataConverter

    return operations.OneInputFunctionOperation(
        [proto],
        input_converter,
        PickleDataConverter(),
        object(),
        _JavaContext(),
        _JavaContext(),
        None,
        [],
        object(),
        None,
    )


def _function(operation: Any) -> Any:
    """The function PyFlink's operation unpickled (held by its ``open_func``)."""
    from pyflink.datastream import KeyedProcessFunction

    (function,) = [
        c.cell_contents
        for c in operation._main_operation._open_func.__closure__
        if isinstance(c.cell_contents, KeyedProcessFunction)
    ]
    return function


def _opens_with_fast_input() -> Any:
    from pyflink.datastream import KeyedProcessFunction

    from flink_agents_py.flink._fast_input import adopt_record_input

    class Keyed(KeyedProcessFunction):
        def __init__(self) -> None:
            self.seen: list[Any] = []
            self.adopted = False

        def open(self, runtime_context: Any) -> None:
            self.adopted = adopt_record_input(self)

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.seen.append(value)
            yield value

    return Keyed()


def test_a_pickled_record_reaches_the_function_as_it_was_and_no_row_is_built(embedded, monkeypatch):
    converters, operations = embedded
    from pyflink.common import Row

    rows = []
    real_init = Row.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        rows.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Row, "__init__", counted)
    row = converters.RowDataConverter(
        [converters.IdentityDataConverter(), converters.PickleDataConverter()], ["f0", "f1"]
    )
    op = _operation(_opens_with_fast_input(), operations, row)
    op.open()
    record = {"key": "k", "n": [1, 2.5, None], "t": "x"}
    out = list(op.process_element((0, ["k", pickle.dumps(record)])))
    assert [pickle.loads(b) for b in out] == [record]
    function = _function(op)
    assert function.adopted and function.seen == [record]
    assert rows == []  # PyFlink's converter would have built one Row per record


def test_a_typed_record_field_is_converted_by_its_own_converter(embedded):
    converters, operations = embedded
    # a record field of a declared row type: PyFlink's converter of that field still runs
    field = converters.RowDataConverter([converters.IdentityDataConverter()], ["name"])
    row = converters.RowDataConverter([converters.IdentityDataConverter(), field], ["f0", "f1"])
    op = _operation(_opens_with_fast_input(), operations, row)
    op.open()
    list(op.process_element((0, ["k", (0, ["ann"])])))
    (seen,) = _function(op).seen
    assert seen.as_dict() == {"name": "ann"}


def test_an_input_that_is_not_a_keyed_row_keeps_pyflinks_converter(embedded):
    converters, operations = embedded
    plain = converters.PickleDataConverter()
    op = _operation(_opens_with_fast_input(), operations, plain)
    op.open()
    assert op._input_data_converter is plain
    assert not _function(op).adopted


def test_outside_a_pyflink_operation_nothing_is_changed():
    from flink_agents_py.flink._fast_input import adopt_record_input

    assert adopt_record_input(object()) is False
