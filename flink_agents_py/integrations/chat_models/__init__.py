"""Chat model connections: ``scripted`` (tests), ``local`` (llama.cpp), and provider adapters."""

from ._scripted import ScriptedChatModel, ScriptRule

__all__ = ["ScriptRule", "ScriptedChatModel"]
