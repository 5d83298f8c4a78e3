"""Shared test helpers, one place for what test modules used to re-declare or import from
each other (``tests/`` is on ``sys.path`` through pytest's ``pythonpath`` option).

- ``probes``: per-test call counts, gates, ordered notes and stores for fakes; the autouse
  ``probes`` fixture (``tests/conftest.py``) gives every test new ones and opens every gate
  when it ends.
- ``harness``: drive an ``AgentCore`` on an ``InMemoryKeyState`` to a point, snapshot the key
  as a checkpoint would, resume it on a new core.
- ``flink_state``: one key's keyed state exactly as the Flink operator stores it, restored
  through the operator's own ``_FlinkKeyState`` (the state-format fixture uses it).
- ``crash``: crash injection for MiniCluster tests (call logs, the ``crashed`` marker,
  ``CrashOnceBase``); imported by Flink workers too.
- ``providers``: a local HTTP server speaking providers' wire formats, the chat probe agent,
  a flaky connection for retries.
- ``bad_input``: the bad-input matrix and its checks.
- ``sandbox``: ``require_bubblewrap()``, the skill sandbox tests' skip (a failure under CI).
- Agents and fakes, one module per theme, shared by a test module and the replay-safety
  checker or a MiniCluster variant (Flink workers import them by module path, so they live
  here, never in a test module): ``subagent_agents`` (internal, deferred and async
  sub-agents; ``RunningPubsub``), ``subagent_tool_agents`` (sub-agents offered to chat
  models), ``subgraph_agents``, ``restorable_agents`` (restores; ``SendsTwins``),
  ``durability_agents``, ``replay_defect_agents``, ``replay_upgrade_agents``,
  ``upgrade_agents``, ``unsafe_agents``, ``asker_agents``, ``tool_dispatch_agents``,
  ``react_agents``, ``knowledge_agents``, ``waits_agents``, ``kafka_agents``, ``trace_agents``,
  ``observability_scenario``, ``flink_agents_for_tests`` (a tool chat agent and its script),
  ``yaml_helpers`` (classes and functions YAML specs name).
"""
