"""Skills served as MCP tools: one low-level ``mcp.server.lowlevel.Server`` over a :class:`Backend`.

The server lists one tool per skill (:mod:`skillwire.mcp.tools` has the mapping) and runs a tool call as an
A2A task: a message whose data part is the tool's arguments and whose ``metadata.skillId`` is the tool's
name, streamed through the backend. Local skills go through the application's :class:`Dispatcher`, so a
task started over MCP is an ordinary task (stored, listed, cancelable over A2A); a remote agent's skills go
through :class:`skillwire.Client` (:mod:`skillwire.mcp.remote`).

While the task runs, its status messages and artifact chunks are MCP progress notifications (when the call
carried a ``progressToken``). A task that asks a question (INPUT_REQUIRED) is answered by MCP elicitation
when the client declared the elicitation capability: the answer is sent as the task's next message and the
call carries on; without the capability, or when the user declines, the task is canceled and the call is a
tool error that says why. A call the client cancels (``notifications/cancelled``) cancels its task.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from skillwire.errors import A2AError
from skillwire.mcp.tools import ToolSpec, error_result, message_parts, task_result, tool_of
from skillwire.protocol.models import Artifact, Message, Part, Role, StreamResponse, Task, TaskStatus
from skillwire.protocol.states import TaskState
from skillwire.security.principal import ANONYMOUS, Principal
from skillwire.server.app import PRINCIPAL_SCOPE_KEY

__all__ = ["Backend", "Run", "mcp_server"]

log = logging.getLogger("skillwire.mcp")

#: The form an elicitation asks the user to fill: the task's question, one text answer.
_ANSWER = "answer"

Progress = Callable[[StreamResponse], Awaitable[None]]


class Run:
    """One tool call's task as the backend streams it: its id once known, and where its events go."""

    def __init__(self, progress: Progress) -> None:
        self.task_id = ""
        self.progress = progress


class Backend(Protocol):
    """Where tool calls run: the skills of this process, or a remote agent's."""

    def tools(self) -> Sequence[ToolSpec]: ...

    def events(self, message: Message, principal: Principal) -> Awaitable[AsyncIterator[StreamResponse]]: ...

    async def task(self, task_id: str, principal: Principal) -> Task: ...

    async def cancel(self, task_id: str, principal: Principal) -> None: ...


def mcp_server(name: str, version: str, backend: Backend, *, instructions: str | None = None) -> Server[Any]:
    """The low-level MCP server of ``backend``'s skills."""
    calls = _Calls(backend)
    server: Server[Any] = Server(
        name,
        version=version,
        instructions=instructions,
        on_list_tools=calls.list_tools,
        on_call_tool=calls.call_tool,
    )
    return server


class _Calls:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_of(spec) for spec in self.backend.tools()])

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = next((s for s in self.backend.tools() if s.id == params.name), None)
        if spec is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        principal = _principal_of(ctx)
        run = Run(_Progress(ctx).report)
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.USER,
            parts=message_parts(spec, params.arguments),
            metadata={"skillId": spec.id},
        )
        try:
            while True:
                ended = await self._until_it_stops(message, principal, run)
                if isinstance(ended, Message):
                    return task_result(_as_task(ended))
                if ended.status.state is not TaskState.INPUT_REQUIRED:
                    return task_result(ended)
                answer, why = await _elicit(ctx, ended)
                if answer is None:
                    await self._cancel(run, principal)
                    return error_result(why)
                message = Message(
                    message_id=str(uuid.uuid4()),
                    role=Role.USER,
                    task_id=ended.id,
                    context_id=ended.context_id,
                    parts=[Part(text=answer)],
                )
        except A2AError as error:
            return error_result(error.message)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # the host canceled the call: its task ends too
                await self._cancel(run, principal)
            raise
        except Exception:  # a bug of ours or of a backend: the log says what, the caller that it failed
            log.exception("MCP tool call %s failed", spec.id)
            return error_result("The tool call failed.")

    async def _until_it_stops(self, message: Message, principal: Principal, run: Run) -> Task | Message:
        """Stream the message's task until the stream ends (the task ended or waits), then read it whole."""
        events = await self.backend.events(message, principal)
        try:
            async for event in events:
                if event.message is not None and not run.task_id:
                    return event.message
                task_id = _task_id_of(event)
                if task_id and not run.task_id:
                    run.task_id = task_id
                await run.progress(event)
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
        return await self.backend.task(run.task_id, principal)

    async def _cancel(self, run: Run, principal: Principal) -> None:
        if not run.task_id:
            return
        try:
            await self.backend.cancel(run.task_id, principal)
        except A2AError as error:  # it ended meanwhile: nothing left to cancel
            log.debug("cancel of task %s: %s", run.task_id, error.message)


def _principal_of(ctx: ServerRequestContext[Any, Any]) -> Principal:
    scope = getattr(ctx.request, "scope", None)
    found = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Principal) else ANONYMOUS


def _task_id_of(event: StreamResponse) -> str:
    if event.task is not None:
        return event.task.id
    if event.status_update is not None:
        return event.status_update.task_id
    if event.artifact_update is not None:
        return event.artifact_update.task_id
    return ""


def _as_task(message: Message) -> Task:
    """An agent's direct reply (a Message, no task) as a completed task of one artifact."""
    return Task(
        id=message.task_id or "",
        status=TaskStatus(state=TaskState.COMPLETED),
        artifacts=[Artifact(artifact_id="reply", parts=message.parts)],
    )


class _Progress:
    """A task's events as ``notifications/progress`` (sent only when the call carried a progressToken)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self.ctx = ctx
        self.count = 0

    async def report(self, event: StreamResponse) -> None:
        said = _progress_text(event)
        if said is None:
            return
        self.count += 1
        await self.ctx.session.report_progress(self.count, None, said)


def _progress_text(event: StreamResponse) -> str | None:
    if event.status_update is not None:
        status = event.status_update.status
        if status.state is not TaskState.WORKING:
            return None
        return (status.message.text() if status.message is not None else "") or "working"
    if event.artifact_update is not None:
        artifact = event.artifact_update.artifact
        text = "".join(p.text for p in artifact.parts if isinstance(p.text, str))
        return text or f"artifact {artifact.name or artifact.artifact_id}"
    return None


async def _elicit(ctx: ServerRequestContext[Any, Any], task: Task) -> tuple[str | None, str]:
    """The user's answer to the task's question (None, and why, when there is none)."""
    question = task.status.message.text() if task.status.message is not None else ""
    question = question or "The task needs more input."
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    if not ctx.session.check_client_capability(wanted):
        return None, (
            f"The skill asked a question ({question!r}), and this MCP client does not support elicitation,"
            " so it cannot be answered: the task was canceled."
        )
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {_ANSWER: {"type": "string", "title": "Answer", "description": question}},
        "required": [_ANSWER],
    }
    try:
        result = await ctx.session.elicit_form(question, schema, related_request_id=ctx.request_id)
    except MCPError as error:
        return None, f"The skill asked a question ({question!r}), which could not be asked: {error}"
    if result.action != "accept" or result.content is None:
        said = "declined" if result.action == "decline" else "canceled"
        return None, f"The question ({question!r}) was {said} by the user: the task was canceled."
    return str(result.content.get(_ANSWER, "")), ""
