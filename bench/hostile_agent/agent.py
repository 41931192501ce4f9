"""The agent that bench/stall.py and bench/scale.py serve: one skill per costly request they measure.

Every skill is chosen with ``message.metadata.skillId`` and takes a text part (``{"text": ...}``):

* ``regex``: input schema ``text`` with ``pattern: "^(a+)+$"`` (catastrophic backtracking on a backtracking
  engine: ``"a" * 24 + "!"``).
* ``fanout``: input schema ``text`` through a chain of ``FANOUT_DEPTH`` ``anyOf`` nodes whose two branches
  ``$ref`` the next node; a string longer than 3 characters fails every leaf, so a validator without
  memoization or a step budget visits 2**FANOUT_DEPTH leaves (about 1 s at depth 20 on the 2026-12-01 code).
* ``echo``: answers with its text (any metadata is ignored).
* ``blob N``: completes with one text artifact of N bytes (``blob 3500000``: the ListTasks benchmark).
* ``stream COUNT SIZE``: goes WORKING and emits one artifact in COUNT chunks of SIZE bytes (``append`` after
  the first), then completes (the slow SSE reader benchmark).
* ``turns``: asks for input after every message until one says ``done`` (the multi-turn benchmark).
* ``hang``: goes WORKING and never finishes (the restart benchmark fills the store with such tasks).

Only the public API is used (``skillwire.Agent``, ``@agent.skill``, ``ctx.ask``, ``ctx.artifact``), so the
benchmarks run unchanged against older and newer checkouts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from skillwire import Agent, SkillContext

REGEX_PATTERN = "^(a+)+$"
FANOUT_DEPTH = 20
MAX_BLOB_BYTES = 64 * 1024 * 1024


def fanout_schema(depth: int) -> dict[str, Any]:
    """``text`` through ``depth`` nodes, each ``anyOf`` two ``$ref`` to the next one; the leaf allows at most
    three characters."""
    defs: dict[str, Any] = {
        f"n{i}": {"anyOf": [{"$ref": f"#/$defs/n{i + 1}"}, {"$ref": f"#/$defs/n{i + 1}"}]}
        for i in range(depth)
    }
    defs[f"n{depth}"] = {"type": "string", "maxLength": 3}
    return {
        "type": "object",
        "properties": {"text": {"$ref": "#/$defs/n0"}},
        "required": ["text"],
        "$defs": defs,
    }


def _words(params: Any) -> list[str]:
    text = params.get("text", "") if isinstance(params, dict) else ""
    return str(text).split()


def _size(word: str, limit: int = MAX_BLOB_BYTES) -> int:
    return max(0, min(int(word), limit)) if word.isdigit() else 0


agent = Agent("Hostile bench", "Skills that each cost the server one thing the benchmarks measure.")


@agent.skill(
    tags=["bench"],
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string", "pattern": REGEX_PATTERN}},
        "required": ["text"],
    },
)
async def regex(params: Any, ctx: SkillContext) -> str:
    """Accepts a text matching ^(a+)+$."""
    return "matched"


@agent.skill(tags=["bench"], input_schema=fanout_schema(FANOUT_DEPTH))
async def fanout(params: Any, ctx: SkillContext) -> str:
    """Accepts a text of at most 3 characters, through an exponential anyOf/$ref chain."""
    return "valid"


@agent.skill(tags=["bench"])
async def echo(params: Any, ctx: SkillContext) -> Any:
    """Answers with the text it was sent."""
    return params.get("text", "") if isinstance(params, dict) else params


@agent.skill(tags=["bench"])
async def blob(params: Any, ctx: SkillContext) -> str:
    """`blob N`: one text artifact of N bytes."""
    words = _words(params)
    return "x" * _size(words[-1] if words else "0")


@agent.skill(tags=["bench"])
async def stream(params: Any, ctx: SkillContext) -> None:
    """`stream COUNT SIZE`: one artifact in COUNT chunks of SIZE bytes."""
    words = [*_words(params), "0", "0"]
    count, size = _size(words[0], 100_000), _size(words[1])
    await ctx.working()
    chunk = "y" * size
    for i in range(count):
        await ctx.artifact(
            chunk, artifact_id="stream", name="stream", append=i > 0, last_chunk=i == count - 1
        )


@agent.skill(tags=["bench"])
async def turns(params: Any, ctx: SkillContext) -> str:
    """Asks for more after every message, until one says `done`."""
    answered = 0
    while (await ctx.ask(f"turn {answered + 1} received; send more, or `done`")).text.strip() != "done":
        answered += 1
    return f"{answered + 1} turns"


@agent.skill(tags=["bench"])
async def hang(params: Any, ctx: SkillContext) -> None:
    """Goes WORKING and never finishes."""
    await ctx.working("working forever")
    await asyncio.Event().wait()
