"""The SQLite store's write side: one writer thread with group commit, and a checkpointer thread.

Every write queued since the writer's last commit is applied in one transaction (a batch of new tasks as one
statement), then each waiting caller is answered; a batch of small new tasks queued while the writer thread
is idle is written on the event loop's thread instead (:meth:`GroupWriter._flush` says why). A write applies
only if the stored version is the one it was made from (``UPDATE ... WHERE version = base``), else that
write alone fails with ConcurrentUpdateError; a transaction that cannot commit (disk full, I/O error,
read-only file, a lock held past the timeout) fails every write in it with StoreError, and none of them is
stored. :class:`Checkpointer` says why checkpoints are not the writer's job. The layout the statements
write is described in :mod:`skillwire.stores.sqlite`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from skillwire.errors import ConcurrentUpdateError, KeyClaimedError, StoreError
from skillwire.stores.base import LogRow, TaskWrite, log_keeps, log_size, task_row, task_size
from skillwire.stores.idempotency import Claim

__all__ = [
    "CHECKPOINT_INTERVAL",
    "CLAIM_COLUMNS",
    "WAL_LIMIT_PAGES",
    "Checkpointer",
    "GroupWriter",
    "apply_write",
    "connect",
    "put_claim",
]

log = logging.getLogger("skillwire.sqlite")

_INSERT = """
INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, head, messages, size, history, artifacts,
    layout, log, log_bytes)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO NOTHING RETURNING seq
"""
_LOG = "INSERT OR REPLACE INTO events (task, first, last, body) VALUES (?, ?, ?, ?)"
#: The columns of a claim, in Claim's order.
CLAIM_COLUMNS = "scope, key, digest, created_us, expires_us, task_id, generation, result, owner"
_CLAIM = (
    f"INSERT INTO idempotency ({CLAIM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key)"
    " DO UPDATE SET digest = excluded.digest, created_us = excluded.created_us, expires_us = excluded.expires_us,"
    " task_id = excluded.task_id, generation = excluded.generation, result = excluded.result, owner = excluded.owner"
    " WHERE idempotency.expires_us <= excluded.created_us RETURNING 1"
)
_UPDATE = """
UPDATE tasks SET context_id = ?, state = ?, updated_us = ?, version = ?, head = ?, messages = ?, size = ?,
    layout = ?, log_bytes = log_bytes + ?
WHERE tenant = ? AND id = ? AND version = ? RETURNING seq, log_bytes
"""
_REWRITE = """
UPDATE tasks SET context_id = ?, state = ?, updated_us = ?, version = ?, head = ?, messages = ?, size = ?,
    layout = ?, log_bytes = log_bytes + ?, history = ?, artifacts = ?
