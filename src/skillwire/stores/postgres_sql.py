"""The SQL of the PostgreSQL store (:mod:`skillwire.stores.postgres`): its migrations, and the statements of
one schema, built once. Kept apart from the store so that each reads on its own: here what the database
does, there when and why the store asks it."""

from __future__ import annotations

from typing import Any

from skillwire.errors import StoreError
from skillwire.stores.base import LOG_ROW_BYTES, UNFINISHED_STATES
from skillwire.stores.retention import FINISHED_STATES

__all__ = [
    "DELIVERY",
    "MIGRATION_LOCK",
    "PRUNE_LOCK",
    "SCHEMA_VERSION",
    "Statements",
    "from_index",
    "migrate",
    "task_columns",
]


# -- schema -------------------------------------------------------------------------------------------------

UNFINISHED = ", ".join(f"'{s.value}'" for s in UNFINISHED_STATES)
#: The finished states as literals: a query names them as the partial index does, to use it.
FINISHED = ", ".join(f"'{s.value}'" for s in FINISHED_STATES)

#: Migration N brings the schema from version N-1 to N. ``{s}`` is the quoted schema name.
MIGRATIONS: tuple[str, ...] = (
    f"""
CREATE TABLE {{s}}.skillwire_tasks (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant     BYTEA  NOT NULL,
    id         BYTEA  NOT NULL,
    context_id BYTEA  NOT NULL,
    state      TEXT   NOT NULL,
    updated_us BIGINT NOT NULL,
    version    BIGINT NOT NULL,
    head       BYTEA  NOT NULL,
    messages   INT    NOT NULL,
    size       BIGINT NOT NULL,
    layout     BYTEA  NOT NULL,
    owner      TEXT   NOT NULL,
    UNIQUE (tenant, id)
);
CREATE INDEX skillwire_tasks_by_time ON {{s}}.skillwire_tasks (tenant, updated_us, seq);
CREATE INDEX skillwire_tasks_by_context ON {{s}}.skillwire_tasks (tenant, context_id, updated_us, seq);
CREATE INDEX skillwire_tasks_by_state ON {{s}}.skillwire_tasks (tenant, state, updated_us, seq);
CREATE INDEX skillwire_tasks_unfinished ON {{s}}.skillwire_tasks (seq) WHERE state IN ({UNFINISHED});
CREATE TABLE {{s}}.skillwire_messages (
    task BIGINT NOT NULL REFERENCES {{s}}.skillwire_tasks (seq) ON DELETE CASCADE,
    idx  INT    NOT NULL,
    body BYTEA  NOT NULL,
    PRIMARY KEY (task, idx)
);
CREATE TABLE {{s}}.skillwire_artifacts (
    task  BIGINT NOT NULL REFERENCES {{s}}.skillwire_tasks (seq) ON DELETE CASCADE,
    idx   INT    NOT NULL,
    start INT    NOT NULL,
    body  BYTEA  NOT NULL,
    PRIMARY KEY (task, idx, start)
);
CREATE TABLE {{s}}.skillwire_push_configs (
    tenant  BYTEA NOT NULL,
    task_id BYTEA NOT NULL,
    id      BYTEA NOT NULL,
    body    BYTEA NOT NULL,
    shape   BYTEA NOT NULL,
    issuer  BYTEA NOT NULL,
    PRIMARY KEY (tenant, task_id, id)
);
CREATE TABLE {{s}}.skillwire_deliveries (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant     BYTEA   NOT NULL,
    task_id    BYTEA   NOT NULL,
    config_id  BYTEA   NOT NULL,
    body       BYTEA   NOT NULL,
    attempts   INT     NOT NULL DEFAULT 0,
    next_us    BIGINT  NOT NULL DEFAULT 0,
    failed     BOOLEAN NOT NULL DEFAULT FALSE,
    error      BYTEA   NOT NULL DEFAULT '',
    created_us BIGINT  NOT NULL,
    owner      TEXT    NOT NULL
);
CREATE INDEX skillwire_deliveries_by_lane ON {{s}}.skillwire_deliveries (tenant, task_id, config_id, seq)
    WHERE NOT failed;
CREATE INDEX skillwire_deliveries_by_owner ON {{s}}.skillwire_deliveries (owner, seq) WHERE NOT failed;
CREATE INDEX skillwire_deliveries_failed ON {{s}}.skillwire_deliveries (seq) WHERE failed;
CREATE TABLE {{s}}.skillwire_leases (
    owner   TEXT        PRIMARY KEY,
    expires TIMESTAMPTZ NOT NULL
);
CREATE TABLE {{s}}.skillwire_secrets (
    name  BYTEA PRIMARY KEY,
    value BYTEA NOT NULL
);
""",
    # 2: each delivery keeps the trace context of its event (skillwire.stores.push)
    """
ALTER TABLE {s}.skillwire_deliveries ADD COLUMN trace BYTEA NOT NULL DEFAULT '';
""",
    # 3: each task's event log (skillwire.stores.base), a row per LogRow, and its size
    """
ALTER TABLE {s}.skillwire_tasks ADD COLUMN log_bytes BIGINT NOT NULL DEFAULT 0;
CREATE TABLE {s}.skillwire_event_log (
    task  BIGINT NOT NULL REFERENCES {s}.skillwire_tasks (seq) ON DELETE CASCADE,
    first BIGINT NOT NULL,
    last  BIGINT NOT NULL,
    body  BYTEA  NOT NULL,
    PRIMARY KEY (task, first)
);
""",
    # 4: the claims of idempotency keys (skillwire.stores.idempotency)
    """
CREATE TABLE {s}.skillwire_idempotency (
    scope      BYTEA  NOT NULL,
    key        BYTEA  NOT NULL,
    digest     BYTEA  NOT NULL,
    created_us BIGINT NOT NULL,
    expires_us BIGINT NOT NULL,
    task_id    BYTEA  NOT NULL,
    generation BIGINT NOT NULL,
    result     BYTEA  NOT NULL,
    owner      TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (scope, key)
);
CREATE INDEX skillwire_idempotency_by_expiry ON {s}.skillwire_idempotency (expires_us);
""",
    # 5: retention (skillwire.stores.retention): finished tasks oldest first, and claims by their task
    f"""
CREATE INDEX skillwire_tasks_finished ON {{s}}.skillwire_tasks (updated_us, seq) WHERE state IN ({FINISHED});
CREATE INDEX skillwire_idempotency_by_task ON {{s}}.skillwire_idempotency (task_id);
""",
)
SCHEMA_VERSION = len(MIGRATIONS)
#: The first key of the advisory lock migrations take (the second is the schema's hash).
MIGRATION_LOCK = 0x5357  # "SW"
#: The first key of the advisory lock a prune batch takes (the second is the schema's hash): one process
#: prunes at a time, however many share the store.
PRUNE_LOCK = MIGRATION_LOCK + 2


