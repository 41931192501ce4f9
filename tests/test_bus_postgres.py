"""The PostgreSQL event bus against a real PostgreSQL: order, replay, processes, bounds, trimming, outages.

Two bus instances stand for two server processes; an outage is a TCP proxy in front of PostgreSQL that is
closed and opened again. Each test gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import msgspec
import pytest

from conftest import LongTask, skip_without_service
from skillwire import Executor, Message, RequestContext, TaskEvents, TaskState
from skillwire.errors import InternalError, StoreError, StreamDroppedError
from skillwire.protocol.models import (
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskStatus,
    TaskStatusUpdateEvent,
    agent_text,
)
from skillwire.server.buses.base import Behind
from skillwire.server.buses.postgres import PostgresEventBus, parse_url, stream_hash
from skillwire.server.context import CallContext
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores.memory import MemoryTaskStore
from skillwire.types import Part, Role

WAIT = 10.0


def _candidates() -> list[str]:
    if os.environ.get("SKILLWIRE_TEST_POSTGRES"):
        return [os.environ["SKILLWIRE_TEST_POSTGRES"]]
    return [f"postgresql://{user}@127.0.0.1:5432/test" for user in ("postgres", getpass.getuser())]


async def _reachable_dsn() -> str:
    errors = []
    for dsn in _candidates():
        try:
            conn = await asyncpg.connect(dsn, timeout=3)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            errors.append(f"{dsn}: {exc}")
            continue
        await conn.close()
        return dsn
    skip_without_service("PostgreSQL", "; ".join(errors))
    raise AssertionError("unreachable")


with_schema = Callable[..., PostgresEventBus]


@pytest.fixture
async def pg() -> AsyncIterator[dict[str, Any]]:
    """A fresh schema: {"dsn", "schema", "url", "conn", "table"}, dropped afterwards."""
    dsn = await _reachable_dsn()
    schema = f"skillwire_bus_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    try:
        yield {
            "dsn": dsn,
            "schema": schema,
            "url": f"{dsn}?schema={schema}",
            "conn": conn,
            "table": f'"{schema}".skillwire_events',
        }
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


@pytest.fixture
async def make_bus(pg: dict[str, Any]) -> AsyncIterator[with_schema]:
    """Buses on the test's schema (each one a process), closed afterwards."""
    buses: list[PostgresEventBus] = []

    def make(url: str | None = None, **options: Any) -> PostgresEventBus:
        bus = PostgresEventBus(url or pg["url"], **options)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        await bus.aclose()


def status(task_id: str, n: int, state: TaskState = TaskState.WORKING) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task_id,
            context_id="ctx",
            status=TaskStatus(state=state, message=agent_text(f"step {n}", context_id="ctx")),
        )
    )


def text_of(event: StreamResponse) -> str:
    assert event.status_update is not None and event.status_update.status.message is not None
    text = event.status_update.status.message.parts[0].text
    assert isinstance(text, str)
    return text


async def take(sub: Any, count: int) -> list[tuple[int, StreamResponse]]:
    async with asyncio.timeout(WAIT):
        items = []
        for _ in range(count):
            item = await sub.next()
            assert item is not None
            items.append(item)
        return items


async def until(condition: Callable[[], Awaitable[bool] | bool], wait: float = WAIT) -> None:
    """Wait until ``condition`` holds, checking every few milliseconds, for at most ``wait`` seconds."""
    async with asyncio.timeout(wait):
        while True:
            outcome = condition()
            if not isinstance(outcome, bool):
                outcome = await outcome
            if outcome:
                return
            await asyncio.sleep(0.01)


async def rows(pg: dict[str, Any], key: tuple[str, str] | None = None) -> int:
    if key is None:
        return int(await pg["conn"].fetchval(f"SELECT count(*) FROM {pg['table']}"))
    return int(
        await pg["conn"].fetchval(f"SELECT count(*) FROM {pg['table']} WHERE stream = $1", stream_hash(key))
    )


# -- order, replay, processes ----------------------------------------------------------------------------


