"""The push-notification delivery worker: POSTs the store's pending deliveries to their webhooks.

Deliveries wait in the store (:mod:`skillwire.stores.push`), queued with the task writes whose events they
carry. The worker keeps, in memory, only which lanes (task and config) have work and when it is due; the
deliveries themselves are read from the store one at a time, so a restart loses nothing and a long outage
costs the store, not the process.

* **In order per lane, concurrent across lanes.** A lane is delivered by at most one coroutine at a time, its
  head first; at most ``concurrency`` lanes are delivered at once. A slow or dead webhook holds its own lane
  (and one slot, for at most ``timeout`` seconds per attempt), never the task or another webhook.
* **Fair between owners and between hosts.** The slots are shared between the owners of the lanes (the
  store partition of the task: its tenant and the caller that owns it) and between the hosts the webhooks
  are on (host and port). Lanes due are taken in turn, one owner after the other (and, within an owner, one host after
  the other), and an owner or a host holds at most its *share* of the slots (a quarter of them, at least
  one), unless more than a share of the slots would still be free after it: so the slots an owner's or a
  host's slow receivers can hold leave a share free for everyone else, whose next delivery starts at once.
  A host is known once its lane's config is read (a lane taken over at start-up is first delivered
  without it).
* **Retries.** A timeout, a connection error, HTTP 408, 425, 429 or 5xx is retried after an exponential
  backoff with jitter (``first_delay * 2**(n-1)``, at most ``max_delay``, times a random 0.5-1), or after
  ``Retry-After`` when the receiver asks for longer. Any other answer but 2xx (a 3xx is not followed; a 4xx
  says the request itself is refused), a URL the SSRF guard refuses, or ``max_attempts`` failed attempts
  end the delivery as *failed*: kept in the store with its reason, logged, and the lane goes on with its next
  delivery.
* **What is sent.** The body as stored (the event in the config's shape), ``Content-Type:
  application/json``, the config's ``authentication`` as ``Authorization: <scheme> <credentials>``, its
  ``token`` as ``X-A2A-Notification-Token``, and a fresh signed JWT in ``A2A-Notification-Signature``
  (:mod:`skillwire.webhooks`; a new ``jti`` per attempt, so that a receiver's replay check never refuses a
  retry). The response body is never read.
* **Trace context.** A delivery stored with the trace context of its event (``Delivery.trace``, kept when
  telemetry was on where the event was produced) continues that trace: with telemetry on here, each attempt
  is a span of kind CLIENT named ``A2A push``, a child of that context, with ``a2a.task.id``,
  ``a2a.push.config.id``, ``a2a.push.attempt``, ``http.request.method``, ``url.full`` (without credentials,
  query or fragment) and ``http.response.status_code`` (a failed attempt sets its status to ERROR, and
  ``error.type``), and the request carries the span's context (``traceparent``, ``tracestate``); with
  telemetry off here, the request carries the stored headers as they are. A delivery without one is sent
  without, and makes no span (it would start a trace of its own, of nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import heapq
import itertools
import logging
import random
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import msgspec

from skillwire.errors import StoreError, WebhookRefusedError
from skillwire.protocol.models import TaskPushNotificationConfig
from skillwire.stores.push import Delivery, Lane, PushConfigRecord, PushStore

if TYPE_CHECKING:
    import httpx

    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.webhooks import WebhookSigner

__all__ = ["Deliverer", "DeliveryRetry", "DeliveryStats", "header_problem"]

log = logging.getLogger("skillwire.push")

TOKEN_HEADER = "X-A2A-Notification-Token"
#: Deliveries one lane makes in a row before it gives its slot to the next lane that waits.
_BURST = 16
#: Seconds before a lane whose store read or write failed is tried again.
_STORE_RETRY = 1.0
#: Bytes of a webhook's answer read so that its connection can be reused.
_MAX_ANSWER = 64 * 1024
#: Configs remembered by lane (their records are read from the store again when forgotten).
_CONFIG_CACHE = 4096

_decode_config = msgspec.json.Decoder(TaskPushNotificationConfig).decode
_decode_trace = msgspec.json.Decoder(dict[str, str]).decode

#: Makes what delivering needs: the HTTP clients (one per slot) and the signer.
Connect = Callable[[], "Awaitable[tuple[list[httpx.AsyncClient], WebhookSigner]]"]


@dataclass(frozen=True, kw_only=True)
class DeliveryRetry:
    max_attempts: int = 8
    first_delay: float = 1.0
    max_delay: float = 300.0

    def delay(self, attempts: int, retry_after: float | None, rng: Callable[[], float]) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt."""
        backoff = min(self.max_delay, self.first_delay * 2.0 ** (attempts - 1)) * (0.5 + rng() / 2)
        if retry_after is not None:
            backoff = max(backoff, min(retry_after, self.max_delay))
        return backoff


