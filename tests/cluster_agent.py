"""The agent the multi-process tests serve (tests/test_cluster.py), one copy per `skillwire serve` process.

Each skill says which process runs it (its pid, in a status message or the result), so a test can tell
where the work happened.

* ``hold``: works until it is canceled (or its process dies).
* ``ask``: asks a question, then completes with the answer (a multi-turn task).
* ``tick``: streams ``count`` artifact chunks, each once the file named by ``gate`` holds at least that many
  lines (the test writes a line to let one more through), then completes.
* ``again``: retryable; its first run works until its process dies, a run after that completes.
* ``work``: records that it began, streams ``count`` chunks at its own pace, completes (the chaos test).
* ``pid``: completes at once with the pid of its process.
* ``deploy``: delegates to a job that ends when the file ``done`` names exists; its follower completes then.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from skillwire import Agent, SkillContext

agent = Agent("Cluster", "Skills for the multi-process tests.")


@agent.skill(tags=["test"])
async def hold(params: Any, ctx: SkillContext) -> str:
    """Works until canceled."""
    await ctx.working(f"running in {os.getpid()}")
    await asyncio.Event().wait()
    return "never"


@agent.skill(tags=["test"])
async def ask(params: Any, ctx: SkillContext) -> str:
    """Asks for a name, then greets it."""
    answer = await ctx.ask("Your name?")
    return f"hello {answer.text} from {os.getpid()}"


@agent.skill(tags=["test"])
async def tick(params: Any, ctx: SkillContext) -> str:
    """Streams chunks as the gate file lets them through."""
    gate = Path(params["gate"])
    count = int(params["count"])
    await ctx.working(f"running in {os.getpid()}")
    for i in range(count):
        # the agent polls a tiny file (the test writes a line to let one more chunk through)
        while len(gate.read_text().splitlines()) <= i:  # noqa: ASYNC110, ASYNC240
            await asyncio.sleep(0.02)
        await ctx.artifact(f"chunk {i}", artifact_id="ticks", append=i > 0, last_chunk=i == count - 1)
    return f"ticked in {os.getpid()}"


@agent.skill(tags=["test"], retryable=True)
async def again(params: Any, ctx: SkillContext) -> str:
    """Safe to run twice: the first run waits for its process to die, a later one completes."""
    if ctx.task is None:  # the first run (a run again is given the task as stored)
        await ctx.working(f"running in {os.getpid()}")
        await asyncio.Event().wait()
    return f"done in {os.getpid()}"


@agent.skill(tags=["test"])
async def pid(params: Any, ctx: SkillContext) -> str:
    """The pid of the process that serves the request."""
    return str(os.getpid())


async def _follow(ref: Any, ctx: SkillContext) -> str:
    """Follows the job: waits until its file (``ref["done"]``) exists, then reports who followed it."""
    done = Path(ref["done"])
    while not done.exists():  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(0.02)
    return f"job followed to its end by {os.getpid()}"


@agent.skill(id="deploy", follow=_follow, tags=["test"])
async def deploy(params: Any, ctx: SkillContext) -> None:
    """Starts a job elsewhere (the test ends it by creating a file) and hands the task to its follower."""
    await ctx.delegate({"done": params["done"]}, f"job started by {os.getpid()}")


@agent.skill(tags=["test"])
async def work(params: Any, ctx: SkillContext) -> str:
    """Records that it began (its ``tag``, a line of the file ``runs`` names), then streams ``count``
    chunks a little apart, then completes: the chaos test's skill."""
    await asyncio.to_thread(_record, params["runs"], params["tag"])
    await ctx.working(f"running in {os.getpid()}")
    count = int(params["count"])
    for i in range(count):
        await asyncio.sleep(0.03)  # the agent's own pace: the test kills processes while tasks run
        await ctx.artifact(f"chunk {i}", artifact_id="work", append=i > 0, last_chunk=i == count - 1)
    return f"worked in {os.getpid()}"


def _record(path: str, tag: str) -> None:
    with open(path, "a", encoding="utf-8") as runs:
        runs.write(tag + "\n")