WHERE tenant = ? AND id = ? AND version = ? RETURNING seq, log_bytes
"""

_encode_layout = msgspec.json.Encoder().encode


def _inline(w: TaskWrite) -> tuple[bytes, bytes]:
    """The pieces of a whole-task write, joined into the row's ``history`` and ``artifacts`` JSON arrays
    without encoding again (every message is in ``w.messages``, every artifact is one piece from part 0)."""
    return b"[" + b",".join(w.messages) + b"]", b"[" + b",".join(p.body for p in w.artifacts) + b"]"


Outcome = None | BaseException
#: A statement (or a few) run in the writer's transaction, beside the task writes of its batch.
Op = Callable[[sqlite3.Connection], None]


@dataclass(slots=True, eq=False)  # compared by identity: the writer keeps sets of them
class _Queued:
    write: TaskWrite | Op | Claim
    future: asyncio.Future[Any]


def connect(path: str, timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # a WAL that grew past this during a burst is cut back to it once checkpointed (see Checkpointer)
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_PAGES * 4096}")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return conn


# -- the writer ---------------------------------------------------------------------------------------------


#: Seconds between two checkpoints while the store is written to.
CHECKPOINT_INTERVAL = 0.2
#: A WAL holding more pages than this (about 64 MiB) is checkpointed whole while the writer waits, so that it
#: starts over (see Checkpointer).
WAL_LIMIT_PAGES = 16384


class Checkpointer(threading.Thread):
    """Copies the WAL into the database file, off the writer's path.

    SQLite checkpoints in the commit that fills the WAL, and with ``synchronous=NORMAL`` a checkpoint
    fsyncs the WAL and the database: a writer that checkpoints stops for those fsyncs, and every task in its
    batch waits (measured here: the variance of the SQLite store's throughput was the disk's). So the
    writer's connection does not checkpoint; this thread, on a connection of its own, runs a PASSIVE
    checkpoint (which never blocks the writer) at most every CHECKPOINT_INTERVAL seconds while there are
    writes, and a TRUNCATE one when the store closes. Durability is the same: a commit is in the WAL, which
    survives the process.

    A passive checkpoint never catches up with a writer that writes all the time, and the WAL only starts
    over once a checkpoint has caught up (measured: 556 MB of WAL after 20 s of load). So once the WAL holds
    more than WAL_LIMIT_PAGES pages, this thread takes ``gate``, which the writer holds while it applies a batch: it waits
    for the batch under way, then checkpoints all of the WAL (what the passive checkpoints left: little)
    while nothing writes, so that the writer's next transaction starts the WAL file over from its start
    (a RESTART checkpoint; cutting the file back as well would make the pause longer). Left to SQLite's own locking, the writer would instead wait in
    its busy handler, which sleeps in steps of 1, 2, 5, 10 ms and more (measured: p99 of 35-41 ms)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__(name="skillwire-sqlite-checkpoint", daemon=True)
        #: Held by the writer for each batch, and by this thread while it cuts the WAL back.
        self.gate = threading.Lock()
        self._conn = connect(path, timeout)
        self._wake = threading.Event()
        self._closed = threading.Event()
        #: Set after each checkpoint that succeeded.
        self.checkpointed = threading.Event()

    def written(self) -> None:
        """The writer committed something."""
        self._wake.set()

    def stop(self) -> None:
        self._closed.set()
        self._wake.set()

    def run(self) -> None:
        try:
            while True:
                self._wake.wait()
                # let writes accumulate: one checkpoint, one pair of fsyncs, for all of them
                if self._closed.wait(CHECKPOINT_INTERVAL):
                    break
                self._wake.clear()
                if self._closed.is_set():  # stop() came between the wait and the clear: its wake is gone
                    break
                if self._checkpoint("PASSIVE") > WAL_LIMIT_PAGES:
                    with self.gate:
                        self._checkpoint("RESTART")
            self._checkpoint("TRUNCATE")
        finally:
            self._conn.close()

    def _checkpoint(self, mode: str) -> int:
        """Checkpoint; the pages the WAL holds (0 if the checkpoint failed)."""
        try:
            _, pages, _ = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            self.checkpointed.set()
            return int(pages)
        except sqlite3.Error as exc:  # the disk may be full: the WAL keeps the commits, try again later
            log.warning("SQLite checkpoint failed (the WAL keeps growing until one succeeds): %s", exc)
            return 0


