"""Retention on the SQLite store (:mod:`skillwire.stores.retention`): the statements of a prune, of the
store's statistics, and the VACUUM that turns an old file into one that gives space back.

A prune batch runs as an op of the writer (:mod:`skillwire.stores.sqlite_writer`), so it is in the
transaction of the writes queued with it: a reader sees the batch's tasks whole or gone. Finished tasks are
found by a partial index on them (schema 6, ``tasks_finished``), oldest first.

Space: SQLite reuses the pages a prune frees for what is written next, so under a steady load with retention
the file stops growing once it holds one retention's worth of tasks. A file created with schema 6 or later
has ``auto_vacuum=INCREMENTAL``: when more than half of it is free (the load fell, or the retention was
shortened), a prune batch also hands some free pages back to the file system (``PRAGMA incremental_vacuum``,
4 MiB at a time so that no batch stalls the writer). Under a steady load a prune round frees at most a fifth
of the file (a round every quarter of the retention), which new tasks take again: handing it back only to
grow the file again would cost writes for nothing, hence the half. An older file cannot change its auto-vacuum mode
without a VACUUM, which rewrites it whole: ``skillwire db prune --vacuum`` does that, with the server stopped.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence

from skillwire.stores.retention import FINISHED_STATES, Pruned, StoreStats

__all__ = [
    "FINISHED",
    "count_finished",
    "prune_batch",
    "release_free_pages",
    "stats",
    "vacuum_file",
]

#: The finished states as SQL literals: a query must name them as the partial index does to use it.
FINISHED = ", ".join(f"'{state.value}'" for state in FINISHED_STATES)
#: Free pages kept for reuse, beyond half of the file, before space is handed back.
_KEEP_FREE_PAGES = 256
#: Pages one batch hands back at most (4 MiB of 4 KiB pages: about 6 ms of the writer's time, measured).
_RELEASE_STEP = 1024


def prune_batch(conn: sqlite3.Connection, before_us: int, limit: int) -> Pruned:
    """Delete up to ``limit`` finished tasks older than ``before_us`` with everything that is theirs; run
    inside the writer's transaction."""
    rows = conn.execute(
        f"SELECT seq, tenant, id FROM tasks WHERE state IN ({FINISHED}) AND updated_us < ?"
        " ORDER BY updated_us, seq LIMIT ?",
        (before_us, limit),
    ).fetchall()
    if not rows:
        return Pruned()
    seqs = [(seq,) for seq, _, _ in rows]
    keys = [(tenant, task_id) for _, tenant, task_id in rows]

    def delete(sql: str, params: Sequence[tuple[object, ...]]) -> int:
        return conn.executemany(sql, params).rowcount

    pruned = Pruned(
        messages=delete("DELETE FROM messages WHERE task = ?", seqs),
        artifacts=delete("DELETE FROM artifacts WHERE task = ?", seqs),
        events=delete("DELETE FROM events WHERE task = ?", seqs),
        push_configs=delete("DELETE FROM push_configs WHERE tenant = ? AND task_id = ?", keys),
        deliveries=delete("DELETE FROM deliveries WHERE tenant = ? AND task_id = ? AND failed = 0", keys),
        # a claim's scope is the task's tenant, or the tenant, NUL and the caller owning the task
        # (compared as a range: SQLite's string functions stop at a NUL)
        claims=delete(
            "DELETE FROM idempotency WHERE task_id = ? AND (scope = ? OR (scope >= ? AND scope < ?))",
            [(task_id, tenant, tenant + "\x00", tenant + "\x01") for tenant, task_id in keys],
        ),
        tasks=delete("DELETE FROM tasks WHERE seq = ?", seqs),
    )
    release_free_pages(conn)
    return pruned


def release_free_pages(conn: sqlite3.Connection) -> int:
    """With incremental auto-vacuum, hand free pages beyond half of the file back to the file system, one
    step at most; the pages released."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
        return 0
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    excess = free - pages // 2 - _KEEP_FREE_PAGES
    if excess <= 0:
        return 0
    step = min(excess, _RELEASE_STEP)
    # Python's sqlite3 steps a statement that returns no rows once, and one step of this pragma frees one
    # page: so once per page (executescript would step it through, but commits the writer's transaction)
    for _ in range(step):
        conn.execute("PRAGMA incremental_vacuum(1)")
    return int(step)


def count_finished(conn: sqlite3.Connection, before_us: int) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT state, COUNT(*) FROM tasks WHERE state IN ({FINISHED}) AND updated_us < ? GROUP BY state",
        (before_us,),
    )
    return {state: int(count) for state, count in rows}


def stats(conn: sqlite3.Connection, path: str) -> StoreStats:
    counts = {state: int(n) for state, n in conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state")}
    oldest = conn.execute(f"SELECT MIN(updated_us) FROM tasks WHERE state IN ({FINISHED})").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size = 0
    for name in (path, path + "-wal", path + "-shm"):
        with contextlib.suppress(OSError):
            size += os.path.getsize(name)
    return StoreStats(tasks=counts, size_bytes=size, free_bytes=free * page_size, oldest_finished_us=oldest)


def vacuum_file(conn: sqlite3.Connection) -> None:
    """Rewrite the file with incremental auto-vacuum (its free pages go back to the file system), then cut
    its WAL back; on a connection of the process that owns the store, with nothing else using it."""
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
