"""examples/echo as a skill: the same behaviour through the skill layer (routing, schema, result)."""

from __future__ import annotations

from typing import Any

from skillwire import SkillContext

MAX_CHUNKS = 100_000


async def run(params: dict[str, Any], ctx: SkillContext) -> str | None:
    text: str = params["text"]
    words = text.split()
    if len(words) == 2 and words[0] == "stream" and words[1].isdigit():
        count = min(int(words[1]), MAX_CHUNKS)
        await ctx.working()
        for i in range(count):
            await ctx.artifact(
                f"chunk {i}", artifact_id="stream", name="stream", append=i > 0, last_chunk=i == count - 1
            )
        return None
    return text
