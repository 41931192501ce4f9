"""The task state machine, as one table.

Rules (A2A v1.0, specification section 8.3):

* A task starts SUBMITTED (or is REJECTED outright) and moves through WORKING.
* INPUT_REQUIRED and AUTH_REQUIRED are *interrupted* states: the task waits for the client (or for credentials
  delivered out of band) and then goes back to WORKING, or ends.
* COMPLETED, FAILED, CANCELED and REJECTED are *terminal*: nothing ever changes a terminal task.
* A state may be re-entered (WORKING -> WORKING carries a new status message) except a terminal one.
* Any non-terminal state may be CANCELED or FAILED (the framework does that on cancel or crash).
"""

from __future__ import annotations

import enum

__all__ = ["INTERRUPTED_STATES", "NAMES", "TERMINAL_STATES", "TRANSITIONS", "TaskState", "can_transition"]


class TaskState(enum.StrEnum):
    """The v1.0 TaskState enum, valued by its ProtoJSON names, printed by its readable one::

        >>> TaskState.INPUT_REQUIRED.value, str(TaskState.INPUT_REQUIRED), f"{TaskState.COMPLETED}"
        ('TASK_STATE_INPUT_REQUIRED', 'input-required', 'completed')

    The value is what the wire carries (and what the state compares equal to, as a string); ``str()`` and
    formatting give the name A2A v0.3 used, which people read.
    """

    def __str__(self) -> str:
        return self.value.removeprefix("TASK_STATE_").lower().replace("_", "-")

    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_interrupted(self) -> bool:
        return self in INTERRUPTED_STATES


S = TaskState

TERMINAL_STATES: frozenset[TaskState] = frozenset({S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED})
INTERRUPTED_STATES: frozenset[TaskState] = frozenset({S.INPUT_REQUIRED, S.AUTH_REQUIRED})

#: state -> its member name (``COMPLETED``), as the access log, spans and metrics label it: a dict lookup, where
#: ``state.name`` goes through the enum's descriptor (about half a microsecond, on every request)
NAMES: dict[TaskState, str] = {state: state.name for state in TaskState}

_ENDS = {S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED}

#: state -> the states it may move to. Terminal states map to nothing.
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    S.SUBMITTED: frozenset({S.SUBMITTED, S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, *_ENDS}),
    S.WORKING: frozenset({S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, *_ENDS}),
    S.INPUT_REQUIRED: frozenset({S.INPUT_REQUIRED, S.WORKING, S.AUTH_REQUIRED, *_ENDS}),
    S.AUTH_REQUIRED: frozenset({S.AUTH_REQUIRED, S.WORKING, S.INPUT_REQUIRED, *_ENDS}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELED: frozenset(),
    S.REJECTED: frozenset(),
    S.UNSPECIFIED: frozenset(),
}


def can_transition(current: TaskState, new: TaskState) -> bool:
    """Whether a task in ``current`` may move to ``new``."""
    return new in TRANSITIONS[current]
