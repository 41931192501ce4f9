"""The echo function of ``bench/mcp.py``, served two ways: ``agent`` (a skillwire agent whose one skill is
``echo``; ``skillwire serve bench/mcp_echo --mcp``) and ``mcp_app()`` (the MCP SDK's own ``MCPServer``, the
FastMCP of mcp 1.x, serving the same function over Streamable HTTP;
``uvicorn --factory --app-dir bench/mcp_echo agent:mcp_app``). A folder of its own: loading it puts the
folder on ``sys.path``, where ``bench/mcp.py`` would hide the ``mcp`` package."""

from __future__ import annotations

from skillwire import Agent


def echo(text: str) -> str:
    """Says the text back."""
    return text


agent = Agent("MCP echo", "Says the text back")
agent.skill(tags=["echo"], read_only=True)(echo)


def mcp_app():  # type: ignore[no-untyped-def]
    """The MCP SDK's server of the same function (imported only when asked for)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("MCP echo")
    server.tool(structured_output=False)(echo)
    return server.streamable_http_app()