class GroupWriter(threading.Thread):
    def __init__(
        self,
        conn: sqlite3.Connection,
        loop: asyncio.AbstractEventLoop,
        checkpointer: Checkpointer,
        max_log_bytes: Callable[[], int] = lambda: 32 * 1024 * 1024,
        now: sqlite3.Connection | None = None,
    ) -> None:
        """``max_log_bytes``: the store's budget for one task's event log, read at each batch."""
        super().__init__(name="skillwire-sqlite-writer", daemon=True)
        self._conn = conn
        self.max_log_bytes = max_log_bytes
        self._loop = loop
        self._checkpointer = checkpointer
        self._cond = threading.Condition()
        self._pending: list[_Queued] = []
        self._closing = False
        #: whether this thread is applying a batch
        self._busy = False
        #: the connection the loop's thread writes small batches of new tasks with (None: it does not)
        self._now = now
        self._armed = False
        #: Until when (time.monotonic) batches go to the thread whatever they hold: writes came in together
        #: lately (see _flush).
        self._grouping_until = 0.0

    def submit(self, write: TaskWrite | Op | Claim) -> asyncio.Future[Any]:
        """Queue a task write, an op (a function of the connection) to run in the next transaction, or an
        idempotency claim (its future's result: None if made, else the live claim of its key)."""
        fut: asyncio.Future[Any] = self._loop.create_future()
        with self._cond:
            if self._closing:
                raise StoreError("the SQLite store is closed")
            self._pending.append(_Queued(write, fut))
            if self._now is None:
                self._cond.notify()
            elif not self._armed:
                self._armed = True
                self._loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        """On the loop's thread, one turn after the first write of a batch was queued: store the batch here,
        in one statement, when it is all small new tasks and the writer thread is idle; else wake the
        thread for it.

        Why: the common write (a blocking SendMessage creates and finishes its task in one commit) is one
        row, and handing a batch to the writer thread and back costs a condition variable, two thread
        switches, the GIL handed over twice and a ``call_soon_threadsafe`` that wakes the loop; here, a
        SendMessage at c=1 takes 6% fewer instructions (docs/performance.md has the timed A/B).
        The connection used here never waits for a lock (``busy_timeout=0``): when the writer thread or a
        checkpoint holds the write lock, the INSERT fails with SQLITE_BUSY at once, nothing is written,
        and the batch goes to the thread, which waits its turn. Only new tasks are written here: no earlier
        write of theirs can be queued, so each task's writes stay in the order they were made. A batch is
        one statement, as on the thread (one transaction, one set of WAL pages for all of its tasks), and
        durability is the same: the rows are in the WAL before any caller is answered.

        Only while writes come one at a time, though. Under concurrent load a loop turn holds one to a few
        new tasks, and storing each turn's batch here made many small transactions, where the thread, busy
        with one commit while the next writes queue, commits them in larger groups: SQLite served 8% fewer
        SendMessages at c=16 and 21% fewer at c=64 with this path than without it (paired runs,
        docs/performance.md), and 18-22% more at c=1. So once a batch of several writes is seen (here or
        on the thread), batches go to the thread for GROUPING_HOLD seconds."""
        self._armed = False
        conn = self._now
        assert conn is not None
        with self._cond:
            writes = [q.write for q in self._pending]
            now = _monotonic()
            if len(writes) > 1:
                self._grouping_until = now + GROUPING_HOLD
            if (
                self._busy
                or self._closing
                or not writes
                or now < self._grouping_until
                or not _here(writes, self.max_log_bytes())
            ):
                self._cond.notify()
                return
            batch, self._pending = self._pending, []
        try:
            outcomes: list[Outcome | Claim] = list(_insert_new(conn, writes))  # type: ignore[arg-type]
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                with self._cond:  # to the thread, ahead of anything queued meanwhile
                    self._pending[:0] = batch
                    self._cond.notify()
                return
            outcomes = [StoreError(f"the SQLite store could not commit: {exc}")] * len(batch)
        except Exception as exc:  # sqlite3.Error, or a bug: each caller is answered either way
            outcomes = [StoreError(f"the SQLite store could not commit: {exc}")] * len(batch)
        self._checkpointer.written()
        _resolve([q.future for q in batch], outcomes)

    def close_loop_connection(self) -> None:
        """(once the thread has ended: nothing is queued, and nothing is written on the loop any more)"""
        if self._now is not None:
            self._now.close()

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()

    def run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._closing:
                        self._cond.wait()
                    if not self._pending:
                        return
                    batch, self._pending = self._pending, []
                    self._busy = True
                    if len(batch) > 1:
                        self._grouping_until = _monotonic() + GROUPING_HOLD
                try:
                    with self._checkpointer.gate:
                        outcomes = self._apply(batch)
                finally:
                    self._busy = False
                futures = [q.future for q in batch]
                # Dropped before anyone is told, not after: a write may hold a large task's pieces, and a
                # caller that resumes at once must not find them still held by this thread.
                del batch
                self._loop.call_soon_threadsafe(_resolve, futures, outcomes)
                self._checkpointer.written()
                del futures, outcomes
        finally:
            self._conn.close()

    def _apply(self, batch: list[_Queued]) -> list[Outcome | Claim]:
        """The outcome of each of ``batch``: claims first (one statement for all of them, so that a batch of
        new tasks and their claims keeps the fast path), then the writes and ops."""
        claims = [(i, q.write) for i, q in enumerate(batch) if isinstance(q.write, Claim)]
        if not claims:
            return list(self._apply_writes(batch))
        made: list[Outcome | Claim]
        try:
            made = list(put_claims(self._conn, [c for _, c in claims]))
        except sqlite3.Error as exc:
            made = [StoreError(f"the SQLite store could not commit: {exc}")] * len(claims)
        rest = [q for q in batch if not isinstance(q.write, Claim)]
        outcomes: list[Outcome | Claim] = [None] * len(batch)
        for (i, _), outcome in zip(claims, made, strict=True):
            outcomes[i] = outcome
        if rest:
            others = iter(self._apply_writes(rest))
            for i, q in enumerate(batch):
                if not isinstance(q.write, Claim):
                    outcomes[i] = next(others)
        return outcomes

    def _apply_writes(self, batch: list[_Queued]) -> list[Outcome]:
        conn = self._conn
        items = [q.write for q in batch]
        try:
            writes = [w for w in items if isinstance(w, TaskWrite)]
            limit = self.max_log_bytes()
            if (
                len(writes) == len(items)
                and _all_new(writes)
                and all(log_size(w) <= limit and w.claim is None for w in writes)
            ):
                return _insert_new(conn, writes)
            conn.execute("BEGIN IMMEDIATE")
            outcomes = [
                apply_write(conn, w, limit) if isinstance(w, TaskWrite) else w(conn)  # type: ignore[operator]
                for w in items
            ]
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            err = StoreError(f"the SQLite store could not commit: {exc}")
            return [err] * len(batch)
        return outcomes


