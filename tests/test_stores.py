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

import msgspec
import pytest

from skillwire import SkillwireError, TaskState
from skillwire.errors import StoreError
from skillwire.protocol.models import Task
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore, open_store
from skillwire.stores.base import write_task
from skillwire.stores.push import MemoryPushState, Outgoing
from skillwire.stores.sqlite import SCHEMA_VERSION
from skillwire.testing.store_contract import (
    IdempotencyStoreContract,
    PushStoreContract,
    RetentionStoreContract,
    TaskStoreContract,
    _head,
    make_task,
    push_config,
    save,
    with_deliveries,
)


class TestMemoryStore(TaskStoreContract, PushStoreContract, IdempotencyStoreContract, RetentionStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[TaskStore]:
        s = MemoryTaskStore()
        await s.open()
        yield s
        await s.close()


class TestSQLiteStore(TaskStoreContract, PushStoreContract, IdempotencyStoreContract, RetentionStoreContract):
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
        open_store("mysql://nope")
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
    over: the file stays near the bound however much is written.

    Written without a pause, these 200 x 50 tasks of 2 KiB make a WAL of about 89 MB when it never starts
    over, and one of 2-4 MB here. How far past its bound the file gets depends on how long one passive
    checkpoint takes (its fsyncs are the disk's), so the bound asserted is a quarter of the unbounded size:
    a WAL that grows with what is written fails it, a slow disk does not."""
    from skillwire.stores import sqlite_writer as sqlite_store

    monkeypatch.setattr(sqlite_store, "WAL_LIMIT_PAGES", 64)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_INTERVAL", 0.01)
    modes: list[str] = []
    checkpoint = sqlite_store.Checkpointer._checkpoint

    def counted(self: sqlite_store.Checkpointer, mode: str) -> int:
        modes.append(mode)
        return checkpoint(self, mode)

    monkeypatch.setattr(sqlite_store.Checkpointer, "_checkpoint", counted)
    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    wal = tmp_path / "t.db-wal"
    largest = 0
    try:
        for _ in range(200):
            await asyncio.gather(*(save(store, make_task(text="x" * 2000)) for _ in range(50)))
            largest = max(largest, wal.stat().st_size)
    finally:
        await store.close()
    assert "RESTART" in modes, modes  # the bound was passed and the WAL was started over
    assert largest < 22 * 1024 * 1024, f"the WAL grew to {largest} bytes"


async def test_sqlite_writes_a_batch_of_new_tasks_on_the_loop_without_the_writer_thread(
    tmp_path: Path,
) -> None:
    """Small new tasks queued one at a time while the writer thread is idle are written on the event loop's
    thread (no thread hand-off); a write to a stored task still takes the thread's way. Here the thread
    cannot apply anything (the test holds the lock it takes for each batch): the new tasks are stored all
    the same, the update waits for the thread."""
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    first = make_task(context_id="c1")
    try:
        await save(store, first)
        gate = store._checkpointer.gate  # type: ignore[union-attr]
        with gate:
            new = [make_task(context_id="c2") for _ in range(20)]
            for task in new:
                await asyncio.wait_for(save(store, task), 30)
            changed = msgspec.structs.replace(
                first, status=msgspec.structs.replace(first.status, state=TaskState.COMPLETED)
            )
            update = asyncio.ensure_future(save(store, changed, version=2, base=1))
            for _ in range(3):
                await asyncio.sleep(0)
            assert not update.done()
        await asyncio.wait_for(update, 30)
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        stored = dict(conn.execute("SELECT id, version FROM tasks").fetchall())
    assert stored == {first.id: 2, **{task.id: 1 for task in new}}


async def test_sqlite_writes_that_come_together_are_grouped_on_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under concurrent load a loop turn's batch holds several new tasks: it goes to the writer thread, and
    so does every batch for GROUPING_HOLD seconds after it, one write or more (the thread, busy with a
    commit while the next writes queue, commits them in larger groups than the loop's turns). Once writes
    come one at a time again, the loop stores them itself. The test holds the lock the thread takes for each
    batch: a write that went to the thread waits for it, one stored on the loop does not. The writer's clock
    is the test's, so that the hold passes without waiting for it."""
    from skillwire.stores import sqlite_writer

    clock = [1000.0]
    monkeypatch.setattr(sqlite_writer, "_monotonic", lambda: clock[0])
    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    gate = store._checkpointer.gate  # type: ignore[union-attr]

    async def waits_for_the_thread(*tasks: Task) -> None:
        with gate:
            pending = asyncio.gather(*(save(store, task) for task in tasks))
            for _ in range(3):
                await asyncio.sleep(0)
            assert not pending.done()
        await asyncio.wait_for(pending, 30)

    try:
        with gate:
            await asyncio.wait_for(save(store, make_task()), 30)  # alone: on the loop
        await waits_for_the_thread(*(make_task() for _ in range(3)))  # together: grouped
        await waits_for_the_thread(make_task())  # alone, but within the hold
        clock[0] += sqlite_writer.GROUPING_HOLD
        with gate:
            await asyncio.wait_for(save(store, make_task()), 30)  # the hold passed: on the loop again
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone()[0] == 6


async def test_sqlite_a_batch_the_loop_finds_locked_goes_to_the_writer_thread(tmp_path: Path) -> None:
    """The loop's connection never waits for SQLite's write lock: another connection holds it here, the
    loop's INSERT fails with SQLITE_BUSY without writing anything, and the writer thread, which waits its
    turn, stores the task once the lock is released."""
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path, timeout=60)
    await store.open()
    task = make_task()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(save(store, task))
        for _ in range(3):  # queued, then tried on the loop: the lock is held
            await asyncio.sleep(0)
        assert not pending.done()
        other.execute("ROLLBACK")
        await asyncio.wait_for(pending, 30)
        assert (await store.get(task.id)) is not None
    finally:
        other.close()
        await store.close()


async def test_sqlite_a_loop_batch_that_raises_answers_its_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in writing a batch on the loop (a fault that cannot be caused for real, so it is injected)
    answers each of its callers with StoreError instead of leaving them waiting."""
    from skillwire.stores import sqlite_writer

    def broken(conn: sqlite3.Connection, writes: list[object]) -> list[object]:
        raise RuntimeError("a bug")

    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    try:
        monkeypatch.setattr(sqlite_writer, "_insert_new", broken)
        async with asyncio.timeout(30):
            with pytest.raises(StoreError, match="could not commit"):
                await save(store, make_task())
    finally:
        monkeypatch.undo()
        await store.close()


async def test_sqlite_a_write_queued_as_the_store_closes_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    task = make_task()
    pending = asyncio.ensure_future(save(store, task))
    await asyncio.sleep(0)  # queued, not written yet
    await store.close()
    await asyncio.wait_for(pending, 30)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT id FROM tasks").fetchall() == [(task.id,)]


# -- push notifications: what is particular to each store -------------------------------------------------


def _schema_2() -> str:
    """The schema-2 layout: today's without its push tables (schema 3), its event log (schema 5) and its
    retention indexes (schema 6)."""
    from skillwire.stores.sqlite import _SCHEMA

    statements = [s for s in _SCHEMA.split(";") if s.strip()]
    later = ("push_configs", "deliveries", "events (", "idempotency", "tasks_finished")
    kept = [s for s in statements if not any(t in s for t in later)]
    assert len(statements) - len(kept) == 9  # four tables, five indexes
    schema = ";".join(kept) + ";"
    log_columns = (
        "    log         BLOB    NOT NULL DEFAULT x'',\n    log_bytes   INTEGER NOT NULL DEFAULT 0,\n"
    )
    assert log_columns in schema
    return schema.replace(log_columns, "")


def _tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_sqlite_migrates_a_schema_2_file_keeping_its_tasks(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    task = make_task(state=TaskState.WORKING)
    write = write_task(task, version=2)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(_schema_2())
        conn.execute(
            "INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, head, messages, size,"
            " history, artifacts, layout) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                "", task.id, task.context_id, write.state.value, write.updated_us, 2, write.head,
                write.layout.messages, write.layout.size, b"[" + b",".join(write.messages) + b"]",
                b"[" + b",".join(p.body for p in write.artifacts) + b"]", msgspec.json.encode(write.layout),
            ),
        )  # fmt: skip
        conn.execute("PRAGMA user_version=2")
        conn.commit()
    assert "deliveries" not in _tables(path)
    store = SQLiteTaskStore(path)
    await store.open()
    try:
        stored = await store.get(task.id)
        assert stored is not None and stored.task == task and stored.version == 2
        assert await store.put_push_config(push_config(task.id, "c1"), 10)
        assert await store.get_push_config("", task.id, "c1") == push_config(task.id, "c1")
        later = make_task(task_id=task.id, state=TaskState.COMPLETED, text="done")
        await store.commit(with_deliveries(write_task(later, version=3, base=2), b"finished"))
        head = await _head(store, ("", task.id, "c1"))
        assert head is not None and head.body == b"finished"
        unfinished, _ = await store.unfinished()
        assert unfinished == []
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert {"push_configs", "deliveries", "tasks", "messages", "artifacts"} <= _tables(path)


async def test_sqlite_migrates_an_empty_schema_2_file(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(_schema_2())
        conn.execute("PRAGMA user_version=2")
    store = SQLiteTaskStore(path)
    await store.open()
    try:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1), b"one"))
        assert await store.pending_lanes() == [(("", task.id, "c1"), 0)]
    finally:
        await store.close()


async def test_sqlite_pending_deliveries_and_configs_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    task = make_task()
    record = push_config(task.id, "c1", shape="0.3")
    await store.put_push_config(record, 10)
    await store.commit(with_deliveries(write_task(task, version=1), b"one", b"two", b"three"))
    first = await _head(store, ("", task.id, "c1"))
    assert first is not None
    await store.retry_delivery(first.seq, 2, 1_700_000_000_000_000, "HTTP 502")
    await store.close()

    again = SQLiteTaskStore(path)
    await again.open()
    try:
        lane = ("", task.id, "c1")
        assert await again.pending_lanes() == [(lane, 1_700_000_000_000_000)]
        assert await again.get_push_config("", task.id, "c1") == record
        head = await _head(again, lane)
        assert head == msgspec.structs.replace(
            first, attempts=2, next_us=1_700_000_000_000_000, error="HTTP 502"
        )
        await again.fail_delivery(head.seq, 3, "HTTP 410")
        # seq goes on growing after a reopen
        await again.commit(with_deliveries(write_task(task, version=2, base=1), b"four"))
        bodies = []
        while (d := await _head(again, lane)) is not None:
            bodies.append((d.seq, d.body))
            await again.finish_deliveries([d.seq])
        assert [b for _, b in bodies] == [b"two", b"three", b"four"]
        assert [s for s, _ in bodies] == sorted(s for s, _ in bodies) and bodies[0][0] > first.seq
        assert [d.body for d in await again.failed_deliveries()] == [b"one"]
    finally:
        await again.close()


_PUSH_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    import msgspec
    from skillwire import SQLiteTaskStore
    from skillwire.stores.base import write_task
    from skillwire.stores.push import Outgoing
    from skillwire.testing.store_contract import make_task, push_config

    async def main():
        store = SQLiteTaskStore(sys.argv[1])
        await store.open()
        await store.put_push_config(push_config("t1", "c1"), 10)
        write = write_task(make_task(task_id="t1"), version=1)
        await store.commit(msgspec.structs.replace(
            write, deliveries=(Outgoing("c1", b"one"), Outgoing("c1", b"two"), Outgoing("c2", b"other"))
        ))
        print("committed", flush=True)
        await asyncio.Event().wait()   # killed here, with the store still open

    asyncio.run(main())
    """
)


