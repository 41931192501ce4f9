"""Skills and the registry that holds them.

A :class:`Skill` is what the runtime needs to run one: its card entry, its handler, how to check its input
(a compiled JSON Schema, or a msgspec Struct conversion) and its output, and where it came from. Skills are
made by ``skill_from_manifest`` (a parsed SKILL.md plus a handler) or ``skill_from_function`` (a decorated
function, whose input schema is given, or derived from the Struct its ``params`` is annotated with or from
its typed parameters: one source of truth, exposed as ``skill.input_schema``). Both hold the skill to the
same rules (a description, at least one tag); a ``def`` handler of either runs in a worker thread.

``skill.validate_input(value, max_steps=...)`` is the check the executor runs: a skill with a JSON Schema
validates through its compiled :class:`~skillwire.skills.schema.Validator` with the executor's step budget;
``check_input`` is the same check with the validator's own default budget (or the Struct conversion).
``timeout_seconds`` (a manifest's ``executionHints.timeoutSeconds``, or ``timeout_seconds=`` for a code
skill) is how long one run of the skill may take; the runtime enforces it. ``text_input`` is the input
property a text message fills (a manifest's ``textInput``, ``text_input=`` for a code skill, else the one
required string property of an input schema that requires nothing else; None: text is ``{"text": ...}``).

The registry is a protocol; :class:`InMemorySkillRegistry` is the default. Duplicate ids are refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack, runtime_checkable

from skillwire.errors import SkillwireError
from skillwire.protocol.models import AgentSkill, SecurityRequirement
from skillwire.security.policy import requirement_sets
from skillwire.skills.annotations import dump_result

if TYPE_CHECKING:
    from skillwire.skills.context import SkillContext
    from skillwire.skills.manifest import SkillCard
    from skillwire.skills.schema import Validator

__all__ = [
    "CodeSkillsFound",
    "Follower",
    "Handler",
    "InMemorySkillRegistry",
    "Skill",
    "SkillDetails",
    "SkillRegistry",
    "collecting_code_skills",
    "implied_text_input",
    "report_code_skill",
    "skill_from_function",
    "skill_from_manifest",
]

Handler = Callable[[Any, "SkillContext"], Awaitable[Any]]
#: Follows delegated work given its reference: ``async follow(ref, ctx) -> result``.
Follower = Callable[[Any, "SkillContext"], Awaitable[Any]]
Check = Callable[[Any], Any]


def _no_check(value: Any) -> Any:
    return value


def _compiled(schema: dict[str, Any], skill_id: str, what: str) -> Validator:
    from skillwire.errors import SchemaError
    from skillwire.skills.schema import compile_schema

    try:
        return compile_schema(schema)
    except SchemaError as exc:
        raise SkillwireError(f"skill {skill_id!r}: its {what} schema is not valid: {exc}") from None


def _positive(value: float | None, what: str) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
        raise SkillwireError(f"{what} must be a positive number of seconds, got {value!r}")
    return None if value is None else float(value)


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
    #: After the input schema: the valid JSON input as the handler's Python value (a code skill's types).
    check_input: Check = field(default=_no_check, repr=False)
    #: Before the output schema: a result as JSON (a code skill's return type says how).
    check_output: Check = field(default=dump_result, repr=False)
    #: The compiled input and output schemas, when the skill has them. Given a schema without its
    #: validator, the skill compiles it: a skill always enforces the schemas it publishes.
    input_validator: Validator | None = field(default=None, repr=False)
    output_validator: Validator | None = field(default=None, repr=False)
    #: Seconds one run may take (``executionHints.timeoutSeconds``); None: the agent-wide default applies.
    timeout_seconds: float | None = None
    #: Whether a run may be started again from the task's first message when the process running it died
    #: (``executionHints.retryable``): the handler must be safe to run twice.
    retryable: bool = False
    #: The input property a text message fills: ``{text_input: <text>}``; None: ``{"text": <text>}``.
    text_input: str | None = None

    def __post_init__(self) -> None:
        if self.agent_skill.id != self.id:
            raise SkillwireError(
                f"skill {self.id!r}: its card entry has the id {self.agent_skill.id!r}; requests are routed by"
                " the skill's id, so the card must list that one"
            )
        if self.input_schema is not None and self.input_validator is None:
            object.__setattr__(self, "input_validator", _compiled(self.input_schema, self.id, "input"))
        if self.output_schema is not None and self.output_validator is None:
            object.__setattr__(self, "output_validator", _compiled(self.output_schema, self.id, "output"))

    @property
    def security_sets(self) -> Any:
        """The skill's securityRequirements as an OR of AND-sets (empty: the agent's alone)."""
        reqs = self.agent_skill.security_requirements
        return requirement_sets(reqs) if reqs else ()

    def validate_input(self, value: Any, *, max_steps: int | None = None) -> Any:
        """The handler's params for ``value`` (raises ValidationError): checked against the input schema
        (``max_steps`` is its budget; an integral number where it says integer becomes an ``int``), then
        converted to the handler's types."""
        if self.input_validator is not None:
            value = self.input_validator.convert(value, max_steps=max_steps)
        return self.check_input(value)

    def output_json(self, value: Any) -> Any:
        """A result as JSON, as the skill's return type (or, without one, the value's own type: a Struct, a
        dataclass, a pydantic model, an Enum) says; a value that cannot be converted is returned as it is,
        for the caller to say where it stops being JSON."""
        try:
            return self.check_output(value)
        except Exception:  # not of the declared type: json_problem names what is wrong
            return value

    def validate_output(self, value: Any, *, max_steps: int | None = None) -> Any:
        """Check a result's JSON against the output schema (raises ValidationError)."""
        if self.output_validator is not None:
            self.output_validator.validate(value, max_steps=max_steps)
        return value


