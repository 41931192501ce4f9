"""The Redis event bus against a real Redis (127.0.0.1:6379): order, replay, two processes, bounds, trimming,
outages (a TCP proxy in front of Redis, closed then reopened), and two task runtimes sharing it."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
import msgspec
import pytest

from conftest import LongTask, skip_without_service

pytest.importorskip("redis")

import redis.asyncio as redis

from skillwire import CallContext, Executor, RequestContext, TaskEvents, TaskState
from skillwire.errors import SkillwireError, StoreUnavailableError, StreamDroppedError
from skillwire.protocol.models import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from skillwire.server.buses import redis as bus_redis
from skillwire.server.buses.base import Behind
from skillwire.server.buses.memory import InProcessEventBus
from skillwire.server.buses.redis import RedisEventBus
from skillwire.server.buses.schemes import open_bus
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores import MemoryTaskStore

REDIS = "redis://127.0.0.1:6379/0"
WAIT = 10.0
CALL = CallContext()
T = TypeVar("T")


async def within(awaitable: Awaitable[T], wait: float = WAIT) -> T:
    return await asyncio.wait_for(awaitable, wait)


def status(task_id: str, state: TaskState, text: str = "") -> StreamResponse:
    message = Message(message_id=uuid.uuid4().hex, role=Role.AGENT, parts=[Part(text=text)]) if text else None
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task_id, context_id="ctx", status=TaskStatus(state=state, message=message)
        )
    )


def texts(items: list[tuple[int, StreamResponse]]) -> list[tuple[int, str]]:
    out = []
    for version, event in items:
        update = event.status_update
        assert update is not None and update.status.message is not None
        out.append((version, update.status.message.parts[0].text))
    return out


async def take(sub: Any, count: int) -> list[tuple[int, StreamResponse]]:
    async def run() -> list[tuple[int, StreamResponse]]:
        got = []
        while len(got) < count:
            item = await sub.next()
            assert item is not None, f"the subscription ended after {len(got)} of {count} events"
            got.append(item)
        return got

    return await within(run())


@pytest.fixture
async def redis_client() -> AsyncIterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS)
    try:
        await within(client.ping(), 2.0)
    except (OSError, redis.RedisError, TimeoutError) as exc:
        await client.aclose()
        skip_without_service("Redis", f"none answers at 127.0.0.1:6379: {exc}")
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(redis_client: redis.Redis) -> AsyncIterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    name = f"skillwire-test:{uuid.uuid4().hex}"
    yield name
    keys = [key async for key in redis_client.scan_iter(match=f"{name}:*")]
    if keys:
        await redis_client.delete(*keys)


@pytest.fixture
async def make_bus(prefix: str) -> AsyncIterator[Callable[..., RedisEventBus]]:
    """``make_bus(**options)``: a bus on this test's prefix (one per simulated process), closed afterwards."""
    made: list[RedisEventBus] = []

    def make(url: str = REDIS, **options: Any) -> RedisEventBus:
        bus = RedisEventBus(url, prefix=prefix, **options)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        await within(bus.aclose())


class Proxy:
    """A TCP proxy in front of Redis that can be closed (an outage: connections cut, port refused) and
    reopened on the same port, or swallow what its clients send (``passing = False``: Redis then never
    answers them, as when packets are lost)."""

    def __init__(self, port: int = 6379) -> None:
        self.target = port
        self.port = 0
        self.server: asyncio.Server | None = None
        self.pipes: set[asyncio.StreamWriter] = set()
        self.passing = True

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.pipes):
            writer.transport.abort()
        self.pipes.clear()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self.pipes |= {writer, up_writer}
        await asyncio.gather(self._pump(reader, up_writer, sent=True), self._pump(up_reader, writer))

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sent: bool = False
    ) -> None:
        try:
            while data := await reader.read(65536):
                if sent and not self.passing:
                    continue
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
            self.pipes.discard(writer)


# -- the bus itself -----------------------------------------------------------------------------------------


