"""What a store keeps for idempotency keys: one claim per key a caller sent, for a window.

A **claim** (:class:`Claim`) is keyed by ``(scope, key)``: the caller's store partition (its tenant and
owner, :func:`skillwire.server.context.partition`) and the ``Idempotency-Key`` it sent, so one caller's key
never answers another's request. It holds the digest of the request that made it (the same key with another
request is refused), what the request made (a task, and the generation the task had once the request's turn
was stored) or answered (``result``: a reply, a push config), and when it lapses (``expires_us``); a lapsed
claim is as good as none, and the next claim of its key replaces it.

A claim that continues a task is written **in the write that stores the request's turn**
(``TaskWrite.claim``), before any work: the write fails with :class:`~skillwire.errors.KeyClaimedError`,
and nothing of it is stored, when a live claim of that key is there already (another process, a concurrent
request, won). Other claims (a message that makes a new task, a push config) are made on their own
(:meth:`IdempotencyStore.claim`) before the work they stand for, naming the task id the work will use and the
process doing it (``owner``), and are given the answer when it is not a task (:meth:`IdempotencyStore.settle`).

A store that keeps these implements :class:`IdempotencyStore` besides
:class:`~skillwire.stores.base.TaskStore`; idempotency keys are honoured only with such a store (every store
skillwire ships is one).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

__all__ = ["Claim", "IdempotencyStore", "MemoryClaims"]


class Claim(msgspec.Struct, frozen=True, gc=False):
    scope: str
    key: str
    #: A digest of the request that made the claim.
    digest: bytes
    #: When it was made, and when it lapses (microseconds since the epoch).
    created_us: int
    expires_us: int
    #: The task the request made or continued ("" when it made none), and the task's generation once the
    #: request's turn was stored (a retry waits for the task to settle past it).
    task_id: str = ""
    generation: int = 0
    #: The answer when it is not a task (a reply Message, a push config: JSON); empty until known.
    result: bytes = b""
    #: The server process that made it (its runtime's id), while its request is under way: a retry that
    #: finds neither a task nor a result asks whether that process is still alive.
    owner: str = ""


@runtime_checkable
class IdempotencyStore(Protocol):
    async def recall(self, scope: str, key: str, now_us: int) -> Claim | None:
        """The claim of ``key`` in ``scope`` that has not lapsed by ``now_us``, or None."""
        ...

    async def claim(self, claim: Claim) -> Claim | None:
        """Store ``claim`` unless a claim of its key that has not lapsed by ``claim.created_us`` is there:
        None if it was stored, else that claim."""
        ...

    async def settle(self, scope: str, key: str, result: bytes) -> None:
        """Give the claim of ``key`` its ``result``."""
        ...


class MemoryClaims:
    """The claims of a store that keeps everything in memory (the memory store, and tests)."""

    def __init__(self) -> None:
        self._claims: dict[tuple[str, str], Claim] = {}

    def live(self, scope: str, key: str, now_us: int) -> Claim | None:
        found = self._claims.get((scope, key))
        if found is not None and found.expires_us <= now_us:
            del self._claims[scope, key]
            return None
        return found

    def put(self, claim: Claim) -> Claim | None:
        found = self.live(claim.scope, claim.key, claim.created_us)
        if found is not None:
            return found
        self._claims[claim.scope, claim.key] = claim
        self._forget_lapsed(claim.created_us)
        return None

    def settle(self, scope: str, key: str, result: bytes) -> None:
        found = self._claims.get((scope, key))
        if found is not None:
            self._claims[scope, key] = msgspec.structs.replace(found, result=result)

    def forget_tasks(self, tasks: set[tuple[str, str]]) -> int:
        """Drop the claims naming one of ``tasks`` (tenant, task id), which retention pruned; how many."""
        doomed = [
            key
            for key, claim in self._claims.items()
            if claim.task_id and (claim.scope.partition("\x00")[0], claim.task_id) in tasks
        ]
        for key in doomed:
            del self._claims[key]
        return len(doomed)

    def _forget_lapsed(self, now_us: int, limit: int = 16) -> None:
        """Drop a few lapsed claims (oldest made first): each claim made pays for the removal of some."""
        for dropped, (key, claim) in enumerate(list(self._claims.items())):
            if dropped >= limit or claim.expires_us > now_us:
                break
            del self._claims[key]
