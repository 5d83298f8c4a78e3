"""Per-key spend ledgers: chats of one key running at once reserve before they call.

A per-key budget's check read the key's spend as the chat's action started, so chats of a
key running at once (several ``ChatRequestEvent``s sent together, ``ctx.chat`` calls started
before the first is awaited, a sub-agent's chats) all passed it before any had spent: each
could be the call that crossed the limit, and a key spent past its budget by one call per
chat it had in flight. A key's calls through a budgeted setup now go through a ledger of
its own (``_budgets.AgentSpend``, with the whole budget as its share): a call counts in
flight from when it is admitted until it is answered, as the mean spend of the key's calls
answered before it (the key's first call goes alone), and goes only when the key's spend
plus that of the calls in flight is below every limit; the others wait, their I/O slots
given up, and then the policy decides. So the budget is crossed by at most one call, as by
calls made one after another, give or take the estimate's error.

The ledger also counts what the key's answered calls spent before their actions ended and
merged it into the key's memory; a call reads the larger of that and the memory's spend.
Ledgers live in this process (a restore starts from the memory), for the keys that called
last (``KEY_LEDGERS`` of them, and beside them those with calls in flight, never dropped).
"""

from __future__ import annotations

import collections
import itertools
import threading
import weakref
from typing import Any

from ..api import ChatModelSetup
from ._budgets import AgentSpend
from ._keys import key_text

__all__ = ["KEY_LEDGERS", "key_spend"]

KEY_LEDGERS = 10_000
"""How many keys' ledgers a process keeps (those of the keys that called longest ago go)."""

_LEDGERS: collections.OrderedDict[tuple[int, str], tuple[weakref.ref[Any], AgentSpend]] = \
    collections.OrderedDict()
_LOCK = threading.Lock()


def _identity(key: Any) -> str:
    """The key as ledgers tell keys apart: ``1``, ``True``, ``1.0`` and ``"1"`` are four.

    Python's ``==`` takes ``1``, ``True`` and ``1.0`` for one dict key; their JSON texts
    differ, as their keyed state does.

    Returns:
        The key's JSON text (``runtime.key_json``), or its type and ``repr``.
    """
    try:
        return key_text(key)
    except TypeError:  # a key with no JSON form (the "pickle" key encoding): by its type
        return f"{type(key).__module__}.{type(key).__qualname__}:{key!r}"


def key_spend(setup: ChatModelSetup, key: Any) -> AgentSpend:
    """The ledger of ``key``'s calls through ``setup`` (made on first use).

    Args:
        setup: the chat model setup (its ``budget`` has ``scope="key"``).
        key: the key's value.

    Returns:
        Its ledger.
    """
    assert setup.budget is not None
    ident = (id(setup), _identity(key))
    with _LOCK:
        entry = _LEDGERS.get(ident)
        if entry is not None and entry[0]() is setup:
            _LEDGERS.move_to_end(ident)
            return entry[1]
        ledger = AgentSpend(setup.budget, 1)
        _LEDGERS[ident] = (weakref.ref(setup), ledger)
        if len(_LEDGERS) > KEY_LEDGERS:
            oldest = list(itertools.islice(_LEDGERS.items(), len(_LEDGERS) - KEY_LEDGERS))
            for old, (ref, spend) in oldest:
                if spend.in_flight == 0 or ref() is None:
                    del _LEDGERS[old]
        return ledger
