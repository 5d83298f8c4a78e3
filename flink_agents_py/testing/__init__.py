"""Testing helpers: prove an agent is replay-safe, and test doubles for models and tools.

- ``check_replay_safety(agent, inputs, ...)``: crash the agent at every point a checkpoint
  could be taken, restore, and check outputs, durable calls and divergences
  (``docs/how-to/replay-safety.md``).
- ``model_from_function`` / ``model_from_turns``: scripted chat models (``ScriptedChatModel``
  connections); ``tool_call`` / ``tool_calls`` write their tool-calling turns.
- ``CallCounter``: thread-safe call counts of tools and fakes.
- ``ThrottlingProvider``: an OpenAI-compatible HTTP server on 127.0.0.1 that answers a
  fixed number of requests per second and 429 with ``Retry-After`` above it.

See ``docs/how-to/testing.md``.
"""

from ..integrations.chat_models import ScriptedChatModel, ScriptedRequest, ScriptRule
from ._fakes import CallCounter, model_from_function, model_from_turns, tool_call, tool_calls
from ._replay import check_replay_safety
from ._report import PointResult, ReplaySafetyReport, shape, summary_table
from ._throttling import ThrottlingProvider

__all__ = [
    "CallCounter",
    "PointResult",
    "ReplaySafetyReport",
    "ScriptRule",
    "ScriptedChatModel",
    "ScriptedRequest",
    "ThrottlingProvider",
    "check_replay_safety",
    "model_from_function",
    "model_from_turns",
    "shape",
    "summary_table",
    "tool_call",
    "tool_calls",
]
