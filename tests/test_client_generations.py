"""skillwire.Client with an agent that keeps A2A 1.1 generations (issue 29): it asks for them, exposes them,
resumes a broken stream after the last generation it yielded (exactly what was missed follows, nothing
twice), closes a gap by resuming from its cursor, and turns a snapshot that supersedes missed events into
the updates they stood for. The line is cut for real: a TCP proxy between the client and the server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import RunningServer, TcpProxy, start_server
from skillwire import Agent, Client
from skillwire.client.retry import RetryPolicy
from skillwire.protocol import models as m
from skillwire.protocol.states import TaskState
from skillwire.wire.generations import GENERATIONS_URI

WAIT = 15.0
FAST = RetryPolicy(retries=5, base=0.01, cap=0.2)


class Steps:
    """A skill whose chunks the test lets through: ``release(n)`` lets ``n`` more out; after ``count`` it
    completes."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.allowed = threading.Semaphore(0)
        self.emitted = 0
        self.progress = threading.Condition()

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self.allowed.release()

    def wait_emitted(self, n: int) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: self.emitted >= n, WAIT), f"only {self.emitted} emitted"

    async def __call__(self, context: Any, events: Any) -> None:
        await events.working()
        for i in range(self.count):
            assert await asyncio.to_thread(self.allowed.acquire, True, WAIT)
            await events.artifact(f"c{i}", artifact_id="a", append=i > 0)
            await events.set_metadata("emitted", i + 1)  # committed: the event is published
            with self.progress:
                self.emitted = i + 1
                self.progress.notify_all()
        await events.complete("done")


@pytest.fixture
def stepped() -> Iterator[tuple[RunningServer, Steps, TcpProxy, TcpProxy]]:
    skill = Steps(6)
    app = Agent("steps", "Emits chunks when let.", executor=skill).asgi(store="memory://", grpc_port=0)
    srv = start_server(app)
    assert app.grpc_address is not None
    host, _, port = app.grpc_address.rpartition(":")
    http, grpc = TcpProxy(("127.0.0.1", srv.port)), TcpProxy((host, int(port)))
    http.start()
    grpc.start()
    yield srv, skill, http, grpc
    skill.release(skill.count)
    http.cut()
    grpc.cut()
    srv.stop()


async def connect(binding: str, http: TcpProxy, grpc: TcpProxy) -> Client:
    """A client through the proxies: the card read through the HTTP one; gRPC's channel to the other."""
    url = f"http://127.0.0.1:{http.port}"
    if binding != "GRPC":
        return await Client.connect(url, bindings=(binding,), retries=FAST, timeout=WAIT)
    from skillwire.client.grpc import GrpcTransport

    async with await Client.connect(url, retries=FAST, timeout=WAIT) as probe:
        card = probe.card
    transport = GrpcTransport(
        f"127.0.0.1:{grpc.port}", timeout=WAIT, headers={"A2A-Extensions": GENERATIONS_URI}
    )
    client = Client(transport, card=card, retry=FAST)
    client.generations = True
    return client


def generations_of(events: list[m.StreamResponse]) -> list[int]:
    return [m.generation_of(e) for e in events]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_cut_stream_resumes_after_its_last_generation_with_exactly_what_it_missed(
    stepped: tuple[RunningServer, Steps, TcpProxy, TcpProxy], binding: str
) -> None:
    _, skill, http, grpc = stepped
    proxy = grpc if binding == "GRPC" else http
    client = await connect(binding, http, grpc)
    assert client.generations
    events: list[m.StreamResponse] = []
    async with client, asyncio.timeout(WAIT):
        skill.release(2)
        async for event in client.stream("go"):
            events.append(event)
            if m.generation_of(event) == 4:  # the task, working, two chunks: now the line goes down
                proxy.cut()
                skill.release(2)  # two chunks while nobody listens
                await asyncio.to_thread(skill.wait_emitted, 4)
                proxy.start()
                skill.release(2)
    assert generations_of(events) == list(range(1, 10))  # created, working, six chunks, completed
    assert [e.artifact_update.artifact.parts[0].text for e in events if e.artifact_update] == [
        f"c{i}" for i in range(6)
    ]
    assert sum(e.task is not None for e in events) == 1
    assert (
        events[-1].status_update is not None and events[-1].status_update.status.state is TaskState.COMPLETED
    )


