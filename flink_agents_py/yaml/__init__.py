"""Agents declared in YAML: ``load_agents(path_or_text)`` -> ``{name: Agent}``, ``load_agent``.

The format is defined once, by frozen pydantic models (``_specs.py``): the loader validates
with them and the JSON Schema for editors (``SCHEMA_PATH``) is generated from them
(``python -m flink_agents_py.yaml.schema``). It reads::

    subagents:                       # optional: shared by every agent of the document
      - name: remote_reviewer
        clazz: my_app.agents.RemoteReviewSetup  # a DeferredSubagentSetup/AsyncSubagentSetup
        description: Reviews code remotely
        input_schema: '{"type": "object"}'     # JSON Schema text (or a YAML mapping)
        endpoint: http://127.0.0.1:9000         # any other key is a field of the setup
    agents:
      - name: orchestrator
        config: {team: reviews}                 # agent-wide configuration (ctx.config)
        actions:
          - name: start
            function: my_app.agents:start        # module:qualname, takes (event, ctx)
            on: [InputEvent]                     # event types (a list, or one type)
            config: {bonus: 1}                   # optional: ctx.action_config
        chat_model_connections:
          - name: conn
            clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
            function: my_app.agents:script       # any other key is a field of the class
        chat_model_setups:
          - name: review_model                   # clazz: defaults to ChatModelSetup
            connection: conn
            prompt: "Review {product}"           # literal text, or the name of a prompt
            tools: [lookup]
            subagents: [child]                   # AGENT names the model may delegate to
        prompts:
          - name: p
            text: "..."                          # (role: system) or messages: [{role, content}]
        tools:
          - name: lookup
            function: my_app.tools:lookup        # description: defaults to the docstring
        mcp_servers:
          - name: files
            clazz: my_app.mcp.FileServer         # any other key is a field of the class
        subagents:
          - name: child
            agent: child_agent                   # internal: another agent of this document
            description: Tags a product
            input_schema: {type: object, properties: {product: {type: string}}}
          - name: other
            clazz: my_app.agents.OtherSetup      # external, as the shared ones
      - name: child_agent
        actions: [{name: tag, function: "my_app.agents:tag", on: [InputEvent]}]

Rules:

- ``clazz`` is always a fully-qualified dotted class path (``pkg.module.Class``; no aliases,
  no ``module:Class``) of the entry's kind: a ``ChatModelConnection``, a ``ChatModelSetup``,
  an MCP server ``Resource``, a ``DeferredSubagentSetup`` or ``AsyncSubagentSetup``.
  ``function`` is ``module:qualname``. Both are imported when the document is loaded.
- ``name``, ``clazz`` and ``type`` belong to the entry; every other key of a connection, a
  chat model setup, an MCP server or an external sub-agent is a field of its class: unknown
  fields are reported with the allowed ones, values are validated by the class. The keys of
  the document, agents, actions, prompts, tools and internal sub-agents are fixed.
- Any entry may say ``type: python``; any other ``type`` (``java``) is rejected: this
  runtime runs Python only.
- ``on`` names event types: the built-ins (``InputEvent``, ``OutputEvent``,
  ``ChatRequestEvent``, ``ChatResponseEvent``, ``ToolRequestEvent``, ``ToolResponseEvent``),
  the ``EVENT_TYPE`` of an ``Event`` subclass whose module is imported (by an action's
  module, say), or an ``Event`` subclass by its dotted class path.
- Names are unique per agent and kind, agent names in the document.
- The document-level ``subagents`` are given to every agent; an agent's own entry of the
  same name wins, and a shared internal sub-agent is not given to the agent it names.
- A sub-agent's ``agent:`` names an agent of the document (compiled as
  ``ResourceDescriptor(InternalSubagent, agent=<that Agent>, ...)``), or an ``Agent`` class or
  instance by ``module:qualname``. Internal sub-agents may not form a cycle.
- A chat model setup's ``subagents`` is accepted only when its class declares that field,
  and must name sub-agents the agent has.
- Booleans are ``true``/``false`` only (YAML 1.2): ``on``, ``yes``, ``no``, ``off`` are
  strings. Anchors, aliases and ``<<`` merge keys work; a duplicate key is an error, and
  so are two keys written differently that read as one (``1`` and ``01``, ``null`` and ``~``).
- A key without a value (``description:``) is the same as leaving an optional key out.

Every problem is collected, with the file, the line and the path of the culprit, into one
``YamlError`` (``agents.yaml:12: agents[0].actions[1].on[0]: 'Nope' names no known event
type...``). Once an agent's entry is clean it is compiled with ``AgentPlan.from_agent``; a
plan problem is reported at the agent entry's line, naming the agent.

``path_or_text`` is a ``pathlib.Path``, a one-line string ending in ``.yaml``/``.yml`` or
naming an existing file, an open file, or the YAML text itself.
"""

from ._errors import YamlError, YamlProblem
from ._loader import YamlAgent, load_agent, load_agents
from ._nodes import read_yaml, read_yaml_file
from ._specs import SCHEMA_PATH

__all__ = ["SCHEMA_PATH", "YamlAgent", "YamlError", "YamlProblem", "load_agent", "load_agents",
           "read_yaml", "read_yaml_file"]
