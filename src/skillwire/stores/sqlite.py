"""The default TaskStore: one SQLite file in WAL mode, written with group commit, owned by one process.

Layout (schema 2): a ``tasks`` row per task holds its head (the task without history and artifacts) and the
columns the listings filter on; ``messages`` holds one row per history message and ``artifacts`` one row per
artifact piece (the artifact as first written, then each appended chunk), so a write inserts only what it
adds. Schema 1 files (one blob per task) are migrated when opened.

Writes go to one writer thread. Every write queued since the writer's last commit is applied in one
transaction, then each waiting caller is answered. A write applies only if the stored version is the one it
was made from (``UPDATE ... WHERE version = base``), else that write alone fails with ConcurrentUpdateError;
a transaction that cannot commit (disk full, I/O error, read-only file, a lock held past ``timeout``) fails
every write in it with StoreError, and none of them is stored.

Reads run on a small pool of threads, each with its own connection, inside a read transaction so the pieces
of a task are read from one snapshot; WAL readers never wait for the writer, and the event loop waits for
neither.

Durability: ``synchronous=NORMAL`` in WAL mode. A committed write survives the process being killed
(``kill -9``); after a power cut the last few commits may be lost.

Ownership: the process that opens the store holds an exclusive lock (``flock``) on ``PATH.lock``, which
names it (pid, host, start time). A second process is refused with a message naming the owner; the kernel
releases the lock when the owner exits, however it exits. So at start-up every SUBMITTED or WORKING task in
the file was left by a process that is gone (docs/durability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, TypeVar

import msgspec

from skillwire.errors import ConcurrentUpdateError, StoreError
from skillwire.protocol.models import Artifact, Message, Part, Task
from skillwire.stores.base import (
    UNFINISHED_STATES,
    Layout,
    StoredTask,
    TaskPage,
    TaskQuery,
    TaskWrite,
    cursor_int,
    decode_cursor,
    encode_cursor,
    history_start,
    instant_us,
    write_task,
)

try:  # POSIX; elsewhere the store runs without the owner lock (say so at open)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["SQLiteTaskStore"]

log = logging.getLogger("skillwire.sqlite")

T = TypeVar("T")

SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    seq         INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    context_id  TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    updated_us  INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    head        BLOB    NOT NULL,
    messages    INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    history     BLOB    NOT NULL,
    artifacts   BLOB    NOT NULL,
    layout      BLOB    NOT NULL,
    UNIQUE (tenant, id)
);
CREATE INDEX IF NOT EXISTS tasks_by_time ON tasks (tenant, updated_us, seq);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (tenant, context_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (tenant, state, updated_us, seq);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (seq)
    WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING');
CREATE TABLE IF NOT EXISTS messages (
    task INTEGER NOT NULL,
    idx  INTEGER NOT NULL,
    body BLOB    NOT NULL,
    PRIMARY KEY (task, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts (
    task   INTEGER NOT NULL,
    idx    INTEGER NOT NULL,
    start  INTEGER NOT NULL,
    body   BLOB    NOT NULL,
    PRIMARY KEY (task, idx, start)
) WITHOUT ROWID;
"""
_INSERT = """
INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, head, messages, size, history, artifacts,
    layout)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO NOTHING
"""
_UPDATE = """
UPDATE tasks SET context_id = ?, state = ?, updated_us = ?, version = ?, head = ?, messages = ?, size = ?,
    layout = ?
WHERE tenant = ? AND id = ? AND version = ? RETURNING seq
"""
_REWRITE = """
UPDATE tasks SET context_id = ?, state = ?, updated_us = ?, version = ?, head = ?, messages = ?, size = ?,
    layout = ?, history = ?, artifacts = ?
WHERE tenant = ? AND id = ? AND version = ? RETURNING seq
"""

# A task's row holds, besides its head, its history and its artifacts as first written (JSON arrays), in two
# columns, so that a listing without artifacts does not read them.
_decode_history = msgspec.json.Decoder(list[Message]).decode
_decode_artifacts = msgspec.json.Decoder(list[Artifact]).decode
_decode_message = msgspec.json.Decoder(Message).decode
_decode_artifact = msgspec.json.Decoder(Artifact).decode
_decode_parts = msgspec.json.Decoder(list[Part]).decode
_decode_head = msgspec.json.Decoder(Task).decode
_decode_layout = msgspec.json.Decoder(Layout).decode
_encode_layout = msgspec.json.Encoder().encode


