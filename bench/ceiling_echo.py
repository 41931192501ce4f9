"""The ceiling: bare uvicorn answering the bench's requests with prepared bytes, no A2A framework at all.

What no A2A server on this machine can beat with uvicorn underneath: every SendMessage is answered with one
prepared completed task (the request's JSON-RPC id and text put in, nothing stored), ``stream N`` with N
artifact-update events cut from one prepared template, then a completed task, each sent as its own ASGI message as a real server
sends them, and ``GET /.well-known/agent-card.json`` with a prepared card naming the JSON-RPC interface. The
body is parsed with the standard library's ``json`` only to find the id and the text.

    BENCH_PORT=8000 uvicorn ceiling_echo:app --app-dir bench --host 127.0.0.1 --port 8000

Nothing here is a test; ``bench/run.py --targets ceiling`` starts it with the other targets' uvicorn flags.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HOST = os.environ.get("BENCH_HOST", "127.0.0.1")
PORT = os.environ.get("BENCH_PORT", "8000")
CARD = json.dumps(
    {
        "name": "ceiling",
        "description": "bare uvicorn with prepared answers",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": f"http://{HOST}:{PORT}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }
).encode()
JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
TASK_ID, CONTEXT_ID = "ceiling-task", "ceiling-context"


def _task(text: str) -> dict[str, Any]:
    return {
        "id": TASK_ID,
        "contextId": CONTEXT_ID,
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "echo", "parts": [{"text": text}]}],
    }


def _chunk(index: int, last: bool) -> dict[str, Any]:
    return {
        "artifactUpdate": {
            "taskId": TASK_ID,
            "contextId": CONTEXT_ID,
            "artifact": {"artifactId": "stream", "parts": [{"text": f"chunk {index}"}]},
            "append": index > 0,
            "lastChunk": last,
        }
    }


def _event(request_id: Any, result: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n\n"


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "GET":
        await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
        await send({"type": "http.response.body", "body": CARD})
        return
    request = json.loads(await _body(receive))
    text = request["params"]["message"]["parts"][0]["text"]
    words = text.split()
    if len(words) == 2 and words[0] == "stream" and words[1].isdigit():
        await _stream(request["id"], int(words[1]), send)
        return
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"task": _task(text)}}
    await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


async def _stream(request_id: Any, count: int, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    # The events between the first and the last differ only in their index: one template, cut once.
    head, _, tail = _event(request_id, _chunk(1, False)).partition(b"chunk 1")
    for index in range(count):
        last = index == count - 1
        if index == 0 or last:
            event = _event(request_id, _chunk(index, last))
        else:
            event = b"%schunk %d%s" % (head, index, tail)
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": _event(request_id, {"task": _task("done")})})