async def test_events_of_a_task_arrive_in_publishing_order(make_bus: Callable[..., RedisEventBus]) -> None:
    bus = make_bus()
    sub = bus.subscribe(("t", "task-1"))
    for version in range(1, 301):
        bus.publish(("t", "task-1"), version, status("task-1", TaskState.WORKING, f"e{version}"))
    got = await take(sub, 300)
    assert texts(got) == [(v, f"e{v}") for v in range(1, 301)]
    assert bus.subscriber_count(("t", "task-1")) == 1
    sub.close()
    assert bus.subscriber_count(("t", "task-1")) == 0


async def test_late_subscriber_gets_the_stream_replayed(make_bus: Callable[..., RedisEventBus]) -> None:
    publisher, late = make_bus(), make_bus()
    key = ("t", "task-1")
    for version in range(1, 6):
        publisher.publish(key, version, status("task-1", TaskState.WORKING, f"e{version}"))
    await within(publisher.flush())
    sub = late.subscribe(key)  # after the events: a first subscription reads the stream from its start
    publisher.publish(key, 6, status("task-1", TaskState.COMPLETED, "done"))
    assert [v for v, _ in await take(sub, 6)] == [1, 2, 3, 4, 5, 6]
    # a second subscription of a stream the reader follows joins at the reader's position
    again = late.subscribe(key)
    publisher.publish(key, 7, status("task-1", TaskState.COMPLETED, "more"))
    assert texts(await take(again, 1)) == [(7, "more")]


async def test_two_processes_publish_and_subscribe_across(make_bus: Callable[..., RedisEventBus]) -> None:
    a, b = make_bus(), make_bus()
    key = ("tenant", "shared")
    on_a, on_b = a.subscribe(key), b.subscribe(key)
    a.publish(key, 1, status("shared", TaskState.WORKING, "from a"))
    await within(a.flush())
    b.publish(key, 2, status("shared", TaskState.COMPLETED, "from b"))
    expected = [(1, "from a"), (2, "from b")]
    assert texts(await take(on_a, 2)) == expected
    assert texts(await take(on_b, 2)) == expected
    assert a.shared and b.shared