async def migrate(conn: Any, schema: str) -> int:
    """Bring ``schema`` up to SCHEMA_VERSION (one transaction, under an advisory lock); the version."""
    s = f'"{schema}"'
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", MIGRATION_LOCK, schema)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.skillwire_schema (version INT NOT NULL)")
        current = await conn.fetchval(f"SELECT COALESCE(MAX(version), 0) FROM {s}.skillwire_schema")
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the PostgreSQL schema {schema!r} was written by a newer skillwire (schema {current}, this"
                f" one knows {SCHEMA_VERSION})"
            )
        for number in range(current + 1, SCHEMA_VERSION + 1):
            await conn.execute(MIGRATIONS[number - 1].format(s=s))
            await conn.execute(f"INSERT INTO {s}.skillwire_schema (version) VALUES ($1)", number)
    return SCHEMA_VERSION


# -- statements -------------------------------------------------------------------------------------------


#: What a read selects of a task: seq, head, version, layout, owner, the messages of the view (from index
#: $N, see _from_index) and, when artifacts are read, their pieces' indexes and bodies in order.
def task_columns(s: str, start: str, artifacts: bool) -> str:
    cols = (
        f"t.seq, t.head, t.version, t.layout, t.owner, t.updated_us, t.tenant,"
        f" ARRAY(SELECT m.body FROM {s}.skillwire_messages m WHERE m.task = t.seq AND m.idx >= {start}"
        " ORDER BY m.idx) AS msgs"
    )
    if artifacts:
        cols += (
            f", ARRAY(SELECT a.idx FROM {s}.skillwire_artifacts a WHERE a.task = t.seq ORDER BY a.idx, a.start)"
            " AS aidx,"
            f" ARRAY(SELECT a.body FROM {s}.skillwire_artifacts a WHERE a.task = t.seq ORDER BY a.idx, a.start)"
            " AS abody"
        )
    return cols