async def test_events_of_a_task_arrive_in_order_and_tenants_with_nul_are_apart(make_bus: with_schema) -> None:
    bus = make_bus()
    await bus.start()
    plain, owned = ("t", "task-1"), ("t\x00owner", "task-1")
    sub_plain, sub_owned = bus.subscribe(plain), bus.subscribe(owned)
    assert bus.subscriber_count(plain) == 1 and bus.shared is True
    for n in range(1, 51):
        bus.publish(plain, n, status("task-1", n))
    bus.publish(owned, 1, status("task-1", 99))
    got = await take(sub_plain, 50)
    assert [v for v, _ in got] == list(range(1, 51))
    assert [text_of(e) for _, e in got] == [f"step {n}" for n in range(1, 51)]
    owned_got = await take(sub_owned, 1)
    assert owned_got[0][0] == 1 and text_of(owned_got[0][1]) == "step 99"
    sub_plain.close()
    assert bus.subscriber_count(plain) == 0


async def test_a_subscription_for_the_end_is_handed_the_terminal_event_alone(make_bus: with_schema) -> None:
    bus = make_bus()
    await bus.start()
    key = ("t", "task-end")
    ends, every = bus.subscribe(key, ends_only=True), bus.subscribe(key)
    for n in range(1, 6):
        bus.publish(key, n, status("task-end", n))
    bus.publish(key, 6, status("task-end", 6, TaskState.CANCELED))
    assert [v for v, _ in await take(every, 6)] == list(range(1, 7))
    got = await take(ends, 1)
    assert got[0][0] == 6 and text_of(got[0][1]) == "step 6"
    assert ends.next_nowait() is None


async def test_a_late_subscriber_gets_what_was_published_before(
    make_bus: with_schema, pg: dict[str, Any]
) -> None:
    bus = make_bus()
    key = ("", "late")
    for n in range(1, 6):
        bus.publish(key, n, status("late", n))
    await until(lambda: bus.written_events == 5)
    sub = bus.subscribe(key)
    replayed = await take(sub, 5)
    assert [v for v, _ in replayed] == [1, 2, 3, 4, 5]
    second = bus.subscribe(key)  # joins at the current position: only what comes next
    bus.publish(key, 6, status("late", 6))
    assert [v for v, _ in await take(sub, 1)] == [6]
    assert [v for v, _ in await take(second, 1)] == [6]
    assert await rows(pg, key) == 6


async def test_two_buses_are_two_processes_seeing_each_others_events(make_bus: with_schema) -> None:
    a, b = make_bus(), make_bus()
    await asyncio.gather(a.start(), b.start())
    key = ("tenant", "shared-task")
    on_a, on_b = a.subscribe(key), b.subscribe(key)
    for n in range(1, 21):
        a.publish(key, n, status("shared-task", n))
    await until(lambda: a.written_events == 20)  # two processes publish in the order their commits reach it
    b.publish(key, 21, status("shared-task", 21, TaskState.COMPLETED))  # e.g. a cancel served by b
    for sub in (on_a, on_b):
        got = await take(sub, 21)
        assert [v for v, _ in got] == list(range(1, 22))
        assert got[-1][1].status_update is not None
        assert got[-1][1].status_update.status.state is TaskState.COMPLETED


async def test_many_tasks_each_in_order(make_bus: with_schema) -> None:
    a, b = make_bus(), make_bus()
    await asyncio.gather(a.start(), b.start())
    keys = [("", f"task-{i}") for i in range(150)]
    subs = [b.subscribe(key) for key in keys]
    for n in range(1, 6):
        for key in keys:
            a.publish(key, n, status(key[1], n))
    results = await asyncio.gather(*(take(sub, 5) for sub in subs))
    for key, got in zip(keys, results, strict=True):
        assert [v for v, _ in got] == [1, 2, 3, 4, 5]
        assert all(e.status_update is not None and e.status_update.task_id == key[1] for _, e in got)


async def test_a_big_event_is_carried_whatever_notifys_payload_limit(make_bus: with_schema) -> None:
    bus = make_bus()
    key = ("", "big")
    sub = bus.subscribe(key)
    big = StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id="big",
            context_id="ctx",
            status=TaskStatus(state=TaskState.WORKING, message=agent_text("x" * 100_000, context_id="ctx")),
        )
    )
    bus.publish(key, 1, big)
    ((version, event),) = await take(sub, 1)
    assert version == 1 and msgspec.json.encode(event) == msgspec.json.encode(big)


