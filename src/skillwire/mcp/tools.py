"""The mapping between skills and MCP tools, both ways, as pure functions over the SDK's types.

==========================  ====================================================================
skill                       MCP tool
==========================  ====================================================================
``id``                      ``name``
``name``                    ``title``
``description``             ``description``
``inputSchema``             ``inputSchema`` (``{"type": "object"}`` when the skill declares none)
``outputSchema``            ``outputSchema``, when it is an object schema (MCP allows no other)
``readOnly``                ``annotations.readOnlyHint``
``tags``                    ``_meta["skillwire/tags"]``
==========================  ====================================================================

A task's end is a tool result: COMPLETED gives its artifacts as content (a text part as text, a data part
as a text copy of its JSON and, the first that is an object, as ``structuredContent``, a file as an embedded resource, or a resource link
for a file given by URL); FAILED, REJECTED, CANCELED and AUTH_REQUIRED give ``isError`` with the task's
caller-safe status message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from msgspec import UNSET

from skillwire.protocol.models import Artifact, Part, Task
from skillwire.protocol.states import TaskState
from skillwire.skills.registry import Skill

__all__ = ["TAGS_META", "ToolSpec", "error_result", "spec_of_skill", "task_result", "tool_of"]

#: Where a tool carries its skill's tags (MCP tools have no tags of their own).
TAGS_META = "skillwire/tags"

_ENDED_BADLY = {
    TaskState.FAILED: "The task failed.",
    TaskState.REJECTED: "The task was rejected.",
    TaskState.CANCELED: "The task was canceled.",
    TaskState.AUTH_REQUIRED: "The task needs other credentials.",
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a tool is, whichever side it comes from: a local skill, a remote agent's card entry, or an MCP
    server's tool wrapped as a skill."""

    id: str
    name: str
    description: str
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    read_only: bool = False
    tags: Sequence[str] = field(default=())


def spec_of_skill(skill: Skill) -> ToolSpec:
    entry = skill.agent_skill
    return ToolSpec(
        id=skill.id,
        name=entry.name,
        description=entry.description,
        input_schema=skill.input_schema,
        output_schema=skill.output_schema,
        read_only=skill.read_only,
        tags=list(entry.tags),
    )


#: The input of a tool whose skill publishes no input schema (a remote agent's skill, a SKILL.md skill that
#: takes a message): the text of the message, sent to the skill as a text part.
TEXT_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The message to the skill"}},
    "required": ["text"],
}


def message_parts(spec: ToolSpec, arguments: dict[str, Any] | None) -> list[Part]:
    """What a tool call's ``arguments`` send to the skill: the object as a data part, or, for a skill that
    publishes no input schema, the ``text`` as a text part."""
    if spec.input_schema is None and isinstance((arguments or {}).get("text"), str):
        return [Part(text=str((arguments or {})["text"]))]
    return [Part(data=arguments or {})]


def is_object_schema(schema: dict[str, Any] | None) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def tool_of(spec: ToolSpec) -> types.Tool:
    """The MCP tool of a skill: its schemas as they are (an input schema that is not an object schema is
    published as is too: the skill validates it, and MCP hosts pass it through)."""
    tool = types.Tool(
        name=spec.id,
        title=spec.name or None,
        description=spec.description,
        input_schema=spec.input_schema if spec.input_schema is not None else TEXT_INPUT,
        output_schema=spec.output_schema if is_object_schema(spec.output_schema) else None,
        annotations=types.ToolAnnotations(read_only_hint=spec.read_only),
    )
    if spec.tags:
        tool.meta = {TAGS_META: list(spec.tags)}
    return tool


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def task_result(task: Task) -> types.CallToolResult:
    """The tool result of a task that ended (or stopped at a state MCP cannot carry on from)."""
    state = task.status.state
    if state is not TaskState.COMPLETED:
        said = task.status.message.text() if task.status.message is not None else ""
        return error_result(said or _ENDED_BADLY.get(state, f"The task stopped in state {state.name}."))
    content: list[types.ContentBlock] = []
    structured: dict[str, Any] | None = None
    for artifact in task.artifacts:
        text: list[str] = []  # an artifact's text parts (the chunks it was streamed in) make one block
        for part in artifact.parts:
            if isinstance(part.text, str):
                text.append(part.text)
                continue
            if text:
                content.append(types.TextContent(text="".join(text)))
                text = []
            content.append(_content_of(part, task, artifact))
            if part.data is not UNSET and structured is None and isinstance(part.data, dict):
                structured = part.data
        if text:
            content.append(types.TextContent(text="".join(text)))
    if task.status.message is not None and not content:
        content.extend(_content_of(part, task, None) for part in task.status.message.parts)
    return types.CallToolResult(content=content, structured_content=structured)


def _content_of(part: Part, task: Task, artifact: Artifact | None) -> types.ContentBlock:
    if part.text is not UNSET:
        return types.TextContent(text=part.text)
    if part.data is not UNSET:
        return types.TextContent(text=json.dumps(part.data, ensure_ascii=False))
    name = part.filename or (artifact.name if artifact is not None else "") or "file"
    if part.url is not UNSET:
        return types.ResourceLink(uri=part.url, name=name, mime_type=part.media_type or None)
    raw = part.raw if isinstance(part.raw, bytes) else b""
    where = artifact.artifact_id if artifact is not None else "status"
    return types.EmbeddedResource(
        resource=types.BlobResourceContents(
            uri=f"skillwire://tasks/{task.id}/{where}/{name}",
            blob=base64.b64encode(raw).decode("ascii"),
            mime_type=part.media_type or None,
        )
    )
