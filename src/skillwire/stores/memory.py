"""An in-memory TaskStore: fast, shared by nothing, gone when the process ends."""

from __future__ import annotations

from dataclasses import dataclass

from skillwire.protocol.models import Task
from skillwire.protocol.states import TaskState
from skillwire.stores.base import (
    UNFINISHED_STATES,
    StoredTask,
    TaskPage,
    TaskQuery,
    decode_cursor,
    decode_task,
    encode_cursor,
    encode_task,
    instant_us,
    timestamp_us,
)

__all__ = ["MemoryTaskStore"]


@dataclass(slots=True)
class _Row:
    version: int
    context_id: str
    state: TaskState
    updated_us: int
    body: bytes


class MemoryTaskStore:
    """Snapshots are kept encoded, so a caller's later changes to a Task never leak into the store."""

    url = "memory://"

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], _Row] = {}

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def save(self, task: Task, *, version: int, tenant: str = "") -> bool:
        key = (tenant, task.id)
        row = self._rows.get(key)
        if row is not None and row.version >= version:
            return False
        self._rows[key] = _Row(
            version, task.context_id, task.status.state, timestamp_us(task), encode_task(task)
        )
        return True

    async def get(self, task_id: str, *, tenant: str = "") -> StoredTask | None:
        row = self._rows.get((tenant, task_id))
        return None if row is None else StoredTask(decode_task(row.body), row.version)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        after_us = instant_us(query.updated_after) if query.updated_after is not None else None
        matches = [
            (row.updated_us, task_id, row)
            for (tenant, task_id), row in self._rows.items()
            if tenant == query.tenant
            and (not query.context_id or row.context_id == query.context_id)
            and (query.state is None or row.state == query.state)
            and (after_us is None or row.updated_us >= after_us)
        ]
        matches.sort(key=lambda m: (m[0], m[1]), reverse=True)
        total = len(matches)
        if query.page_token:
            cursor = decode_cursor(query.page_token)
            matches = [m for m in matches if (m[0], m[1]) < cursor]
        page = matches[: query.page_size]
        more = len(matches) > query.page_size
        token = encode_cursor(page[-1][0], page[-1][1]) if more and page else ""
        return TaskPage([decode_task(m[2].body) for m in page], total, token)

    async def list_unfinished(self) -> list[tuple[str, StoredTask]]:
        return [
            (tenant, StoredTask(decode_task(row.body), row.version))
            for (tenant, _), row in self._rows.items()
            if row.state in UNFINISHED_STATES
        ]