# Keywords that could require more than the top level's ``required`` says: with any of them, nothing is implied.
_CONDITIONAL = ("allOf", "anyOf", "oneOf", "not", "if", "dependentRequired", "minProperties")


def implied_text_input(schema: dict[str, Any] | None) -> str | None:
    """The property a text message fills when the skill names none: the only one ``required`` lists, when
    it is a string and nothing else can be required. ``{"text": ...}`` always fails such a schema, so the
    rule only ever turns a refusal into a call. A top-level ``$ref`` to ``$defs`` (a Struct's) is followed."""
    root: Any = schema
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(schema, dict) and isinstance(ref, str) and ref.startswith("#/$defs/"):
        root = (schema.get("$defs") or {}).get(ref.removeprefix("#/$defs/"))
    if not isinstance(root, dict) or root.get("type") != "object" or any(k in root for k in _CONDITIONAL):
        return None
    required = root.get("required")
    if not isinstance(required, list) or len(required) != 1 or not isinstance(required[0], str):
        return None
    prop = (root.get("properties") or {}).get(required[0])
    return required[0] if isinstance(prop, dict) and prop.get("type") == "string" else None


def skill_from_manifest(
    card: SkillCard, handler: Callable[..., Any], *, follow: Follower | None = None, source: str = "code"
) -> Skill:
    """A skill for a parsed manifest and its handler (``async def``, or ``def``: run in a worker thread); the
    manifest's schemas check input and output."""
    from skillwire.skills.signature import in_thread

    return Skill(
        id=card.id,
        agent_skill=card.to_agent_skill(),
        handler=handler if inspect.iscoroutinefunction(handler) else in_thread(handler),
        input_schema=card.input_schema,
        output_schema=card.output_schema,
        read_only=card.read_only,
        source=source,
        card=card,
        follow=follow,
        input_validator=card.input_validator,
        output_validator=card.output_validator,
        timeout_seconds=card.execution_hints.timeout_seconds,
        retryable=bool(card.execution_hints.retryable),
        text_input=card.text_input or implied_text_input(card.input_schema),
    )