def from_index(param: str) -> str:
    """The first message index a view of ``param`` (NULL: all) messages shows (see history_start)."""
    return f"(CASE WHEN {param}::int IS NULL THEN 0 ELSE GREATEST(t.messages - GREATEST({param}::int, 0), 0) END)"


class Statements:
    """The statements of one schema, built once."""

    def __init__(self, schema: str) -> None:
        s = self.s = f'"{schema}"'
        self.tasks, self.deliveries = f"{s}.skillwire_tasks", f"{s}.skillwire_deliveries"
        self.configs, self.leases = f"{s}.skillwire_push_configs", f"{s}.skillwire_leases"
        self.failed = (
            f"SELECT {DELIVERY} FROM {self.deliveries} WHERE failed AND seq > $1 ORDER BY seq LIMIT $2"
        )
        #: the same of a schema at version 1 (read, not migrated, by the operator's command): no trace column
        self.failed_1 = self.failed.replace(", trace FROM", ", ''::bytea AS trace FROM")
        self.whole = task_columns(s, "0", True)
        self.get = f"SELECT {task_columns(s, from_index('$3'), True)} FROM {self.tasks} t WHERE tenant = $1 AND id = $2"
        self.unfinished = (
            f"SELECT {self.whole} FROM {self.tasks} t WHERE state IN ({UNFINISHED}) AND seq > $1"
            " ORDER BY seq LIMIT $2"
        )
        live = f"SELECT 1 FROM {self.leases} l WHERE l.owner = {{0}}.owner AND l.expires > now()"
        self.orphaned = (
            f"SELECT {self.whole} FROM {self.tasks} t WHERE state IN ({UNFINISHED})"
            f" AND NOT EXISTS ({live.format('t')}) ORDER BY seq LIMIT $1"
        )
        self.adopt = (
            f"UPDATE {self.deliveries} d SET owner = $1 WHERE NOT failed AND owner <> $1"
            f" AND NOT EXISTS ({live.format('d')})"
        )
        # the log rows after generation $3: $4 at most, and no more than LOG_ROW_BYTES past the first. The rows
        # start at the one holding generation $3 + 1, found by a seek in the primary key: filtering on
        # ``last`` alone visited every row from the log's first at each read (issue 31)
        self.events = (
            f"SELECT t.seq, ARRAY(SELECT x.body FROM (SELECT e.first, e.body,"
            " SUM(length(e.body)) OVER (ORDER BY e.first) - length(e.body) AS before"
            f" FROM (SELECT * FROM {s}.skillwire_event_log WHERE task = t.seq AND first >= COALESCE("
            f"(SELECT max(first) FROM {s}.skillwire_event_log WHERE task = t.seq AND first <= $3 + 1), 0)"
            " AND last > $3 ORDER BY first"
            f" LIMIT $4) e) x WHERE x.before < {LOG_ROW_BYTES} ORDER BY x.first) AS bodies"
            f" FROM {self.tasks} t WHERE t.tenant = $1 AND t.id = $2"
        )
        # past the log budget: the oldest rows go, the newest that fit in $2 (and the newest one) stay
        self.trim_log = (
            f"WITH r AS (SELECT first, SUM(length(body)) OVER (ORDER BY first DESC) AS newer,"
            f" MAX(first) OVER () AS newest FROM {s}.skillwire_event_log WHERE task = $1),"
            f" d AS (DELETE FROM {s}.skillwire_event_log e USING r WHERE e.task = $1 AND e.first = r.first"
            " AND r.newer > $2 AND r.first < r.newest RETURNING length(e.body) AS size)"
            f" UPDATE {self.tasks} SET log_bytes = log_bytes - (SELECT COALESCE(SUM(size), 0) FROM d)"
            " WHERE seq = $1"
        )
        claims = f"{s}.skillwire_idempotency"
        columns = "scope, key, digest, created_us, expires_us, task_id, generation, result, owner"
        #: a claim made unless a live one of its key is there: the row if it was made, else nothing
        self.claim = (
            f"INSERT INTO {claims} ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT (scope, key) DO UPDATE SET digest = EXCLUDED.digest, created_us = EXCLUDED.created_us,"
            " expires_us = EXCLUDED.expires_us, task_id = EXCLUDED.task_id, generation = EXCLUDED.generation,"
            f" result = EXCLUDED.result, owner = EXCLUDED.owner WHERE {claims}.expires_us <= EXCLUDED.created_us"
            " RETURNING 1"
        )
        self.claimed = f"SELECT {columns} FROM {claims} WHERE scope = $1 AND key = $2 AND expires_us > $3"
        self.settle = f"UPDATE {claims} SET result = $3 WHERE scope = $1 AND key = $2"
        self.alive = f"SELECT 1 FROM {self.leases} WHERE owner = $1 AND expires > now()"
        self.forget_lapsed = (
            f"DELETE FROM {claims} WHERE (scope, key) IN (SELECT scope, key FROM {claims} WHERE expires_us <= $1"
            " ORDER BY expires_us LIMIT 16)"
        )
        self._commits: dict[tuple[bool, bool, bool, bool], str] = {}
        self.insert_new = _insert_new(s)
        self.prune = _prune(s)
        self.count_finished = (
            f"SELECT state, COUNT(*) AS n FROM {self.tasks} WHERE state IN ({FINISHED}) AND updated_us < $1"
            " GROUP BY state"
        )
        self.by_state = f"SELECT state, COUNT(*) AS n FROM {self.tasks} GROUP BY state"
        self.oldest_finished = f"SELECT MIN(updated_us) FROM {self.tasks} WHERE state IN ({FINISHED})"
        self.size = (
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'"
            " AND c.relname LIKE 'skillwire\\_%'"
        )

    def commit(self, new: bool, configs: bool, deliveries: bool, log: bool = False) -> str:
        key = (new, configs, deliveries, log)
        sql = self._commits.get(key)
        if sql is None:
            sql = self._commits[key] = self._commit(*key)
        return sql

    def _commit(self, new: bool, configs: bool, deliveries: bool, log: bool) -> str:
        """One statement per write: the task row (conditional on the version), its pieces, its configs and
        deliveries, each piece statement drawing on the row the first one returned (none: nothing happens).

        Parameters: $1 tenant, $2 id, $3 context, $4 state, $5 updated_us, $6 version, $7 head, $8 message
        count, $9 size, $10 layout, $11 owner, $12 base, $13 first message, $14 message bodies, $15 artifact
        indexes, $16 piece offsets, $17 piece bodies, $18 artifact count; then, when there are configs, six
        arrays (tenants, task ids, ids, bodies, shapes, issuers) after $19, the bytes of the log rows written,
        when there are deliveries, three (config
        ids, bodies, trace contexts), and when there are events, three (the log rows' first and last
        generations, and bodies)."""
        s = self.s
        if new:
            row = (
                f"INSERT INTO {self.tasks} (tenant, id, context_id, state, updated_us, version, head, messages,"
                " size, layout, owner, log_bytes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $19)"
                " ON CONFLICT (tenant, id) DO NOTHING RETURNING seq, log_bytes"
            )
        else:
            row = (
                f"UPDATE {self.tasks} SET context_id = $3, state = $4, updated_us = $5, version = $6, head = $7,"
                " messages = $8, size = $9, layout = $10, owner = $11, log_bytes = log_bytes + $19"
                " WHERE tenant = $1 AND id = $2 AND version = $12 RETURNING seq, log_bytes"
            )
        parts = [
            f"t AS ({row})",
            # pieces are upserted; what lies beyond them (messages after the last one written, pieces of an
            # artifact after its new one, artifacts past the count) is deleted. The two never touch one row.
            f"m AS (INSERT INTO {s}.skillwire_messages (task, idx, body)"
            " SELECT t.seq, $13::int + u.i::int - 1, u.body FROM t, unnest($14::bytea[]) WITH ORDINALITY AS u(body, i)"
            " ON CONFLICT (task, idx) DO UPDATE SET body = EXCLUDED.body)",
            f"a AS (INSERT INTO {s}.skillwire_artifacts (task, idx, start, body)"
            " SELECT t.seq, u.idx, u.start, u.body FROM t, unnest($15::int[], $16::int[], $17::bytea[])"
            " AS u(idx, start, body) ON CONFLICT (task, idx, start) DO UPDATE SET body = EXCLUDED.body)",
        ]
        if not new:
            parts += [
                f"dm AS (DELETE FROM {s}.skillwire_messages x USING t"
                " WHERE x.task = t.seq AND x.idx >= $13::int + cardinality($14::bytea[]))",
                f"da AS (DELETE FROM {s}.skillwire_artifacts x USING t WHERE x.task = t.seq AND (x.idx >= $18::int"
                " OR EXISTS (SELECT 1 FROM unnest($15::int[], $16::int[]) AS p(idx, start)"
                " WHERE p.idx = x.idx AND x.start > p.start)))",
            ]
        n = 20
        if configs:
            parts.append(
                f"c AS (INSERT INTO {self.configs} (tenant, task_id, id, body, shape, issuer)"
                f" SELECT u.tenant, u.task_id, u.id, u.body, u.shape, u.issuer FROM t,"
                f" unnest(${n}::bytea[], ${n + 1}::bytea[], ${n + 2}::bytea[], ${n + 3}::bytea[],"
                f" ${n + 4}::bytea[], ${n + 5}::bytea[]) AS u(tenant, task_id, id, body, shape, issuer)"
                " ON CONFLICT (tenant, task_id, id) DO UPDATE SET body = EXCLUDED.body, shape = EXCLUDED.shape,"
                " issuer = EXCLUDED.issuer)"
            )
            n += 6
        if deliveries:
            # a delivery joins the owner of its lane's pending deliveries, if any (one process makes a lane)
            parts.append(
                f"d AS (INSERT INTO {self.deliveries} (tenant, task_id, config_id, body, created_us, owner, trace)"
                " SELECT $1, $2, u.config_id, u.body, $5, COALESCE((SELECT p.owner FROM"
                f" {self.deliveries} p WHERE p.tenant = $1 AND p.task_id = $2 AND p.config_id = u.config_id"
                " AND NOT p.failed ORDER BY p.seq LIMIT 1), $11), u.trace"
                f" FROM t, unnest(${n}::bytea[], ${n + 1}::bytea[], ${n + 2}::bytea[])"
                " WITH ORDINALITY AS u(config_id, body, trace, i) ORDER BY u.i)"
            )
            n += 3
        if log:
            parts.append(
                f"e AS (INSERT INTO {s}.skillwire_event_log (task, first, last, body)"
                f" SELECT t.seq, u.first, u.last, u.body FROM t,"
                f" unnest(${n}::bigint[], ${n + 1}::bigint[], ${n + 2}::bytea[]) AS u(first, last, body)"
                " ON CONFLICT (task, first) DO UPDATE SET last = EXCLUDED.last, body = EXCLUDED.body)"
            )
        # a new task's statement names $12 and $18 too, so that every parameter has a type
        tail = " WHERE $12::bigint = 0 AND $18::int >= 0" if new else ""
        return "WITH " + ", ".join(parts) + " SELECT seq, log_bytes FROM t" + tail


