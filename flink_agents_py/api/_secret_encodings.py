r"""More forms of a known secret: the encodings a model or a tool can echo it in.

``_secrets._forms`` gives the forms text takes when a value is escaped into it (JSON,
percent-encoding, quoted-printable, hex, base64). A model asked to "print the key, encoded"
(a prompt injection in a record, a tool result, a skill) writes it in any encoding it
knows; a tool's output may hold it as binary data dumped. Each form here is computed once,
when the secret is registered, from the exact value: masking stays a search for literals.

- base32 (RFC 4648 and its "hex" alphabet, either case) and base85 (Python's ``b85`` and
  Adobe's ``a85``), at every alignment the value can have inside a longer encoded text
  (the characters made of the value's bits only, as ``_secrets._base64_cores`` does);
- UTF-16, little- and big-endian: the text a reader shows (a NUL after or before each ASCII
  character), its hex (either case) and its base64;
- hex bytes joined by a separator (``73:6b``, ``73-6b``, ``0x73, 0x6b``), either case
  (bytes spaced apart, and ``\x73`` escapes, are found already: ``_secret_forms.canonical``
  drops whitespace and decodes escapes);
- ROT13, the value reversed, and the value in upper and in lower case (a model "shouting"
  a key keeps all but its letters' case).

The forms are many (about 60 a secret) and none holds the value itself, so they are kept
out of the registry's regexes (an alternation of literals costs a step per literal at each
position: five keys made a 2.6 MB text take 6 s): ``EncodedForms`` finds them with plain
``str`` searches, in the text and in its canonical form (``_secret_forms.canonical``: a
base32 dump wrapped at 76 characters, a UTF-16 text JSON-escaped), about 0.4 ms a form per
MB.

A key cut into pieces is masked piece by piece where each piece is long enough: any run of
``FRAGMENT_MIN_CHARS`` or more characters of a value, or of twice as many of its hex, is
masked (``_Fragments``): a key a model writes half in one message and half in the next, the
16-character lines of a hex dump (``xxd``: the hex column and the text column). Shorter
pieces are left (a dump's last line of 8 characters of a 40-character key shows those 8).

What nothing finds: an encoding the framework cannot precompute (an encryption, a hash-like
transform), pieces shorter than ``FRAGMENT_MIN_CHARS``. Keep secrets out of what a model can
read.
"""

from __future__ import annotations

import base64
import codecs
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ._secret_forms import canonical, is_canonical, mask_hidden

__all__ = ["FRAGMENT_MIN_CHARS", "EncodedForms", "encoded_forms", "utf8_bytes"]

FRAGMENT_MIN_CHARS = 12
"""The shortest run of a secret's characters masked on its own (twice as many hex digits)."""

MAX_BLOCKS = 32
"""The most blocks a secret (or its hex) is cut into for ``_Fragments``: a secret longer than
``MAX_BLOCKS * FRAGMENT_MIN_CHARS / 2`` characters (192) has its pieces masked from twice
its block's length on, less one (a 1,700-character private key: pieces of 107)."""


_Encode = Callable[[bytes], bytes]


