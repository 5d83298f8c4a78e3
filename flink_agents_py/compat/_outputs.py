"""Flink outputs in the form Flink Agents' ``to_datastream()`` hands them on.

Flink Agents sends each ``OutputEvent`` from its Python action to its Java operator as
JSON and back: what reaches the stream after ``to_datastream()`` is the output's JSON form,
so a pydantic model comes out as a dict of its fields, and its e2e tests write each output
with ``json.dumps(x)``. Its older quickstarts read the same outputs as the model
(``key_by(lambda x: x.id)``, ``element.score`` in a window function, ``print()``).

``ModelOutput`` serves both: a ``dict`` holding the model's JSON form (so ``json.dumps``
and ``x["id"]`` work) that reads any other attribute from the model itself (``x.id``,
``x.model_dump()``), prints as the model and equals it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..runtime.internal import holds_model

__all__ = ["ModelOutput", "json_form_outputs"]


class ModelOutput(dict):
    """A pydantic model output as its JSON form (a dict), also read as the model.

    Attributes:
        model: the model the action sent.
    """

    def __init__(self, model: BaseModel) -> None:
        """Hold ``model`` and its ``model_dump(mode="json")``.

        Args:
            model: the output.
        """
        super().__init__(model.model_dump(mode="json"))
        self.__dict__["model"] = model

    def __getattr__(self, name: str) -> Any:
        model = self.__dict__.get("model")
        if model is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(model, name)

    def __str__(self) -> str:
        return str(self.__dict__["model"])

    def __repr__(self) -> str:
        return repr(self.__dict__["model"])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BaseModel):
            return bool(self.__dict__["model"] == other)
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # a dict's

    def __reduce__(self) -> tuple[Any, ...]:
        return (ModelOutput, (self.__dict__["model"],))


def json_form_outputs(value: Any) -> Any:
    """``value`` with each pydantic model in it (in dicts and lists) a ``ModelOutput``.

    Args:
        value: an agent's output.

    Returns:
        The output as Flink Agents' ``to_datastream()`` gives it; ``value`` itself when
        it holds no model.
    """
    if isinstance(value, BaseModel):
        return ModelOutput(value)
    if type(value) is dict:
        return {k: json_form_outputs(v) for k, v in value.items()} \
            if any(holds_model(v) for v in value.values()) else value
    if type(value) is list:
        return [json_form_outputs(v) for v in value] if any(map(holds_model, value)) \
            else value
    return value

