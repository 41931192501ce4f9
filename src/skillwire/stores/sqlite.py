"""The default TaskStore: one SQLite file in WAL mode, written with group commit, owned by one process.

Layout (schema 6): a ``tasks`` row per task holds its head (the task without history and artifacts) and the
columns the listings filter on; ``messages`` holds one row per history message and ``artifacts`` one row per
artifact piece (the artifact as first written, then each appended chunk), so a write inserts only what it
adds. The task's event log (:mod:`skillwire.stores.base`) starts in the ``tasks`` row (``log``: the first
row of the first write's events, so that creating a task stays one statement) and goes on in ``events``,
one row per :class:`~skillwire.stores.base.LogRow`; ``log_bytes`` counts it, and past ``max_log_bytes`` its
oldest rows are deleted in the write that passed it. ``idempotency`` holds the claims of idempotency keys
(:mod:`skillwire.stores.idempotency`), a claim made with a task in the task's transaction. ``push_configs`` and ``deliveries`` hold push
notifications' configs and outbox (:mod:`skillwire.stores.push`); a delivery row is inserted in the
transaction of the task write it belongs to, with the trace context of its event (``trace``). Schema 1 files
(one blob per task), schema 2 files (no push tables), schema 3 files (deliveries without ``trace``) and
schema 4 files (no event log) and schema 5 files (no index of finished tasks, nor of claims by task:
retention, :mod:`skillwire.stores.sqlite_retention`) are migrated when opened. A file made new has
incremental auto-vacuum, so that space retention frees can go back to the file system.

Writes go to one writer thread with group commit, checkpoints to another (:mod:`skillwire.stores.sqlite_writer`).

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
import itertools
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

import msgspec

from skillwire.errors import SkillwireError, StoreError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import Artifact, Message, Part, StreamResponse, Task
from skillwire.stores.base import (
    LOG_ROW_EVENTS,
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
    make_folder,
    private_file,
    read_log,
    sqlite_path,
    write_task,
)
from skillwire.stores.idempotency import Claim
from skillwire.stores.push import Delivery, Lane, PushConfigRecord
from skillwire.stores.retention import Pruned, StoreStats
from skillwire.stores.schemes import StoreTools
from skillwire.stores.sqlite_retention import FINISHED, count_finished, prune_batch, stats, vacuum_file
from skillwire.stores.sqlite_writer import (
    CLAIM_COLUMNS,
    Checkpointer,
    GroupWriter,
    apply_write,
    connect,
)

try:  # POSIX; elsewhere the store runs without the owner lock (say so at open)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["SQLiteTaskStore", "open_url", "read_failed_deliveries", "read_stats", "vacuum_store"]

log = logging.getLogger("skillwire.sqlite")

T = TypeVar("T")

SCHEMA_VERSION = 6
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
    log         BLOB    NOT NULL DEFAULT x'',
    log_bytes   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (tenant, id)
);
CREATE INDEX IF NOT EXISTS tasks_by_time ON tasks (tenant, updated_us, seq);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (tenant, context_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (tenant, state, updated_us, seq);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (seq)
    WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING');
CREATE INDEX IF NOT EXISTS tasks_finished ON tasks (updated_us, seq) WHERE state IN ({finished});
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
CREATE TABLE IF NOT EXISTS events (
    task  INTEGER NOT NULL,
    first INTEGER NOT NULL,
    last  INTEGER NOT NULL,
    body  BLOB    NOT NULL,
    PRIMARY KEY (task, first)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (
    scope      TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    digest     BLOB    NOT NULL,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,
    task_id    TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    result     BLOB    NOT NULL,
    owner      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency (expires_us);
CREATE INDEX IF NOT EXISTS idempotency_by_task ON idempotency (task_id);
CREATE TABLE IF NOT EXISTS push_configs (
    tenant  TEXT NOT NULL,
    task_id TEXT NOT NULL,
    id      TEXT NOT NULL,
    body    BLOB NOT NULL,
    shape   TEXT NOT NULL,
    issuer  TEXT NOT NULL,
    PRIMARY KEY (tenant, task_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    seq        INTEGER PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    task_id    TEXT    NOT NULL,
    config_id  TEXT    NOT NULL,
    body       BLOB    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    next_us    INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0,
    error      TEXT    NOT NULL DEFAULT '',
    created_us INTEGER NOT NULL,
    trace      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS deliveries_by_lane ON deliveries (tenant, task_id, config_id, seq) WHERE failed = 0;
CREATE INDEX IF NOT EXISTS deliveries_failed ON deliveries (seq) WHERE failed = 1;
""".replace("{finished}", FINISHED)
# A task's row holds, besides its head, its history and its artifacts as first written (JSON arrays), in two
# columns, so that a listing without artifacts does not read them.
_decode_history = msgspec.json.Decoder(list[Message]).decode
_decode_artifacts = msgspec.json.Decoder(list[Artifact]).decode
_decode_message = msgspec.json.Decoder(Message).decode
_decode_artifact = msgspec.json.Decoder(Artifact).decode
_decode_parts = msgspec.json.Decoder(list[Part]).decode
_decode_head = msgspec.json.Decoder(Task).decode
_decode_layout = msgspec.json.Decoder(Layout).decode


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

    def acquire(self, store_path: str, setting: str = "store=") -> None:
        if fcntl is None:  # pragma: no cover - not POSIX
            log.warning("no flock on this system: %s is not protected from a second process", store_path)
            return
        private_file(self.path)
        file = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            owner = _describe_owner(file.read())
            file.close()
            raise StoreError(
                f"the task store {store_path} is in use by {owner}. One process owns a SQLite store: stop it"
                f" first, or give this one another {setting} (several processes sharing tasks need a shared"
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


#: The log rows of a task (``?1``) holding generations after ``?2``, oldest first: a seek in the primary key
#: to the row that holds generation ``?2 + 1`` (the last whose ``first`` is not past it), then the rows after
#: it. Filtering on ``last`` alone made SQLite visit every row of the log from its first at each read: a
#: reader catching up on a 100,000-event stream read the log from the start 390 times (issue 31).
_EVENTS_AFTER = (
    "SELECT body FROM events WHERE task = ?1 AND first >= COALESCE("
    "(SELECT first FROM events WHERE task = ?1 AND first <= ?2 + 1 ORDER BY first DESC LIMIT 1), 0)"
    " AND last > ?2 ORDER BY first"
)


class SQLiteTaskStore:
    """``SQLiteTaskStore("tasks.db")``; ``timeout`` is how long a write waits on a lock another connection
    holds before it fails (seconds); ``readers`` is the number of reading threads; ``setting`` how the
    store was chosen (``--store`` on the command line, ``store=`` in code), named by the error that says
    another process owns the file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 5.0,
        readers: int = 2,
        max_failed_deliveries: int = 10_000,
        max_log_bytes: int = 32 * 1024 * 1024,
        setting: str = "store=",
    ) -> None:
        self.max_failed_deliveries = max_failed_deliveries
        self.max_log_bytes = max_log_bytes
        #: how whoever serves the agent names its store (``--store``, ``store=``): what an error tells them
        #: to change
        self.setting = setting
        self.path = os.fspath(path)
        self.url = f"sqlite:///{self.path}"
        self.timeout = timeout
        self._readers = readers
        self._writer: GroupWriter | None = None
        self._checkpointer: Checkpointer | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._lock = _OwnerLock(self.path)

    # -- lifecycle ----------------------------------------------------------------------------------------

    def _prepare(self) -> sqlite3.Connection:
        """Take the owner lock, create or migrate the file (in a worker thread); returns the writer's
        connection."""
        make_folder(os.path.dirname(os.path.abspath(self.path)))
        self._lock.acquire(self.path, self.setting)
        try:
            # it holds webhook tokens and credentials: its owner's alone, and so are its -wal and -shm
            for path in (self.path, self.path + "-wal", self.path + "-shm"):
                if path == self.path or os.path.exists(path):
                    private_file(path)
            if os.path.getsize(self.path) == 0:  # a new file: auto-vacuum is chosen before its first page
                _new_file(self.path)
            conn = connect(self.path, self.timeout)
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
        opened: list[sqlite3.Connection] = []
        try:
            opened.append(conn := await asyncio.to_thread(self._prepare))
            # the loop's own connection, which never waits for a lock (see GroupWriter._flush)
            opened.append(now := await asyncio.to_thread(connect, self.path, 0))
            checkpointer = Checkpointer(self.path, self.timeout)
        except (sqlite3.Error, OSError) as exc:
            for made in opened:
                made.close()
            if opened:
                self._lock.release()
            raise StoreError(f"cannot open the SQLite store at {self.path}: {exc}") from exc
        for connection in (conn, now):
            connection.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's job (see Checkpointer)
        self._pool = ThreadPoolExecutor(self._readers, thread_name_prefix="skillwire-sqlite-reader")
        checkpointer.start()
        writer = GroupWriter(conn, asyncio.get_running_loop(), checkpointer, lambda: self.max_log_bytes, now)
        writer.start()
        self._writer = writer
        self._checkpointer = checkpointer

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        pool, self._pool = self._pool, None
        if writer is not None:
            writer.stop()
            await asyncio.to_thread(writer.join)
            writer.close_loop_connection()
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
            conn = connect(self.path, self.timeout)
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
        writer = self._writer
        if writer is None:
            raise StoreError("the SQLite store is not open")
        await writer.submit(write)

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

    async def events(
        self, task_id: str, *, tenant: str = "", after: int = 0, limit: int = LOG_ROW_EVENTS
    ) -> list[StreamResponse] | None:
        def read(conn: sqlite3.Connection) -> list[StreamResponse] | None:
            found = conn.execute("SELECT seq, log FROM tasks WHERE tenant = ? AND id = ?", (tenant, task_id))
            row = found.fetchone()
            if row is None:
                return None
            seq, inline = row
            rows = conn.execute(_EVENTS_AFTER, (seq, after))
            bodies = itertools.chain([inline] if inline else [], (body for (body,) in rows))
            return read_log(bodies, after, limit)

        return await self._read(read)

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

    # -- retention (see skillwire.stores.retention) ----------------------------------------------------------

    async def prune_finished(self, before_us: int, limit: int = 200) -> Pruned:
        done: list[Pruned] = []

        def op(conn: sqlite3.Connection) -> None:
            done.append(prune_batch(conn, before_us, limit))

        await self._write(op)
        return done[0]

    async def count_finished(self, before_us: int) -> dict[str, int]:
        return await self._read(lambda conn: count_finished(conn, before_us))

    async def stats(self) -> StoreStats:
        return await self._read(lambda conn: stats(conn, self.path))

    # -- idempotency keys (see skillwire.stores.idempotency) ------------------------------------------------

    async def recall(self, scope: str, key: str, now_us: int) -> Claim | None:
        def read(conn: sqlite3.Connection) -> Claim | None:
            row = conn.execute(
                f"SELECT {CLAIM_COLUMNS} FROM idempotency WHERE scope = ? AND key = ? AND expires_us > ?",
                (scope, key, now_us),
            ).fetchone()
            return None if row is None else Claim(*row)

        return await self._read(read)

    async def claim(self, claim: Claim) -> Claim | None:
        if self._writer is None:
            raise StoreError("the SQLite store is not open")
        found: Claim | None = await self._writer.submit(claim)
        return found

    async def settle(self, scope: str, key: str, result: bytes) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE idempotency SET result = ? WHERE scope = ? AND key = ?", (result, scope, key)
            )

        await self._write(op)

    # -- push notifications (see skillwire.stores.push) -----------------------------------------------------

    async def _write(self, op: Callable[[sqlite3.Connection], None]) -> None:
        if self._writer is None:
            raise StoreError("the SQLite store is not open")
        await self._writer.submit(op)

    async def put_push_config(self, record: PushConfigRecord, max_per_task: int) -> bool:
        stored: list[bool] = []

        def op(conn: sqlite3.Connection) -> None:
            key = (record.tenant, record.task_id)
            exists = conn.execute(
                "SELECT 1 FROM push_configs WHERE tenant = ? AND task_id = ? AND id = ?", (*key, record.id)
            ).fetchone()
            if exists is None:
                count = conn.execute(
                    "SELECT COUNT(*) FROM push_configs WHERE tenant = ? AND task_id = ?", key
                ).fetchone()[0]
                if count >= max_per_task:
                    stored.append(False)
                    return
            conn.execute(
                "INSERT OR REPLACE INTO push_configs (tenant, task_id, id, body, shape, issuer)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (*key, record.id, record.body, record.shape, record.issuer),
            )
            stored.append(True)

        await self._write(op)
        return stored[0]

    async def get_push_config(self, tenant: str, task_id: str, config_id: str) -> PushConfigRecord | None:
        def read(conn: sqlite3.Connection) -> PushConfigRecord | None:
            row = conn.execute(
                "SELECT body, shape, issuer FROM push_configs WHERE tenant = ? AND task_id = ? AND id = ?",
                (tenant, task_id, config_id),
            ).fetchone()
            return None if row is None else PushConfigRecord(tenant, task_id, config_id, *row)

        return await self._read(read)

    async def list_push_configs(
        self, tenant: str, task_id: str, *, after: str = "", limit: int = 100
    ) -> list[PushConfigRecord]:
        def read(conn: sqlite3.Connection) -> list[PushConfigRecord]:
            rows = conn.execute(
                "SELECT id, body, shape, issuer FROM push_configs WHERE tenant = ? AND task_id = ? AND id > ?"
                " ORDER BY id LIMIT ?",
                (tenant, task_id, after, limit),
            ).fetchall()
            return [PushConfigRecord(tenant, task_id, *row) for row in rows]

        return await self._read(read)

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            key = (tenant, task_id, config_id)
            conn.execute("DELETE FROM push_configs WHERE tenant = ? AND task_id = ? AND id = ?", key)
            conn.execute(
                "DELETE FROM deliveries WHERE tenant = ? AND task_id = ? AND config_id = ? AND failed = 0",
                key,
            )

        await self._write(op)

    async def pending_lanes(self) -> list[tuple[Lane, int]]:
        def read(conn: sqlite3.Connection) -> list[tuple[Lane, int]]:
            rows = conn.execute(
                "SELECT d.tenant, d.task_id, d.config_id, d.next_us FROM deliveries d JOIN ("
                " SELECT MIN(seq) AS seq FROM deliveries WHERE failed = 0 GROUP BY tenant, task_id, config_id"
                ") h ON d.seq = h.seq"
            ).fetchall()
            return [((t, task, c), next_us) for t, task, c, next_us in rows]

        return await self._read(read)

    async def next_deliveries(self, lane: Lane, limit: int = 1) -> list[Delivery]:
        def read(conn: sqlite3.Connection) -> list[Delivery]:
            rows = conn.execute(
                f"SELECT {_DELIVERY} FROM deliveries WHERE tenant = ? AND task_id = ? AND config_id = ?"
                " AND failed = 0 ORDER BY seq LIMIT ?",
                (*lane, limit),
            ).fetchall()
            return [_delivery(row) for row in rows]

        return await self._read(read)

    async def finish_deliveries(self, seqs: Sequence[int]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM deliveries WHERE seq = ?", [(seq,) for seq in seqs])

        await self._write(op)

    async def pending_count(self) -> int:
        def read(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM deliveries WHERE failed = 0").fetchone()[0])

        return await self._read(read)

    async def pending_by_partition(self) -> dict[str, int]:
        def read(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute("SELECT tenant, COUNT(*) FROM deliveries WHERE failed = 0 GROUP BY tenant")
            return {tenant: int(count) for tenant, count in rows}

        return await self._read(read)

    async def retry_delivery(self, seq: int, attempts: int, next_us: int, error: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE deliveries SET attempts = ?, next_us = ?, error = ? WHERE seq = ?",
                (attempts, next_us, error, seq),
            )

        await self._write(op)

    async def fail_delivery(self, seq: int, attempts: int, error: str) -> None:
        keep = self.max_failed_deliveries

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE deliveries SET attempts = ?, failed = 1, error = ? WHERE seq = ?",
                (attempts, error, seq),
            )
            # keep the last ``keep`` failed deliveries
            conn.execute(
                "DELETE FROM deliveries WHERE failed = 1 AND seq < (SELECT seq FROM deliveries WHERE failed = 1"
                " ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (keep - 1,),
            )

        await self._write(op)

    async def failed_deliveries(self, after: int = 0, limit: int = 100) -> list[Delivery]:
        def read(conn: sqlite3.Connection) -> list[Delivery]:
            rows = conn.execute(
                f"SELECT {_DELIVERY} FROM deliveries WHERE failed = 1 AND seq > ? ORDER BY seq LIMIT ?",
                (after, limit),
            ).fetchall()
            return [_delivery(row) for row in rows]

        return await self._read(read)


def read_stats(path: str | os.PathLike[str]) -> StoreStats:
    """The statistics of the SQLite store at ``path``, read without opening the store (read-only, without
    its owner lock), so this works while a server owns it: ``skillwire db stats``."""
    target = os.fspath(path)
    if not os.path.exists(target):
        raise StoreError(f"no SQLite store at {target}")
    try:
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the SQLite store at {target}: {exc}") from exc
    try:
        with _snapshot(conn):
            return stats(conn, target)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the SQLite store at {target}: {exc}") from exc
    finally:
        conn.close()


def vacuum_store(path: str | os.PathLike[str], setting: str = "store=") -> None:
    """VACUUM the SQLite store at ``path`` into a file with incremental auto-vacuum, as its owner (refused
    while a server owns it): ``skillwire db prune --vacuum``. It rewrites the whole file, and needs as much
    free disk again while it runs."""
    target = os.fspath(path)
    if not os.path.exists(target):
        raise StoreError(f"no SQLite store at {target}")
    lock = _OwnerLock(target)
    lock.acquire(target, setting)
    try:
        conn = connect(target, 30.0)
        try:
            vacuum_file(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot vacuum the SQLite store at {target}: {exc}") from exc
    finally:
        lock.release()


def read_failed_deliveries(path: str | os.PathLike[str], after: int = 0, limit: int = 100) -> list[Delivery]:
    """The failed push deliveries of the SQLite store at ``path``, read without opening the store: the file
    is opened read-only and its owner lock is not taken, so this works while a server owns the store (WAL
    readers never wait for the writer). For the operator (``skillwire deliveries``)."""
    target = os.fspath(path)
    if not os.path.exists(target):
        raise StoreError(f"no SQLite store at {target}")
    try:
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the SQLite store at {target}: {exc}") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < 3:
            return []  # written before push notifications: none failed
        columns = _DELIVERY if version >= 4 else _DELIVERY_3  # (the file is read as it is, not migrated)
        rows = conn.execute(
            f"SELECT {columns} FROM deliveries WHERE failed = 1 AND seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        ).fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the SQLite store at {target}: {exc}") from exc
    finally:
        conn.close()
    return [_delivery(row) for row in rows]


_DELIVERY = "seq, tenant, task_id, config_id, body, attempts, next_us, failed, error, created_us, trace"
#: The same from a schema-3 file, whose deliveries have no trace column.
_DELIVERY_3 = _DELIVERY.replace("trace", "''")


def _delivery(row: Any) -> Delivery:
    seq, tenant, task_id, config_id, body, attempts, next_us, failed, error, created_us, trace = row
    return Delivery(
        seq, tenant, task_id, config_id, body, attempts, next_us, bool(failed), error, created_us, trace
    )


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


def _new_file(path: str) -> None:
    """Give an empty file incremental auto-vacuum: it must be set before the file's first page is written,
    which switching to WAL does (see :mod:`skillwire.stores.sqlite_retention`)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


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
        if current == 3:  # its deliveries table predates the trace column (older files got both just above)
            conn.execute("ALTER TABLE deliveries ADD COLUMN trace TEXT NOT NULL DEFAULT ''")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(tasks)")}
        if "log" not in columns:  # a tasks table older than the event log (schema 2 to 4)
            conn.execute("ALTER TABLE tasks ADD COLUMN log BLOB NOT NULL DEFAULT x''")
            conn.execute("ALTER TABLE tasks ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0")
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
        outcome = apply_write(conn, write_task(decode(body), version=version, tenant=tenant))
        if outcome is not None:  # pragma: no cover - a v1 file has one row per (tenant, id)
            raise outcome


def open_url(url: str, limits: Limits, setting: str) -> SQLiteTaskStore:
    """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``, with ``?timeout=SECONDS`` (the
    table in :mod:`skillwire.stores.schemes` sends them here)."""
    path, query = sqlite_path(url)
    if not path:
        raise SkillwireError(f"{url!r} names no file: use sqlite:///PATH")
    timeout = 5.0
    for pair in filter(None, query.split("&")):
        name, _, value = pair.partition("=")
        if name != "timeout":
            raise SkillwireError(f"{url!r}: unknown option {name!r} (the SQLite store takes timeout=)")
        try:
            timeout = float(value)
        except ValueError:
            raise SkillwireError(f"{url!r}: timeout must be a number of seconds") from None
    return SQLiteTaskStore(path, timeout=timeout, max_log_bytes=limits.max_task_log_bytes, setting=setting)


async def _stats_at(url: str) -> StoreStats:
    return await asyncio.to_thread(read_stats, sqlite_path(url)[0])


async def _failed_at(url: str, after: int, limit: int) -> list[Delivery]:
    return await asyncio.to_thread(read_failed_deliveries, sqlite_path(url)[0], after, limit)


async def _vacuum_at(url: str) -> None:
    await asyncio.to_thread(vacuum_store, sqlite_path(url)[0], "URL")


#: The operator's commands on a SQLite file (:mod:`skillwire.stores.schemes`); it has no schema migrations.
TOOLS = StoreTools(read_stats=_stats_at, read_failed_deliveries=_failed_at, vacuum=_vacuum_at)
