"""The agent the MCP tests serve (``skillwire mcp tests/mcp_agent.py``, ``agent.asgi(mcp=True)``): one skill
for each kind of tool result, progress, a question, a skill that waits until it is canceled, a read-only
one. ``secured(keys)`` is the same agent behind an API key."""

from __future__ import annotations

import asyncio
from typing import Any

from skillwire import Agent, SkillContext, SkillError
from skillwire.protocol.models import Part

SUM_INPUT = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
SUM_OUTPUT = {
    "type": "object",
    "properties": {"sum": {"type": "number"}},
    "required": ["sum"],
}
TEXT_INPUT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def build(agent: Agent) -> Agent:
    @agent.skill(tags=["math"], input_schema=SUM_INPUT, output_schema=SUM_OUTPUT, read_only=True)
    async def add(params: Any, ctx: SkillContext) -> dict[str, float]:
        """Adds two numbers."""
        return {"sum": params["a"] + params["b"]}

    @agent.skill(tags=["text"], input_schema=TEXT_INPUT, output_schema={"type": "string"})
    async def shout(params: Any, ctx: SkillContext) -> str:
        """Says the text louder."""
        return params["text"].upper()

    @agent.skill(tags=["files"], input_schema={"type": "object"})
    async def report(params: Any, ctx: SkillContext) -> None:
        """Writes a small report file."""
        part = Part(raw=b"all good\n", filename="report.txt", media_type="text/plain")
        await ctx.artifact([part], artifact_id="report", name="report")

    @agent.skill(tags=["errors"], input_schema={"type": "object"})
    async def refuse(params: Any, ctx: SkillContext) -> None:
        """Always refuses, with a reason the caller may read."""
        raise SkillError("The vault is closed on Sundays.")

    @agent.skill(tags=["progress"], input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    async def count(params: Any, ctx: SkillContext) -> str:
        """Counts down, one artifact chunk per step."""
        n = int(params.get("n", 3))
        await ctx.working(f"Counting down from {n}")
        for i in range(n, 0, -1):
            await ctx.artifact(f"{i}...", artifact_id="count", append=i < n, last_chunk=i == 1)
        return "Liftoff!"

    @agent.skill(tags=["conversation"], input_schema={"type": "object"})
    async def interview(params: Any, ctx: SkillContext) -> dict[str, str]:
        """Asks for a name."""
        name = (await ctx.ask("What is your name?")).text.strip()
        return {"name": name}

    @agent.skill(tags=["slow"], input_schema={"type": "object"})
    async def wait(params: Any, ctx: SkillContext) -> str:
        """Waits until it is canceled."""
        await ctx.working("waiting")
        await asyncio.Event().wait()
        return "never"

    return agent


def secured(keys: dict[str, str]) -> Agent:
    from skillwire.security import APIKey, Security

    return build(Agent("MCP test", "Tools for the MCP tests", security=Security(APIKey("apiKey", keys=keys))))


agent = build(Agent("MCP test", "Tools for the MCP tests"))
