"""The store contract over every store, plus what is particular to SQLite (WAL, restart, crash recovery)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillwire import MemoryTaskStore, SkillwireError, SQLiteTaskStore, TaskState, TaskStore, open_store
from skillwire.testing.store_contract import TaskStoreContract, make_task, save


class TestMemoryStore(TaskStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[TaskStore]:
        s = MemoryTaskStore()
        await s.open()
        yield s
        await s.close()


class TestSQLiteStore(TaskStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[TaskStore]:
        s = SQLiteTaskStore(tmp_path / "tasks.db")
        await s.open()
        yield s
        await s.close()


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), MemoryTaskStore)
    rel = open_store("sqlite:///.skillwire/tasks.db")
    assert isinstance(rel, SQLiteTaskStore) and rel.path == ".skillwire/tasks.db"
    absolute = open_store(f"sqlite:///{tmp_path}/t.db")
    assert isinstance(absolute, SQLiteTaskStore) and absolute.path == f"{tmp_path}/t.db"
    with pytest.raises(SkillwireError):
        open_store("postgres://nope")
    with pytest.raises(SkillwireError):
        open_store("sqlite://")


async def test_sqlite_uses_wal_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    task = make_task(state=TaskState.COMPLETED)
    await save(store, task, version=2)
    await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = SQLiteTaskStore(path)
    await again.open()
    stored = await again.get(task.id)
    await again.close()
    assert stored is not None and stored.task == task and stored.version == 2


async def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version=99")
    with pytest.raises(SkillwireError, match="newer skillwire"):
        await SQLiteTaskStore(path).open()


async def test_sqlite_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = SQLiteTaskStore(tmp_path / "t.db")
    with pytest.raises(SkillwireError):
        await save(store, make_task())


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from skillwire import SQLiteTaskStore, TaskState
    from skillwire.testing.store_contract import make_task, save

    async def main():
        store = SQLiteTaskStore(sys.argv[1])
        await store.open()
        await save(store, make_task(task_id="done", state=TaskState.COMPLETED), version=3)
        await save(store, make_task(task_id="running", state=TaskState.WORKING), version=2)
        print("committed", flush=True)
        await asyncio.Event().wait()   # killed here, with the store still open

    asyncio.run(main())
    """
)


def test_sqlite_commits_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "committed"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    async def restart() -> None:
        store = SQLiteTaskStore(path)
        await store.open()
        try:
            unfinished, cursor = await store.unfinished()
            assert cursor == ""
            assert [(tenant, s.task.id, s.version) for tenant, s in unfinished] == [("", "running", 2)]
            done = await store.get("done")
            assert done is not None and done.task.status.state is TaskState.COMPLETED and done.version == 3
        finally:
            await store.close()

    asyncio.run(restart())


async def test_sqlite_checkpoints_off_the_writer_and_folds_the_wal_in_at_close(tmp_path: Path) -> None:
    """The writer's connection does not checkpoint (a checkpoint fsyncs, and the writer would wait): the
    checkpointer does, and at close the WAL is folded into the database file and cut back to nothing."""
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    checkpointer = store._checkpointer
    assert checkpointer is not None
    checkpointer.checkpointed.clear()
    tasks = [make_task(state=TaskState.COMPLETED, text=f"t{i}") for i in range(300)]
    await asyncio.gather(*(save(store, t) for t in tasks))
    assert await asyncio.to_thread(checkpointer.checkpointed.wait, 10)
    # While the store is open, the database file itself (read ignoring the WAL) has received the writes.
    with contextlib.closing(sqlite3.connect(f"file:{path}?immutable=1", uri=True)) as raw:
        assert raw.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 300
    await store.close()
    wal = tmp_path / "t.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    with sqlite3.connect(path) as conn:  # read without the store: everything is in the database file
        assert conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 300


async def test_sqlite_keeps_nothing_of_a_write_once_it_is_committed(tmp_path: Path) -> None:
    """The writer thread used to hold its last batch while waiting for the next one: a large task's pieces
    (a 25 MiB stream, 80 MiB of RSS) stayed in memory after the task was done."""
    import gc
    import tracemalloc

    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    tracemalloc.start()
    try:
        await save(store, make_task(text="x" * 5_000_000))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        await store.close()
    assert held < 1_000_000, f"{held} bytes still held after the commit"


async def test_sqlite_wal_starts_over_under_continuous_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A passive checkpoint never catches up with a writer that never stops, so the WAL grew without end
    (556 MB after 20 s of load). Past its bound it is checkpointed whole while the writer waits, and starts
    over: the file stays near the bound however much is written."""
    from skillwire.stores import sqlite_writer as sqlite_store

    monkeypatch.setattr(sqlite_store, "WAL_LIMIT_PAGES", 64)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_INTERVAL", 0.01)
    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    wal = tmp_path / "t.db-wal"
    largest = 0
    try:
        for _ in range(40):  # written without a pause: about 40 x 50 tasks of 2 KiB
            await asyncio.gather(*(save(store, make_task(text="x" * 2000)) for _ in range(50)))
            largest = max(largest, wal.stat().st_size)
    finally:
        await store.close()
    assert largest < 4 * 1024 * 1024, f"the WAL grew to {largest} bytes"
