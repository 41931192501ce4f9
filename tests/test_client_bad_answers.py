"""An agent that answers nonsense: the client raises one of its typed errors, never anything else, never hangs.

Hypothesis makes up the answer (HTTP status, content type, body: random bytes, random JSON, JSON-RPC
envelopes with random results or errors, SSE streams of random events); an in-process ASGI app serves it to
every transport (JSON-RPC, HTTP+JSON, and both v0.3 ones) through the real Client. The only acceptable
outcomes are a well-typed result, an :class:`A2AError` or a :class:`ClientError`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillwire import A2AError, Client, ClientError, RetryPolicy
from skillwire.client import JsonRpcTransport, RestTransport
from skillwire.protocol import models as m
from skillwire.testing import StreamingASGITransport

TRANSPORTS = [(t, version) for version in ("1.0", "0.3") for t in (JsonRpcTransport, RestTransport)]
NO_RETRY = RetryPolicy(retries=0)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
#: Keys an A2A answer has, so that random objects often get past the first checks.
a2a_keys = st.sampled_from(
    ["task", "message", "id", "contextId", "status", "state", "artifacts", "parts", "text", "kind", "result",
     "error", "code", "statusUpdate", "artifactUpdate", "tasks", "final", "role", "messageId", "details"]
)  # fmt: skip
a2a_objects = st.recursive(
    json_values,
    lambda inner: st.dictionaries(a2a_keys, inner, max_size=5),
    max_leaves=25,
)


def envelope(result: Any, error: Any) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return json.dumps(body).encode()


bodies = st.one_of(
    st.binary(max_size=200),
    a2a_objects.map(lambda v: json.dumps(v).encode()),
    st.builds(envelope, a2a_objects, st.none() | a2a_objects),
)
sse_streams = st.lists(bodies, max_size=4).map(
    lambda events: b"".join(b"data: " + e.replace(b"\n", b" ").replace(b"\r", b" ") + b"\n\n" for e in events)
)


class Answer:
    """An ASGI app that answers every request with the same status, content type and body."""

    def __init__(self, status: int, content_type: bytes, body: bytes) -> None:
        self.status, self.content_type, self.body = status, content_type, body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", self.content_type)]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


async def call_everything(answer: Answer, transport: tuple[type[Any], str]) -> None:
    transport_type, version = transport
    async with httpx.AsyncClient(transport=StreamingASGITransport(answer), base_url="http://agent") as http:
        client = Client(transport_type("http://agent/", http, version=version), retry=NO_RETRY)
        calls = [
            lambda: client.send("hi"),
            lambda: client.get_task("t1"),
            lambda: client.cancel_task("t1"),
            lambda: client.get_extended_card(),
        ]
        if version == "1.0":
            calls.append(lambda: client.list_tasks())
        for call in calls:
            try:
                async with asyncio.timeout(5):
                    result = await call()
            except (A2AError, ClientError):
                continue
            assert isinstance(result, m.Task | m.Message | m.ListTasksResponse | m.AgentCard)
        for events in (client.stream("hi", resume=False), client.subscribe("t1", resume=False)):
            try:
                async with asyncio.timeout(5):
                    async for event in events:
                        assert isinstance(event, m.StreamResponse)
            except (A2AError, ClientError):
                pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transport=st.sampled_from(TRANSPORTS),
    status=st.sampled_from([200, 200, 200, 201, 204, 400, 404, 429, 500, 502, 503]),
    content_type=st.sampled_from(
        [b"application/json", b"text/event-stream", b"text/plain", b"application/a2a+json"]
    ),
    body=bodies,
)
def test_nonsense_unary_answers_are_typed_errors(
    transport: tuple[type[Any], str], status: int, content_type: bytes, body: bytes
) -> None:
    asyncio.run(call_everything(Answer(status, content_type, body), transport))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transport=st.sampled_from(TRANSPORTS), stream=sse_streams)
def test_nonsense_event_streams_are_typed_errors(transport: tuple[type[Any], str], stream: bytes) -> None:
    asyncio.run(call_everything(Answer(200, b"text/event-stream", stream), transport))
