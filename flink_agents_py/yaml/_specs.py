"""The shape of an agents YAML document, as frozen pydantic models: the one definition.

The loader validates a document with ``DocumentSpec`` and ``schema.py`` generates the JSON
Schema for editors from the same models. What a model cannot know (imports, class kinds,
class fields, references between entries, cycles) the loader checks after it (``_build``).

Every entry model forbids unknown keys, except those whose other keys are the fields of a
class (connections, MCP servers, chat model setups, external sub-agents): those allow extra
keys and the loader validates them with the class. ``WHAT`` names an entry in messages.

Extending:

- A key alias (Apache Flink Agents' spelling, say) is ``Field(validation_alias=
  AliasChoices("on", "listen_to"))`` on the field; messages and locations follow it, and
  ``json_schema_extra=alias_keys`` on the model shows the other keys in the JSON Schema.
- A sub-agent kind is a model, one row of ``SUBAGENT_KINDS`` (the key whose presence selects
  it) and one ``Annotated[Model, Tag(tag)]`` member of ``SubagentEntry``, the discriminated
  union (``tests/test_yaml_schema.py`` checks the two agree).
- A ReAct agent is an ``AgentSpec`` with ``react:`` (``ReactSpec``), built by ``_react``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NoReturn

from annotated_types import MinLen
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..api import ChatModelSetup, MessageRole, ResourceName
from ._errors import quoted
from ._nodes import describe

__all__ = [
    "CLASS_PATH", "FUNCTION_PATH", "MAX_NAME_CHARS", "SCHEMA_PATH", "SUBAGENT_KINDS",
    "ActionSpec", "AgentSpec",
    "ChatModelSetupSpec", "ConnectionSpec", "DocumentSpec", "ExternalSubagentSpec",
    "InjectedArgSpec", "InternalSubagentSpec", "McpServerSpec", "PromptMessageSpec",
    "PromptSpec", "ReactSpec",
    "ResourceSpec",
    "SubagentEntry", "ToolSpec", "field_keys",
]

SCHEMA_PATH = Path(__file__).with_name("agents.schema.json")
"""The JSON Schema of the format, generated from these models by ``schema.py`` (for editors:
``# yaml-language-server: $schema=...``)."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
CLASS_PATH = re.compile(rf"{_IDENT}(?:\.{_IDENT})+")
"""A fully-qualified dotted class path: ``pkg.module.Class``."""
FUNCTION_PATH = re.compile(rf"{_IDENT}(?:\.{_IDENT})*:{_IDENT}(?:\.{_IDENT})*")
"""A function as ``module:qualname``."""


# --------------------------------------------------------------------------- value types


def fail(message: str) -> NoReturn:
    """Reject a value with ``message`` as it stands (braces in it are not placeholders).

    Raises:
        PydanticCustomError: always (type ``yaml``).
    """
    raise PydanticCustomError("yaml", "{message}", {"message": message})


def _key(info: ValidationInfo) -> str:
    return info.field_name or "the value"


def _name(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str) or not value.strip():
        fail(f"{_key(info)} must be a non-empty string, got {describe(value)}")
    return value


MAX_NAME_CHARS = 256
"""The longest name of an agent, an action, a resource or what names one (a name is an
identifier in messages, metrics and state, not text)."""


def _short_name(value: Any, info: ValidationInfo) -> Any:
    _name(value, info)
    if len(value) > MAX_NAME_CHARS:
        fail(f"{_key(info)} {quoted(value)} is {len(value):,} characters long; a name has "
             f"at most {MAX_NAME_CHARS}")
    return value


def _text(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str):
        fail(f"{_key(info)} must be a string, got {describe(value)}")
    return value


def _class_path(value: Any, info: ValidationInfo) -> Any:
    _name(value, info)
    if not CLASS_PATH.fullmatch(value):
        hint = " (use dots, not 'module:Class')" if ":" in value else ""
        fail(f"{quoted(value)} is not a fully-qualified dotted class path like "
             f"'pkg.module.Class'{hint}")
    return value


def _function_path(value: Any, info: ValidationInfo) -> Any:
    _name(value, info)
    if not FUNCTION_PATH.fullmatch(value):
        fail(f"{quoted(value)} is not a 'module:qualname' function path like "
             "'my_app.module:function'")
    return value


def _python_only(value: Any) -> Any:
    if not isinstance(value, str):
        fail(f"type must be a string ('python'), got {describe(value)}")
    if value.lower() != "python":
        fail(f"type {quoted(value)} is not supported: flink-agents-py runs Python actions and "
             "resources only (cross-language entries such as Apache Flink Agents' "
             "'type: java' cannot run here); remove 'type' or set it to python")
    return "python"


def _mapping(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, dict):
        fail(f"{_key(info)} must be a mapping, got {describe(value)}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        fail(f"{_key(info)} keys must be strings, got {quoted(bad[0])}")
    return value


def _event_name(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        fail(f"an event type must be a name, got {describe(value)}")
    return value


def _one_or_many(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and not value:
        fail("an action needs at least one trigger event type")
    if not isinstance(value, list):
        fail(f"must be a list, got {describe(value)}")
    return value


def _input_schema(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value)
    if not isinstance(value, str) or not value.strip():
        fail(f"input_schema must be JSON Schema text or a mapping, got {describe(value)}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        fail(f"input_schema is not valid JSON: {err}")
    if not isinstance(parsed, dict):
        fail("input_schema must be a JSON Schema object")
    return value


def _providers(suffix: str) -> dict[str, str]:
    """Flink Agents' short provider names (``clazz: ollama``) -> our class paths."""
    out = {attr[: -len(suffix)].lower(): path for attr, path in vars(ResourceName.ChatModel).items()
           if attr.endswith(suffix)}
    out.setdefault("openai", out["openai_completions"])
    return out


CONNECTION_PROVIDERS = _providers("_CONNECTION")
"""``clazz:`` short names of chat model connections (``ResourceName.ChatModel.*_CONNECTION``)."""
SETUP_PROVIDERS = _providers("_SETUP")
"""``clazz:`` short names of chat model setups (``ResourceName.ChatModel.*_SETUP``)."""


def _provider_class(providers: dict[str, str]) -> Any:
    def check(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and value.lower() in providers:
            return providers[value.lower()]
        return _class_path(value, info)
    return check


def _provider_schema(providers: dict[str, str]) -> dict[str, Any]:
    return {"anyOf": [
        {"enum": sorted(providers), "description": "A Flink Agents short provider name."},
        {"type": "string", "pattern": f"^{CLASS_PATH.pattern}$",
         "description": "A fully-qualified dotted class path: pkg.module.Class."}]}


Name = Annotated[str, BeforeValidator(_short_name), WithJsonSchema(
    {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS})]
Text = Annotated[str, BeforeValidator(_text)]
ClassPath = Annotated[str, BeforeValidator(_class_path), WithJsonSchema({
    "type": "string", "pattern": f"^{CLASS_PATH.pattern}$",
    "description": "A fully-qualified dotted class path: pkg.module.Class."})]
FunctionPath = Annotated[str, BeforeValidator(_function_path), WithJsonSchema({
    "type": "string", "pattern": f"^{FUNCTION_PATH.pattern}$",
    "description": "A function as module:qualname, e.g. my_app.agents:start."})]
Language = Annotated[Literal["python"], BeforeValidator(_python_only), WithJsonSchema({
    "const": "python",
    "description": "Only python entries run here; type: java (or any other) is rejected."})]
Config = Annotated[dict[str, Any], BeforeValidator(_mapping)]
ConnectionClass = Annotated[str, BeforeValidator(_provider_class(CONNECTION_PROVIDERS)),
                            WithJsonSchema(_provider_schema(CONNECTION_PROVIDERS))]
SetupClass = Annotated[str, BeforeValidator(_provider_class(SETUP_PROVIDERS)),
                       WithJsonSchema(_provider_schema(SETUP_PROVIDERS))]
EventName = Annotated[str, BeforeValidator(_event_name), WithJsonSchema({
    "type": "string", "minLength": 1,
    "description": "A built-in event type (InputEvent, OutputEvent, ChatRequestEvent, "
                   "ChatResponseEvent, ToolRequestEvent, ToolResponseEvent; or Flink Agents' "
                   "short names: input, chat_response...), an Event "
                   "subclass's EVENT_TYPE, or its dotted class path."})]
EventNames = Annotated[tuple[EventName, ...], BeforeValidator(
    _one_or_many,
    json_schema_input_type=EventName | Annotated[list[EventName], MinLen(1)])]
JsonSchemaText = Annotated[str, BeforeValidator(
    _input_schema, json_schema_input_type=Annotated[str, MinLen(1)] | dict[str, Any])]


# --------------------------------------------------------------------------- models


class _Spec(BaseModel):
    """An entry of the document: frozen, unknown keys rejected, ``key:`` (null) = absent."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    WHAT: ClassVar[str] = "an entry"

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        optional = {k for name, f in cls.model_fields.items() if not f.is_required()
                    for k in field_keys(name, f)}
        return {k: v for k, v in data.items() if not (v is None and k in optional)}


def field_keys(name: str, info: Any) -> tuple[str, ...]:
    """The keys a document may use for a field: its name, alias and validation aliases."""
    keys = [name]
    if info.alias:
        keys.append(info.alias)
    va = info.validation_alias
    if isinstance(va, str):
        keys.append(va)
    elif va is not None and hasattr(va, "choices"):
        keys.extend(c for c in va.choices if isinstance(c, str))
    return tuple(dict.fromkeys(keys))


def alias_keys(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Show a field's other keys (its ``AliasChoices``) in the schema.

    Each takes the field's schema, and a required field needs exactly one of its keys. Use
    as ``json_schema_extra``.
    """
    props, required = schema["properties"], schema.get("required", [])
    for name, info in model.model_fields.items():
        keys = field_keys(name, info)
        if len(keys) < 2 or name not in props:
            continue
        for key in keys[1:]:
            props[key] = props[name]
        if name in required:
            required.remove(name)
            schema.setdefault("allOf", []).append({"oneOf": [{"required": [k]} for k in keys]})
    if not required:
        schema.pop("required", None)


class ActionSpec(_Spec):
    """An action: a ``module:qualname`` function run on event types."""

    WHAT: ClassVar[str] = "an action entry"
    model_config = ConfigDict(json_schema_extra=alias_keys)
    name: Name
    type: Language = "python"
    function: FunctionPath = Field(description="Takes (event, ctx).")
    on: EventNames = Field(validation_alias=AliasChoices("on", "listen_to", "trigger_conditions"),
                           description="The event types that run the action (one, or a list); "
                                       "'listen_to' and 'trigger_conditions' are Flink Agents' "
                                       "spellings.")
    config: Config = Field(default_factory=dict,
                           description="Per-action configuration (ctx.action_config).")

    @model_validator(mode="before")
    @classmethod
    def _one_trigger_key(cls, data: Any) -> Any:
        given = [k for k in ("on", "listen_to", "trigger_conditions")
                 if isinstance(data, dict) and k in data]
        if len(given) > 1:
            fail(f"an action has one of 'on', 'listen_to' and 'trigger_conditions' (the same "
                 f"key), not {' and '.join(repr(k) for k in given)}")
        return data


class PromptMessageSpec(_Spec):
    """One message of a message-list prompt."""

    WHAT: ClassVar[str] = "a prompt message"
    role: MessageRole = MessageRole.USER
    content: Text


class PromptSpec(_Spec):
    """A prompt: ``text`` (with an optional ``role``) or ``messages``."""

    WHAT: ClassVar[str] = "a prompt entry"
    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"required": ["text"], "not": {"required": ["messages"]}},
        {"required": ["messages"], "not": {"anyOf": [{"required": ["text"]},
                                                     {"required": ["role"]}]}},
    ]})
    name: Name
    type: Language = "python"
    text: Text | None = None
    role: MessageRole | None = None
    messages: tuple[PromptMessageSpec, ...] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> PromptSpec:
        if (self.text is None) == (self.messages is None):
            fail("a prompt needs exactly one of 'text' or 'messages'")
        if self.role is not None and self.text is None:
            fail("'role' goes with 'text' only")
        return self


class InjectedArgSpec(_Spec):
    """Where the runtime reads a tool parameter it fills (Flink Agents' ``injected_args``)."""

    WHAT: ClassVar[str] = "an injected argument"
    source: Literal["config", "sensory_memory", "short_term_memory"] = "sensory_memory"
    key: Text | None = Field(default=None, description="Defaults to the parameter's name.")

    @field_validator("source", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


class ToolSpec(_Spec):
    """A function tool (its argument schema comes from the signature)."""

    WHAT: ClassVar[str] = "a tool entry"
    name: Name
    type: Language = "python"
    function: FunctionPath
    description: Text | None = Field(default=None, description="Defaults to the docstring.")
    requires_approval: bool = Field(
        default=False, description="Hold each call until approved on the agent's second input "
                                   "(an ApprovalRequest goes to the output).")
    approval_timeout_s: float | None = Field(
        default=None, gt=0, le=1e9, description="How long a held call waits for its answer, in "
                                        "seconds (default: until answered).")
    injected_args: dict[str, InjectedArgSpec] = Field(
        default_factory=dict, description="Parameters the runtime fills from the configuration "
                                          "or memory, hidden from the model.")


class ResourceSpec(_Spec):
    """A resource built from a class.

    Every key but ``name``, ``clazz`` and ``type`` is a field of the class.
    """

    model_config = ConfigDict(extra="allow")
    name: Name
    type: Language = "python"
    clazz: ClassPath


class ConnectionSpec(ResourceSpec):
    """A ``ChatModelConnection``; ``clazz`` may be a Flink Agents short name (``ollama``)."""

    WHAT: ClassVar[str] = "a chat model connection entry"
    clazz: ConnectionClass


class McpServerSpec(ResourceSpec):
    """An MCP server ``Resource``."""

    WHAT: ClassVar[str] = "an MCP server entry"


def _setup_fields(schema: dict[str, Any]) -> None:
    """Show ``ChatModelSetup``'s fields in the schema (the class validates them)."""
    own = ChatModelSetup.model_json_schema()
    for key, value in own.get("properties", {}).items():
        if "$ref" in json.dumps(value):  # a nested model's schema is not ours to show;
            plain = [a for a in value.get("anyOf", []) if "$ref" not in json.dumps(a)]
            if all(a == {"type": "null"} for a in plain):  # its other forms are (``prompt``:
                continue  # a name or a text; ``budget``: none to show)
            value = {**value, "anyOf": plain}
        schema["properties"].setdefault(key, value)
    schema["required"] = [*schema.get("required", []),
                          *(k for k in own.get("required", []) if k != "name")]


class ChatModelSetupSpec(_Spec):
    """A ``ChatModelSetup`` (or the subclass ``clazz`` names); other keys are its fields."""

    WHAT: ClassVar[str] = "a chat model setup entry"
    model_config = ConfigDict(extra="allow", json_schema_extra=_setup_fields)
    name: Name
    type: Language = "python"
    clazz: SetupClass | None = Field(
        default=None, description="Defaults to flink_agents_py.api.ChatModelSetup; a Flink "
                                  "Agents short name (ollama, openai...) names its adapter.")


class InternalSubagentSpec(_Spec):
    """A sub-agent run in-process.

    ``agent`` names an agent of the document, or an ``Agent`` class or instance by
    ``module:qualname``.
    """

    WHAT: ClassVar[str] = "an internal sub-agent entry"
    name: Name
    type: Language = "python"
    agent: Name
    description: Text | None = None
    input_schema: JsonSchemaText | None = Field(
        default=None, description="JSON Schema of the input: JSON text, or a mapping.")

    @model_validator(mode="before")
    @classmethod
    def _not_both(cls, data: Any) -> Any:
        if isinstance(data, dict) and "clazz" in data:
            fail("a sub-agent has either 'agent' (internal) or 'clazz' (external), not both")
        return data


class ExternalSubagentSpec(_Spec):
    """A ``DeferredSubagentSetup`` or ``AsyncSubagentSetup`` class; other keys are its fields."""

    WHAT: ClassVar[str] = "a sub-agent entry"
    model_config = ConfigDict(extra="allow",
                              json_schema_extra={"not": {"required": ["agent"]}})
    name: Name
    type: Language = "python"
    clazz: ClassPath
    description: Text | None = None
    input_schema: JsonSchemaText | None = Field(
        default=None, description="JSON Schema of the input: JSON text, or a mapping.")


SUBAGENT_KINDS: dict[str, tuple[str, type[_Spec]]] = {
    "internal": ("agent", InternalSubagentSpec),
    "external": ("clazz", ExternalSubagentSpec),
}
"""Sub-agent kinds: tag -> (the key whose presence selects it, its model), tried in order."""


def _subagent_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return next(iter(SUBAGENT_KINDS))  # reported by that model as "must be a mapping"
    return next((tag for tag, (key, _) in SUBAGENT_KINDS.items() if key in value), None)


SubagentEntry = Annotated[
    Annotated[InternalSubagentSpec, Tag("internal")]
    | Annotated[ExternalSubagentSpec, Tag("external")],  # one member per SUBAGENT_KINDS row
    Discriminator(_subagent_kind, custom_error_type="yaml", custom_error_message=(
        "a sub-agent needs 'agent' (an agent of this document) or 'clazz' (an external "
        "setup class)")),
]


class ReactSpec(_Spec):
    """The agent is a ReAct agent (``flink_agents_py.agents.ReActAgent``'s loop).

    It runs over its own chat model setup, tools, sub-agents and prompt; keys as Flink
    Agents' ``ReActAgent``.
    """

    WHAT: ClassVar[str] = "a react entry"
    chat_model: Name = Field(description="A chat model setup of this agent (its tools and "
                                         "sub-agents are what the model may call).")
    prompt: Name | None = Field(default=None, description="A prompt of this agent: the "
                                "instructions and the input template ({input} or fields).")
    output_schema: ClassPath | None = Field(default=None, description="A pydantic model "
                                            "class the answer must follow (dotted path).")
    max_iterations: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="The most model-tool rounds (default: the setup's "
                                  "max_tool_rounds).")


class AgentSpec(_Spec):
    """One agent: its configuration, actions and resources."""

    WHAT: ClassVar[str] = "an agent entry"
    name: Name
    type: Language = "python"
    config: Config = Field(default_factory=dict,
                           description="Agent-wide configuration (Agent.set_config).")
    actions: tuple[ActionSpec, ...] = ()
    chat_model_connections: tuple[ConnectionSpec, ...] = ()
    chat_model_setups: tuple[ChatModelSetupSpec, ...] = ()
    prompts: tuple[PromptSpec, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    mcp_servers: tuple[McpServerSpec, ...] = ()
    subagents: tuple[SubagentEntry, ...] = ()
    description: Text | None = Field(default=None, description="What the agent does.")
    react: ReactSpec | None = Field(default=None, description="Makes this a ReAct agent "
                                    "(no 'actions': the ReAct loop is its action).")


def _some_agents(value: Any) -> Any:
    if value is None or (isinstance(value, list) and not value):
        fail("the document declares no agent")
    return value


class DocumentSpec(_Spec):
    """A document of agents (``flink_agents_py.yaml.load_agents``)."""

    WHAT: ClassVar[str] = "the document"
    model_config = ConfigDict(title="flink-agents-py agents", json_schema_extra={
        "description": "Agents declared in YAML, loaded by flink_agents_py.yaml.load_agents. "
                       "The loader checks more than this schema (imports, class kinds, class "
                       "fields, references, cycles)."})
    subagents: tuple[SubagentEntry, ...] = Field(
        default=(), description="Sub-agents shared by every agent of the document (an "
                                "agent's own entry of the same name wins).")
    agents: Annotated[tuple[AgentSpec, ...], BeforeValidator(
        _some_agents, json_schema_input_type=Annotated[list[AgentSpec], MinLen(1)])]
