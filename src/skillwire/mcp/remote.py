"""A remote A2A agent's skills as MCP tools (``skillwire mcp URL``), called with :class:`skillwire.Client`.

The tools are the card's skills, with the schemas the card publishes in skillwire's skill-schemas extension
(a skill without: one `text` argument, sent as the message's text, and no output schema). A task the remote agent runs is
followed by streaming (or by polling, when its card says it does not stream); it is the remote agent's
task, listed there. A failure to reach the agent is a tool error naming the agent's URL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from skillwire.errors import A2AError, InternalError
from skillwire.mcp.tools import ToolSpec
from skillwire.protocol.models import Message, StreamResponse, Task
from skillwire.security.principal import Principal

if TYPE_CHECKING:
    from skillwire.client import Client

__all__ = ["RemoteBackend", "remote_server"]


class RemoteBackend:
    def __init__(self, client: Client, url: str) -> None:
        from skillwire.skills.schema_card import read_skill_schemas

        self.client = client
        self.url = url
        card = client.card
        schemas = read_skill_schemas(card)
        self._tools = [
            ToolSpec(
                id=skill.id,
                name=skill.name,
                description=skill.description,
                input_schema=schemas.get(skill.id, {}).get("input"),
                output_schema=schemas.get(skill.id, {}).get("output"),
                tags=list(skill.tags),
            )
            for skill in card.skills
        ]

    def tools(self) -> Sequence[ToolSpec]:
        return self._tools

    async def events(self, message: Message, principal: Principal) -> AsyncIterator[StreamResponse]:
        return self._events(message)

    async def _events(self, message: Message) -> AsyncIterator[StreamResponse]:
        try:
            async for event in self.client.stream(message):
                yield event
        except A2AError:
            raise
        except Exception as exc:
            raise self._unreachable(exc) from exc

    async def task(self, task_id: str, principal: Principal) -> Task:
        try:
            return await self.client.get_task(task_id)
        except A2AError:
            raise
        except Exception as exc:
            raise self._unreachable(exc) from exc

    async def cancel(self, task_id: str, principal: Principal) -> None:
        try:
            await self.client.cancel_task(task_id)
        except A2AError:
            raise
        except Exception as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: Exception) -> A2AError:
        return InternalError(f"The agent at {self.url} could not be called: {exc or type(exc).__name__}")


def remote_server(client: Client, url: str) -> Any:
    """The MCP server (``mcp.server.lowlevel.Server``) of the skills of the agent ``client`` calls."""
    from skillwire.mcp.server import mcp_server

    card = client.card
    return mcp_server(card.name, card.version, RemoteBackend(client, url), instructions=card.description)