def _inline(w: TaskWrite) -> tuple[bytes, bytes]:
    """The pieces of a whole-task write, joined into the row's ``history`` and ``artifacts`` JSON arrays
    without encoding again (every message is in ``w.messages``, every artifact is one piece from part 0)."""
    return b"[" + b",".join(w.messages) + b"]", b"[" + b",".join(p.body for p in w.artifacts) + b"]"


Outcome = None | BaseException


@dataclass(slots=True, eq=False)  # compared by identity: the writer keeps sets of them
class _Queued:
    write: TaskWrite
    future: asyncio.Future[None]


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return conn


# -- the writer ---------------------------------------------------------------------------------------------


#: Seconds between two checkpoints while the store is written to.
CHECKPOINT_INTERVAL = 0.2
#: A WAL holding more pages than this (about 64 MiB) is checkpointed whole while the writer waits, so that it
#: starts over (see _Checkpointer).
WAL_LIMIT_PAGES = 16384


class _Checkpointer(threading.Thread):
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
        self._conn = _connect(path, timeout)
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


class _GroupWriter(threading.Thread):
    def __init__(
        self,
        conn: sqlite3.Connection,
        loop: asyncio.AbstractEventLoop,
        checkpointer: _Checkpointer,
    ) -> None:
        super().__init__(name="skillwire-sqlite-writer", daemon=True)
        self._conn = conn
        self._loop = loop
        self._checkpointer = checkpointer
        self._cond = threading.Condition()
        self._pending: list[_Queued] = []
        self._closing = False

    def submit(self, write: TaskWrite) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self._loop.create_future()
        with self._cond:
            if self._closing:
                raise StoreError("the SQLite store is closed")
            self._pending.append(_Queued(write, fut))
            self._cond.notify()
        return fut

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
                with self._checkpointer.gate:
                    outcomes = self._apply(batch)
                self._loop.call_soon_threadsafe(_resolve, batch, outcomes)
                self._checkpointer.written()
                # Not kept while waiting for the next batch: a write may hold a large task's pieces.
                del batch, outcomes
        finally:
            self._conn.close()

    def _apply(self, batch: list[_Queued]) -> list[Outcome]:
        conn = self._conn
        writes = [q.write for q in batch]
        try:
            if _all_new(writes):
                return _insert_new(conn, writes)
            conn.execute("BEGIN IMMEDIATE")
            outcomes = [_apply_write(conn, w) for w in writes]
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            err = StoreError(f"the SQLite store could not commit: {exc}")
            return [err] * len(batch)
        return outcomes


#: Rows of one multi-row INSERT (12 parameters each, under SQLite's limit of 32,766).
_MAX_INSERT_ROWS = 1000
_insert_sql: dict[int, str] = {}


def _all_new(writes: list[TaskWrite]) -> bool:
    """Whether every write creates a task, none of them twice (so their order does not matter)."""
    return all(w.base == 0 for w in writes) and len({(w.tenant, w.task_id) for w in writes}) == len(writes)


def _insert_new(conn: sqlite3.Connection, writes: list[TaskWrite]) -> list[Outcome]:
    """Create these tasks with one statement per thousand, each its own transaction.

    Why: Python's sqlite3 releases and re-takes the GIL around every statement it runs, and while the event
    loop is busy each re-take waits its turn (tens of microseconds); BEGIN, INSERT, COMMIT per task made the
    writer thread the bottleneck. The common write (SendMessage creates and finishes a task in one commit) is
    a new task, so a batch of them is now one statement. Each row is a write of its own: a task that
    already exists is not inserted (ON CONFLICT DO NOTHING) while the others are, and the rare short count
    is sorted out afterwards, task by task."""
    outcomes: list[Outcome] = []
    for first in range(0, len(writes), _MAX_INSERT_ROWS):
        chunk = writes[first : first + _MAX_INSERT_ROWS]
        sql = _insert_sql.get(len(chunk))
        if sql is None:
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(chunk))
            sql = _insert_sql[len(chunk)] = (
                "INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, head, messages, size,"
                f" history, artifacts, layout) VALUES {values} ON CONFLICT (tenant, id) DO NOTHING"
            )
        params: list[object] = []
        for w in chunk:
            params.extend(_insert_params(w))
        if conn.execute(sql, params).rowcount == len(chunk):
            outcomes.extend([None] * len(chunk))
        else:
            outcomes.extend(_which_conflicted(conn, chunk))
    return outcomes


