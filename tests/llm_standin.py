"""A model provider stand-in: a raw ASGI app (served on 127.0.0.1 by ``conftest.serve_asgi``) that speaks
the real wire formats of OpenAI chat completions (``.../chat/completions``, plain JSON or server-sent events
ending with ``data: [DONE]``) and of Ollama's native chat (any other path, ``/api/chat`` by default: plain
JSON or JSON lines ending with ``"done": true``).

A test scripts what the next requests get (:meth:`ProviderStandIn.will`: one behaviour per request, in
order), then reads what they were (:attr:`ProviderStandIn.requests`: method, path, headers, JSON body).
The app runs on the server's thread, so its signals are threading Events: ``stalled`` (a
:class:`SlowStream` sent its chunks and holds the stream open) and ``disconnected`` (a :class:`Hang` or a
:class:`SlowStream` saw its client go). A request with nothing scripted is answered 500, so a test that
sends one more request than it meant fails loudly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: How long a test waits for the stand-in at most (seconds).
WAIT = 10.0


@dataclass(frozen=True)
class Reply:
    """A valid reply with ``text``: whole, or streamed as ``chunks`` (joined, they should be ``text``) when
    the request asks for a stream."""

    text: str = "Hello from the stand-in."
    chunks: Sequence[str] | None = None


@dataclass(frozen=True)
class Status:
    """An error status with a body and headers (``Status(429, headers={"Retry-After": "0"})``)."""

    status: int
    body: str = '{"error": {"message": "stand-in failure: internal provider text"}}'
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Raw:
    """Exactly these bytes, as a 200 answer (nonsense where a reply should be)."""

    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class RawStream:
    """A 200 streamed answer made of these pieces, each sent as its own chunk, exactly as given."""

    pieces: Sequence[bytes]
    content_type: str = "text/event-stream"


@dataclass(frozen=True)
class Hang:
    """No answer at all: the request waits until the client goes (then ``disconnected`` is set)."""


@dataclass(frozen=True)
class SlowStream:
    """A valid stream that sends ``chunks``, sets ``stalled`` and never ends, until the client goes."""

    chunks: Sequence[str]


@dataclass(frozen=True)
class ToolCalls:
    """A whole (not streamed) reply in which the model calls tools: ``calls`` are (name, arguments), in the
    request's wire format (OpenAI: ids, arguments as a JSON string; Ollama: arguments as an object)."""

    calls: Sequence[tuple[str, dict[str, Any]]]


Behaviour = Reply | Status | Raw | RawStream | Hang | SlowStream | ToolCalls


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    #: Header names in lower case.
    headers: dict[str, str]
    body: Any


