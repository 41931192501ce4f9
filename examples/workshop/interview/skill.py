"""Multi-turn: each ctx.ask puts the task in INPUT_REQUIRED; the client answers with the task's id.

The handler is replayed from the start on every turn (and after a server restart), so it must reach the
same questions in the same order for the same answers.
"""

from __future__ import annotations

from typing import Any

from skillwire import SkillContext, SkillError


async def run(params: dict[str, Any], ctx: SkillContext) -> dict[str, str]:
    name = (await ctx.ask("What is your name?")).text.strip()
    if not name:
        raise SkillError.invalid_request("A name is needed to carry on.")
    colour = (await ctx.ask(f"Nice to meet you, {name}. What is your favourite colour?")).text.strip()
    await ctx.working("Writing it down")
    return {"name": name, "colour": colour}
