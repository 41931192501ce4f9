"""A reader that reads is never cut (issue 29): a stream that falls behind its task catches up from the
store's event log, exactly, on every store and binding, and memory stays bounded.

Seen before: ``SendStreamingMessage`` of a task emitting 20,000 artifact chunks answered HTTP 503 "This
stream fell more than 10000 events ... behind the task and was dropped" before its first byte on the memory
store (the chunks were committed, and published, in one burst), and ended mid-way on SQLite.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import A2A_V1, RunningServer, start_server, user_message
from skillwire import Agent, CallContext, Executor, Limits, RequestContext, TaskEvents, TaskState
from skillwire.protocol.models import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from skillwire.server.buses.base import Behind
from skillwire.server.buses.memory import InProcessEventBus
from skillwire.server.tasks.run import UNCOMMITTED_EVENTS, YIELD_EVERY
from skillwire.server.tasks.runtime import EventStream, TaskRuntime
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore
from skillwire.types import StreamResponse

CALL = CallContext()
WAIT = 30.0


def send(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id="m1", role=Role.USER, parts=[Part(text=text)]))


def reply(n: int) -> StreamResponse:
    return StreamResponse(message=Message(message_id=str(n), role=Role.AGENT, parts=[Part(text="x")]))


def status_event(n: int, state: TaskState) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id="t", context_id="c", status=TaskStatus(state=state), generation=n
        )
    )


def chunks_of(events: list[StreamResponse]) -> list[str]:
    return [str(e.artifact_update.artifact.parts[0].text) for e in events if e.artifact_update is not None]


def generations(events: list[StreamResponse]) -> list[int]:
    out = []
    for e in events:
        if e.status_update is not None:
            out.append(e.status_update.generation)
        elif e.artifact_update is not None:
            out.append(e.artifact_update.generation)
        elif e.task is not None:
            out.append(e.task.generation)
    return out


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


# -- the bus: a queue past its bound sheds, and says so --------------------------------------------------


async def test_a_subscriber_past_its_bound_sheds_its_oldest_events_and_is_told_it_is_behind() -> None:
    bus = InProcessEventBus(max_events=3)
    key = ("", "t")
    sub = bus.subscribe(key, after=0)
    for generation in range(1, 11):
        bus.publish(key, generation, reply(generation))
    assert bus.subscriber_count(key) == 1  # never dropped
    behind = await sub.next()
    assert isinstance(behind, Behind) and behind.after == 0
    sub.skip_through(6)  # the reader got 1-6 from the store: 7 was shed too
    again = await sub.next()
    assert isinstance(again, Behind) and again.after == 6
    sub.skip_through(7)
    assert [await sub.next() for _ in range(3)] == [(g, reply(g)) for g in (8, 9, 10)]
    assert bus.shed >= 1


async def test_a_subscriber_whose_floor_is_open_is_behind_only_if_its_snapshot_lacks_what_was_shed() -> None:
    bus = InProcessEventBus(max_events=3)
    key = ("", "t")
    kept, lost = bus.subscribe(key, after=None), bus.subscribe(key, after=None)
    for generation in range(1, 11):  # a replay far past the bound, before the snapshots are read
        bus.publish(key, generation, reply(generation))
    kept.skip_through(7)  # 1-7 were shed, and its snapshot holds them
    assert [await kept.next() for _ in range(3)] == [(g, reply(g)) for g in (8, 9, 10)]
    lost.skip_through(6)  # 7 was shed, and its snapshot lacks it
    behind = await lost.next()
    assert isinstance(behind, Behind) and behind.after == 6


async def test_publishing_says_when_a_subscriber_holds_a_backlog_until_its_reader_takes_it() -> None:
    bus = InProcessEventBus(max_events=160, max_bytes=1 << 20)  # a backlog: past 10 events or 64 KiB
    key = ("", "t")
    assert bus.publish(key, 1, reply(1)) is False  # nobody subscribes
    sub = bus.subscribe(key, after=0)
    assert [bus.publish(key, g, reply(g)) for g in range(1, 13)] == [False] * 10 + [True, True]
    for g in range(1, 4):
        assert sub.next_nowait() == (g, reply(g))
    assert bus.publish(key, 13, reply(13)) is False  # 10 queued
    assert bus.publish(key, 14, reply(14), b"x" * (64 << 10)) is True  # 11 queued, and by bytes too
    for g in range(4, 10):
        assert sub.next_nowait() == (g, reply(g))
    assert bus.publish(key, 15, reply(15), b"x" * (64 << 10)) is True  # by bytes alone: 6 queued
    assert bus.shed == 0


async def test_a_direct_reply_is_never_shed() -> None:
    bus = InProcessEventBus(max_events=1)
    key = ("", "t")
    sub = bus.subscribe(key, after=None)
    bus.publish(key, 0, reply(0))
    bus.publish(key, 0, reply(1))
    sub.skip_through(0)
    assert await sub.next() == (0, reply(0))


async def test_a_subscription_for_the_end_queues_nothing_else() -> None:
    # ends_only: only a terminal status update is queued, so a watcher of a long stream costs nothing per
    # chunk; the end of the bus still reaches it.
    bus = InProcessEventBus(max_events=3)
    key = ("", "t")
    ends = bus.subscribe(key, after=0, ends_only=True)
    for generation in range(1, 11):  # past the bound: nothing was queued, nothing is shed
        bus.publish(key, generation, reply(generation))
    for generation, state in ((11, TaskState.WORKING), (12, TaskState.FAILED)):
        bus.publish(key, generation, status_event(generation, state))
    assert ends.next_nowait() == (12, status_event(12, TaskState.FAILED))
    assert ends.next_nowait() is None and bus.shed == 0
    bus.close()
    assert await ends.next() is None


# -- the runtime: a stream that fell behind catches up from the store ----------------------------------------


class Burst(Executor):
    """Once ``go`` is set, emits ``count`` chunks without pausing (so they are committed, and published, at
    once), then waits for ``finish`` before it completes."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.go = asyncio.Event()
        self.emitted = asyncio.Event()
        self.finish = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await self.go.wait()
        for i in range(self.count):
            await events.artifact(f"c{i}", artifact_id="a", append=i > 0)
        await events.set_metadata("chunks", self.count)  # committed: every chunk before it is published
        self.emitted.set()
        await self.finish.wait()


