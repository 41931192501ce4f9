"""An EventBus on PostgreSQL alone: several server processes, one database, every task's events everywhere.

For a deployment that has PostgreSQL and no Redis. Each process keeps one bus; a task's events, published by
whichever process runs it, reach the subscribers of every process, in the order they were published::

    bus = PostgresEventBus("postgresql://app@db/agents?schema=skillwire")
    runtime = TaskRuntime(executor, store, bus)

How it works, and why:

* **The table is the stream.** ``publish`` (synchronous: the runtime calls it right after a commit) queues the
  event for one background writer per bus, which INSERTs queued events in order, a batch per statement, into
  ``skillwire_events(seq bigserial, stream, tenant, task_id, version, body, terminal, created)``. The stream
  is a 16-byte hash of (tenant, task id), and tenant and id are stored as bytea: partition keys hold NUL
  (tenant NUL owner), which PostgreSQL text cannot. The body is the event's JSON.
* **NOTIFY carries a pointer, not the event.** The same statement calls ``pg_notify`` once per stream of the
  batch with ``<stream hex>:<highest seq>``, so NOTIFY's 8000-byte payload limit never matters, whatever
  the size of an artifact. Notifications are delivered at commit, when the rows are visible.
* **One LISTEN connection per bus.** A notification for a stream with subscribers in this process makes it
  read ``WHERE stream = $1 AND seq > last_seen ORDER BY seq`` and fan the rows out to its subscribers'
  queues: an :class:`~skillwire.server.buses.memory.InProcessEventBus` inside holds them, bounded (a subscriber that
  falls behind ends with :class:`StreamDroppedError`). A stream's writers take a transaction-scoped advisory lock
  per stream before inserting, so a stream's rows become visible in ``seq`` order even when two processes
  write to it (a CancelTask served elsewhere): reading ``seq > last_seen`` never skips a late commit.
* **A late subscriber misses nothing.** The first subscription of a stream in a process replays the stream's
  newest rows (``replay_events`` of them) from the table; the runtime subscribes before it reads the task's
  snapshot and drops every event the snapshot already holds, so what happened between subscribing and
  reading is not lost. The subscription drops those as they arrive (its floor, see
  :mod:`skillwire.server.buses.base`), so they take no room in its queue and a long task's replay does not drop
  the subscriber it is for. Later subscriptions of the stream join at the current position: everything published
  after they subscribed is still ahead of it. Events of a process's own tasks also take the round trip
  through the table, which keeps one order for everyone.
* **Trimming.** A terminal event (a terminal status, or a direct reply) marks its row ``terminal``; every
  bus's writer deletes, in bounded passes (``trim_batch`` streams or rows), the rows of streams that ended
  more than ``ttl_after_end`` seconds ago (60 s by default), and, as a backstop for a task that never ends,
  rows older than ``max_age`` (1 h). Deleting old rows is always safe: a subscriber reads the task from the
  store, and the table only has to bridge the moment between subscribing and reading it. The marking is in
  the table, so a process that dies before a stream's TTL passes leaves nothing behind.
* **Outages.** The bus watches its LISTEN connection (a termination callback, and a ``SELECT 1`` every
  ``health_interval`` seconds) and its writes and reads. When PostgreSQL is lost, every local subscription
  ends with :class:`StreamDroppedError` (a client resubscribes: SubscribeToTask replays the task from the task
  store), a subscription made while it is down ends at once with that error, and ``publish`` neither blocks
  nor raises: events it cannot write are logged, counted (``dropped_events``) and dropped, since the task
  store already holds them. The bus reconnects by itself, with backoff up to ``reconnect_max`` seconds.
* ``fail`` ends this process's subscriptions of a task only (a failure the runtime manages to store is
  published like any event, and reaches every process).

The cost against a Redis bus: a table write per event (batched per statement, WAL included, and the trimming
deletes afterwards: vacuum has work to do), a read per notified stream per process that follows it, a
round trip through the database before a process's own subscribers see an event, NOTIFY's 8000-byte payload
limit (why the payload is a pointer), and one LISTEN connection per process plus a small pool
(``pool_size``) for writes and reads. PostgreSQL's NOTIFY queue is shared by the whole cluster (8 GB by
default): a listener stuck in a long transaction holds it back, which is why the LISTEN connection does
nothing else.

``?schema=NAME`` in the URL keeps the table in that schema (created if absent, as is the table, under an
advisory lock); the notification channel is then ``skillwire_events_<hash of the schema>``, so deployments in
two schemas of one database do not hear each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import msgspec

from skillwire.errors import A2AError, StoreError, StreamDroppedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.server.buses.base import Subscription
from skillwire.server.buses.memory import InProcessEventBus

__all__ = ["PostgresBusTuning", "PostgresEventBus", "open_url"]

log = logging.getLogger("skillwire.bus.postgres")

Key = tuple[str, str]
#: What the writer inserts: stream hash, tenant, task id, version, body, terminal.
Row = tuple[bytes, bytes, bytes, int, bytes, bool]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(StreamResponse).decode
CHANNEL = "skillwire_events"


@dataclass(eq=False)
class _Stream:
    """A stream followed in this process (the inner bus holds its subscribers): how far it was read."""

    key: Key
    last_seen: int = 0
    replayed: bool = False
    wanted: bool = True
    puller: asyncio.Task[None] | None = None


def stream_hash(key: Key) -> bytes:
    """16 bytes naming the stream of ``key`` (tenant and id may hold NUL, so they are length-prefixed)."""
    tenant = _raw(key[0])
    return hashlib.blake2b(
        len(tenant).to_bytes(4, "big") + tenant + _raw(key[1]), digest_size=16, person=b"skillwire-bus"
    ).digest()


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _ends_stream(event: StreamResponse) -> bool:
    if event.message is not None:
        return True
    update = event.status_update
    if update is not None:
        return update.status.state.is_terminal
    return event.task is not None and event.task.status.state.is_terminal


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_STORE_OPTIONS = frozenset({"schema", "pool", "timeout"})


def parse_url(url: str) -> tuple[str, str | None]:
    """(the DSN for asyncpg, the schema of ``?schema=NAME`` or None); raises ValueError for a bad URL.

    The PostgreSQL task store's own options (``pool``, ``timeout``) are left out too, so one URL serves the
    store and the bus; the bus's settings are its constructor's."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"a PostgreSQL event bus URL starts with postgresql://, not {parts.scheme or url!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in query if name == "schema"]
    if len(schemas) > 1 or (schemas and not schemas[0]) or any("\x00" in s for s in schemas):
        raise ValueError("?schema= names one schema, once, without NUL")
    rest = urlencode([(name, value) for name, value in query if name not in _STORE_OPTIONS])
    return urlunsplit(parts._replace(query=rest)), schemas[0] if schemas else None


