"""Key encodings: how a record's key becomes the key that Flink's keyed state is partitioned by.

A key's encoding decides its key group (so the subtask that owns its state) and where a
restore finds that state: it must give the same bytes for the same key in every Python,
cloudpickle and PyFlink version the job will ever be restored with.

- ``"json"`` (the default): a Flink ``STRING`` key. A string key is itself; any other key
  (``int``, ``float``, ``bool``, ``None``, ``uuid.UUID``, ``datetime.date``,
  ``datetime.datetime``, ``decimal.Decimal``, ``bytes`` or a tuple of those, nested) is
  ``U+001F`` followed by the canonical JSON text of its JSON form (``runtime.key_json``: no
  spaces, floats as Python's shortest ``repr``, a tagged type as ``{"uuid":"..."}``), so
  ``1``, ``True`` and ``1.0`` are three keys, as they are in Java, and not one as in a
  Python ``dict``; so are ``Decimal("1.0")`` and ``Decimal("1.00")``, and one instant in
  two UTC offsets (as Java's ``BigDecimal`` and ``OffsetDateTime`` tell them apart). A
  string key that starts with ``U+001F`` or ``U+001E`` is written the same way (its JSON
  string), so no string is ever taken for another key.
- ``"pickle"``: the key's pickle (PyFlink's ``PICKLED_BYTE_ARRAY`` key type), as releases
  before this encoding existed keyed state. Nothing promises those bytes: PyFlink pickles a
  key with ``pickle`` in thread mode (Python's default protocol: 4 up to Python 3.13, 5 from
  3.14) and with ``cloudpickle`` in process mode (protocol 5), so the same key has other
  bytes, and another key group, by execution mode and Python version. It exists so that a
  job restores from a savepoint such a release took (Flink does not migrate a key
  serializer), in the execution mode and on the Python version that took it; in thread mode
  a restore that finds keys pickled otherwise fails (``KeyEncoding.check_restored``).

The host keys its own bookkeeping (the core's runs, the I/O executor, timers) by the
encoded key, its *identity*; actions, outputs, error records, the event log and the
journal see the key's value (``KeyEncoding.value``), unchanged in value and type.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import json
import math
import pickle
from collections.abc import Callable
from typing import Any, Literal

from ..api import AgentsError
from ..api.internal import (
    KEY_TAGS,
    KEY_TYPES,
    cut_masked,
    key_json,
    shown_key,
    tagged_json,
    untag,
)
from ._serde import dumps
from .core._results import RejectedKey, select_key

__all__ = ["KeyEncoding", "KeyEncodingError", "KeyEncodingMismatchError", "KEY_ENCODINGS",
           "JSON_KEYS", "PICKLE_KEYS", "key_encoding", "encode_key", "decode_key"]

_JSON = "\x1f"
"""First character of an encoded key that is not a plain string: JSON text follows."""
_REJECTED = "\x1e"
"""First character of the key of a record its key selector failed on (``RejectedKey``)."""
REJECTED_MARK = _REJECTED
"""``_REJECTED``, for a host that looks at a key's first character before asking
``KeyEncoding.rejected`` (a ``str`` key not starting with it is never rejected)."""
_SCALARS = (int, float, bool, type(None))
_CONSTANTS = {True: _JSON + "true", False: _JSON + "false", None: _JSON + "null"}
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=tagged_json)
"""The canonical JSON text of a key (one encoder: ``json.dumps`` with options makes one per
call); a tagged type as its JSON form (``runtime.key_json``)."""
_DECODER = json.JSONDecoder(object_hook=untag)
"""An encoded key's JSON text back to its value (a tagged object to its type)."""


def key_text(key: Any) -> str:
    """The JSON text of ``key``'s JSON form (``runtime.key_json``): how journals name a key.

    Object keys sorted; for a key of a type every release took, the text those releases
    wrote (so journal entries written before are found).

    Returns:
        The text.

    Raises:
        TypeError: for a key with no JSON form (a ``"pickle"`` encoding key of another type).
    """
    return dumps(key_json(key)).decode()