def _which_conflicted(conn: sqlite3.Connection, writes: list[TaskWrite]) -> list[Outcome]:
    """After an insert that created fewer rows than it had: each write whose row is not the one it asked
    for found its task already there."""
    outcomes: list[Outcome] = []
    for w in writes:
        found = conn.execute(
            "SELECT version, head FROM tasks WHERE tenant = ? AND id = ?", (w.tenant, w.task_id)
        ).fetchone()
        mine = found is not None and found[0] == w.version and found[1] == w.head
        outcomes.append(None if mine else ConcurrentUpdateError(f"task {w.task_id} already exists"))
    return outcomes


def _insert_params(w: TaskWrite) -> tuple[object, ...]:
    layout = w.layout
    return (
        w.tenant,
        w.task_id,
        w.context_id,
        w.state.value,
        w.updated_us,
        w.version,
        w.head,
        layout.messages,
        layout.size,
        *_inline(w),
        _encode_layout(layout),
    )


def _apply_write(conn: sqlite3.Connection, w: TaskWrite) -> Outcome:
    """Apply one write inside the writer's transaction; a version mismatch changes nothing and is returned.

    A new task is one row: its history and artifacts go inline, in the ``tasks`` row (the common task is
    written once, whole, and one statement is a third of the cost of three). Later writes add rows to
    ``messages`` and ``artifacts`` (numbered on from the inline ones); a whole-task write over a stored task
    replaces the inline content and drops those rows."""
    layout = w.layout
    head = (w.context_id, w.state.value, w.updated_us, w.version, w.head, layout.messages, layout.size)
    whole = w.base == 0 or w.rewrite
    if w.base == 0:
        cur = conn.execute(_INSERT, _insert_params(w))
        if cur.rowcount == 0:
            return ConcurrentUpdateError(f"task {w.task_id} already exists")
        return None
    if w.rewrite:
        found = conn.execute(
            _REWRITE, (*head, _encode_layout(layout), *_inline(w), w.tenant, w.task_id, w.base)
        ).fetchone()
    else:
        found = conn.execute(_UPDATE, (*head, _encode_layout(layout), w.tenant, w.task_id, w.base)).fetchone()
    if found is None:
        return ConcurrentUpdateError(f"task {w.task_id} is not at version {w.base}: it changed meanwhile")
    seq = found[0]
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


def _resolve(batch: list[_Queued], outcomes: list[Outcome]) -> None:
    for queued, outcome in zip(batch, outcomes, strict=True):
        if queued.future.done():
            continue
        if outcome is None:
            queued.future.set_result(None)
        else:
            queued.future.set_exception(outcome)


# -- reading ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: every SELECT inside sees the same committed state."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


#: What a read selects of a task's row before its content: its row id, head, version, message count, stored
#: size and layout.
_COLUMNS = "seq, head, version, messages, size, layout"

_Row = tuple[int, bytes, int, int, int, bytes]


def _read_row(
    conn: sqlite3.Connection, row: _Row, history_length: int | None, artifacts: bool = True
) -> tuple[StoredTask, int]:
    """The task of a ``_COLUMNS`` row and the bytes read for it; its layout when read whole."""
    seq, head, version, count, _, layout = row
    task = _decode_head(head)
    if artifacts:
        history_blob, artifacts_blob = conn.execute(
            "SELECT history, artifacts FROM tasks WHERE seq = ?", (seq,)
        ).fetchone()
    else:
        history_blob, artifacts_blob = (
            conn.execute("SELECT history FROM tasks WHERE seq = ?", (seq,)).fetchone()[0],
            b"",
        )
    inline = _decode_history(history_blob)
    start = history_start(count, history_length)
    rows = conn.execute(
        "SELECT body FROM messages WHERE task = ? AND idx >= ? ORDER BY idx", (seq, max(start, len(inline)))
    ).fetchall()
    task.history = [*inline[start:], *(_decode_message(r[0]) for r in rows)]
    cost = len(head) + len(history_blob) + sum(len(r[0]) for r in rows)
    if artifacts:
        found = _decode_artifacts(artifacts_blob)
        cost += len(artifacts_blob)
        for idx, offset, body in conn.execute(
            "SELECT idx, start, body FROM artifacts WHERE task = ? ORDER BY idx, start", (seq,)
        ):
            cost += len(body)
            if offset:
                found[idx].parts.extend(_decode_parts(body))
            elif idx < len(found):
                found[idx] = _decode_artifact(body)
            else:
                found.append(_decode_artifact(body))
        task.artifacts = found
    stored = StoredTask(
        task, version, _decode_layout(layout) if history_length is None and artifacts else None
    )
    return stored, cost


