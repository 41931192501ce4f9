"""``skillwire deliveries STORE``: the push deliveries that failed for good, read from a SQLite or PostgreSQL
store without opening it (it works while a server or a cluster owns the store)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from skillwire.cli.output import json_text, say
from skillwire.errors import SkillwireError

if TYPE_CHECKING:
    from skillwire.stores.push import Delivery

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = frozenset({"deliveries"})


def add_parsers(sub: Any) -> None:
    deliveries = sub.add_parser(
        "deliveries",
        help="list the push deliveries that failed for good, from a SQLite or PostgreSQL store (read-only:"
        " works while a server or a cluster owns it)",
    )
    deliveries.add_argument(
        "store",
        help="the store: sqlite:///PATH (or the file's path), or postgresql://HOST/DATABASE[?schema=NAME]",
    )
    deliveries.add_argument(
        "--after", type=_seq, default=0, metavar="SEQ", help="only those after this one (its seq)"
    )
    deliveries.add_argument(
        "--limit", type=_count, default=100, metavar="N", help="at most this many (default 100)"
    )
    deliveries.add_argument("--json", action="store_true", help="one JSON object per line")


#: The largest seq a store holds (PostgreSQL's BIGINT, SQLite's INTEGER).
_MAX_SEQ = 2**63 - 1


def _seq(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) > _MAX_SEQ:
        raise argparse.ArgumentTypeError(f"expected a delivery's seq (0 or more), got {value!r}")
    return int(value)


def _count(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or not 0 < int(value) <= _MAX_SEQ:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    """``skillwire deliveries STORE``: the failed push deliveries, oldest first."""
    found = _failed_deliveries(args.store, args.after, args.limit)
    for d in found:
        say(_delivery_json(d) if args.json else _delivery_text(d))
    if not found and not args.json:
        say("no failed deliveries")
    return 0


def _failed_deliveries(store: str, after: int, limit: int) -> list[Delivery]:
    """The failed deliveries of the store ``store`` (a URL, or a SQLite file's path), read without opening
    it."""
    import asyncio

    from skillwire.stores.schemes import store_tools

    url = store if "://" in store else f"sqlite:///{store}"
    read = store_tools(url).read_failed_deliveries
    if read is None:
        raise SkillwireError(f"{store!r}: this store keeps no deliveries to read from outside a server")
    return asyncio.run(read(url, after, limit))  # without asyncpg, it says how to install it


def _delivery_json(d: Delivery) -> str:
    import json

    from skillwire.server.context import split_partition

    tenant, owner = split_partition(d.tenant)
    entry = {
        "seq": d.seq,
        "tenant": tenant,
        "owner": owner,
        "taskId": d.task_id,
        "configId": d.config_id,
        "attempts": d.attempts,
        "error": d.error,
        "created": _delivery_time(d).replace("+00:00", "Z"),
    }
    return json_text(json.dumps(entry))


def _delivery_text(d: Delivery) -> str:
    from skillwire.server.context import split_partition

    tenant, owner = split_partition(d.tenant)
    who = f" tenant {tenant!r}" if tenant else ""
    who += f" owner {owner}" if owner else ""
    when = _delivery_time(d)
    return f"{d.seq}  task {d.task_id}  config {d.config_id}{who}  {d.attempts} attempt(s)  {when}\n    {d.error}"


def _delivery_time(d: Delivery) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(d.created_us / 1_000_000, UTC).isoformat(timespec="seconds")