def utf8_bytes(text: str) -> bytes:
    """``text`` as UTF-8, whatever lone surrogates it holds (a secret is never refused so).

    ``os.environ`` reads a byte that is not UTF-8 as a surrogate ``surrogateescape`` turns
    back into that byte (what a client sends); any other lone surrogate is written as
    ``surrogatepass`` does.

    Returns:
        The bytes.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _bit_cores(raw: bytes, encode: _Encode, bits: int, group: int, min_chars: int) -> set[str]:
    """The parts of ``raw``'s encoding that hold only its bits, at each alignment.

    For base32 (5 bits a character, 5-byte groups); base64 is ``_secrets._base64_cores``.

    Returns:
        The cores of at least ``min_chars`` characters.
    """
    cores: set[str] = set()
    for shift in range(group):
        encoded = encode(b"\0" * shift + raw).decode("ascii")
        start = -(-8 * shift // bits)  # the first character holding no bit of the prefix
        end = (8 * (shift + len(raw))) // bits  # past the last one of raw's bits only
        if end - start >= min_chars:
            cores.add(encoded[start:end])
    return cores


def _group_cores(raw: bytes, encode: _Encode, min_chars: int) -> set[str]:
    """The parts of ``raw``'s base85 encoding made of whole 4-byte groups of ``raw``.

    A base85 character depends on its whole group of 4 bytes: at each alignment, the
    groups holding only bytes of ``raw`` encode the same whatever surrounds it.

    Returns:
        The cores of at least ``min_chars`` characters.
    """
    cores: set[str] = set()
    for shift in range(4):
        first = -(-shift // 4)  # the first group holding no prefix byte
        last = (shift + len(raw)) // 4  # past the last group holding only bytes of raw
        if last <= first:
            continue
        body = raw[4 * first - shift : 4 * last - shift]
        core = encode(body).decode("ascii")
        if len(core) >= min_chars:
            cores.add(core)
    return cores


def _hex_joined(raw: bytes) -> set[str]:
    """``raw``'s bytes in hex, joined as dumps and source code write them, either case."""
    forms: set[str] = set()
    for digits in (raw.hex(), raw.hex().upper()):
        pairs = [digits[i : i + 2] for i in range(0, len(digits), 2)]
        forms |= {
            ":".join(pairs),
            "-".join(pairs),
            ", ".join(f"0x{p}" for p in pairs),
            ",".join(f"0x{p}" for p in pairs),
            " ".join(f"0x{p}" for p in pairs),
        }
    return forms


def encoded_forms(
    value: str, min_chars: int, base64_cores: Callable[[bytes], set[str]]
) -> set[str]:
    """The encodings of ``value`` a text can hold it in (see the module docstring).

    Args:
        value: the secret.
        min_chars: the shortest form kept (shorter ones would mask ordinary text).
        base64_cores: ``_secrets._base64_cores``, for the UTF-16 forms' base64.

    Returns:
        The forms, each at least ``min_chars`` characters long.
    """
    raw = utf8_bytes(value)
    forms: set[str] = set()
    for encode in (base64.b32encode, base64.b32hexencode):
        for core in _bit_cores(raw, encode, 5, 5, min_chars):
            forms |= {core, core.lower()}
    for encode85 in (base64.b85encode, base64.a85encode):
        forms |= _group_cores(raw, encode85, min_chars)
    for utf16 in (
        value.encode("utf-16-le", "surrogatepass"),
        value.encode("utf-16-be", "surrogatepass"),
    ):
        forms |= {utf16.decode("latin-1"), utf16.hex(), utf16.hex().upper()}
        forms |= base64_cores(utf16)
    forms |= _hex_joined(raw)
    forms |= {codecs.encode(value, "rot13"), value[::-1], value.upper(), value.lower()}
    return {f for f in forms if len(f) >= min_chars}


@dataclass(frozen=True)
class _Found:
    """A literal found at ``[start, end)`` (what ``mask_hidden`` reads of a regex match)."""

    start: int
    end: int

    def span(self) -> tuple[int, int]:
        """The span, as ``re.Match.span``."""
        return self.start, self.end


def _folded(text: str) -> str | None:
    """``text`` in lower case, each character where it was; ``None`` when that cannot be."""
    low = text.lower()
    return low if len(low) == len(text) else None  # (a rare letter lowers to two)


