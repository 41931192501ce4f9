"""An event bus several server processes share, on Redis Streams (``pip install 'skillwire[redis]'``).

::

    bus = RedisEventBus("redis://127.0.0.1:6379/0")
    app = agent.asgi(store=shared_store, bus=bus)      # or: skillwire serve --bus redis://127.0.0.1:6379/0

**One stream per task.** Each task's events go to the Redis Stream ``skillwire:events:{tenant}:{task_id}``,
both parts percent-encoded (so a ``:``, a NUL or a ``{`` in a tenant or task id can neither make two tasks
share a key nor pick a Redis Cluster hash slot). An entry holds two fields: ``version`` (the task version
the event produced, as the runtime tags it) and ``event`` (the StreamResponse as the v1.0 JSON of the
wire codec: msgspec's encoding of the protocol model). A stream is bounded, ``XADD ... MAXLEN ~ maxlen``,
and expires ``ttl_after_end`` seconds after the task's terminal event (or a direct reply, which also ends
its stream); every other event pushes the expiry to ``idle_ttl`` so the stream of a task that never ends
is not kept forever. Trimming or expiring loses nothing that matters: the store holds every task, and a
stream only has to carry the events published after a subscriber registered.

**Publishing never waits.** ``publish`` is synchronous in the bus protocol (the runtime calls it right after
each commit), so it encodes the event and queues it for the one writer task of the bus, which sends what
is queued as one pipeline (the events of one task as one script call that XADDs each: ``_send``), in order:
one process's events for a task reach Redis in the order it published them. If Redis cannot take them
(down, unreachable) the writer logs, counts them in :attr:`RedisEventBus.dropped` and ends the local
subscriptions of those tasks with StreamDroppedError: the events are committed in the store already, so a
subscriber that resubscribes gets them from there.
A queue past ``max_pending`` events (a long outage) drops new ones the same way instead of growing.

**One multiplexed reader per bus.** One connection runs a blocking ``XREAD`` over every stream this
process has subscribers for and fans each entry out to the local subscription queues (an
:class:`~skillwire.server.buses.memory.InProcessEventBus` inside: the same bounded queues, the same
StreamDroppedError for a subscriber that falls behind). The first subscription to a stream reads it from
``0-0``: the runtime subscribes *before* it reads the task's snapshot and drops versions the snapshot
already holds, so replaying what remains of the stream is how a subscriber misses nothing that another
process published between the two. A later subscription to a stream the reader follows joins at the
reader's position: what the reader received before it subscribed was committed before it read its
snapshot. The replayed events a subscriber's snapshot already holds take no room in its queue (the
subscription's floor, see :mod:`skillwire.server.buses.base`), so a long task's replay does not drop the late
subscriber it is for. When a subscription adds a stream while the XREAD blocks, the reader is woken through a stream
of its own (``...:wake:{id}``, read from the last entry seen, so a wake-up sent just before the XREAD
blocks is not lost the way a CLIENT UNBLOCK sent then would be); the XREAD's timeout is only a backstop.

**Outages.** When the reader loses Redis it ends every local subscription with StreamDroppedError (the
client resubscribes; SubscribeToTask replays the task from the store), then reconnects by itself with a
capped exponential backoff. While it is down a new subscription ends at once with that error, never a
hang. The error the client sees does not name the Redis host; the server's log does.

The bus is ``shared``: another process's runtime publishes to the same streams (a CancelTask it served).
``close()`` ends the local subscriptions; ``aclose()`` flushes the writer's queue (for at most
``flush_timeout`` seconds), stops the reader and closes the connections.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote, urlsplit

import msgspec
import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.typing import KeyT, StreamIdT

from skillwire.errors import A2AError, SkillwireError, StoreUnavailableError, StreamDroppedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.server.buses.base import Subscription
from skillwire.server.buses.memory import InProcessEventBus

__all__ = ["RedisEventBus", "open_url"]

log = logging.getLogger("skillwire.bus")

Key = tuple[str, str]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(StreamResponse).decode

#: What a lost or refused connection raises: redis-py's errors, and the OS's for what it does not wrap.
_FAILURES = (RedisError, OSError)

#: Events sent per pipeline; entries read per stream per XREAD.
WRITE_BATCH = 512
READ_COUNT = 512
#: How long one XREAD blocks (ms): only a backstop, the wake stream ends it when the streams change.
BLOCK_MS = 5_000
#: The reconnection backoff, in seconds: doubling from the first to the cap.
BACKOFF_FIRST = 0.05
BACKOFF_CAP = 2.0
#: The script of one task's events in a pipeline (RedisEventBus._send). KEYS[1]: the task's stream; ARGV: its
#: MAXLEN, the expiry to set in ms (0: none), the events' versions (a JSON array of integers: the script
#: takes its digit runs), and the events' JSON, oldest first, joined by newlines (compact JSON holds none: a
#: string escapes them). The last event is the rest of the text, so one event may hold anything.
_ADD_EVENTS = """
local stream, maxlen, events, at = KEYS[1], ARGV[1], ARGV[4], 1
local versions = {}
for version in string.gmatch(ARGV[3], '%d+') do
    versions[#versions + 1] = version
end
for i, version in ipairs(versions) do
    local event
    if i == #versions then
        event = string.sub(events, at)
    else
        local stop = string.find(events, '\\n', at, true)
        event = string.sub(events, at, stop - 1)
        at = stop + 1
    end
    redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'version', version, 'event', event)
