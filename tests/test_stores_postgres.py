"""The PostgreSQL store: both contract suites, then what only a store shared by several processes has."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import msgspec
import pytest

from conftest import ROOT, TcpProxy, free_port, postgres_address, postgres_dsn, postgres_schema, via_proxy
from skillwire import SkillwireError, TaskState
from skillwire.errors import ConcurrentUpdateError, StoreError, install_command
from skillwire.protocol.models import TaskStatus
from skillwire.stores import open_store
from skillwire.stores.base import TaskQuery, TaskStore, write_task
from skillwire.stores.loop_batch import MAX_BATCH_BYTES
from skillwire.stores.postgres import SCHEMA_VERSION, PostgresTaskStore, upgrade
from skillwire.stores.push import PushConfigRecord, PushStore
from skillwire.stores.shared import SharedStore
from skillwire.testing.store_contract import (
    IdempotencyStoreContract,
    PushStoreContract,
    RetentionStoreContract,
    TaskStoreContract,
    drain,
    generations,
    log_events,
    make_task,
    message,
    save,
    with_deliveries,
)


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with postgres_schema() as url:
        yield url


class TestPostgresStore(
    TaskStoreContract, PushStoreContract, IdempotencyStoreContract, RetentionStoreContract
):
    @pytest.fixture
    async def store(self, pg_url: str) -> AsyncIterator[PostgresTaskStore]:
        s = PostgresTaskStore(pg_url)
        await s.open()
        yield s
        await s.close()


# -- helpers ------------------------------------------------------------------------------------------------

WAIT = 10.0


async def opened(url: str, owner: str | None = None) -> PostgresTaskStore:
    store = PostgresTaskStore(url, owner=owner)
    await store.open()
    return store


@pytest.fixture
async def pair(pg_url: str) -> AsyncIterator[tuple[PostgresTaskStore, PostgresTaskStore]]:
    """Two stores on one schema with two owners, as two server processes have."""
    a, b = await opened(pg_url, "owner-a"), await opened(pg_url, "owner-b")
    yield a, b
    await a.close()
    await b.close()


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll the database until ``condition()`` holds, for at most WAIT seconds (the database's clock decides
    when a lease expires, so there is no event to wait on)."""
    async with asyncio.timeout(WAIT):
        for _ in range(int(WAIT / 0.01)):
            if await condition():
                return
            await asyncio.sleep(0.01)  # the poll interval
    raise AssertionError(f"not within {WAIT} s: {what}")


async def orphan_ids(store: PostgresTaskStore) -> set[tuple[str, str, str]]:
    return {(tenant, s.task.id, owner) for tenant, s, owner in await store.orphaned()}


# -- several processes on one schema ------------------------------------------------------------------------


