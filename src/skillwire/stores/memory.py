"""An in-memory TaskStore: fast, shared by nothing, gone when the process ends.

Tasks are kept as their encoded pieces (see :mod:`skillwire.stores.base`), so a caller's later changes to a
Task never leak into the store and a write costs what it adds. It keeps at most ``max_finished`` tasks in a
terminal state: once more have finished, the ones that finished first are forgotten (tasks still running or
waiting for input are always kept).

A row holds only bytes and tuples, in a Struct the garbage collector does not track: ten thousand stored
tasks add nothing to the work of a full collection.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence

import msgspec

from skillwire.errors import ConcurrentUpdateError, KeyClaimedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse, Task
from skillwire.protocol.states import TaskState
from skillwire.stores.base import (
    LOG_ROW_EVENTS,
    UNFINISHED_STATES,
    LogRow,
    StoredTask,
    TaskPage,
    TaskQuery,
    TaskWrite,
    assemble,
    cursor_int,
    decode_cursor,
    encode_cursor,
    history_start,
    instant_us,
    layout_of,
    read_log,
    trim_log,
)
from skillwire.stores.idempotency import Claim, MemoryClaims
from skillwire.stores.push import Delivery, Lane, MemoryPushState, PushConfigRecord
from skillwire.stores.retention import Pruned, StoreStats

__all__ = ["MemoryTaskStore", "open_url"]

_Key = tuple[str, str]


class _Row(msgspec.Struct, gc=False):
    version: int
    context_id: str
    state: TaskState
    updated_us: int
    head: bytes
    messages: tuple[bytes, ...] = ()
    #: Per artifact, its pieces as (part offset, body), in offset order: a tuple while it has few pieces (so
    #: the row stays untracked), a list once it has many (so a long stream appends in constant time).
    artifacts: tuple[tuple[tuple[int, bytes], ...] | list[tuple[int, bytes]], ...] = ()
    #: Insertion order, the tie-breaker between tasks updated in the same microsecond.
    seq: int = 0
    #: The task's event log, oldest row first (a tuple while short, a list once long, as ``artifacts``),
    #: and the bytes of its rows.
    log: tuple[LogRow, ...] | list[LogRow] = ()
    log_bytes: int = 0

    def chunks(self) -> list[list[bytes]]:
        return [[body for _, body in pieces] for pieces in self.artifacts]


class MemoryTaskStore:
    url = "memory://"

    def __init__(self, *, max_finished: int = 10_000, max_log_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_finished = max_finished
        self.max_log_bytes = max_log_bytes
        self._rows: dict[_Key, _Row] = {}
        self._finished: OrderedDict[_Key, None] = OrderedDict()
        self._seq = 0
        self._push = MemoryPushState()
        self._claims = MemoryClaims()

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def commit(self, write: TaskWrite) -> None:
        key = (write.tenant, write.task_id)
        row = self._rows.get(key)
        stored = 0 if row is None else row.version
        if stored != write.base:
            raise ConcurrentUpdateError(
                f"task {write.task_id} is at version {stored}, not {write.base}: it changed meanwhile"
            )
        if write.claim is not None and self._claims.put(write.claim) is not None:
            raise KeyClaimedError(f"the idempotency key of task {write.task_id}'s request is claimed already")
        if row is None:
            self._seq += 1
            row = self._rows[key] = _Row(
                write.version, write.context_id, write.state, write.updated_us, write.head, seq=self._seq
            )
        else:
            row.version, row.context_id, row.head = write.version, write.context_id, write.head
            row.state, row.updated_us = write.state, write.updated_us
        _apply_pieces(row, write)
        if write.log:
            _append_log(row, write.log, self.max_log_bytes)
        for record in write.configs:
            self._push.put(record, max_per_task=2**31)
        if write.deliveries:
            self._push.enqueue(write.tenant, write.task_id, write.deliveries, write.updated_us)
        if write.state.is_terminal:
            self._finished[key] = None
            self._finished.move_to_end(key)
            while len(self._finished) > self.max_finished:
                old, _ = self._finished.popitem(last=False)
                self._rows.pop(old, None)
                self._push.forget_task(*old)
        else:
            self._finished.pop(key, None)

    async def get(
        self, task_id: str, *, tenant: str = "", history_length: int | None = None
    ) -> StoredTask | None:
        row = self._rows.get((tenant, task_id))
        if row is None:
            return None
        start = history_start(len(row.messages), history_length)
        chunks = row.chunks()
        task = assemble(row.head, row.messages[start:], chunks)
        layout = layout_of(task, row.head, row.messages, chunks) if history_length is None else None
        return StoredTask(task, row.version, layout)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        after_us = instant_us(query.updated_after) if query.updated_after is not None else None
        matches = [
            (row.updated_us, row.seq, row)
            for (tenant, _), row in self._rows.items()
            if tenant == query.tenant
            and (not query.context_id or row.context_id == query.context_id)
            and (query.state is None or row.state == query.state)
            and (after_us is None or row.updated_us >= after_us)
        ]
        matches.sort(key=lambda m: (m[0], m[1]), reverse=True)
        if query.page_token:
            us, tie, total = decode_cursor(query.page_token)
            cursor = (us, cursor_int(tie))
            matches = [m for m in matches if (m[0], m[1]) < cursor]
        else:
            total = len(matches)
        tasks: list[Task] = []
        spent = 0
        last: tuple[int, int] | None = None
        for us, seq, row in matches[: query.page_size]:
            start = history_start(len(row.messages), query.history_length)
            messages = row.messages[start:]
            chunks = row.chunks() if query.include_artifacts else None
            cost = len(row.head) + sum(map(len, messages)) + sum(len(c) for a in chunks or () for c in a)
            if tasks and spent + cost > query.max_bytes:
                break
            spent += cost
            tasks.append(assemble(row.head, messages, chunks))
            last = (us, seq)
        more = len(tasks) < len(matches)
        token = encode_cursor(last[0], str(last[1]), total) if more and last is not None else ""
        return TaskPage(tasks, total, token)

    async def events(
        self, task_id: str, *, tenant: str = "", after: int = 0, limit: int = LOG_ROW_EVENTS
    ) -> list[StreamResponse] | None:
        row = self._rows.get((tenant, task_id))
        if row is None:
            return None
        log = row.log
        if not log:
            return []
        lo, hi = 0, len(log)
        while lo < hi:  # the first row that holds a generation past ``after``
            mid = (lo + hi) // 2
            if log[mid].last <= after:
                lo = mid + 1
            else:
                hi = mid
        bodies = (log[i].body for i in range(lo, len(log)))  # read_log stops at ``limit``
        return read_log(bodies, after, limit)

    async def unfinished(
        self, cursor: str = "", limit: int = 500
    ) -> tuple[list[tuple[str, StoredTask]], str]:
        after = cursor_int(cursor) if cursor else 0
        rows = sorted(
            (row.seq, key)
            for key, row in self._rows.items()
            if row.state in UNFINISHED_STATES and row.seq > after
        )[:limit]
        batch = []
        for _, (tenant, task_id) in rows:
            stored = await self.get(task_id, tenant=tenant)
            if stored is not None:
                batch.append((tenant, stored))
        return batch, str(rows[-1][0]) if len(rows) == limit else ""

    # -- retention (see skillwire.stores.retention) ----------------------------------------------------------

    def _finished_before(self, before_us: int, limit: int | None) -> list[_Key]:
        """Finished tasks older than ``before_us``, oldest first (``limit`` at most)."""
        rows = self._rows
        found = [(rows[key].updated_us, rows[key].seq, key) for key in self._finished]
        found = [entry for entry in found if entry[0] < before_us]
        chosen = heapq.nsmallest(limit, found) if limit is not None else found
        return [key for _, _, key in chosen]

    async def prune_finished(self, before_us: int, limit: int = 200) -> Pruned:
        doomed = self._finished_before(before_us, limit)
        messages = artifacts = events = configs = deliveries = 0
        for key in doomed:
            row = self._rows.pop(key)
            del self._finished[key]
            messages += len(row.messages)
            artifacts += sum(len(pieces) for pieces in row.artifacts)
            events += len(row.log)
            gone = self._push.prune_task(*key)
            configs, deliveries = configs + gone[0], deliveries + gone[1]
        claims = self._claims.forget_tasks(set(doomed)) if doomed else 0
        return Pruned(
            tasks=len(doomed),
            messages=messages,
            artifacts=artifacts,
            events=events,
            push_configs=configs,
            deliveries=deliveries,
            claims=claims,
        )

    async def count_finished(self, before_us: int) -> dict[str, int]:
        counts: dict[str, int] = {}
        for key in self._finished_before(before_us, None):
            state = self._rows[key].state.value
            counts[state] = counts.get(state, 0) + 1
        return counts

    async def stats(self) -> StoreStats:
        counts: dict[str, int] = {}
        size = 0
        oldest: int | None = None
        for row in self._rows.values():
            counts[row.state.value] = counts.get(row.state.value, 0) + 1
            size += len(row.head) + sum(map(len, row.messages)) + row.log_bytes
            size += sum(len(body) for pieces in row.artifacts for _, body in pieces)
            if row.state.is_terminal and (oldest is None or row.updated_us < oldest):
                oldest = row.updated_us
        return StoreStats(tasks=counts, size_bytes=size, oldest_finished_us=oldest)

    # -- idempotency keys (see skillwire.stores.idempotency) ------------------------------------------------

    async def recall(self, scope: str, key: str, now_us: int) -> Claim | None:
        return self._claims.live(scope, key, now_us)

    async def claim(self, claim: Claim) -> Claim | None:
        return self._claims.put(claim)

    async def settle(self, scope: str, key: str, result: bytes) -> None:
        self._claims.settle(scope, key, result)

    # -- push notifications (see skillwire.stores.push) -----------------------------------------------------

    async def put_push_config(self, record: PushConfigRecord, max_per_task: int) -> bool:
        return self._push.put(record, max_per_task)

    async def get_push_config(self, tenant: str, task_id: str, config_id: str) -> PushConfigRecord | None:
        return self._push.get(tenant, task_id, config_id)

    async def list_push_configs(
        self, tenant: str, task_id: str, *, after: str = "", limit: int = 100
    ) -> list[PushConfigRecord]:
        return self._push.page(tenant, task_id, after, limit)

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        self._push.delete(tenant, task_id, config_id)

    async def pending_lanes(self) -> list[tuple[Lane, int]]:
        return self._push.pending_lanes()

    async def next_deliveries(self, lane: Lane, limit: int = 1) -> list[Delivery]:
        return self._push.next_deliveries(lane, limit)

    async def finish_deliveries(self, seqs: Sequence[int]) -> None:
        for seq in seqs:
            self._push.finish(seq)

    async def pending_count(self) -> int:
        return self._push.pending_count()

    async def pending_by_partition(self) -> dict[str, int]:
        return self._push.pending_by_partition()

    async def retry_delivery(self, seq: int, attempts: int, next_us: int, error: str) -> None:
        self._push.retry(seq, attempts, next_us, error)

    async def fail_delivery(self, seq: int, attempts: int, error: str) -> None:
        self._push.fail(seq, attempts, error)

    async def failed_deliveries(self, after: int = 0, limit: int = 100) -> list[Delivery]:
        return self._push.failed(after, limit)


_FEW_PIECES = 16


def _append_log(row: _Row, rows: tuple[LogRow, ...], max_bytes: int) -> None:
    log = row.log
    if isinstance(log, list):
        log.extend(rows)
    elif len(log) + len(rows) > _FEW_PIECES:
        row.log = [*log, *rows]
    else:
        row.log = (*log, *rows)
    row.log_bytes += sum(len(r.body) for r in rows)
    if row.log_bytes > max_bytes:
        kept = trim_log(list(row.log), max_bytes)
        row.log, row.log_bytes = kept, sum(len(r.body) for r in kept)


def _apply_pieces(row: _Row, write: TaskWrite) -> None:
    messages = () if write.rewrite else row.messages[: write.first_message]
    row.messages = messages + write.messages
    artifacts = [] if write.rewrite else list(row.artifacts)
    for piece in write.artifacts:
        entry = (piece.offset, piece.body)
        if piece.index == len(artifacts):
            artifacts.append((entry,))
            continue
        pieces = artifacts[piece.index]
        if piece.offset == 0:
            artifacts[piece.index] = (entry,)
            continue
        kept = (
            [p for p in pieces if p[0] < piece.offset] if pieces and pieces[-1][0] >= piece.offset else pieces
        )
        if isinstance(kept, list) or len(kept) >= _FEW_PIECES:
            grown = kept if isinstance(kept, list) else list(kept)
            grown.append(entry)
            artifacts[piece.index] = grown
        else:
            artifacts[piece.index] = (*kept, entry)
    row.artifacts = tuple(artifacts[: write.artifact_count])


def open_url(url: str, limits: Limits, setting: str) -> MemoryTaskStore:
    """``memory://`` (the table in :mod:`skillwire.stores.schemes` sends it here)."""
    return MemoryTaskStore(
        max_finished=limits.memory_store_finished_tasks, max_log_bytes=limits.max_task_log_bytes
    )