@dataclass(slots=True)
class DeliveryStats:
    """What the worker did since it started (for the operator; the failed deliveries are in the store)."""

    delivered: int = 0
    retried: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class _Outcome:
    delivered: bool
    #: For a failure: whether another attempt can succeed, why it failed, and the receiver's Retry-After.
    retry: bool = False
    error: str = ""
    retry_after: float | None = None
    #: The webhook's answer (0: none), and what kind of failure it was (for the attempt's span).
    status: int = 0
    error_type: str = ""


_DELIVERED = _Outcome(True)
_RETRIED_STATUSES = frozenset({408, 425, 429})


def _now_us() -> int:
    return int(time.time() * 1_000_000)


class Deliverer:
    """Makes the store's pending deliveries (see the module's docstring). ``ready(lanes)`` after a commit
    that queued some; ``start()`` picks up what a previous process left."""

    def __init__(
        self,
        store: PushStore,
        *,
        concurrency: int = 32,
        timeout: float = 10.0,
        retry: DeliveryRetry | None = None,
        rng: Callable[[], float] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        #: Where the attempts' spans go (:mod:`skillwire.server.observability.telemetry`; None: no spans).
        self.telemetry = telemetry
        self.concurrency = concurrency
        self.timeout = timeout
        self.retry = retry or DeliveryRetry()
        self.stats = DeliveryStats()
        #: The slots one owner or one host holds at most while no more than that many would be left free.
        self.share = max(1, concurrency // 4)
        #: Deliveries pending, as far as this worker knows (read from the store at start, then counted), in
        #: all and by owner (the lanes' store partition).
        self.pending = 0
        self.pending_by_owner: Counter[str] = Counter()
        # a generator of its own: the worker never moves the process's global random state
        self._rng = rng or random.Random().random
        self._init_clients()
        self._init_lanes()
        #: deliveries made, not yet recorded in the store (``_made``: not yet written; ``_recording``: until
        #: written), and the task writing them
        self._made: list[int] = []
        self._recording: set[int] = set()
        self._recorder: asyncio.Task[None] | None = None
        self._configs: OrderedDict[Lane, PushConfigRecord | None] = OrderedDict()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False

    def _init_clients(self) -> None:
        """No HTTP client or signer yet."""
        #: One HTTP client per delivery slot, each used by one attempt at a time (see ``start``), and the
        #: signer: made by ``connect`` at the first delivery.
        self._clients: asyncio.LifoQueue[httpx.AsyncClient] = asyncio.LifoQueue()
        self._all_clients: list[httpx.AsyncClient] = []
        self.signer: WebhookSigner | None = None
        self._connect: Connect | None = None
        self._connecting = asyncio.Lock()

    def _init_lanes(self) -> None:
        """No lane scheduled, due or busy yet."""
        #: lanes waiting for a slot or a retry: lane -> when due (µs), and a heap of (due, n, lane) whose
        #: entries that no longer match ``_due`` are stale
        self._due: dict[Lane, int] = {}
        self._heap: list[tuple[int, int, Lane]] = []
        self._order = itertools.count()
        #: lanes due now, waiting for a slot: owner -> host ("" when not known yet) -> lanes, and the owners
        #: that have some, in the order they get their turn
        self._ready: dict[str, dict[str, deque[Lane]]] = {}
        self._turns: deque[str] = deque()
        self._busy: dict[Lane, asyncio.Task[None]] = {}
        #: slots held by owner and by host; the host each busy lane counts against
        self._owner_busy: Counter[str] = Counter()
        self._host_busy: Counter[str] = Counter()
        self._busy_host: dict[Lane, str] = {}
        #: the host of each lane's webhook, once known (as many as the configs remembered)
        self._hosts: OrderedDict[Lane, str] = OrderedDict()
        #: busy lanes that got new deliveries meanwhile
        self._again: set[Lane] = set()

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self, connect: Connect) -> None:
        """Schedule the lanes the store holds pending deliveries for, and start delivering. ``connect`` makes
        the HTTP clients (which the worker closes when it stops) and the signer, at the first delivery.

        Each attempt takes a client of its own and gives it back after: httpx's connection pool hands one
        idle connection to every request that arrives at once and makes all but one of them try again
        (measured: 4.7 tries per delivery with one shared client and 32 lanes), so a client is never
        shared by two attempts. A client keeps its connections: the next delivery to the same webhook
        through it reuses one."""
        if self._loop_task is not None:
            return
        self._connect = connect
        await self.recount()
        for lane, due in await self.store.pending_lanes():
            self._schedule(lane, due)
        self._loop_task = asyncio.create_task(self._run(), name="skillwire-push")

    async def stop(self) -> None:
        """Stop delivering: attempts under way are abandoned (their deliveries stay pending in the store,
        for the next start)."""
        self._closing = True
        self._wake.set()
        tasks = [t for t in (self._loop_task, *self._busy.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):  # what was made is recorded (else it is made again next time)
            await self._recorded()
        for client in self._all_clients:
            await client.aclose()

    async def recount(self) -> None:
        """Read the pending deliveries by owner from the store (the counts drift: a deleted config's
        deliveries go with it)."""
        counts = await self.store.pending_by_partition()
        self.pending_by_owner = Counter(counts)
        self.pending = sum(counts.values())

    def ready(self, lanes: Iterable[Lane], count: int = 0, owner: str = "") -> None:
        """These lanes got ``count`` new deliveries (committed) of ``owner`` (the lanes' store partition):
        deliver them soon."""
        self.pending += count
        if count:
            self.pending_by_owner[owner] += count
        for lane in lanes:
            if lane in self._busy:
                self._again.add(lane)
            elif lane not in self._due:  # a lane waiting for a retry keeps waiting: its head goes first
                self._schedule(lane, 0)
        self._wake.set()

    async def rescan(self) -> None:
        """Schedule what the store holds for this process and is not scheduled yet: deliveries taken over
        from a process that stopped, or committed by another process into a lane this one delivers (a store
        several processes share)."""
        if self._loop_task is None or self._closing:
            return
        await self.recount()
        for lane, due in await self.store.pending_lanes():
            if lane not in self._busy and lane not in self._due:
                self._schedule(lane, due)
        self._wake.set()

    def forget_config(self, lane: Lane) -> None:
        """The config of ``lane`` changed or went: read it again before the next attempt."""
        self._configs.pop(lane, None)
        self._hosts.pop(lane, None)

    def know_host(self, lane: Lane, url: str) -> None:
        """The webhook of ``lane`` is at ``url`` (its config was just set): its first delivery waits its
        host's turn too."""
        self._remember_host(lane, _host_of(url))

    @property
    def pending_lanes(self) -> int:
        """Lanes with deliveries waiting or under way."""
        return len(self._due) + len(self._busy)

    async def idle(self) -> None:
        """Wait until no lane has a delivery due now or under way (lanes waiting for a retry may remain)."""
        while True:
            self._idle.clear()
            recording = self._recorder is not None and not self._recorder.done()
            if not self._busy and not recording and not any(due <= _now_us() for due in self._due.values()):
                return
            await self._idle.wait()

    # -- scheduling -----------------------------------------------------------------------------------------

    def _schedule(self, lane: Lane, due: int) -> None:
        self._due[lane] = due
        heapq.heappush(self._heap, (due, next(self._order), lane))

    async def _run(self) -> None:
        while not self._closing:
            self._wake.clear()
            now = _now_us()
            self._promote(now)
            self._start_ready()
            if not self._busy:
                self._idle.set()
            timeout = max(0.0, (self._heap[0][0] - now) / 1_000_000) if self._heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _promote(self, now: int) -> None:
        """Move the lanes due by ``now`` from the timer heap to their owner's and host's queue."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, lane = heapq.heappop(heap)
            if self._due.get(lane) != due or lane in self._busy:  # stale: rescheduled, or under way
                continue
            owner = lane[0]
            hosts = self._ready.get(owner)
            if hosts is None:
                hosts = self._ready[owner] = {}
                self._turns.append(owner)
            hosts.setdefault(self._hosts.get(lane, ""), deque()).append(lane)

    def _start_ready(self) -> None:
        """Start lanes due, one owner after the other, while slots are free (see the module)."""
        turns = self._turns
        passed = 0
        while turns and passed < len(turns) and len(self._busy) < self.concurrency:
            owner = turns.popleft()
            lane = self._pick(owner)
            if owner in self._ready:
                turns.append(owner)
            if lane is None:
                passed += 1
                continue
            passed = 0
            self._begin(lane)

    def _pick(self, owner: str) -> Lane | None:
        """The next lane of ``owner`` that may start now, taken off its queue; None if none may."""
        spare = self.concurrency - len(self._busy) > self.share  # more than a share stays free after it
        if not spare and self._owner_busy[owner] >= self.share:
            return None
        hosts = self._ready[owner]
        for host, lanes in hosts.items():
            if spare or not host or self._host_busy[host] < self.share:
                lane = lanes.popleft()
                del hosts[host]
                if lanes:  # the host's turn passes: its other lanes go after the other hosts'
                    hosts[host] = lanes
                elif not hosts:
                    del self._ready[owner]
                return lane
        return None

    def _begin(self, lane: Lane) -> None:
        del self._due[lane]
        self._owner_busy[lane[0]] += 1
        host = self._hosts.get(lane)
        if host:
            self._hold_host(lane, host)
        self._busy[lane] = asyncio.create_task(self._lane(lane), name="skillwire-push-lane")

    def _hold_host(self, lane: Lane, host: str) -> None:
        self._busy_host[lane] = host
        self._host_busy[host] += 1

    def _release(self, lane: Lane) -> None:
        del self._busy[lane]
        _decrement(self._owner_busy, lane[0])
        host = self._busy_host.pop(lane, None)
        if host is not None:
            _decrement(self._host_busy, host)

    def _remember_host(self, lane: Lane, host: str) -> None:
        self._hosts[lane] = host
        self._hosts.move_to_end(lane)
        if len(self._hosts) > _CONFIG_CACHE:
            self._hosts.popitem(last=False)
        if lane in self._busy and lane not in self._busy_host:  # learned while it runs: it counts now
            self._hold_host(lane, host)

    async def _lane(self, lane: Lane) -> None:
        due: int | None = None
        try:
            due = await self._deliver_lane(lane)
        except StoreError as exc:
            log.error("push deliveries of task %s wait: the store failed (%s)", lane[1], exc)
            due = _now_us() + int(_STORE_RETRY * 1_000_000)
        except Exception:
            log.exception("push delivery of task %s failed unexpectedly", lane[1])
            due = _now_us() + int(_STORE_RETRY * 1_000_000)
        finally:
            self._release(lane)
            again = lane in self._again
            self._again.discard(lane)
            if due is not None:
                self._schedule(lane, due)
            elif again:
                self._schedule(lane, 0)
            self._wake.set()
            self._idle.set()

    async def _deliver_lane(self, lane: Lane) -> int | None:
        """Deliver ``lane`` from its head on (a batch read at once, the deliveries made recorded at once);
        when it should be looked at again (None: it is empty)."""
        read = await self.store.next_deliveries(lane, _BURST)
        batch = [d for d in read if d.seq not in self._recording]
        if read and not batch:  # its first ones were made, and are being recorded: wait for that, read again
            await self._recorded()
            read = await self.store.next_deliveries(lane, _BURST)
            batch = [d for d in read if d.seq not in self._recording]
        if batch and self.signer is None:
            await self._connected()
        done: list[int] = []
        try:
            for delivery in batch:
                if delivery.next_us > _now_us():
                    return delivery.next_us
                outcome = await self._attempt_once(delivery)
                if outcome.delivered:
                    done.append(delivery.seq)
                    continue
                retry_us = await self._after_failure(lane, delivery, outcome)
                if retry_us is not None:
                    return retry_us
        finally:
            if done:
                self._record(lane[0], done)
        # a full batch: more may wait, behind the other lanes; else the lane is empty (or got more meanwhile,
        # which ``ready`` noted)
        return 0 if len(read) == _BURST else None

    async def _after_failure(self, lane: Lane, delivery: Delivery, outcome: _Outcome) -> int | None:
        """A failed attempt at ``delivery``: another is scheduled, and the lane waits until it is due (µs,
        returned), or (not worth retrying, or the last attempt) the delivery is recorded as failed, and the
        lane goes on with its next one (None)."""
        attempts = delivery.attempts + 1
        if not outcome.retry or attempts >= self.retry.max_attempts:
            await self.store.fail_delivery(delivery.seq, attempts, outcome.error)
            self.stats.failed += 1
            self._settled(lane[0], 1)
            log.warning(
                "push delivery failed for good after %d attempt(s): task %s, config %s: %s",
                attempts,
                delivery.task_id,
                delivery.config_id,
                outcome.error,
            )
            return None
        delay = self.retry.delay(attempts, outcome.retry_after, self._rng)
        next_us = _now_us() + int(delay * 1_000_000)
        await self.store.retry_delivery(delivery.seq, attempts, next_us, outcome.error)
        self.stats.retried += 1
        log.info(
            "push delivery to task %s's webhook failed (%s); attempt %d in %.1f s",
            delivery.task_id,
            outcome.error,
            attempts + 1,
            delay,
        )
        return next_us

    def _settled(self, owner: str, count: int) -> None:
        """``count`` deliveries of ``owner`` are pending no more."""
        self.pending -= count
        _decrement(self.pending_by_owner, owner, count)

    def _record(self, owner: str, seqs: list[int]) -> None:
        """These deliveries were made: record it in the store soon, in one write with those of other lanes
        (the lane goes on meanwhile; a read of the lane skips them until then)."""
        self.stats.delivered += len(seqs)
        self._settled(owner, len(seqs))
        self._made.extend(seqs)
        self._recording.update(seqs)
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.create_task(self._record_made(), name="skillwire-push-record")

    async def _record_made(self) -> None:
        while self._made:
            batch, self._made = self._made, []
            try:
                await self.store.finish_deliveries(batch)
            except StoreError as exc:
                log.error("could not record %d push deliveries as made yet (%s); retrying", len(batch), exc)
                self._made = batch + self._made
                await asyncio.sleep(_STORE_RETRY)
                continue
            self._recording.difference_update(batch)
        self._idle.set()

    async def _recorded(self) -> None:
        """Wait until the deliveries made so far are recorded."""
        recorder = self._recorder
        if recorder is not None and not recorder.done():
            await asyncio.shield(recorder)

    # -- one attempt ------------------------------------------------------------------------------------------

    async def _config(self, lane: Lane) -> PushConfigRecord | None:
        if lane in self._configs:
            self._configs.move_to_end(lane)
            return self._configs[lane]
        record = await self.store.get_push_config(*lane)
        self._configs[lane] = record
        if len(self._configs) > _CONFIG_CACHE:
            self._configs.popitem(last=False)
        return record

    async def _attempt_once(self, delivery: Delivery) -> _Outcome:
        """One attempt, whatever happens in it: an error that is not the store's (a config the HTTP client
        cannot send, a bug) is a failed attempt, not retried, so that the delivery is recorded as failed
        rather than tried again forever."""
        try:
            return await self._attempt(delivery)
        except StoreError:
            raise
        except Exception as exc:
            log.warning(
                "push delivery to task %s's webhook could not be attempted", delivery.task_id, exc_info=exc
            )
            error = f"{type(exc).__name__}: {exc}"[:500]
            return _Outcome(False, error=error, error_type=type(exc).__name__)

    async def _attempt(self, delivery: Delivery) -> _Outcome:
        record = await self._config(delivery.lane)
        if record is None:  # the config was deleted: nobody wants it any more
            return _DELIVERED
        config = _decode_config(record.body)
        if delivery.lane not in self._hosts:
            self._remember_host(delivery.lane, _host_of(config.url))
        problem = header_problem(config)
        if problem:  # a config stored before such values were refused when set
            return _Outcome(False, error=f"the config cannot be sent: {problem}", error_type="InvalidConfig")
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        auth = config.authentication
        if auth is not None:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}".strip()
        if config.token:
            headers[TOKEN_HEADER] = config.token
        from skillwire.webhooks import HEADER

        signer = self.signer or await self._connected()
        headers[HEADER] = signer.sign(delivery.body, audience=config.url, issuer=record.issuer or None)
        parent = _carrier(delivery)
        if not parent:
            return await self._post(config.url, delivery.body, headers)
        telemetry = self.telemetry
        if telemetry is None:  # not traced here: the receiver continues the stored context itself
            _add_trace(headers, parent)
            return await self._post(config.url, delivery.body, headers)
        return await self._traced_post(telemetry, delivery, config.url, headers, parent)

    async def _traced_post(
        self,
        telemetry: Telemetry,
        delivery: Delivery,
        url: str,
        headers: dict[str, str],
        parent: dict[str, str],
    ) -> _Outcome:
        """One attempt in a span of its own, a child of ``parent``, whose context the request carries."""
        span = telemetry.delivery(
            parent,
            {
                "a2a.task.id": delivery.task_id,
                "a2a.push.config.id": delivery.config_id,
                "a2a.push.attempt": delivery.attempts + 1,
                "http.request.method": "POST",
                "url.full": _bare_url(url),
            },
        )
        _add_trace(headers, telemetry.delivery_headers(span))
        # current while the request is made, so that an instrumented HTTP client's span is its child
        token = telemetry.attach(span)
        try:
            outcome = await self._post(url, delivery.body, headers)
        except BaseException as exc:  # abandoned (the worker stops): the span still ends
            telemetry.end_delivery(span, 0, "the attempt was abandoned", type(exc).__name__)
            raise
        finally:
            telemetry.detach(token)
        telemetry.end_delivery(span, outcome.status, outcome.error, outcome.error_type)
        return outcome

    async def _connected(self) -> WebhookSigner:
        async with self._connecting:
            if self.signer is None:
                assert self._connect is not None, "start() first"
                clients, signer = await self._connect()
                if not clients:
                    raise ValueError("the deliverer needs at least one HTTP client")
                self._all_clients = list(clients)
                for client in self._all_clients:
                    self._clients.put_nowait(client)
                self.signer = signer
        return self.signer

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> _Outcome:
        import httpx

        client = await self._clients.get()
        try:
            async with asyncio.timeout(self.timeout):
                async with client.stream("POST", url, content=body, headers=headers) as response:
                    status = response.status_code
                    retry_after = _retry_after(response.headers.get("retry-after"))
                    # Read (and drop) a short answer, so that the connection is kept for the next delivery; a
                    # long one is cut off, and its connection closed.
                    read = 0
                    async for chunk in response.aiter_raw():
                        read += len(chunk)
                        if read > _MAX_ANSWER:
                            break
        except WebhookRefusedError as exc:
            return _Outcome(False, error=str(exc), error_type=type(exc).__name__)
        except TimeoutError:
            return _Outcome(
                False, retry=True, error=f"no answer within {self.timeout:g} s", error_type="timeout"
            )
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return _Outcome(False, retry=True, error=error, error_type=type(exc).__name__)
        finally:
            self._clients.put_nowait(client)
        if 200 <= status < 300:
            return _Outcome(True, status=status)
        if status >= 500 or status in _RETRIED_STATUSES:
            return _Outcome(False, retry=True, error=f"HTTP {status}", retry_after=retry_after, status=status)
        if 300 <= status < 400:
            return _Outcome(False, error=f"HTTP {status}: redirects are not followed", status=status)
        return _Outcome(False, error=f"HTTP {status}", status=status)


def header_problem(config: TaskPushNotificationConfig) -> str:
    """What in ``config`` cannot be sent as an HTTP header value ("" for nothing): its token and its
    credentials must be visible ASCII (spaces inside them allowed), as a header value can hold no other
    character safely."""
    auth = config.authentication
    for name, value in (
        ("token", config.token),
        ("authentication.credentials", auth.credentials if auth is not None else ""),
    ):
        if value and (value != value.strip() or not all(" " <= c <= "~" for c in value)):
            return f"{name} holds a character that is not visible ASCII"
    return ""


def _host_of(url: str) -> str:
    """The host and port a webhook URL names (lower case): what the slots are shared by besides owners."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2].lower() or url[:100]
    except ValueError:
        return url[:100]


def _decrement(counter: Counter[str], key: str, count: int = 1) -> None:
    left = counter[key] - count
    if left > 0:
        counter[key] = left
    else:
        del counter[key]


def _carrier(delivery: Delivery) -> dict[str, str]:
    """The trace context ``delivery`` was stored with, as headers (none: empty)."""
    if not delivery.trace:
        return {}
    try:
        return _decode_trace(delivery.trace)
    except msgspec.DecodeError:
        log.warning("push delivery %d holds an unreadable trace context; sent without it", delivery.seq)
        return {}


def _add_trace(headers: dict[str, str], trace: dict[str, str]) -> None:
    """Add the trace context headers ``trace`` to ``headers``, none of whose own it may replace."""
    taken = {name.lower() for name in headers}
    headers.update((name, value) for name, value in trace.items() if name.lower() not in taken)


def _bare_url(url: str) -> str:
    """``url`` without credentials, query or fragment (a span's ``url.full`` must not leak a secret)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())