class Tight(Executor):
    """Emits ``count`` chunks and awaits nothing else. Records how many events its stream had read by the time
    the last chunk was emitted, and how many turns a ticker on the same loop made from its second chunk to
    its last."""

    def __init__(self, count: int, received: list[StreamResponse]) -> None:
        self.count = count
        self.received = received
        self.ticks = 0
        self.read_before_the_end = 0
        self.ticks_while_emitting = 0

    async def tick(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0)

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.artifact("c0", artifact_id="a")  # the task is created (and committed) here
        ticks = self.ticks
        for i in range(1, self.count):
            await events.artifact(f"c{i}", artifact_id="a", append=True)
        self.ticks_while_emitting = self.ticks - ticks
        self.read_before_the_end = len(self.received)


async def test_a_skill_that_streams_awaiting_nothing_else_does_not_hold_the_event_loop(
    store: TaskStore,
) -> None:
    """Seen before: such a skill held the server's event loop until it ended (nothing else was served), and
    its stream got nothing before then (every chunk committed and published at once)."""
    received: list[StreamResponse] = []
    tight = Tight(2_000, received)
    ticker = asyncio.create_task(tight.tick())
    rt = TaskRuntime(tight, store)
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    async for event in stream:
        received.append(event)
    ticker.cancel()
    assert tight.ticks_while_emitting >= 2_000 // YIELD_EVERY - 2
    if isinstance(store, MemoryTaskStore):  # it commits at once, so the stream reads as the skill goes
        assert tight.read_before_the_end > 100
    assert chunks_of(received) == [f"c{i}" for i in range(2_000)]
    assert generations(received) == list(range(1, 2_003))  # the task, working, 2,000 chunks, completed
    await rt.stop(grace=0)