def _described(
    skill_id: str, handler: Any, name: str | None, description: str | None, tags: list[str]
) -> None:
    """A code skill is held to a manifest's rules: an id, a name, a description and at least one tag."""
    from skillwire.skills.manifest import _ID, MAX_ID_LENGTH

    if len(skill_id) > MAX_ID_LENGTH or not _ID.fullmatch(skill_id):
        raise SkillwireError(
            f"skill {skill_id!r}: the id must match [A-Za-z0-9][A-Za-z0-9._-]* and have at most"
            f" {MAX_ID_LENGTH} characters, as a manifest's"
        )
    missing = []
    if name is not None and not (isinstance(name, str) and name.strip()):
        missing.append("an empty name (name= must be a non-empty string)")
    if not (isinstance(description, str) and description.strip()):
        fn = getattr(handler, "__qualname__", "the handler")
        missing.append(f"no description (pass description= or give {fn} a docstring)")
    if not tags or not all(isinstance(tag, str) and tag.strip() for tag in tags):
        missing.append(f"no tags (pass tags=[...] with at least one non-empty tag; got {tags!r})")
    if missing:
        raise SkillwireError(f"skill {skill_id!r} has {' and '.join(missing)}; a manifest requires them too")


class SkillDetails(TypedDict, total=False):
    """The keyword options of :func:`skill_from_function` (all optional), as its docstring says."""

    name: str | None
    description: str | None
    tags: Sequence[str] | None
    examples: Sequence[str] | None
    input_modes: Sequence[str] | None
    output_modes: Sequence[str] | None
    security_requirements: Sequence[SecurityRequirement] | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    read_only: bool
    follow: Follower | None
    timeout_seconds: float | None
    text_input: str | None
    retryable: bool


def skill_from_function(handler: Callable[..., Any], *, id: str, **details: Unpack[SkillDetails]) -> Skill:
    """A programmatic skill (see :mod:`skillwire.skills.signature` for the handler's two forms).

    ``def`` handlers run in a worker thread, ``async def`` ones on the event loop. The input schema is
    ``input_schema=``, or the annotation of the ``params`` parameter (a Struct or a pydantic model, which
    the handler then receives), or the typed parameters (``def convert(amount: float, currency: str =
    "EUR")``, called with keyword arguments); the output schema is ``output_schema=`` or the return
    annotation (:mod:`skillwire.skills.annotations` makes both). Like a manifest, a skill needs a
    description (``description=`` or the docstring's first paragraph) and at least one tag; a contradiction
    (``input_schema=`` with a typed input, ``output_schema=`` with a typed return) or an annotation that has
    no JSON Schema is refused. ``input_modes`` and ``output_modes`` are the media types the skill takes and
    gives (its card's inputModes and outputModes).
    ``timeout_seconds`` is the manifest's ``executionHints.timeoutSeconds``: how long one run may take;
    ``retryable`` its ``executionHints.retryable`` (run again when the process running it died).
    ``text_input`` is the input property a text message fills (the manifest's ``textInput``; default: see
    :func:`implied_text_input`)."""
    from skillwire.skills.signature import read_signature

    unknown = sorted(details.keys() - SkillDetails.__optional_keys__)
    if unknown:  # what a signature of named parameters would refuse
        raise TypeError(f"skill_from_function() got an unexpected keyword argument {unknown[0]!r}")
    doc = inspect.getdoc(handler) or ""
    name = details.get("name")
    description = details.get("description") or doc.split("\n\n")[0].strip() or None
    tags = list(details.get("tags") or [])
    input_modes = list(details.get("input_modes") or [])
    output_modes = list(details.get("output_modes") or [])
    _described(id, handler, name, description, tags)
    _media_types(id, "input_modes", input_modes)
    _media_types(id, "output_modes", output_modes)
    input_schema, output_schema = details.get("input_schema"), details.get("output_schema")
    call = read_signature(handler, skill_id=id, input_schema=input_schema, output_schema=output_schema)
    if call.input is not None:
        input_schema = call.input.schema
    if call.output is not None:
        output_schema = call.output.schema
    agent_skill = AgentSkill(
        id=id,
        name=name or id.replace("-", " ").replace("_", " ").title(),
        description=description or id,
        tags=tags,
        examples=list(details.get("examples") or []),
        input_modes=input_modes,
        output_modes=output_modes,
        security_requirements=list(details.get("security_requirements") or []),
    )
    return Skill(
        id=id,
        agent_skill=agent_skill,
        handler=call.handler,
        input_schema=input_schema,
        output_schema=output_schema,
        read_only=details.get("read_only", False),
        follow=details.get("follow"),
        check_input=call.input.load if call.input is not None else _no_check,
        check_output=call.output.dump if call.output is not None else dump_result,
        timeout_seconds=_positive(details.get("timeout_seconds"), "timeout_seconds"),
        retryable=bool(details.get("retryable", False)),
        text_input=_text_input(id, details.get("text_input"), input_schema),
    )


