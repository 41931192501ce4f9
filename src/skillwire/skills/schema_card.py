"""The skill-schemas extension: each skill's input and output JSON Schema, published on the agent card.

An A2A card lists skills without their schemas, so callers could not see what a skill takes (FastAPI
publishes ``/openapi.json``, MCP each tool's ``inputSchema``). skillwire declares one agent extension in
``capabilities.extensions``::

    {"uri": "https://skillwire.dev/extensions/skill-schemas/v1", "required": false,
     "description": "...",
     "params": {"convert": {"input": {...JSON Schema...}, "output": {...}},
                "huge": {"output": {...}, "omitted": {"input": "41230 bytes, over the ... limit"}}}}

``params`` maps a skill id to ``input`` and ``output`` (each present when the skill declares it). A skill
with neither is absent. ``AgentExtension.params`` is a ``google.protobuf.Struct`` on the wire, whose
numbers are doubles: a schema is published only if it survives that (every integer within 2**53, the
range a double holds exactly; skillwire's readers turn integral doubles back into integers). Budget: one
skill's schemas take at most ``MAX_SKILL_SCHEMA_BYTES`` (compact JSON), all of them at most
``MAX_SCHEMAS_BYTES``; a schema that does not fit, or would not survive, is left out and named under
``omitted`` with the reason (the agent still validates with it: only the card leaves it out).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import msgspec

from skillwire.protocol.models import AgentCard, AgentExtension
from skillwire.skills.registry import Skill

__all__ = [
    "MAX_SCHEMAS_BYTES",
    "MAX_SKILL_SCHEMA_BYTES",
    "SKILL_SCHEMAS_URI",
    "read_skill_schemas",
    "skill_schemas_extension",
]

SKILL_SCHEMAS_URI = "https://skillwire.dev/extensions/skill-schemas/v1"
#: The most one skill's published schemas (input and output together, compact JSON) may take.
MAX_SKILL_SCHEMA_BYTES = 32 * 1024
#: The most all the published schemas of a card may take.
MAX_SCHEMAS_BYTES = 256 * 1024
_EXACT = 2**53
_DESCRIPTION = "Input and output JSON Schemas of the skills, by skill id (skillwire)."


def _unsafe_number(value: Any) -> str | None:
    """Where ``value`` holds a number a protobuf Struct (doubles) would change, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > _EXACT:
        return f"the integer {value} is beyond 2**53, which a protobuf Struct (doubles) cannot hold exactly"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a JSON number"
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        found = _unsafe_number(item)
        if found:
            return found
    return None


class _Budget:
    def __init__(self, total: int) -> None:
        self.left = total

    def take(self, schema: Any, skill_left: int) -> tuple[Any, int, str | None]:
        """(the schema as JSON, its size, why it is left out or None)."""
        encoded = msgspec.json.encode(schema)
        size = len(encoded)
        value = msgspec.json.decode(encoded)
        reason = _unsafe_number(value)
        if reason is None and size > skill_left:
            reason = f"{size} bytes, over the {MAX_SKILL_SCHEMA_BYTES}-byte limit for one skill's schemas"
        if reason is None and size > self.left:
            reason = f"{size} bytes, over what is left of the {MAX_SCHEMAS_BYTES}-byte limit for all schemas"
        if reason is None:
            self.left -= size
        return value, size, reason


def skill_schemas_extension(skills: Iterable[Skill]) -> AgentExtension | None:
    """The extension publishing the schemas of ``skills`` (None when none of them has one)."""
    budget = _Budget(MAX_SCHEMAS_BYTES)
    params: dict[str, Any] = {}
    for skill in skills:
        entry: dict[str, Any] = {}
        omitted: dict[str, str] = {}
        skill_left = MAX_SKILL_SCHEMA_BYTES
        for key, schema in (("input", skill.input_schema), ("output", skill.output_schema)):
            if schema is None:
                continue
            value, size, reason = budget.take(schema, skill_left)
            if reason is None:
                entry[key] = value
                skill_left -= size
            else:
                omitted[key] = reason
        if omitted:
            entry["omitted"] = omitted
        if entry:
            params[skill.id] = entry
    if not params:
        return None
    return AgentExtension(uri=SKILL_SCHEMAS_URI, description=_DESCRIPTION, required=False, params=params)


def read_skill_schemas(card: AgentCard) -> dict[str, dict[str, Any]]:
    """The skill-schemas extension's ``params`` on ``card``: skill id -> {"input", "output", "omitted"}
    (empty when the card does not carry it)."""
    for extension in card.capabilities.extensions:
        if extension.uri == SKILL_SCHEMAS_URI and isinstance(extension.params, dict):
            return {k: v for k, v in extension.params.items() if isinstance(v, dict)}
    return {}
