r"""Known secrets hidden by what a text's producer did to it (see ``_secrets``).

A provider's error body is often not the text it started as: word-wrapped (a line break,
and an indent, anywhere inside a key), a MIME base64 dump (76-character lines), HTML or XML
character references (``&#103;&#x6b;``, ``&amp;``), JSON string escapes of any character
(``\u0067``, ``\n``), percent-encoding of any character (``%67``), quoted-printable soft line
breaks (``=`` at the end of a line), a backslash-newline continuation, zero-width spaces and
soft hyphens. Each is undone by ``canonical``, which the registry's second search runs over:
the text with its character references and escapes decoded (twice, for a text escaped twice)
and every separator removed, in which a secret's forms are found as plain literals.

``mask_hidden`` masks what that search finds in the original text: each step records where
its decoded or removed pieces came from, and a match is mapped back to the span of the
original text it was made of. Both are linear in the text's length: each step is one
``re`` pass (no backtracking: each alternative is a fixed shape), and the mapping is built
only when a hidden secret was found.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache
from urllib.parse import unquote

__all__ = ["canonical", "mask_hidden"]

_REFERENCE = re.compile(
    r"&(?:\#[0-9]{1,7};?|\#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)"  # HTML / XML
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a JSON surrogate pair
    r"|\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[nrtbf/\"'\\])"  # JSON / repr / C escapes
    r"|%[0-7][0-9a-fA-F]|%[c-fC-F][0-9a-fA-F](?:%[89abAB][0-9a-fA-F]){1,3}")  # percent (UTF-8)
"""A character written as a reference or an escape (one character each)."""

_SOFT_BREAK = re.compile(r"=\r?\n|\\\r?\n")
"""A quoted-printable soft line break, a backslash-newline continuation."""

_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
"""A soft hyphen, zero-width spaces and joiners, a byte order mark."""

_SPACE = re.compile(rf"[\s{_INVISIBLE}]+")
"""Whitespace (``str.isspace``, as ``str.split`` splits on it) and ``_INVISIBLE``."""

_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}


@lru_cache(maxsize=4096)
def _decode(token: str) -> str:
    """The character ``token`` (a match of ``_REFERENCE``) stands for (``token`` if none)."""
    first = token[0]
    if first == "&":
        if token[1] != "#":
            return html.unescape(token)
        digits = token[2:].rstrip(";")
        code = int(digits[1:], 16) if digits[0] in "xX" else int(digits)
        return chr(code) if 0 < code <= 0x10FFFF else token
    if first == "%":
        try:
            return unquote(token, errors="strict")
        except UnicodeDecodeError:
            return token
    kind = token[1]
    if kind == "u":
        return bytes.fromhex(token.replace("\\u", "")).decode("utf-16-be", "surrogatepass")
    if kind == "x":
        return chr(int(token[2:], 16))
    return _SIMPLE_ESCAPES.get(kind, kind)


def _decode_match(m: re.Match[str]) -> str:
    return _decode(m.group())


def _drop(m: re.Match[str]) -> str:  # noqa: ARG001 - re.sub's callback signature
    return ""


_UNSPACED = dict.fromkeys([c for c in range(0x3001) if chr(c).isspace()]  # all of them
                          + [ord(ch) for ch in _INVISIBLE])
"""``str.translate``'s table removing what ``_SPACE`` matches (whitespace as ``re`` and
``str.isspace`` know it)."""


def _strip_spaces(text: str) -> str:
    """``_SPACE.sub("", text)``, faster."""
    return text.translate(_UNSPACED)


_Step = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]
_ROUND: tuple[_Step, ...] = ((_REFERENCE, _decode_match), (_SOFT_BREAK, _drop), (_SPACE, _drop))
"""One round: references and escapes decoded, then separators removed. A second round runs
when the first decoded something (a text escaped twice: ``&amp;#103;``, a JSON string inside
a JSON string's ``\\n``)."""


def canonical(text: str) -> str:
    """``text`` with references and escapes decoded and separators removed (``_ROUND``).

    Args:
        text: any text.

    Returns:
        The canonical text (``text`` itself when there was nothing to undo).
    """
    for _ in range(2):
        decoded = _REFERENCE.sub(_decode_match, text)
        again = decoded != text
        if "=" in decoded or "\\" in decoded:
            decoded = _SOFT_BREAK.sub("", decoded)
        text = _strip_spaces(decoded)
        if not again:
            break
    return text


class _Pieces:
    """Where one step's output came from: its replaced pieces, in order.

    A piece is ``(new_start, new_end, old_start, old_end)``; the text between pieces was
    copied as it was.
    """

    def __init__(self, text: str, step: _Step) -> None:
        pattern, replace = step
        parts: list[str] = []
        self.new_starts: list[int] = []
        self.pieces: list[tuple[int, int, int, int]] = []
        copied = new_len = 0
        for m in pattern.finditer(text):
            start, end = m.span()
            parts.append(text[copied:start])
            new_len += start - copied
            out = replace(m)
            parts.append(out)
            self.new_starts.append(new_len)
            self.pieces.append((new_len, new_len + len(out), start, end))
            new_len += len(out)
            copied = end
        parts.append(text[copied:])
        self.text = "".join(parts)

    def _piece_before(self, pos: int) -> tuple[int, int, int, int] | None:
        i = bisect_right(self.new_starts, pos) - 1
        return self.pieces[i] if i >= 0 else None

    def start(self, pos: int) -> int:
        """Where the character at ``pos`` of the output starts in the input."""
        piece = self._piece_before(pos)
        if piece is None:
            return pos
        _, new_end, old_start, old_end = piece
        return old_start if pos < new_end else old_end + pos - new_end

    def end(self, pos: int) -> int:
        """Where the text before ``pos`` (> 0) of the output ends in the input."""
        piece = self._piece_before(pos - 1)
        if piece is None:
            return pos
        _, new_end, _, old_end = piece
        return old_end if pos - 1 < new_end else old_end + pos - new_end


def mask_hidden(text: str, regex: re.Pattern[str], mask: str) -> str:
    """``text`` with every match of ``regex`` in its canonical form masked.

    Args:
        text: any text.
        regex: the canonical forms of the secrets (literals).
        mask: what replaces the span of ``text`` a match was made of.

    Returns:
        The masked text; ``text`` itself when ``regex`` finds nothing in ``canonical(text)``.
    """
    if not text or regex.search(canonical(text)) is None:
        return text
    steps: list[_Pieces] = []
    current = text
    for _ in range(2):  # as canonical() does it, recording where each piece came from
        decoded = _Pieces(current, _ROUND[0])
        steps.append(decoded)
        for step in _ROUND[1:]:
            steps.append(_Pieces(steps[-1].text, step))
        again, current = bool(decoded.pieces) and decoded.text != current, steps[-1].text
        if not again:
            break
    spans: list[tuple[int, int]] = []
    for m in regex.finditer(current):
        start, end = m.span()
        for pieces in reversed(steps):
            start, end = pieces.start(start), pieces.end(end)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    out: list[str] = []
    copied = 0
    for start, end in spans:
        out.append(text[copied:start])
        out.append(mask)
        copied = end
    out.append(text[copied:])
    return "".join(out)
