"""A TaskStore on PostgreSQL that several server processes share (``postgresql://HOST/DB?schema=NAME``).

Why asyncpg: it is made for asyncio (no thread pool between the event loop and the socket), speaks
PostgreSQL's binary protocol (BYTEA columns and int arrays travel without text escaping), is the fastest
Python driver, and has a connection pool built in. psycopg 3 would do too; one driver is enough.

Layout (schema version 5, every table prefixed ``skillwire_`` in the URL's ``schema``; the SQL is
:mod:`skillwire.stores.postgres_sql`'s): a ``tasks`` row per
task holds its head, version, owner and the columns listings filter on; ``messages`` holds one row per history
message and ``artifacts`` one row per artifact piece (the artifact as first written, then each appended
chunk), as in the SQLite store, so a write stores only what it adds. ``push_configs`` and ``deliveries``
are the push side (:mod:`skillwire.stores.push`), ``leases`` the owners alive (:mod:`skillwire.stores.shared`), ``secrets`` what all processes
must share (the generated push signing key).
Tenants, ids and bodies are BYTEA: ids are arbitrary strings, which may hold NUL, and PostgreSQL text cannot
(UTF-8, with ``surrogatepass`` so that any Python str round-trips).

Indexes: ``(tenant, updated_us, seq)``, ``(tenant, context_id, updated_us, seq)`` and
``(tenant, state, updated_us, seq)`` serve ListTasks' filters and its newest-first paging (a cursor is
``(updated_us, seq)``); a partial index on ``seq`` over SUBMITTED/WORKING tasks serves ``unfinished`` and
``orphaned``; deliveries have a partial index per lane and per owner over the pending ones.

Migrations are numbered in ``skillwire_schema(version)`` and applied by ``open()`` (or ``skillwire db upgrade
URL``) in one transaction under ``pg_advisory_xact_lock``: processes starting together wait for the first,
then find the schema up to date. A schema newer than this code knows is refused.

Concurrency: every commit is one transaction and one statement, conditional on the version it was made
from (``UPDATE ... WHERE version = base``; a new task is ``INSERT ... ON CONFLICT DO NOTHING``). When two
writers, in one process or many, commit from the same version, PostgreSQL's row lock makes the second wait
for the first and then find the version changed: it gets ConcurrentUpdateError and nothing of it is stored.
So no update is ever lost, without any lock held between a read and a write. The write's push configs and
deliveries are in the same statement, so they are stored if and only if the write is. The plain new tasks
committed in one turn of the event loop share one statement (:mod:`skillwire.stores.loop_batch`): one round
trip, transaction and WAL flush for all of them, each row still its own outcome.

Outage: a query that cannot reach the database, or that passes ``timeout`` (``?timeout=SECONDS``, default
10), raises StoreError; its transaction is rolled back by the server, so nothing partial is stored. The pool
drops broken connections and connects again on the next call, so the store works again once the database is
back, without a restart.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from skillwire.errors import (
    ConcurrentUpdateError,
    KeyClaimedError,
    MissingExtraError,
    SkillwireError,
    StoreError,
    StoreUnavailableError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse, Task
from skillwire.stores.base import (
    LOG_ROW_EVENTS,
    Layout,
    StoredTask,
    TaskPage,
    TaskQuery,
    TaskWrite,
    assemble,
    cursor_int,
    decode_cursor,
    encode_cursor,
    instant_us,
    log_size,
    read_log,
    task_row,
)
from skillwire.stores.idempotency import Claim
from skillwire.stores.loop_batch import NewTaskBatch
from skillwire.stores.postgres_sql import (
    DELIVERY,
    MIGRATION_LOCK,
    PRUNE_LOCK,
    SCHEMA_VERSION,
    Statements,
    from_index,
    migrate,
    task_columns,
)
from skillwire.stores.push import Delivery, Lane, PushConfigRecord
from skillwire.stores.retention import Pruned, StoreStats
from skillwire.stores.schemes import StoreTools

try:
    import asyncpg
except ImportError:  # pragma: no cover - the extra is not installed
    asyncpg = None  # PostgresTaskStore() says how to install it

__all__ = [
    "SCHEMA_VERSION",
    "PostgresTaskStore",
    "open_url",
    "read_failed_deliveries",
    "read_stats",
    "upgrade",
]

_encode_layout = msgspec.json.Encoder().encode
_decode_layout = msgspec.json.Decoder(Layout).decode


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _s(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


# -- URLs -------------------------------------------------------------------------------------------------


class _Options(msgspec.Struct, frozen=True):
    dsn: str
    schema: str = "public"
    pool: int = 10
    timeout: float = 10.0


def _parse_url(url: str) -> _Options:
    """Our options (``schema``, ``pool``, ``timeout``) out of the URL; the rest stays for asyncpg."""
    parts = urlsplit(url)
    kept: list[tuple[str, str]] = []
    found: dict[str, Any] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "schema":
            if not _SCHEMA_NAME.fullmatch(value):
                raise SkillwireError(f"{url!r}: schema must be a plain identifier (letters, digits, _)")
            found["schema"] = value
        elif name == "pool":
            if not value.isdigit() or int(value) < 1:
                raise SkillwireError(f"{url!r}: pool must be a positive number of connections")
            found["pool"] = int(value)
        elif name == "timeout":
            try:
                found["timeout"] = float(value)
            except ValueError:
                raise SkillwireError(f"{url!r}: timeout must be a number of seconds") from None
            if found["timeout"] <= 0:
                raise SkillwireError(f"{url!r}: timeout must be positive")
        else:
            kept.append((name, value))
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return _Options(dsn, **found)


def _require_driver() -> Any:
    if asyncpg is None:
        raise MissingExtraError("the PostgreSQL store needs asyncpg", "postgres")  # pragma: no cover
    return asyncpg


def _is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is the database failing us (unreachable, timed out, refused), not a bug of ours."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    return asyncpg is not None and isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError)


async def _keep_session(conn: Any) -> None:
    """The pool's reset of a released connection, after asyncpg's own (which rolls back a transaction left
    open): nothing more. asyncpg's default sends ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET
    ALL`` on every release, a round trip per store call (a tenth of the server's CPU per SendMessage,
    profiled); this store leaves no session state to reset: each call is one statement or one transaction, its
    advisory locks are transaction locks, it sets no variables, opens no cursors and listens to nothing
    (the PostgreSQL bus has connections of its own)."""


def _is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached for now (refused, lost or timed-out connections,
    a server starting or shutting down, no connection slot free): an outage that ends by itself."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    return asyncpg is not None and isinstance(
        exc,
        asyncpg.InterfaceError
        | asyncpg.PostgresConnectionError
        | asyncpg.CannotConnectNowError
        | asyncpg.TooManyConnectionsError
        | asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError,
    )


def _failed(exc: BaseException, what: str) -> StoreError:
    """The StoreError for an outage ``exc``: StoreUnavailableError when the database cannot be reached."""
    kind = StoreUnavailableError if _is_unreachable(exc) else StoreError
    return kind(f"{what}: {type(exc).__name__}: {exc}")


async def upgrade(url: str) -> int:
    """Apply the migrations to the database of ``url`` (``skillwire db upgrade URL``); the schema version."""
    async with _one_connection(url, "migrate PostgreSQL") as (conn, schema):
        return await migrate(conn, schema)


async def read_failed_deliveries(url: str, after: int = 0, limit: int = 100) -> list[Delivery]:
    """The failed push deliveries of the PostgreSQL store at ``url``, read without opening the store: one
    connection and one read-only transaction, no migration and no lease, so this works while a cluster owns
    the schema. For the operator (``skillwire deliveries``)."""
    async with (
        _one_connection(url, "read the PostgreSQL store") as (conn, schema),
        conn.transaction(readonly=True),
    ):
        return await _failed_in(conn, schema, url, after, limit)


async def read_stats(url: str) -> StoreStats:
    """The statistics of the PostgreSQL store at ``url``, read on one connection in one read-only
    transaction, without migrating it: ``skillwire db stats`` while a cluster serves it."""
    async with (
        _one_connection(url, "read the PostgreSQL store") as (conn, schema),
        conn.transaction(readonly=True),
    ):
        sql = Statements(schema)
        if await conn.fetchval("SELECT to_regclass($1)", sql.tasks) is None:
            raise StoreError(f"the PostgreSQL schema {schema!r} at {_redact(url)} has no skillwire tables")
        rows = await conn.fetch(sql.by_state)
        return StoreStats(
            tasks={r["state"]: int(r["n"]) for r in rows},
            size_bytes=int(await conn.fetchval(sql.size, schema)),
            oldest_finished_us=await conn.fetchval(sql.oldest_finished),
        )


@contextlib.asynccontextmanager
async def _one_connection(url: str, doing: str) -> AsyncIterator[tuple[Any, str]]:
    """A connection of its own to the database of ``url`` and the schema it names, for a command that does
    not open the store; an outage while connecting, or while ``doing`` it, is a StoreError."""
    driver = _require_driver()
    options = _parse_url(url)
    try:
        conn = await driver.connect(options.dsn, timeout=options.timeout, command_timeout=options.timeout)
    except Exception as exc:
        if _is_outage(exc):
            raise StoreError(f"cannot reach PostgreSQL at {_redact(url)}: {exc}") from exc
        raise
    try:
        yield conn, options.schema
    except StoreError:
        raise
    except Exception as exc:
        if _is_outage(exc):
            raise StoreError(f"cannot {doing} at {_redact(url)}: {exc}") from exc
        raise
    finally:
        with contextlib.suppress(Exception):
            await conn.close(timeout=options.timeout)


async def _failed_in(conn: Any, schema: str, url: str, after: int, limit: int) -> list[Delivery]:
    sql = Statements(schema)
    if await conn.fetchval("SELECT to_regclass($1)", sql.deliveries) is None:
        there = f"the PostgreSQL schema {schema!r} at {_redact(url)}"
        if await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema) is None:
            raise StoreError(f"{there} does not exist")
        raise StoreError(f"{there} has no skillwire tables (no skillwire_deliveries)")
    version = await conn.fetchval(f"SELECT COALESCE(MAX(version), 0) FROM {sql.s}.skillwire_schema")
    failed = sql.failed if version >= 2 else sql.failed_1  # (read as it is: this does not migrate)
    return [_delivery(r) for r in await conn.fetch(failed, after, limit)]


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _view(history_length: int | None) -> int | None:
    """``history_length`` as the INT parameter it is sent as (a longer view than 2**31 - 1 shows all)."""
    return None if history_length is None else max(0, min(history_length, 2**31 - 1))


def _append(columns: list[list[Any]], values: tuple[Any, ...]) -> None:
    """Add one row to arrays held column by column."""
    for column, value in zip(columns, values, strict=True):
        column.append(value)


def _read(row: Any, history_length: int | None, artifacts: bool) -> tuple[StoredTask, int]:
    """The task of a row selected with _task_columns, and the bytes read for it."""
    head: bytes = row["head"]
    messages: list[bytes] = row["msgs"]
    cost = len(head) + sum(len(m) for m in messages)
    chunks: list[list[bytes]] | None = None
    if artifacts:
        chunks = []
        for idx, body in zip(row["aidx"], row["abody"], strict=True):
            if idx == len(chunks):
                chunks.append([])
            chunks[-1].append(body)
            cost += len(body)
    task: Task = assemble(head, messages, chunks)
    layout = _decode_layout(row["layout"]) if history_length is None and artifacts else None
    return StoredTask(task, row["version"], layout), cost


class _NotApplied(ConcurrentUpdateError):
    """Raised inside a claimed commit's transaction to take its claim back (then told as a conflict)."""


