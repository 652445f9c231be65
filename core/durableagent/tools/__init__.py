"""Tools: what a model may call (``base.py``: ``Tool``, ``Result``, the ``ToolContext`` a call
runs in), ``@tool`` for typed Python functions (``typed.py``), and tools from MCP servers
(``mcp.py``, extra ``mcp``: its SDK loads only when ``mcp_tools`` is used)."""

from __future__ import annotations

from .base import (
    CLASSIFIED_BY,
    Cancelled,
    Result,
    Tool,
    ToolContext,
    ToolFn,
    context_parameter,
    current_context,
    plain_context,
    reset_context,
    set_context,
)
from .typed import tool

__all__ = [
    "CLASSIFIED_BY",
    "Cancelled",
    "Result",
    "Tool",
    "ToolContext",
    "ToolFn",
    "context_parameter",
    "current_context",
    "plain_context",
    "reset_context",
    "set_context",
    "tool",
]