def test_sqlite_deliveries_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(_SRC), os.environ.get("PYTHONPATH")) if p),
    }
    with subprocess.Popen(
        [sys.executable, "-c", _PUSH_WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "committed"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL

    async def restart() -> None:
        store = SQLiteTaskStore(path)
        await store.open()
        try:
            assert sorted(await store.pending_lanes()) == [(("", "t1", "c1"), 0), (("", "t1", "c2"), 0)]
            assert await store.get_push_config("", "t1", "c1") == push_config("t1", "c1")
            bodies = []
            while (d := await _head(store, ("", "t1", "c1"))) is not None:
                bodies.append(d.body)
                await store.finish_deliveries([d.seq])
            assert bodies == [b"one", b"two"]
            stored = await store.get("t1")
            assert stored is not None and stored.version == 1
        finally:
            await store.close()

    asyncio.run(restart())


_SRC = Path(__file__).resolve().parent.parent / "src"


def test_memory_push_state_keeps_the_last_max_failed_deliveries() -> None:
    state = MemoryPushState(max_failed=3)
    state.enqueue("", "t1", tuple(Outgoing("c1", f"d{i}".encode()) for i in range(6)), 5)
    seqs = [seq for seq in state.lanes[("", "t1", "c1")]]
    for seq in seqs[:5]:
        state.fail(seq, 1, f"failed {seq}")
    assert [d.body for d in state.failed(0, 100)] == [b"d2", b"d3", b"d4"]
    assert all(d.failed and d.error == f"failed {d.seq}" for d in state.failed(0, 100))
    assert set(state.deliveries) == {seqs[2], seqs[3], seqs[4], seqs[5]}  # the older ones are forgotten
    [head] = state.next_deliveries(("", "t1", "c1"), 5)
    assert head.body == b"d5"
    assert state.pending_count() == 1


async def test_sqlite_keeps_the_last_max_failed_deliveries(tmp_path: Path) -> None:
    store = SQLiteTaskStore(tmp_path / "t.db", max_failed_deliveries=3)
    await store.open()
    try:
        task = make_task()
        await store.commit(
            with_deliveries(write_task(task, version=1), *(f"d{i}".encode() for i in range(6)))
        )
        lane = ("", task.id, "c1")
        for _ in range(5):
            head = await _head(store, lane)
            assert head is not None
            await store.fail_delivery(head.seq, 1, "HTTP 400")
        assert [d.body for d in await store.failed_deliveries()] == [b"d2", b"d3", b"d4"]
        head = await _head(store, lane)
        assert head is not None and head.body == b"d5"
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as conn:
        assert conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 4