def _claim(row: Any) -> Claim:
    return Claim(
        _s(row["scope"]),
        _s(row["key"]),
        row["digest"],
        row["created_us"],
        row["expires_us"],
        _s(row["task_id"]),
        row["generation"],
        row["result"],
        row["owner"],
    )


def _delivery(row: Any) -> Delivery:
    return Delivery(
        row["seq"],
        _s(row["tenant"]),
        _s(row["task_id"]),
        _s(row["config_id"]),
        row["body"],
        row["attempts"],
        row["next_us"],
        row["failed"],
        _s(row["error"]),
        row["created_us"],
        _s(row["trace"]),
    )


# -- the store --------------------------------------------------------------------------------------------


class PostgresTaskStore:
    """A TaskStore, PushStore and SharedStore on PostgreSQL; ``owner`` names this process in the store (a
    fresh random id by default)::

        store = PostgresTaskStore("postgresql://app@db.internal/agents?schema=skillwire&pool=20")
        await store.open()  # connects, and applies any migration the schema lacks
        await store.renew_lease(30)

    or, from a URL, ``open_store("postgresql://...")``, which is what ``skillwire serve --store`` does."""

    def __init__(
        self,
        url: str,
        *,
        owner: str | None = None,
        max_failed_deliveries: int = 10_000,
        max_log_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        _require_driver()
        self.max_log_bytes = max_log_bytes
        self.url = url
        self._options = _parse_url(url)
        self.owner = owner if owner is not None else uuid.uuid4().hex
        if "\x00" in self.owner:
            raise SkillwireError("a store owner id cannot hold NUL")
        self.max_failed_deliveries = max_failed_deliveries
        self._sql = Statements(self._options.schema)
        self._pool: Any = None
        self._new = NewTaskBatch(self._insert_new, self._commit)

    @property
    def schema(self) -> str:
        return self._options.schema

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        driver = _require_driver()
        opts = self._options
        try:
            pool = await driver.create_pool(
                opts.dsn,
                min_size=1,
                max_size=opts.pool,
                timeout=opts.timeout,
                command_timeout=opts.timeout,
                reset=_keep_session,
            )
        except Exception as exc:
            if _is_outage(exc):
                raise _failed(exc, f"cannot open the PostgreSQL store at {_redact(self.url)}") from exc
            raise
        try:
            async with pool.acquire(timeout=opts.timeout) as conn:
                await migrate(conn, opts.schema)
        except BaseException as exc:
            pool.terminate()
            if isinstance(exc, Exception) and _is_outage(exc):
                raise _failed(exc, f"cannot migrate the PostgreSQL store at {_redact(self.url)}") from exc
            raise
        self._pool = pool

    async def close(self) -> None:
        await self._new.drain()
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await pool.close()
            except Exception:  # the database is gone: drop the connections
                pool.terminate()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        """A pooled connection; an outage on it becomes StoreError."""
        pool = self._pool
        if pool is None:
            raise StoreError("the PostgreSQL store is not open")
        # asyncpg bounds the wait for a connection with asyncio.wait_for, a task and a timer a call (6.5% of a
        # SendMessage's CPU on PostgreSQL + Redis, profiled); with a connection idle there is no wait to bound
        # (one that must first connect is bounded by the pool's connect timeout)
        timeout = None if pool.get_idle_size() else self._options.timeout
        try:
            async with pool.acquire(timeout=timeout) as conn:
                yield conn
        except (ConcurrentUpdateError, StoreError):
            raise
        except Exception as exc:
            if _is_outage(exc):
                raise _failed(exc, "the PostgreSQL store failed") from exc
            raise

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Any]:
        """A read-only transaction whose statements all see one snapshot."""
        async with self._conn() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            yield conn

    # -- the protocol -----------------------------------------------------------------------------------------

    async def commit(self, write: TaskWrite) -> None:
        if write.base == 0 and not (
            write.claim or write.configs or write.deliveries or self._long_log(write)
        ):
            await self._new.add(write)  # with the other new tasks of this loop turn
        else:
            await self._commit(write)

    def _long_log(self, write: TaskWrite) -> bool:
        """Whether the write's events pass the log's budget (the oldest go, after the commit)."""
        return log_size(write) > self.max_log_bytes

    async def _insert_new(self, writes: list[TaskWrite]) -> set[int] | None:
        """Store these new tasks with one statement (Statements.insert_new: a column array each); the
        indexes of those inserted (see NewTaskBatch), or None to store them one at a time."""
        tasks: list[list[Any]] = [[] for _ in range(11)]
        messages: list[list[Any]] = [[], [], []]  # k, index, body
        pieces: list[list[Any]] = [[], [], [], []]  # k, artifact index, offset, body
        log: list[list[Any]] = [[], [], [], []]  # k, first, last, body
        for k, w in enumerate(writes, 1):
            tenant, task_id, context_id, *rest = task_row(w)
            _append(
                tasks, (_b(tenant), _b(task_id), _b(context_id), *rest, _encode_layout(w.layout), log_size(w))
            )
            for i, body in enumerate(w.messages, w.first_message):
                _append(messages, (k, i, body))
            for p in w.artifacts:
                _append(pieces, (k, p.index, p.offset, p.body))
            for r in w.log:
                _append(log, (k, r.first, r.last, r.body))
        async with self._conn() as conn:
            try:
                rows = await conn.fetch(self._sql.insert_new, *tasks, self.owner, *messages, *pieces, *log)
            except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
                return None  # each on its own, then
        return {row["k"] - 1 for row in rows}

    async def _commit(self, write: TaskWrite) -> None:
        tenant, task_id, context_id, *rest = task_row(write)
        args: list[Any] = [
            *(_b(tenant), _b(task_id), _b(context_id), *rest),
            _encode_layout(write.layout),
            self.owner,
        ]
        new = write.base == 0
        args += [
            write.base,
            write.first_message,
            list(write.messages),
            [p.index for p in write.artifacts],
            [p.offset for p in write.artifacts],
            [p.body for p in write.artifacts],
            write.artifact_count,
            log_size(write),
        ]
        if write.configs:
            c = write.configs
            args += [
                [_b(r.tenant) for r in c],
                [_b(r.task_id) for r in c],
                [_b(r.id) for r in c],
                [r.body for r in c],
                [_b(r.shape) for r in c],
                [_b(r.issuer) for r in c],
            ]
        if write.deliveries:
            d = write.deliveries
            args += [[_b(o.config_id) for o in d], [o.body for o in d], [_b(o.trace) for o in d]]
        if write.log:
            rows = write.log
            args += [[r.first for r in rows], [r.last for r in rows], [r.body for r in rows]]
        sql = self._sql.commit(new, bool(write.configs), bool(write.deliveries), bool(write.log))
        async with self._conn() as conn:
            if write.claim is None:
                row = await conn.fetchrow(sql, *args)
            else:  # the claim and the task, or neither
                try:
                    row = await self._claimed_commit(conn, write, sql, args)
                except _NotApplied:
                    row = None
            if row is not None and row["log_bytes"] > self.max_log_bytes:  # the oldest events go
                await conn.execute(self._sql.trim_log, row["seq"], self.max_log_bytes * 3 // 4)
        if row is None:
            if new:
                raise ConcurrentUpdateError(f"task {write.task_id} already exists")
            raise ConcurrentUpdateError(
                f"task {write.task_id} is not at version {write.base}: it changed meanwhile"
            )

    async def _claimed_commit(self, conn: Any, write: TaskWrite, sql: str, args: list[Any]) -> Any:
        """The commit statement's row, in one transaction with ``write.claim``: KeyClaimedError (nothing
        stored) when the key is claimed already; a write that does not apply takes its claim back."""
        assert write.claim is not None
        async with conn.transaction():
            if not await self._put_claim(conn, write.claim):
                raise KeyClaimedError(
                    f"the idempotency key of task {write.task_id}'s request is claimed already"
                )
            row = await conn.fetchrow(sql, *args)
            if row is None:
                raise _NotApplied()
        return row

    async def get(
        self, task_id: str, *, tenant: str = "", history_length: int | None = None
    ) -> StoredTask | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(self._sql.get, _b(tenant), _b(task_id), _view(history_length))
        return None if row is None else _read(row, history_length, True)[0]

    async def events(
        self, task_id: str, *, tenant: str = "", after: int = 0, limit: int = LOG_ROW_EVENTS
    ) -> list[StreamResponse] | None:
        # rows hold one event or more: ``limit`` rows hold at least ``limit`` events (or LOG_ROW_BYTES)
        async with self._conn() as conn:
            row = await conn.fetchrow(self._sql.events, _b(tenant), _b(task_id), after, limit)
        return None if row is None else read_log(row["bodies"], after, limit)

    # -- idempotency keys (see skillwire.stores.idempotency) ------------------------------------------------

    async def _put_claim(self, conn: Any, claim: Claim) -> bool:
        await conn.execute(self._sql.forget_lapsed, claim.created_us)
        made = await conn.fetchval(
            self._sql.claim,
            _b(claim.scope),
            _b(claim.key),
            claim.digest,
            claim.created_us,
            claim.expires_us,
            _b(claim.task_id),
            claim.generation,
            claim.result,
            claim.owner,
        )
        return made is not None

    async def alive(self, owner: str) -> bool:
        """Whether ``owner`` holds a live lease (its process is running)."""
        async with self._conn() as conn:
            return await conn.fetchval(self._sql.alive, owner) is not None

    async def recall(self, scope: str, key: str, now_us: int) -> Claim | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(self._sql.claimed, _b(scope), _b(key), now_us)
        return None if row is None else _claim(row)

    async def claim(self, claim: Claim) -> Claim | None:
        async with self._conn() as conn, conn.transaction():
            if await self._put_claim(conn, claim):
                return None
            row = await conn.fetchrow(self._sql.claimed, _b(claim.scope), _b(claim.key), -1)
        return None if row is None else _claim(row)

    async def settle(self, scope: str, key: str, result: bytes) -> None:
        async with self._conn() as conn:
            await conn.execute(self._sql.settle, _b(scope), _b(key), result)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        where = ["tenant = $1"]
        args: list[Any] = [_b(query.tenant)]
        if query.context_id:
            args.append(_b(query.context_id))
            where.append(f"context_id = ${len(args)}")
        if query.state is not None:
            args.append(query.state.value)
            where.append(f"state = ${len(args)}")
        if query.updated_after is not None:
            args.append(instant_us(query.updated_after))
            where.append(f"updated_us >= ${len(args)}")
        cursor = decode_cursor(query.page_token) if query.page_token else None
        async with self._snapshot() as conn:
            if cursor is None:
                total = await conn.fetchval(
                    f"SELECT COUNT(*) FROM {self._sql.tasks} WHERE {' AND '.join(where)}", *args
                )
            else:
                total = cursor[2]
                args += [cursor[0], cursor_int(cursor[1])]
                where.append(f"(updated_us, seq) < (${len(args) - 1}, ${len(args)})")
            candidates = await conn.fetch(
                f"SELECT seq, size FROM {self._sql.tasks} WHERE {' AND '.join(where)}"
                f" ORDER BY updated_us DESC, seq DESC LIMIT ${len(args) + 1}",
                *args,
                query.page_size + 1,
            )
            tasks, last = await self._page(conn, query, candidates[: query.page_size])
        more = len(tasks) < len(candidates)
        token = encode_cursor(last[0], str(last[1]), total) if more and last is not None else ""
        return TaskPage(tasks, total, token)

    async def _page(
        self, conn: Any, query: TaskQuery, candidates: Sequence[Any]
    ) -> tuple[list[Task], tuple[int, int] | None]:
        """Read the candidates in order while they fit the byte budget: in batches, each as many as fit by
        their stored size (which a view never exceeds), and at least one."""
        sql = (
            f"SELECT {task_columns(self._sql.s, from_index('$2'), query.include_artifacts)}"
            f" FROM {self._sql.tasks} t WHERE seq = ANY($1::bigint[])"
        )
        tasks: list[Task] = []
        spent = 0
        last: tuple[int, int] | None = None
        i = 0
        while i < len(candidates):
            batch: list[int] = []
            room = query.max_bytes - spent
            while i + len(batch) < len(candidates):
                size = candidates[i + len(batch)]["size"]
                if (tasks or batch) and size > room:
                    break
                batch.append(candidates[i + len(batch)]["seq"])
                room -= size
            if not batch:  # the next one may still fit as read (a view is smaller than what is stored)
                batch.append(candidates[i]["seq"])
            rows = {r["seq"]: r for r in await conn.fetch(sql, batch, _view(query.history_length))}
            for seq in batch:
                row = rows.get(seq)
                if row is None:  # pragma: no cover - the snapshot holds every candidate
                    continue
                stored, cost = _read(row, query.history_length, query.include_artifacts)
                if tasks and spent + cost > query.max_bytes:
                    return tasks, last
                spent += cost
                tasks.append(stored.task)
                last = (row["updated_us"], seq)
            i += len(batch)
        return tasks, last

    async def unfinished(
        self, cursor: str = "", limit: int = 500
    ) -> tuple[list[tuple[str, StoredTask]], str]:
        after = cursor_int(cursor) if cursor else 0
        async with self._conn() as conn:
            rows = await conn.fetch(self._sql.unfinished, after, limit)
        batch = [(_s(row["tenant"]), _read(row, None, True)[0]) for row in rows]
        return batch, (str(rows[-1]["seq"]) if len(rows) == limit else "")

    # -- retention (see skillwire.stores.retention) ----------------------------------------------------------

    async def prune_finished(self, before_us: int, limit: int = 200) -> Pruned:
        """One batch, one transaction, under a transaction-level advisory lock that only one process of those
        sharing the schema holds at a time: the others find it taken and leave the work to it (``busy``)."""
        async with self._conn() as conn, conn.transaction():
            locked = await conn.fetchval(
                "SELECT pg_try_advisory_xact_lock($1, hashtext($2))", PRUNE_LOCK, self.schema
            )
            if not locked:
                return Pruned(busy=True)
            row = await conn.fetchrow(self._sql.prune, before_us, limit)
        return Pruned(
            tasks=row["t"],
            messages=row["m"],
            artifacts=row["a"],
            events=row["e"],
            push_configs=row["c"],
            deliveries=row["d"],
            claims=row["k"],
        )

    async def count_finished(self, before_us: int) -> dict[str, int]:
        async with self._conn() as conn:
            rows = await conn.fetch(self._sql.count_finished, before_us)
        return {r["state"]: int(r["n"]) for r in rows}

    async def stats(self) -> StoreStats:
        async with self._snapshot() as conn:
            rows = await conn.fetch(self._sql.by_state)
            oldest = await conn.fetchval(self._sql.oldest_finished)
            size = await conn.fetchval(self._sql.size, self.schema)
        return StoreStats(
            tasks={r["state"]: int(r["n"]) for r in rows}, size_bytes=int(size), oldest_finished_us=oldest
        )

    # -- shared by several processes (see skillwire.stores.shared) --------------------------------------------

    async def renew_lease(self, ttl: float) -> None:
        async with self._conn() as conn:
            await conn.execute(
                f"INSERT INTO {self._sql.leases} (owner, expires) VALUES ($1, now() + make_interval(secs => $2))"
                " ON CONFLICT (owner) DO UPDATE SET expires = EXCLUDED.expires",
                self.owner,
                float(ttl),
            )

    async def release_lease(self) -> None:
        async with self._conn() as conn:
            await conn.execute(f"DELETE FROM {self._sql.leases} WHERE owner = $1", self.owner)

    async def orphaned(self, limit: int = 500) -> list[tuple[str, StoredTask, str]]:
        async with self._conn() as conn:
            rows = await conn.fetch(self._sql.orphaned, limit)
        return [(_s(row["tenant"]), _read(row, None, True)[0], row["owner"]) for row in rows]

    async def shared_secret(self, name: str, value: bytes) -> bytes:
        """The value stored under ``name``, storing ``value`` first if there is none: of several processes
        storing at once, the first insert wins and every one of them gets its value."""
        secrets = f"{self._sql.s}.skillwire_secrets"
        sql = (
            f"WITH ins AS (INSERT INTO {secrets} (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING"
            f" RETURNING value) SELECT value FROM ins UNION ALL SELECT value FROM {secrets} WHERE name = $1"
        )
        async with self._conn() as conn:
            # A concurrent insert that committed after this statement's snapshot makes ours do nothing,
            # yet is not in the snapshot: the next statement sees it.
            for _ in range(2):
                stored = await conn.fetchval(sql, _b(name), value)
                if stored is not None:
                    return bytes(stored)
        raise StoreError(f"the shared secret {name!r} could not be stored or read")  # pragma: no cover

    async def adopt_deliveries(self) -> int:
        async with self._conn() as conn:
            status = await conn.execute(self._sql.adopt, self.owner)
        return int(status.split()[-1])

    # -- push notifications (see skillwire.stores.push) -----------------------------------------------------

    async def put_push_config(self, record: PushConfigRecord, max_per_task: int) -> bool:
        key = (_b(record.tenant), _b(record.task_id))
        configs = self._sql.configs
        async with self._conn() as conn, conn.transaction():
            # one writer per task's configs at a time, so that two processes cannot both pass the limit
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext(encode($2::bytea || '\\x00'::bytea || $3::bytea,"
                " 'base64')))",
                MIGRATION_LOCK + 1,
                *key,
            )
            exists = await conn.fetchval(
                f"SELECT 1 FROM {configs} WHERE tenant = $1 AND task_id = $2 AND id = $3", *key, _b(record.id)
            )
            if exists is None:
                count = await conn.fetchval(
                    f"SELECT COUNT(*) FROM {configs} WHERE tenant = $1 AND task_id = $2", *key
                )
                if count >= max_per_task:
                    return False
            await conn.execute(
                f"INSERT INTO {configs} (tenant, task_id, id, body, shape, issuer) VALUES ($1, $2, $3, $4, $5, $6)"
                " ON CONFLICT (tenant, task_id, id) DO UPDATE SET body = EXCLUDED.body, shape = EXCLUDED.shape,"
                " issuer = EXCLUDED.issuer",
                *key,
                _b(record.id),
                record.body,
                _b(record.shape),
                _b(record.issuer),
            )
        return True

    async def get_push_config(self, tenant: str, task_id: str, config_id: str) -> PushConfigRecord | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT body, shape, issuer FROM {self._sql.configs} WHERE tenant = $1 AND task_id = $2 AND id = $3",
                _b(tenant),
                _b(task_id),
                _b(config_id),
            )
        if row is None:
            return None
        return PushConfigRecord(tenant, task_id, config_id, row["body"], _s(row["shape"]), _s(row["issuer"]))

    async def list_push_configs(
        self, tenant: str, task_id: str, *, after: str = "", limit: int = 100
    ) -> list[PushConfigRecord]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT id, body, shape, issuer FROM {self._sql.configs} WHERE tenant = $1 AND task_id = $2"
                " AND id > $3 ORDER BY id LIMIT $4",
                _b(tenant),
                _b(task_id),
                _b(after),
                limit,
            )
        return [
            PushConfigRecord(tenant, task_id, _s(r["id"]), r["body"], _s(r["shape"]), _s(r["issuer"]))
            for r in rows
        ]

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        key = (_b(tenant), _b(task_id), _b(config_id))
        async with self._conn() as conn, conn.transaction():
            await conn.execute(
                f"DELETE FROM {self._sql.configs} WHERE tenant = $1 AND task_id = $2 AND id = $3", *key
            )
            await conn.execute(
                f"DELETE FROM {self._sql.deliveries} WHERE tenant = $1 AND task_id = $2 AND config_id = $3"
                " AND NOT failed",
                *key,
            )

    async def pending_lanes(self) -> list[tuple[Lane, int]]:
        d = self._sql.deliveries
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT DISTINCT ON (tenant, task_id, config_id) tenant, task_id, config_id, next_us FROM {d}"
                " WHERE NOT failed AND owner = $1 ORDER BY tenant, task_id, config_id, seq",
                self.owner,
            )
        return [((_s(r["tenant"]), _s(r["task_id"]), _s(r["config_id"])), r["next_us"]) for r in rows]

    async def next_deliveries(self, lane: Lane, limit: int = 1) -> list[Delivery]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {DELIVERY} FROM {self._sql.deliveries} WHERE tenant = $1 AND task_id = $2"
                " AND config_id = $3 AND NOT failed AND owner = $4 ORDER BY seq LIMIT $5",
                *(_b(x) for x in lane),
                self.owner,
                limit,
            )
        return [_delivery(r) for r in rows]

    async def finish_deliveries(self, seqs: Sequence[int]) -> None:
        async with self._conn() as conn:
            await conn.execute(
                f"DELETE FROM {self._sql.deliveries} WHERE seq = ANY($1::bigint[])", list(seqs)
            )

    async def pending_count(self) -> int:
        async with self._conn() as conn:
            count = await conn.fetchval(
                f"SELECT COUNT(*) FROM {self._sql.deliveries} WHERE NOT failed AND owner = $1", self.owner
            )
        return int(count)

    async def pending_by_partition(self) -> dict[str, int]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT tenant, COUNT(*) AS n FROM {self._sql.deliveries} WHERE NOT failed AND owner = $1"
                " GROUP BY tenant",
                self.owner,
            )
        return {_s(r["tenant"]): int(r["n"]) for r in rows}

    async def retry_delivery(self, seq: int, attempts: int, next_us: int, error: str) -> None:
        async with self._conn() as conn:
            await conn.execute(
                f"UPDATE {self._sql.deliveries} SET attempts = $2, next_us = $3, error = $4 WHERE seq = $1",
                seq,
                attempts,
                next_us,
                _b(error),
            )

    async def fail_delivery(self, seq: int, attempts: int, error: str) -> None:
        d = self._sql.deliveries
        async with self._conn() as conn, conn.transaction():
            await conn.execute(
                f"UPDATE {d} SET attempts = $2, failed = TRUE, error = $3 WHERE seq = $1",
                seq,
                attempts,
                _b(error),
            )
            # keep the last max_failed_deliveries failed deliveries
            await conn.execute(
                f"DELETE FROM {d} WHERE failed AND seq < (SELECT seq FROM {d} WHERE failed ORDER BY seq DESC"
                " LIMIT 1 OFFSET $1)",
                self.max_failed_deliveries - 1,
            )

    async def failed_deliveries(self, after: int = 0, limit: int = 100) -> list[Delivery]:
        async with self._conn() as conn:
            rows = await conn.fetch(self._sql.failed, after, limit)
        return [_delivery(r) for r in rows]


def open_url(url: str, limits: Limits, setting: str) -> PostgresTaskStore:
    """``postgresql://`` or ``postgres://`` (the table in :mod:`skillwire.stores.schemes` sends them here);
    without asyncpg, :class:`PostgresTaskStore` says how to install it."""
    return PostgresTaskStore(url, max_log_bytes=limits.max_task_log_bytes)


#: The operator's commands on a PostgreSQL store (:mod:`skillwire.stores.schemes`); autovacuum gives space
#: back by itself.
TOOLS = StoreTools(read_stats=read_stats, read_failed_deliveries=read_failed_deliveries, upgrade=upgrade)
