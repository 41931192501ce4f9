"""The agent the console's browser tests drive (tests/test_console_browser.py).

* ``greet``: the greeter's schema (a required name, an enum style with a default): filled in by the form.
* ``order``: nested object, array, integer with a default, boolean, date and email formats: the form's kinds.
* ``stream``: ``N`` (text) streams N chunks of one artifact, then completes.
* ``drip``: streams 10 chunks; after chunk 4 it waits until the test sets ``gate`` (the reconnect test cuts
  the connection there).
* ``interview``: asks for a name (input-required), then completes with a greeting.
* ``hold``: works until it is canceled.
* ``hostile``: answers with markup and script, in a message, an artifact's name and its text.
* ``picture``: a PNG file artifact (the console previews images) and a text file (downloaded).
"""

from __future__ import annotations

import asyncio
import base64
import enum
import threading
from typing import Annotated, Any, Literal

import annotated_types as at
import msgspec
import pydantic

from skillwire import Agent, SkillContext
from skillwire.types import Part

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold?</b>'
#: A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def console_agent(gate: threading.Event) -> Agent:
    agent = Agent(
        "Console test agent",
        f"Skills for the console's browser tests. {HOSTILE}",
    )

    @agent.skill(
        tags=["greeting"],
        examples=["Ada", '{"name": "Grace", "style": "formal"}'],
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 100, "description": "Who to greet"},
                "style": {"enum": ["casual", "formal"], "default": "casual"},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        text_input="name",
    )
    async def greet(params: dict[str, Any], ctx: SkillContext) -> str:
        """Greets a person by name, in a casual or a formal style."""
        if params.get("style") == "formal":
            return f"Good day, {params['name']}."
        return f"Hello, {params['name']}!"

    @agent.skill(
        tags=["forms"],
        input_schema={
            "type": "object",
            "properties": {
                "customer": {
                    "type": "object",
                    "properties": {
                        "email": {"type": "string", "format": "email"},
                        "address": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                            "required": ["city"],
                        },
                    },
                    "required": ["email"],
                },
                "items": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "quantity": {"type": "integer", "minimum": 1, "default": 1},
                "gift": {"type": "boolean"},
                "deliver_on": {"type": "string", "format": "date"},
            },
            "required": ["customer", "items"],
            "additionalProperties": False,
        },
    )
    async def order(params: dict[str, Any], ctx: SkillContext) -> dict[str, Any]:
        """Places an order (it echoes the input back, as the server received it)."""
        return {"received": params}

    @agent.skill(
        tags=["streaming"],
        examples=["50"],
        text_input="count",
        input_schema={
            "type": "object",
            "properties": {"count": {"type": "string", "pattern": "^[0-9]{1,4}$"}},
            "required": ["count"],
        },
    )
    async def stream(params: dict[str, Any], ctx: SkillContext) -> str:
        """Streams N chunks of one artifact."""
        count = int(params["count"])
        await ctx.working(f"Streaming {count} chunks")
        for i in range(count):
            await ctx.artifact(
                f"chunk {i};", artifact_id="s", name="stream", append=i > 0, last_chunk=i == count - 1
            )
        return f"streamed {count}"

    @agent.skill(tags=["streaming"])
    async def drip(params: Any, ctx: SkillContext) -> str:
        """Streams 10 chunks, pausing after the fifth until the test lets it go on."""
        await ctx.working("dripping")
        for i in range(10):
            await ctx.artifact(f"drop {i};", artifact_id="d", name="drops", append=i > 0, last_chunk=i == 9)
            if i == 4:
                await asyncio.to_thread(gate.wait, 30)
        return "dripped"

    @agent.skill(tags=["multi-turn"])
    async def interview(params: Any, ctx: SkillContext) -> str:
        """Asks for a name, then greets it."""
        answer = await ctx.ask("What is your name?")
        return f"Thanks, {answer.text.strip()}."

    @agent.skill(tags=["long"])
    async def hold(params: Any, ctx: SkillContext) -> str:
        """Works until it is canceled."""
        await ctx.working("holding")
        await asyncio.Event().wait()
        return "never"

    @agent.skill(tags=["hostile"])
    async def hostile(params: Any, ctx: SkillContext) -> str:
        """Answers with markup and script."""
        await ctx.working(HOSTILE)
        await ctx.artifact(HOSTILE, name=HOSTILE)
        return HOSTILE

    @agent.skill(tags=["files"], output_modes=["image/png", "text/plain"])  # what it makes, on its card
    async def picture(params: Any, ctx: SkillContext) -> str:
        """A PNG and a text file."""
        await ctx.artifact([Part(raw=PNG, media_type="image/png", filename="red.png")], name="picture")
        await ctx.artifact(
            [Part(raw=b"plain words\n", media_type="text/plain", filename="notes.txt")], name="notes"
        )
        return "two files"

    return agent


# -- typed skills: forms drawn from the schemas their Python types make -------------------------------------


class Address(msgspec.Struct):
    street: str
    city: str
    country: Annotated[str, msgspec.Meta(min_length=2, max_length=2)] = "NO"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Line(msgspec.Struct):
    item: str
    quantity: Annotated[int, msgspec.Meta(ge=1)] = 1
    color: Color = Color.RED


class Shipment(msgspec.Struct):
    to: Address
    lines: list[Line]
    express: bool = False
    notes: str | None = None


class Cat(pydantic.BaseModel):
    kind: Literal["cat"] = "cat"
    indoor: bool = True


class Dog(pydantic.BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = False


class Owner(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=1)
    age: int = pydantic.Field(ge=0, le=150)
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]
    nickname: str | None = None


def typed_console_agent() -> Agent:
    """Three typed skills: ``plan`` (decorator parameters: constraints, a Literal, an optional number, a
    list and a map), ``ship`` (a msgspec Struct with nested Structs, an array of them and an Enum) and
    ``adopt`` (a pydantic model with a discriminated union)."""
    agent = Agent("Typed console agent", "Typed skills, drawn as forms.")

    @agent.skill(tags=["typed"])
    def plan(
        city: str,
        days: Annotated[int, at.Ge(1), at.Le(14)] = 3,
        mode: Literal["walk", "bike"] = "walk",
        budget: float | None = None,
        stops: list[str] = [],  # noqa: B006 - a default msgspec copies
        scores: dict[str, int] = {},  # noqa: B006
    ) -> dict[str, Any]:
        """Plans a trip."""
        return {"city": city, "days": days, "mode": mode, "budget": budget, "stops": stops, "scores": scores}

    @agent.skill(tags=["typed"])
    def ship(params: Shipment) -> Shipment:
        """Ships an order."""
        return params

    @agent.skill(tags=["typed"])
    def adopt(params: Owner) -> Owner:
        """Registers a pet's owner."""
        return params

    return agent
