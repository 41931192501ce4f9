"""What a store shared by several server processes adds: leases, and taking over what a dead process left.

A store that several processes use at once (PostgreSQL) cannot tell at start-up which unfinished tasks were
left by a process that died: the others are still running theirs. So each process has an *owner* id, and:

- every commit records its store's ``owner`` on the task it writes: the owner of an unfinished (SUBMITTED or
  WORKING) task is the process whose run last wrote it;
- each process renews a *lease* on its owner id (``renew_lease``) well within the lease's time to live, and
  drops it when it stops cleanly (``release_lease``);
- an unfinished task whose owner holds no live lease (expired by the database's clock, or dropped) is
  *orphaned*: any process may take it over (resume it or fail it). The takeover is a commit from the version
  it read, so when several processes try, one wins and the others get ConcurrentUpdateError;
- push deliveries belong to an owner too, per lane (task and config): a delivery joins the owner of the
  pending deliveries of its lane when there are any (so one process delivers a lane, in order), else its
  store's owner; a deliverer reads only its owner's deliveries; ``adopt_deliveries`` moves the deliveries of
  owners without a live lease to this store's owner;
- what every process must hold alike, the push notification signing key when none is configured, is kept in
  the store (``shared_secret``): the first process to start stores the one it made, the others read it.

The single-process stores (memory, SQLite, which takes a lock on its file) have no such protocol: everything
unfinished at start-up was left by the previous process.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from skillwire.stores.base import StoredTask

__all__ = ["SharedStore"]


@runtime_checkable
class SharedStore(Protocol):
    #: This process's id in the store (set before ``open``; a fresh random one by default).
    owner: str

    async def renew_lease(self, ttl: float) -> None:
        """Record that ``owner`` is alive for ``ttl`` more seconds, by the database's clock (StoreError if the
        database cannot be reached)."""
        ...

    async def release_lease(self) -> None:
        """Drop ``owner``'s lease (a clean shutdown): what it still owns is orphaned at once."""
        ...

    async def orphaned(self, limit: int = 500) -> list[tuple[str, StoredTask, str]]:
        """Up to ``limit`` unfinished tasks whose owner holds no live lease, oldest first: ``(tenant, the task
        read whole, its owner)``."""
        ...

    async def shared_secret(self, name: str, value: bytes) -> bytes:
        """The value stored under ``name``; ``value`` is stored first if there is none (of several processes
        storing at once, one value wins and all of them get it)."""
        ...

    async def alive(self, owner: str) -> bool:
        """Whether ``owner`` holds a live lease (its process is running)."""
        ...

    async def adopt_deliveries(self) -> int:
        """Make ``owner`` the owner of the pending push deliveries of owners without a live lease; how many
        were taken over."""
        ...