def _names(schema: str | None) -> tuple[str, str]:
    """The events table of a bus in ``schema`` (None: the search path's) and its NOTIFY channel, one per
    schema so that deployments in two schemas of one database do not hear each other."""
    if schema is None:
        return "skillwire_events", CHANNEL
    return (
        f"{_quote(schema)}.skillwire_events",
        f"{CHANNEL}_{hashlib.blake2b(_raw(schema), digest_size=8).hexdigest()}",
    )


class PostgresBusTuning(TypedDict, total=False):
    """The keyword options of :class:`PostgresEventBus` (docs/postgres-bus.md); each left out has its default
    (:data:`_TUNING`)."""

    #: each subscriber's queue: at most this many events and bytes
    max_events: int
    max_bytes: int
    #: seconds a stream's rows are kept after its task ended; seconds any row is kept at most
    ttl_after_end: float
    max_age: float
    #: rows a subscriber that fell behind is replayed at most; events queued for writing at most
    replay_events: int
    max_pending: int
    #: rows written in one statement; rows deleted in one trim
    batch: int
    trim_batch: int
    #: connections; seconds to connect; seconds ``aclose()`` flushes at most
    pool_size: int
    connect_timeout: float
    flush_timeout: float
    #: seconds between health checks of the listening connection; the longest wait between reconnections
    health_interval: float
    reconnect_max: float


_TUNING: PostgresBusTuning = {
    "max_events": 10_000,
    "max_bytes": 8 * 1024 * 1024,
    "ttl_after_end": 60.0,
    "max_age": 3600.0,
    "replay_events": 1000,
    "max_pending": 100_000,
    "batch": 500,
    "trim_batch": 1000,
    "pool_size": 4,
    "connect_timeout": 5.0,
    "flush_timeout": 5.0,
    "health_interval": 5.0,
    "reconnect_max": 5.0,
}


