"""Skills and the registry that holds them.

A :class:`Skill` is what the runtime needs to run one: its card entry, its handler, how to check its input
(a compiled JSON Schema, or a msgspec Struct conversion) and its output, and where it came from. Skills are
made by ``skill_from_manifest`` (a parsed SKILL.md plus a handler) or ``skill_from_function`` (a decorated
function, whose input schema is given or derived from the Struct its first parameter is annotated with:
one source of truth, exposed as ``skill.input_schema``).

The registry is a protocol; :class:`InMemorySkillRegistry` is the default. Duplicate ids are refused.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from skillwire.errors import SkillwireError, ValidationError
from skillwire.protocol.models import AgentSkill, SecurityRequirement

if TYPE_CHECKING:
    from skillwire.skills.context import SkillContext
    from skillwire.skills.manifest import SkillCard

__all__ = [
    "Follower",
    "Handler",
    "InMemorySkillRegistry",
    "Skill",
    "SkillRegistry",
    "skill_from_function",
    "skill_from_manifest",
]

Handler = Callable[[Any, "SkillContext"], Awaitable[Any]]
#: Follows delegated work given its reference: ``async follow(ref, ctx) -> result``.
Follower = Callable[[Any, "SkillContext"], Awaitable[Any]]
Check = Callable[[Any], Any]


def _no_check(value: Any) -> Any:
    return value


def pointer(path: str) -> str:
    """msgspec's ``$.a.b[0]`` as the JSON pointer ``/a/b/0``."""
    out = []
    for token in path.removeprefix("$").replace("[", ".").replace("]", "").split("."):
        if token:
            out.append(token.replace("~", "~0").replace("/", "~1"))
    return "".join("/" + t for t in out)


def _struct_check(struct: type[msgspec.Struct]) -> Check:
    def check(value: Any) -> Any:
        try:
            return msgspec.convert(value, struct)
        except msgspec.ValidationError as exc:
            reason, _, where = str(exc).rpartition(" - at `")
            if not _:
                reason, where = str(exc), "$"
            raise ValidationError(reason, instance_path=pointer(where.rstrip("`"))) from None

    return check


def _schema_check(schema: dict[str, Any]) -> Check:
    from skillwire.skills.schema import compile_schema

    validator = compile_schema(schema)

    def check(value: Any) -> Any:
        validator.validate(value)
        return value

    return check


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    id: str
    agent_skill: AgentSkill
    handler: Handler
    #: The input JSON Schema (the skill's descriptor), or None when any input is accepted.
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    read_only: bool = False
    #: Where the skill came from: ``code``, ``folder:<path>`` or ``plugin:<distribution>``.
    source: str = "code"
    card: SkillCard | None = None
    follow: Follower | None = None
    check_input: Check = field(default=_no_check, repr=False)
    check_output: Check = field(default=_no_check, repr=False)


def skill_from_manifest(
    card: SkillCard, handler: Handler, *, follow: Follower | None = None, source: str = "code"
) -> Skill:
    """A skill for a parsed manifest and its handler; the manifest's schemas check input and output."""
    input_validator = card.input_validator
    output_validator = card.output_validator

    def check_input(value: Any) -> Any:
        if input_validator is not None:
            input_validator.validate(value)
        return value

    def check_output(value: Any) -> Any:
        if output_validator is not None:
            output_validator.validate(value)
        return value

    return Skill(
        id=card.id,
        agent_skill=card.to_agent_skill(),
        handler=handler,
        input_schema=card.input_schema,
        output_schema=card.output_schema,
        read_only=card.read_only,
        source=source,
        card=card,
        follow=follow,
        check_input=check_input,
        check_output=check_output,
    )


def _first_param_annotation(fn: Callable[..., Any]) -> Any:
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise SkillwireError(f"skill handler {fn.__qualname__} must take (params, ctx)")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: treat as untyped
        return None
    return hints.get(params[0].name)


def skill_from_function(
    handler: Handler,
    *,
    id: str,
    name: str | None = None,
    description: str | None = None,
    tags: list[str] | None = None,
    examples: list[str] | None = None,
    input_modes: list[str] | None = None,
    output_modes: list[str] | None = None,
    security_requirements: list[SecurityRequirement] | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    read_only: bool = False,
    follow: Follower | None = None,
) -> Skill:
    """A programmatic skill. Without ``input_schema``, a msgspec Struct annotation on the handler's first
    parameter is the schema: the handler then receives an instance of it, and ``skill.input_schema`` is
    the JSON Schema msgspec derives from it."""
    if not inspect.iscoroutinefunction(handler):
        raise SkillwireError(f"skill handler {getattr(handler, '__qualname__', handler)!r} must be async def")
    check_input: Check = _no_check
    annotation = _first_param_annotation(handler)
    if input_schema is not None:
        check_input = _schema_check(input_schema)
    elif isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        input_schema = msgspec.json.schema(annotation)
        check_input = _struct_check(annotation)
    check_output = _schema_check(output_schema) if output_schema is not None else _no_check
    doc = inspect.getdoc(handler) or ""
    agent_skill = AgentSkill(
        id=id,
        name=name or id.replace("-", " ").replace("_", " ").title(),
        description=description or doc.split("\n\n")[0] or id,
        tags=list(tags or []),
        examples=list(examples or []),
        input_modes=list(input_modes or []),
        output_modes=list(output_modes or []),
        security_requirements=list(security_requirements or []),
    )
    return Skill(
        id=id,
        agent_skill=agent_skill,
        handler=handler,
        input_schema=input_schema,
        output_schema=output_schema,
        read_only=read_only,
        follow=follow,
        check_input=check_input,
        check_output=check_output,
    )


@runtime_checkable
class SkillRegistry(Protocol):
    def register(self, skill: Skill) -> Skill: ...

    def get(self, skill_id: str) -> Skill | None: ...

    def __iter__(self) -> Iterator[Skill]: ...

    def __len__(self) -> int: ...


class InMemorySkillRegistry:
    def __init__(self) -> None:
        self._skills: dict[str, Skill] = {}

    def register(self, skill: Skill) -> Skill:
        if skill.id in self._skills:
            raise SkillwireError(
                f"a skill with id {skill.id!r} is already registered (from {self._skills[skill.id].source})"
            )
        self._skills[skill.id] = skill
        return skill

    def register_manifest(
        self, card: SkillCard, handler: Handler, *, follow: Follower | None = None, source: str = "code"
    ) -> Skill:
        return self.register(skill_from_manifest(card, handler, follow=follow, source=source))

    def get(self, skill_id: str) -> Skill | None:
        return self._skills.get(skill_id)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)
