"""Streams progress: a WORKING note, one artifact built chunk by chunk, and a final result."""

from __future__ import annotations

import asyncio
from typing import Any

from skillwire import SkillContext

STEP_SECONDS = 0.02


async def run(params: dict[str, Any], ctx: SkillContext) -> str:
    start = int(params.get("from") or (params.get("text") or "5").strip())
    await ctx.working(f"Counting down from {start}")
    for i in range(start, 0, -1):
        await ctx.artifact(
            f"{i}...", artifact_id="countdown", name="countdown", append=i < start, last_chunk=i == 1
        )
        await asyncio.sleep(STEP_SECONDS)
    return "Liftoff!"
