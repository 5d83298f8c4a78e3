"""MCP (Model Context Protocol) servers as resources: tools for chat models, prompts.

``McpServer`` is an ``MCP_SERVER`` resource; its tools reach chat model setups as ``McpTool``
``TOOL`` resources and its prompts as ``McpPrompt`` ``PROMPT`` resources (registered when the
plan is built, or declared). Needs the ``mcp`` extra; importing this package does not.
"""

from ._bounded import McpMessageTooDeep, McpMessageTooLarge, McpServerExited
from ._server import McpPrompt, McpServer, McpTool, McpToolError

__all__ = ["McpMessageTooDeep", "McpMessageTooLarge", "McpPrompt", "McpServer",
           "McpServerExited", "McpTool", "McpToolError"]