class KeyEncodingError(AgentsError, TypeError):
    """A key the ``"json"`` key encoding cannot encode.

    Its type is not a key's, or it is a float NaN or infinity, or a string holding a lone
    surrogate.

    The record goes to the error output, with this message, instead of running.
    """


class KeyEncodingMismatchError(AgentsError):
    """A restore found keyed state keyed by another key encoding than the job's.

    Flink refuses such a restore (``StateMigrationException``: the new key serializer must be
    compatible with the previous one) before any state is read, so nothing is lost: run the
    job again with the ``key_encoding`` the message names.
    """


def mismatch_message(error: BaseException, encoding: KeyEncoding) -> str | None:
    """What to do when ``error`` is Flink refusing a restore for its key serializer.

    Args:
        error: what running the job raised (a Py4J error carries Flink's whole trace).
        encoding: the key encoding the job ran with.

    Returns:
        The message naming the option to pass, or ``None`` for another error.
    """
    text = str(error)
    mark = f"{KeyEncodingMismatchError.__name__}: "
    if mark in text:  # the operator's own (``check_restored``), in Flink's trace
        return text[text.index(mark) + len(mark):].splitlines()[0]
    if "StateMigrationException" not in text or "key serializer" not in text:
        return None
    other = "pickle" if encoding.stable else "json"
    taken = ("by a release before key encodings existed (its keys pickled)" if encoding.stable
             else "with the default key encoding ('json')")
    return (f"the restore found keyed state keyed by another key encoding than this job's "
            f"key_encoding={encoding.name!r}: the savepoint or checkpoint was taken {taken}. "
            f"Flink refused it before reading any state (nothing is lost): run the job with "
            f"key_encoding={other!r} (AgentsExecutionEnvironment.flink(env, "
            f"key_encoding={other!r})); see docs/how-to/deployment.md, 'Keys and savepoints'")


def _check(key: Any, where: str) -> None:
    kind = type(key)
    if kind is tuple:
        for i, item in enumerate(key):
            _check(item, f"{where}[{i}]")
        return
    if kind is str:
        if not key.isascii():
            _check_text(key, where)
        return
    if kind in _SCALARS:
        if kind is float and not math.isfinite(key):
            _not_finite(key, where)
        return
    if kind in KEY_TAGS:
        _check_tagged(key, where)
        return
    raise KeyEncodingError(
        f"{where} is {shown_key(key, 100)} of type {kind.__name__}: with the default key "
        f"encoding ('json') a key is {KEY_TYPES} (the exact types, not a subclass); "
        f"convert it in the key selector (e.g. str(key)), or, for a job restored from a "
        f"savepoint that keyed state by pickles, pass key_encoding='pickle'")


def _not_finite(key: Any, where: str) -> None:
    nan = key.is_nan() if type(key) is decimal.Decimal else key != key  # (sNaN: no compare)
    why = ("NaN is not equal to itself, so it could never find its state again" if nan
           else "an infinity has no JSON form, which the key's encoding is")
    raise KeyEncodingError(
        f"{where} is {key!r}: a key must be a finite number ({why}): give such records a "
        f"key of their own in the key selector, or filter them out before the agent")


def _check_tagged(key: Any, where: str) -> None:
    """Check a key of a tagged type (``runtime.key_json``) has a canonical text."""
    if type(key) is decimal.Decimal:
        if not key.is_finite():
            _not_finite(key, where)
        return
    if type(key) is datetime.datetime and key.tzinfo is not None:
        try:
            key.isoformat()  # calls its tzinfo's utcoffset: the user's code
        except Exception as e:  # noqa: BLE001 - said, the record goes to the error output
            raise KeyEncodingError(
                f"{where} is {shown_key(key, 100)}: its tzinfo gives no UTC offset "
                f"({type(e).__name__}: {e}), which an aware datetime key is written with: "
                f"give it a datetime.timezone (or ZoneInfo) in the key selector") from None


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: Flink's STRING key cannot hold it
        raise KeyEncodingError(
            f"{where} is {shown_key(text, 100)}: it holds a lone surrogate "
            f"({text[e.start:e.end]!r} at index {e.start}) and is not valid Unicode text, so "
            f"it cannot key Flink state (a Java string): give such records a valid key in "
            f"the key selector, or filter them out before the agent") from None


