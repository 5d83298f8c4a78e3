"""What the testing helpers use of the integrations' private modules (scripted answers)."""

from .chat_models._scripted import ANSWER_TYPES, is_answer, script_answer, tool_call_message

__all__ = ["ANSWER_TYPES", "is_answer", "script_answer", "tool_call_message"]