async def test_a_stream_hands_on_the_json_the_log_holds_of_each_event_it_took_from_the_bus(
    store: TaskStore,
) -> None:
    """So that the binding sends it instead of encoding the event again (a stream's chunk costs one
    encoding, not two)."""
    rt = TaskRuntime(Tight(10, []), store)
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    assert isinstance(stream, EventStream)
    pairs = [(event, stream.logged(event)) async for event in stream]
    logged = [(event, data) for event, data in pairs if data is not None]
    assert len(logged) >= 11  # ten chunks and the completion, at least
    for event, data in logged:
        assert msgspec.json.decode(data, type=StreamResponse) == event
    await rt.stop(grace=0)


async def test_a_stream_that_read_nothing_while_its_task_ran_far_ahead_gets_every_event(
    store: TaskStore,
) -> None:
    burst = Burst(500)
    rt = TaskRuntime(burst, store, limits=Limits(stream_buffer_events=8))
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    first = await anext(stream)
    assert first.task is not None and first.task.generation == 1
    burst.go.set()
    await burst.emitted.wait()  # 500 events went to a stream that read none of them
    burst.finish.set()
    rest = await collect(stream)
    assert chunks_of(rest) == [f"c{i}" for i in range(500)]
    assert generations([first, *rest]) == list(range(1, 504))  # the task, working, 500 chunks, completed
    assert rest[-1].status_update is not None and rest[-1].status_update.status.state is TaskState.COMPLETED
    assert isinstance(rt.bus, InProcessEventBus) and rt.bus.shed > 0
    await rt.stop(grace=0)


async def test_a_subscriber_that_fell_behind_catches_up_and_follows_the_task_on(store: TaskStore) -> None:
    burst = Burst(300)
    rt = TaskRuntime(burst, store, limits=Limits(stream_buffer_events=4, stream_buffer_bytes=2_000))
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    first = await anext(stream)
    assert first.task is not None
    watcher = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=first.task.id), CALL)
    snapshot = await anext(watcher)
    assert snapshot.task is not None and not snapshot.task.artifacts
    burst.go.set()
    await burst.emitted.wait()
    burst.finish.set()
    events = await collect(watcher)
    assert chunks_of(events)[-1] == "c299"
    seen = generations([snapshot, *events])
    assert seen == list(range(seen[0], seen[-1] + 1))  # no gap, no duplicate
    await collect(stream)
    await rt.stop(grace=0)


async def test_a_stream_behind_what_the_log_still_holds_gets_the_task_as_stored_then_what_follows() -> None:
    """The log keeps a budget (max_task_log_bytes): a reader behind its oldest event gets the task as stored,
    a Task event in the middle of the stream whose generation says how far it goes, then every later event."""
    burst = Burst(400)
    store = MemoryTaskStore(max_log_bytes=4_000)  # about 40 chunk events
    rt = TaskRuntime(burst, store, limits=Limits(stream_buffer_events=8, max_task_log_bytes=4_000))
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    first = await anext(stream)
    assert first.task is not None
    burst.go.set()
    await burst.emitted.wait()
    burst.finish.set()
    rest = await collect(stream)
    snapshots = [e.task for e in rest if e.task is not None]
    assert len(snapshots) == 1
    snapshot = snapshots[0]
    assert [p.text for p in snapshot.artifacts[0].parts] == [f"c{i}" for i in range(400)]
    after = rest[rest.index(StreamResponse(task=snapshot)) + 1 :]
    assert generations(after) == list(range(snapshot.generation + 1, snapshot.generation + 1 + len(after)))
    assert after[-1].status_update is not None and after[-1].status_update.status.state is TaskState.COMPLETED
    await rt.stop(grace=0)


async def test_subscribe_resumes_after_a_generation_with_exactly_what_follows(store: TaskStore) -> None:
    burst = Burst(40)
    rt = TaskRuntime(burst, store)
    burst.go.set()
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    seen = [await anext(stream) for _ in range(10)]  # the task, working, 8 chunks
    task_id = seen[0].task.id if seen[0].task is not None else ""
    await stream.aclose()  # the client's connection dropped here
    await burst.emitted.wait()
    resumed = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task_id, after_generation=10), CALL)
    burst.finish.set()
    rest = await collect(resumed)
    assert generations(seen + rest) == list(range(1, 44))
    assert chunks_of(seen + rest) == [f"c{i}" for i in range(40)]
    await rt.stop(grace=0)


