"""Plan-build check of a chat model setup's prompt: a name that is not declared."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["check_prompt_name"]


def check_prompt_name(name: str, arguments: Mapping[str, Any], prompts: Collection[str],
                      servers: bool, problems: list[str]) -> None:
    """Add a problem when a setup's ``prompt`` reads as a prompt name that is not declared.

    A setup's ``prompt`` is the name of a ``PROMPT`` resource or, when no prompt has that
    name, a literal system text. A misspelt name (``review_promt``) was therefore sent to the
    model as the system prompt, word for word, and the job ran on without its prompt. A
    text that is one identifier is taken for a name when it is close to a declared prompt's
    name, or when it has an underscore (a sentence has none) and no MCP server is declared
    that could offer it.

    Args:
        name: the chat model setup's resource name.
        arguments: its descriptor's arguments.
        prompts: the names of the plan's ``PROMPT`` resources.
        servers: whether the plan declares an MCP server (its prompts may be listed only
            when it opens).
        problems: where the problem goes.
    """
    text = arguments.get("prompt")
    if not isinstance(text, str) or text in prompts or not text.isidentifier():
        return
    near = difflib.get_close_matches(text, list(prompts), n=1, cutoff=0.75)
    if near:
        problems.append(
            f"chat_model resource {name!r} names prompt {text!r}, which is not declared: did "
            f"you mean {near[0]!r}? (declared prompts: {', '.join(sorted(prompts))}; a prompt "
            f"that is no declared name is sent as literal text)")
    elif "_" in text and not servers:
        problems.append(
            f"chat_model resource {name!r} names prompt {text!r}, which is not declared "
            f"(declared prompts: {', '.join(sorted(prompts)) or 'none'}): declare it "
            f"(@prompt, or add_resource({text!r}, ResourceType.PROMPT, Prompt.from_text(...))),"
            f" or write the prompt's text itself; as it is, the model would get {text!r} as "
            f"its system prompt")
