"""What a plan problem about a name that is not declared adds: what is, and the near name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["declared_hint", "near_name"]


def declared_hint(name: str, declared: Iterable[str], kind: str) -> str:
    """Name the resources of ``kind`` that are declared, and the one ``name`` is close to.

    A problem saying only that ``'con'`` is not declared leaves the reader to look up what
    is; with the declared names (and ``did you mean 'conn'?`` for a near one) the fix is in
    the message.

    Args:
        name: the name that points nowhere.
        declared: the names of the resources of that kind the name may point at.
        kind: the resources' type as the problem names them (``chat_model_connection``).

    Returns:
        The text to append to the problem, starting with a space:
        `` (declared chat_model_connection resources: 'conn'; did you mean 'conn'?)``.
    """
    names = sorted(declared)
    listed = ", ".join(repr(n) for n in names) or "none"
    return f" (declared {kind} resources: {listed}{near_name(name, names)})"


def near_name(name: str, declared: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the declared name ``name`` is closest to, if one is near.

    Every message about a name that points nowhere offers the near one, whatever it names
    (a connection, a tool, a fallback setup, a resource an action asks for at run time).

    Args:
        name: the name that points nowhere.
        declared: the names it may have meant.

    Returns:
        The text to append (``""``: no name is near).
    """
    near = difflib.get_close_matches(name, sorted(declared), n=1, cutoff=0.6)
    return f"; did you mean {near[0]!r}?" if near else ""
