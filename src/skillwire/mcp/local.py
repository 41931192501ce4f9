"""The skills of this process as MCP tools: calls go through the application's request handler, so a task
started over MCP is stored, listed and cancelable like any other (its CallContext names the binding
``MCP``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from skillwire.mcp.tools import ToolSpec
from skillwire.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    Task,
)
from skillwire.protocol.operations import Operation
from skillwire.security.principal import Principal
from skillwire.server.context import CallContext
from skillwire.server.handler import Dispatcher

if TYPE_CHECKING:
    from skillwire.skills.registry import Skill

__all__ = ["BINDING", "LocalBackend"]

#: The binding a task started over MCP names on its CallContext (access log, metrics, spans).
BINDING = "MCP"


class LocalBackend:
    def __init__(self, dispatcher: Dispatcher, skills: Sequence[Skill]) -> None:
        from skillwire.mcp.tools import spec_of_skill

        self.dispatcher = dispatcher
        self._tools = [spec_of_skill(skill) for skill in skills]

    def tools(self) -> Sequence[ToolSpec]:
        return self._tools

    async def events(self, message: Message, principal: Principal) -> AsyncIterator[StreamResponse]:
        request = SendMessageRequest(message=message)
        result: Any = await self.dispatcher.call(
            Operation.SEND_STREAMING_MESSAGE, request, _context(principal)
        )
        return result  # type: ignore[no-any-return]

    async def task(self, task_id: str, principal: Principal) -> Task:
        task: Task = await self.dispatcher.call(
            Operation.GET_TASK, GetTaskRequest(id=task_id), _context(principal)
        )
        return task

    async def cancel(self, task_id: str, principal: Principal) -> None:
        await self.dispatcher.call(Operation.CANCEL_TASK, CancelTaskRequest(id=task_id), _context(principal))


def _context(principal: Principal) -> CallContext:
    return CallContext(principal=principal, binding=BINDING)


def local_server(
    name: str, version: str, skills: Sequence[Skill], dispatcher: Dispatcher, *, instructions: str = ""
) -> Any:
    """The MCP server (``mcp.server.lowlevel.Server``) of the served ``skills``, calling them through
    ``dispatcher`` (an application's)."""
    from skillwire.mcp.server import mcp_server

    return mcp_server(name, version, LocalBackend(dispatcher, skills), instructions=instructions or None)