async def replayed_with_a_probe(bus: PostgresEventBus, key: tuple[str, str], count: int) -> Any:
    """A subscription of ``key`` whose floor is still open, once the replay of ``count`` rows and event
    ``count + 1`` reached it (a probe subscribed with it gets the same rows, and sees ``count + 1``)."""
    sub = bus.subscribe(key, after=None)
    probe = bus.subscribe(key, after=count)
    bus.publish(key, count + 1, status(key[1], count + 1))
    assert [v for v, _ in await take(probe, 1)] == [count + 1]
    probe.close()
    return sub


async def test_a_replay_of_what_the_snapshot_holds_takes_no_room(make_bus: with_schema) -> None:
    bus = make_bus(max_events=4)
    key = ("", "replay")
    for n in range(1, 11):
        bus.publish(key, n, status("replay", n))
    await until(lambda: bus.written_events == 10)
    known = bus.subscribe(key, after=8)  # the floor known up front: rows 1-8 are dropped as they come
    assert [v for v, _ in await take(known, 2)] == [9, 10]
    known.close()
    late = await replayed_with_a_probe(bus, key, 10)  # 11 events came while its floor was open
    late.skip_through(8)  # the snapshot it read holds version 8
    assert [v for v, _ in await take(late, 3)] == [9, 10, 11]
    bus.publish(key, 12, status("replay", 12))
    assert [v for v, _ in await take(late, 1)] == [12] and bus.subscriber_count(key) == 1


async def test_a_replay_past_the_bound_and_newer_than_the_snapshot_leaves_its_subscriber_behind(
    make_bus: with_schema,
) -> None:
    bus = make_bus(max_events=4)
    key = ("", "overflow")
    for n in range(1, 11):
        bus.publish(key, n, status("overflow", n))
    await until(lambda: bus.written_events == 10)
    late = await replayed_with_a_probe(bus, key, 10)  # kept 8-11 of 1-11 within the bound
    late.skip_through(5)  # 6 and 7 were shed, and the snapshot lacks them: read them from the store
    behind = await asyncio.wait_for(late.next(), WAIT)
    assert isinstance(behind, Behind) and behind.after == 5
    late.skip_through(7)
    assert [v for v, _ in await take(late, 4)] == [8, 9, 10, 11]
    assert bus.subscriber_count(key) == 1


# -- bounds, fail, close ----------------------------------------------------------------------------------


async def test_a_subscriber_that_falls_behind_sheds_and_is_told_so(make_bus: with_schema) -> None:
    bus = make_bus(max_events=5)
    key = ("", "fast")
    slow, reader = bus.subscribe(key), bus.subscribe(key)
    for n in range(1, 11):
        bus.publish(key, n, status("fast", n))
        assert [v for v, _ in await take(reader, 1)] == [n]  # the reader keeps up; slow reads nothing
    behind = await asyncio.wait_for(slow.next(), WAIT)
    assert isinstance(behind, Behind) and behind.after == 0  # 1-5 were shed: the store's log has them
    slow.skip_through(5)
    assert [v for v, _ in await take(slow, 5)] == [6, 7, 8, 9, 10]
    assert bus.subscriber_count(key) == 2


async def test_fail_ends_a_tasks_subscriptions_with_the_error(make_bus: with_schema) -> None:
    bus = make_bus()
    await bus.start()
    key, other = ("", "doomed"), ("", "fine")
    sub, kept = bus.subscribe(key), bus.subscribe(other)
    bus.fail(key, InternalError("the task could not be stored"))
    with pytest.raises(InternalError, match="could not be stored"):
        await asyncio.wait_for(sub.next(), WAIT)
    assert bus.subscriber_count(key) == 0 and bus.subscriber_count(other) == 1
    bus.publish(other, 1, status("fine", 1))
    assert [v for v, _ in await take(kept, 1)] == [1]


