"""Delegated long-running work: a release job runs in its own process and writes a log; the skill hands the
task over with ``ctx.delegate`` and ``follow`` tails the log until the job ends.

The job survives the agent (it runs in a session of its own), and the task records the job reference, so
after a restart the agent resumes following: it re-reads the log from the step it had reported last.
Jobs live in ``$SKILLWIRE_JOBS_DIR`` (default ``./.skillwire/jobs``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from skillwire import SkillContext, SkillError

POLL_SECONDS = 0.05
WORKER = Path(__file__).with_name("worker.py")
_started: list[subprocess.Popen[bytes]] = []  # jobs this process launched (they run on without it)


def jobs_dir() -> Path:
    return Path(os.environ.get("SKILLWIRE_JOBS_DIR", ".skillwire/jobs")).resolve()


async def run(params: dict[str, Any], ctx: SkillContext) -> None:
    release = params.get("release") or (params.get("text") or "").strip() or "latest"
    steps = int(params.get("steps", 5))
    job = uuid.uuid4().hex
    log = jobs_dir() / f"{job}.log"
    await asyncio.to_thread(_start_job, log, release, steps)
    await ctx.delegate(
        {"job": job, "log": str(log), "release": release}, f"Release {release} started as job {job}"
    )


def _start_job(log: Path, release: str, steps: int) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    _started.append(
        subprocess.Popen(
            [sys.executable, str(WORKER), str(log), release, str(steps)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the job outlives the agent
        )
    )


def _reported(ctx: SkillContext) -> int:
    """How many log lines the task already shows (after a restart: what the stored task holds)."""
    if ctx.task is None:
        return 0
    for artifact in ctx.task.artifacts:
        if artifact.artifact_id == "job-log":
            return len(artifact.parts)
    return 0


async def follow(ref: dict[str, Any], ctx: SkillContext) -> str:
    log = Path(ref["log"])
    done = _reported(ctx)
    while True:
        lines = (await asyncio.to_thread(log.read_text)).splitlines()
        complete = [line for line in lines if line.endswith(".")]  # the worker ends every line with "."
        for line in complete[done:]:
            if line.startswith("failed:"):
                raise SkillError.invalid_request(line.removeprefix("failed:").strip())
            if line.startswith("done:"):
                return line.removeprefix("done:").strip()
            await ctx.artifact(line, artifact_id="job-log", name="job log", append=done > 0)
            done += 1
        await asyncio.sleep(POLL_SECONDS)
