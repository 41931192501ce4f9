"""The greet skill: send a name as text ("Ada", which is {"name": "Ada"}: see textInput in SKILL.md) or data
({"name": "Ada", "style": "formal"})."""

from __future__ import annotations

from typing import Any

from skillwire import SkillContext, SkillError

STYLES = {"casual": "Hi {name}!", "formal": "Good day, {name}. It is a pleasure to meet you."}


async def run(params: dict[str, Any], ctx: SkillContext) -> str:
    name = params["name"].strip()
    if not name:
        raise SkillError.invalid_request("Tell me whom to greet: send a name.")
    style = params.get("style", "casual")
    return STYLES[style].format(name=name)
