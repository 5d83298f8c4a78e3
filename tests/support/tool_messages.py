"""Reading a tool message as a scripted model does.

A tool's ``str`` result reaches the model as its text; any other value as its JSON text; a
failed call as ``Error: ...``. ``tool_value`` gives back the value a test's tool returned.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["tool_value"]


def tool_value(message: Any) -> Any:
    """The value a tool message carries: its JSON decoded, else its text as it is.

    Args:
        message: a tool ``ChatMessage`` (or its content).

    Returns:
        The decoded JSON value, or the text (a text result, or an ``Error: ...``). A text
        result that is itself JSON text (``"42"``) comes back decoded: the tools using this
        return no such text.
    """
    content = message if isinstance(message, str) else message.content
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return content