class ProviderStandIn:
    """The ASGI app. ``url`` is set by whoever serves it."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[Recorded] = []
        self.stalled = threading.Event()
        self.disconnected = threading.Event()
        self._script: deque[Behaviour] = deque()
        self._arrived = threading.Condition()

    def will(self, *behaviours: Behaviour) -> None:
        """What the next requests get, one each, in order."""
        self._script.extend(behaviours)

    def wait_for_requests(self, count: int, timeout: float = WAIT) -> list[Recorded]:
        """The first ``count`` requests, once they have arrived (AssertionError after ``timeout``)."""
        with self._arrived:
            assert self._arrived.wait_for(lambda: len(self.requests) >= count, timeout), self.requests
            return self.requests[:count]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = Recorded(
            scope["method"],
            scope["path"],
            {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            json.loads(body) if body else None,
        )
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
        behaviour = self._script.popleft() if self._script else Status(500, '{"error": "nothing scripted"}')
        await self._answer(behaviour, request, receive, send)

    async def _answer(self, behaviour: Behaviour, request: Recorded, receive: Any, send: Any) -> None:
        wire = OPENAI if request.path.endswith("/chat/completions") else OLLAMA
        model = (request.body or {}).get("model", "standin")
        if isinstance(behaviour, Reply):
            if wire.wants_stream(request.body or {}):
                chunks = behaviour.chunks if behaviour.chunks is not None else [behaviour.text]
                await _stream(send, wire.content_type, wire.stream(model, chunks, end=True))
            else:
                await _whole(send, 200, json.dumps(wire.reply(model, behaviour.text)).encode())
        elif isinstance(behaviour, Status):
            await _whole(send, behaviour.status, behaviour.body.encode(), behaviour.headers)
        elif isinstance(behaviour, Raw):
            await _whole(send, 200, behaviour.body, content_type=behaviour.content_type)
        elif isinstance(behaviour, RawStream):
            await _stream(send, behaviour.content_type, behaviour.pieces)
        elif isinstance(behaviour, Hang):
            await self._until_gone(receive)
        elif isinstance(behaviour, ToolCalls):
            await _whole(send, 200, json.dumps(wire.tool_calls(model, behaviour.calls)).encode())
        else:
            pieces = wire.stream(model, behaviour.chunks, end=False)
            await _stream(send, wire.content_type, pieces, more=True)
            self.stalled.set()
            await self._until_gone(receive)

    async def _until_gone(self, receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.disconnected.set()


# -- the two wire formats ------------------------------------------------------------------------------

CREATED = 1_700_000_000


@dataclass(frozen=True)
class Wire:
    content_type: str
    wants_stream: Callable[[dict[str, Any]], bool]
    reply: Callable[[str, str], dict[str, Any]]
    stream: Callable[..., list[bytes]]
    tool_calls: Callable[[str, Sequence[tuple[str, dict[str, Any]]]], dict[str, Any]]


def _openai_tool_calls(model: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    reply = _openai_reply(model, "")
    message = reply["choices"][0]["message"]
    message["content"] = None
    message["tool_calls"] = [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for n, (name, args) in enumerate(calls)
    ]
    reply["choices"][0]["finish_reason"] = "tool_calls"
    return reply


def _ollama_tool_calls(model: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    line = _ollama_line(model, "", True)
    line["message"]["tool_calls"] = [{"function": {"name": name, "arguments": args}} for name, args in calls]
    return line


def _openai_reply(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        "system_fingerprint": "fp_standin",
    }


def _openai_chunk(model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    chunk = {
        "id": "chatcmpl-standin",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_standin",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _openai_stream(model: str, chunks: Sequence[str], *, end: bool) -> list[bytes]:
    pieces = [_openai_chunk(model, {"role": "assistant", "content": ""}, None)]
    pieces += [_openai_chunk(model, {"content": text}, None) for text in chunks]
    if end:
        pieces += [_openai_chunk(model, {}, "stop"), b"data: [DONE]\n\n"]
    return pieces


def _ollama_line(model: str, content: str, done: bool) -> dict[str, Any]:
    line: dict[str, Any] = {
        "model": model,
        "created_at": "2024-07-23T12:00:00.000000Z",
        "message": {"role": "assistant", "content": content},
        "done": done,
    }
    if done:
        line |= {"done_reason": "stop", "total_duration": 1000, "eval_count": 7, "prompt_eval_count": 5}
    return line


def _ollama_stream(model: str, chunks: Sequence[str], *, end: bool) -> list[bytes]:
    lines = [_ollama_line(model, text, False) for text in chunks]
    if end:
        lines.append(_ollama_line(model, "", True))
    return [json.dumps(line).encode() + b"\n" for line in lines]


OPENAI = Wire(
    "text/event-stream",
    lambda body: body.get("stream") is True,
    _openai_reply,
    _openai_stream,
    _openai_tool_calls,
)
# Ollama streams unless the request says "stream": false
OLLAMA = Wire(
    "application/x-ndjson",
    lambda body: body.get("stream", True) is not False,
    lambda model, text: _ollama_line(model, text, True),
    _ollama_stream,
    _ollama_tool_calls,
)


# -- ASGI plumbing ---------------------------------------------------------------------------------------


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _whole(
    send: Any,
    status: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    content_type: str = "application/json",
) -> None:
    raw = [(b"content-type", content_type.encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _stream(send: Any, content_type: str, pieces: Sequence[bytes], *, more: bool = False) -> None:
    """Send ``pieces`` as separate chunks of one 200 answer; ``more`` leaves it open."""
    headers = [(b"content-type", content_type.encode()), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for piece in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    if not more:
        await send({"type": "http.response.body", "body": b""})
