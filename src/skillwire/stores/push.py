"""What a store keeps for push notifications: the configs callers set, and the deliveries still to make.

A **config** (:class:`PushConfigRecord`) is keyed by ``(tenant, task_id, id)``, where ``tenant`` is the
store partition of the task it belongs to (its tenant and owner, see
:func:`skillwire.server.context.partition`), so a caller reaches only the configs of its own tasks.

A **delivery** (:class:`Delivery`) is one event to POST to one config's webhook. Deliveries are written in the
same transaction as the task write whose events they carry (``TaskWrite.deliveries``), so an event the store
holds is never without its deliveries, and a delivery is never of an event the store does not hold: a server
killed with deliveries pending finds them at start-up and makes them. Each ``(tenant, task_id, config_id)``
is a **lane**, delivered in order (``seq``, which only grows); a lane whose head waits for a retry holds the
rest of its lane back, and no other lane. A delivery made is deleted; one that ran out of attempts is kept,
marked failed, for the operator (``failed_deliveries``).

A delivery also keeps the **trace context** current when its event was produced (``trace``), so that the
webhook request joins the trace of the request that caused the event, even when it is made after a restart:
the headers the process's OpenTelemetry propagator injected (W3C ``traceparent`` and ``tracestate``, and
``baggage`` if any), as one compact JSON object (``{"traceparent":"00-..."}``). JSON of the carrier rather
than two columns: it keeps whatever the installed propagator writes (B3, Jaeger, ...) and the stores need no
schema change when it does. At most 4096 characters (past that, a large ``baggage``, only the W3C headers are
kept). Empty when tracing is off or nothing was being traced (see
:mod:`skillwire.server.notifications.push` and :mod:`skillwire.server.notifications.push_delivery`).

A store that keeps these implements :class:`PushStore` besides :class:`~skillwire.stores.base.TaskStore`;
push notifications are offered only with such a store.
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from skillwire.errors import InvalidParamsError

__all__ = [
    "Delivery",
    "Lane",
    "MemoryPushState",
    "Outgoing",
    "PushConfigRecord",
    "PushStore",
    "config_cursor",
    "decode_config_cursor",
]

#: (tenant, task id, config id): the deliveries made in order.
Lane = tuple[str, str, str]


class PushConfigRecord(msgspec.Struct, frozen=True, gc=False):
    tenant: str
    task_id: str
    id: str
    #: The config as set (a v1.0 TaskPushNotificationConfig, JSON), credentials included.
    body: bytes
    #: The body shape its deliveries take: ``"1.0"`` (a StreamResponse) or ``"0.3"`` (a v0.3 stream event),
    #: by the protocol version of the client that set it.
    shape: str = "1.0"
    #: The ``iss`` of its deliveries' signatures: the agent's URL as that client reached it.
    issuer: str = ""


class Outgoing(msgspec.Struct, frozen=True, gc=False):
    """A delivery to enqueue with a task write: ``body`` to the config ``config_id`` of that task."""

    config_id: str
    body: bytes
    #: The trace context of the event, as JSON of the propagator's headers ("": none; see the module).
    trace: str = ""


class Delivery(msgspec.Struct, frozen=True, gc=False):
    seq: int
    tenant: str
    task_id: str
    config_id: str
    body: bytes
    attempts: int = 0
    #: When the next attempt is due (microseconds since the epoch; 0: now).
    next_us: int = 0
    failed: bool = False
    #: Why the last attempt failed.
    error: str = ""
    created_us: int = 0
    #: The trace context the delivery continues (JSON of the propagator's headers; "": none).
    trace: str = ""

    @property
    def lane(self) -> Lane:
        return (self.tenant, self.task_id, self.config_id)


@runtime_checkable
class PushStore(Protocol):
    """The push-notification side of a store (see the module's docstring)."""

    async def put_push_config(self, record: PushConfigRecord, max_per_task: int) -> bool:
        """Set ``record`` (replacing the task's config of that id); False, and nothing set, if the task
        would then have more than ``max_per_task`` configs."""
        ...

    async def get_push_config(self, tenant: str, task_id: str, config_id: str) -> PushConfigRecord | None: ...

    async def list_push_configs(
        self, tenant: str, task_id: str, *, after: str = "", limit: int = 100
    ) -> list[PushConfigRecord]:
        """The task's configs with an id after ``after``, in id order, at most ``limit``."""
        ...

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        """Remove the config and its pending deliveries (none: nothing happens)."""
        ...

    async def pending_lanes(self) -> list[tuple[Lane, int]]:
        """Every lane with a pending delivery, and when its first one is due."""
        ...

    async def next_deliveries(self, lane: Lane, limit: int = 1) -> list[Delivery]:
        """The first ``limit`` pending deliveries of ``lane``, in order."""
        ...

    async def finish_deliveries(self, seqs: Sequence[int]) -> None:
        """These deliveries were made (or their config is gone): forget them."""
        ...

    async def pending_count(self) -> int:
        """How many deliveries are pending (not failed), all lanes together."""
        ...

    async def pending_by_partition(self) -> dict[str, int]:
        """How many deliveries are pending (not failed) by the ``tenant`` of their lanes (the store
        partition: a tenant and the caller owning the task); partitions with none are left out."""
        ...

    async def retry_delivery(self, seq: int, attempts: int, next_us: int, error: str) -> None: ...

    async def fail_delivery(self, seq: int, attempts: int, error: str) -> None:
        """The delivery ran out of attempts (or cannot succeed): keep it, marked failed."""
        ...

    async def failed_deliveries(self, after: int = 0, limit: int = 100) -> list[Delivery]:
        """Failed deliveries with a ``seq`` after ``after``, oldest first."""
        ...


def config_cursor(config_id: str) -> str:
    """The page token of a config listing that goes on after ``config_id``."""
    return base64.urlsafe_b64encode(config_id.encode()).decode().rstrip("=")


def decode_config_cursor(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidParamsError(
            "Invalid pageToken: pass back a nextPageToken from an earlier ListTaskPushNotificationConfigs"
            " response",
            field_violations=[("params.pageToken", "not a token issued by this server")],
        ) from None


class MemoryPushState:
    """The push side of the memory store: dictionaries, gone with the process. It keeps the last
    ``max_failed`` failed deliveries."""

    def __init__(self, max_failed: int = 10_000) -> None:
        self.max_failed = max_failed
        self._failed: list[int] = []  # seqs, in order
        #: (tenant, task id) -> config id -> record, and the ids in order
        self.configs: dict[tuple[str, str], dict[str, PushConfigRecord]] = {}
        self._ids: dict[tuple[str, str], list[str]] = {}
        self.deliveries: dict[int, Delivery] = {}
        #: lane -> seqs of its pending deliveries, in order
        self.lanes: dict[Lane, list[int]] = {}
        self._seq = 0

    def enqueue(self, tenant: str, task_id: str, outgoing: tuple[Outgoing, ...], now_us: int) -> None:
        for item in outgoing:
            self._seq += 1
            lane = (tenant, task_id, item.config_id)
            self.deliveries[self._seq] = Delivery(
                self._seq, tenant, task_id, item.config_id, item.body, created_us=now_us, trace=item.trace
            )
            self.lanes.setdefault(lane, []).append(self._seq)

    def forget_task(self, tenant: str, task_id: str) -> None:
        """The store dropped the task: its configs go (its pending deliveries are still made)."""
        self.configs.pop((tenant, task_id), None)
        self._ids.pop((tenant, task_id), None)

    def prune_task(self, tenant: str, task_id: str) -> tuple[int, int]:
        """Retention pruned the task: its configs and their pending deliveries go. (configs, deliveries)."""
        configs = self.configs.pop((tenant, task_id), {})
        self._ids.pop((tenant, task_id), None)
        deliveries = 0
        for config_id in configs:
            for seq in self.lanes.pop((tenant, task_id, config_id), ()):
                deliveries += self.deliveries.pop(seq, None) is not None
        return len(configs), deliveries

    def put(self, record: PushConfigRecord, max_per_task: int) -> bool:
        key = (record.tenant, record.task_id)
        configs = self.configs.setdefault(key, {})
        if record.id not in configs:
            if len(configs) >= max_per_task:
                if not configs:
                    del self.configs[key]
                return False
            bisect.insort(self._ids.setdefault(key, []), record.id)
        configs[record.id] = record
        return True

    def get(self, tenant: str, task_id: str, config_id: str) -> PushConfigRecord | None:
        return self.configs.get((tenant, task_id), {}).get(config_id)

    def page(self, tenant: str, task_id: str, after: str, limit: int) -> list[PushConfigRecord]:
        key = (tenant, task_id)
        ids = self._ids.get(key, [])
        start = bisect.bisect_right(ids, after) if after else 0
        configs = self.configs.get(key, {})
        return [configs[i] for i in ids[start : start + limit]]

    def delete(self, tenant: str, task_id: str, config_id: str) -> None:
        key = (tenant, task_id)
        configs = self.configs.get(key)
        if configs is not None and configs.pop(config_id, None) is not None:
            self._ids[key].remove(config_id)
            if not configs:
                del self.configs[key], self._ids[key]
        for seq in self.lanes.pop((tenant, task_id, config_id), ()):
            self.deliveries.pop(seq, None)

    def pending_lanes(self) -> list[tuple[Lane, int]]:
        return [(lane, self.deliveries[seqs[0]].next_us) for lane, seqs in self.lanes.items() if seqs]

    def next_deliveries(self, lane: Lane, limit: int) -> list[Delivery]:
        return [self.deliveries[seq] for seq in self.lanes.get(lane, ())[:limit]]

    def pending_count(self) -> int:
        return len(self.deliveries) - len(self._failed)

    def pending_by_partition(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (tenant, _, _), seqs in self.lanes.items():
            if seqs:
                counts[tenant] = counts.get(tenant, 0) + len(seqs)
        return counts

    def _unqueue(self, delivery: Delivery) -> None:
        seqs = self.lanes.get(delivery.lane)
        if seqs is not None:
            if delivery.seq in seqs:
                seqs.remove(delivery.seq)
            if not seqs:
                del self.lanes[delivery.lane]

    def finish(self, seq: int) -> None:
        delivery = self.deliveries.pop(seq, None)
        if delivery is not None:
            self._unqueue(delivery)
            if delivery.failed:
                self._failed.remove(seq)

    def retry(self, seq: int, attempts: int, next_us: int, error: str) -> None:
        delivery = self.deliveries.get(seq)
        if delivery is not None:
            self.deliveries[seq] = msgspec.structs.replace(
                delivery, attempts=attempts, next_us=next_us, error=error
            )

    def fail(self, seq: int, attempts: int, error: str) -> None:
        delivery = self.deliveries.get(seq)
        if delivery is not None and not delivery.failed:
            self._unqueue(delivery)
            self.deliveries[seq] = msgspec.structs.replace(
                delivery, attempts=attempts, failed=True, error=error
            )
            bisect.insort(self._failed, seq)
            while len(self._failed) > self.max_failed:
                self.deliveries.pop(self._failed.pop(0), None)

    def failed(self, after: int, limit: int) -> list[Delivery]:
        start = bisect.bisect_right(self._failed, after)
        return [self.deliveries[s] for s in self._failed[start : start + limit]]


def missing_push_methods(store: object) -> list[str]:
    """The ``PushStore`` methods a store that implements some of them lacks (none when it implements all
    of them, or none of them: a store that keeps no push simply has push off)."""
    names = sorted(name for name in vars(PushStore) if not name.startswith("_"))
    missing = [name for name in names if not callable(getattr(store, name, None))]
    return [] if len(missing) == len(names) else missing
