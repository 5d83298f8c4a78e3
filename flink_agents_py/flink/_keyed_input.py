"""Records that travel to the agent operator with something beside them, which it takes off.

A ``KeyedStream`` given to ``from_datastream`` without a key selector keeps its own key.
Flink Agents takes an already keyed stream as it is (``from_datastream(ds.key_by(f))``), its
records keyed by ``f``. PyFlink does not keep ``f`` on the ``KeyedStream``, so a keyed step
reads each record's key (``ctx.get_current_key()``) and carries it beside the record
(``CarriedKey``); the agent's operator is keyed by that key and gets the record alone.

A record read by ``from_kafka`` carries where it was read (``Positioned``: topic, partition,
offset), so that an error row of a record the operator does not run names that place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pyflink.common.typeinfo import Types
from pyflink.datastream import KeyedProcessFunction, KeyedStream

__all__ = ["CarriedKey", "Positioned", "is_keyed_stream", "positioned_key",
           "with_its_key"]


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


def positioned_key(key_selector: Callable[[Any], Any], positioned: Positioned) -> Any:
    """``key_selector`` of the record a ``Positioned`` carries.

    Returns:
        The record's key.
    """
    return key_selector(positioned.record)


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
