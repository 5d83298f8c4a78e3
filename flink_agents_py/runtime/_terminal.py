r"""Text that is safe to write to a terminal: control and bidi characters made visible.

Keys, outputs, error messages and tracebacks in an event log come from records and models,
so they may hold an ESC (a terminal escape sequence that recolours, moves the cursor or
rewrites the window title), a BEL, a CR (that overwrites the start of the line), a C1
control, a bidirectional override (that reorders what follows, the "Trojan Source" trick) or
a lone surrogate (which cannot be encoded at all). ``escape_controls`` writes each of them
as a visible escape instead (``\x1b``, ``\u202e``), so the text printed is the text logged.
``log_text`` does the same for the failures the runtime logs, keeping their lines.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls", "log_text"]

# Unicode categories Cc (C0, DEL, C1), Cf (format: bidi embeddings, overrides and isolates,
# zero-width characters, BOM, soft hyphen, tags...), Zl and Zp (line and paragraph
# separators), and Cs (lone surrogates), as of Unicode 15.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF \
        else f"\\U{code:08x}"


def escape_controls(text: str) -> str:
    r"""``text`` with control, bidi and other invisible characters written as escapes.

    Escaped: the characters of Unicode categories Cc (C0 controls, newline and tab
    included, DEL, C1 controls), Cf (format: bidi embeddings, overrides and isolates,
    zero-width characters...), Zl, Zp and Cs (lone surrogates). Those up to U+00FF become
    ``\xNN``; others ``\uNNNN`` (``\UNNNNNNNN`` beyond the BMP). Printable text,
    backslashes included, is left as it is. Used by ``flink-agents-py trace`` for every
    line it prints.

    Args:
        text: any text (e.g. a key, an output's JSON form, an error message).

    Returns:
        The text, one line, safe to write to a terminal.
    """
    return _UNSAFE.sub(_escape, text)


def log_text(text: str) -> str:
    """``text`` for a log line: escaped as ``escape_controls`` does, its lines kept, indented.

    For the failures the runtime logs (an exception's message, a traceback), which may quote
    a record or a model: no terminal escape goes out raw, and every line after the first is
    indented by two spaces, so no line of it reads as the start of another log record.

    Args:
        text: any text (an error message, a traceback).

    Returns:
        The text: its lines escaped, joined by a newline and two spaces.
    """
    if text.isprintable():  # the usual message: one line, nothing to escape
        return text
    return "\n  ".join(escape_controls(line) for line in text.split("\n"))
