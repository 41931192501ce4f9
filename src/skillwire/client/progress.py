"""What a consumer has seen of a task's stream, so that a resumed stream repeats nothing.

With an agent that keeps A2A 1.1 generations, every event carries one, one more per event: the progress
keeps the last one seen (``generation``), a stream is resumed after it (SubscribeToTask with the cursor) and
gets exactly what followed, an event at or below it is a duplicate and dropped, and an event past the next
one is a gap (``gap``), which the client closes by resuming from the cursor.

Without generations (another agent), a stream that breaks is resumed with SubscribeToTask, whose first event
is a Task snapshot. The snapshot is not shown again: :meth:`StreamProgress.missed` turns the difference
between it and what was seen into the update events the consumer missed (new artifacts or artifact parts,
then the status if it changed). Live events that follow are passed on, except a status update identical to
the last one seen. A snapshot in the middle of a stream (the agent's log no longer held what the stream
missed) is turned into update events the same way.
"""

from __future__ import annotations

from skillwire.protocol.models import (
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    generation_of,
)
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState

__all__ = ["StreamProgress"]


def _status_key(status: TaskStatus) -> tuple[TaskState, str]:
    return status.state, status.timestamp.isoformat() if status.timestamp is not None else ""


class StreamProgress:
    """Tracks one task's stream: its id, last status, and how many parts of each artifact were seen."""

    def __init__(self, task_id: str | None = None, *, end_on_interrupt: bool = True) -> None:
        self.task_id = task_id
        self.context_id = ""
        #: Whether a Task (or Message) event arrived: only then is there something to resume.
        self.started = False
        self.state: TaskState | None = None
        self.end_on_interrupt = end_on_interrupt
        self._status: tuple[TaskState, str] | None = None
        #: Whether the state came from a status update. A Task snapshot in an interrupted state opens the
        #: stream of a message that answers that task, so it does not end the stream; an update does.
        self._updated = False
        self._parts: dict[str, int] = {}
        #: The last generation seen (0: none, or an agent without generations).
        self.generation = 0
        #: Set when an event skipped generations: the consumer missed some (resume from ``generation``).
        self.gap = False
        #: Whether an event past the next generation is a gap (else it is taken as it comes).
        self.detect_gaps = True

    @property
    def finished(self) -> bool:
        """The task is terminal (or interrupted, for a stream that ends there): nothing more will come."""
        if self.state is None:
            return False
        return self.state in TERMINAL_STATES or (
            self.end_on_interrupt and self._updated and self.state in INTERRUPTED_STATES
        )

    def _see_status(self, status: TaskStatus) -> None:
        self._status = _status_key(status)
        self.state = status.state

    def supersedes(self, event: StreamResponse) -> bool:
        """Whether ``event`` is a Task snapshot in the middle of a stream, past what was seen: the updates
        :meth:`missed` makes of it stand for the events it replaces."""
        task = event.task
        return task is not None and self.started and task.generation > self.generation > 0

    def observe(self, event: StreamResponse) -> bool:
        """Record ``event``; False when it repeats what the consumer already has, or comes after a gap
        (``gap`` is then set, and nothing else recorded)."""
        generation = generation_of(event)
        if generation and self.generation:
            if generation <= self.generation:
                return False
            if self.detect_gaps and generation > self.generation + 1 and event.task is None:
                self.gap = True
                return False
        if generation:
            self.generation = generation
        if event.task is not None:
            task = event.task
            self.started = True
            self._updated = False
            self.task_id, self.context_id = task.id, task.context_id
            self._see_status(task.status)
            self._parts = {a.artifact_id: len(a.parts) for a in task.artifacts}
        elif event.message is not None:
            self.started = True
        elif event.status_update is not None:
            if _status_key(event.status_update.status) == self._status:
                return False
            self._updated = True
            self._see_status(event.status_update.status)
        elif event.artifact_update is not None:
            update = event.artifact_update
            seen = self._parts.get(update.artifact.artifact_id, 0) if update.append else 0
            self._parts[update.artifact.artifact_id] = seen + len(update.artifact.parts)
        return True

    def missed(self, snapshot: Task) -> list[StreamResponse]:
        """The update events that bring a consumer from what it saw to ``snapshot`` (not recorded yet)."""
        out: list[StreamResponse] = []
        terminal = snapshot.status.state in TERMINAL_STATES
        for artifact in snapshot.artifacts:
            seen = self._parts.get(artifact.artifact_id)
            if seen is not None and seen >= len(artifact.parts):
                continue
            parts = artifact.parts if seen is None else artifact.parts[seen:]
            event = TaskArtifactUpdateEvent(
                task_id=snapshot.id,
                context_id=snapshot.context_id,
                artifact=type(artifact)(
                    artifact_id=artifact.artifact_id,
                    name=artifact.name,
                    description=artifact.description,
                    parts=list(parts),
                    metadata=artifact.metadata,
                    extensions=artifact.extensions,
                ),
                append=seen is not None,
                last_chunk=terminal,
            )
            out.append(StreamResponse(artifact_update=event))
        if _status_key(snapshot.status) != self._status:
            status = TaskStatusUpdateEvent(
                task_id=snapshot.id, context_id=snapshot.context_id, status=snapshot.status
            )
            out.append(StreamResponse(status_update=status))
        return out

    def caught_up(self, snapshot: Task) -> list[StreamResponse]:
        """The update events that bring the consumer to ``snapshot``, recorded as seen, and ``snapshot``'s
        generation as the last one seen."""
        out = self.missed(snapshot)
        for event in out:
            self.observe(event)
        self.generation = max(self.generation, snapshot.generation)
        self.gap = False
        return out
