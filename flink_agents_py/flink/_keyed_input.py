"""Records that travel to the agent operator with something beside them, which it takes off.

A ``KeyedStream`` given to ``from_datastream`` without a key selector keeps its own key.
Flink Agents takes an already keyed stream as it is (``from_datastream(ds.key_by(f))``), its
records keyed by ``f``. PyFlink does not keep ``f`` on the ``KeyedStream``, so a keyed step
reads each record's key (``ctx.get_current_key()``) and carries it beside the record
(``CarriedKey``); the agent's operator is keyed by that key and gets the record alone.

A record read by ``from_kafka`` carries where it was read (``Positioned``: topic, partition,
offset), so that an error row of a record the operator does not run names that place; so does
a record of ``read_lines_file`` (its line) given to ``from_datastream`` (``positioned_input``).

In process mode a record travels to the agent operator sealed (``Sealed``): pickled by the
agent's key step and unpickled by the operator itself. Beam's coder unpickled it before the
operator's code ran, so a record that failed to load there (a class whose ``__reduce__`` or
``__setstate__`` raises on that worker) failed the task, and the job at every restart; the
operator now makes it an error row under its key, as thread mode's converter does
(``_fast_input``). A record that cannot be pickled at all reaches it as an error row too.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle  # type: ignore[import-untyped]
from pyflink.common.typeinfo import Types
from pyflink.datastream import KeyedProcessFunction, KeyedStream

from ..api.internal import cut_masked
from ..runtime.internal import UnreadableRecord
from ._fast_input import unreadable
from ._fresh import shipped

__all__ = ["POSITIONED_STREAM", "CarriedKey", "Positioned", "Sealed", "is_keyed_stream",
           "pickles_of", "positioned_input", "positioned_key", "seal", "seal_pickled",
           "sealed_key", "with_its_key"]

POSITIONED_STREAM = "_flink_agents_py_positioned"
"""The attribute of a reader's records stream holding the same records as ``Positioned``."""


class CarriedKey:
    """A record of a ``KeyedStream`` with the key the stream gave it.

    Args:
        key: the key.
        record: the record.
    """

    __slots__ = ("key", "record")

    def __init__(self, key: Any, record: Any) -> None:
        self.key = key
        self.record = record

    def __reduce__(self) -> tuple[Any, ...]:
        return CarriedKey, (self.key, self.record)


class Positioned:
    """A record with the place it was read from (e.g. ``topic t partition 0 offset 7``).

    Args:
        where: the place, as error rows name it (their ``execution_id``).
        record: the record.
    """

    __slots__ = ("record", "where")

    def __init__(self, where: str, record: Any) -> None:
        self.where = where
        self.record = record

    def __reduce__(self) -> tuple[Any, ...]:
        return Positioned, (self.where, self.record)


def positioned_key(key_selector: Callable[[Any], Any], positioned: Any) -> Any:
    """``key_selector`` of the record a ``Positioned`` carries (or of a record without one).

    A reader's stream may hold records without a place: what a ``NumberedLines`` subclass
    yields from its timers (the main job's end-of-input markers).

    Returns:
        The record's key.
    """
    return key_selector(positioned.record if type(positioned) is Positioned else positioned)


class _CarryKey(KeyedProcessFunction):
    """Each record with its current key."""

    def process_element(self, value: Any, ctx: Any) -> Iterator[CarriedKey]:
        yield CarriedKey(ctx.get_current_key(), value)


def _carried_key(carried: Any) -> Any:
    return carried.key


def is_keyed_stream(ds: Any) -> bool:
    """Whether ``ds`` is a PyFlink ``KeyedStream`` (made by ``key_by``)."""
    return isinstance(ds, KeyedStream)


