"""Where an agent finds MCP servers whose tools become its skills (no SDK import here: the front door
exports :class:`McpServer`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from skillwire.errors import SkillwireError

__all__ = ["McpServer"]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server whose tools become skills of the agent: ``command`` (stdio: the program and its
    arguments) or ``url`` (Streamable HTTP)::

        Agent("Helper", mcp_servers=[
            McpServer(command=["uvx", "mcp-server-time"]),
            McpServer(url="https://tools.example/mcp", headers={"Authorization": "Bearer ${TOOLS_TOKEN}"}),
        ])

    Credentials come from the environment, never from the configuration: ``env`` names the variables the
    command is given (besides the SDK's safe defaults: PATH, HOME, ...), and ``${NAME}`` in a header value
    is the variable ``NAME`` (one that is not set is an error when the tools are called). ``name`` prefixes
    the skill ids (``time.now`` for the tool ``now`` of ``name="time"``) and is a tag of each skill;
    ``timeout`` bounds each connection, listing included, in seconds."""

    command: Sequence[str] = ()
    url: str = ""
    name: str = ""
    env: Sequence[str] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise SkillwireError("McpServer needs one of command=[...] (stdio) or url=... (Streamable HTTP)")
        if isinstance(self.command, str):
            raise SkillwireError("McpServer command= is a list: the program, then its arguments")

    @property
    def label(self) -> str:
        """How the server is named in messages: its name, else its URL or command."""
        return self.name or self.url or " ".join(self.command)

    def environment(self) -> dict[str, str]:
        """The variables ``env`` names, from this process's environment (those not set are left out)."""
        return {name: os.environ[name] for name in self.env if name in os.environ}

    def resolved_headers(self) -> dict[str, str]:
        """``headers`` with each ``${NAME}`` replaced by that environment variable."""

        def value(match: re.Match[str]) -> str:
            name = match[1]
            if name not in os.environ:
                raise SkillwireError(f"MCP server {self.label}: the environment variable {name} is not set")
            return os.environ[name]

        return {key: _VARIABLE.sub(value, text) for key, text in self.headers.items()}