def encode_key(key: Any) -> str:
    """The ``"json"`` encoding of ``key``: the Flink ``STRING`` key its state lives under.

    Args:
        key: a ``str``, ``int``, ``float``, ``bool``, ``None``, ``uuid.UUID``,
            ``datetime.date``, ``datetime.datetime``, ``decimal.Decimal``, ``bytes`` or a
            tuple of those.

    Returns:
        ``key`` itself for a string (unless it starts with ``U+001F`` or ``U+001E``), else
        ``U+001F`` and the canonical JSON text of the key's JSON form
        (``runtime.key_json``).

    Raises:
        KeyEncodingError: for any other type (a subclass too: an ``IntEnum`` would come
            back as a plain ``int``), a float or ``Decimal`` NaN or infinity, a string
            holding a lone surrogate (not valid Unicode text), or an aware ``datetime``
            whose ``tzinfo`` gives no UTC offset; the message says what to do.
    """
    kind = type(key)
    if kind is str:
        if not key.isascii():
            _check_text(key, "the key")
        if key and key[0] in (_JSON, _REJECTED):
            return _JSON + json.dumps(key, ensure_ascii=False)
        return str(key)
    if kind is int:  # its JSON text (a fast path)
        return _JSON + str(key)
    if kind is bool or key is None:
        return _CONSTANTS[key]
    _check(key, "the key")
    return _JSON + _ENCODER.encode(key)


def _tuples(value: Any) -> Any:
    if type(value) is list:
        return tuple(_tuples(v) for v in value)
    return value


def decode_key(text: Any) -> Any:
    """The key ``encode_key`` encoded as ``text`` (JSON arrays back as tuples, tags as values).

    Args:
        text: an encoded key; anything but a ``str`` is returned as it is.

    Returns:
        The key, in its own type; a ``RejectedKey`` for a rejected record's key.
    """
    if type(text) is not str or not text or text[0] not in (_JSON, _REJECTED):
        return text
    if text[0] == _REJECTED:
        return RejectedKey(*json.loads(text[1:]))
    # cached: a key comes back at every callback of its records, and the values are
    # immutable; only short ones (a key's parts come from records: any length, and the
    # cache outlives the runs)
    return _decoded(text) if len(text) <= _CACHED_KEY_CHARS else _decode(text)


_CACHED_KEY_CHARS = 256
"""The longest encoded key whose decoded value is cached."""


def _decode(text: str) -> Any:
    """``decode_key`` of a key that is not a plain string.

    Returns:
        The key.
    """
    body = text[1:]
    digits = body[1:] if body[:1] == "-" else body
    if digits.isascii() and digits.isdigit():  # an int (a fast path)
        return int(body)
    return _tuples(_DECODER.decode(body))


_decoded = functools.lru_cache(maxsize=4096)(_decode)