@pytest.mark.parametrize("ended", [True, False], ids=["task ended", "task running"])
async def test_a_resume_more_than_a_page_of_the_log_behind_gets_every_event_and_ends(
    store: TaskStore, ended: bool
) -> None:
    """Seen before: a subscription resuming after generation 0 of a task that had emitted 2,000 chunks got
    the first page of its log (256 events), then waited for ever, since what followed had been committed
    before it subscribed (so never came on the bus) and the task had ended."""
    burst = Burst(1_000)
    rt = TaskRuntime(burst, store)
    burst.go.set()
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    first = await anext(stream)
    task_id = first.task.id if first.task is not None else ""
    await stream.aclose()
    await burst.emitted.wait()
    if ended:
        burst.finish.set()
        done = await rt.on_get_task(GetTaskRequest(id=task_id, current_generation=1_002), CALL)  # long-polls
        assert done.status.state is TaskState.COMPLETED
    resumed = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task_id, after_generation=0), CALL)
    burst.finish.set()
    rest = await asyncio.wait_for(collect(resumed), WAIT)
    assert generations(rest) == list(range(2, 1_004))  # working, 1,000 chunks, completed
    assert chunks_of(rest) == [f"c{i}" for i in range(1_000)]
    await rt.stop(grace=0)


# -- real servers, real readers ----------------------------------------------------------------------------


class Chunks:
    """A skill that streams ``count`` small text chunks as fast as it can, then completes."""

    def __init__(self, count: int) -> None:
        self.count = count

    async def __call__(self, context: Any, events: Any) -> None:
        await events.working()
        n = self.count
        for i in range(n):
            await events.artifact(f"c{i} ", artifact_id="a", append=i > 0, last_chunk=i == n - 1)
        await events.complete("done")


@pytest.fixture(params=["memory", "sqlite"])
def chunk_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningServer]:
    count = 100_000 if request.node.get_closest_marker("long_stream") else 20_000
    agent = Agent("chunks", "Streams many chunks.", executor=Chunks(count))
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'chunks.db'}"
    srv = start_server(agent.asgi(store=store))
    yield srv
    srv.stop()


def curl_stream(url: str, path: str, body: dict[str, Any]) -> tuple[int, list[str]]:
    """POST ``body`` with curl, reading as fast as it can; the status and each SSE event's data."""
    out = subprocess.run(
        [
            "curl", "-sS", "-N", "--max-time", str(WAIT), "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
            "-H", f"A2A-Version: {A2A_V1['A2A-Version']}", "--data-binary", json.dumps(body), url + path,
        ],
        capture_output=True,
        check=True,
        text=True,
    )  # fmt: skip
    head, _, status = out.stdout.rpartition("\n")
    data = [line[len("data: ") :] for line in head.splitlines() if line.startswith("data: ")]
    return int(status), data


def chunk_texts(results: list[dict[str, Any]]) -> list[str]:
    return [r["artifactUpdate"]["artifact"]["parts"][0]["text"] for r in results if "artifactUpdate" in r]


needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def check_whole(results: list[dict[str, Any]], count: int) -> None:
    assert "task" in results[0]
    assert chunk_texts(results) == [f"c{i} " for i in range(count)]
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@needs_curl
@pytest.mark.slow
def test_a_20000_chunk_stream_reaches_curl_whole_over_jsonrpc(chunk_server: RunningServer) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": user_message("go")},
    }
    status, data = curl_stream(chunk_server.url, "/", body)
    assert status == 200
    check_whole([json.loads(d)["result"] for d in data], 20_000)


@needs_curl
@pytest.mark.slow
def test_a_20000_chunk_stream_reaches_curl_whole_over_http_json(chunk_server: RunningServer) -> None:
    status, data = curl_stream(chunk_server.url, "/message:stream", {"message": user_message("go")})
    assert status == 200
    check_whole([json.loads(d) for d in data], 20_000)