async def test_close_ends_subscriptions_and_aclose_flushes_what_is_queued(
    make_bus: with_schema, pg: dict[str, Any]
) -> None:
    bus = make_bus()
    await bus.start()
    key = ("", "closing")
    sub = bus.subscribe(key)
    bus.close()
    assert await asyncio.wait_for(sub.next(), WAIT) is None
    assert await asyncio.wait_for(bus.subscribe(key).next(), WAIT) is None  # after close: ends at once
    for n in range(1, 201):
        bus.publish(key, n, status("closing", n))  # the last runs' events, published after close()
    await asyncio.wait_for(bus.aclose(), WAIT)
    assert (bus.written_events, bus.dropped_events) == (200, 0)
    assert await rows(pg, key) == 200
    bus.publish(key, 201, status("closing", 201))  # after aclose: counted and dropped, no error
    assert bus.dropped_events == 1
    with pytest.raises(StoreError, match="closed"):
        await bus.start()


# -- trimming ---------------------------------------------------------------------------------------------


async def test_rows_of_an_ended_stream_are_trimmed_after_the_ttl(
    make_bus: with_schema, pg: dict[str, Any]
) -> None:
    bus = make_bus(ttl_after_end=0.0)
    ended, running, replied = ("", "ended"), ("", "running"), ("", "replied")
    for n in range(1, 4):
        bus.publish(ended, n, status("ended", n))
        bus.publish(running, n, status("running", n))
    bus.publish(ended, 4, status("ended", 4, TaskState.COMPLETED))
    bus.publish(replied, 0, StreamResponse(message=agent_text("a direct reply", context_id="ctx")))
    await until(lambda: bus.written_events == 8)
    await bus.trim()
    assert await rows(pg, ended) == 0 and await rows(pg, replied) == 0
    assert await rows(pg, running) == 3


async def test_the_writer_trims_by_itself(make_bus: with_schema, pg: dict[str, Any]) -> None:
    """A stream's rows outlive its end by ttl_after_end, then the bus deletes them with no one asking. The ttl
    leaves the test a second to see the row first: at 0.1 s the bus trimmed it before the test's own count
    once, on a fresh clone's full run (four workers on two cores)."""
    bus = make_bus(ttl_after_end=1.0)
    key = ("", "done")
    bus.publish(key, 1, status("done", 1, TaskState.CANCELED))
    await until(lambda: bus.written_events == 1)
    assert await rows(pg, key) == 1
    await until(lambda: _no_rows(pg, key))


async def _no_rows(pg: dict[str, Any], key: tuple[str, str]) -> bool:
    return await rows(pg, key) == 0


async def test_rows_older_than_max_age_are_trimmed_even_if_the_task_never_ends(
    make_bus: with_schema, pg: dict[str, Any]
) -> None:
    bus = make_bus(max_age=0.0, ttl_after_end=3600)
    key = ("", "forever")
    bus.publish(key, 1, status("forever", 1, TaskState.INPUT_REQUIRED))
    await until(lambda: bus.written_events == 1)
    assert await bus.trim() == 1 and await rows(pg, key) == 0


# -- outages ----------------------------------------------------------------------------------------------