class KeyEncoding:
    """How a host turns a record's key into the key its state is partitioned by.

    Args:
        name: ``"json"`` or ``"pickle"`` (see the module docstring).
    """

    __slots__ = ("name",)

    def __init__(self, name: Literal["json", "pickle"]) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"KeyEncoding({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return key_encoding, (self.name,)

    @property
    def stable(self) -> bool:
        """Whether keys are encoded (``"json"``), not pickled."""
        return self.name == "json"

    def flink_key(self, key_selector: Callable[[Any], Any], record: Any) -> Any:
        """What ``key_by`` keys ``record`` by: the encoded key (its identity).

        A record its selector fails on, or whose key this encoding cannot encode, gets a
        key that ``rejected`` recognises (the operator sends the record to the error
        output).

        Args:
            key_selector: the user's function from a record to its key.
            record: the input record.

        Returns:
            A ``str`` for ``"json"``; the key itself (pickled by PyFlink) or a
            ``RejectedKey`` for ``"pickle"``.
        """
        key = select_key(key_selector, record)
        if not self.stable:
            return key
        if type(key) is not RejectedKey:
            try:
                return encode_key(key)
            except KeyEncodingError as e:
                key = RejectedKey.of(e)
        # escaped: the selector's message may quote a lone surrogate of the record
        return _REJECTED + json.dumps(list(key))

    def rejected(self, identity: Any) -> RejectedKey | None:
        """The ``RejectedKey`` a rejected record's identity stands for, or ``None``."""
        if type(identity) is RejectedKey:
            return identity
        if type(identity) is str and identity[:1] == _REJECTED and self.name == "json":
            return RejectedKey(*json.loads(identity[1:]))
        return None

    def value(self, identity: Any) -> Any:
        """The key as the key selector gave it (``ctx.key``), from its identity."""
        return decode_key(identity) if self.stable else identity

    def check_restored(self, stored: Any, key: Any) -> None:
        """Check that a key found in restored keyed state is encoded as this job encodes it.

        Args:
            stored: the key as keyed state holds it (for ``"pickle"``, its pickle bytes).
            key: that key, decoded.

        Raises:
            KeyEncodingMismatchError: when this job would encode ``key`` otherwise (a
                savepoint with pickled keys taken in the other execution mode, or on a Python
                with another default pickle protocol): the key's next records would not find
                its state. Says what to do.
        """
        if self.stable or not isinstance(stored, (bytes, bytearray)):
            return
        mine = pickle.dumps(key)  # what PyFlink's thread mode writes (``PickleDataConverter``)
        if mine != bytes(stored):
            raise KeyEncodingMismatchError(
                f"keyed state holds the key {cut_masked(repr(key), 100)} pickled as "
                f"{bytes(stored)[:24]!r}, "
                f"but this job pickles it as {mine[:24]!r} (pickle protocol {mine[1]} vs "
                f"{bytes(stored)[1]}): the savepoint was taken in process mode (cloudpickle) "
                f"or on another Python version (or the key's pickle is not stable, e.g. a "
                f"set's order), and its keys' next records would not find their state. "
                f"Restore it with key_encoding='pickle' in the execution mode and on the "
                f"Python version that took it; see docs/how-to/deployment.md, 'Keys and "
                f"savepoints'")

    def value_function(self) -> Callable[[Any], Any] | None:
        """``value``, or ``None`` when the identity is the key's value (``"pickle"``)."""
        return decode_key if self.stable else None


JSON_KEYS = KeyEncoding("json")
"""Keys as Flink ``STRING``s: strings themselves, other JSON values by canonical JSON."""
PICKLE_KEYS = KeyEncoding("pickle")
"""Keys as their pickles: what releases before ``"json"`` did (for their savepoints)."""
KEY_ENCODINGS = {"json": JSON_KEYS, "pickle": PICKLE_KEYS}
"""The key encodings by name."""


def key_encoding(name: str | KeyEncoding) -> KeyEncoding:
    """The key encoding called ``name``.

    Args:
        name: ``"json"`` (the default encoding) or ``"pickle"``, or a ``KeyEncoding``.

    Returns:
        The ``KeyEncoding``.

    Raises:
        ValueError: for another name (says which there are).
    """
    if isinstance(name, KeyEncoding):
        return name
    found = KEY_ENCODINGS.get(name)
    if found is None:
        raise ValueError(f"key_encoding={name!r}: the key encodings are 'json' (the default: "
                         f"stable Flink STRING keys) and 'pickle' (keys pickled, for a job "
                         f"restored from a savepoint taken before 'json' existed)")
    return found