class _Literals:
    """Finds any of some literals with ``str.find`` (the part of a regex ``mask_hidden`` uses).

    Args:
        literals: found as they are.
        folded: lower-case literals, found in any case (searched in the text lowered once:
            a form and its upper-case twin cost one search).
    """

    def __init__(self, literals: Iterable[str], folded: Iterable[str] = ()) -> None:
        # shortest first: a text is searched only for the literals it is long enough to hold
        self.literals = tuple(sorted(set(literals), key=lambda f: (len(f), f)))
        self.folded = tuple(sorted(set(folded), key=lambda f: (len(f), f)))
        self.upper = tuple(f.upper() for f in self.folded)  # (where lowering moves characters)
        self.shortest = min(map(len, (*self.literals, *self.folded)), default=0)

    def _searches(self, text: str) -> Iterator[tuple[str, str]]:
        """``(haystack, literal)`` pairs to search, the lowered text computed once."""
        size = len(text)
        if not self.shortest or size < self.shortest:
            return
        for literal in self.literals:
            if len(literal) > size:
                break
            yield text, literal
        if self.folded and len(self.folded[0]) <= size:
            low = _folded(text)
            pairs = (low, self.folded) if low is not None else (text, (*self.folded, *self.upper))
            for literal in pairs[1]:
                if len(literal) <= size:
                    yield pairs[0], literal

    def search(self, text: str) -> _Found | None:
        """The first literal found (any one, not the leftmost), or ``None``."""
        size = len(text)
        if size < self.shortest or not self.shortest:  # (plain loops: this runs per record)
            return None
        for literal in self.literals:
            if len(literal) > size:
                break
            at = text.find(literal)
            if at >= 0:
                return _Found(at, at + len(literal))
        if not self.folded or len(self.folded[0]) > size:
            return None
        low = _folded(text)
        haystack, literals = (
            (low, self.folded) if low is not None else (text, (*self.folded, *self.upper))
        )
        for literal in literals:
            if len(literal) <= size and (at := haystack.find(literal)) >= 0:
                return _Found(at, at + len(literal))
        return None

    def finditer(self, text: str) -> Iterator[_Found]:
        """Every occurrence of every literal, from left to right, overlapping ones merged."""
        spans: list[tuple[int, int]] = []
        for haystack, literal in self._searches(text):
            at = haystack.find(literal)
            while at >= 0:
                spans.append((at, at + len(literal)))
                at = haystack.find(literal, at + 1)
        return (_Found(start, end) for start, end in _merged(spans))