# -- the owner lock -------------------------------------------------------------------------------------------


class _OwnerLock:
    """An exclusive ``flock`` on ``PATH.lock`` holding who owns the store (released when the process ends)."""

    def __init__(self, db_path: str) -> None:
        self.path = db_path + ".lock"
        self._file: IO[str] | None = None

    def acquire(self, store_path: str) -> None:
        if fcntl is None:  # pragma: no cover - not POSIX
            return
        file = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            owner = _describe_owner(file.read())
            file.close()
            raise StoreError(
                f"the task store {store_path} is in use by {owner}. One process owns a SQLite store: stop it"
                " first, or give this one another --store (several processes sharing tasks need a shared"
                " store such as PostgreSQL)"
            ) from None
        file.seek(0)
        file.truncate()
        file.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
        )
        file.flush()
        self._file = file

    def release(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.truncate(0)
            file.close()  # closing the descriptor releases the flock


def _describe_owner(text: str) -> str:
    try:
        info = json.loads(text)
        return f"process {info['pid']} on {info['host']} (since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


# -- the store ----------------------------------------------------------------------------------------------


class SQLiteTaskStore:
    """``SQLiteTaskStore("tasks.db")``; ``timeout`` is how long a write waits on a lock another connection
    holds before it fails (seconds); ``readers`` is the number of reading threads."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0, readers: int = 2) -> None:
        self.path = os.fspath(path)
        self.url = f"sqlite:///{self.path}"
        self.timeout = timeout
        self._readers = readers
        self._writer: _GroupWriter | None = None
        self._checkpointer: _Checkpointer | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._lock = _OwnerLock(self.path)

    # -- lifecycle ----------------------------------------------------------------------------------------

    def _prepare(self) -> sqlite3.Connection:
        """Take the owner lock, create or migrate the file (in a worker thread); returns the writer's
        connection."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock.acquire(self.path)
        try:
            conn = _connect(self.path, self.timeout)
            try:
                _migrate(conn, self.path)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            self._lock.release()
            raise
        return conn

    async def open(self) -> None:
        if self._writer is not None:
            return
        try:
            conn = await asyncio.to_thread(self._prepare)
            checkpointer = _Checkpointer(self.path, self.timeout)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the SQLite store at {self.path}: {exc}") from exc
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's job (see _Checkpointer)
        self._pool = ThreadPoolExecutor(self._readers, thread_name_prefix="skillwire-sqlite-reader")
        checkpointer.start()
        writer = _GroupWriter(conn, asyncio.get_running_loop(), checkpointer)
        writer.start()
        self._writer = writer
        self._checkpointer = checkpointer

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        pool, self._pool = self._pool, None
        if writer is not None:
            writer.stop()
            await asyncio.to_thread(writer.join)
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            checkpointer.stop()
            await asyncio.to_thread(checkpointer.join)
        if pool is not None:
            await asyncio.to_thread(pool.shutdown)
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()
        self._lock.release()

    # -- reads on the pool ----------------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path, self.timeout)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        pool = self._pool
        if pool is None:
            raise StoreError("the SQLite store is not open")

        def run() -> T:
            with _snapshot(self._reader()) as conn:
                return fn(conn)

        try:
            return await asyncio.get_running_loop().run_in_executor(pool, run)
        except sqlite3.Error as exc:
            raise StoreError(f"the SQLite store could not be read: {exc}") from exc

    # -- the protocol -----------------------------------------------------------------------------------------

    async def commit(self, write: TaskWrite) -> None:
        if self._writer is None:
            raise StoreError("the SQLite store is not open")
        await self._writer.submit(write)

    async def get(
        self, task_id: str, *, tenant: str = "", history_length: int | None = None
    ) -> StoredTask | None:
        def read(conn: sqlite3.Connection) -> StoredTask | None:
            found = conn.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE tenant = ? AND id = ?", (tenant, task_id)
            ).fetchone()
            return None if found is None else _read_row(conn, found, history_length)[0]

        return await self._read(read)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        where = ["tenant = ?"]
        args: list[object] = [query.tenant]
        if query.context_id:
            where.append("context_id = ?")
            args.append(query.context_id)
        if query.state is not None:
            where.append("state = ?")
            args.append(query.state.value)
        if query.updated_after is not None:
            where.append("updated_us >= ?")
            args.append(instant_us(query.updated_after))
        clause = " AND ".join(where)
        cursor = decode_cursor(query.page_token) if query.page_token else None
        seq_after = cursor_int(cursor[1]) if cursor is not None else 0
        return await self._read(lambda conn: _list_page(conn, query, clause, args, cursor, seq_after))

    async def unfinished(
        self, cursor: str = "", limit: int = 500
    ) -> tuple[list[tuple[str, StoredTask]], str]:
        after = cursor_int(cursor) if cursor else 0
        marks = ",".join("?" for _ in UNFINISHED_STATES)

        def read(conn: sqlite3.Connection) -> tuple[list[tuple[str, StoredTask]], str]:
            rows = conn.execute(
                f"SELECT tenant, {_COLUMNS} FROM tasks WHERE state IN ({marks}) AND seq > ? ORDER BY seq LIMIT ?",
                [*(s.value for s in UNFINISHED_STATES), after, limit],
            ).fetchall()
            batch = [(row[0], _read_row(conn, row[1:], None)[0]) for row in rows]
            return batch, (str(rows[-1][1]) if len(rows) == limit else "")

        return await self._read(read)