#: Rows of one multi-row INSERT (14 parameters each, under SQLite's limit of 32,766).
_MAX_INSERT_ROWS = 1000
_insert_sql: dict[tuple[int, bool], str] = {}


def _insert_statement(rows: int, returning: bool) -> str:
    """The INSERT of ``rows`` new tasks (each skipped if its task exists), returning the rows it inserted or
    not."""
    sql = _insert_sql.get((rows, returning))
    if sql is None:
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * rows)
        sql = _insert_sql[rows, returning] = (
            "INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, head, messages, size,"
            f" history, artifacts, layout, log, log_bytes) VALUES {values} ON CONFLICT (tenant, id) DO NOTHING"
            + (" RETURNING tenant, id, seq" if returning else "")
        )
    return sql


def _insert_plain(conn: sqlite3.Connection, chunk: list[TaskWrite], params: list[object]) -> list[Outcome]:
    """Insert tasks that have nothing else to store: each one's outcome. The statement returns no rows (RETURNING
    cost about a seventh of an insert's CPU, measured): when it inserted fewer rows than it was given, the
    rows it did insert are the last ``rowcount`` rowids (one statement takes each next rowid in turn), read
    back to tell which tasks existed already."""
    cursor = conn.execute(_insert_statement(len(chunk), False), params)
    inserted = cursor.rowcount
    if inserted == len(chunk):
        return [None] * len(chunk)
    rows: list[tuple[str, str, int]] = []
    if inserted > 0:
        last = cursor.lastrowid
        assert last is not None
        rows = conn.execute(
            "SELECT tenant, id, seq FROM tasks WHERE seq > ? AND seq <= ?", (last - inserted, last)
        ).fetchall()
        if len(rows) != inserted:  # rowids past 2**63 - 1 are taken at random: not seen in practice
            raise sqlite3.DatabaseError("the tasks inserted cannot be told from those that existed")
    return _conflicts(chunk, rows)


def _all_new(writes: list[TaskWrite]) -> bool:
    """Whether every write creates a task, none of them twice (so their order does not matter)."""
    return all(w.base == 0 for w in writes) and len({(w.tenant, w.task_id) for w in writes}) == len(writes)