async def test_subscribe_resumes_after_its_cursor_when_the_line_breaks(
    stepped: tuple[RunningServer, Steps, TcpProxy, TcpProxy],
) -> None:
    _, skill, http, grpc = stepped
    async with await connect("JSONRPC", http, grpc) as client, asyncio.timeout(WAIT):
        task = await client.send("go", configuration=m.SendMessageConfiguration(return_immediately=True))
        assert isinstance(task, m.Task) and task.generation >= 1
        events: list[m.StreamResponse] = []
        async for event in client.subscribe(task.id):
            events.append(event)
            if event.task is not None:
                skill.release(1)  # the first chunk once the subscription holds the snapshot
            if event.artifact_update is not None and event.artifact_update.artifact.parts[0].text == "c0":
                http.cut()
                skill.release(3)
                await asyncio.to_thread(skill.wait_emitted, 4)
                http.start()
                skill.release(2)
    seen = generations_of(events)
    assert seen == list(range(seen[0], 10))  # from the snapshot on: no gap, no duplicate
    final = await_task_state(events)
    assert final is TaskState.COMPLETED


def await_task_state(events: list[m.StreamResponse]) -> TaskState | None:
    update = events[-1].status_update
    return update.status.state if update is not None else None


class DropsOneEvent:
    """An ASGI wrapper that loses the third SSE event of the first stream on the way to the client: what a
    faulty middlebox does. The client sees a gap in the generations."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.dropped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.dropped:
            await self.app(scope, receive, send)
            return
        seen = 0
        streaming = False

        async def send_(message: dict[str, Any]) -> None:
            nonlocal seen, streaming
            if message["type"] == "http.response.start":
                streaming = (
                    dict(message.get("headers", []))
                    .get(b"content-type", b"")
                    .startswith(b"text/event-stream")
                )
            elif streaming and message["type"] == "http.response.body" and not self.dropped:
                out = b""
                for event in message.get("body", b"").split(b"\n\n"):
                    if not event:
                        continue
                    seen += b"data:" in event
                    if seen == 3 and not self.dropped:
                        self.dropped = True
                        continue
                    out += event + b"\n\n"
                message = {**message, "body": out}
            await send(message)

        await self.app(scope, receive, send_)


async def test_a_gap_in_the_generations_is_closed_by_resuming_from_the_cursor() -> None:
    skill = Steps(4)
    skill.release(4)
    dropping = DropsOneEvent(Agent("steps", "Emits chunks.", executor=skill).asgi(store="memory://"))
    srv = start_server(dropping)  # type: ignore[arg-type]
    try:
        async with await Client.connect(srv.url, retries=FAST, timeout=WAIT) as client, asyncio.timeout(WAIT):
            events = [e async for e in client.stream("go")]
    finally:
        srv.stop()
    assert dropping.dropped
    assert generations_of(events) == list(range(1, 8))  # the lost one came back, nothing twice


async def test_without_generations_the_client_resumes_from_a_snapshot_as_before(
    stepped: tuple[RunningServer, Steps, TcpProxy, TcpProxy],
) -> None:
    _, skill, http, grpc = stepped
    client = await connect("JSONRPC", http, grpc)
    client.generations = False  # as with an agent that does not keep them
    events: list[m.StreamResponse] = []
    async with client, asyncio.timeout(WAIT):
        skill.release(2)
        async for event in client.stream("go"):
            events.append(event)
            if event.artifact_update is not None and event.artifact_update.artifact.parts[0].text == "c1":
                http.cut()
                skill.release(2)
                await asyncio.to_thread(skill.wait_emitted, 4)
                http.start()
                skill.release(2)
    parts = [p.text for e in events if e.artifact_update for p in e.artifact_update.artifact.parts]
    assert parts == [f"c{i}" for i in range(6)]  # the missed ones rebuilt from the snapshot
    assert sum(e.task is not None for e in events) == 1
