"""The TaskStore protocol and what every store shares.

A store keeps the latest snapshot of each task, keyed by ``(tenant, id)``, with a version number that only
grows. ``save`` writes a snapshot only if its version is newer than the stored one, so a stale writer can
never overwrite newer state (no lost update, whatever order concurrent writes arrive in). ``list_tasks``
pages newest first by status timestamp with an opaque cursor. ``list_unfinished`` is read once at start-up:
a task that was SUBMITTED or WORKING when the previous process stopped is either resumed (work delegated
elsewhere can be followed again) or marked FAILED with a reason by the runtime. Tasks waiting for input
stay as they are: they can still be resumed by the client.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

import msgspec

from skillwire.errors import InvalidParamsError, SkillwireError
from skillwire.protocol.models import Task
from skillwire.protocol.states import TaskState

__all__ = ["StoredTask", "TaskPage", "TaskQuery", "TaskStore", "open_store"]

UNFINISHED_STATES = (TaskState.SUBMITTED, TaskState.WORKING)


@dataclass(frozen=True, slots=True)
class StoredTask:
    task: Task
    version: int


@dataclass(frozen=True, slots=True)
class TaskQuery:
    tenant: str = ""
    context_id: str = ""
    state: TaskState | None = None
    #: Only tasks whose status timestamp is at or after this instant.
    updated_after: datetime | None = None
    page_size: int = 50
    page_token: str = ""


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[Task] = field(default_factory=list)
    total_size: int = 0
    next_page_token: str = ""


@runtime_checkable
class TaskStore(Protocol):
    """Where tasks are kept. Implementations must be safe to call from one event loop concurrently."""

    url: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def save(self, task: Task, *, version: int, tenant: str = "") -> bool:
        """Write ``task`` unless a snapshot with ``version`` or newer is stored; True if written."""
        ...

    async def get(self, task_id: str, *, tenant: str = "") -> StoredTask | None: ...

    async def list_tasks(self, query: TaskQuery) -> TaskPage: ...

    async def list_unfinished(self) -> list[tuple[str, StoredTask]]:
        """Every SUBMITTED or WORKING task, with its tenant."""
        ...


# -- helpers shared by the implementations ---------------------------------------------------------------

encode_task = msgspec.json.Encoder().encode
decode_task = msgspec.json.Decoder(Task).decode


def timestamp_us(task: Task) -> int:
    ts = task.status.timestamp
    if ts is None:
        return 0
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return int(ts.timestamp() * 1_000_000)


def instant_us(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1_000_000)


def encode_cursor(updated_us: int, task_id: str) -> str:
    return base64.urlsafe_b64encode(f"{updated_us}:{task_id}".encode()).decode().rstrip("=")


_INT64_MAX = 2**63 - 1


def bad_cursor() -> InvalidParamsError:
    return InvalidParamsError(
        "Invalid pageToken: pass back a nextPageToken from an earlier ListTasks response",
        field_violations=[("params.pageToken", "not a token issued by this server")],
    )


def cursor_int(text: str) -> int:
    """A non-negative int64 written in ASCII digits, or the invalid-token error."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) > _INT64_MAX:
        raise bad_cursor()
    return int(text)


def decode_cursor(token: str) -> tuple[int, str]:
    """(status timestamp in microseconds, the store's tie-breaker) from a page token."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad_cursor() from None
    us, sep, tie = raw.partition(":")
    if not sep:
        raise bad_cursor()
    return cursor_int(us), tie


def open_store(url: str) -> TaskStore:
    """A store for ``url``: ``memory://``, ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``."""
    if url == "memory://" or url == "memory":
        from skillwire.stores.memory import MemoryTaskStore

        return MemoryTaskStore()
    if url.startswith("sqlite://"):
        from skillwire.stores.sqlite import SQLiteTaskStore

        path = url[len("sqlite://") :]
        if path.startswith("/"):
            path = path[1:]
        if not path:
            raise SkillwireError(f"{url!r} names no file: use sqlite:///PATH")
        return SQLiteTaskStore(path)
    raise SkillwireError(f"Unknown store URL {url!r}: use memory:// or sqlite:///PATH")
