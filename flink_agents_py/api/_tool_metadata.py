"""``ToolMetadata``: what a chat model is told about a tool, in Flink Agents' forms too."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

__all__ = ["ToolMetadata"]

_SCHEMA_KEYS = ("type", "properties", "required", "additionalProperties", "definitions", "$defs")
"""The keys of a JSON Schema a tool's parameters keep (Flink Agents' ``get_parameters_dict``)."""


class _SchemaModel(BaseModel):
    """A model standing for a JSON Schema: its fields are the schema's top-level ones."""

    model_config = ConfigDict(extra="allow")

    schema_: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The JSON Schema this model was made from, as it was given.

        Returns:
            A copy of the schema.
        """
        return dict(cls.schema_)


class ToolMetadata(BaseModel):
    """What a chat model is told about a tool (name, description, JSON Schema of arguments).

    Also built as Apache Flink Agents builds one, ``ToolMetadata(name=..., description=...,
    args_schema=SomeModel)`` (a pydantic class, or a JSON Schema dict), and ``args_schema``
    reads as there: a pydantic class whose ``model_json_schema()`` is the parameters' schema.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @model_validator(mode="before")
    @classmethod
    def _from_args_schema(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "args_schema" not in data:
            return data
        data = dict(data)
        schema = data.pop("args_schema")
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            schema = schema.model_json_schema()
        if not isinstance(schema, dict):
            raise TypeError(
                f"ToolMetadata args_schema must be a pydantic model class or a "
                f"JSON Schema dict, got {type(schema).__name__}"
            )
        if "parameters" in data:
            raise TypeError("ToolMetadata takes args_schema or parameters, not both")
        data["parameters"] = {k: v for k, v in schema.items() if k in _SCHEMA_KEYS}
        return data

    @property
    def metadata(self) -> ToolMetadata:
        """Itself: a chat model connection written for Flink Agents reads ``tool.metadata``."""
        return self

    @property
    def args_schema(self) -> type[BaseModel]:
        """Flink Agents' ``args_schema``: a model of the arguments (top-level fields).

        Its ``model_json_schema()`` is ``parameters``; building it checks the required
        arguments are there.
        """
        required = set(self.parameters.get("required") or ())
        fields: dict[str, Any] = {
            name: (Any, ... if name in required else (spec or {}).get("default"))
            for name, spec in (self.parameters.get("properties") or {}).items()
        }
        model = create_model(self.name or "Arguments", __base__=_SchemaModel, **fields)
        model.schema_ = dict(self.parameters)
        return model

    def get_parameters_dict(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (Flink Agents' ``ToolMetadata`` method)."""
        return dict(self.parameters)