def _insert_new(s: str) -> str:
    """New tasks as one statement (see :mod:`skillwire.stores.loop_batch`): each row is inserted unless its
    task exists (ON CONFLICT DO NOTHING), with its messages, artifact pieces and event-log rows; it returns
    ``k``, the index in the batch, of each task inserted.

    Parameters: $1-$11 one array per task column (tenants, ids, contexts, states, updated_us, versions, heads,
    message counts, sizes, layouts, log bytes), $12 the owner; then, each row naming its task by ``k``,
    messages ($13 k, $14 index, $15 body), artifact pieces ($16 k, $17 index, $18 offset, $19 body) and
    log rows ($20 k, $21 first, $22 last, $23 body). Rows go in in key order, as in every process, so that
    two processes inserting the same keys wait for each other instead of deadlocking."""
    columns = "tenant, id, context_id, state, updated_us, version, head, messages, size, layout, log_bytes"
    pieces = {
        "m": (
            "skillwire_messages (task, idx, body)",
            "n.seq, u.idx, u.body",
            "$13::int[], $14::int[], $15::bytea[]) AS u(k, idx, body)",
        ),
        "a": (
            "skillwire_artifacts (task, idx, start, body)",
            "n.seq, u.idx, u.start, u.body",
            "$16::int[], $17::int[], $18::int[], $19::bytea[]) AS u(k, idx, start, body)",
        ),
        "e": (
            "skillwire_event_log (task, first, last, body)",
            "n.seq, u.first, u.last, u.body",
            "$20::int[], $21::bigint[], $22::bigint[], $23::bytea[]) AS u(k, first, last, body)",
        ),
    }
    parts = [
        "i AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::text[], $5::bigint[],"
        " $6::bigint[], $7::bytea[], $8::int[], $9::bigint[], $10::bytea[], $11::bigint[])"
        f" WITH ORDINALITY AS u({columns}, k))",
        f"t AS (INSERT INTO {s}.skillwire_tasks ({columns}, owner) SELECT {columns}, $12 FROM i"
        " ORDER BY tenant, id ON CONFLICT (tenant, id) DO NOTHING RETURNING seq, tenant, id)",
        "n AS (SELECT t.seq, i.k FROM t JOIN i ON i.tenant = t.tenant AND i.id = t.id)",
        *(
            f"{name} AS (INSERT INTO {s}.{table} SELECT {values} FROM unnest({arrays} JOIN n ON n.k = u.k)"
            for name, (table, values, arrays) in pieces.items()
        ),
    ]
    return "WITH " + ", ".join(parts) + " SELECT k FROM n"


