"""An agent whose outcome hook records how every task run ended, one JSON line each, in a file.

    OUTCOME_LOG=/var/log/agent/outcomes.jsonl skillwire serve examples/outcome-hook

Each line: ``{"time", "skill", "task", "context", "state", "durationSeconds", "error", "errorType"}``. The file is
``$OUTCOME_LOG``, by default ``outcomes.jsonl`` in the current directory. The skills end every way a run can
end: ``upper`` completes, ``divide`` fails on a zero divisor, ``confirm`` waits for input (then completes or is
rejected), ``pause`` works until it is cancelled or its time is up.

A hook is an observer: the framework calls it after the task has its final state and logs an exception it
raises without changing the task, so a log that cannot be written (a full disk, a missing folder) costs
the record, never the task.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillwire import Agent, Outcome, SkillContext, SkillError, TaskState

LOG_ENV = "OUTCOME_LOG"
DEFAULT_LOG = "outcomes.jsonl"
MAX_PAUSE_SECONDS = 60.0

agent = Agent("Outcome hook", "Records the outcome of every task run in a JSON-lines file.")

# -- the hook ----------------------------------------------------------------------------------------------


def log_path() -> Path:
    return Path(os.environ.get(LOG_ENV) or DEFAULT_LOG)


def record(outcome: Outcome) -> dict[str, Any]:
    error = outcome.error
    if isinstance(error, SkillError):
        reason: str | None = error.message
    elif isinstance(error, asyncio.CancelledError):
        cancelled = outcome.state is TaskState.CANCELED
        reason = "cancelled (CancelTask)" if cancelled else "stopped: out of time, or the server shut down"
    else:
        reason = f"{type(error).__name__}: {error}" if error is not None else None
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "skill": outcome.skill_id,
        "task": outcome.task_id,
        "context": outcome.context_id,
        "state": outcome.state.name,
        "durationSeconds": round(outcome.duration, 6),
        "error": reason,
        "errorType": type(error).__name__ if error is not None else None,
    }


def append_line(path: Path, line: str) -> None:
    # One write(2) on an O_APPEND descriptor: lines from concurrent runs (or several server processes
    # sharing the file) never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@agent.on_outcome
async def write_outcome(outcome: Outcome) -> None:
    line = json.dumps(record(outcome), ensure_ascii=False, separators=(",", ":")) + "\n"
    await asyncio.to_thread(append_line, log_path(), line)  # file I/O off the event loop


# -- skills that end every way -----------------------------------------------------------------------------


@agent.skill(tags=["text", "example"])
async def upper(text: str) -> str:
    """Upper-cases the text (completes)."""
    return text.upper()


@agent.skill(tags=["math", "example"])
async def divide(a: float, b: float) -> float:
    """Divides a by b (fails when b is 0)."""
    if b == 0:
        raise SkillError.invalid_request("Cannot divide by zero.")
    return a / b


@agent.skill(tags=["multi-turn", "example"])
async def confirm(action: str, ctx: SkillContext) -> str:
    """Asks before doing the action (waits for input; then completes on yes, is rejected otherwise)."""
    answer = (await ctx.ask(f"Shall I {action}? (yes/no)")).text.strip().lower()
    if answer not in {"yes", "y"}:
        raise SkillError.rejected(f"Not confirmed: {action} was not done.")
    return f"Done: {action}."


@agent.skill(tags=["long-running", "example"])
async def pause(seconds: float, ctx: SkillContext) -> str:
    """Works for some seconds, at most 60 (cancel it to see CANCELED)."""
    await ctx.working(f"Pausing for {seconds:g} s")
    await asyncio.sleep(min(max(seconds, 0.0), MAX_PAUSE_SECONDS))
    return f"Paused for {seconds:g} s."
