"""MCP servers' tools as skills, called through the official MCP client (``mcp.ClientSession``).

:func:`discover` lists each server's tools once, when the agent is served, and makes a skill of each: the
tool's name (after the server's ``name.`` when it has one), description, ``inputSchema`` and
``outputSchema``, ``readOnlyHint`` as readOnly, tags ``mcp`` and the server's name (and the tool's
``_meta["skillwire/tags"]``, as skillwire publishes them). A server that cannot be reached then, or a tool
whose schema skillwire cannot enforce, is left out with one warning line: the agent starts without them.

Each run opens a session of its own (stdio: the server's process is started for the call), calls the tool
with the skill's input and maps the result: ``structuredContent`` is the skill's data result (when the tool
declares an outputSchema), text content its text result, images, audio and embedded files artifacts, and
``isError`` a failed task with the tool's text. A server that is down when a skill runs fails that task
with a reason naming the server; the agent and its other skills go on. The tool's progress notifications
are the task's WORKING status messages.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any, TextIO

import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from skillwire.errors import SkillError, SkillwireError
from skillwire.mcp.config import McpServer
from skillwire.mcp.tools import TAGS_META
from skillwire.protocol.models import Part
from skillwire.skills.context import SkillContext
from skillwire.skills.registry import Skill, skill_from_function

__all__ = ["discover", "discover_blocking", "mcp_session"]

log = logging.getLogger("skillwire.mcp")


@contextlib.asynccontextmanager
async def mcp_session(server: McpServer) -> AsyncIterator[ClientSession]:
    """An initialized session with ``server``."""
    async with contextlib.AsyncExitStack() as stack:
        if server.command:
            params = StdioServerParameters(
                command=server.command[0], args=list(server.command[1:]), env=server.environment()
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=_errlog()))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=server.resolved_headers(), timeout=server.timeout)
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(server.url, http_client=http)
            )
        session = await stack.enter_async_context(ClientSession(read, write))
        await asyncio.wait_for(session.initialize(), server.timeout)
        yield session


async def discover(servers: Sequence[McpServer]) -> list[Skill]:
    """The skills of every tool of ``servers`` (a server that cannot be reached gives none, logged)."""
    skills: list[Skill] = []
    for server in servers:
        try:
            async with mcp_session(server) as session:
                listed = await asyncio.wait_for(session.list_tools(), server.timeout)
        except Exception as exc:
            log.warning(
                "MCP server %s: cannot list its tools, so it adds no skill: %s", server.label, _why(exc)
            )
            continue
        for tool in listed.tools:
            try:
                skills.append(_skill_of(server, tool))
            except SkillwireError as exc:
                log.warning("MCP server %s: tool %s is left out: %s", server.label, tool.name, exc)
    return skills


def discover_blocking(servers: Sequence[McpServer]) -> list[Skill]:
    """:func:`discover` from synchronous code, whether or not an event loop runs in this thread (the SDK's
    sessions then run on a thread of their own)."""
    found: list[list[Skill]] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            found.append(asyncio.run(discover(servers)))
        except BaseException as exc:  # pragma: no cover - discover logs what it can
            failed.append(exc)

    thread = threading.Thread(target=run, name="skillwire-mcp-discover", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return found[0]


def _skill_of(server: McpServer, tool: types.Tool) -> Skill:
    skill_id = f"{server.name}.{tool.name}" if server.name else tool.name
    annotations = tool.annotations
    read_only = bool(annotations is not None and annotations.read_only_hint)
    extra = (tool.meta or {}).get(TAGS_META)
    tags = ["mcp", *([server.name] if server.name else []), *(extra if isinstance(extra, list) else [])]

    async def call(params: Any, ctx: SkillContext) -> Any:
        return await _call(server, tool, params, ctx)

    return skill_from_function(
        call,
        id=skill_id,
        name=tool.title or tool.name,
        description=tool.description or f"The MCP tool {tool.name} of {server.label}.",
        tags=[str(tag) for tag in tags],
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        read_only=read_only,
    )


async def _call(server: McpServer, tool: types.Tool, params: Any, ctx: SkillContext) -> Any:
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        await ctx.working(message or (f"{progress:g} of {total:g}" if total else f"{progress:g}"))

    arguments = params if isinstance(params, dict) else {}
    try:
        async with mcp_session(server) as session:
            if tool.output_schema is not None:
                await session.list_tools()  # the client checks structured results against the schema listed
            result = await session.call_tool(tool.name, arguments, progress_callback=progress)
    except SkillwireError as exc:  # a credential missing from the environment
        raise SkillError(str(exc)) from None
    except Exception as exc:  # (a cancelled run is a BaseException: it passes through)
        log.warning("MCP server %s: calling %s failed: %s", server.label, tool.name, _why(exc))
        raise SkillError(f"The MCP server {server.label} could not be reached: {_why(exc)}") from None
    return await _result(result, tool, ctx)


async def _result(result: types.CallToolResult, tool: types.Tool, ctx: SkillContext) -> Any:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if result.is_error:
        raise SkillError("\n".join(texts) or f"The MCP tool {tool.name} failed.")
    files = [part for part in (_file_of(block) for block in result.content) if part is not None]
    if files:
        await ctx.artifact(files, artifact_id="files", name="files")
    if tool.output_schema is not None and result.structured_content is not None:
        return result.structured_content
    return "\n".join(texts) if texts or not files else None


def _file_of(block: types.ContentBlock) -> Part | None:
    if isinstance(block, types.ImageContent | types.AudioContent):
        return Part(raw=base64.b64decode(block.data), media_type=block.mime_type)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        name = str(resource.uri).rsplit("/", 1)[-1]
        if isinstance(resource, types.BlobResourceContents):
            raw = base64.b64decode(resource.blob)
        else:
            raw = resource.text.encode()
        return Part(raw=raw, filename=name, media_type=resource.mime_type or "application/octet-stream")
    if isinstance(block, types.ResourceLink):
        return Part(url=str(block.uri), filename=block.name, media_type=block.mime_type or "")
    return None


def _errlog() -> TextIO:
    """Where a stdio server's standard error goes: this process's, which must be a real file (a stream that
    replaces it, such as a test's capture, has no file descriptor to hand to the child)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")  # kept open for the children, as stderr would be


def _why(exc: BaseException) -> str:
    """The innermost reason of an error (the SDK's task groups wrap them in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
