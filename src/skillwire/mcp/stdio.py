"""``skillwire mcp``: an MCP server over stdio, for hosts that launch a command.

Standard output carries MCP's JSON-RPC messages only: logs go to standard error.
"""

from __future__ import annotations

from typing import Any

from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio"]


async def serve_stdio(server: Any) -> None:
    """Serve ``server`` (an ``mcp.server.lowlevel.Server``) on stdin and stdout until stdin closes."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