def with_its_key(ds: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``ds``'s records as ``CarriedKey``s, and the key selector reading their key.

    Returns:
        The stream of ``CarriedKey``s and the selector of their ``key``.
    """
    return ds.process(_CarryKey(), output_type=Types.PICKLED_BYTE_ARRAY()), _carried_key


def _record_of(item: Any) -> Any:
    """The record a ``Positioned`` carries (what a subclass's timer yields is itself)."""
    return item.record if type(item) is Positioned else item


def without_positions(positioned: Any, name: str) -> Any:
    """A reader's records stream: ``positioned`` (of ``Positioned``) with the places taken off.

    ``from_datastream`` given it keys ``positioned`` instead (``positioned_input``).

    Args:
        positioned: the reader's stream of ``Positioned`` records.
        name: the map's name and uid.

    Returns:
        The stream of the records themselves.
    """
    records = positioned.map(shipped(_record_of), output_type=Types.PICKLED_BYTE_ARRAY()) \
        .name(name).uid(name)
    # (the reader's parallelism: chained to it, the records are not sent across)
    records.set_parallelism(positioned._j_data_stream.getParallelism())
    setattr(records, POSITIONED_STREAM, positioned)
    return records


def positioned_input(ds: Any) -> Any:
    """The ``Positioned`` stream behind ``ds``, a records stream of ``read_lines_file``.

    ``ds`` takes the position off each record (a map); the agent is given the positioned
    records instead, so that map is removed from the job's list of transformations (Flink
    still runs it when another operator of the job reads ``ds``).

    Args:
        ds: a ``DataStream`` given to ``from_datastream``.

    Returns:
        The positioned stream, or ``None`` when ``ds`` is no such records stream.
    """
    positioned = getattr(ds, POSITIONED_STREAM, None)
    if positioned is None:
        return None
    try:
        ds._j_data_stream.getExecutionEnvironment().getTransformations().remove(
            ds._j_data_stream.getTransformation())
    except Exception:  # noqa: BLE001 - not a JVM's stream (a unit test's): the map stays
        pass
    return positioned


class Sealed:
    """A record pickled by the agent's key step, for the operator to unpickle (process mode).

    Args:
        key: the record's key as the stream is keyed (``KeyEncoding.flink_key``'s).
        data: the record's pickle, or ``None`` when it could not be pickled.
        where: where the record was read (a ``Positioned``'s place), or ``None``.
        what: what the record was, when it could not be pickled (``"Foo record"``).
        error: what pickling it raised (``data`` ``None``).
    """

    __slots__ = ("data", "error", "key", "what", "where")

    def __init__(self, key: Any, data: bytes | None, where: str | None = None,
                 what: str = "record", error: str = "") -> None:
        self.key = key
        self.data = data
        self.where = where
        self.what = what
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        return Sealed, (self.key, self.data, self.where, self.what, self.error)

    def opened(self) -> Any:
        """The record; one that fails to load, an ``UnreadableRecord`` saying why.

        Returns:
            The record (as it was sealed: a ``Positioned`` one too), or its stand-in (in a
            ``Positioned`` when its place is known).
        """
        if self.data is None:
            stand_in = UnreadableRecord(self.what, self.error, "(not pickled)")
        else:
            try:
                return pickle.loads(self.data)
            except Exception as e:  # noqa: BLE001 - the record's own failure, not the task's
                stand_in = unreadable(self.data, e, True)
        return stand_in if self.where is None else Positioned(self.where, stand_in)


def seal(keyer: Callable[[Any], Any], record: Any) -> Sealed:
    """``record`` sealed with its key (``keyer(record)``), for ``sealed_key`` to key by.

    Returns:
        The ``Sealed`` record.
    """
    key = keyer(record)
    where = record.where if type(record) is Positioned else None
    try:
        return Sealed(key, cloudpickle.dumps(record), where)
    except Exception as e:  # noqa: BLE001 - the record's own failure, not the task's
        text = str(e)
        inner = record.record if type(record) is Positioned else record
        return Sealed(key, None, where, f"{type(inner).__name__} record",
                      f"pickling it raised {type(e).__name__}: {cut_masked(text, 500)}"
                      f"{'...' if len(text) > 500 else ''}")


def seal_pickled(keys: Any, key_selector: Callable[[Any], Any], data: bytes) -> Sealed:
    """A record given as its pickle (``pickles_of``), loaded here and sealed with its key.

    The key step is the first Python step of a process-mode job over pickled records: Beam's
    coder loaded each record before the step's code ran, so one that failed to load (its
    ``__reduce__``/``__setstate__`` raised on the worker) failed the task, and the job at
    every restart. Loaded here, such a record is keyed by a rejected key (no key can be
    taken from it), which the operator sends to the error output, naming why.

    Args:
        keys: the operator's ``KeyEncoding``.
        key_selector: the user's key selector.
        data: the record's pickle.

    Returns:
        The ``Sealed`` record (its pickle kept as it came when it did not load).
    """
    try:
        record = pickle.loads(data)
    except Exception as e:  # noqa: BLE001 - the record's own failure, not the task's
        # keyed by its rejection (``UnreadableRecord.rejection``), as in thread mode
        return Sealed(keys.flink_key(key_selector, unreadable(data, e, True)), data)
    where = record.where if type(record) is Positioned else None
    return Sealed(keys.flink_key(key_selector, record), data, where)  # its pickle as it came


def pickles_of(ds: Any) -> Any:
    """``ds``'s records as their pickles, for ``seal_pickled`` (``None``: not wanted).

    ``None`` too when ``ds`` is a Python step's output: PyFlink chains the key step to it and
    hands its records over as objects (one that cannot be pickled is an error row, ``seal``).

    A forward (same parallelism) or rebalance (else, as Flink would) edge whose type says
    ``byte[]``: the bytes on the wire are the same as the pickled type's, so only the next
    Python step's coder changes (it hands the bytes over instead of loading them).

    Returns:
        The ``DataStream`` of pickles, or ``None`` when ``ds`` is not of pickled records.
    """
    from pyflink.datastream import DataStream  # noqa: PLC0415
    from pyflink.java_gateway import get_gateway  # noqa: PLC0415

    if ds.get_type() != Types.PICKLED_BYTE_ARRAY():
        return None
    jvm = get_gateway().jvm
    j_ds = ds._j_data_stream
    upstream = j_ds.getTransformation()
    if _python_operator(upstream):  # chained to it: its records come as objects, not loaded
        return None
    env = j_ds.getExecutionEnvironment()
    ups, own = upstream.getParallelism(), env.getParallelism()
    partitioners = jvm.org.apache.flink.streaming.runtime.partitioner
    partitioner = partitioners.ForwardPartitioner() if ups in (own, -1) \
        else partitioners.RebalancePartitioner()
    edge = jvm.org.apache.flink.streaming.api.transformations.PartitionTransformation(
        upstream, partitioner)
    edge.setOutputType(
        jvm.org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO)
    return DataStream(jvm.org.apache.flink.streaming.api.datastream.DataStream(env, edge))


def _python_operator(transformation: Any) -> bool:
    """Whether ``transformation`` runs a Python function (PyFlink chains the next one to it)."""
    try:
        factory = transformation.getOperatorFactory()
        name = str(factory.getOperator().getClass().getName())
    except Exception:  # noqa: BLE001 - a source, a union: no Python operator of its own
        return False
    return "python" in name.lower()


def sealed_key(sealed: Sealed) -> Any:
    """The key a ``Sealed`` record carries (the key step's key selector)."""
    return sealed.key