def _media_types(skill_id: str, what: str, modes: list[str] | None) -> None:
    """Modes are media types (``type/subtype``, as a manifest's), or the wildcards ``type/*`` and ``*/*``
    that matching understands (:mod:`skillwire.protocol.media`)."""
    from skillwire.skills.manifest import _MEDIA_TYPE

    for mode in modes or []:
        wild = mode.replace("*/*", "x/x", 1) if isinstance(mode, str) and mode.startswith("*/*") else mode
        if isinstance(wild, str) and "/*" in wild:
            wild = wild.replace("/*", "/x", 1)
        if not isinstance(wild, str) or not _MEDIA_TYPE.fullmatch(wild):
            raise SkillwireError(f"skill {skill_id!r}: {what} holds {mode!r}, which is not a media type")


def _text_input(skill_id: str, declared: str | None, schema: dict[str, Any] | None) -> str | None:
    """The property a text message fills: the declared one, which must be a property of the input schema's
    top level (as a manifest's ``textInput`` must), else the implied one."""
    if declared is None:
        return implied_text_input(schema)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and declared not in properties:
        raise SkillwireError(
            f"skill {skill_id!r}: text_input={declared!r} is not a property of its input schema"
            f" (properties: {', '.join(properties)}); a manifest's textInput is refused the same way"
        )
    return declared


#: Where a code skill is defined: (file, line of its function), or ("", None) when unknown.
Location = tuple[str, int | None]


@dataclass(slots=True)
class CodeSkillsFound:
    """What importing a code agent made (``collecting_code_skills``): the skills with where each is defined,
    and the problems of those that could not be made, each with where it is."""

    skills: list[tuple[Skill, Location]] = field(default_factory=list)
    problems: list[tuple[str, Location]] = field(default_factory=list)


# Set while ``skillwire skills check`` imports a code agent, so that one import reports every skill.
_found: ContextVar[CodeSkillsFound | None] = ContextVar("skillwire_code_skills", default=None)


@contextmanager
def collecting_code_skills() -> Iterator[CodeSkillsFound]:
    """While active, ``@agent.skill`` records the skills it makes and the problems it meets (rather than
    raising them): for checking every code skill of a module in one import."""
    found = CodeSkillsFound()
    token = _found.set(found)
    try:
        yield found
    finally:
        _found.reset(token)


def report_code_skill(skill: Skill | None, handler: Any, error: SkillwireError | None = None) -> bool:
    """Record a skill made, or the error of one that could not be, if a check collects them (True then)."""
    found = _found.get()
    if found is None:
        return False
    code = getattr(handler, "__code__", None)
    where: Location = (code.co_filename, code.co_firstlineno) if code is not None else ("", None)
    if skill is not None:
        found.skills.append((skill, where))
    if error is not None:
        found.problems.append((str(error), where))
    return True


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
