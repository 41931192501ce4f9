"""What ``skillwire db`` does (:mod:`skillwire.cli.db` parses it): loaded only when the command runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import msgspec

from skillwire.cli.output import json_text, say
from skillwire.errors import SkillwireError
from skillwire.protocol.limits import Limits, describe_duration, parse_duration
from skillwire.protocol.states import TaskState
from skillwire.stores.base import sqlite_path
from skillwire.stores.retention import Pruned, RetentionStore, StoreStats
from skillwire.stores.schemes import StoreTools, open_store, store_tools

__all__ = ["prune", "stats", "upgrade"]

#: Tasks one prune batch of the command removes (one transaction each).
PRUNE_BATCH = 1000
#: Batches a prune on a busy PostgreSQL store waits for the process pruning it (half a second each).
_BUSY_TRIES = 20


def upgrade(url: str) -> int:
    """``skillwire db upgrade URL``: bring a store's schema up to date (PostgreSQL's) and say its version."""
    upgrade = store_tools(url).upgrade
    if upgrade is None:
        raise SkillwireError(
            f"{url!r}: this store has no schema to migrate (db upgrade migrates PostgreSQL's)"
        )
    say(f"schema version {asyncio.run(upgrade(url))}")  # without asyncpg, it says how to install it
    return 0


def prune(url: str, older_than: str | None, *, dry_run: bool, vacuum: bool) -> int:
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


def stats(url: str, *, as_json: bool) -> int:
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
