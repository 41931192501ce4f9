"""MCP (Model Context Protocol) in both directions, with the official ``mcp`` SDK (``skillwire[mcp]``).

* Skills served as MCP tools: ``skillwire serve DIR --mcp`` (Streamable HTTP at ``/mcp``, beside the A2A
  routes; ``agent.asgi(mcp=True)``) and ``skillwire mcp DIR`` (stdio). :mod:`skillwire.mcp.server` runs a
  tool call as an A2A task; :mod:`skillwire.mcp.tools` is the mapping.
* A remote A2A agent's skills as MCP tools: ``skillwire mcp URL`` (:mod:`skillwire.mcp.remote`).
* An MCP server's tools as skills: ``Agent(mcp_servers=[McpServer(...)])`` and ``mcpServers:`` in
  agent.yaml (:mod:`skillwire.mcp.client`).

Importing this package does not import the SDK: its modules do, when they are used.
"""

from __future__ import annotations

__all__: list[str] = []