async def test_tenants_and_ids_with_separators_and_nul_do_not_collide(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    bus = make_bus()
    one, two = ("a:b", "c"), ("a", "b:c")
    nul = ("x\x00", "%3A{slot}")
    assert len({bus.stream_name(k) for k in (one, two, nul)}) == 3
    subs = {k: bus.subscribe(k) for k in (one, two, nul)}
    for k in (one, two, nul):
        bus.publish(k, 1, status(k[1], TaskState.WORKING, repr(k)))
    for k, sub in subs.items():
        assert texts(await take(sub, 1)) == [(1, repr(k))]


async def test_subscriber_that_falls_behind_sheds_and_is_told_so(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    bus = make_bus(max_events=5)
    key = ("t", "busy")
    slow = bus.subscribe(key)
    watcher = make_bus().subscribe(key)
    for generation in range(1, 21):
        bus.publish(key, generation, status("busy", TaskState.WORKING, f"e{generation}"))
    await take(watcher, 20)  # every event reached Redis and came back

    async def drain() -> tuple[list[int], Behind]:
        got = []
        while not isinstance(item := await slow.next(), Behind):  # what was read before the bound passed
            assert item is not None
            got.append(item[0])
        return got, item

    got, behind = await within(drain())
    assert behind.after == (got[-1] if got else 0)  # the rest: from the store's log, up to the queue's
    slow.skip_through(15)
    assert [g for g, _ in await take(slow, 5)] == [16, 17, 18, 19, 20]
    assert bus.subscriber_count(key) == 1


async def test_streams_are_bounded_and_expire_after_the_task_ends(
    make_bus: Callable[..., RedisEventBus], redis_client: redis.Redis
) -> None:
    bus = make_bus(maxlen=100, ttl_after_end=30, idle_ttl=3600)
    running, ended = ("t", "running"), ("t", "ended")
    for version in range(1, 2001):
        bus.publish(running, version, status("running", TaskState.WORKING, "x"))
    bus.publish(ended, 1, status("ended", TaskState.WORKING, "working"))
    bus.publish(ended, 2, status("ended", TaskState.COMPLETED, "done"))
    await within(bus.flush())
    assert bus.dropped == 0
    length = await redis_client.xlen(bus.stream_name(running))
    assert 100 <= length < 400, length  # MAXLEN ~: at least maxlen, trimmed by whole nodes
    idle = await redis_client.pttl(bus.stream_name(running))
    assert 30_000 < idle <= 3_600_000
    after_end = await redis_client.pttl(bus.stream_name(ended))
    assert 0 < after_end <= 30_000
    entries = await redis_client.xrange(bus.stream_name(ended))
    assert [fields[b"version"] for _, fields in entries] == [b"1", b"2"]
    assert (
        msgspec.json.decode(entries[1][1][b"event"])["statusUpdate"]["status"]["state"]
        == "TASK_STATE_COMPLETED"
    )


async def test_a_batch_of_several_tasks_lands_in_order_in_the_format_every_reader_reads(
    make_bus: Callable[..., RedisEventBus], redis_client: redis.Redis
) -> None:
    # The writer sends a batch as one script call per task's stream: each event is still an entry of its
    # own with exactly the fields ``version`` and ``event`` (what a process of an earlier release reads),
    # in publishing order, and the expiry is the one the stream's last event in the batch sets.
    bus = make_bus(ttl_after_end=30, idle_ttl=None)
    keys = [("t", f"task-{i}") for i in range(3)]
    for version in range(1, 41):
        for i, key in enumerate(keys):
            state = TaskState.COMPLETED if i == 0 and version == 40 else TaskState.WORKING
            bus.publish(key, version, status(key[1], state, f"{key[1]} e{version}"))
    await within(bus.flush())
    assert bus.dropped == 0
    for i, key in enumerate(keys):
        entries = await redis_client.xrange(bus.stream_name(key))
        assert [set(fields) for _, fields in entries] == [{b"version", b"event"}] * 40
        assert [int(fields[b"version"]) for _, fields in entries] == list(range(1, 41))
        decoded = [msgspec.json.decode(fields[b"event"]) for _, fields in entries]
        assert [e["statusUpdate"]["status"]["message"]["parts"][0]["text"] for e in decoded] == [
            f"{key[1]} e{v}" for v in range(1, 41)
        ]
        expiry = await redis_client.pttl(bus.stream_name(key))
        assert (0 < expiry <= 30_000) if i == 0 else expiry == -1, (key, expiry)  # idle_ttl None: kept
    later = make_bus()  # another process reads them back as events
    sub = later.subscribe(keys[1])
    assert texts(await take(sub, 40)) == [(v, f"task-1 e{v}") for v in range(1, 41)]


async def test_an_event_whose_json_holds_a_newline_lands_whole_in_its_place(
    make_bus: Callable[..., RedisEventBus], redis_client: redis.Redis
) -> None:
    # The writer sends a stream's events as one newline-joined text, which compact JSON never breaks; JSON
    # that holds a newline (indented) makes that stream's events go one a call, and each lands byte for byte,
    # in order, with its version's digits (a large one too).
    bus = make_bus()
    key = ("t", "task-nl")
    events = [status("task-nl", TaskState.WORKING, f"e{n}") for n in range(3)]
    pretty = msgspec.json.format(msgspec.json.encode(events[1]), indent=2)
    assert b"\n" in pretty
    bus.publish(key, 1, events[0])
    bus.publish(key, 2, events[1], pretty)
    bus.publish(key, 10**12, events[2])
    bus.publish(("t", "task-plain"), 7, events[0])  # another stream of the same batch: one call
    await within(bus.flush())
    assert bus.dropped == 0
    entries = await redis_client.xrange(bus.stream_name(key))
    assert [(f[b"version"], f[b"event"]) for _, f in entries] == [
        (b"1", msgspec.json.encode(events[0])),
        (b"2", pretty),
        (b"1000000000000", msgspec.json.encode(events[2])),
    ]
    sub = make_bus().subscribe(key)  # and another process reads them back as the events they were
    assert texts(await take(sub, 3)) == [(1, "e0"), (2, "e1"), (10**12, "e2")]


@pytest.mark.parametrize("protocol", [2, 3])
async def test_the_reader_takes_entries_as_redis_sends_them_on_either_protocol(
    make_bus: Callable[..., RedisEventBus], redis_client: redis.Redis, protocol: int
) -> None:
    # The reader takes XREAD's reply as Redis sent it (a list of pairs on RESP2, a map on RESP3), fields by
    # position when they are this bus's two; an entry with its fields in another order and one more is read
    # by name, and one that is not an event is skipped.
    bus = make_bus(f"{REDIS}?protocol={protocol}")
    key = ("t", f"task-raw-{protocol}")
    sub = bus.subscribe(key)
    bus.publish(key, 1, status(key[1], TaskState.WORKING, "one"))
    await within(bus.flush())
    name = bus.stream_name(key)
    other = msgspec.json.encode(status(key[1], TaskState.WORKING, "two"))
    await redis_client.xadd(name, {b"event": other, b"origin": b"elsewhere", b"version": b"2"})
    await redis_client.xadd(name, {b"version": b"3"})
    await redis_client.xadd(name, {b"version": b"3", b"event": b"not json"})
    bus.publish(key, 4, status(key[1], TaskState.COMPLETED, "four"))
    assert texts(await take(sub, 3)) == [(1, "one"), (2, "two"), (4, "four")]


async def test_a_subscription_for_the_end_is_handed_the_terminal_event_alone(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    # What a run watching for an end it did not make subscribes to: the other events are never queued for it.
    bus = make_bus()
    key = ("t", "task-end")
    ends, every = bus.subscribe(key, ends_only=True), bus.subscribe(key)
    for version in range(1, 6):
        bus.publish(key, version, status("task-end", TaskState.WORKING, f"e{version}"))
    bus.publish(key, 6, status("task-end", TaskState.CANCELED, "canceled"))
    assert texts(await take(every, 6))[-1] == (6, "canceled")
    assert texts(await take(ends, 1)) == [(6, "canceled")]
    assert ends.next_nowait() is None
    bus.close()
    assert await within(ends.next()) is None


async def test_fail_close_and_aclose(make_bus: Callable[..., RedisEventBus]) -> None:
    bus, other = make_bus(), make_bus()
    failed, kept = ("t", "failed"), ("t", "kept")
    sub_failed, sub_kept = bus.subscribe(failed), bus.subscribe(kept)
    bus.fail(failed, StreamDroppedError("could not store"))
    with pytest.raises(StreamDroppedError, match="could not store"):
        await within(sub_failed.next())
    bus.publish(kept, 1, status("kept", TaskState.WORKING, "still here"))
    assert texts(await take(sub_kept, 1)) == [(1, "still here")]
    bus.close()
    assert await within(sub_kept.next()) is None
    # aclose sends what is queued before it closes
    watcher = other.subscribe(kept)
    for version in range(2, 52):
        bus.publish(kept, version, status("kept", TaskState.WORKING, f"e{version}"))
    await within(bus.aclose())
    assert [v for v, _ in await take(watcher, 51)] == list(range(1, 52))
    # a closed bus: subscriptions end at once, publishing drops (and counts)
    assert await within(bus.subscribe(kept).next()) is None
    bus.publish(kept, 99, status("kept", TaskState.WORKING, "late"))
    assert bus.dropped == 1


async def test_many_tasks_share_one_reader(make_bus: Callable[..., RedisEventBus]) -> None:
    publisher, bus = make_bus(), make_bus()
    keys = [("t", f"task-{i}") for i in range(200)]
    subs = [bus.subscribe(k) for k in keys]
    for version in range(1, 4):
        for key in keys:
            publisher.publish(key, version, status(key[1], TaskState.WORKING, f"{key[1]}/{version}"))
    for key, sub in zip(keys, subs, strict=True):
        assert texts(await take(sub, 3)) == [(v, f"{key[1]}/{v}") for v in range(1, 4)]
    helpers = [t for t in asyncio.all_tasks() if t.get_name() == "skillwire-bus-reader"]
    assert len(helpers) == 1  # one reader for the 200 tasks of the subscribing bus (the publisher has none)


async def test_a_stream_added_while_the_reader_blocks_is_read_at_once(
    make_bus: Callable[..., RedisEventBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bus_redis, "BLOCK_MS", 60_000)  # so only the wake-up can end the XREAD in time
    publisher, bus = make_bus(), make_bus()
    first = bus.subscribe(("t", "first"))
    publisher.publish(("t", "first"), 1, status("first", TaskState.WORKING, "one"))
    await take(first, 1)  # the reader is now blocked on the first stream alone
    for i in range(5):
        key = ("t", f"added-{i}")
        sub = bus.subscribe(key)
        publisher.publish(key, 1, status(key[1], TaskState.WORKING, "hello"))
        assert texts(await take_fast(sub)) == [(1, "hello")]


async def take_fast(sub: Any) -> list[tuple[int, StreamResponse]]:
    """One event, well before an XREAD of BLOCK_MS would have ended by itself."""
    item = await asyncio.wait_for(sub.next(), 5.0)
    assert item is not None
    return [item]


async def test_outage_ends_subscribers_and_the_bus_recovers(make_bus: Callable[..., RedisEventBus]) -> None:
    proxy = Proxy()
    await proxy.open()
    bus = make_bus(proxy.url)
    key = ("t", "outage")
    sub = bus.subscribe(key)
    bus.publish(key, 1, status("outage", TaskState.WORKING, "before"))
    assert texts(await take(sub, 1)) == [(1, "before")]
    # the writer has its reply too: else cutting the proxy can lose the reply of a write Redis did take,
    # and the writer rightly counts that event as dropped as well
    await within(bus.flush())
    await proxy.close()
    with pytest.raises(StreamDroppedError, match="event bus is unavailable") as caught:
        await within(sub.next())
    assert "127.0.0.1" not in str(caught.value)  # the client is not told where Redis is
    # publishing neither raises nor waits; the events are counted as dropped once the writer fails
    started = time.perf_counter()
    for version in range(2, 12):
        bus.publish(key, version, status("outage", TaskState.WORKING, "during"))
    assert time.perf_counter() - started < 0.1
    await within(bus.flush())
    assert bus.dropped == 10
    # a subscription while Redis is down ends at once, with the same error
    with pytest.raises(StreamDroppedError, match="event bus is unavailable"):
        await within(bus.subscribe(("t", "during")).next(), 1.0)
    await proxy.open()
    await within(bus.wait_reachable())
    after = bus.subscribe(("t", "after"))
    bus.publish(("t", "after"), 1, status("after", TaskState.COMPLETED, "back"))
    assert texts(await take(after, 1)) == [(1, "back")]
    await proxy.close()


async def test_a_redis_that_stops_answering_costs_the_writer_io_timeout_and_no_more(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    """Each pipeline is bounded as a whole (the writer's client has no per-reply timeouts): its events are
    counted as dropped once ``io_timeout`` is up, and the next pipeline goes out on a fresh connection."""
    proxy = Proxy()
    await proxy.open()
    writer = make_bus(proxy.url)  # this process only publishes: its reader never starts
    writer.io_timeout = 0.5
    other = make_bus()  # another process, reading Redis directly
    key = ("t", "stops-answering")
    sub = other.subscribe(key)
    writer.publish(key, 1, status("stops-answering", TaskState.WORKING, "before"))
    assert texts(await take(sub, 1)) == [(1, "before")]
    await within(writer.flush())
    proxy.passing = False
    writer.publish(key, 2, status("stops-answering", TaskState.WORKING, "unanswered"))
    await within(writer.flush(), 5.0)
    assert writer.dropped == 1
    proxy.passing = True
    writer.publish(key, 3, status("stops-answering", TaskState.WORKING, "after"))
    assert texts(await take(sub, 1)) == [(3, "after")]
    await within(writer.flush())
    assert writer.dropped == 1
    await proxy.close()


async def test_a_bus_whose_redis_never_answers_does_not_start(make_bus: Callable[..., RedisEventBus]) -> None:
    proxy = Proxy()
    await proxy.open()
    proxy.passing = False
    bus = make_bus(proxy.url)
    bus.io_timeout = 0.3
    with pytest.raises(StoreUnavailableError, match=r"cannot be reached: no answer within 0\.3 s"):
        await within(bus.start(), 5.0)
    await proxy.close()


async def test_first_subscription_with_redis_down_ends_at_once(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    proxy = Proxy()
    await proxy.open()
    url = proxy.url
    await proxy.close()
    bus = make_bus(url)
    with pytest.raises(StreamDroppedError, match="event bus is unavailable"):
        await within(bus.subscribe(("t", "x")).next(), 5.0)


# -- open_bus -----------------------------------------------------------------------------------------------


async def test_open_bus_by_url() -> None:
    assert isinstance(open_bus("memory://"), InProcessEventBus)
    bus = open_bus("redis://127.0.0.1:6379/0")
    assert isinstance(bus, RedisEventBus)
    await bus.aclose()
    from skillwire.server.buses.postgres import PostgresEventBus

    pg = open_bus("postgresql://localhost/test")
    assert isinstance(pg, PostgresEventBus) and pg.shared
    await pg.aclose()
    with pytest.raises(SkillwireError, match="Unknown event bus scheme nats://") as caught:
        open_bus("nats://user:secret@host")
    assert "secret" not in str(caught.value)


# -- two task runtimes sharing one Redis bus (and one store) --------------------------------------------------


class Scripted(Executor):
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.task is not None:  # the second turn
            await events.working()
            await events.artifact(f"got {context.text}", name="answer")
            return
        if context.text == "ask":
            await events.working()
            await events.input_required("What is your name?")
            return
        await events.working()
        await events.artifact("part one", name="one")
        self.started.set()
        await self.release.wait()
        await events.artifact("part two", name="two")


def send(text: str, task_id: str | None = None) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.USER, parts=[Part(text=text)])
    if task_id is not None:
        message = msgspec.structs.replace(message, task_id=task_id)
    return SendMessageRequest(message=message)


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    async def run() -> list[StreamResponse]:
        return [e async for e in stream]

    return await within(run())


def shape(events: list[StreamResponse]) -> list[str]:
    out = []
    for e in events:
        if e.task is not None:
            out.append("task")
        elif e.status_update is not None:
            out.append(e.status_update.status.state.name)
        elif e.artifact_update is not None:
            out.append("artifact:" + (e.artifact_update.artifact.parts[0].text or ""))
    return out


@pytest.fixture
async def runtimes(
    make_bus: Callable[..., RedisEventBus],
) -> AsyncIterator[tuple[TaskRuntime, TaskRuntime, Scripted]]:
    store = MemoryTaskStore()  # one store object: what a shared database would be
    executor = Scripted()
    a, b = TaskRuntime(executor, store, make_bus()), TaskRuntime(executor, store, make_bus())
    await a.start()
    await b.start()
    yield a, b, executor
    executor.release.set()
    await a.stop(grace=1)
    await b.stop(grace=1)


async def test_a_task_streamed_on_one_runtime_is_followed_on_another(
    runtimes: tuple[TaskRuntime, TaskRuntime, Scripted],
) -> None:
    a, b, executor = runtimes
    main = await a.on_send_streaming_message(send("work"), CALL)
    first = await within(anext(main))
    assert first.task is not None
    await within(executor.started.wait())
    follower = await b.on_subscribe_to_task(SubscribeToTaskRequest(id=first.task.id), CALL)
    snapshot = await within(anext(follower))
    assert snapshot.task is not None and snapshot.task.id == first.task.id
    executor.release.set()
    on_a, on_b = await collect(main), await collect(follower)
    assert shape(on_a) == ["WORKING", "artifact:part one", "artifact:part two", "COMPLETED"]
    # b follows from its snapshot: what the snapshot holds is not repeated, nothing after it is missing
    seen = len(snapshot.task.artifacts) + (snapshot.task.status.state is TaskState.WORKING)
    assert [msgspec.json.encode(e) for e in on_b] == [msgspec.json.encode(e) for e in on_a[seen:]]
    assert shape(on_b)[-1] == "COMPLETED"


async def test_continued_task_streams_only_its_new_turn(
    runtimes: tuple[TaskRuntime, TaskRuntime, Scripted], redis_client: redis.Redis
) -> None:
    a, b, _ = runtimes
    # streamed, so that the first turn is published (a task made and settled in one commit is not: no one
    # else could follow it yet)
    asked = (await collect(await a.on_send_streaming_message(send("ask"), CALL)))[-1].status_update
    assert asked is not None and asked.status.state is TaskState.INPUT_REQUIRED
    bus = a.bus
    assert isinstance(bus, RedisEventBus)
    await within(bus.flush())
    # b's first subscription to this task replays its stream, which holds the first turn's events
    first_turn = await redis_client.xrange(bus.stream_name(("", asked.task_id)))
    assert len(first_turn) >= 2
    events = await collect(await b.on_send_streaming_message(send("Ada", task_id=asked.task_id), CALL))
    # the stream opens with the task as the answer's turn stored it (WORKING), then what follows
    assert shape(events) == ["task", "artifact:got Ada", "COMPLETED"]
    assert events[0].task is not None and events[0].task.status.state is TaskState.WORKING


def test_serve_takes_the_bus_from_its_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import EXAMPLES
    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse

    echo = str(EXAMPLES / "echo")
    _, app = application(_parse(["serve", echo, "--store", "memory://", "--bus", REDIS]))
    assert app.runtime is not None and isinstance(app.runtime.bus, RedisEventBus)
    _, default = application(_parse(["serve", echo, "--store", "memory://"]))
    assert default.runtime is not None and isinstance(default.runtime.bus, InProcessEventBus)
    monkeypatch.setenv("SKILLWIRE_BUS", "nats://somewhere")
    with pytest.raises(SkillwireError, match="Unknown event bus scheme nats://"):
        application(_parse(["serve", echo, "--store", "memory://"]))


async def test_a_late_subscriber_to_a_long_task_is_not_dropped_by_its_own_replay(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    # The stream holds 2 MiB of artifacts; the follower's queue takes 256 KiB. What the stream replays is
    # in the snapshot the follower reads, so it must neither fill the queue nor hide what comes after.
    store, executor = MemoryTaskStore(), LongTask(count=64, size=32 * 1024)
    a = TaskRuntime(executor, store, make_bus())
    b = TaskRuntime(executor, store, make_bus(max_bytes=256 * 1024))
    await a.start()
    await b.start()
    try:
        main = await a.on_send_streaming_message(send("work"), CALL)
        first = await within(anext(main))
        assert first.task is not None
        await within(executor.started.wait())
        bus = a.bus
        assert isinstance(bus, RedisEventBus)
        await within(bus.flush())
        follower = await b.on_subscribe_to_task(SubscribeToTaskRequest(id=first.task.id), CALL)
        snapshot = await within(anext(follower))
        assert snapshot.task is not None and len(snapshot.task.artifacts) == 64
        executor.release.set()
        assert shape(await collect(follower)) == ["artifact:tail", "COMPLETED"]
        assert shape(await collect(main))[-2:] == ["artifact:tail", "COMPLETED"]
    finally:
        executor.release.set()
        await a.stop(grace=1)
        await b.stop(grace=1)


async def test_publishing_says_when_events_wait_for_redis_until_the_writer_sends_them(
    make_bus: Callable[..., RedisEventBus],
) -> None:
    """A quarter of ``max_pending`` waiting to be written is a backlog: the run then hands the loop on sooner,
    to the writer among others (see ``EventBus.publish``)."""
    bus = make_bus(max_pending=8)
    key = ("t", "task-1")
    sub = bus.subscribe(key)
    answers = [bus.publish(key, v, status("task-1", TaskState.WORKING, f"e{v}")) for v in range(1, 4)]
    assert answers == [False, True, True]  # nothing was written meanwhile: the writer has not had a turn
    await within(bus.flush())
    assert bus.publish(key, 4, status("task-1", TaskState.WORKING, "e4")) is False
    assert texts(await take(sub, 4)) == [(v, f"e{v}") for v in range(1, 5)]


# -- what is published: what another process could follow --------------------------------------------------


async def _questions(context: RequestContext, events: TaskEvents) -> None:
    """Asks for a city when the message says "ask"; answers a second turn; else makes an artifact."""
    if context.task is not None:
        await events.complete(f"answered: {context.text}")
    elif context.text == "ask":
        await events.input_required("Which city?")
    else:
        await events.artifact("done", name="result")


def test_a_task_made_and_settled_in_one_commit_is_published_only_when_a_key_named_it(tmp_path: Any) -> None:
    """Before a task's first commit no other process can follow it (its id is in no store and no answer
    yet), except a retry of a request whose idempotency key was claimed first: that one waits on the bus.
    A plain test: the server runs on its own loop, in a thread, and Redis is read with the blocking client."""
    import redis as blocking

    from conftest import A2A_V1, rpc, start_server, user_message
    from skillwire import Agent

    client = blocking.Redis.from_url(REDIS, socket_timeout=WAIT)
    try:
        client.ping()
    except (OSError, blocking.RedisError) as exc:
        client.close()
        skip_without_service("Redis", f"none answers at 127.0.0.1:6379: {exc}")
    prefix = f"skillwire-test:{uuid.uuid4().hex}"
    bus = RedisEventBus(REDIS, prefix=prefix)  # the server's: it closes it
    app = Agent("questions", "Asks, then answers.", executor=_questions).asgi(
        store=f"sqlite:///{tmp_path / 'tasks.db'}", bus=bus
    )
    server = start_server(app)

    def send(message: dict[str, Any], **headers: str) -> dict[str, Any]:
        body = rpc("SendMessage", {"message": message})
        answer = httpx.post(server.rpc_url, json=body, headers={**A2A_V1, **headers}, timeout=WAIT)
        task: dict[str, Any] = answer.json()["result"]["task"]
        return task

    def published(task: dict[str, Any]) -> list[str]:
        entries = client.xrange(bus.stream_name(("", task["id"])))
        return [json.loads(fields[b"event"]).popitem()[0] for _, fields in entries]

    try:
        try:
            plain = send(user_message("hello"))
            keyed = send(user_message("hello"), **{"Idempotency-Key": uuid.uuid4().hex})
            asked = send(user_message("ask"))
            answered = send(user_message("Paris", taskId=asked["id"], contextId=asked["contextId"]))
        finally:
            server.stop()  # the bus is flushed: every event published has reached Redis
        assert plain["status"]["state"] == keyed["status"]["state"] == "TASK_STATE_COMPLETED"
        assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
        assert published(plain) == []
        assert published(keyed) == ["task", "artifactUpdate", "statusUpdate"]
        # the question was not published; the answer's turn, of a stored task, was
        assert published(asked) == ["statusUpdate", "statusUpdate"]
    finally:
        keys = list(client.scan_iter(match=f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()
