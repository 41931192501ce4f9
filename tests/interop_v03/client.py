"""An a2a-sdk 0.3 client for tests/test_interop_v03.py, run with the python of a virtualenv holding
``a2a-sdk==0.3.*`` (it cannot be installed beside a2a-sdk 1.x).

    python client.py SERVER_URL TRANSPORT SCENARIO

TRANSPORT is ``JSONRPC`` or ``HTTP+JSON``: the only transport the sdk's ``ClientFactory`` may pick from the
card. SCENARIO is one of :data:`SCENARIOS`. The script resolves the card with ``A2ACardResolver``, drives
the scenario through the sdk's ``Client`` API and prints one JSON object on stdout: what the sdk returned,
dumped in v0.3 JSON (``model_dump(by_alias=True)``, so ``kind`` and lowercase states show), sdk errors as
``{"error": {...}}`` (JSON-RPC) or ``{"http_error": status}``, and ``requests``: every HTTP request the sdk
made (method, path, status, and whether it sent an ``A2A-Version`` header).

Only the standard library, ``a2a`` (0.3) and ``httpx`` are imported: this file never runs in the main venv.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import (
    AgentCard,
    Message,
    MessageSendConfiguration,
    Part,
    Role,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TextPart,
)

WAIT = 15.0
T = TypeVar("T")
Json = dict[str, Any]


def dump(obj: Any) -> Any:
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True)


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


def message(prefix: str, text: str = "", task: Task | None = None) -> Message:
    """A user message whose ``messageId`` starts with ``prefix`` (the TCK agent's behaviour switch)."""
    return Message(
        role=Role.user,
        parts=[Part(root=TextPart(text=text or prefix))],
        message_id=f"{prefix}-{uuid.uuid4()}",
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


BLOCKING = MessageSendConfiguration(blocking=True)
NON_BLOCKING = MessageSendConfiguration(blocking=False)


def event_json(event: Any) -> Json:
    """A ``Client`` event: a ``Message``, or ``(task, update)`` where ``update`` is None for a Task event."""
    if isinstance(event, Message):
        return dump(event)
    task, update = event
    return dump(task) if update is None else dump(update)


async def collect(events: AsyncIterator[Any]) -> list[Json]:
    async def drain() -> list[Json]:
        return [event_json(e) async for e in events]

    return await within(drain())


async def error_of(call: Callable[[], Awaitable[Any]]) -> Json:
    """Run ``call``, which must fail with an sdk error, and describe the error."""
    try:
        result = await within(call())
    except A2AClientJSONRPCError as e:
        return {"error": dump(e.error)}
    except A2AClientHTTPError as e:
        return {"http_error": e.status_code, "message": e.message}
    return {"unexpected_success": result if isinstance(result, list) else dump(result)}


class Peer:
    def __init__(self, http: httpx.AsyncClient, card: AgentCard, transport: str) -> None:
        self.card = card

        def client(streaming: bool) -> Client:
            config = ClientConfig(httpx_client=http, streaming=streaming, supported_transports=[transport])
            return ClientFactory(config).create(card)

        self.streaming = client(True)
        self.blocking = client(False)
        self.url: str = self.blocking._transport.url  # type: ignore[attr-defined]

    async def send(self, msg: Message, config: MessageSendConfiguration = BLOCKING) -> Json:
        """message/send: exactly one result, a Task or a Message."""
        (result,) = await collect(self.blocking.send_message(msg, configuration=config))
        return result

    async def get(self, task_id: str, history_length: int | None = None) -> Json:
        query = TaskQueryParams(id=task_id, history_length=history_length)
        return dump(await within(self.blocking.get_task(query)))

    async def cancel(self, task_id: str) -> Json:
        return dump(await within(self.blocking.cancel_task(TaskIdParams(id=task_id))))


# -- scenarios ---------------------------------------------------------------------------------------------


async def card_scenario(http: httpx.AsyncClient, url: str, transport: str) -> Json:
    card = await within(A2ACardResolver(http, url).get_agent_card())
    urls = {t: Peer(http, card, t).url for t in ("JSONRPC", "HTTP+JSON")}
    return {"card": dump(card), "transport_urls": urls}


async def send_task(peer: Peer) -> Json:
    """message/send (blocking) of a task that completes, then tasks/get with and without historyLength."""
    sent = message("tck-complete-task")
    result = await peer.send(sent)
    return {
        "sent_message_id": sent.message_id,
        "result": result,
        "full": await peer.get(result["id"]),
        "last_one": await peer.get(result["id"], history_length=1),
    }


async def send_message(peer: Peer) -> Json:
    """A direct Message reply, through message/send and message/stream."""
    sent = message("tck-message-response", "hi")
    blocking = await peer.send(sent)
    streamed = await collect(peer.streaming.send_message(message("tck-message-response", "hi")))
    return {"sent_message_id": sent.message_id, "blocking": blocking, "streaming": streamed}


async def stream(peer: Peer) -> Json:
    events = await collect(peer.streaming.send_message(message("tck-stream-001")))
    return {"events": events, "stored": await peer.get(events[0]["id"])}


async def artifact_data(peer: Peer) -> Json:
    result = await peer.send(message("tck-artifact-data"))
    return {"result": result, "stored": await peer.get(result["id"])}


async def input_required(peer: Peer) -> Json:
    """An input-required task completed by a follow-up message carrying its taskId."""
    first = await peer.send(message("tck-input-required"))
    task = Task.model_validate(first)
    follow_up = message("tck-complete-task", "here is the input", task)
    done = await peer.send(follow_up)
    return {
        "first": first,
        "follow_up_message_id": follow_up.message_id,
        "done": done,
        "stored": await peer.get(task.id, history_length=2),
    }


async def cancel(peer: Peer) -> Json:
    """A long-running task sent with blocking false, canceled, read back, and canceled again."""
    started = await peer.send(message("tck-long-running"), NON_BLOCKING)
    canceled = await peer.cancel(started["id"])
    return {
        "started": started,
        "canceled": canceled,
        "stored": await peer.get(started["id"]),
        "again": await error_of(lambda: peer.cancel(started["id"])),
    }


async def resubscribe_cancel(peer: Peer) -> Json:
    """tasks/resubscribe to a running task, which is then canceled: the stream ends with canceled."""
    started = await peer.send(message("tck-long-running"), NON_BLOCKING)
    events = peer.streaming.resubscribe(TaskIdParams(id=started["id"]))
    try:
        first = event_json(await within(anext(events)))
        canceled = await peer.cancel(started["id"])
        rest = await collect(events)
    finally:
        await events.aclose()
    return {"started": started, "first": first, "canceled": canceled, "rest": rest}


async def resubscribe_follow_up(peer: Peer) -> Json:
    """tasks/resubscribe to an input-required task, then a follow-up message completes it."""
    first = await peer.send(message("tck-input-required"))
    task = Task.model_validate(first)
    events = peer.streaming.resubscribe(TaskIdParams(id=task.id))
    try:
        snapshot = event_json(await within(anext(events)))
        follow_up = message("tck-complete-task", "here is the input", task)
        reply = asyncio.ensure_future(peer.send(follow_up))
        try:
            rest = await collect(events)
        except Exception as e:
            reply.cancel()
            return {"first": first, "snapshot": snapshot, "stream_error": f"{type(e).__name__}: {e}"}
        done = await within(reply)
    finally:
        await events.aclose()
    return {
        "first": first,
        "snapshot": snapshot,
        "follow_up_message_id": follow_up.message_id,
        "rest": rest,
        "done": done,
    }


def unknown() -> Task:
    task_id = f"no-such-task-{uuid.uuid4()}"
    return Task.model_validate({"id": task_id, "contextId": "ctx", "status": {"state": "working"}})


async def unknown_task(peer: Peer) -> Json:
    """tasks/get, tasks/cancel and message/send naming a task that does not exist."""
    task = unknown()
    return {
        "task_id": task.id,
        "tasks/get": await error_of(lambda: peer.get(task.id)),
        "tasks/cancel": await error_of(lambda: peer.cancel(task.id)),
        "message/send": await error_of(lambda: peer.send(message("tck-complete-task", "?", task))),
    }


async def unknown_task_stream(peer: Peer) -> Json:
    """The streaming calls, tasks/resubscribe and message/stream, naming a task that does not exist."""
    task = unknown()
    return {
        "task_id": task.id,
        "tasks/resubscribe": await error_of(
            lambda: collect(peer.streaming.resubscribe(TaskIdParams(id=task.id)))
        ),
        "message/stream": await error_of(
            lambda: collect(peer.streaming.send_message(message("tck-complete-task", "?", task)))
        ),
    }


SCENARIOS: dict[str, Callable[[Peer], Awaitable[Json]]] = {
    "send-task": send_task,
    "send-message": send_message,
    "stream": stream,
    "artifact-data": artifact_data,
    "input-required": input_required,
    "cancel": cancel,
    "resubscribe-cancel": resubscribe_cancel,
    "resubscribe-follow-up": resubscribe_follow_up,
    "unknown-task": unknown_task,
    "unknown-task-stream": unknown_task_stream,
}


async def main(url: str, transport: str, scenario: str) -> Json:
    requests: list[Json] = []

    async def record(response: httpx.Response) -> None:
        request = response.request
        requests.append(
            {
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
                "content_type": response.headers.get("content-type", ""),
                "a2a_version": request.headers.get("A2A-Version"),
            }
        )

    async with httpx.AsyncClient(timeout=WAIT, event_hooks={"response": [record]}) as http:
        if scenario == "card":
            out = await card_scenario(http, url, transport)
        else:
            card = await within(A2ACardResolver(http, url).get_agent_card())
            peer = Peer(http, card, transport)
            out = await SCENARIOS[scenario](peer)
            out["transport_url"] = peer.url
    out["requests"] = requests
    return out


if __name__ == "__main__":
    url, transport, scenario = sys.argv[1:]
    print(json.dumps(asyncio.run(main(url, transport, scenario))))