class Proxy:
    """A TCP proxy in front of PostgreSQL: ``close()`` cuts every connection and refuses new ones."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.flowing = asyncio.Event()  # cleared: bytes are held, connections stay open (a silent network)
        self.flowing.set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        self.flowing.set()  # held pipes wake up and find their connections closed
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
        self._writers.discard(writer)


def _through(dsn: str, port: int, schema: str) -> str:
    user = dsn.split("//", 1)[1].split("@", 1)[0]
    database = dsn.rsplit("/", 1)[1]
    return f"postgresql://{user}@127.0.0.1:{port}/{database}?schema={schema}"


@pytest.fixture
async def proxy(pg: dict[str, Any]) -> AsyncIterator[Proxy]:
    parsed = pg["dsn"].split("@", 1)[1].split("/", 1)[0]
    host, _, port = parsed.partition(":")
    proxy = Proxy(host, int(port or 5432))
    await proxy.open()
    yield proxy
    with contextlib.suppress(Exception):
        await proxy.close()


async def test_an_outage_ends_subscriptions_clearly_and_the_bus_recovers(
    make_bus: with_schema, pg: dict[str, Any], proxy: Proxy
) -> None:
    bus = make_bus(_through(pg["dsn"], proxy.port, pg["schema"]), reconnect_max=0.2, connect_timeout=2)
    await bus.start()
    key = ("", "outage")
    sub = bus.subscribe(key)
    bus.publish(key, 1, status("outage", 1))
    assert [v for v, _ in await take(sub, 1)] == [1]

    await proxy.close()
    with pytest.raises(StreamDroppedError, match="PostgreSQL is unreachable"):
        await asyncio.wait_for(sub.next(), WAIT)
    assert not bus.connected
    bus.publish(key, 2, status("outage", 2))  # neither raises nor blocks: counted and dropped
    assert bus.dropped_events >= 1
    with pytest.raises(StreamDroppedError, match="PostgreSQL is unreachable"):
        await asyncio.wait_for(bus.subscribe(key).next(), WAIT)  # while down: ends at once

    await proxy.open()
    await until(lambda: bus.connected)
    again = bus.subscribe(key)
    replayed = await take(again, 1)
    assert [v for v, _ in replayed] == [1]  # what was written before the outage; 2 was dropped
    bus.publish(key, 3, status("outage", 3))
    assert [v for v, _ in await take(again, 1)] == [3]


async def test_a_silent_connection_is_found_by_the_health_check(
    make_bus: with_schema, pg: dict[str, Any], proxy: Proxy
) -> None:
    url = _through(pg["dsn"], proxy.port, pg["schema"])
    # connect_timeout bounds the health check's query too; at 0.5 s the first connection through the proxy
    # timed out once, in a fresh clone's full run (four workers on two cores)
    bus = make_bus(url, health_interval=0.2, connect_timeout=2.0, reconnect_max=0.2)
    await bus.start()
    key = ("", "silent")
    sub = bus.subscribe(key)
    proxy.flowing.clear()  # nothing gets through, nothing is closed
    with pytest.raises(StreamDroppedError, match="PostgreSQL is unreachable"):
        await asyncio.wait_for(sub.next(), WAIT)
    bus.publish(key, 1, status("silent", 1))  # does not block on the silent connection
    proxy.flowing.set()
    await until(lambda: bus.connected)
    again = bus.subscribe(key)
    bus.publish(key, 2, status("silent", 2))
    assert [v for v, _ in await take(again, 1)] == [2]


async def test_an_unreachable_database_fails_fast(make_bus: with_schema, proxy: Proxy) -> None:
    await proxy.close()  # nothing listens on its port now
    bus = make_bus(f"postgresql://nobody@127.0.0.1:{proxy.port}/test", connect_timeout=1, reconnect_max=0.2)
    sub = bus.subscribe(("", "t"))  # before the first connection: waits for it, then ends with the error
    bus.publish(("", "t"), 1, status("t", 1))
    with pytest.raises(StreamDroppedError, match="PostgreSQL is unreachable"):
        await asyncio.wait_for(sub.next(), WAIT)
    with pytest.raises(StoreError, match=f"could not reach 127.0.0.1:{proxy.port}/test"):
        await bus.start()
    assert bus.dropped_events >= 1


def test_bad_urls_are_refused() -> None:
    assert parse_url("postgresql://u@h/db?schema=s&pool=20&sslmode=disable&timeout=3") == (
        "postgresql://u@h/db?sslmode=disable",
        "s",
    )
    for url in ("redis://h", "postgresql://h/db?schema=", "postgresql://h/db?schema=a&schema=b"):
        with pytest.raises(ValueError):
            PostgresEventBus(url)


# -- end to end: two runtimes, one store -------------------------------------------------------------------


class Gate(Executor):
    """Works, waits for ``release``, produces an artifact, completes."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        self.started.set()
        await self.release.wait()
        for n in range(5):
            await events.artifact(f"part {n}", name=f"answer {n}")
        await events.complete("done")


