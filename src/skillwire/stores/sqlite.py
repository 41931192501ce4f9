"""The default TaskStore: one SQLite file in WAL mode, written with group commit.

Writes go to one writer thread. Every write queued since the writer's last commit is applied in one
transaction, then each waiting caller is answered. Several writes to the same task that are still queued
collapse into the newest one. A snapshot is written only if its version is newer than the stored one
(``ON CONFLICT ... WHERE excluded.version > tasks.version``), so concurrent or reordered writers never lose
an update.

Durability: ``synchronous=NORMAL`` in WAL mode. A committed write survives the process being killed
(``kill -9``); after a power cut the last few commits may be lost. Reads run on the caller's thread through
a separate connection; WAL readers never wait for the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from dataclasses import dataclass, field

from skillwire.errors import SkillwireError
from skillwire.protocol.models import Task
from skillwire.stores.base import (
    UNFINISHED_STATES,
    StoredTask,
    TaskPage,
    TaskQuery,
    cursor_int,
    decode_cursor,
    decode_task,
    encode_cursor,
    encode_task,
    instant_us,
    timestamp_us,
)

__all__ = ["SQLiteTaskStore"]

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    seq         INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    context_id  TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    updated_us  INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    body        BLOB    NOT NULL,
    UNIQUE (tenant, id)
);
CREATE INDEX IF NOT EXISTS tasks_by_time ON tasks (tenant, updated_us);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (tenant, context_id, updated_us);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (state)
    WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING');
"""
_UPSERT = """
INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, body) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant, id) DO UPDATE SET
    context_id = excluded.context_id, state = excluded.state, updated_us = excluded.updated_us,
    version = excluded.version, body = excluded.body
WHERE excluded.version > tasks.version
"""

_Row = tuple[str, str, str, str, int, int, bytes]


@dataclass(slots=True)
class _Write:
    row: _Row
    waiters: list[asyncio.Future[bool]] = field(default_factory=list)


class _GroupWriter(threading.Thread):
    def __init__(self, path: str, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(name="skillwire-sqlite-writer", daemon=True)
        self._path = path
        self._loop = loop
        self._cond = threading.Condition()
        self._pending: dict[tuple[str, str], _Write] = {}
        self._closing = False
        self.ready = threading.Event()
        self.failure: BaseException | None = None

    def submit(self, row: _Row) -> asyncio.Future[bool]:
        fut: asyncio.Future[bool] = self._loop.create_future()
        key = (row[0], row[1])
        with self._cond:
            if self._closing:
                raise SkillwireError("the SQLite store is closed")
            queued = self._pending.get(key)
            if queued is None:
                self._pending[key] = _Write(row, [fut])
                self._cond.notify()
            else:
                if row[5] > queued.row[5]:
                    queued.row = row
                queued.waiters.append(fut)
        return fut

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()

    def run(self) -> None:
        try:
            conn = _connect(self._path)
        except BaseException as exc:  # pragma: no cover - open() already proved the file usable
            self.failure = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._closing:
                        self._cond.wait()
                    if not self._pending:
                        return
                    batch, self._pending = self._pending, {}
                self._apply(conn, list(batch.values()))
        finally:
            conn.close()

    def _apply(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        results: list[tuple[_Write, bool | BaseException]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in batch:
                cur = conn.execute(_UPSERT, write.row)
                results.append((write, cur.rowcount > 0))
            conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            err = SkillwireError(f"SQLite write failed: {exc}")
            results = [(w, err) for w in batch]
        self._loop.call_soon_threadsafe(_resolve, results)


def _resolve(results: list[tuple[_Write, bool | BaseException]]) -> None:
    for write, outcome in results:
        for fut in write.waiters:
            if fut.done():
                continue
            if isinstance(outcome, BaseException):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


class SQLiteTaskStore:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.url = f"sqlite:///{self.path}"
        self._reader: sqlite3.Connection | None = None
        self._writer: _GroupWriter | None = None

    def _prepare(self) -> sqlite3.Connection:
        """Create the file and schema (runs in a worker thread); returns the reader connection."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        conn = _connect(self.path)
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current > SCHEMA_VERSION:
            conn.close()
            raise SkillwireError(
                f"{self.path} was written by a newer skillwire"
                f" (schema {current}, this one knows {SCHEMA_VERSION})"
            )
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return conn

    async def open(self) -> None:
        if self._writer is not None:
            return
        try:
            self._reader = await asyncio.to_thread(self._prepare)
        except (sqlite3.Error, OSError) as exc:
            raise SkillwireError(f"cannot open the SQLite store at {self.path}: {exc}") from exc
        writer = _GroupWriter(self.path, asyncio.get_running_loop())
        writer.start()
        await asyncio.to_thread(writer.ready.wait)
        if writer.failure is not None:  # pragma: no cover
            raise SkillwireError(f"cannot open the SQLite store at {self.path}: {writer.failure}")
        self._writer = writer

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.stop()
            await asyncio.to_thread(writer.join)
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def _conn(self) -> sqlite3.Connection:
        if self._reader is None:
            raise SkillwireError("the SQLite store is not open")
        return self._reader

    async def save(self, task: Task, *, version: int, tenant: str = "") -> bool:
        if self._writer is None:
            raise SkillwireError("the SQLite store is not open")
        row: _Row = (
            tenant,
            task.id,
            task.context_id,
            task.status.state.value,
            timestamp_us(task),
            version,
            encode_task(task),
        )
        return await self._writer.submit(row)

    async def get(self, task_id: str, *, tenant: str = "") -> StoredTask | None:
        found = (
            self._conn()
            .execute("SELECT body, version FROM tasks WHERE tenant = ? AND id = ?", (tenant, task_id))
            .fetchone()
        )
        return None if found is None else StoredTask(decode_task(found[0]), found[1])

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
        conn = self._conn()
        clause = " AND ".join(where)
        total = conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {clause}", args).fetchone()[0]
        if query.page_token:
            us, seq = decode_cursor(query.page_token)
            clause += " AND (updated_us, seq) < (?, ?)"
            args += [us, cursor_int(seq)]
        rows = conn.execute(
            f"SELECT body, updated_us, seq FROM tasks WHERE {clause}"
            " ORDER BY updated_us DESC, seq DESC LIMIT ?",
            [*args, query.page_size + 1],
        ).fetchall()
        more = len(rows) > query.page_size
        rows = rows[: query.page_size]
        token = encode_cursor(rows[-1][1], str(rows[-1][2])) if more and rows else ""
        return TaskPage([decode_task(r[0]) for r in rows], total, token)

    async def list_unfinished(self) -> list[tuple[str, StoredTask]]:
        marks = ",".join("?" for _ in UNFINISHED_STATES)
        rows = (
            self._conn()
            .execute(
                f"SELECT tenant, body, version FROM tasks WHERE state IN ({marks})",
                [s.value for s in UNFINISHED_STATES],
            )
            .fetchall()
        )
        return [(tenant, StoredTask(decode_task(body), version)) for tenant, body, version in rows]
