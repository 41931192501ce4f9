"""Idempotency keys: a request sent again with the same ``Idempotency-Key`` gets the first one's result, and
the work it asked for is done once, across processes and restarts.

A caller sends the key (the ``Idempotency-Key`` header, or gRPC metadata of that name) on SendMessage,
SendStreamingMessage, CreateTaskPushNotificationConfig and DeleteTaskPushNotificationConfig. The key is
the caller's own: it is kept per store partition (tenant and owner) for ``Limits.idempotency_window``
seconds, with a digest of the request it came with (:mod:`skillwire.stores.idempotency`).

- **A message** with a key is claimed before any work starts. One that continues a task is claimed in the
  write that stores its turn; one that makes a new task is claimed on its own, naming the task's id and the
  process doing the work, and an agent's direct reply is kept with the claim. Sent again, it is not run
  again: a blocking call waits for that task to settle after the turn, as the first call did (or gets the
  reply); a streaming call follows it (after ``Last-Event-ID`` when the client sends one). If the process
  that made the claim stopped before it stored anything, the task is stored as failed: its work may have
  begun there, so it is not begun again.
- **A push config** with a key is claimed on its own before it is stored, and the claim gets the config
  once it is; the config's id, when the caller gave none, is made from the key, so that storing it again
  after a crash in between stores the same config. A delete with a key answers its retry as the first.
- **The same key with another request** (a different digest) is refused with
  :class:`~skillwire.errors.IdempotencyKeyReusedError` (HTTP 422). Two calls with one key at once run once:
  in one process the second waits for the first's claim; across processes the store has one winner.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec

from skillwire.errors import IdempotencyKeyReusedError, InvalidParamsError
from skillwire.protocol.operations import Operation
from skillwire.stores.idempotency import Claim, IdempotencyStore

__all__ = ["HEADER", "Keyed", "Keys"]

#: The header (and gRPC metadata) that carries the key, lower-cased as the bindings give headers.
HEADER = "idempotency-key"
#: The longest key accepted (the IETF draft's keys are UUIDs; this leaves room for any scheme).
MAX_KEY_LENGTH = 255

_encode = msgspec.json.Encoder().encode


class Keyed(msgspec.Struct, frozen=True):
    """A request that came with a key: where its claim is kept, and the digest it must match."""

    scope: str
    key: str
    digest: bytes


def key_of(headers: Mapping[str, str]) -> str | None:
    """The caller's key, or None; InvalidParamsError for one that is empty, too long or not visible ASCII."""
    key = headers.get(HEADER)
    if key is None:
        return None
    if not key or len(key) > MAX_KEY_LENGTH or not all("!" <= c <= "~" for c in key):
        raise InvalidParamsError(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} visible ASCII characters",
            field_violations=[("Idempotency-Key", "1 to 255 visible ASCII characters")],
        )
    return key


def config_id(keyed: Keyed) -> str:
    """The id of a push config made under ``keyed`` when its caller gave none: the same for every retry."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"skillwire-push-config:{keyed.scope}\x00{keyed.key}"))


class Keys:
    """The runtime's idempotency keys over ``store``, kept ``window`` seconds."""

    def __init__(self, store: IdempotencyStore, window: float) -> None:
        self.store = store
        self.window_us = int(window * 1_000_000)
        #: Claims being made in this process: a second call with the key waits for the first's.
        self._pending: dict[tuple[str, str], asyncio.Future[None]] = {}

    def keyed(
        self, operation: Operation, request: Any, scope: str, headers: Mapping[str, str]
    ) -> Keyed | None:
        key = key_of(headers)
        if key is None:
            return None
        # the operation is left out on purpose: a message retried as a stream (or the other way) is the same
        digest = hashlib.sha256(_encode(request)).digest()
        if operation in (Operation.CREATE_PUSH_CONFIG, Operation.DELETE_PUSH_CONFIG):
            digest = hashlib.sha256(operation.value.encode() + digest).digest()
        return Keyed(scope, key, digest)

    def claim(self, keyed: Keyed, *, task_id: str = "", generation: int = 0, owner: str = "") -> Claim:
        now = time.time_ns() // 1_000
        return Claim(
            keyed.scope,
            keyed.key,
            keyed.digest,
            now,
            now + self.window_us,
            task_id=task_id,
            generation=generation,
            owner=owner,
        )

    async def recall(self, keyed: Keyed) -> Claim | None:
        """The live claim of the key, once any claim of it under way in this process is made; refused when it
        was made by another request."""
        pending = self._pending.get((keyed.scope, keyed.key))
        if pending is not None:
            await asyncio.shield(pending)
        claim = await self.store.recall(keyed.scope, keyed.key, time.time_ns() // 1_000)
        if claim is not None and claim.digest != keyed.digest:
            raise IdempotencyKeyReusedError(
                "This Idempotency-Key was used for another request: send a new key with a new request",
                metadata={"idempotencyKey": keyed.key[:64]},
            )
        return claim

    @contextlib.asynccontextmanager
    async def claiming(self, keyed: Keyed) -> AsyncIterator[None]:
        """While the claim of ``keyed`` is being made in this process (another call with the key waits)."""
        slot = (keyed.scope, keyed.key)
        while (earlier := self._pending.get(slot)) is not None:  # another call with this key first
            await asyncio.shield(earlier)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[slot] = future
        try:
            yield
        finally:
            if self._pending.get(slot) is future:
                del self._pending[slot]
            future.set_result(None)
