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
from typing import Any

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = frozenset({"db"})

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
    from skillwire.cli import db_work

    if args.db_command == "upgrade":
        return db_work.upgrade(args.url)
    if args.db_command == "prune":
        return db_work.prune(_store_url(args.url), args.older_than, dry_run=args.dry_run, vacuum=args.vacuum)
    return db_work.stats(_store_url(args.url), as_json=args.json)


def _store_url(given: str) -> str:
    """A store URL from what the operator typed: a URL, or a SQLite file's path."""
    return given if "://" in given else f"sqlite:///{given}"
