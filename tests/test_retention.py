"""Task retention (issue 32): finished tasks past Limits.task_retention are pruned in the background with
everything stored for them, never an unfinished one; a pruned task answers TASK_NOT_FOUND over a real server;
a process killed in the middle of a prune leaves the store consistent (SQLite, PostgreSQL); ``skillwire db
prune`` and ``db stats``; the SQLite file reuses (and hands back) the space of pruned tasks; the metrics.

The store-level behaviour every store shares is the contract suite's (RetentionStoreContract, run by
test_stores.py and test_stores_postgres.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from conftest import A2A_V1, RunningServer, example_agent, postgres_dsn, postgres_schema, rpc, user_message
from skillwire import Limits, SkillwireError, TaskState
from skillwire.cli.main import main
from skillwire.protocol.limits import describe_duration, parse_duration, parse_limit
from skillwire.server.app import A2AApplication
from skillwire.server.observability.metrics import Metrics
from skillwire.server.tasks.retention import Pruner
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore
from skillwire.stores.base import TaskQuery, write_task
from skillwire.stores.idempotency import Claim
from skillwire.stores.retention import RetentionStore
from skillwire.testing.store_contract import make_task, push_config, save, with_deliveries

WAIT = 15.0
ROOT = Path(__file__).resolve().parent.parent


# -- durations and settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("45s", 45.0),
        ("15m", 900.0),
        ("12h", 43_200.0),
        ("7d", 604_800.0),
        ("2w", 1_209_600.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        (" none ", None),
        ("forever", None),
    ],
)
def test_durations_read_as_seconds(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "-5m", "5 minutes", "1y", "d"])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_durations_are_described_in_the_largest_unit_that_divides_them() -> None:
    assert [describe_duration(s) for s in (86_400, 172_800, 5400, 60, 45, 0.5, None)] == [
        "1 day",
        "2 days",
        "90 minutes",
        "1 minute",
        "45 s",
        "0.5 s",
        "forever",
    ]


def test_the_default_retention_is_the_idempotency_window() -> None:
    limits = Limits()
    assert limits.task_retention == limits.idempotency_window == 86_400.0
    assert parse_limit("task_retention=7d").task_retention == 604_800.0
    assert parse_limit("task_retention=none").task_retention is None


def test_agent_task_retention_sets_the_apps_limit() -> None:
    agent = example_agent("echo")
    assert agent.limits_for().task_retention == 86_400.0  # "default": the Limits' own
    for given, seconds in (("12h", 43_200.0), (timedelta(minutes=5), 300.0), (30, 30.0), (None, None)):
        agent.task_retention = given
        assert agent.limits_for(Limits(task_retention=1.0)).task_retention == seconds
    agent.task_retention = "soon"
    with pytest.raises(SkillwireError, match="task_retention"):
        agent.limits_for()
    agent.task_retention = "2h"
    app = agent.asgi(store="memory://")
    assert app.limits.task_retention == 7200.0


def test_serve_refuses_a_bad_task_retention(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["serve", str(Path(__file__).parent.parent / "examples" / "echo"), "--task-retention", "x"]) == 2
    )
    assert "--task-retention" in capsys.readouterr().err


# -- the pruner, on every store -----------------------------------------------------------------------------


def _ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


async def _seed(store: TaskStore, finished: int, *, age: float = 3.0) -> dict[str, list[str]]:
    """``finished`` tasks finished ``age`` seconds ago (each with a push config, a pending delivery and a
    claim), unfinished tasks older still, and one task finished now: their ids by kind."""
    old = [make_task(state=TaskState.COMPLETED, at=_ago(age)) for _ in range(finished)]
    unfinished = [
        make_task(state=state, at=_ago(age * 100))
        for state in (
            TaskState.WORKING,
            TaskState.INPUT_REQUIRED,
            TaskState.AUTH_REQUIRED,
            TaskState.SUBMITTED,
        )
    ]
    fresh = make_task(state=TaskState.FAILED, at=datetime.now(UTC) + timedelta(minutes=5))
    lapses = time.time_ns() // 1000 + 10**12
    for task in old:
        write = msgspec.structs.replace(write_task(task, version=2), configs=(push_config(task.id, "c1"),))
        claim = Claim("", f"key-{task.id}", b"d", 1_000, lapses, task_id=task.id)
        await store.commit(msgspec.structs.replace(with_deliveries(write, b"done"), claim=claim))
    for task in (*unfinished, fresh):
        await save(store, task)
    return {"old": [t.id for t in old], "kept": [t.id for t in (*unfinished, fresh)]}


async def test_retention_prunes_finished_tasks_with_what_is_theirs_and_no_unfinished_one(
    store: TaskStore,
) -> None:
    assert isinstance(store, RetentionStore)
    ids = await _seed(store, 23)
    metrics = Metrics()
    pruner = Pruner(store, retention=1.0, metrics=metrics, batch=5)
    done = await pruner.prune_due()
    assert done.tasks == 23 and done.push_configs == 23 and done.deliveries == 23 and done.claims == 23
    for task_id in ids["old"]:
        assert await store.get(task_id) is None
        assert await store.list_push_configs("", task_id) == []  # type: ignore[attr-defined]
        assert await store.recall("", f"key-{task_id}", 2_000) is None  # type: ignore[attr-defined]
    for task_id in ids["kept"]:
        assert await store.get(task_id) is not None
    assert await store.pending_count() == 0  # type: ignore[attr-defined]
    page = await store.list_tasks(TaskQuery())
    assert {t.id for t in page.tasks} == set(ids["kept"])
    assert (await pruner.prune_due()).tasks == 0
    body = metrics.exposition()[0].decode()
    assert "skillwire_tasks_pruned_total 23.0" in body


async def test_the_pruner_runs_in_the_background_and_reads_the_store_for_the_metrics(tmp_path: Path) -> None:
    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    try:
        ids = await _seed(store, 3)
        metrics = Metrics()
        pruner = Pruner(store, retention=1.0, metrics=metrics, interval=0.05)
        pruner.start()
        try:
            async with asyncio.timeout(WAIT):
                await pruner.round_done.wait()
        finally:
            await pruner.stop()
        assert pruner.total.tasks == 3 and all([await store.get(i) is None for i in ids["old"]])
        stats = metrics.stats
        assert sum(stats.tasks.values()) == len(ids["kept"]) and stats.size_bytes > 0
        body = metrics.exposition()[0].decode()
        assert 'skillwire_store_tasks{state="TASK_STATE_WORKING"} 1.0' in body
        assert 'skillwire_store_tasks{state="TASK_STATE_COMPLETED"} 0.0' in body
        assert f"skillwire_store_size_bytes {float(stats.size_bytes)}" in body
    finally:
        await store.close()


async def test_with_retention_none_nothing_is_pruned(tmp_path: Path) -> None:
    store = MemoryTaskStore()
    ids = await _seed(store, 2)
    assert (await Pruner(store, retention=None).prune_due()).tasks == 0
    assert all([await store.get(i) is not None for i in ids["old"]])


async def test_postgres_processes_prune_one_at_a_time() -> None:
    from skillwire.stores.postgres import PostgresTaskStore

    async with postgres_schema() as url:
        a, b = PostgresTaskStore(url), PostgresTaskStore(url)
        await a.open()
        await b.open()
        try:
            await _seed(a, 4)
            before = time.time_ns() // 1000
            # a holds the prune lock in an open transaction (as a process in the middle of a batch does)
            async with a._conn() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", 0x5357 + 2, a.schema)
                busy = await b.prune_finished(before, 10)
                assert busy.busy and busy.tasks == 0
            done = await b.prune_finished(before, 10)
            assert done.tasks == 4 and not done.busy
        finally:
            await a.close()
            await b.close()


# -- over a real server --------------------------------------------------------------------------------------


def _next_round(srv: RunningServer) -> None:
    """Wait for the server's pruner to finish its next round (on the server's own loop)."""
    runtime = srv.app.runtime
    assert runtime is not None and runtime.pruner is not None
    pruner = runtime.pruner

    async def wait() -> None:
        pruner.round_done.clear()
        await pruner.round_done.wait()

    asyncio.run_coroutine_threadsafe(wait(), srv.loop).result(WAIT)


async def test_a_pruned_task_answers_task_not_found_on_every_binding(
    tmp_path: Path, serve: Callable[[A2AApplication], RunningServer]
) -> None:
    path = tmp_path / "tasks.db"
    seeded = SQLiteTaskStore(path)
    await seeded.open()
    waiting = make_task(state=TaskState.INPUT_REQUIRED, at=_ago(86_400))
    await save(seeded, waiting)
    await seeded.close()
    agent = example_agent("echo")
    agent.task_retention = 1
    srv = serve(agent.asgi(store=f"sqlite:///{path}", metrics=True))
    await asyncio.to_thread(_pruned_over_http, srv, waiting.id)


def _pruned_over_http(srv: RunningServer, waiting: str) -> None:
    with httpx.Client(headers=A2A_V1, timeout=WAIT) as http:
        sent = http.post(srv.rpc_url, json=rpc("SendMessage", {"message": user_message("hi")})).json()
        task_id = sent["result"]["task"]["id"]
        assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        def get() -> dict[str, Any]:
            answer: dict[str, Any] = http.post(srv.rpc_url, json=rpc("GetTask", {"id": task_id})).json()
            return answer

        assert "result" in get()
        deadline = time.monotonic() + WAIT
        while "result" in get():
            assert time.monotonic() < deadline, "the finished task was not pruned"
            _next_round(srv)
        error = get()["error"]
        assert error["code"] == -32001 and error["data"][0]["reason"] == "TASK_NOT_FOUND"
        rest = http.get(f"{srv.url}/tasks/{task_id}")
        assert rest.status_code == 404 and "TASK_NOT_FOUND" in rest.text
        listed = http.post(srv.rpc_url, json=rpc("ListTasks", {})).json()["result"]
        assert [t["id"] for t in listed["tasks"]] == [waiting]  # unfinished, a day old: kept
        kept = http.post(srv.rpc_url, json=rpc("GetTask", {"id": waiting})).json()
        assert kept["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        metrics = http.get(f"{srv.url}/metrics").text
        assert "skillwire_tasks_pruned_total 1.0" in metrics


# -- a process killed in the middle of a prune --------------------------------------------------------------

_PRUNE_FOREVER = textwrap.dedent(
    """
    import asyncio, sys
    from skillwire.stores import open_store

    async def main() -> None:
        store = open_store(sys.argv[1])
        await store.open()
        print("open", flush=True)
        while (await store.prune_finished(int(sys.argv[2]), 5)).tasks:
            pass
        print("done", flush=True)

    asyncio.run(main())
    """
)


async def _seed_many(store: TaskStore, count: int) -> tuple[int, int]:
    """``count`` finished tasks a minute old, each with a config, a delivery and a claim, and 20 unfinished
    ones; the instant to prune before, and the number of unfinished tasks."""
    lapses = time.time_ns() // 1000 + 10**12
    at = _ago(60)
    writes = []
    for i in range(count):
        task = make_task(state=TaskState.COMPLETED, at=at + timedelta(microseconds=i))
        write = msgspec.structs.replace(write_task(task, version=2), configs=(push_config(task.id, "c1"),))
        write = msgspec.structs.replace(
            with_deliveries(write, b"done"),
            claim=Claim("", f"key-{task.id}", b"d", 1_000, lapses, task_id=task.id) if i % 4 == 0 else None,
        )
        writes.append(write)
    for first in range(0, count, 250):
        await asyncio.gather(*(store.commit(w) for w in writes[first : first + 250]))
    for _ in range(20):
        await save(store, make_task(state=TaskState.WORKING, at=_ago(3600)))
    return time.time_ns() // 1000 - 1_000_000, 20


async def _killed_mid_prune(url: str, count: Callable[[], Awaitable[int]], seeded: int) -> int:
    """Start a process pruning ``url``; SIGKILL it once some tasks (not all) are gone; the tasks left."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PRUNE_FOREVER, url, str(time.time_ns() // 1000 - 1_000_000),
        stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(WAIT):
            assert await proc.stdout.readline() == b"open\n"
            for _ in range(int(WAIT / 0.005)):  # poll the store until a few batches are gone
                if await count() <= seeded - 300:
                    break
                await asyncio.sleep(0.005)  # the poll interval: the store has no event to wait on
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    left = await count()
    assert 20 < left < seeded, f"the kill did not land in the middle of the prune ({left} of {seeded} left)"
    return left


