"""The echo agent, skillwire's benchmark agent.

* ``stream N``: streams N chunks of one artifact (``append`` after the first, ``lastChunk`` on the last),
  then completes.
* anything else: completes at once with the text echoed back as an artifact.
"""

from __future__ import annotations

from skillwire import Agent, RequestContext, TaskEvents
from skillwire.types import AgentSkill

MAX_CHUNKS = 100_000


async def echo(context: RequestContext, events: TaskEvents) -> None:
    text = context.text
    words = text.split()
    if len(words) == 2 and words[0] == "stream" and words[1].isdigit():
        count = min(int(words[1]), MAX_CHUNKS)
        await events.working()
        artifact_id = "stream"
        for i in range(count):
            await events.artifact(
                f"chunk {i}",
                artifact_id=artifact_id,
                name="stream",
                append=i > 0,
                last_chunk=i == count - 1,
            )
        return
    await events.artifact(text, name="echo")


agent = Agent(
    "Echo",
    "Echoes text back; `stream N` streams N artifact chunks.",
    executor=echo,
    skills=[
        AgentSkill(
            id="echo",
            name="Echo",
            description="Echoes the text back, or streams N chunks for `stream N`.",
            tags=["echo", "benchmark"],
            examples=["hello", "stream 10"],
        )
    ],
)