def _insert_new(conn: sqlite3.Connection, writes: list[TaskWrite]) -> list[Outcome]:
    """Create these tasks with one statement per thousand, each its own transaction.

    Why: Python's sqlite3 releases and re-takes the GIL around every statement it runs, and while the event
    loop is busy each re-take waits its turn (tens of microseconds); BEGIN, INSERT, COMMIT per task made the
    writer thread the bottleneck. The common write (SendMessage creates and finishes a task in one commit) is
    a new task, so a batch of them is now one statement. Each row is a write of its own: a task that
    already exists is not inserted (ON CONFLICT DO NOTHING) while the others are, and the rows it inserted are
    known (returned, or read back: _insert_plain), so each write that is not among them is told its task
    exists (even a write identical to the stored row: it was not this write that stored it, and its
    deliveries are not queued)."""
    outcomes: list[Outcome] = []
    for first in range(0, len(writes), _MAX_INSERT_ROWS):
        chunk = writes[first : first + _MAX_INSERT_ROWS]
        params: list[object] = []
        for w in chunk:
            params.extend(_insert_params(w))
        if not any(w.deliveries or w.configs or len(w.log) > 1 for w in chunk):
            outcomes.extend(_insert_plain(conn, chunk, params))
            continue
        sql = _insert_statement(len(chunk), True)
        # With push configs, deliveries or more log rows than the row holds, the tasks and those are one
        # transaction.
        conn.execute("BEGIN IMMEDIATE")
        try:
            inserted = conn.execute(sql, params).fetchall()
            found = _conflicts(chunk, inserted)
            seqs = {(tenant, task_id): seq for tenant, task_id, seq in inserted}
            stored = [w for w, outcome in zip(chunk, found, strict=True) if outcome is None]
            _enqueue(conn, stored)
            for w in stored:
                _log(conn, seqs[w.tenant, w.task_id], w.log[1:])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        outcomes.extend(found)
    return outcomes


_ENQUEUE = (
    "INSERT INTO deliveries (tenant, task_id, config_id, body, created_us, trace) VALUES (?, ?, ?, ?, ?, ?)"
)


def _enqueue(conn: sqlite3.Connection, writes: list[TaskWrite]) -> None:
    """Store the push configs and queue the deliveries these writes carry (see :mod:`skillwire.stores.push`)."""
    configs = [(c.tenant, c.task_id, c.id, c.body, c.shape, c.issuer) for w in writes for c in w.configs]
    if configs:
        conn.executemany(
            "INSERT OR REPLACE INTO push_configs (tenant, task_id, id, body, shape, issuer)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            configs,
        )
    rows = [
        (w.tenant, w.task_id, out.config_id, out.body, w.updated_us, out.trace)
        for w in writes
        for out in w.deliveries
    ]
    if rows:
        conn.executemany(_ENQUEUE, rows)


def _log(conn: sqlite3.Connection, seq: int, rows: tuple[LogRow, ...]) -> None:
    """Add these rows to the event log of the task whose row is ``seq``."""
    if rows:
        conn.executemany(_LOG, [(seq, r.first, r.last, r.body) for r in rows])


#: How long (s) batches keep going to the writer thread after one that held several writes (see
#: GroupWriter._flush).
GROUPING_HOLD = 0.1
_monotonic = time.monotonic

#: The most bytes of task rows a batch stored on the loop's thread holds (a larger batch is copied into the
#: WAL by the writer thread, without holding up the loop).
_NOW_BYTES = 64 * 1024


def _here(writes: list[Any], max_log_bytes: int) -> bool:
    """Whether a batch can be stored on the loop's thread: small new tasks, with nothing else to write."""
    return (
        all(
            isinstance(w, TaskWrite)
            and w.claim is None
            and not w.deliveries
            and not w.configs
            and len(w.log) <= 1
            and log_size(w) <= max_log_bytes
            for w in writes
        )
        and _all_new(writes)
        and sum(task_size(w) for w in writes) <= _NOW_BYTES
    )


