"""An MCP server written with the official SDK (``MCPServer``), whose tools the tests use as skills:
``python tests/mcp_tools_server.py`` serves it over stdio; ``server.streamable_http_app()`` over HTTP."""

from __future__ import annotations

import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("Calculator", instructions="Small tools for the tests")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def lookup(key: str) -> str:
    """Looks a word up."""
    return {"sky": "blue", "grass": "green"}.get(key, "unknown")


@server.tool(structured_output=False)
async def steps(n: int, ctx: Context) -> str:
    """Works in steps, reporting each."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i} of {n}")
    return "done"


@server.tool(structured_output=False)
def broken() -> str:
    """Always fails."""
    raise ToolError("the gauge is broken")


@server.tool(structured_output=False)
def secret() -> str:
    """Tells the value of MCP_TEST_SECRET it was started with."""
    return os.environ.get("MCP_TEST_SECRET", "unset")


if __name__ == "__main__":
    server.run()