class PostgresEventBus:
    """The :class:`~skillwire.server.buses.base.EventBus` of processes that share one PostgreSQL database.

    ``max_events``/``max_bytes`` bound each subscriber's queue; ``ttl_after_end``: seconds a stream's rows are
    kept after its task ended. Connects on first use (or ``await bus.start()``); ``await bus.aclose()``
    flushes what is queued (at most ``flush_timeout`` seconds) and closes the connections::

        bus = PostgresEventBus("postgresql://localhost/app?schema=agents", ttl_after_end=60)
        await bus.start()  # optional: raises StoreError if PostgreSQL cannot be reached
    """

    shared = True

    def __init__(self, url: str, **tuning: Unpack[PostgresBusTuning]) -> None:
        """``tuning``: the keyword options of :class:`PostgresBusTuning` (each has a default)."""
        unknown = sorted(tuning.keys() - PostgresBusTuning.__optional_keys__)
        if unknown:  # what a signature of named parameters would refuse
            raise TypeError(f"PostgresEventBus() got an unexpected keyword argument {unknown[0]!r}")
        given: PostgresBusTuning = {**_TUNING, **tuning}
        self._dsn, self.schema = parse_url(url)
        self.url = url
        self.max_events, self.max_bytes = given["max_events"], given["max_bytes"]
        #: The subscribers' bounded queues: the rows read are published to it.
        self._local = InProcessEventBus(max_events=self.max_events, max_bytes=self.max_bytes)
        self.ttl_after_end, self.max_age = given["ttl_after_end"], given["max_age"]
        self.replay_events, self.max_pending = given["replay_events"], given["max_pending"]
        self.batch, self.trim_batch = given["batch"], given["trim_batch"]
        self.pool_size, self.connect_timeout = given["pool_size"], given["connect_timeout"]
        self.flush_timeout = given["flush_timeout"]
        self.health_interval, self.reconnect_max = given["health_interval"], given["reconnect_max"]
        self.table, self.channel = _names(self.schema)
        #: Events that could not be written (PostgreSQL down, queue full, closed): counted, then dropped.
        self.dropped_events = 0
        self.written_events = 0
        #: called after each batch of events written, with its round trip in seconds and its size (metrics)
        self.on_write: Callable[[float, int], None] | None = None
        self._init_state()

    def _init_state(self) -> None:
        """The bus's state before its first use: no connection, task or stream yet, nothing queued."""
        self._streams: dict[bytes, _Stream] = {}
        self._pending: deque[Row] = deque()
        self._state = "new"  # new -> starting -> up <-> down; closed
        self._closing = False
        self._error = ""
        self._supervisor: asyncio.Task[None] | None = None
        self._pullers: set[asyncio.Task[None]] = set()
        self._writer: asyncio.Task[None] | None = None
        self._pool: Any = None
        self._listener: Any = None
        self._lost = asyncio.Event()
        self._up = asyncio.Event()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._logged_drop = False

    # -- the EventBus protocol ---------------------------------------------------------------------------

    def subscribe(self, key: Key, *, after: int | None = 0, ends_only: bool = False) -> Subscription:
        first = self._local.subscriber_count(key) == 0
        sub = self._local.subscribe(key, after=after, ends_only=ends_only)
        if self._closing:
            sub.end(None)
            sub.close()
            return sub
        self._ensure_started()
        if self._state == "down":
            sub.end(self._outage())
            sub.close()
            return sub
        if first:  # the stream's first subscriber here (again): replay it
            stream = self._streams[stream_hash(key)] = _Stream(key)
            self._want(stream)
        return sub

    def publish(self, key: Key, version: int, event: StreamResponse, data: bytes | None = None) -> bool:
        """Queue ``event`` to be written; whether events wait to be written, a quarter of ``max_pending`` or
        more (the publisher then hands the loop on sooner, to the writer among others)."""
        if self._state == "closed":
            self._dropped(1, "the bus is closed")
            return False
        self._ensure_started()
        if self._state == "down":
            self._dropped(1, f"PostgreSQL is unreachable ({self._error})")
            return False
        if len(self._pending) >= self.max_pending:
            self._dropped(1, f"{self.max_pending} events are already waiting to be written")
            return False
        try:
            body = _encode(event) if data is None else data  # the log's JSON is the same encoding
        except (TypeError, ValueError, msgspec.EncodeError) as exc:  # the runtime checks this before
            log.error("an event of task %s is not JSON and was not published: %s", key[1], exc)
            return False
        self._pending.append(
            (stream_hash(key), _raw(key[0]), _raw(key[1]), version, body, _ends_stream(event))
        )
        self._idle.clear()
        self._wake.set()
        return len(self._pending) >= self.max_pending >> 2

    def fail(self, key: Key, error: A2AError) -> None:
        self._streams.pop(stream_hash(key), None)
        self._local.fail(key, error)

    def close(self) -> None:
        self._closing = True
        self._end_all(None)

    def subscriptions(self) -> int:
        return self._local.subscriptions()

    def subscriber_count(self, key: Key) -> int:
        return self._local.subscriber_count(key)

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._state == "up"

    async def start(self) -> None:
        """Connect now (or wait for the reconnection under way); raises StoreError if PostgreSQL cannot be
        reached within ``connect_timeout`` seconds."""
        if self._state == "closed":
            raise StoreError("The PostgreSQL event bus is closed")
        self._ensure_started()
        try:
            async with asyncio.timeout(self.connect_timeout):
                await self._up.wait()
        except TimeoutError:
            raise StoreError(
                f"The PostgreSQL event bus could not reach {self._where()}: {self._error or 'timed out'}"
            ) from None

    async def aclose(self) -> None:
        """Write what is queued (waiting at most ``flush_timeout`` seconds), then close the connections."""
        self._closing = True
        self._end_all(None)
        if self._state in ("starting", "up") and not self._idle.is_set():  # queued, or being written
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_timeout):
                    await self._idle.wait()
        self._state = "closed"
        if self._pending:
            self._dropped(len(self._pending), "the bus closed before they were written")
            self._pending.clear()
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            with contextlib.suppress(BaseException):
                await supervisor

    def _ensure_started(self) -> None:
        if self._state == "new":
            self._state = "starting"
            self._supervisor = asyncio.get_running_loop().create_task(
                self._supervise(), name="skillwire-postgres-bus"
            )

    async def _supervise(self) -> None:
        delay = 0.05
        try:
            while self._state != "closed":
                try:
                    await self._connect()
                except Exception as exc:
                    await self._disconnect()
                    if self._state != "down":
                        log.warning("the PostgreSQL event bus cannot reach %s: %s", self._where(), exc)
                    self._go_down(_describe(exc))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.reconnect_max)
                    continue
                delay = 0.05
                self._state, self._error = "up", ""
                self._logged_drop = False
                self._up.set()
                log.info("the PostgreSQL event bus is connected to %s", self._where())
                for stream in self._streams.values():
                    self._want(stream)
                self._writer = asyncio.create_task(self._write_loop(), name="skillwire-postgres-bus-writer")
                reason = await self._watch()
                self._go_down(reason)  # first: the subscribers learn of it at once
                await self._disconnect()
                log.warning("the PostgreSQL event bus lost %s: %s; reconnecting", self._where(), reason)
        finally:
            await self._disconnect()

    async def _connect(self) -> None:
        self._lost = lost = asyncio.Event()
        listener = self._listener = await asyncpg.connect(self._dsn, timeout=self.connect_timeout)
        listener.add_termination_listener(lambda _conn: lost.set())
        await self._migrate(listener)
        self._pool = await asyncpg.create_pool(
            self._dsn, min_size=1, max_size=self.pool_size, timeout=self.connect_timeout
        )
        await listener.add_listener(self.channel, self._on_notify)

    async def _watch(self) -> str:
        """Wait until the connection is lost; the reason."""
        while True:
            try:
                async with asyncio.timeout(self.health_interval):
                    await self._lost.wait()
                return self._error or "the LISTEN connection closed"
            except TimeoutError:
                pass
            try:
                await self._listener.fetchval("SELECT 1", timeout=self.connect_timeout)
            except Exception as exc:
                return f"no answer to a health check ({_describe(exc)})"

    async def _disconnect(self) -> None:
        """Close the connections at once (a silent network must not hold this up), then stop the writer
        and the readers, waiting for them a little at most."""
        listener, pool, self._listener, self._pool = self._listener, self._pool, None, None
        if listener is not None:
            listener.terminate()
        if pool is not None:
            pool.terminate()
        tasks = [*self._pullers, *([self._writer] if self._writer is not None else [])]
        self._writer = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    def _go_down(self, reason: str) -> None:
        if self._state == "closed":
            return
        self._state, self._error = "down", reason
        self._up.clear()
        if self._pending:
            self._dropped(len(self._pending), f"PostgreSQL is unreachable ({reason})")
            self._pending.clear()
        self._idle.set()
        self._end_all(self._outage())

    def _lose(self, exc: BaseException, lost: asyncio.Event) -> None:
        """A write or read on the connections of ``lost`` failed: treat it as a lost connection (the
        supervisor reconnects). A failure on connections already replaced changes nothing."""
        if lost is self._lost and not lost.is_set():
            self._error = _describe(exc)
            lost.set()

    def _outage(self) -> StreamDroppedError:
        return StreamDroppedError(
            "This stream lost its event bus (PostgreSQL is unreachable); subscribe to the task again to catch"
            " up once it is back"
        )

    def _where(self) -> str:
        parts = urlsplit(self._dsn)
        return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"

    def _dropped(self, count: int, why: str) -> None:
        self.dropped_events += count
        if not self._logged_drop:  # once per outage: the task store holds these events anyway
            self._logged_drop = True
            log.error("the PostgreSQL event bus dropped %d event(s): %s", count, why)

    def _end_all(self, item: A2AError | None) -> None:
        streams, self._streams = self._streams, {}
        if item is None:
            self._local.close()
            return
        for stream in streams.values():
            self._local.fail(stream.key, item)

    def _forget(self, stream: _Stream) -> bool:
        """Stop following ``stream`` if no subscriber here is left; whether it was forgotten."""
        if self._local.subscriber_count(stream.key):
            return False
        digest = stream_hash(stream.key)
        if self._streams.get(digest) is stream:
            del self._streams[digest]
        return True

    def _forget_unfollowed(self) -> None:
        for stream in list(self._streams.values()):
            self._forget(stream)

    # -- the table ----------------------------------------------------------------------------------------

    async def _migrate(self, conn: Any) -> None:
        lock = int.from_bytes(
            hashlib.blake2b(b"skillwire_events " + _raw(self.table), digest_size=8).digest()
        )
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", lock - (1 << 63))
            if self.schema is not None:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(self.schema)}")
            await conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {self.table} (
                    seq bigserial PRIMARY KEY,
                    stream bytea NOT NULL,
                    tenant bytea NOT NULL,
                    task_id bytea NOT NULL,
                    version integer NOT NULL,
                    body bytea NOT NULL,
                    terminal boolean NOT NULL DEFAULT false,
                    created timestamptz NOT NULL DEFAULT now())"""
            )
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS skillwire_events_stream ON {self.table} (stream, seq)"
            )
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS skillwire_events_ended ON {self.table} (created) WHERE terminal"
            )

    async def _write_loop(self) -> None:
        loop, lost = asyncio.get_running_loop(), self._lost
        every = min(max(self.ttl_after_end / 2, 0.05), 30.0)
        next_trim = loop.time() + every
        while True:
            if not self._pending:
                self._idle.set()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(next_trim - loop.time(), 0)):
                        await self._wake.wait()
            if self._pending:
                rows = [self._pending.popleft() for _ in range(min(self.batch, len(self._pending)))]
                started = time.perf_counter()
                try:
                    await self._insert(rows)
                except asyncio.CancelledError:  # the bus is closing, or reconnecting
                    self._dropped(len(rows), "the connection closed while they were written")
                    raise
                except Exception as exc:
                    self._dropped(len(rows), f"the write failed: {exc}")
                    self._lose(exc, lost)
                    return
                self.written_events += len(rows)
                if self.on_write is not None:
                    self.on_write(time.perf_counter() - started, len(rows))
            if loop.time() >= next_trim:
                self._forget_unfollowed()  # streams whose subscribers left and that no event woke since
                try:
                    await self.trim()
                except Exception as exc:
                    self._lose(exc, lost)
                    return
                next_trim = loop.time() + every

    async def _insert(self, rows: list[Row]) -> None:
        locks = sorted({int.from_bytes(row[0][:8], "big", signed=True) for row in rows})
        columns = list(zip(*rows, strict=True))
        async with self._pool.acquire() as conn, conn.transaction():
            # Per stream, in one order for every writer: a stream's rows become visible in seq order.
            await conn.execute("SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k", locks)
            await conn.fetch(
                f"""WITH added AS (
                    INSERT INTO {self.table} (stream, tenant, task_id, version, body, terminal)
                    SELECT s, t, i, v, b, e
                    FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::int[], $5::bytea[], $6::bool[])
                        WITH ORDINALITY AS u(s, t, i, v, b, e, n)
                    ORDER BY n
                    RETURNING stream, seq)
                SELECT pg_notify($7, encode(stream, 'hex') || ':' || max(seq)) FROM added GROUP BY stream""",
                *columns,
                self.channel,
            )

    async def trim(self) -> int:
        """Delete, in one bounded pass, the rows of streams that ended ``ttl_after_end`` seconds ago and rows
        older than ``max_age``; how many were deleted. Every bus runs it by itself now and then."""
        async with self._pool.acquire() as conn:
            ended = await conn.execute(
                f"""DELETE FROM {self.table} WHERE stream IN (
                    SELECT DISTINCT stream FROM {self.table}
                    WHERE terminal AND created <= now() - make_interval(secs => $1) LIMIT $2)""",
                self.ttl_after_end,
                self.trim_batch,
            )
            old = await conn.execute(
                f"""DELETE FROM {self.table} WHERE seq IN (
                    SELECT seq FROM (SELECT seq, created FROM {self.table} ORDER BY seq LIMIT $2) AS oldest
                    WHERE created <= now() - make_interval(secs => $1))""",
                self.max_age,
                self.trim_batch,
            )
        return int(ended.split()[-1]) + int(old.split()[-1])

    # -- reading ------------------------------------------------------------------------------------------

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        digest, _, seq = payload.partition(":")
        try:
            stream = self._streams.get(bytes.fromhex(digest))
            newest = int(seq)
        except ValueError:
            return
        if stream is not None and not self._forget(stream) and newest > stream.last_seen:
            self._want(stream)

    def _want(self, stream: _Stream) -> None:
        stream.wanted = True
        if self._state == "up" and stream.puller is None:
            stream.puller = puller = asyncio.get_running_loop().create_task(self._pull(stream))
            self._pullers.add(puller)
            puller.add_done_callback(self._pullers.discard)

    async def _pull(self, stream: _Stream) -> None:
        digest, lost = stream_hash(stream.key), self._lost
        try:
            while stream.wanted and self._streams.get(digest) is stream and not self._forget(stream):
                stream.wanted = False
                async with self._pool.acquire() as conn:
                    if not stream.replayed:
                        rows = await conn.fetch(
                            f"""SELECT seq, version, body FROM (SELECT seq, version, body FROM {self.table}
                                WHERE stream = $1 ORDER BY seq DESC LIMIT $2) AS newest ORDER BY seq""",
                            digest,
                            self.replay_events,
                        )
                        stream.replayed = True
                    else:
                        rows = await conn.fetch(
                            f"""SELECT seq, version, body FROM {self.table}
                                WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3""",
                            digest,
                            stream.last_seen,
                            self.batch,
                        )
                        stream.wanted = stream.wanted or len(rows) == self.batch
                self._fan_out(stream, rows)
        except Exception as exc:
            self._lose(exc, lost)
        finally:
            stream.puller = None

    def _fan_out(self, stream: _Stream, rows: list[Any]) -> None:
        if self._streams.get(stream_hash(stream.key)) is not stream:
            return  # forgotten while it was read (a newer subscription of the task follows it afresh)
        for seq, version, body in rows:
            if seq <= stream.last_seen:
                continue
            stream.last_seen = seq
            try:
                event = _decode(body)
            except msgspec.DecodeError as exc:
                log.error("skipped an event of task %s that does not decode: %s", stream.key[1], exc)
                continue
            self._local.publish(stream.key, version, event, body)
        self._forget(stream)


def open_url(url: str, limits: Limits) -> PostgresEventBus:
    """``postgresql://`` and ``postgres://`` (the table in :mod:`skillwire.server.buses.schemes` sends them
    here)."""
    return PostgresEventBus(url, max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes)
