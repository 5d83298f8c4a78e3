"""``ReActAgent``: a built-in agent that reasons, calls tools and observes until it answers.

The loop (reason -> act -> observe) is the chat of ``ctx.chat``: the model is asked, the
tools (and sub-agents offered as tools) it calls run, their results go back to it, until it
answers without calling a tool or the bound (``max_iterations`` model-tool rounds) is
reached. Each model call and each tool call is a durable call recorded in keyed state, and
the conversation so far (the tool context) is kept in the run's keyed state between rounds,
so a restored job replays what was recorded instead of asking the model again.

Named and shaped as Apache Flink Agents' ``ReActAgent`` (``chat_model``, ``prompt``,
``output_schema``, ``subagent_description``, ``subagent_input_schema``); ``max_iterations``,
``tools`` and ``subagents`` are ours.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ..api import (
    Agent,
    AgentsError,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseError,
    ChatResponseEvent,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceNotFoundError,
    ResourceType,
    RunnerContext,
    UsageError,
    qualified_name,
)
from ..api.internal import TEXT_INPUT_SCHEMA, import_qualified, json_schema_of, warn_unfilled_in

__all__ = ["ReActAgent", "ReActAgentError", "DEFAULT_CHAT_MODEL", "react_action_config"]

DEFAULT_CHAT_MODEL = "_default_chat_model"
"""The chat model setup ``react_action_config`` names when not told another (a
``ReActAgent`` declares its setup under ``chat_model_name``, a readable name)."""
_USER_PROMPT = "_default_user_prompt"
_DEFAULT_DESCRIPTION = "A general-purpose agent that completes a delegated task using its tools."
_DEFAULT_INPUT_SCHEMA = TEXT_INPUT_SCHEMA  # offered to models; submits are not checked by it
_PROMPT_INPUT_SCHEMA = json.dumps({"type": "object", "properties": {"prompt": {"type": "string"}},
                                   "required": ["prompt"], "additionalProperties": False})
_PROMPT_ONLY = "prompt_only"  # action config: the input must be {"prompt": text}
_HAND_OVER = "stop_action"  # action config: the chat's response goes to a subclass's stop_action


class ReActAgentError(AgentsError, RuntimeError):
    """A ``ReActAgent`` run ended without an answer.

    The input was bad, or the chat failed: e.g. the model still called tools when the
    ``max_iterations`` bound was reached. Also a ``RuntimeError``, what Apache Flink Agents'
    ReAct agent raises for an input it cannot turn into a message.
    """


class ReActAgent(Agent):
    """A ReAct agent built on the chat model's tool calling.

    Each input record starts one run: the input becomes the user message(s) (through
    ``prompt`` when given), the model reasons and calls tools until it answers, and the answer
    (the validated structured output when ``output_schema`` is given, else the text) is
    emitted as the run's output: an instance of the ``output_schema`` class when it is an
    importable pydantic model (a class defined inside a function gives its dict), the
    validated JSON value for a JSON Schema, else the answer's text.

    Input: a primitive (``str``, ``int``...) becomes the prompt's ``{input}`` (or the user
    message itself without a prompt); a ``dict`` or pydantic model fills the prompt's
    placeholders by field; without a prompt, only ``{"input": ...}`` (the default sub-agent
    input; a ``"key"`` field beside it is the record's key and ignored) is accepted.

    Args:
        chat_model: the chat model setup (a ``ResourceDescriptor`` of a ``ChatModelSetup``):
            its connection, model, prompt and ``tools`` / ``subagents``.
        prompt: instructions and the input template (``{input}`` or field placeholders).
        output_schema: a pydantic model class, a JSON Schema, or a PyFlink ``RowTypeInfo``
            (Flink Agents': its field names and basic types make the JSON Schema, and the
            output is a dict by field name); the answer must follow it (the model is told
            the schema and asked again when it does not).
        max_iterations: the most model-tool rounds (the chat model setup's
            ``max_tool_rounds``; ``None`` keeps the setup's own, 8 by default).
        tools: functions, ``FunctionTool``s or other ``TOOL`` resources (e.g. the skill
            tools of ``flink_agents_py.skills.skill_tools``), declared as ``TOOL`` resources
            of this agent and offered to the model after the setup's own ``tools``.
        subagents: name to ``AGENT`` resource (e.g. ``other.as_subagent()``) declared on this
            agent and offered to the model as ``_subagent_<name>`` callables.
        subagent_description: what this agent does, when it runs as a sub-agent.
        subagent_input_schema: JSON Schema of its input as a sub-agent, a dict or its JSON
            text (default: one ``input`` string).
        chat_model_name: the name the chat model setup is declared under: metrics, the
            event log and traces label its calls by it (``chat_calls{model=...}``).
            Default: the ``model`` the descriptor names (``"qwen3:8b"``), else
            ``"chat_model"``.

    Raises:
        TypeError: when ``chat_model`` is not a ``ResourceDescriptor`` or ``output_schema``
            is neither a pydantic model class nor a JSON Schema dict.
        UsageError: when ``tools`` is one tool instead of a list of them.
    """

    def __init__(
        self, *, chat_model: ResourceDescriptor, prompt: Prompt | str | None = None,
        output_schema: type[BaseModel] | dict[str, Any] | None = None,
        max_iterations: int | None = None,
        tools: Sequence[Callable[..., Any] | Resource] = (),
        subagents: Mapping[str, Any] | None = None,
        subagent_description: str | None = None,
        subagent_input_schema: str | dict[str, Any] | None = None,
        chat_model_name: str | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(chat_model, ResourceDescriptor):
            raise TypeError(f"ReActAgent(chat_model=...) takes a ResourceDescriptor of a chat "
                            f"model setup, got {type(chat_model).__name__}")
        output_schema = _row_schema(output_schema)
        schema = json_schema_of(output_schema)
        if schema is not None and not isinstance(schema, dict):
            raise TypeError(f"ReActAgent(output_schema=...) takes a pydantic model class or a "
                            f"JSON Schema dict, got {type(output_schema).__name__}")
        self.subagent_description = subagent_description or _DEFAULT_DESCRIPTION
        self.subagent_input_schema = (json.dumps(subagent_input_schema)
                                      if isinstance(subagent_input_schema, dict)
                                      else subagent_input_schema or _DEFAULT_INPUT_SCHEMA)
        arguments = dict(chat_model.arguments)
        tool_names = list(arguments.get("tools") or [])
        if callable(tools) or isinstance(tools, (Resource, str)):
            raise UsageError(f"ReActAgent(tools=...) takes a list of functions or TOOL "
                             f"resources, got one {type(tools).__name__}: pass tools=[...]")
        for t in tools:
            inst = t if isinstance(t, Resource) else FunctionTool.from_function(t)
            tool_name = str(getattr(inst, "tool_name", ""))
            if not tool_name or inst.RESOURCE_TYPE is not ResourceType.TOOL:
                raise TypeError(f"ReActAgent(tools=...) takes functions or TOOL resources, "
                                f"got {type(t).__name__}")
            self.add_resource(tool_name, ResourceType.TOOL, inst)
            if tool_name not in tool_names:
                tool_names.append(tool_name)
        sub_names = list(arguments.get("subagents") or [])
        for name, setup in (subagents or {}).items():
            self.add_resource(name, ResourceType.AGENT, setup)
            if name not in sub_names:
                sub_names.append(name)
        if tool_names:
            arguments["tools"] = tool_names
        if sub_names:
            arguments["subagents"] = sub_names
        if max_iterations is not None:
            arguments["max_tool_rounds"] = max_iterations
        stop, start = type(self).stop_action, type(self).start_action
        overridden = stop is not ReActAgent.stop_action or start is not ReActAgent.start_action
        # a start_action of a subclass names the setup as Flink Agents' does
        setup_name = chat_model_name or (DEFAULT_CHAT_MODEL if start is not ReActAgent.start_action
                                         else _setup_name(chat_model.arguments))
        self.add_resource(setup_name, ResourceType.CHAT_MODEL,
                          ResourceDescriptor(chat_model.clazz, **arguments))
        if prompt is not None:
            self.add_resource(_USER_PROMPT, ResourceType.PROMPT,
                              Prompt.from_text(prompt, role=MessageRole.USER)
                              if isinstance(prompt, str) else prompt)
        # a subclass's start_action / stop_action replace ours, as Flink Agents' do
        config = react_action_config(output_schema, max_iterations, chat_model=setup_name)
        if overridden:
            config[_HAND_OVER] = True  # (a start_action of its own may send a ChatRequestEvent)
            if getattr(stop, "__action_spec__", None) is None:  # not declared by @action
                self.add_action("stop_action", [ChatResponseEvent], stop)
        self.add_action("start_action", [InputEvent], type(self).start_action, config=config)

    def as_subagent(self, description: str | None = None,
                    input_schema: str | dict[str, Any] | None = None) -> ResourceDescriptor:
        """This agent as an internal sub-agent (an ``AGENT`` resource of another agent).

        Args:
            description: for the calling model (default: ``subagent_description``).
            input_schema: JSON Schema of the input, a dict or its JSON text (default:
                ``subagent_input_schema``).

        Returns:
            ``ResourceDescriptor(InternalSubagent, agent=self, ...)``.
        """
        return ResourceDescriptor(InternalSubagent, agent=self,
                                  description=description or self.subagent_description,
                                  input_schema=input_schema or self.subagent_input_schema)

    @classmethod
    def for_subagent(cls, *, chat_model: ResourceDescriptor, description: str,
                     instructions: str | None = None,
                     output_schema: type[BaseModel] | None = None) -> ReActAgent:
        """A ReAct agent to register as another agent's sub-agent (Flink Agents' factory).

        Its input is an object of one string field, ``{"prompt": text}``, which becomes the
        user message; anything else fails its run (``ReActAgentError`` naming what it got).
        Register it with ``parent.add_resource(name, ResourceType.AGENT, child)``; its own
        resources (``child.add_resource``) win over the parent's of the same name.

        Args:
            chat_model: the chat model setup's descriptor (its model, tools, skills).
            description: tells the parent's model when to delegate to it.
            instructions: literal system-message text (braces are not placeholders).
            output_schema: a pydantic model class the answer must follow.

        Returns:
            The agent.
        """
        messages = [ChatMessage(role=MessageRole.USER, content="{prompt}")]
        if instructions:
            literal = instructions.replace("{", "{{").replace("}", "}}")
            messages.insert(0, ChatMessage(role=MessageRole.SYSTEM, content=literal))
        agent = cls(chat_model=chat_model, prompt=Prompt.from_messages(messages),
                    output_schema=output_schema, subagent_description=description,
                    subagent_input_schema=_PROMPT_INPUT_SCHEMA)
        agent._actions = [(name, fn, spec.model_copy(update={
            "config": {**spec.config, _PROMPT_ONLY: True}})) for name, fn, spec in agent._actions]
        return agent

    def get_subagent_description(self) -> str:
        """Caller-facing description when running as a sub-agent (Flink Agents' name)."""
        return self.subagent_description

    def get_subagent_input_schema(self) -> str:
        """Caller-facing input schema when running as a sub-agent (Flink Agents' name)."""
        return self.subagent_input_schema

    @staticmethod
    async def start_action(event: InputEvent, ctx: RunnerContext) -> None:
        """Turn the input into messages, run the chat to its answer, emit the answer.

        Raises:
            ReActAgentError: for input the agent cannot turn into a message, or when the
                chat ends without an answer (the record goes to the error output).
        """
        schema = ctx.action_config.get("output_schema")
        try:
            prompt = ctx.get_resource(ctx.action_config.get("prompt", _USER_PROMPT),
                                      ResourceType.PROMPT)
        except (KeyError, ResourceNotFoundError):
            prompt = None
        if ctx.action_config.get(_PROMPT_ONLY):
            _check_prompt_input(event.input)
        messages = _user_messages(event.input, prompt if isinstance(prompt, Prompt) else None)
        if schema is not None:
            messages = _with_schema_instruction(messages, schema)
        output_type = ctx.action_config.get("output_type")
        wanted = import_qualified(output_type) if output_type else schema
        if ctx.action_config.get(_HAND_OVER):  # a subclass's stop_action takes the response
            ctx.send_event(ChatRequestEvent(
                model=ctx.action_config.get("chat_model", DEFAULT_CHAT_MODEL), messages=messages,
                output_schema=wanted))
            return
        try:
            response = await ctx.chat(ctx.action_config.get("chat_model", DEFAULT_CHAT_MODEL),
                                      messages, output_schema=wanted)
        except ChatResponseError as e:
            bound = ctx.action_config.get("max_iterations")
            raise ReActAgentError(
                f"the ReAct agent ended without an answer (bound: "
                f"{'the setup max_tool_rounds' if bound is None else f'max_iterations={bound}'}"
                f"): {e.reason}") from e
        output = response.structured if schema is not None else response.message.content
        ctx.send_event(OutputEvent(output=output))

    @staticmethod
    def stop_action(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        """Emit a chat response's answer: its structured output, else its text.

        Apache Flink Agents' ReAct agent ends in this action; here ``start_action`` emits
        the answer itself, unless a subclass overrides ``stop_action`` (with or without
        ``@action(ChatResponseEvent)``): then the chat's ``ChatResponseEvent`` goes to the
        override, which may call this one.

        Raises:
            ReActAgentError: the chat failed (the response carries its error).
        """
        if event.response is None:
            raise ReActAgentError(f"the ReAct agent ended without an answer: {event.error}")
        structured = event.response.structured
        ctx.send_event(OutputEvent(
            output=structured if structured is not None else event.response.message.content))


def _setup_name(arguments: Mapping[str, Any]) -> str:
    """A readable name for the setup (metric labels): its model's, else ``"chat_model"``.

    Never the connection's name: one name for two resources would make
    ``override_resource(name)`` ambiguous.

    Returns:
        The name.
    """
    model = arguments.get("model")
    if isinstance(model, str) and model.strip() and model != arguments.get("connection"):
        return model
    return "chat_model"


def react_action_config(output_schema: type[BaseModel] | dict[str, Any] | None,
                        max_iterations: int | None, chat_model: str = DEFAULT_CHAT_MODEL,
                        prompt: str = _USER_PROMPT) -> dict[str, Any]:
    """The configuration of ``ReActAgent.start_action`` (for agents built otherwise: YAML).

    Args:
        output_schema: a pydantic model class, a JSON Schema dict, or ``None``.
        max_iterations: the bound, for the error message (the setup applies it).
        chat_model: the name of the chat model setup resource to chat with.
        prompt: the name of the prompt resource (absent: the input is the message).

    Returns:
        The action's configuration.
    """
    output_type = (qualified_name(output_schema) if isinstance(output_schema, type)
                   and "<locals>" not in output_schema.__qualname__ else None)
    return {"output_schema": json_schema_of(output_schema), "output_type": output_type,
            "max_iterations": max_iterations, "chat_model": chat_model, "prompt": prompt}


_ROW_FIELD_TYPES = {"Integer": "integer", "Long": "integer", "Short": "integer",
                    "Byte": "integer", "BigInteger": "integer", "Float": "number",
                    "Double": "number", "BigDecimal": "number", "Boolean": "boolean",
                    "String": "string", "Char": "string"}


def _row_schema(output_schema: Any) -> Any:
    """A PyFlink ``RowTypeInfo`` output schema (Flink Agents takes one) as a JSON Schema.

    An object of the row's field names, each typed by its basic type (another type, e.g. a
    list, is left open); the output is then a dict by field name, which ``to_table`` fills
    its row from. Anything else is returned as it is.

    Returns:
        The JSON Schema, or ``output_schema``.
    """
    if type(output_schema).__name__ != "RowTypeInfo" or not hasattr(
            output_schema, "get_field_names"):
        return output_schema
    names = list(output_schema.get_field_names())
    properties = {}
    for name, field in zip(names, output_schema.get_field_types(), strict=True):
        kind = _ROW_FIELD_TYPES.get(str(field))
        properties[name] = {"type": kind} if kind else {}
    return {"type": "object", "properties": properties, "required": names}


def _check_prompt_input(value: Any) -> None:
    """Refuse a ``for_subagent`` agent's input other than ``{"prompt": text}``.

    Raises:
        ReActAgentError: naming what was given.
    """
    if not isinstance(value, dict):
        got = type(value).__name__
    elif set(value) - {"key"} != {"prompt"} or not isinstance(value["prompt"], str):
        got = f"fields {sorted(value)}, prompt {type(value.get('prompt')).__name__}"
    else:
        return
    raise ReActAgentError(f"a ReAct sub-agent (ReActAgent.for_subagent) takes only a string "
                          f"'prompt' as input ({{'prompt': text}}), got {got}")


def _user_messages(value: Any, prompt: Prompt | None) -> list[ChatMessage]:
    if isinstance(value, (bool, str, int, float)) or value is None:
        text = str(value)  # None is "None", as Flink Agents sends it
        if prompt is None:
            return [ChatMessage(role=MessageRole.USER, content=text)]
        return _filled(prompt, {"input": text})  # a text prompt
    if isinstance(value, BaseModel):  # its fields as they are, as Flink Agents reads an object
        value = dict(value.__dict__)
    if not isinstance(value, dict):
        raise ReActAgentError(f"the ReAct agent takes a primitive, a dict or a pydantic model "
                              f"as input, got {type(value).__name__}")
    if prompt is None:
        if set(value) - {"key"} == {"input"}:  # the record's key is not a field here
            return [ChatMessage(role=MessageRole.USER, content=str(value["input"]))]
        raise ReActAgentError(
            f"the ReAct agent got an object input (fields {sorted(value)}) and has no prompt "
            f"to turn it into a message: pass prompt=... with {{field}} placeholders, or send "
            f"{{'input': text}}")
    # a text prompt, the user's message: each field's value as ``str`` gives it (``True``,
    # ``None``), as Flink Agents fills it, so a ported program asks its model the same
    return _filled(prompt, {k: str(v) for k, v in value.items()})


def _filled(prompt: Prompt, values: dict[str, str]) -> list[ChatMessage]:
    """The prompt's messages filled from the input's values; unfilled placeholders logged.

    A record without a field the prompt names sent ``{field}`` to the model without a word,
    where a chat model setup's prompt says so (``warn_unfilled``).

    Returns:
        The messages.
    """
    missing = prompt.unfilled(values)
    if missing:
        warn_unfilled_in("ReActAgent prompt", missing, values,
                         f"Give the input a field {missing[0]!r} (or take the placeholder out "
                         f"of the prompt)")
    return prompt.format_messages(role=MessageRole.USER, **values)


def _with_schema_instruction(messages: list[ChatMessage],
                             schema: dict[str, Any]) -> list[ChatMessage]:
    """Insert the output-schema instruction after the first system message (or first)."""
    instruction = ChatMessage(role=MessageRole.SYSTEM, content=(
        f"The final response should be JSON that matches this JSON Schema: "
        f"{json.dumps(schema, sort_keys=True)}"))
    at = next((i + 1 for i, m in enumerate(messages) if m.role == MessageRole.SYSTEM), 0)
    return [*messages[:at], instruction, *messages[at:]]
