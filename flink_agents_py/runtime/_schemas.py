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
from ..api.internal import TEXT_INPUT_SCHEMA, declared_input_schema
from ._failures import clip

__all__ = ["schema_problems", "check_subagent_input"]

_VALIDATORS: dict[bytes, Any] = {}
_DECLARED: dict[tuple[str | None, str | None], Any] = {}
"""The validators of the schemas sub-agents declare, by ``(input_schema, input_type)``."""


def _validator(schema: dict[str, Any]) -> Any:
    """The (cached) validator of ``schema``, of its own draft (Draft 2020-12 by default).

    Returns:
        The ``jsonschema`` validator.

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
    return validator


def _problems(validator: Any, value: Any) -> str | None:
    """``"at $.path: message; ..."`` for what ``value`` breaks, or ``None``."""
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


def schema_problems(value: Any, schema: dict[str, Any]) -> str | None:
    """Where and how ``value`` breaks the JSON Schema ``schema``.

    Returns:
        ``"at $.path: message; ..."`` (at most three, then how many more), or ``None`` when
        ``value`` follows the schema.

    Raises:
        jsonschema.SchemaError: when ``schema`` itself is not a valid JSON Schema.
    """
    return _problems(_validator(schema), value)


def check_subagent_input(name: str, setup: SubagentSetup, input: Any) -> None:
    """Refuse an input sub-agent ``name`` does not take, before any call starts.

    The input is checked against the schema the sub-agent declares (``input_schema``, else
    the one derived from ``input_type``: what a chat model is offered); a sub-agent that
    declares neither, or has the default of an agent that declares none
    (``TEXT_INPUT_SCHEMA``), takes any input. A pydantic model is checked in its JSON form.

    Args:
        name: the sub-agent's registered name.
        setup: its setup.
        input: the call's input (a dataclass already as the ``dict`` of its fields).

    Raises:
        SubagentInputError: naming the sub-agent, each field and what is wrong with it.
        ResourceError: when the declared schema is no JSON, or no valid JSON Schema.
    """
    declared = (setup.input_schema, setup.input_type)
    if declared == (None, None) or setup.input_schema == TEXT_INPUT_SCHEMA:
        return  # (the default of an agent declaring none: it takes any input)
    validator = _DECLARED.get(declared)
    if validator is None:
        import jsonschema

        schema = declared_input_schema(name, setup)
        assert schema is not None  # (one of the two is declared)
        try:
            validator = _validator(schema)
        except jsonschema.SchemaError as e:
            raise ResourceError(
                f"sub-agent {name!r}: its input_schema is not a valid JSON "
                f"Schema: {clip(e.message, 300)}"
            ) from None
        if len(_DECLARED) >= 128:
            _DECLARED.clear()
        _DECLARED[declared] = validator
    value = input.model_dump(mode="json") if isinstance(input, BaseModel) else input
    problems = _problems(validator, value)
    if problems is not None:
        raise SubagentInputError(
            f"the input of sub-agent {name!r} does not follow its input schema: {problems}"
        )
