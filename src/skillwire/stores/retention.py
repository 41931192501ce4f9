"""What a store does for task retention: prune finished tasks past an age, and say how large it is.

A task is *finished* once its state is terminal (completed, failed, canceled, rejected): nothing changes it
again. A store that implements :class:`RetentionStore` can drop its finished tasks whose last status change
is older than an instant, a batch at a time (``prune_finished``): each batch is one transaction that removes
the tasks with everything stored for them (history, artifacts, event log, push configs and pending push
deliveries, the idempotency claims that name them), so a reader sees a task whole or not at all, and a
process killed in the middle of a prune leaves every task either whole or gone. Unfinished tasks are never
pruned. ``stats`` reads what an operator (``skillwire db stats``) and the metrics want: tasks by state,
bytes on disk, the oldest finished task.

The runtime prunes in the background (:mod:`skillwire.server.tasks.retention`) by ``Limits.task_retention``;
``skillwire db prune`` does it by hand (docs/retention.md).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

from skillwire.protocol.states import TaskState

__all__ = ["FINISHED_STATES", "Pruned", "RetentionStore", "StoreStats"]

#: The states a task never leaves: the ones retention prunes.
FINISHED_STATES = tuple(state for state in TaskState if state.is_terminal)


class Pruned(msgspec.Struct, frozen=True, kw_only=True):
    """What one prune removed: the tasks, and the rows that were theirs."""

    tasks: int = 0
    messages: int = 0
    artifacts: int = 0
    #: Rows of the tasks' event logs.
    events: int = 0
    push_configs: int = 0
    #: Push deliveries still pending (failed ones stay in the operator's list, bounded on their own).
    deliveries: int = 0
    #: Idempotency claims that named a pruned task.
    claims: int = 0
    #: Another process (sharing the store) was pruning: this one left it the work.
    busy: bool = False

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            tasks=self.tasks + other.tasks,
            messages=self.messages + other.messages,
            artifacts=self.artifacts + other.artifacts,
            events=self.events + other.events,
            push_configs=self.push_configs + other.push_configs,
            deliveries=self.deliveries + other.deliveries,
            claims=self.claims + other.claims,
            busy=self.busy or other.busy,
        )


class StoreStats(msgspec.Struct, frozen=True, kw_only=True):
    #: Tasks by state (the state's wire name, ``TASK_STATE_COMPLETED``); states with none are left out.
    tasks: dict[str, int] = msgspec.field(default_factory=dict)
    #: Bytes the store takes: the SQLite file with its WAL, the PostgreSQL tables with their indexes and
    #: TOAST, the memory store's encoded pieces.
    size_bytes: int = 0
    #: Of those, bytes free for reuse (a SQLite file's free pages); 0 where not known.
    free_bytes: int = 0
    #: The last status change of the oldest finished task (microseconds since the epoch); None: none.
    oldest_finished_us: int | None = None


@runtime_checkable
class RetentionStore(Protocol):
    async def prune_finished(self, before_us: int, limit: int = 200) -> Pruned:
        """Remove up to ``limit`` finished tasks whose status timestamp is before ``before_us``, oldest first,
        with everything stored for them, in one transaction."""
        ...

    async def count_finished(self, before_us: int) -> dict[str, int]:
        """The finished tasks a prune at ``before_us`` would remove, by state (nothing is removed)."""
        ...

    async def stats(self) -> StoreStats: ...
