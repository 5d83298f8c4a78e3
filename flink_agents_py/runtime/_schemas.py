"""Checking values against JSON Schemas: a model's structured answer, a sub-agent's input.

One validator per schema (cached, the schema's own draft, Draft 2020-12 by default); a value
that does not follow it is described by JSON path (``$.items[0].qty``) and message, the first
three problems in path order, each clipped (a validator's message quotes the value).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from ..api import ResourceError, SubagentInputError, SubagentSetup
from ..api.internal import declared_input_schema
from ._failures import clip

__all__ = ["schema_problems", "check_subagent_input"]

_VALIDATORS: dict[bytes, Any] = {}


def schema_problems(value: Any, schema: dict[str, Any]) -> str | None:
    """Where and how ``value`` breaks the JSON Schema ``schema``.

    Returns:
        ``"at $.path: message; ..."`` (at most three, then how many more), or ``None`` when
        ``value`` follows the schema.

    Raises:
        jsonschema.SchemaError: when ``schema`` itself is not a valid JSON Schema.
    """
    import jsonschema

    key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    validator = _VALIDATORS.get(key)
    if validator is None:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        validator = cls(schema)
        if len(_VALIDATORS) >= 128:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None

    def where(e: Any) -> str:
        path = "$"
        for part in e.absolute_path:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        return path

    shown = "; ".join(f"at {clip(where(e), 200)}: {clip(e.message, 300)}" for e in errors[:3])
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{shown}{more}"


def check_subagent_input(name: str, setup: SubagentSetup, input: Any) -> None:
    """Refuse an input sub-agent ``name`` does not take, before any call starts.

    The input is checked against the schema the sub-agent declares (``input_schema``, else
    the one derived from ``input_type``: what a chat model is offered); a sub-agent that
    declares neither takes any input. A pydantic model is checked in its JSON form.

    Args:
        name: the sub-agent's registered name.
        setup: its setup.
        input: the call's input (a dataclass already as the ``dict`` of its fields).

    Raises:
        SubagentInputError: naming the sub-agent, each field and what is wrong with it.
        ResourceError: when the declared schema is no JSON, or no valid JSON Schema.
    """
    import jsonschema

    schema = declared_input_schema(name, setup)
    if schema is None:
        return
    value = input.model_dump(mode="json") if isinstance(input, BaseModel) else input
    try:
        problems = schema_problems(value, schema)
    except jsonschema.SchemaError as e:
        raise ResourceError(
            f"sub-agent {name!r}: its input_schema is not a valid JSON "
            f"Schema: {clip(e.message, 300)}"
        ) from None
    if problems is not None:
        raise SubagentInputError(
            f"the input of sub-agent {name!r} does not follow its input schema: {problems}"
        )