async def test_racing_commits_of_two_processes_have_one_winner(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    a, b = pair
    task = make_task()
    await save(a, task)
    writers = [s for _ in range(10) for s in (a, b)]
    results = await asyncio.gather(
        *(
            save(s, make_task(task_id=task.id, text=f"w{i}"), version=2, base=1)
            for i, s in enumerate(writers)
        ),
        return_exceptions=True,
    )
    winners = [i for i, r in enumerate(results) if r is None]
    assert len(winners) == 1
    assert all(isinstance(r, ConcurrentUpdateError) for r in results if r is not None)
    for s in (a, b):
        stored = await s.get(task.id)
        assert stored is not None and stored.version == 2
        assert stored.task.artifacts[0].parts[0].text == f"w{winners[0]}"


async def test_read_modify_write_from_two_processes_loses_no_update(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    """Each writer appends a message from what it read, retrying on conflict: every append survives."""
    a, b = pair
    task = make_task()
    await save(a, task)

    async def append(store: PostgresTaskStore, text: str) -> int:
        conflicts = 0
        while True:
            stored = await store.get(task.id)
            assert stored is not None
            grown = msgspec.structs.replace(
                stored.task, history=[*stored.task.history, message(task.id, "ctx", text)]
            )
            write = write_task(grown, version=stored.version + 1, base=stored.version, stored=stored.layout)
            try:
                await store.commit(write)
                return conflicts
            except ConcurrentUpdateError:
                conflicts += 1

    texts = [f"{name}{i}" for i in range(15) for name in ("a", "b")]
    conflicts = await asyncio.gather(*(append(a if t[0] == "a" else b, t) for t in texts))
    final = await b.get(task.id)
    assert final is not None and final.version == 1 + len(texts)
    assert sorted(m.parts[0].text for m in final.task.history[1:]) == sorted(texts)
    assert sum(conflicts) > 0  # the writers did race


async def test_a_commit_records_its_owner_and_leases_decide_what_is_orphaned(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    a, b = pair
    mine, theirs = make_task(state=TaskState.WORKING), make_task(state=TaskState.SUBMITTED)
    await save(a, mine, tenant="t1")
    await save(b, theirs)
    for state in (TaskState.INPUT_REQUIRED, TaskState.COMPLETED):
        await save(a, make_task(state=state))
    # no lease at all: everything unfinished is orphaned, each with the owner that last wrote it
    assert await orphan_ids(a) == {("t1", mine.id, "owner-a"), ("", theirs.id, "owner-b")}
    await a.renew_lease(60)
    await b.renew_lease(60)
    assert await orphan_ids(a) == set()
    # a's lease runs out (by the database's clock): its task is orphaned, b's is not
    await a.renew_lease(0.05)
    await until(
        lambda: _has_orphans(b, {("t1", mine.id, "owner-a")}), "a's task orphaned once its lease expired"
    )
    [(tenant, stored, owner)] = await b.orphaned()
    assert (tenant, owner) == ("t1", "owner-a")
    assert stored.task == mine and stored.version == 1 and stored.layout is not None
    # renewing brings it back
    await a.renew_lease(60)
    assert await orphan_ids(b) == set()
    # a clean stop releases the lease: orphaned at once
    await b.release_lease()
    assert await orphan_ids(a) == {("", theirs.id, "owner-b")}
    # taking over is a commit from the version read: one of two racing takers wins, and the task is its own
    [(_, orphan, _)] = await a.orphaned()
    taken = msgspec.structs.replace(orphan.task, status=TaskStatus(state=TaskState.WORKING))
    results = await asyncio.gather(
        *(s.commit(write_task(taken, version=2, base=1, stored=orphan.layout)) for s in (a, b)),
        return_exceptions=True,
    )
    assert sorted(r is None for r in results) == [False, True]
    winner = a if results[0] is None else b
    await winner.renew_lease(60)
    assert theirs.id not in {task_id for _, task_id, _ in await orphan_ids(a)}


async def _has_orphans(store: PostgresTaskStore, expected: set[tuple[str, str, str]]) -> bool:
    return await orphan_ids(store) == expected


async def test_adopt_deliveries_takes_over_a_dead_owners_pending_deliveries(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    a, b = pair
    task = make_task()
    await a.commit(with_deliveries(write_task(task, version=1), b"one", b"two", ("c2", b"other")))
    lane = ("", task.id, "c1")
    [failing] = await a.next_deliveries(("", task.id, "c2"))
    await a.fail_delivery(failing.seq, 3, "HTTP 410")
    assert await a.pending_count() == 2 and await b.pending_count() == 0
    assert await b.pending_lanes() == [] and await b.next_deliveries(lane, 10) == []
    # failed deliveries are for the operator: every owner's
    assert [d.body for d in await b.failed_deliveries()] == [b"other"]
    await a.renew_lease(60)
    await b.renew_lease(60)
    assert await b.adopt_deliveries() == 0  # a is alive
    await a.release_lease()
    assert await b.adopt_deliveries() == 2
    assert await b.adopt_deliveries() == 0
    assert await a.pending_count() == 0 and await a.pending_lanes() == []
    assert await b.pending_lanes() == [(lane, 0)]
    assert [d.body for d in await drain(b, lane)] == [b"one", b"two"]
    assert [d.body for d in await a.failed_deliveries()] == [b"other"]


async def test_a_delivery_joins_the_owner_of_its_lanes_pending_deliveries(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    a, b = pair
    task = make_task()
    await a.commit(with_deliveries(write_task(task, version=1), b"a1"))
    stored = await b.get(task.id)
    assert stored is not None
    grown = msgspec.structs.replace(task, history=[*task.history, message(task.id, "ctx", "more")])
    await b.commit(
        with_deliveries(write_task(grown, version=2, base=1, stored=stored.layout), b"b1", ("c2", b"b2"))
    )
    c1, c2 = ("", task.id, "c1"), ("", task.id, "c2")
    # c1 had a's pending delivery: b's joins it, so one process makes the lane, in order; c2 is b's
    assert [d.body for d in await a.next_deliveries(c1, 10)] == [b"a1", b"b1"]
    assert await b.next_deliveries(c1, 10) == []
    assert await a.pending_lanes() == [(c1, 0)] and await b.pending_lanes() == [(c2, 0)]
    assert await a.pending_count() == 2 and await b.pending_count() == 1
    # once a has made the lane, the next delivery of it is its writer's
    await drain(a, c1)
    stored = await b.get(task.id)
    assert stored is not None
    await b.commit(with_deliveries(write_task(grown, version=3, base=2, stored=stored.layout), b"b3"))
    assert [d.body for d in await b.next_deliveries(c1, 10)] == [b"b3"]
    assert await a.next_deliveries(c1, 10) == []


async def test_a_shared_secret_is_the_first_one_stored_for_every_process(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    a, b = pair
    got = await asyncio.gather(*(s.shared_secret("push-key", s.owner.encode()) for s in (a, b, a, b)))
    assert len(set(got)) == 1 and got[0] in (b"owner-a", b"owner-b")
    assert await b.shared_secret("push-key", b"later") == got[0]
    assert await a.shared_secret("other\x00name", b"\x00bytes") == b"\x00bytes"


# -- schema -------------------------------------------------------------------------------------------------


async def _versions(url: str) -> list[int]:
    conn = await asyncpg.connect(await postgres_dsn())
    try:
        schema = url.rpartition("schema=")[2]
        rows = await conn.fetch(f'SELECT version FROM "{schema}".skillwire_schema ORDER BY version')
    finally:
        await conn.close()
    return [r["version"] for r in rows]


async def test_migrations_are_idempotent(pg_url: str) -> None:
    store = await opened(pg_url)
    task = make_task()
    await save(store, task)
    await store.close()
    assert await upgrade(pg_url) == SCHEMA_VERSION
    again = await opened(pg_url)
    stored = await again.get(task.id)
    await again.close()
    assert stored is not None and stored.task == task
    assert await _versions(pg_url) == list(range(1, SCHEMA_VERSION + 1))


async def test_concurrent_opens_of_a_fresh_schema_are_safe(pg_url: str) -> None:
    stores = await asyncio.gather(*(opened(pg_url) for _ in range(8)))
    try:
        tasks = [make_task() for _ in stores]
        await asyncio.gather(*(save(s, t) for s, t in zip(stores, tasks, strict=True)))
        for t in tasks:
            stored = await stores[0].get(t.id)
            assert stored is not None and stored.task == t
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    assert await _versions(pg_url) == list(range(1, SCHEMA_VERSION + 1))


async def test_a_schema_from_a_newer_skillwire_is_refused(pg_url: str) -> None:
    await upgrade(pg_url)
    conn = await asyncpg.connect(await postgres_dsn())
    schema = pg_url.rpartition("schema=")[2]
    try:
        await conn.execute(f'INSERT INTO "{schema}".skillwire_schema (version) VALUES (99)')
    finally:
        await conn.close()
    with pytest.raises(StoreError, match="newer skillwire"):
        await opened(pg_url)


async def test_list_tasks_reads_through_an_index(pg_url: str) -> None:
    store = await opened(pg_url)
    await store.close()
    conn = await asyncpg.connect(await postgres_dsn())
    tasks = f'"{store.schema}".skillwire_tasks'
    try:
        await conn.execute(
            f"INSERT INTO {tasks} (tenant, id, context_id, state, updated_us, version, head, messages, size,"
            " layout, owner) SELECT convert_to('t' || (i % 10), 'UTF8'), convert_to('id' || i, 'UTF8'),"
            " convert_to('ctx' || (i % 100), 'UTF8'), CASE WHEN i % 3 = 0 THEN 'TASK_STATE_WORKING'"
            " ELSE 'TASK_STATE_COMPLETED' END, i, 1, '\\x7b7d', 0, 2, '\\x7b7d', 'x'"
            " FROM generate_series(1, 20000) AS i"
        )
        await conn.execute(f"ANALYZE {tasks}")
        for extra in ("", " AND context_id = $2", " AND state = $2"):
            args: list[object] = [b"t3"] + (
                [b"ctx3"] if "context" in extra else ["TASK_STATE_WORKING"] if extra else []
            )
            n = len(args) + 1
            plan = "\n".join(
                r[0]
                for r in await conn.fetch(
                    f"EXPLAIN SELECT seq, size FROM {tasks} WHERE tenant = $1{extra}"
                    f" ORDER BY updated_us DESC, seq DESC LIMIT ${n}",
                    *args,
                    51,
                )
            )
            assert "Seq Scan" not in plan and re.search(
                r"(Index Scan( Backward)? using|Bitmap Index Scan on) skillwire_tasks_by_", plan
            ), plan
            if not extra:  # newest first is the index's order, read backwards: no sort
                assert "Sort" not in plan, plan
    finally:
        await conn.close()


# -- the new tasks of one loop turn (skillwire.stores.loop_batch) -------------------------------------------


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresTaskStore]:
    opened_store = await opened(pg_url)
    yield opened_store
    await opened_store.close()


async def _transactions(store: PostgresTaskStore, ids: list[str]) -> int:
    """How many transactions wrote the rows of these tasks (their ``xmin``s)."""
    conn = await asyncpg.connect(await postgres_dsn())
    try:
        found: int = await conn.fetchval(
            f'SELECT count(DISTINCT xmin::text) FROM "{store.schema}".skillwire_tasks WHERE id = ANY($1)',
            [i.encode() for i in ids],
        )
        return found
    finally:
        await conn.close()


async def test_new_tasks_of_one_turn_are_one_statement_and_each_gets_its_own_outcome(
    store: PostgresTaskStore,
) -> None:
    there = make_task(text="first")
    await save(store, there)
    tasks = [make_task(text=f"t{i}") for i in range(12)]
    long = tasks[0]  # with an event log of several rows
    writes = [write_task(t, version=1, events=log_events(t, 1, 600) if t is long else ()) for t in tasks]
    assert len(writes[0].log) > 1
    clash = write_task(make_task(task_id=there.id, text="second"), version=1)
    results = await asyncio.gather(*(store.commit(w) for w in [*writes, clash]), return_exceptions=True)
    assert results[:-1] == [None] * len(tasks)
    assert isinstance(results[-1], ConcurrentUpdateError) and "already exists" in str(results[-1])
    for t in tasks:
        stored = await store.get(t.id)
        assert stored is not None and stored.task == t and stored.version == 1
    assert await generations(store, long.id, limit=1000) == list(range(1, 601))
    first = await store.get(there.id)
    assert first is not None and first.task.artifacts[0].parts[0].text == "first"
    assert await _transactions(store, [t.id for t in tasks]) == 1


async def test_large_new_tasks_of_one_turn_are_split_by_the_batch_budget(store: PostgresTaskStore) -> None:
    # a third of the budget each (the text is in the history and in the artifact): two batches of three
    tasks = [make_task(text="x" * (MAX_BATCH_BYTES // 6)) for _ in range(6)]
    await asyncio.gather(*(save(store, t) for t in tasks))
    for t in tasks:
        stored = await store.get(t.id)
        assert stored is not None and stored.task == t
    assert await _transactions(store, [t.id for t in tasks]) == 2


async def test_a_task_named_twice_in_one_turn_is_stored_once(store: PostgresTaskStore) -> None:
    task, other = make_task(), make_task()
    twice = [make_task(task_id=task.id, text=f"w{i}") for i in range(2)]
    results = await asyncio.gather(*(save(store, t) for t in [*twice, other]), return_exceptions=True)
    assert results[2] is None
    assert sorted(type(r).__name__ for r in results[:2]) == ["ConcurrentUpdateError", "NoneType"]
    winner = twice[results.index(None)]
    stored = await store.get(task.id)
    assert stored is not None and stored.task == winner
    assert await store.get(other.id) is not None


async def test_two_processes_inserting_the_same_new_tasks_each_task_has_one_winner(
    pair: tuple[PostgresTaskStore, PostgresTaskStore],
) -> None:
    """Batches of the same keys in opposite orders, in two processes: no deadlock, one winner a task."""
    a, b = pair
    tasks = [make_task(text=f"t{i}") for i in range(40)]
    results = await asyncio.gather(
        *(save(a, t) for t in tasks), *(save(b, t) for t in reversed(tasks)), return_exceptions=True
    )
    for ra, rb in zip(results[:40], reversed(results[40:]), strict=True):
        assert sorted(type(r).__name__ for r in (ra, rb)) == ["ConcurrentUpdateError", "NoneType"]
    for t in tasks:
        assert await a.get(t.id) is not None


async def test_an_outage_fails_every_new_task_of_the_turn_and_stores_none(pg_url: str) -> None:
    proxy = TcpProxy(postgres_address(pg_url))
    proxy.start()
    store = await opened(via_proxy(pg_url, proxy, timeout="3", pool="2"))
    try:
        await save(store, make_task())
        proxy.cut()
        lost = [make_task() for _ in range(5)]
        async with asyncio.timeout(WAIT):
            results = await asyncio.gather(*(save(store, t) for t in lost), return_exceptions=True)
        assert all(isinstance(r, StoreError) for r in results), results
        proxy.start()
        for t in lost:
            assert await store.get(t.id) is None
    finally:
        await store.close()
        proxy.cut()


async def test_close_stores_the_new_tasks_queued_before_it(pg_url: str) -> None:
    store = await opened(pg_url)
    tasks = [make_task() for _ in range(3)]
    # gather starts its coroutines in order: the three writes are queued when close starts
    results = await asyncio.gather(*(save(store, t) for t in tasks), store.close(), return_exceptions=True)
    assert results == [None] * 4
    again = await opened(pg_url)
    try:
        for t in tasks:
            assert await again.get(t.id) is not None
    finally:
        await again.close()


# -- values PostgreSQL text cannot hold -------------------------------------------------------------------


async def test_ids_with_nul_round_trip(pg_url: str) -> None:
    store = await opened(pg_url)
    try:
        tenant, task_id, context, config = "t\x00enant", "id\x00\u00e9", "c\x00tx", "c\x00fg"
        task = make_task(task_id=task_id, context_id=context)
        await store.commit(with_deliveries(write_task(task, version=1, tenant=tenant), b"x", config=config))
        stored = await store.get(task_id, tenant=tenant)
        assert stored is not None and stored.task == task
        huge = await store.get(task_id, tenant=tenant, history_length=10**12)  # past INT: the whole history
        assert huge is not None and huge.task.history == task.history
        assert await store.get("id", tenant=tenant) is None and await store.get(task_id, tenant="t") is None
        page = await store.list_tasks(TaskQuery(tenant=tenant, context_id=context))
        assert [t.id for t in page.tasks] == [task_id]
        assert await store.pending_lanes() == [((tenant, task_id, config), 0)]
        record = PushConfigRecord(tenant, task_id, config, b"{}", issuer="https://\x00")
        assert await store.put_push_config(record, 5)
        assert await store.list_push_configs(tenant, task_id) == [record]
        [delivery] = await store.next_deliveries((tenant, task_id, config))
        await store.fail_delivery(delivery.seq, 1, "bad \x00 answer")
        [failed] = await store.failed_deliveries()
        assert failed.lane == (tenant, task_id, config) and failed.error == "bad \x00 answer"
    finally:
        await store.close()


# -- outages ------------------------------------------------------------------------------------------------


async def test_an_unreachable_database_is_a_store_error(pg_url: str) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/test?timeout=2"
    with pytest.raises(StoreError, match="cannot open the PostgreSQL store"):
        await opened(closed)
    with pytest.raises(StoreError, match="cannot reach PostgreSQL"):
        await upgrade(closed)
    with pytest.raises(StoreError, match="not open"):
        await PostgresTaskStore(pg_url).get("x")


async def test_an_outage_fails_calls_with_store_error_and_the_store_recovers(pg_url: str) -> None:
    proxy = TcpProxy(postgres_address(pg_url))
    proxy.start()
    store = await opened(via_proxy(pg_url, proxy, timeout="3", pool="2"))
    try:
        before = make_task()
        await save(store, before)
        proxy.cut()
        lost = make_task()
        async with asyncio.timeout(WAIT):
            with pytest.raises(StoreError):
                await save(store, lost)
            with pytest.raises(StoreError):
                await store.get(before.id)
            with pytest.raises(StoreError):
                await store.renew_lease(10)
        proxy.start()
        after = make_task()
        await save(store, after)
        for t in (before, after):
            stored = await store.get(t.id)
            assert stored is not None and stored.task == t
        assert await store.get(lost.id) is None  # the commit that failed stored nothing
    finally:
        await store.close()
        proxy.cut()


# -- the CLI and the extra ---------------------------------------------------------------------------------


async def _run(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=_env()
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}


async def test_db_upgrade_applies_the_migrations_and_prints_the_version(pg_url: str) -> None:
    for _ in range(2):  # the second run finds it up to date
        code, out = await _run("-m", "skillwire", "db", "upgrade", pg_url)
        assert (code, out.strip()) == (0, f"schema version {SCHEMA_VERSION}")
    assert await _versions(pg_url) == list(range(1, SCHEMA_VERSION + 1))
    code, out = await _run("-m", "skillwire", "db", "upgrade", "sqlite:///x.db")
    assert code == 2 and "PostgreSQL" in out
    code, out = await _run(
        "-m", "skillwire", "db", "upgrade", f"postgresql://127.0.0.1:{free_port()}/x?timeout=2"
    )
    assert code == 2 and "cannot reach PostgreSQL" in out


async def test_without_asyncpg_open_store_says_how_to_install_it() -> None:
    code, out = await _run(
        "-c",
        "import sys; sys.modules['asyncpg'] = None\n"
        "from skillwire import SkillwireError, open_store\n"
        "try:\n    open_store('postgresql://localhost/db')\nexcept SkillwireError as exc:\n    print(exc)",
    )
    assert code == 0 and install_command("postgres") in out, out  # the command for where skillwire runs


async def test_a_call_waits_for_a_busy_pool_only_as_long_as_the_timeout(pg_url: str) -> None:
    """A call takes an idle connection at once; with none idle (here the pool's only connection is held) it
    waits at most ``timeout`` seconds for one, then fails with StoreError; once the connection is free, calls
    work again."""
    joiner = "&" if "?" in pg_url else "?"
    store = await opened(f"{pg_url}{joiner}pool=1&timeout=0.5")
    try:
        task = make_task()
        await save(store, task)  # an idle connection: taken at once
        async with store._conn():  # the only connection, held
            async with asyncio.timeout(WAIT):
                with pytest.raises(StoreError):
                    await store.get(task.id)
        stored = await store.get(task.id)
        assert stored is not None and stored.task == task
    finally:
        await store.close()


def test_url_options_are_checked() -> None:
    store = open_store("postgres://u@h/db?schema=agents&pool=3&timeout=1.5&application_name=sw")
    assert isinstance(store, PostgresTaskStore) and store.schema == "agents"
    assert isinstance(store, TaskStore) and isinstance(store, PushStore) and isinstance(store, SharedStore)
    assert store._options.pool == 3 and store._options.timeout == 1.5
    assert store._options.dsn == "postgres://u@h/db?application_name=sw"  # the rest is asyncpg's
    for bad in ("schema=a-b", "schema=", "pool=0", "pool=x", "timeout=soon", "timeout=0"):
        with pytest.raises(SkillwireError):
            open_store(f"postgresql://h/db?{bad}")
    with pytest.raises(SkillwireError, match="NUL"):
        PostgresTaskStore("postgresql://h/db", owner="a\x00b")
    assert len(PostgresTaskStore("postgresql://h/db").owner) == 32