_SQLITE_ORPHANS = {
    "messages": "SELECT COUNT(*) FROM messages WHERE task NOT IN (SELECT seq FROM tasks)",
    "artifacts": "SELECT COUNT(*) FROM artifacts WHERE task NOT IN (SELECT seq FROM tasks)",
    "events": "SELECT COUNT(*) FROM events WHERE task NOT IN (SELECT seq FROM tasks)",
    "configs": "SELECT COUNT(*) FROM push_configs p WHERE NOT EXISTS"
    " (SELECT 1 FROM tasks t WHERE t.tenant = p.tenant AND t.id = p.task_id)",
    "deliveries": "SELECT COUNT(*) FROM deliveries d WHERE NOT EXISTS"
    " (SELECT 1 FROM tasks t WHERE t.tenant = d.tenant AND t.id = d.task_id)",
    "claims": "SELECT COUNT(*) FROM idempotency k WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = k.task_id)",
    # a finished task left without its config or its delivery would be half pruned
    "half-pruned": "SELECT COUNT(*) FROM tasks t WHERE t.state = 'TASK_STATE_COMPLETED' AND (NOT EXISTS"
    " (SELECT 1 FROM push_configs p WHERE p.tenant = t.tenant AND p.task_id = t.id) OR NOT EXISTS"
    " (SELECT 1 FROM deliveries d WHERE d.tenant = t.tenant AND d.task_id = t.id))",
}