def _list_page(
    conn: sqlite3.Connection,
    query: TaskQuery,
    clause: str,
    args: list[object],
    cursor: tuple[int, str, int] | None,
    seq_after: int,
) -> TaskPage:
    if cursor is None:
        total = conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {clause}", args).fetchone()[0]
    else:
        total = cursor[2]
        clause += " AND (updated_us, seq) < (?, ?)"
        args = [*args, cursor[0], seq_after]
    rows = conn.execute(
        f"SELECT updated_us, {_COLUMNS} FROM tasks WHERE {clause} ORDER BY updated_us DESC, seq DESC LIMIT ?",
        [*args, query.page_size + 1],
    ).fetchall()
    tasks: list[Task] = []
    spent = 0
    last: tuple[int, int] | None = None
    for row in rows[: query.page_size]:
        # With its artifacts a task costs about what it stores: stop before reading one that cannot fit.
        if tasks and query.include_artifacts and spent + row[5] > query.max_bytes:
            break
        stored, cost = _read_row(conn, row[1:], query.history_length, query.include_artifacts)
        if tasks and spent + cost > query.max_bytes:
            break
        spent += cost
        tasks.append(stored.task)
        last = (row[0], row[1])
    more = len(tasks) < len(rows)
    token = encode_cursor(last[0], str(last[1]), total) if more and last is not None else ""
    return TaskPage(tasks, total, token)


# -- schema -----------------------------------------------------------------------------------------------


def _migrate(conn: sqlite3.Connection, path: str) -> None:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer skillwire (schema {current}, this one knows {SCHEMA_VERSION})"
        )
    if current == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if current == 1:
            conn.execute("ALTER TABLE tasks RENAME TO tasks_v1")
            for index in ("tasks_by_time", "tasks_by_context", "tasks_unfinished"):
                conn.execute(f"DROP INDEX IF EXISTS {index}")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        if current == 1:
            _copy_v1(conn)
            conn.execute("DROP TABLE tasks_v1")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def _copy_v1(conn: sqlite3.Connection) -> None:
    """Schema 1 kept each task as one JSON blob: split every task into pieces."""
    import msgspec

    from skillwire.protocol.models import Task

    decode = msgspec.json.Decoder(Task).decode
    rows = conn.execute("SELECT tenant, body, version, seq FROM tasks_v1 ORDER BY seq").fetchall()
    for tenant, body, version, _ in rows:
        outcome = _apply_write(conn, write_task(decode(body), version=version, tenant=tenant))
        if outcome is not None:  # pragma: no cover - a v1 file has one row per (tenant, id)
            raise outcome