def _trim_log(conn: sqlite3.Connection, seq: int, max_bytes: int) -> None:
    """Delete the oldest rows of the task's event log (the inline one first) until it keeps within
    ``max_bytes`` again (see :func:`~skillwire.stores.base.log_keeps`)."""
    inline = conn.execute("SELECT length(log) FROM tasks WHERE seq = ?", (seq,)).fetchone()[0]
    rows = conn.execute(
        "SELECT first, length(body) FROM events WHERE task = ? ORDER BY first", (seq,)
    ).fetchall()
    sizes = ([inline] if inline else []) + [size for _, size in rows]
    drop = len(sizes) - log_keeps(sizes, max_bytes)
    if inline and drop:
        conn.execute("UPDATE tasks SET log = x'' WHERE seq = ?", (seq,))
        drop -= 1
    if drop:
        conn.execute("DELETE FROM events WHERE task = ? AND first <= ?", (seq, rows[drop - 1][0]))
    conn.execute(
        "UPDATE tasks SET log_bytes = length(log) + (SELECT COALESCE(SUM(length(body)), 0) FROM events"
        " WHERE task = ?1) WHERE seq = ?1",
        (seq,),
    )


def _conflicts(writes: list[TaskWrite], inserted: list[tuple[str, str, int]]) -> list[Outcome]:
    """Each write's outcome, given the ``(tenant, id, seq)`` rows the insert returned: one it did not insert
    found its task already there."""
    if len(inserted) == len(writes):
        return [None] * len(writes)
    mine = {(tenant, task_id) for tenant, task_id, _ in inserted}
    return [
        None if (w.tenant, w.task_id) in mine else ConcurrentUpdateError(f"task {w.task_id} already exists")
        for w in writes
    ]


def _insert_params(w: TaskWrite) -> tuple[object, ...]:
    return (
        *task_row(w),
        *_inline(w),
        _encode_layout(w.layout),
        w.log[0].body if w.log else b"",
        log_size(w),
    )


_claims_sql: dict[int, str] = {}


def put_claims(conn: sqlite3.Connection, claims: list[Claim]) -> list[Claim | None]:
    """Make each of ``claims`` unless a live claim of its key is there (that claim is its outcome), in one
    statement (a second claim of one key in the batch finds the first); a few lapsed claims go first."""
    conn.execute(_FORGET_LAPSED, (claims[0].created_us,))
    outcomes: list[Claim | None] = []
    for first in range(0, len(claims), _MAX_CLAIM_ROWS):
        chunk = claims[first : first + _MAX_CLAIM_ROWS]
        sql = _claims_sql.get(len(chunk))
        if sql is None:
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(chunk))
            sql = _claims_sql[len(chunk)] = _CLAIM.replace(
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", f"VALUES {values}"
            ).replace("RETURNING 1", "RETURNING scope, key, created_us")
        params = [value for claim in chunk for value in msgspec.structs.astuple(claim)]
        made = {tuple(row) for row in conn.execute(sql, params).fetchall()}
        for claim in chunk:
            if (claim.scope, claim.key, claim.created_us) in made:
                made.discard((claim.scope, claim.key, claim.created_us))
                outcomes.append(None)
            else:
                row = conn.execute(
                    f"SELECT {CLAIM_COLUMNS} FROM idempotency WHERE scope = ? AND key = ?",
                    (claim.scope, claim.key),
                ).fetchone()
                outcomes.append(Claim(*row))
    return outcomes


#: Claims in one multi-row INSERT (9 parameters each).
_MAX_CLAIM_ROWS = 1000
_FORGET_LAPSED = (
    "DELETE FROM idempotency WHERE (scope, key) IN (SELECT scope, key FROM idempotency"
    " WHERE expires_us <= ? ORDER BY expires_us LIMIT 16)"
)


def put_claim(conn: sqlite3.Connection, claim: Claim) -> Claim | None:
    """Store ``claim`` unless a live claim of its key is there (then that one is returned); a few lapsed
    claims are deleted on the way, so that each claim made pays for the removal of some."""
    conn.execute(
        "DELETE FROM idempotency WHERE (scope, key) IN (SELECT scope, key FROM idempotency"
        " WHERE expires_us <= ? ORDER BY expires_us LIMIT 16)",
        (claim.created_us,),
    )
    if conn.execute(_CLAIM, msgspec.structs.astuple(claim)).fetchone() is not None:
        return None
    row = conn.execute(
        f"SELECT {CLAIM_COLUMNS} FROM idempotency WHERE scope = ? AND key = ?", (claim.scope, claim.key)
    ).fetchone()
    return Claim(*row)