class _Fragments:
    """Finds runs of at least ``FRAGMENT_MIN_CHARS`` characters of some values.

    Each value is cut into blocks of half that length: a run that long holds a whole block,
    found by ``str.find``; each block found is then grown, left and right, as far as the
    text follows the value, and kept when the run reaches the length.
    """

    def __init__(self, values: Iterable[str]) -> None:
        self.sources: list[tuple[str, int, bool, list[tuple[int, str]]]] = []
        self.blocks: tuple[str, ...]  # each source's blocks, to find none quickly
        self.folded_blocks: tuple[str, ...]
        for value in sorted(set(values)):
            hexed = utf8_bytes(value).hex()  # found in any case (in the lowered text)
            for source, least, folded in (
                (value, FRAGMENT_MIN_CHARS, False),
                (hexed, 2 * FRAGMENT_MIN_CHARS, True),
            ):
                # a run of 2n - 1 characters holds a whole block of n; a long secret (a
                # private key) is cut into MAX_BLOCKS blocks at most (each is searched for
                # in every text), its pieces masked from twice a block's length on
                size = max((least + 1) // 2, -(-len(source) // MAX_BLOCKS))
                least = max(least, 2 * size - 1)
                if len(source) >= least:
                    blocks = [(at, source[at : at + size]) for at in range(0, len(source), size)]
                    self.sources.append(
                        (source, least, folded, [b for b in blocks if len(b[1]) == size])
                    )
        self.blocks = tuple(b for _, _, f, bs in self.sources if not f for _, b in bs)
        self.folded_blocks = tuple(b for _, _, f, bs in self.sources if f for _, b in bs)

    def _spans(self, text: str, first: bool) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        low: str | None = None
        for source, least, folded, blocks in self.sources:
            if len(text) < least:
                continue
            if folded:
                low = _folded(text) if low is None else low
            haystack = text if not folded or low is None else low
            reached: dict[int, int] = {}  # text position - source position: where a run ended
            for offset, block in blocks:
                at = haystack.find(block)
                while at >= 0:
                    if reached.get(at - offset, -1) < at + len(block):  # not grown already
                        left = _common(haystack, at, source, offset, forward=False)
                        right = _common(
                            haystack, at + len(block), source, offset + len(block), forward=True
                        )
                        start, end = at - left, at + len(block) + right
                        reached[at - offset] = end
                        if end - start >= least:
                            spans.append((start, end))
                    if first and spans:
                        return spans
                    at = haystack.find(block, at + 1)
        return spans

    def search(self, text: str) -> _Found | None:
        """A run found (any one), or ``None``."""
        if not any(b in text for b in self.blocks) and not (
            self.folded_blocks
            and len(text) >= 2 * FRAGMENT_MIN_CHARS - 1
            and any(b in low for low in (text.lower(),) for b in self.folded_blocks)
        ):
            return None  # no block anywhere (the common case, in plain searches)
        spans = self._spans(text, first=True)
        return _Found(*spans[0]) if spans else None

    def finditer(self, text: str) -> Iterator[_Found]:
        """Every run, from left to right, overlapping ones merged."""
        return (_Found(start, end) for start, end in _merged(self._spans(text, first=False)))


def _common(text: str, at: int, source: str, s_at: int, forward: bool) -> int:
    """How many characters ``text`` and ``source`` share from ``at``/``s_at`` on (or before).

    Slices compared in a binary search (each comparison in C): a hostile text repeating
    a piece of a key many times costs a few comparisons a piece, not a step a character.

    Returns:
        The length of the common run, forward from the positions or backward before them.
    """
    most = min(len(text) - at, len(source) - s_at) if forward else min(at, s_at)
    low, high = 0, most
    while low < high:
        mid = (low + high + 1) // 2
        same = (
            text[at : at + mid] == source[s_at : s_at + mid]
            if forward
            else text[at - mid : at] == source[s_at - mid : s_at]
        )
        low, high = (mid, high) if same else (low, mid - 1)
    return low


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


class EncodedForms:
    """The registered secrets' ``encoded_forms``, found by plain searches.

    Args:
        forms: the forms (each already at least ``MIN_SECRET_CHARS`` long).
        values: the secrets (their pieces are masked too: ``_Fragments``).
        min_chars: the shortest canonical form kept.
    """

    def __init__(self, forms: Iterable[str], values: Iterable[str], min_chars: int) -> None:
        plain = {f: canonical(f) for f in set(forms)}
        hidden = {h for h in plain.values() if len(h) >= min_chars}
        folded = {h for h in hidden if h.lower() == h and h.upper() in hidden}
        # found where they stand: the forms canonical() changes (the others are found in a
        # text's canonical form, which holds them), a text repeating them costs no trace back
        self._exact = _Literals({f for f, h in plain.items() if h != f})
        self._hidden = _Literals(hidden - folded - {f.upper() for f in folded}, folded)
        self._pieces = _Fragments(values)
        self._either = _Either(self._hidden, self._pieces)

    def found(self, text: str) -> bool:
        """Whether ``text`` holds a form or a piece, where it stands or in its canonical form."""
        if self._exact.search(text) is not None or self._either.search(text) is not None:
            return True
        return not is_canonical(text) and self._either.search(canonical(text)) is not None

    def mask(self, text: str, mask: str) -> str:
        """``text`` with every form and piece masked, where it stands or hidden (``canonical``).

        Returns:
            The masked text (``text`` itself when none was found).
        """
        # what stands as it is first: a form can end in a character that, with the text
        # after it, canonical() reads as a reference ('&' then '#4'), so the canonical text
        # does not hold it
        text = _replaced(_replaced(text, self._exact, mask), self._either, mask)
        if is_canonical(text) or self._either.search(canonical(text)) is None:
            return text
        return mask_hidden(text, self._either, mask)  # type: ignore[arg-type]


def _replaced(text: str, finder: _Literals | _Fragments | _Either, mask: str) -> str:
    """``text`` with what ``finder`` finds in it replaced by ``mask`` (``text`` if nothing)."""
    if finder.search(text) is None:
        return text
    out: list[str] = []
    copied = 0
    for found in finder.finditer(text):
        out += (text[copied : found.start], mask)
        copied = found.end
    return "".join((*out, text[copied:]))


class _Either:
    """Finds what either of two finders finds (``_Literals``, ``_Fragments``)."""

    def __init__(self, *finders: _Literals | _Fragments) -> None:
        self.finders = finders

    def search(self, text: str) -> _Found | None:
        """A match of any finder, or ``None``."""
        for finder in self.finders:
            found = finder.search(text)
            if found is not None:
                return found
        return None

    def finditer(self, text: str) -> Iterator[_Found]:
        """Every match of every finder, from left to right, overlapping ones merged."""
        spans = [m.span() for finder in self.finders for m in finder.finditer(text)]
        return (_Found(start, end) for start, end in _merged(spans))