def _prune(s: str) -> str:
    """One prune batch as one statement: up to $2 finished tasks updated before $1 (oldest first; rows another
    transaction holds are skipped), deleted with their rows, and the count of each kind."""
    doomed = "d0"
    per_task = {
        "m": f"{s}.skillwire_messages x USING {doomed} WHERE x.task = {doomed}.seq",
        "a": f"{s}.skillwire_artifacts x USING {doomed} WHERE x.task = {doomed}.seq",
        "e": f"{s}.skillwire_event_log x USING {doomed} WHERE x.task = {doomed}.seq",
        "c": f"{s}.skillwire_push_configs x USING {doomed} WHERE x.tenant = {doomed}.tenant"
        f" AND x.task_id = {doomed}.id",
        "d": f"{s}.skillwire_deliveries x USING {doomed} WHERE x.tenant = {doomed}.tenant"
        f" AND x.task_id = {doomed}.id AND NOT x.failed",
        # a claim's scope is the task's tenant, or the tenant, NUL and the caller owning the task
        "k": f"{s}.skillwire_idempotency x USING {doomed} WHERE x.task_id = {doomed}.id AND (x.scope ="
        f" {doomed}.tenant OR substring(x.scope from 1 for length({doomed}.tenant) + 1) = {doomed}.tenant"
        " || '\\x00'::bytea)",
        "t": f"{s}.skillwire_tasks x USING {doomed} WHERE x.seq = {doomed}.seq",
    }
    parts = [
        f"{doomed} AS (SELECT seq, tenant, id FROM {s}.skillwire_tasks WHERE state IN ({FINISHED})"
        " AND updated_us < $1 ORDER BY updated_us, seq LIMIT $2 FOR UPDATE SKIP LOCKED)",
        *(f"{name} AS (DELETE FROM {target} RETURNING 1)" for name, target in per_task.items()),
    ]
    counts = ", ".join(f"(SELECT COUNT(*) FROM {name}) AS {name}" for name in per_task)
    return "WITH " + ", ".join(parts) + " SELECT " + counts


DELIVERY = "seq, tenant, task_id, config_id, body, attempts, next_us, failed, error, created_us, trace"