def apply_write(conn: sqlite3.Connection, w: TaskWrite, max_log_bytes: int = 32 * 1024 * 1024) -> Outcome:
    """Apply one write inside the writer's transaction (see _apply_write); a write with an idempotency claim
    is applied whole or not at all (a savepoint), and fails with KeyClaimedError when its key is claimed."""
    if w.claim is None:
        return _apply_write(conn, w, max_log_bytes)
    conn.execute("SAVEPOINT claimed")
    try:
        outcome: Outcome = (
            KeyClaimedError(f"the idempotency key of task {w.task_id}'s request is claimed already")
            if put_claim(conn, w.claim) is not None
            else _apply_write(conn, w, max_log_bytes)
        )
    except BaseException:
        conn.execute("ROLLBACK TO claimed")
        conn.execute("RELEASE claimed")
        raise
    conn.execute("ROLLBACK TO claimed" if outcome is not None else "RELEASE claimed")
    if outcome is not None:
        conn.execute("RELEASE claimed")
    return outcome


def _apply_write(conn: sqlite3.Connection, w: TaskWrite, max_log_bytes: int) -> Outcome:
    """Apply one write inside the writer's transaction; a version mismatch changes nothing and is returned.

    A new task is one row: its history and artifacts go inline, in the ``tasks`` row (the common task is
    written once, whole, and one statement is a third of the cost of three). Later writes add rows to
    ``messages`` and ``artifacts`` (numbered on from the inline ones); a whole-task write over a stored task
    replaces the inline content and drops those rows."""
    layout = w.layout
    head = (w.context_id, w.state.value, w.updated_us, w.version, w.head, layout.messages, layout.size)
    whole = w.base == 0 or w.rewrite
    if w.base == 0:
        inserted = conn.execute(_INSERT, _insert_params(w)).fetchone()
        if inserted is None:
            return ConcurrentUpdateError(f"task {w.task_id} already exists")
        _enqueue(conn, [w])
        _log(conn, inserted[0], w.log[1:])
        if log_size(w) > max_log_bytes:
            _trim_log(conn, inserted[0], max_log_bytes)
        return None
    logged = log_size(w)
    if w.rewrite:
        found = conn.execute(
            _REWRITE, (*head, _encode_layout(layout), logged, *_inline(w), w.tenant, w.task_id, w.base)
        ).fetchone()
    else:
        found = conn.execute(
            _UPDATE, (*head, _encode_layout(layout), logged, w.tenant, w.task_id, w.base)
        ).fetchone()
    if found is None:
        return ConcurrentUpdateError(f"task {w.task_id} is not at version {w.base}: it changed meanwhile")
    seq, log_bytes = found
    _enqueue(conn, [w])
    _log(conn, seq, w.log)
    if log_bytes > max_log_bytes:
        _trim_log(conn, seq, max_log_bytes)
    if whole:
        conn.execute("DELETE FROM messages WHERE task = ?", (seq,))
        conn.execute("DELETE FROM artifacts WHERE task = ?", (seq,))
        return None
    for piece in w.artifacts:
        if piece.offset == 0:
            conn.execute("DELETE FROM artifacts WHERE task = ? AND idx = ?", (seq, piece.index))
    if w.messages:
        first = w.first_message
        conn.executemany(
            "INSERT OR REPLACE INTO messages (task, idx, body) VALUES (?, ?, ?)",
            [(seq, first + i, body) for i, body in enumerate(w.messages)],
        )
    if w.artifacts:
        conn.executemany(
            "INSERT OR REPLACE INTO artifacts (task, idx, start, body) VALUES (?, ?, ?, ?)",
            [(seq, p.index, p.offset, p.body) for p in w.artifacts],
        )
    return None


def _resolve(futures: list[asyncio.Future[Any]], outcomes: list[Outcome | Claim]) -> None:
    for future, outcome in zip(futures, outcomes, strict=True):
        if future.done():
            continue
        if outcome is None or isinstance(outcome, Claim):
            future.set_result(outcome)
        else:
            future.set_exception(outcome)
