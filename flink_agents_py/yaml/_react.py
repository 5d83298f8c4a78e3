"""A ``react:`` agent entry: the agent runs ``ReActAgent``'s loop over its own resources."""

from __future__ import annotations

from pydantic import BaseModel

from ..agents.react import (
    _DEFAULT_DESCRIPTION,
    _DEFAULT_INPUT_SCHEMA,
    ReActAgent,
    react_action_config,
)
from ..api import Agent, InputEvent, ResourceDescriptor, ResourceType
from ._build import import_object
from ._errors import Loc, quoted
from ._nodes import Report
from ._specs import AgentSpec

__all__ = ["add_react", "react_subagent_defaults"]


def react_subagent_defaults(spec: AgentSpec) -> dict[str, str]:
    """What a ``react:`` agent is, as a sub-agent, unless its entry says otherwise.

    Args:
        spec: the agent's spec.

    Returns:
        ``ReActAgent``'s description (or the agent's ``description``) and input schema
        (``{"input": text}``).
    """
    if spec.react is None:
        return {}
    return {"description": spec.description or _DEFAULT_DESCRIPTION,
            "input_schema": _DEFAULT_INPUT_SCHEMA}


def add_react(report: Report, spec: AgentSpec, loc: Loc, agent: Agent) -> None:
    """Give a ``react:`` agent the ReAct action, checking what its keys name.

    Args:
        report: receives the problems (at ``react`` and its keys).
        spec: the agent's entry (``spec.react`` set).
        loc: the entry's location.
        agent: the agent, its resources already added.
    """
    react, at = spec.react, (*loc, "react")
    if react is None:
        return
    if spec.actions:
        report.add((*loc, "actions"), "a ReAct agent ('react:') has its own action (the "
                                      "ReAct loop); remove 'actions'", at_key=True)
    declared = {(rtype, name): i for i, (rtype, name, _) in enumerate(agent._resources)}
    setups = [n for (t, n) in declared if t is ResourceType.CHAT_MODEL]
    index = declared.get((ResourceType.CHAT_MODEL, react.chat_model))
    if index is None and react.chat_model not in {e.name for e in spec.chat_model_setups}:
        report.add((*at, "chat_model"),
                   f"names chat model setup {quoted(react.chat_model)}, which this agent does not "
                   f"declare (chat_model_setups: {', '.join(setups) or 'none'})")
    prompts = {e.name for e in spec.prompts}
    if react.prompt is not None and react.prompt not in prompts:
        listed = ", ".join(sorted(prompts)) or "none"
        report.add((*at, "prompt"), f"names prompt {quoted(react.prompt)}, which this agent does "
                                    f"not declare (prompts: {listed})")
    schema: type[BaseModel] | None = None
    if react.output_schema is not None:
        obj = import_object(report, react.output_schema, (*at, "output_schema"))
        if obj is not None and not (isinstance(obj, type) and issubclass(obj, BaseModel)):
            report.add((*at, "output_schema"),
                       f"{quoted(react.output_schema)} is not a pydantic model class")
        elif obj is not None:
            schema = obj
    if report.under(at) or report.under((*loc, "actions")):
        return
    if index is not None and react.max_iterations is not None:
        rtype, name, desc = agent._resources[index]
        if isinstance(desc, ResourceDescriptor):
            agent._resources[index] = (rtype, name, ResourceDescriptor(
                desc.clazz, **{**desc.arguments, "max_tool_rounds": react.max_iterations}))
    agent.add_action("start_action", [InputEvent], ReActAgent.start_action,
                     config=react_action_config(schema, react.max_iterations,
                                                chat_model=react.chat_model,
                                                prompt=react.prompt or ""))
