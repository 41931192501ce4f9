"""Delegated long-running work: a release job runs in its own process and writes a log; the skill hands the
task over with ``ctx.delegate`` and ``follow`` tails the log until the job ends.

The job survives the agent (it runs in a session of its own), and the task records the job reference, so
after a restart the agent resumes following: it re-reads the log from the step it had reported last.
Jobs live in ``$SKILLWIRE_JOBS_DIR`` (default ``./.skillwire/jobs``).

Workers are bounded: at most ``MAX_WORKERS`` jobs started by this process run at once
(``$SKILLWIRE_DEPLOY_WORKERS``, default 4); a release beyond that is rejected with a reason, not queued
without end. A task that is cancelled, or that runs out of time (``executionHints.timeoutSeconds``), stops
its job: the process is terminated if this process started it, and ``<log>.stop`` tells the worker to stop
in any case (the job may have been started by an agent process that has since been restarted).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from skillwire import SkillContext, SkillError

POLL_SECONDS = 0.05
WORKER = Path(__file__).with_name("worker.py")
MAX_WORKERS = int(os.environ.get("SKILLWIRE_DEPLOY_WORKERS", "4"))
_started: list[subprocess.Popen[bytes]] = []  # jobs this process launched and that may still run
_starting = 0  # worker slots taken by jobs being started


def jobs_dir() -> Path:
    return Path(os.environ.get("SKILLWIRE_JOBS_DIR", ".skillwire/jobs")).resolve()


def running_jobs() -> list[subprocess.Popen[bytes]]:
    """The jobs this process started that still run (finished ones are reaped and forgotten)."""
    _started[:] = [job for job in _started if job.poll() is None]
    return list(_started)


async def run(params: dict[str, Any], ctx: SkillContext) -> None:
    global _starting
    release = params.get("release") or (params.get("text") or "").strip() or "latest"
    steps = int(params.get("steps", 5))
    if len(running_jobs()) + _starting >= MAX_WORKERS:
        raise SkillError.rejected(
            f"All {MAX_WORKERS} release workers are busy; try again when a release has finished."
        )
    job = uuid.uuid4().hex
    log = jobs_dir() / f"{job}.log"
    _starting += 1  # taken before the first await, so that concurrent runs count it
    try:
        starting = asyncio.ensure_future(asyncio.to_thread(_start_job, log, release, steps))
        try:
            process = await asyncio.shield(starting)
        except asyncio.CancelledError:  # the thread starts the job anyway: stop it once it has
            starting.add_done_callback(lambda done: done.cancelled() or done.exception() or _stop(log))
            raise
    finally:
        _starting -= 1
    try:
        await ctx.delegate(
            {"job": job, "log": str(log), "release": release, "pid": process.pid},
            f"Release {release} started as job {job}",
        )
    except BaseException:
        _stop(log)
        raise


def _start_job(log: Path, release: str, steps: int) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    process = subprocess.Popen(
        [sys.executable, str(WORKER), str(log), release, str(steps)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the job outlives the agent
    )
    _started.append(process)
    return process


def _stop(log: Path) -> None:
    """Stop the job writing ``log``: terminate it if this process started it, and leave the stop file."""
    with contextlib.suppress(OSError):
        log.with_name(log.name + ".stop").touch()
    for process in running_jobs():
        if process.args[2] == str(log):  # type: ignore[index]
            process.terminate()


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
    try:
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
    except asyncio.CancelledError:  # cancelled, out of time, or the server shuts down: the job stops too
        _stop(log)
        raise
