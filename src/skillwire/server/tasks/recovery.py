"""Recovery, repair and the lease: what keeps the store's tasks true when a process stops.

- **Recovery at start-up**: the tasks a previous process left SUBMITTED or WORKING are resumed when the
  executor takes them back (``Executor.resume``), failed with a reason otherwise; the first batch before the
  server serves, the rest in the background (``TaskRuntime.start``, ``recovered()``).
- **The lease** (a store several processes share, :class:`~skillwire.stores.shared.SharedStore`): this
  process renews its lease every third of its time to live and, after each renewal, takes over what
  processes whose lease lapsed left behind (``sweep``): their tasks, their pending push deliveries.
- **Repair**: a task whose run could not store its state is failed from its last committed state, and
  retried in the background while the store fails (``repair``, ``retry_repairs``).

:class:`Recovery` is a part of :class:`~skillwire.server.tasks.runtime.TaskRuntime` (its base class): it
uses the runtime's store, executor, bus, push service and limits, and opens runs through it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import msgspec

from skillwire.errors import ConcurrentUpdateError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import Role, SendMessageRequest, Task, agent_text
from skillwire.protocol.states import TaskState
from skillwire.security.principal import Principal
from skillwire.server.buses.base import EventBus
from skillwire.server.context import CallContext, split_partition
from skillwire.server.notifications.push import PushService
from skillwire.server.tasks.executor import Executor, Work
from skillwire.server.tasks.run import RunSpec, TaskRun, status_event, with_status
from skillwire.stores.base import StoredTask, TaskStore, write_task
from skillwire.stores.shared import SharedStore

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ["ORPHAN_MESSAGE", "RECOVERY_BATCH", "RESTART_MESSAGE", "Recovery"]

log = logging.getLogger("skillwire.runtime")

RESTART_MESSAGE = "The server stopped while this task was running; it cannot be resumed."
ORPHAN_MESSAGE = (
    "The server process running this task stopped (its lease on the task lapsed); the work it stood for was"
    " lost with it."
)
#: Tasks read and failed per step of the recovery at start-up.
RECOVERY_BATCH = 500

_replace = msgspec.structs.replace

Key = tuple[str, str]


class Recovery:
    """Recovery, the lease and repair, for the task runtime that inherits them."""

    # what the runtime provides
    store: TaskStore
    executor: Executor
    bus: EventBus
    push: PushService | None
    limits: Limits
    _closing: bool

    if TYPE_CHECKING:

        def _owns(self, key: Key) -> bool: ...

        async def _open(
            self, key: Key, building: Awaitable[tuple[TaskRun, Work]]
        ) -> tuple[TaskRun, Work]: ...

        def _new_run(self, spec: RunSpec) -> TaskRun: ...

        async def _launch(self, run: TaskRun, work: Work, *, eager: bool) -> None: ...

    def _init_recovery(self, store: TaskStore) -> None:
        """The state of recovery, repair and (with a shared store) the lease, before start-up."""
        self._recovery: asyncio.Future[list[str]] | None = None
        #: Tasks whose failure could not be stored yet, with the reason, retried in the background.
        self._repairs: dict[Key, str] = {}
        self._repairer: asyncio.Task[None] | None = None
        #: The store, when several processes share it: this process then holds a lease on the tasks it runs
        #: and takes over those of processes whose lease lapsed (see skillwire.stores.shared).
        self.shared: SharedStore | None = store if isinstance(store, SharedStore) else None
        self._leaser: asyncio.Task[None] | None = None
        #: Set after each round of the lease keeper (renewal, then takeover of what dead processes left).
        self.swept = asyncio.Event()

    async def _start_recovery(self) -> None:
        if self.push is not None:
            await self.push.start()
        if self.shared is not None:
            # Other processes run their own tasks in this store: only those whose owner died are recovered,
            # now (before this process's lease exists, so that what an earlier process of the same owner id
            # left counts too) and whenever one dies, by the lease keeper.
            try:
                swept = await self.sweep()
            except Exception:
                log.exception("could not take over the tasks of stopped processes; trying again")
                swept = []
            await self._renew()
            done_now: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
            done_now.set_result(swept)
            self._recovery = done_now
            self._leaser = asyncio.create_task(self._keep_lease(), name="skillwire-lease")
            return
        failed: list[str] = []
        cursor = await self._recover_batch("", failed)
        if cursor is None:
            done: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
            done.set_result(failed)
            self._recovery = done
            return
        self._recovery = asyncio.create_task(self._recover(cursor, failed), name="skillwire-recovery")

    async def _renew(self) -> bool:
        assert self.shared is not None
        try:
            await self.shared.renew_lease(self.limits.lease_seconds)
        except Exception as exc:
            log.warning(
                "could not renew this process's lease on its tasks (%s): past %g s without one, other"
                " processes take them over",
                exc,
                self.limits.lease_seconds,
            )
            return False
        return True

    async def _keep_lease(self) -> None:
        """Renew the lease every third of its time to live; after each renewal take over what processes whose
        lease lapsed left behind (their unfinished tasks, their pending push deliveries)."""
        interval = self.limits.lease_seconds / 3
        while not self._closing:
            await asyncio.sleep(interval)
            if await self._renew():
                try:
                    await self.sweep()
                except Exception:
                    log.exception("could not take over the tasks of stopped processes; trying again")
            self.swept.set()

    async def sweep(self) -> list[str]:
        """Take over the unfinished tasks of processes whose lease lapsed, a batch at a time: resume those the
        executor takes back (a retryable skill, delegated work to follow), fail the others with a reason. The
        ids failed. Each takeover is a commit from the version read, so of several processes sweeping at once
        one takes each task. Their pending push deliveries are taken over too."""
        shared = self.shared
        if shared is None:
            return []
        failed: list[str] = []
        while not self._closing:
            batch = [
                (tenant, stored)
                for tenant, stored, _owner in await shared.orphaned(RECOVERY_BATCH)
                if not self._owns((tenant, stored.task.id))
            ]
            if not batch:
                break
            outcomes = await asyncio.gather(*(self._recover_one(t, s, ORPHAN_MESSAGE) for t, s in batch))
            failed.extend(task_id for task_id in outcomes if task_id)
            if len(batch) < RECOVERY_BATCH:
                break
        if failed:
            log.warning("failed %d task(s) whose process stopped: %s", len(failed), ", ".join(failed[:10]))
        if self.push is not None:
            adopted = await shared.adopt_deliveries()
            if adopted:
                log.info("took over %d push deliveries of stopped processes", adopted)
            # also what another process queued in a lane this one delivers (a cancel it served)
            self.push.resume_pending()
        return failed

    async def recovered(self) -> list[str]:
        """Wait for the recovery begun by ``start`` and return the ids of the tasks it failed."""
        return [] if self._recovery is None else await asyncio.shield(self._recovery)

    async def _recover(self, cursor: str, failed: list[str]) -> list[str]:
        next_cursor: str | None = cursor
        while next_cursor is not None and not self._closing:
            next_cursor = await self._recover_batch(next_cursor, failed)
        if failed:
            log.warning("marked %d task(s) left running by a previous process as failed", len(failed))
        return failed

    async def _recover_batch(self, cursor: str, failed: list[str]) -> str | None:
        """Recover one batch; the cursor of the next one, or None when there is none."""
        try:
            batch, cursor = await self.store.unfinished(cursor, limit=RECOVERY_BATCH)
        except Exception:
            log.exception("recovery could not read the task store; unfinished tasks stay as they are")
            return None
        outcomes = await asyncio.gather(*(self._recover_one(t, s) for t, s in batch))
        failed.extend(task_id for task_id in outcomes if task_id)
        return cursor or None

    async def _recover_one(
        self, tenant: str, stored: StoredTask, reason: str = RESTART_MESSAGE
    ) -> str | None:
        """Resume a task the executor takes back, or fail it; the id if it was failed."""
        task = stored.task
        try:
            work = self.executor.resume(task)
        except Exception:
            log.exception("resume() failed for task %s", task.id)
            work = None
        if work is not None:
            await self._resume(tenant, stored, work)
            return None
        try:
            await self._fail_stored(tenant, stored, reason)
        except ConcurrentUpdateError:
            return None  # it changed meanwhile (a CancelTask): nothing to recover
        except Exception:
            log.exception("could not mark task %s as failed", task.id)
            return None
        return task.id

    async def _resume(self, tenant: str, stored: StoredTask, work: Work) -> None:
        task = stored.task
        first = next((m for m in task.history if m.role is Role.USER), None) or agent_text(
            "(resumed)", context_id=task.context_id, task_id=task.id
        )

        async def taking_back() -> tuple[TaskRun, Work]:
            # With the push configs the task has now, read while the task is reserved for this run.
            push = await self.push.targets(tenant, task.id) if self.push is not None else {}
            spec = RunSpec(
                tenant=tenant,
                message=first,
                request=SendMessageRequest(message=first),
                call=_owner_context(tenant),
                origin=stored,
                resumed=True,
                # Taking a task over is a commit from the version read: of several processes, one wins; the
                # others' runs end quietly when their first commit finds the task changed.
                taken_over=self.shared is not None,
                deadline=self.limits.task_timeout,
                push=push,
            )
            return self._new_run(spec), work

        run, _ = await self._open((tenant, task.id), taking_back())
        await self._launch(run, work, eager=False)
        log.info("resumed task %s", task.id)

    async def _fail_stored(self, tenant: str, stored: StoredTask, text: str) -> tuple[Task, int]:
        """Commit ``stored`` as FAILED with ``text``, then publish it; raises what the store raises."""
        return await self._end_stored(tenant, stored, TaskState.FAILED, text)

    async def _end_stored(
        self, tenant: str, stored: StoredTask, state: TaskState, text: str
    ) -> tuple[Task, int]:
        """Commit ``stored``, which no run owns, as ended in ``state`` with ``text``, then publish it; raises
        what the store raises."""
        task = stored.task
        ended = with_status(task, state, agent_text(text, context_id=task.context_id, task_id=task.id))
        version = stored.version + 1
        event = status_event(ended)
        write = write_task(
            ended, version=version, base=stored.version, tenant=tenant, stored=stored.layout, events=[event]
        )
        targets = await self.push.targets(tenant, task.id) if self.push is not None else None
        if targets:
            write = _replace(write, deliveries=self.push.outgoing([event], targets))  # type: ignore[union-attr]
        await self.store.commit(write)
        self.bus.publish((tenant, task.id), ended.generation, event)
        if targets:
            self.push.ready(tenant, task.id, targets, len(write.deliveries))  # type: ignore[union-attr]
        return ended, version

    async def repair(self, key: Key, reason: str, fresh: Task | None = None) -> tuple[Task, int] | None:
        """Fail the task ``key`` from its last committed state, because a run could not store it (or from
        ``fresh`` if nothing of it is stored). The failed task and its version; None if there is no task, or
        the store is failing (then the repair is retried in the background until it succeeds)."""
        try:
            stored = await self.store.get(key[1], tenant=key[0])
            if stored is None:
                if fresh is None:
                    return None
                stored = StoredTask(fresh, 0)
            if stored.task.status.state.is_terminal:
                return stored.task, stored.version
            failed = await self._fail_stored(key[0], stored, reason)
            log.info("task %s is now stored as failed", key[1])
            return failed
        except Exception as exc:
            log.error("could not mark task %s as failed yet (%s); retrying in the background", key[1], exc)
            self._repairs[key] = reason
            if self._repairer is None or self._repairer.done():
                self._repairer = asyncio.create_task(self._repair_later(), name="skillwire-repair")
            return None

    async def retry_repairs(self) -> int:
        """Try now to store as failed the tasks whose failure could not be stored (the store was failing);
        returns how many are still waiting. The runtime also retries them by itself, with backoff."""
        for key, reason in list(self._repairs.items()):
            try:
                stored = await self.store.get(key[1], tenant=key[0])
                if stored is not None and not stored.task.status.state.is_terminal:
                    await self._fail_stored(key[0], stored, reason)
                    log.info("task %s is now stored as failed", key[1])
            except Exception:  # still failing, or changed meanwhile: look again next round
                continue
            self._repairs.pop(key, None)
        return len(self._repairs)

    async def _repair_later(self) -> None:
        delay = 0.25
        while self._repairs and not self._closing:
            await asyncio.sleep(delay)
            await self.retry_repairs()
            delay = min(delay * 2, 30.0)


def _owner_context(key: str) -> CallContext:
    """The call context of a task taken back at start-up: its tenant and owner from where it is stored."""
    tenant, owner = split_partition(key)
    return CallContext(tenant=tenant, principal=Principal.from_owner(owner))