async def test_sqlite_killed_in_the_middle_of_a_prune_is_consistent(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    store = SQLiteTaskStore(path)
    await store.open()
    seeded = 6000
    await _seed_many(store, seeded)
    await store.close()
    total = seeded + 20

    async def count() -> int:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])

    left = await _killed_mid_prune(f"sqlite:///{path}", count, total)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert {
            name: conn.execute(sql).fetchone()[0] for name, sql in _SQLITE_ORPHANS.items()
        } == dict.fromkeys(_SQLITE_ORPHANS, 0)
        assert (
            conn.execute("SELECT COUNT(*) FROM tasks WHERE state = 'TASK_STATE_WORKING'").fetchone()[0] == 20
        )
    again = SQLiteTaskStore(path)
    await again.open()
    try:
        page = await again.list_tasks(TaskQuery(page_size=50))
        assert page.total_size == left and len(page.tasks) == 50
        rest = await Pruner(again, retention=1.0, batch=500).prune_due()
        assert rest.tasks == left - 20  # the restarted pruner finishes the job
        assert sum((await again.stats()).tasks.values()) == 20
    finally:
        await again.close()


async def test_postgres_killed_in_the_middle_of_a_prune_is_consistent() -> None:
    import asyncpg

    from skillwire.stores.postgres import PostgresTaskStore

    async with postgres_schema() as url:
        store = PostgresTaskStore(url)
        await store.open()
        seeded = 3000
        await _seed_many(store, seeded)
        s = '"' + url.rpartition("schema=")[2] + '"'
        conn = await asyncpg.connect(await postgres_dsn(), timeout=5)
        try:

            async def count() -> int:
                return int(await conn.fetchval(f"SELECT COUNT(*) FROM {s}.skillwire_tasks"))

            left = await _killed_mid_prune(url, count, seeded + 20)
            orphans = {
                name: await conn.fetchval(
                    sql.replace("FROM tasks", f"FROM {s}.skillwire_tasks")
                    .replace("FROM messages", f"FROM {s}.skillwire_messages")
                    .replace("FROM artifacts", f"FROM {s}.skillwire_artifacts")
                    .replace("FROM events", f"FROM {s}.skillwire_event_log")
                    .replace("FROM push_configs", f"FROM {s}.skillwire_push_configs")
                    .replace("FROM deliveries", f"FROM {s}.skillwire_deliveries")
                    .replace("FROM idempotency", f"FROM {s}.skillwire_idempotency")
                )
                for name, sql in _SQLITE_ORPHANS.items()
            }
            assert orphans == dict.fromkeys(_SQLITE_ORPHANS, 0)
        finally:
            await conn.close()
        try:
            page = await store.list_tasks(TaskQuery(page_size=50))
            assert page.total_size == left
            rest = await Pruner(store, retention=1.0, batch=500).prune_due()
            assert rest.tasks == left - 20
        finally:
            await store.close()


