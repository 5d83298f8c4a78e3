"""Testing helpers: prove an agent is replay-safe, and test doubles for models and tools.

- ``check_replay_safety(agent, inputs, ...)``: crash the agent at every point a checkpoint
  could be taken, restore (in this process, and again in another one under another
  ``PYTHONHASHSEED``), and check outputs, durable calls and divergences; an I/O sentinel
  reports side effects and clock or random reads of action code outside durable calls
  (``docs/how-to/replay-safety.md``).
- ``check_upgrade_safety(old_agent, new_agent, inputs, ...)``: restore the old agent's state
  at every such point into the new agent and report what the upgrade would do to runs in
  flight (``docs/how-to/replay-safety.md``).
- ``model_from_function`` / ``model_from_turns``: scripted chat models (``ScriptedChatModel``
  connections); ``tool_call`` / ``tool_calls`` write their tool-calling turns.
- ``CallCounter``: thread-safe call counts of tools and fakes.
- ``ThrottlingProvider``: an OpenAI-compatible HTTP server on 127.0.0.1 that answers a
  fixed number of requests per second and 429 with ``Retry-After`` above it.
- ``LocalHTTPServer``: the HTTP server under it, for fakes of your own (a listen backlog
  of 1,024, one thread per request, served while a ``with`` block runs).

See ``docs/how-to/testing.md``.
"""

from ..integrations.chat_models import ScriptedChatModel, ScriptedRequest, ScriptRule
from ._fakes import CallCounter, model_from_function, model_from_turns, tool_call, tool_calls
from ._local_server import LocalHTTPServer
from ._replay import check_replay_safety
from ._report import Finding, PointResult, ReplaySafetyReport, shape, summary_table
from ._throttling import ThrottlingProvider
from ._upgrade import UpgradeSafetyReport, check_upgrade_safety

__all__ = [
    "CallCounter",
    "Finding",
    "LocalHTTPServer",
    "PointResult",
    "ReplaySafetyReport",
    "ScriptRule",
    "ScriptedChatModel",
    "ScriptedRequest",
    "UpgradeSafetyReport",
    "ThrottlingProvider",
    "check_replay_safety",
    "check_upgrade_safety",
    "model_from_function",
    "model_from_turns",
    "shape",
    "summary_table",
    "tool_call",
    "tool_calls",
]
