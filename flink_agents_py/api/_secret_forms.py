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
from collections.abc import Callable, Iterable
from functools import lru_cache
from urllib.parse import unquote

__all__ = ["ANCHOR_MIN_CHARS", "anchored", "anchors_of", "canonical", "is_canonical",
           "mask_hidden"]

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


_UNDONE = re.compile(rf"[&\\%\s{_INVISIBLE}]")
r"""A character ``canonical`` may decode, remove or start an escape with: ``_REFERENCE``
starts with ``&``, ``\`` or ``%``, ``_SOFT_BREAK`` holds a line break, ``_SPACE`` is
whitespace and ``_INVISIBLE``."""


_ASCII_UNDONE = "&\\%" + "".join(ch for ch in map(chr, range(128)) if ch.isspace())


def is_canonical(text: str) -> bool:
    r"""Whether ``canonical(text)`` is ``text`` for sure (it holds nothing ``canonical`` undoes).

    Returns:
        ``True`` when ``text`` has no ``&``, ``\``, ``%``, whitespace or invisible character.
    """
    if text.isascii():  # a flag of the string: no scan; then one memchr-like search each
        return not any(ch in text for ch in _ASCII_UNDONE)
    return _UNDONE.search(text) is None


def canonical(text: str) -> str:
    """``text`` with references and escapes decoded and separators removed (``_ROUND``).

    Args:
        text: any text.

    Returns:
        The canonical text (``text`` itself when there was nothing to undo).
    """
    global _last
    last = _last  # one read: another thread may replace it
    if last[0] is text:  # a long text masked by both searches (_secrets, _secret_encodings)
        return last[1]
    original = text
    for _ in range(2):
        decoded = _REFERENCE.sub(_decode_match, text)
        again = decoded != text
        if "=" in decoded or "\\" in decoded:
            decoded = _SOFT_BREAK.sub("", decoded)
        text = _strip_spaces(decoded)
        if not again:
            break
    _last = (original, text)
    return text


_last: tuple[str, str] = ("", "")


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


ANCHOR_MIN_CHARS = 4
"""The shortest run of letters and digits of a value used as its anchor (``anchors_of``)."""

_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")


def anchors_of(escaped: Iterable[str], literals: Iterable[str]) -> tuple[str, ...] | None:
    """Literals one of which every match of a registry's regexes contains (``_secrets``).

    A match of a value's escape pattern (each character other than an ASCII letter or digit
    as itself or escaped) holds the value's ASCII letters and digits as they are, so it
    contains the value's longest run of them; a match of an exact form, or of a canonical
    form in a canonical text, is that literal. A text holding none of the anchors holds no
    known secret where it stands, nor in ``canonical(text)`` when that holds none either.

    Args:
        escaped: the values matched by an escape pattern.
        literals: every exact form and every canonical form.

    Returns:
        The anchors (each literal contains one of them); ``None`` when a value of
        ``escaped`` has no run of ``ANCHOR_MIN_CHARS`` letters and digits (no sure anchor:
        every text is then searched in full).
    """
    anchors: list[str] = []
    for value in sorted(escaped):
        run = max(_ALNUM_RUN.findall(value), key=len, default="")
        if len(run) < ANCHOR_MIN_CHARS:
            return None
        anchors.append(run)
    for literal in sorted(literals, key=lambda f: (len(f), f)):  # short ones cover long ones
        if not any(a in literal for a in anchors):
            anchors.append(literal)
    return tuple(anchors)


def anchored(text: str, anchors: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of ``anchors`` (plain ``str`` searches, no regex)."""
    return any(anchor in text for anchor in anchors)
