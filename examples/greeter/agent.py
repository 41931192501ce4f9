"""The greeter: a one-skill agent that says hello, formally or casually.

Send it a name ("Ada") or a data part such as {"name": "Ada", "style": "formal"}.
"""

from __future__ import annotations

from skillwire import Agent, AgentSkill, RequestContext, TaskEvents

STYLES = {"casual": "Hi {name}!", "formal": "Good day, {name}. It is a pleasure to meet you."}


def _request(context: RequestContext) -> tuple[str, str]:
    for part in context.message.parts:
        if isinstance(part.data, dict):
            name = str(part.data.get("name") or "there")
            style = str(part.data.get("style") or "casual")
            return name, style
    text = context.text.strip()
    return (text or "there"), "casual"


async def greet(context: RequestContext, events: TaskEvents) -> None:
    name, style = _request(context)
    template = STYLES.get(style)
    if template is None:
        await events.reject(f"Unknown style {style!r}; choose one of: {', '.join(sorted(STYLES))}")
        return
    await events.working()
    await events.artifact(template.format(name=name), name="greeting")


agent = Agent(
    "Greeter",
    "Greets people by name, formally or casually.",
    executor=greet,
    skills=[
        AgentSkill(
            id="greet",
            name="Greet",
            description="Greets a person by name in a casual or formal style.",
            tags=["greeting", "example"],
            examples=["Ada", '{"name": "Ada", "style": "formal"}'],
        )
    ],
    default_input_modes=["text/plain", "application/json"],
)
