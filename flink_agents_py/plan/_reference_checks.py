"""Plan-build checks of what a chat model setup names: connection, tools, fallbacks, ...

Each name must point at a resource the agent declares, or (for an internal sub-agent) one
its ancestors declare (``_inherited.visible``); a sub-agent it offers must be its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ..api import ChatModelSetup, ResourceError, ResourceType, SubagentSetup
from ..api.internal import import_qualified, subagent_callable
from ._budget_checks import check_budget_prices
from ._declared import declared_hint, near_name
from ._prompt_checks import check_prompt_name
from ._resource_checks import tool_schema_problem

__all__ = ["check_references", "plain_functions"]


def plain_functions(agent: object) -> frozenset[str]:
    """Names of functions on ``agent``'s class that are neither actions nor resources.

    A setup's tool named after one was put on the class without ``@tool`` (``t =
    staticmethod(t)``): its "not declared" problem says so, instead of leaving the reader
    to wonder why a function plainly on the class is not there.

    Args:
        agent: the agent being compiled.

    Returns:
        The attribute names.
    """
    found: set[str] = set()
    for klass in type(agent).__mro__:
        for attr, value in vars(klass).items():
            fn = value.__func__ if isinstance(value, staticmethod) else value
            if inspect.isfunction(fn) and not any(
                    hasattr(fn, s) for s in ("__action_spec__", "__resource_spec__",
                                             "__tool_spec__")):
                found.add(attr)
    return frozenset(found)


def check_references(resources: Mapping[ResourceType, Mapping[str, Any]],
                     seen: Mapping[ResourceType, Mapping[str, Any]], problems: list[str],
                     broken: set[tuple[ResourceType, str]],
                     undecorated: frozenset[str] = frozenset()) -> None:
    """Add a problem for each name a chat model setup of ``resources`` gives that is wrong.

    Args:
        resources: the agent's compiled resources (``ResourcePlan`` by type and name).
        seen: the resources its setups may name: its own and its ancestors'.
        problems: where each problem is added.
        broken: ``(type, name)`` of resources declared but refused (their own problem is
            listed already): a name pointing at one is not reported again.
        undecorated: functions on the agent's class that are no resource
            (``plain_functions``): a tool named after one was meant to be it.
    """
    connections = seen.get(ResourceType.CHAT_MODEL_CONNECTION, {})
    tools = seen.get(ResourceType.TOOL, {})
    setups = seen.get(ResourceType.CHAT_MODEL, {})
    described: set[str] = set()  # tools whose schema was checked (each reported once)
    offered: set[str] = set()  # sub-agents a chat model offers (checked with its setup)
    for rp in resources.get(ResourceType.CHAT_MODEL, {}).values():
        named = rp.descriptor.arguments.get("subagents")
        if isinstance(named, list):
            offered.update(n for n in named if isinstance(n, str))
    for name, rp in resources.get(ResourceType.AGENT, {}).items():
        problem = _input_schema_problem(rp.descriptor.arguments.get("input_schema"))
        if problem is not None and name not in offered:
            problems.append(f"agent resource {name!r}: input_schema {problem}")
    for name, rp in resources.get(ResourceType.CHAT_MODEL, {}).items():
        try:
            cls = import_qualified(rp.descriptor.clazz)
        except ResourceError as e:
            problems.append(f"chat_model resource {name!r}: {e}")
            continue
        if not (isinstance(cls, type) and issubclass(cls, ChatModelSetup)):
            continue
        conn = rp.descriptor.arguments.get("connection")  # (not a string: check_setup_values)
        if isinstance(conn, str) and conn not in connections and not cls.has_own_chat() \
                and (ResourceType.CHAT_MODEL_CONNECTION, conn) not in broken:
            problems.append(
                f"chat_model resource {name!r} names connection {conn!r}, which is not declared"
                + declared_hint(conn, connections, "chat_model_connection"))
        named = rp.descriptor.arguments.get("tools", []) or []
        if isinstance(named, str):  # one name: its letters are not tool names
            problems.append(f"chat_model resource {name!r}: tools must be a list of tool "
                            f"names, got the string {named!r} (write tools=[{named!r}])")
            named = []
        for t in named:
            if not isinstance(t, str):
                continue  # its type is reported by check_setup_values
            if t in tools:
                if t not in described:
                    described.add(t)
                    problem = tool_schema_problem(t, tools[t])
                    if problem is not None:
                        problems.append(problem)
            elif (ResourceType.TOOL, t) not in broken:
                problems.append(f"chat_model resource {name!r} names tool {t!r}, which is not "
                                f"declared{_tool_hint(t, tools, seen)}" + (
                                    f"; {t!r} is a function on the agent class, but not a "
                                    f"tool: decorate it with @tool" if t in undecorated
                                    else ""))
        _check_offered_subagents(name, rp, resources.get(ResourceType.AGENT, {}), problems,
                                 broken)
        _check_fallbacks(name, rp, setups, problems)
        check_budget_prices(name, rp.descriptor.arguments, setups, problems)
        check_prompt_name(name, rp.descriptor.arguments, seen.get(ResourceType.PROMPT, {}),
                          bool(seen.get(ResourceType.MCP_SERVER)), problems)


def _input_schema_problem(text: Any) -> str | None:
    """Why a sub-agent's ``input_schema`` text is no JSON Schema (every submit checks by it).

    Returns:
        The problem, or ``None`` (also for no text: a blank or non-text one is reported by
        the setup's own validation).
    """
    import json

    if isinstance(text, dict):  # (the setup keeps it as its JSON text)
        text = json.dumps(text)
    if not isinstance(text, str) or not text.strip():
        return None

    import jsonschema

    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        return f"is not JSON ({e})"
    try:
        jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:
        return f"is not a valid JSON Schema: {e.message}"
    return None


def _tool_hint(tool: str, tools: Mapping[str, Any],
               seen: Mapping[ResourceType, Mapping[str, Any]]) -> str:
    """What the agent declares instead, and which MCP servers registered no tool.

    Returns:
        Text to append to the problem (starting with a space).
    """
    hint = f" (tools: {', '.join(sorted(tools)) or 'none'}{near_name(tool, tools)})"
    listed = {rp.descriptor.arguments.get("server") for rp in tools.values()
              if rp.descriptor.clazz.endswith(".McpTool")}
    silent = [s for s in sorted(seen.get(ResourceType.MCP_SERVER, {})) if s not in listed]
    if silent:
        names = ", ".join(repr(s) for s in silent)
        hint += (f"; MCP server {names} registered no tools: one that could not be listed "
                 "when the plan was built registers none (its warning on the logger "
                 "'flink_agents_py.mcp' says why, e.g. a command not found); fix the "
                 "server, or declare the tool: ResourceDescriptor(clazz='flink_agents_py."
                 f"integrations.mcp.McpTool', server={silent[0]!r}, tool={tool!r})")
    return hint


def _check_fallbacks(name: str, rp: Any, setups: Mapping[str, Any],
                     problems: list[str]) -> None:
    """Check that a chat model's ``fallbacks`` and its budget's ``fallback`` are declared.

    Each must be another chat model setup of the plan (or of an ancestor's): a wrong name
    would surface only once the budget is spent or the provider throttles, and a budget
    falling back to its own setup is no limit.
    """
    args = rp.descriptor.arguments
    budget = args.get("budget")
    fallback = budget.get("fallback") if isinstance(budget, dict) \
        else getattr(budget, "fallback", None)
    listed = args.get("fallbacks") or []
    named = [(f, "in its fallbacks") for f in ([] if isinstance(listed, str) else listed)
             if isinstance(f, str)]  # one string is not a list (its values are checked)
    if isinstance(fallback, str):
        named.append((fallback, "as its budget's fallback"))
    for other, where in named:
        if other == name:
            problems.append(f"chat_model resource {name!r} names itself {where}: name "
                            "another chat_model resource")
        elif other not in setups:
            problems.append(f"chat_model resource {name!r} names {other!r} {where}, which is "
                            f"not a declared chat_model resource (declared: "
                            f"{', '.join(sorted(setups))}{near_name(other, setups)})")


def _check_offered_subagents(name: str, rp: Any, agents: Mapping[str, Any],
                             problems: list[str], broken: set[tuple[ResourceType, str]]
                             ) -> None:
    """Check that a chat model's ``subagents`` are declared and have usable input schemas.

    A usable schema is an explicit one (valid JSON Schema of an object), or an input type
    rendering as a JSON object: the job fails at setup, not at its first chat (contract 2).
    """
    named = rp.descriptor.arguments.get("subagents", []) or []
    if isinstance(named, str):  # one name: its letters are not sub-agent names
        problems.append(f"chat_model resource {name!r}: subagents must be a list of sub-agent "
                        f"names, got the string {named!r} (write subagents=[{named!r}])")
        return
    for s in named:
        if not isinstance(s, str):
            continue  # its type is reported by check_setup_values
        agent_rp = agents.get(s)
        if agent_rp is None and (ResourceType.AGENT, s) in broken:
            continue  # declared, and refused: its own problem says why
        if agent_rp is None:
            problems.append(f"chat_model resource {name!r} names sub-agent {s!r}, which is not "
                            "declared as an agent resource" + declared_hint(s, agents, "agent"))
            continue
        schema = agent_rp.descriptor.arguments.get("input_schema")
        if schema is not None and not (isinstance(schema, dict) or (
                isinstance(schema, str) and schema.strip())):
            continue  # reported with the agent resource, by what it got (not pydantic's text)
        problem = _input_schema_problem(schema)
        if problem is not None:
            problems.append(f"chat_model resource {name!r} offers sub-agent {s!r}: its "
                            f"input_schema {problem}")
            continue
        try:
            setup = agent_rp.build()
            if isinstance(setup, SubagentSetup):
                subagent_callable(s, setup)
        except (ResourceError, TypeError, ValueError) as e:
            problems.append(f"chat_model resource {name!r} offers sub-agent {s!r}: {e}")