async def test_a_task_run_by_one_runtime_is_followed_through_another(make_bus: with_schema) -> None:
    store = MemoryTaskStore()
    executor = Gate()
    a = TaskRuntime(executor, store, make_bus())
    b = TaskRuntime(executor, store, make_bus())
    await asyncio.gather(a.start(), b.start())
    call = CallContext()
    try:
        request = SendMessageRequest(
            message=Message(message_id="m1", role=Role.USER, parts=[Part(text="go")])
        )
        main = await a.on_send_streaming_message(request, call)
        first = await asyncio.wait_for(anext(main), WAIT)
        assert first.task is not None
        await asyncio.wait_for(executor.started.wait(), WAIT)
        followed = await b.on_subscribe_to_task(SubscribeToTaskRequest(id=first.task.id), call)
        snapshot = await asyncio.wait_for(anext(followed), WAIT)
        assert snapshot.task is not None and snapshot.task.id == first.task.id
        executor.release.set()

        on_a, on_b = await asyncio.wait_for(asyncio.gather(_all(main), _all(followed)), WAIT)
        encoded_a = [msgspec.json.encode(e) for e in on_a]
        encoded_b = [msgspec.json.encode(e) for e in on_b]
        assert encoded_b == encoded_a[len(encoded_a) - len(encoded_b) :]  # in order, none twice or missing
        artifacts = [e.artifact_update.artifact.parts[0].text for e in on_b if e.artifact_update is not None]
        assert artifacts == [f"part {n}" for n in range(5)]
        last = on_b[-1].status_update
        assert last is not None and last.status.state is TaskState.COMPLETED
    finally:
        executor.release.set()
        await asyncio.gather(a.stop(grace=1), b.stop(grace=1))


async def test_a_late_subscriber_to_a_long_task_is_not_dropped_by_its_own_replay(
    make_bus: with_schema,
) -> None:
    # 2 MiB of artifacts in the table, a 256 KiB queue on b: the replay is in the snapshot b reads
    store, executor = MemoryTaskStore(), LongTask(count=64, size=32 * 1024)
    a = TaskRuntime(executor, store, make_bus())
    b = TaskRuntime(executor, store, make_bus(max_bytes=256 * 1024))
    await asyncio.gather(a.start(), b.start())
    call = CallContext()
    try:
        request = SendMessageRequest(
            message=Message(message_id="m1", role=Role.USER, parts=[Part(text="go")])
        )
        main = await a.on_send_streaming_message(request, call)
        first = await asyncio.wait_for(anext(main), WAIT)
        assert first.task is not None
        await asyncio.wait_for(executor.started.wait(), WAIT)
        bus = a.bus
        assert isinstance(bus, PostgresEventBus)
        await until(lambda: bus.written_events >= 65)  # working and the 64 artifacts are in the table
        followed = await b.on_subscribe_to_task(SubscribeToTaskRequest(id=first.task.id), call)
        snapshot = await asyncio.wait_for(anext(followed), WAIT)
        assert snapshot.task is not None and len(snapshot.task.artifacts) == 64
        executor.release.set()
        rest = await asyncio.wait_for(_all(followed), WAIT)
        assert [e.artifact_update.artifact.parts[0].text for e in rest if e.artifact_update] == ["tail"]
        last = rest[-1].status_update
        assert len(rest) == 2 and last is not None and last.status.state is TaskState.COMPLETED
        await asyncio.wait_for(_all(main), WAIT)
    finally:
        executor.release.set()
        await asyncio.gather(a.stop(grace=1), b.stop(grace=1))


async def _all(stream: Any) -> list[StreamResponse]:
    return [event async for event in stream]


async def test_publishing_says_when_events_wait_to_be_written_until_they_are(make_bus: with_schema) -> None:
    """A quarter of ``max_pending`` waiting to be written is a backlog: the run then hands the loop on sooner,
    to the writer among others (see ``EventBus.publish``)."""
    bus = make_bus(max_pending=8)
    await bus.start()
    key = ("", "task-1")
    sub = bus.subscribe(key)
    answers = [bus.publish(key, n, status("task-1", n)) for n in range(1, 4)]
    assert answers == [False, True, True]  # nothing was written meanwhile: the writer has not had a turn
    assert [v for v, _ in await take(sub, 3)] == [1, 2, 3]  # written, then read back
    assert bus.publish(key, 4, status("task-1", 4)) is False
    assert [v for v, _ in await take(sub, 1)] == [4]
