"""The agent the A2A conformance suite (TCK) drives.

The TCK picks a behaviour with the prefix of the message's ``messageId`` (the text is checked too, for
people trying it by hand). Longer prefixes are matched first. Any other message completes its task.
Served with ``skillwire serve examples/tck``; docs/conformance.md says how to run the TCK against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from skillwire import Agent, RequestContext, TaskEvents
from skillwire.security import APIKey, Security, keys_from_env
from skillwire.types import AgentSkill, Part

Behaviour = Callable[[RequestContext, TaskEvents], Awaitable[None]]
LONG_RUNNING_SECONDS = 300.0
RESUBSCRIBE_SECONDS = 4.0


async def message_response(context: RequestContext, events: TaskEvents) -> None:
    await events.reply("Direct message response")


async def input_required(context: RequestContext, events: TaskEvents) -> None:
    await events.working()
    await events.input_required("Input required: send a follow-up message with this task's id.")


async def multi_turn(context: RequestContext, events: TaskEvents) -> None:
    if context.task is None:
        await input_required(context, events)
    else:
        await events.complete("Thanks, that completes the conversation.")


async def auth_required(context: RequestContext, events: TaskEvents) -> None:
    if context.task is None:
        await events.auth_required("Authentication required: present credentials, then send a follow-up.")
    else:
        await events.complete("Authenticated; task complete.")


async def complete_task(context: RequestContext, events: TaskEvents) -> None:
    await events.working()
    await events.complete("Hello from TCK")


def with_artifact(*parts: Part, name: str = "") -> Behaviour:
    async def run(context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await events.artifact(list(parts), name=name)

    return run


async def stream_completed_only(context: RequestContext, events: TaskEvents) -> None:
    await events.complete()


async def stream_chunked(context: RequestContext, events: TaskEvents) -> None:
    await events.working()
    await events.artifact("chunk-1 ", artifact_id="chunked", last_chunk=False)
    await events.artifact("chunk-2", artifact_id="chunked", append=True, last_chunk=True)


async def long_running(context: RequestContext, events: TaskEvents) -> None:
    await events.working("Working until canceled.")
    await asyncio.sleep(LONG_RUNNING_SECONDS)


async def resubscribe(context: RequestContext, events: TaskEvents) -> None:
    await events.working()
    await asyncio.sleep(RESUBSCRIBE_SECONDS)
    await events.artifact("Resubscribe content")


async def reject(context: RequestContext, events: TaskEvents) -> None:
    await events.reject("Task rejected by agent.")


async def fail(context: RequestContext, events: TaskEvents) -> None:
    await events.working()
    await events.fail("Task failed as requested.")


BEHAVIOURS: list[tuple[str, Behaviour]] = sorted(
    [
        ("tck-message-response", message_response),
        ("tck-input-required", input_required),
        ("tck-multi-turn", multi_turn),
        ("tck-auth-required", auth_required),
        ("tck-complete-task", complete_task),
        ("tck-artifact-text", with_artifact(Part(text="Generated text content"))),
        (
            "tck-artifact-file-url",
            with_artifact(
                Part(url="https://example.com/output.txt", filename="output.txt", media_type="text/plain")
            ),
        ),
        (
            "tck-artifact-file",
            with_artifact(Part(raw=b"tck", filename="output.txt", media_type="text/plain")),
        ),
        ("tck-artifact-data", with_artifact(Part(data={"key": "value", "count": 42}))),
        ("tck-stream-001", with_artifact(Part(text="Stream hello from TCK"))),
        ("tck-stream-002", stream_completed_only),
        ("tck-stream-003", with_artifact(Part(text="Stream task lifecycle"))),
        ("tck-stream-ordering-001", with_artifact(Part(text="Ordered output"))),
        ("tck-stream-artifact-text", with_artifact(Part(text="Streamed text content"))),
        (
            "tck-stream-artifact-file",
            with_artifact(Part(raw=b"tck", filename="output.txt", media_type="text/plain")),
        ),
        ("tck-stream-artifact-chunked", stream_chunked),
        ("tck-stream-basic", with_artifact(Part(text="Stream hello from TCK"))),
        ("tck-stream-chunked", stream_chunked),
        ("tck-long-running", long_running),
        ("tck-cancel", long_running),
        ("tck-reject-task", reject),
        ("tck-task-failure", fail),
        ("test-resubscribe-message-id", resubscribe),
    ],
    key=lambda item: len(item[0]),
    reverse=True,
)


async def keep_open(context: RequestContext, events: TaskEvents) -> None:
    """The v0.3 suite's messages (ids ``<name>-message-id-<uuid>`` or ``test-...``) expect what its reference
    agent does: every message leaves the task open (input required) so that it can be continued or
    canceled."""
    await events.working("Processing your question")
    await events.input_required("Hello world!")


def choose(context: RequestContext) -> Behaviour:
    for key in (context.message.message_id, context.text.strip()):
        for prefix, behaviour in BEHAVIOURS:
            if key.startswith(prefix):
                return behaviour
    message_id = context.message.message_id
    if "-message-id-" in message_id or message_id.startswith("test-"):
        return keep_open
    return complete_task


async def tck(context: RequestContext, events: TaskEvents) -> None:
    await choose(context)(context, events)


# The v1.0 suite validates the card against a schema that allows v1.0 members only, so this agent leaves the
# v0.3 fields off its card; serve it with --v03-card for the suite's v0.3 line (docs/conformance.md).
#: ``TCK_API_KEYS="tck:k-tck-0001"`` protects every operation with an API key (the card's ``apiKey`` scheme,
#: header ``X-API-Key``), for the TCK run with security on (docs/conformance.md says how it sends the key).
_keys = keys_from_env("TCK_API_KEYS")

agent = Agent(
    "skillwire TCK agent",
    "Implements the behaviours the A2A conformance suite asks for by message prefix.",
    card_v03_fields=False,
    executor=tck,
    security=Security(APIKey(keys=_keys)) if _keys else None,
    # CORE-SEND-003 sends a part of a media type no agent declares and expects it accepted: this agent takes
    # any part (an agent that declares less refuses the others with -32005, docs/conformance.md).
    default_input_modes=["*/*"],
    skills=[
        AgentSkill(
            id="tck",
            name="TCK behaviours",
            description="Completes, streams, asks for input, rejects or fails by message prefix.",
            tags=["tck", "conformance"],
            examples=["tck-complete-task", "tck-input-required", "tck-stream-001"],
        )
    ],
)
