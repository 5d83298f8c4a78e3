"""What other packages use of the integrations' private modules.

The testing helpers: scripted answers; the compat connections: the bounds an answer is read
within (``chat_models._bounded_http``).
"""

from .chat_models._bounded_http import answer_bounds
from .chat_models._scripted import ANSWER_TYPES, is_answer, script_answer, tool_call_message

__all__ = ["ANSWER_TYPES", "answer_bounds", "is_answer", "script_answer", "tool_call_message"]