@needs_curl
@pytest.mark.slow
@pytest.mark.long_stream
def test_a_100000_chunk_stream_reaches_curl_whole(chunk_server: RunningServer) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": user_message("go")},
    }
    status, data = curl_stream(chunk_server.url, "/", body)
    assert status == 200
    check_whole([json.loads(d)["result"] for d in data], 100_000)


@pytest.mark.slow
def test_a_20000_chunk_stream_reaches_a_grpc_client_whole(tmp_path: Path) -> None:
    grpc = pytest.importorskip("grpc")
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    agent = Agent("chunks", "Streams many chunks.", executor=Chunks(20_000))
    app = agent.asgi(store=f"sqlite:///{tmp_path / 'chunks.db'}", grpc_port=0)
    srv = start_server(app)
    try:
        assert app.grpc_address is not None
        with grpc.insecure_channel(app.grpc_address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            request = a2a_pb2.SendMessageRequest(
                message=a2a_pb2.Message(
                    message_id="m1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="go")]
                )
            )
            replies = list(
                stub.SendStreamingMessage(request, metadata=(("a2a-version", "1.0"),), timeout=WAIT)
            )
    finally:
        srv.stop()
    texts = [r.artifact_update.artifact.parts[0].text for r in replies if r.HasField("artifact_update")]
    assert texts == [f"c{i} " for i in range(20_000)]
    assert replies[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


# -- paused readers: far behind, then every event, with bounded buffering --------------------------------------


def test_readers_that_paused_while_the_task_ran_get_every_event_and_buffer_within_the_bound(
    tmp_path: Path,
) -> None:
    """Ten readers follow one task (its stream and nine subscriptions), then stop reading while it emits
    3,000 chunks of 8 KiB (24 MB), far past their buffer bound (256 KiB each) and what the sockets hold:
    their queues shed, and once they read again each gets every chunk, once, in order, from the store's
    log. While they were paused, no queue held more than its bound."""
    go, emitted, gate = threading.Event(), threading.Event(), threading.Event()

    async def paced(context: Any, events: Any) -> None:
        await events.working()
        await asyncio.to_thread(go.wait, WAIT)
        for i in range(3_000):
            await events.artifact(f"{i:05d}" + "x" * 8187, artifact_id="a", append=i > 0)
        await events.set_metadata("emitted", True)  # committed: every chunk before it is published
        emitted.set()
        await asyncio.to_thread(gate.wait, WAIT)
        await events.complete("done")

    agent = Agent("paced", "Emits 3,000 chunks of 8 KiB.", executor=paced)
    limits = Limits(stream_buffer_bytes=256 * 1024, stream_buffer_events=1_000, write_timeout=WAIT)
    app = agent.asgi(store=f"sqlite:///{tmp_path / 'paced.db'}", limits=limits)
    srv = start_server(app)
    import httpx

    task_id: list[str] = []
    results: list[list[int]] = [[] for _ in range(10)]
    opened = threading.Barrier(11)

    def read(index: int) -> None:
        with httpx.Client(timeout=WAIT) as client:
            if index == 0:
                request = client.build_request(
                    "POST", srv.url + "/message:stream", json={"message": user_message("go")}, headers=A2A_V1
                )
            else:
                assert started.wait(WAIT)
                request = client.build_request(
                    "GET", f"{srv.url}/tasks/{task_id[0]}:subscribe", headers=A2A_V1
                )
            response = client.send(request, stream=True)
            try:
                lines = response.iter_lines()
                first = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
                if index == 0:
                    task_id.append(first["task"]["id"])
                    started.set()
                opened.wait(WAIT)
                gate.wait(WAIT)  # the reader pauses while its task runs far ahead
                for line in lines:
                    if line.startswith("data: "):
                        result = json.loads(line[6:])
                        if "artifactUpdate" in result:
                            text = result["artifactUpdate"]["artifact"]["parts"][0]["text"]
                            results[index].append(int(text[:5]))
            finally:
                response.close()

    started = threading.Event()
    threads = [threading.Thread(target=read, args=(i,)) for i in range(10)]
    try:
        for thread in threads:
            thread.start()
        opened.wait(WAIT)
        go.set()
        assert emitted.wait(WAIT)
        bus = app.runtime.bus if app.runtime is not None else None
        assert isinstance(bus, InProcessEventBus)
        queues = [sub for subs in bus._subs.values() for sub in subs]
        assert len(queues) == 10
        assert all(sub._bytes <= limits.stream_buffer_bytes for sub in queues)
        assert bus.shed > 0
        gate.set()
        for thread in threads:
            thread.join(WAIT)
        assert all(r == list(range(3_000)) for r in results), [len(r) for r in results]
    finally:
        go.set()
        gate.set()
        srv.stop()


async def read_per_turn(stream: EventStream, per_turn: int, into: list[StreamResponse]) -> None:
    """Read ``stream`` as a binding's pump does, at most ``per_turn`` events each turn of the loop: what it
    finds queued, then a wait for the next one."""
    while True:
        for _ in range(per_turn - 1):
            event = stream.next_nowait()
            if event is None:
                break
            into.append(event)
        try:
            into.append(await anext(stream))
        except StopAsyncIteration:
            return
        await asyncio.sleep(0)


async def test_a_reader_that_takes_fewer_events_a_turn_than_the_skill_makes_keeps_up_from_its_queue(
    store: TaskStore,
) -> None:
    """Seen before: a stream of 100,000 chunks read by curl got 95% of them from the store's log, at two thirds
    of the events per second of a stream of 10,000. The run made 256 events a turn of the loop and the
    stream's pump sent about 220 (64 KiB of frames), so its queue grew by the difference until it passed its
    bound, shed, and the stream caught up from the log, which costs more per event. Now the bus tells the run
    when a subscriber holds a backlog, and the run hands the loop on sooner until the reader has caught up."""
    bus = InProcessEventBus(max_events=2_000)  # a backlog past 125 events
    received: list[StreamResponse] = []
    rt = TaskRuntime(Tight(20_000, received), store, bus)
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    assert isinstance(stream, EventStream)
    await read_per_turn(stream, 200, received)
    assert bus.shed == 0  # nothing was read from the store's log
    assert chunks_of(received) == [f"c{i}" for i in range(20_000)]
    assert generations(received) == list(range(1, 20_003))
    await rt.stop(grace=0)


class Outrunning(Executor):
    """Emits a chunk, waits for ``go``, then emits ``count`` more awaiting nothing else, counting them."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.emitted = 0

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.artifact("c0", artifact_id="a")
        self.started.set()
        await self.go.wait()
        for i in range(1, self.count + 1):
            await events.artifact(f"c{i}", artifact_id="a", append=True)
            self.emitted = i


async def test_a_skill_that_makes_events_faster_than_the_store_commits_them_waits_for_the_store(
    tmp_path: Path,
) -> None:
    """Its uncommitted events stay bounded (in memory, and in what one commit publishes at once) while
    another connection holds SQLite's write lock, and every one of them is stored and streamed after."""
    store = SQLiteTaskStore(tmp_path / "t.db", timeout=60)
    await store.open()
    skill = Outrunning(5_000)
    rt = TaskRuntime(skill, store)
    stream = await rt.on_send_streaming_message(send("go"), CALL)
    await skill.started.wait()
    other = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        skill.go.set()
        for _ in range(2_000):  # turns of the loop: without the bound it emits all 5,000 in about 20
            await asyncio.sleep(0)
        assert 0 < skill.emitted <= UNCOMMITTED_EVENTS + YIELD_EVERY
    finally:
        other.execute("ROLLBACK")
        other.close()
    received = await collect(stream)
    assert skill.emitted == 5_000
    assert chunks_of(received) == [f"c{i}" for i in range(5_001)]
    stored = await store.get(received[0].task.id if received[0].task else "", tenant="")
    assert stored is not None and len(stored.task.artifacts[0].parts) == 5_001
    await rt.stop(grace=0)
    await store.close()