end
if ARGV[2] ~= '0' then
    redis.call('PEXPIRE', stream, ARGV[2])
end
return 0
"""
#: How long the wake stream of a bus outlives its last wake-up (ms), should the process die.
WAKE_TTL_MS = 3_600_000


def _clients(url: str, connect_timeout: float) -> tuple[redis.Redis, redis.Redis]:
    """The bus's two clients: one for the writer and the other commands, and one with a connection of its own
    for the blocking XREAD. Neither retries: a failure surfaces at once, the bus has its own backoff.

    The first has no socket timeout: redis-py would bound each send with ``asyncio.wait_for`` and each reply
    with a timeout context of its own, which cost a third of the writer's CPU per event (measured: 25-28 µs
    an event in pipelines of 16, 17 µs without). The bus bounds each pipeline or command as a whole instead
    (:attr:`RedisEventBus.io_timeout`); a read cut by it closes its connection (redis-py disconnects on any exception)."""
    no_retry = Retry(NoBackoff(), 0)
    common: dict[str, Any] = {"socket_connect_timeout": connect_timeout, "retry": no_retry}
    client = redis.Redis.from_url(url, socket_timeout=None, **common)
    reader = redis.Redis.from_url(
        url, single_connection_client=True, socket_timeout=BLOCK_MS / 1000 + connect_timeout, **common
    )
    # XREAD's reply as Redis sent it: redis-py would make a dict of each entry's fields in Python, a
    # microsecond an event, for fields the reader takes by position (RedisEventBus._deliver)
    reader.set_response_callback("XREAD", _as_sent)
    return client, reader


def _as_sent(response: Any, **options: Any) -> Any:
    return response


class RedisEventBus:
    """The event bus of server processes that share one Redis (and one store)."""

    shared = True

    def __init__(
        self,
        url: str,
        *,
        max_events: int = 10_000,
        max_bytes: int = 8 * 1024 * 1024,
        maxlen: int = 1_000,
        ttl_after_end: float = 60.0,
        idle_ttl: float | None = 86_400.0,
        prefix: str = "skillwire:events",
        max_pending: int = 100_000,
        flush_timeout: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> None:
        """``max_events``/``max_bytes``: the bound of each local subscriber's queue; ``maxlen``: about how
        many entries a task's stream keeps; ``ttl_after_end``: seconds a stream lives after its task ended;
        ``idle_ttl``: seconds a stream lives after its last event (None: until the task ends);
        ``max_pending``: events queued for Redis at most (more are dropped: Redis is not keeping up or
        down); ``flush_timeout``: how long ``aclose()`` waits for the queue to be sent."""
        self.url = url
        self.maxlen = maxlen
        self.ttl_after_end = ttl_after_end
        self.idle_ttl = idle_ttl
        self.prefix = prefix
        self.max_pending = max_pending
        self.flush_timeout = flush_timeout
        #: How long one pipeline of writes (or the start's PING) may take before Redis counts as down.
        self.io_timeout = connect_timeout + 5
        #: Events that could not be sent to Redis (committed in the store, so not lost to a resubscriber).
        self.dropped = 0
        #: called after each batch of events written, with its round trip in seconds and its size (metrics)
        self.on_write: Callable[[float, int], None] | None = None
        self._local = InProcessEventBus(max_events=max_events, max_bytes=max_bytes)
        #: The stream name made last, and its key (see stream_name).
        self._last_name: tuple[Key, bytes] | None = None
        self._where = _where(url)
        self._client, self._reader_client = _clients(url, connect_timeout)
        self._stopping = False
        self._closed = False
        self._init_writer()
        self._init_reader(prefix)

    def _init_writer(self) -> None:
        """The writer's state before its first event: nothing queued, no task yet."""
        self._pending: deque[tuple[Key, bytes, int, bytes, bool]] = deque()
        self._queued: asyncio.Event | None = None
        #: Set while nothing is queued or being sent.
        self._idle: asyncio.Event | None = None
        self._writer: asyncio.Task[None] | None = None
        self._dropping = False

    def _init_reader(self, prefix: str) -> None:
        """The reader's state before its first subscription: no stream followed, no task yet."""
        #: Set while the reader finds Redis reachable (or has not tried yet).
        self._reachable: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._reader: asyncio.Task[None] | None = None
        self._helpers: set[asyncio.Task[None]] = set()
        #: The streams the reader follows (a local subscription wants them): their names and positions.
        self._names: dict[Key, bytes] = {}
        self._positions: dict[bytes, bytes] = {}
        self._keys: dict[bytes, Key] = {}
        #: The streams of the XREAD in flight, if one is.
        self._reading: frozenset[bytes] | None = None
        self._wake_name = f"{prefix}:wake:{uuid.uuid4().hex}".encode()
        self._wake_position = b"0-0"
        self._wake_wanted = False
        self._waking = False
        #: Why Redis is unreachable, while the reader finds it so.
        self._down: str | None = None

    def __repr__(self) -> str:
        return f"RedisEventBus({self._where!r})"

    # -- the EventBus protocol ------------------------------------------------------------------------

    def subscribe(self, key: Key, *, after: int | None = 0, ends_only: bool = False) -> Subscription:
        sub = self._local.subscribe(key, after=after, ends_only=ends_only)
        if self._closed:
            sub.end(None)
            sub.close()
            return sub
        if self._down is not None:
            sub.end(self._unreachable(key))
            sub.close()
            return sub
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self.stream_name(key)
            self._keys[name] = key
            self._positions[name] = b"0-0"  # the first subscription replays what the stream holds
        self._start(reader=True)
        assert self._changed is not None
        self._changed.set()
        if self._reading is not None and name not in self._reading:
            self._wake()
        return sub

    def publish(self, key: Key, version: int, event: StreamResponse, data: bytes | None = None) -> bool:
        """Queue ``event`` for Redis; whether events wait to be written there, a quarter of ``max_pending``
        or more (the publisher then hands the loop on sooner, to the writer among others)."""
        if self._stopping or len(self._pending) >= self.max_pending:
            self._dropped(key, 1, "the bus is closed" if self._stopping else "too many events queued")
            return False
        update = event.status_update
        ends = event.message is not None or (update is not None and update.status.state.is_terminal)
        try:
            data = _encode(event) if data is None else data  # the log's JSON is the same encoding
        except (TypeError, ValueError, msgspec.EncodeError) as exc:  # the store took it: not expected
            self._dropped(key, 1, f"an event is not JSON ({exc})")
            return False
        pending = self._pending
        if not pending:  # else the writer has events to send still, and will find this one after them
            self._start(reader=False)
            assert self._queued is not None and self._idle is not None
            self._idle.clear()
            self._queued.set()
        pending.append((key, self.stream_name(key), version, data, ends))
        return len(pending) >= self.max_pending >> 2

    def fail(self, key: Key, error: A2AError) -> None:
        """End this process's subscriptions of ``key`` with ``error``; other processes learn of the task's
        end from the terminal event the runtime publishes."""
        self._local.fail(key, error)

    def subscriptions(self) -> int:
        return self._local.subscriptions()

    def subscriber_count(self, key: Key) -> int:
        return self._local.subscriber_count(key)

    def close(self) -> None:
        self._local.close()

    async def aclose(self) -> None:
        """Send what is queued (for at most ``flush_timeout`` seconds), stop reading, close the connections."""
        self._closed = self._stopping = True
        self.close()
        if self._queued is not None:
            self._queued.set()
        if self._writer is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._writer), self.flush_timeout)
            except TimeoutError:
                log.warning("event bus %s: %d events not sent at shutdown", self._where, len(self._pending))
        self.dropped += len(self._pending)
        self._pending.clear()
        tasks = [t for t in (self._writer, self._reader, *self._helpers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._down is None and self._changed is not None:
            try:
                await asyncio.wait_for(self._client.delete(self._wake_name), 1.0)
            except (*_FAILURES, TimeoutError):
                pass  # it expires by itself
        await self._reader_client.aclose()
        await self._client.aclose()

    async def start(self) -> None:
        """Check that Redis answers now (``PING``), so that a server whose bus cannot be reached does not
        start: StoreUnavailableError saying where (and why) if it does not."""
        try:
            async with asyncio.timeout(self.io_timeout):
                await self._client.ping()
        except _FAILURES as exc:  # TimeoutError is an OSError
            reason = str(exc) or f"no answer within {self.io_timeout:g} s"
            raise StoreUnavailableError(
                f"the Redis event bus at {self._where} cannot be reached: {reason}"
            ) from None

    async def flush(self) -> None:
        """Wait until every event published so far was sent to Redis or dropped (:attr:`dropped`); cap the
        wait with ``asyncio.timeout``."""
        if self._idle is not None:
            await self._idle.wait()

    async def wait_reachable(self) -> None:
        """Wait until the reader finds Redis reachable again after an outage (subscriptions work again)."""
        if self._reachable is not None:
            await self._reachable.wait()

    # -- names ------------------------------------------------------------------------------------------

    def stream_name(self, key: Key) -> bytes:
        """The Redis key of ``key``'s stream: ``PREFIX:TENANT:TASK_ID``, both percent-encoded."""
        last = self._last_name
        if last is not None and last[0] == key:  # a stream publishes one task's events in a row
            return last[1]
        name = f"{self.prefix}:{quote(key[0], safe='')}:{quote(key[1], safe='')}".encode()
        self._last_name = (key, name)
        return name

    # -- writing ----------------------------------------------------------------------------------------

    def _start(self, *, reader: bool) -> None:
        if self._queued is None:
            self._queued, self._changed = asyncio.Event(), asyncio.Event()
            self._idle, self._reachable = asyncio.Event(), asyncio.Event()
            self._idle.set()
            self._reachable.set()
        if reader and self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read(), name="skillwire-bus-reader")
        elif not reader and self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write(), name="skillwire-bus-writer")

    async def _write(self) -> None:
        assert self._queued is not None and self._idle is not None
        delay = BACKOFF_FIRST
        while True:
            if not self._pending:
                self._idle.set()
                if self._stopping:
                    return
                self._queued.clear()
                await self._queued.wait()
                continue
            batch = [self._pending.popleft() for _ in range(min(WRITE_BATCH, len(self._pending)))]
            started = time.perf_counter()
            try:
                await self._send(batch)
            except Exception as exc:  # anything else too: the writer must outlive a bad batch
                if not isinstance(exc, _FAILURES):
                    log.exception("event bus %s: sending events failed", self._where)
                self._send_failed(batch, exc)
                if self._stopping:  # no retrying at shutdown: what is left goes too
                    self._send_failed(list(self._pending), exc)
                    self._pending.clear()
                    self._idle.set()
                    return
                if not self._pending:
                    self._idle.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP)
            else:
                delay = BACKOFF_FIRST
                self._dropping = False
                if self.on_write is not None:
                    self.on_write(time.perf_counter() - started, len(batch))

    async def _send(self, batch: list[tuple[Key, bytes, int, bytes, bool]]) -> None:
        """One pipeline: per stream, one script call that adds the batch's events of that stream in order
        (an XADD each, as before) and then sets the expiry its last event sets.

        Why a script with four arguments: redis-py builds each command in Python, argument by argument
        (about a microsecond each), and reads each reply the same way; an XADD per event was about a third
        of a streaming process's CPU (py-spy, stream 1000 on PostgreSQL + Redis), and two arguments per event
        still cost 2,800 instructions an event. The versions go as one JSON array and the events as one
        newline-joined text, each made by one call in C; the entries the script writes are those the XADDs
        wrote (``version`` and ``event``), so every reader reads them as before."""
        streams: dict[bytes, tuple[list[int], list[bytes]]] = {}
        expiry: dict[bytes, float | None] = {}
        for _, name, version, data, ends in batch:
            events = streams.get(name)
            if events is None:
                events = streams[name] = ([], [])
            events[0].append(version)
            events[1].append(data)
            expiry[name] = self.ttl_after_end if ends else self.idle_ttl
        pipe = self._client.pipeline(transaction=False)
        for name, (versions, datas) in streams.items():
            ttl = expiry[name]
            expires = 0 if ttl is None else max(1, int(ttl * 1000))
            joined = b"\n".join(datas)
            if joined.count(b"\n") != len(datas) - 1:  # not compact JSON: one event a call
                for version, data in zip(versions, datas, strict=True):
                    pipe.eval(_ADD_EVENTS, 1, name, self.maxlen, expires, b"[%d]" % version, data)
                continue
            pipe.eval(_ADD_EVENTS, 1, name, self.maxlen, expires, _encode(versions), joined)
        async with asyncio.timeout(self.io_timeout):
            await pipe.execute()

    def _send_failed(self, batch: list[tuple[Key, bytes, int, bytes, bool]], exc: BaseException) -> None:
        if not batch:
            return
        keys = {item[0] for item in batch}
        log.log(
            logging.DEBUG if self._dropping else logging.WARNING,  # warned once per spell of failures
            "event bus %s: could not send %d events of %d tasks (%s); their local subscribers are dropped",
            self._where,
            len(batch),
            len(keys),
            _reason(exc),
        )
        self._dropping = True
        self.dropped += len(batch)
        for key in keys:
            self._local.fail(key, self._unreachable(key))

    def _dropped(self, key: Key, count: int, why: str) -> None:
        self.dropped += count
        if not self._dropping:  # once per spell of dropping, not once per event
            self._dropping = True
            log.warning("event bus %s: events are being dropped: %s", self._where, why)
        self._local.fail(key, self._unreachable(key))

    # -- reading ----------------------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self._changed is not None
        while True:
            if not self._names:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                await self._follow()
            except Exception as exc:  # anything else too: a reader that died would leave streams hanging
                if not isinstance(exc, _FAILURES):
                    log.exception("event bus %s: reading events failed", self._where)
                self._lost(exc)
                await self._reconnect()

    async def _follow(self) -> None:
        """XREAD the followed streams and fan their entries out, until no local subscription is left."""
        while True:
            streams = self._streams()
            if not streams:
                return
            streams[self._wake_name] = self._wake_position
            self._reading = frozenset(streams)
            try:
                request: dict[KeyT, StreamIdT] = {name: position for name, position in streams.items()}
                reply = await self._reader_client.xread(request, count=READ_COUNT, block=BLOCK_MS)
            finally:
                self._reading = None
            self._deliver(reply)

    def _streams(self) -> dict[bytes, bytes]:
        """The followed streams with their positions, once the streams nobody here follows are forgotten."""
        for key in [k for k in self._names if not self._local.subscriber_count(k)]:
            name = self._names.pop(key)
            del self._positions[name], self._keys[name]
        return dict(self._positions)

    def _deliver(self, reply: Any) -> None:
        """Fan an XREAD's reply out: as Redis sent it (the reader takes it raw, see _clients), a map of stream
        names (RESP3) or a list of pairs (RESP2), each to its entries, each ``[id, [field, value, ...]]``."""
        items = reply.items() if isinstance(reply, dict) else reply or ()
        for name, entries in items:
            if name == self._wake_name:
                if entries:
                    self._wake_position = entries[-1][0]
                continue
            key = self._keys.get(name)
            if key is None or not entries:
                continue  # no longer followed
            self._positions[name] = entries[-1][0]
            publish = self._local.publish
            for entry_id, fields in entries:
                try:
                    if len(fields) == 4 and fields[0] == b"version" and fields[2] == b"event":
                        version, data = fields[1], fields[3]  # as this bus writes them
                    else:
                        named = dict(zip(fields[::2], fields[1::2], strict=True))
                        version, data = named[b"version"], named[b"event"]
                    publish(key, int(version), _decode(data), data)
                except (KeyError, ValueError, TypeError, msgspec.DecodeError):
                    log.warning(
                        "event bus %s: entry %r of %r is not an event; skipped", self._where, entry_id, name
                    )

    def _wake(self) -> None:
        """End the XREAD in flight so the next one reads the streams added since."""
        self._wake_wanted = True
        if not self._waking:
            self._waking = True
            self._spawn(self._send_wakes())

    async def _send_wakes(self) -> None:
        try:
            while self._wake_wanted:
                self._wake_wanted = False
                pipe = self._client.pipeline(transaction=False)
                pipe.xadd(self._wake_name, {b"w": b"1"}, maxlen=1, approximate=False)
                pipe.pexpire(self._wake_name, WAKE_TTL_MS)
                async with asyncio.timeout(self.io_timeout):
                    await pipe.execute()
        except _FAILURES:
            pass  # Redis is down: the reader finds out itself
        finally:
            self._waking = False

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._helpers.add(task)
        task.add_done_callback(self._helpers.discard)

    # -- outages ----------------------------------------------------------------------------------------

    def _lost(self, exc: BaseException) -> None:
        """Redis is gone: every local subscription ends, and the streams are followed afresh later."""
        self._down = _reason(exc)
        assert self._reachable is not None
        self._reachable.clear()
        log.warning(
            "event bus %s: Redis is unreachable (%s); %d followed tasks' subscribers are dropped, reconnecting",
            self._where,
            self._down,
            len(self._names),
        )
        for key in list(self._names):
            self._local.fail(key, self._unreachable(key))
        self._names.clear()
        self._positions.clear()
        self._keys.clear()

    async def _reconnect(self) -> None:
        delay = BACKOFF_FIRST
        while True:
            await asyncio.sleep(delay)
            try:
                await self._reader_client.ping()
            except _FAILURES:
                delay = min(delay * 2, BACKOFF_CAP)
                continue
            log.warning("event bus %s: Redis is reachable again", self._where)
            self._down = None
            assert self._reachable is not None
            self._reachable.set()
            return

    def _unreachable(self, key: Key) -> StreamDroppedError:
        # what the client is told: no host names, the log has them
        return StreamDroppedError(
            f"The server's event bus is unavailable, so this stream of task {key[1]} was dropped; subscribe"
            " to the task again shortly to catch up"
        )


def _where(url: str) -> str:
    """``url``'s host, port and database, without its credentials: for the log."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        return f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path}"
    except ValueError:
        return "redis"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def open_url(url: str, limits: Limits) -> RedisEventBus:
    """``redis://`` and ``rediss://`` (the table in :mod:`skillwire.server.buses.schemes` sends them here)."""
    try:
        return RedisEventBus(
            url, max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes
        )
    except ValueError as exc:  # redis-py's word on a URL it cannot read
        raise SkillwireError(f"event bus URL: {exc}") from None