# -- the SQLite file's space ---------------------------------------------------------------------------------


async def _fill(store: SQLiteTaskStore, count: int, text: str) -> None:
    tasks = [make_task(state=TaskState.COMPLETED, at=_ago(60), text=text) for _ in range(count)]
    for first in range(0, count, 500):
        await asyncio.gather(*(save(store, t) for t in tasks[first : first + 500]))


async def _settled_size(store: SQLiteTaskStore) -> int:
    """The file's size once its WAL is checkpointed into it, whole. The store's own checkpointer runs
    passive checkpoints, which copy only the frames no reader still needs, so the size right after one is
    anywhere between the file before the last writes and after them (9.6 to 14.4 MB for the same 3,000
    tasks, seen here); a truncating checkpoint copies them all. It cannot run beside the store's own
    checkpoint (it answers busy at once), so it follows one, and is tried again after the next if busy."""
    assert store._checkpointer is not None

    def truncate() -> int:
        with contextlib.closing(sqlite3.connect(store.path, timeout=WAIT)) as conn:
            busy: int = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        return busy

    for _ in range(20):
        store._checkpointer.checkpointed.clear()
        store._checkpointer.written()
        async with asyncio.timeout(WAIT):
            await asyncio.to_thread(store._checkpointer.checkpointed.wait)
        if await asyncio.to_thread(truncate) == 0:
            return await asyncio.to_thread(os.path.getsize, store.path)
    raise AssertionError("no checkpoint could copy the whole WAL")


