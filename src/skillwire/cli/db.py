"""``skillwire db``: the operator's commands on a task store's database.

- ``db upgrade URL``: apply a PostgreSQL store's migrations (what opening it does too);
- ``db prune URL [--older-than DURATION] [--dry-run] [--vacuum]``: remove the finished tasks older than
  the duration (default 1 day), with everything stored for them, a batch (one transaction) at a time, and
  print what went; ``--vacuum`` then rewrites a SQLite file so that it gives its free space back;
- ``db stats URL [--json]``: tasks by state, size on disk, the oldest finished task; read-only, so it works
  while a server (SQLite) or a cluster (PostgreSQL) uses the store.

A SQLite store is pruned as its owner: while a server owns the file, ``db prune`` is refused (the server
prunes by its own ``--task-retention``). A PostgreSQL store is pruned beside the servers using it: a batch
takes the same advisory lock theirs do (docs/retention.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import msgspec

from skillwire.cli.output import json_text, say
from skillwire.errors import SkillwireError
from skillwire.protocol.limits import Limits, describe_duration, parse_duration
from skillwire.protocol.states import TaskState
from skillwire.stores.base import sqlite_path
from skillwire.stores.retention import Pruned, RetentionStore, StoreStats
from skillwire.stores.schemes import StoreTools, open_store, store_tools

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = frozenset({"db"})

#: Tasks one prune batch of the command removes (one transaction each).
PRUNE_BATCH = 1000
#: Batches a prune on a busy PostgreSQL store waits for the process pruning it (half a second each).
_BUSY_TRIES = 20
_URL_HELP = "the store: sqlite:///PATH (or the file's path), or postgresql://HOST/DATABASE[?schema=NAME]"


def add_parsers(sub: Any) -> None:
    db = sub.add_parser("db", help="manage a task store's database: upgrade, prune, stats")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser(
        "upgrade", help="apply the schema migrations to a PostgreSQL store (what opening it does too)"
    )
    upgrade.add_argument("url", help="postgresql://HOST/DATABASE[?schema=NAME]")
    prune = db_sub.add_parser(
        "prune",
        help="remove finished tasks older than a duration, with everything stored for them (a SQLite store"
        " only while no server owns it)",
    )
    prune.add_argument("url", help=_URL_HELP)
    prune.add_argument(
        "--older-than",
        default=None,
        metavar="DURATION",
        help="prune finished tasks whose last status change is older than this: 45s, 12h, 7d (default 1 day)",
    )
    prune.add_argument("--dry-run", action="store_true", help="only count what would be removed")
    prune.add_argument(
        "--vacuum",
        action="store_true",
        help="then rewrite a SQLite file (VACUUM) with incremental auto-vacuum, giving its free space back;"
        " needs as much free disk again while it runs",
    )
    stats = db_sub.add_parser(
        "stats", help="tasks by state, size on disk, the oldest finished task (read-only)"
    )
    stats.add_argument("url", help=_URL_HELP)
    stats.add_argument("--json", action="store_true", help="one JSON object")


def run(args: argparse.Namespace) -> int:
    if args.db_command == "upgrade":
        return _upgrade(args.url)
    if args.db_command == "prune":
        return _prune(_store_url(args.url), args.older_than, dry_run=args.dry_run, vacuum=args.vacuum)
    return _stats(_store_url(args.url), as_json=args.json)


def _store_url(given: str) -> str:
    """A store URL from what the operator typed: a URL, or a SQLite file's path."""
    return given if "://" in given else f"sqlite:///{given}"


def _upgrade(url: str) -> int:
    """``skillwire db upgrade URL``: bring a store's schema up to date (PostgreSQL's) and say its version."""
    upgrade = store_tools(url).upgrade
    if upgrade is None:
        raise SkillwireError(
            f"{url!r}: this store has no schema to migrate (db upgrade migrates PostgreSQL's)"
        )
    say(f"schema version {asyncio.run(upgrade(url))}")  # without asyncpg, it says how to install it
    return 0