async def test_a_new_sqlite_file_reuses_and_hands_back_the_space_of_pruned_tasks(tmp_path: Path) -> None:
    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    try:
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
        text = "x" * 2000
        await _fill(store, 3000, text)
        full = await _settled_size(store)
        for _ in range(3):  # a steady load with retention: what is pruned makes room for what comes
            await Pruner(store, retention=1.0, batch=500).prune_due()
            await _fill(store, 3000, text)
        assert await _settled_size(store) < full * 1.15
        await Pruner(store, retention=1.0, batch=200).prune_due()
        stats = await store.stats()
        assert stats.tasks == {}
        # the file handed back what more than half of it held free
        assert await _settled_size(store) < full / 2
    finally:
        await store.close()


async def test_db_prune_vacuum_gives_an_old_file_incremental_auto_vacuum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:  # written before auto-vacuum was chosen
        conn.execute("CREATE TABLE made_before (x)")
        conn.execute("DROP TABLE made_before")
    store = SQLiteTaskStore(path)
    await store.open()
    await _fill(store, 1000, "y" * 2000)
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    before = await asyncio.to_thread(os.path.getsize, path)
    code = await asyncio.to_thread(main, ["db", "prune", str(path), "--older-than", "30s", "--vacuum"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pruned 1000 finished task(s) older than 30 s" in out and "vacuumed" in out
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert await asyncio.to_thread(os.path.getsize, path) < before / 4


# -- skillwire db prune / db stats --------------------------------------------------------------------------


@pytest.fixture
async def seeded_file(tmp_path: Path) -> AsyncIterator[Path]:
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    await store.open()
    for state in (TaskState.COMPLETED, TaskState.COMPLETED, TaskState.CANCELED):
        await save(store, make_task(state=state, at=_ago(7200)))
    await save(store, make_task(state=TaskState.COMPLETED, at=_ago(60)))
    await save(store, make_task(state=TaskState.WORKING, at=_ago(86_400)))
    await store.close()
    yield path


async def test_db_stats_and_prune_on_a_sqlite_file(
    seeded_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(*args: str) -> str:
        assert main(list(args)) == 0
        return capsys.readouterr().out

    stats = json.loads(await asyncio.to_thread(run, "db", "stats", f"sqlite:///{seeded_file}", "--json"))
    assert stats["tasks"] == {"completed": 3, "canceled": 1, "working": 1} and stats["total"] == 5
    assert stats["sizeBytes"] > 0 and stats["oldestFinished"].endswith("Z")
    dry = await asyncio.to_thread(run, "db", "prune", str(seeded_file), "--older-than", "1h", "--dry-run")
    assert dry.strip() == "would prune 3 finished task(s) older than 1 hour: canceled 1, completed 2"
    done = await asyncio.to_thread(run, "db", "prune", str(seeded_file), "--older-than", "1h")
    assert done.startswith("pruned 3 finished task(s) older than 1 hour\n  with ")
    text = await asyncio.to_thread(run, "db", "stats", str(seeded_file))
    assert "tasks: 2\n  completed: 1\n  working: 1\nsize on disk: " in text
    assert "oldest finished task: " in text and "(1 minute ago)" in text


async def test_db_prune_is_refused_while_a_server_owns_the_sqlite_file_and_stats_is_not(
    seeded_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = SQLiteTaskStore(seeded_file)
    await owner.open()
    try:
        assert await asyncio.to_thread(main, ["db", "prune", str(seeded_file)]) == 2
        assert "is in use by process" in capsys.readouterr().err
        assert await asyncio.to_thread(main, ["db", "stats", str(seeded_file), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["total"] == 5
    finally:
        await owner.close()


async def test_db_prune_and_stats_on_postgres_in_a_subprocess() -> None:
    from skillwire.stores.postgres import PostgresTaskStore

    async with postgres_schema() as url:
        store = PostgresTaskStore(url)
        await store.open()
        for _ in range(4):
            await save(store, make_task(state=TaskState.FAILED, at=_ago(7200)))
        await save(store, make_task(state=TaskState.WORKING, at=_ago(7200)))
        await store.close()

        async def cli(*args: str) -> str:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "skillwire", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            async with asyncio.timeout(WAIT):
                out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            return out.decode()

        assert json.loads(await cli("db", "stats", url, "--json"))["tasks"] == {"failed": 4, "working": 1}
        assert (await cli("db", "prune", url, "--older-than", "1h")).startswith("pruned 4 finished task(s)")
        stats = json.loads(await cli("db", "stats", url, "--json"))
        assert stats["tasks"] == {"working": 1} and stats["oldestFinished"] is None and stats["sizeBytes"] > 0


def test_serve_takes_the_retention_from_its_variable_and_prints_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse
    from skillwire.server.serving.serve import print_banner

    echo = str(Path(__file__).parent.parent / "examples" / "echo")
    monkeypatch.setenv("SKILLWIRE_TASK_RETENTION", "90s")
    agent, app = application(_parse(["serve", echo, "--store", "memory://"]))
    assert app.limits.task_retention == 90.0
    print_banner(app, agent.name, host="127.0.0.1", port=8000)
    assert (
        "  finished tasks kept: 90 s (--task-retention)\n  task store: memory://" in capsys.readouterr().err
    )
    _, flagged = application(_parse(["serve", echo, "--store", "memory://", "--task-retention", "none"]))
    assert flagged.limits.task_retention is None
    print_banner(flagged, agent.name, host="127.0.0.1", port=8000)
    assert "finished tasks kept: forever" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="the soak drives its load with wrk")
def test_the_soak_benchmark_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    command = [sys.executable, str(ROOT / "bench" / "retention_soak.py"), "--quick", "--json", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [run["name"] for run in data["runs"]] == ["retention on", "retention off"]
    for run in data["runs"]:
        assert run["segments"] and run["samples"] and all(s["errors"] == 0 for s in run["segments"])
    assert data["backlog"]["pruned_at"] is not None  # the backlog was pruned under load
    assert "| retention on |" in done.stdout and "| while pruning" in done.stdout