def _prune(url: str, older_than: str | None, *, dry_run: bool, vacuum: bool) -> int:
    try:
        age = parse_duration(older_than) if older_than is not None else Limits().task_retention
    except ValueError as exc:
        raise SkillwireError(f"--older-than: {exc}") from None
    if age is None:
        raise SkillwireError("--older-than: give a duration (none would prune nothing)")
    tools = store_tools(url)
    if tools == StoreTools():
        raise SkillwireError(
            f"{url!r}: this store lives inside a server; there is nothing to prune from here"
        )
    vacuum_tool = tools.vacuum if vacuum else None
    if vacuum and vacuum_tool is None:
        raise SkillwireError("--vacuum rewrites a SQLite file; PostgreSQL's autovacuum reclaims space itself")
    before_us = time.time_ns() // 1000 - int(age * 1_000_000)
    when = f"older than {describe_duration(age)}"
    if dry_run:
        counts = asyncio.run(_count(url, before_us))
        total = sum(counts.values())
        say(f"would prune {total} finished task(s) {when}{_by_state(counts)}")
        return 0
    done = asyncio.run(_prune_all(url, before_us))
    say(f"pruned {done.tasks} finished task(s) {when}")
    if done.tasks:
        say(
            f"  with {done.messages} message(s), {done.artifacts} artifact piece(s), {done.events} event log"
            f" row(s), {done.push_configs} push config(s), {done.deliveries} pending push delivery(ies),"
            f" {done.claims} idempotency claim(s)"
        )
    if done.busy:
        say("  another process was pruning this store meanwhile: it removes the rest")
    if vacuum_tool is not None:
        asyncio.run(vacuum_tool(url))
        say(f"vacuumed {sqlite_path(url)[0]}: incremental auto-vacuum, free pages given back")
    return 0


def _by_state(counts: dict[str, int]) -> str:
    if not counts:
        return ""
    return ": " + ", ".join(f"{TaskState(state)!s} {n}" for state, n in sorted(counts.items()))


@contextlib.asynccontextmanager
async def _opened(url: str) -> AsyncIterator[RetentionStore]:
    """The store of ``url``, open (as its owner, for SQLite), closed afterwards."""
    store = open_store(url, setting="URL")
    await store.open()
    try:
        if not isinstance(store, RetentionStore):  # pragma: no cover - every store skillwire ships prunes
            raise SkillwireError(f"{url}: this store cannot prune")
        yield store
    finally:
        await store.close()


async def _count(url: str, before_us: int) -> dict[str, int]:
    async with _opened(url) as store:
        return await store.count_finished(before_us)


async def _prune_all(url: str, before_us: int) -> Pruned:
    done = Pruned()
    busy = 0
    async with _opened(url) as store:
        while True:
            pruned = await store.prune_finished(before_us, PRUNE_BATCH)
            done += msgspec.structs.replace(pruned, busy=False)
            if pruned.busy:  # a server of the cluster holds the prune lock: wait for it a while
                busy += 1
                if busy >= _BUSY_TRIES:
                    return done + Pruned(busy=True)
                await asyncio.sleep(0.5)
                continue
            if pruned.tasks < PRUNE_BATCH:
                return done


def _stats(url: str, *, as_json: bool) -> int:
    stats = _read_stats(url)
    if as_json:
        oldest = _iso(stats.oldest_finished_us) if stats.oldest_finished_us is not None else None
        entry = {
            "tasks": {str(TaskState(state)): n for state, n in sorted(stats.tasks.items())},
            "total": sum(stats.tasks.values()),
            "sizeBytes": stats.size_bytes,
            "freeBytes": stats.free_bytes,
            "oldestFinished": oldest,
        }
        say(json_text(json.dumps(entry)))
        return 0
    say(f"tasks: {sum(stats.tasks.values())}")
    for state, n in sorted(stats.tasks.items()):
        say(f"  {TaskState(state)!s}: {n}")
    free = f" ({_size(stats.free_bytes)} of it free for reuse)" if stats.free_bytes else ""
    say(f"size on disk: {_size(stats.size_bytes)}{free}")
    if stats.oldest_finished_us is None:
        say("oldest finished task: none")
    else:
        age = time.time() - stats.oldest_finished_us / 1e6
        say(f"oldest finished task: {_iso(stats.oldest_finished_us)} ({_age(age)} ago)")
    return 0


def _read_stats(url: str) -> StoreStats:
    read = store_tools(url).read_stats
    if read is None:
        raise SkillwireError(f"{url!r}: this store keeps nothing to read from outside a server")
    return asyncio.run(read(url))  # without asyncpg, it says how to install it


def _iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _age(seconds: float) -> str:
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{max(seconds, 0):.0f} s"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    return f"{value:.1f} {unit}"
