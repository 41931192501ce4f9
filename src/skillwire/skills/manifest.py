"""SKILL.md manifests: a YAML frontmatter that describes a skill, and a markdown body that is its prompt.

::

    ---
    id: summarize
    name: Summarize
    description: Summarizes a document in a few sentences.
    tags: [text, summary]
    inputSchema:
      type: object
      properties: {text: {type: string}}
      required: [text]
    executionHints: {maxTokens: 512, temperature: 0.2}
    ---
    Summarize this text in {{ sentences }} sentences: ...

The frontmatter keys, all lowerCamelCase like the A2A wire format::

    discovery   id*  name*  description*  tags*  examples  inputModes  outputModes  securityRequirements
                readOnly                                                     (* required; the rest optional)
    execution   inputSchema  outputSchema (JSON Schema 2020-12)  textInput  executionHints
    opaque      providerConfig (a mapping kept as written; without skill.py, skills/model.py reads it)

A manifest is untrusted input. It is read by a loader that builds JSON values from YAML events and never
constructs objects (see ``_yaml``), and every check is made when it is parsed: an unknown or snake_case key, a
wrong type, a schema that does not compile, a template with a syntax error. Each failure is one
:class:`~skillwire.errors.ManifestError` with the key path, the line in the file and a precise reason.

A file is read by :func:`read_manifest_text`: its size is checked before it is read (``MAX_FILE_BYTES`` for a
SKILL.md, no more than that many bytes are ever read), and bytes that are not UTF-8 are a ManifestError with
the line and column, never a decoding traceback. :func:`lint_manifest` parses a manifest and also returns
its warnings: schema constructs that are exponential for validators without memoization
(``schema_cost``), which ``skillwire skills check`` prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from skillwire.errors import ManifestError, RenderError, SchemaError
from skillwire.protocol.models import AgentSkill, SecurityRequirement, StringList
from skillwire.skills import _yaml
from skillwire.skills._yaml import KeyPath, LineMap, format_path, type_name
from skillwire.skills.schema import Validator, compile_schema
from skillwire.skills.schema_cost import cost_warnings
from skillwire.skills.template import Template, compile_template

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_ID_LENGTH",
    "ExecutionHints",
    "ManifestWarning",
    "SkillCard",
    "lint_manifest",
    "read_manifest_text",
]

#: The largest SKILL.md accepted, in UTF-8 bytes (the frontmatter has its own, smaller limit).
MAX_FILE_BYTES = 1024 * 1024
MAX_ID_LENGTH = 64

REQUIRED_KEYS = ("id", "name", "description", "tags")
OPTIONAL_KEYS = (
    "examples",
    "inputModes",
    "outputModes",
    "securityRequirements",
    "readOnly",
    "inputSchema",
    "outputSchema",
    "textInput",
    "executionHints",
    "providerConfig",
)
KNOWN_KEYS = REQUIRED_KEYS + OPTIONAL_KEYS
HINT_KEYS = ("maxTokens", "temperature", "topP", "timeoutSeconds", "retryable")

_DELIMITER = "---"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
# RFC 6838 restricted-name for type and subtype; optional RFC 9110 parameters (token=token or "quoted").
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_MEDIA_TYPE = re.compile(rf'{_NAME}/{_NAME}(\s*;\s*{_TOKEN}=({_TOKEN}|"([^"\\]|\\.)*"))*', re.ASCII)
_SURROGATE = re.compile("[\ud800-\udfff]")
_LOCATION = re.compile(r"(\d+):(\d+)")


class ExecutionHints(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """How a skill would like to be run; every hint is optional (``None`` when not given)."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    timeout_seconds: float | None = None
    retryable: bool | None = None


class SkillCard:
    """One skill, as described by a SKILL.md file: build it with :meth:`SkillCard.parse`, nothing else.

    >>> card = SkillCard.parse(
    ...     "---\\nid: greet\\nname: Greet\\ndescription: Says hello.\\ntags: [demo]\\n---\\nHello!\\n"
    ... )
    >>> card.id, card.tags, card.template
    ('greet', ('demo',), 'Hello!\\n')

    A card is immutable, and every one that exists has passed every check of the manifest: calling
    ``SkillCard(...)`` raises ``TypeError``. Lists are tuples; ``input_schema``, ``output_schema`` and
    ``provider_config`` are the mappings as written (do not change them).
    """

    __slots__ = (
        "body_line",
        "compiled_template",
        "description",
        "examples",
        "execution_hints",
        "id",
        "input_modes",
        "input_schema",
        "input_validator",
        "name",
        "output_modes",
        "output_schema",
        "output_validator",
        "provider_config",
        "read_only",
        "security_requirements",
        "source",
        "tags",
        "template",
        "text_input",
    )

    id: str
    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...]
    input_modes: tuple[str, ...]
    output_modes: tuple[str, ...]
    #: Alternatives (any one suffices); each maps the schemes it needs (all of them) to their scopes.
    security_requirements: tuple[dict[str, tuple[str, ...]], ...]
    read_only: bool
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    input_validator: Validator | None
    output_validator: Validator | None
    #: The input property a text message fills (``textInput``), or None when the manifest names none.
    text_input: str | None
    execution_hints: ExecutionHints
    provider_config: dict[str, Any] | None
    #: The markdown body, verbatim: the skill's prompt template.
    template: str
    compiled_template: Template
    #: The line of the file on which the body starts (to place errors found when rendering).
    body_line: int
    #: Where the text came from (a file name), for messages; empty when unknown.
    source: str

    def __init__(self) -> None:
        raise TypeError("a SkillCard is built only by SkillCard.parse(text), which checks the manifest")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SkillCard is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"SkillCard is immutable (cannot delete {name!r})")

    def __repr__(self) -> str:
        where = f", source={self.source!r}" if self.source else ""
        return f"<SkillCard id={self.id!r}{where}>"

    @classmethod
    def parse(cls, text: str, *, source: str = "") -> SkillCard:
        """Check a SKILL.md text and build its card; raise :class:`ManifestError` on the first problem.

        ``source`` names the text in errors (usually the file path). Parsing reads nothing but ``text``.
        """
        return cls._parse(text, source)[0]

    @classmethod
    def _parse(cls, text: str, source: str) -> tuple[SkillCard, LineMap]:
        if len(text) > MAX_FILE_BYTES or _yaml.utf8_size(text) > MAX_FILE_BYTES:
            size = _yaml.utf8_size(text)
            raise ManifestError(
                f"the file is {size} bytes, more than the limit of {MAX_FILE_BYTES}", line=1, source=source
            )
        frontmatter, body, body_line = _split(text, source)
        data, lines = _yaml.load(frontmatter, first_line=2, source=source)
        fields = _Checker(lines, source).check(data)
        fields["template"] = body
        fields["body_line"] = body_line
        fields["compiled_template"] = _compile_body(body, body_line, source)
        fields["source"] = source
        card = object.__new__(cls)
        for name in cls.__slots__:
            object.__setattr__(card, name, fields[name])
        return card, lines

    def to_agent_skill(self) -> AgentSkill:
        """The A2A v1.0 ``AgentSkill`` for the agent card."""
        return AgentSkill(
            id=self.id,
            name=self.name,
            description=self.description,
            tags=list(self.tags),
            examples=list(self.examples),
            input_modes=list(self.input_modes),
            output_modes=list(self.output_modes),
            security_requirements=[
                SecurityRequirement(schemes={name: StringList(list=list(s)) for name, s in req.items()})
                for req in self.security_requirements
            ],
        )

    def render(self, variables: Mapping[str, Any]) -> str:
        """The prompt: the body rendered with ``variables`` (raises :class:`RenderError`)."""
        return self.compiled_template.render(variables)


# -- reading and linting -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ManifestWarning:
    """Something in a valid manifest worth the author's attention (printed by ``skillwire skills check``)."""

    reason: str
    path: str = ""
    line: int | None = None
    source: str = ""

    def __str__(self) -> str:
        where = ":".join(part for part in (self.source, "" if self.line is None else str(self.line)) if part)
        prefix = " ".join(part for part in (where, self.path) if part)
        return f"{prefix}: warning: {self.reason}" if prefix else f"warning: {self.reason}"


def lint_manifest(text: str, *, source: str = "") -> tuple[SkillCard, list[ManifestWarning]]:
    """Parse ``text`` like :meth:`SkillCard.parse` (raising its ManifestError) and also return its warnings:
    each schema construct that a validator without memoization takes exponential time on."""
    card, lines = SkillCard._parse(text, source)
    checker = _Checker(lines, source)
    warnings = []
    for key, schema in (("inputSchema", card.input_schema), ("outputSchema", card.output_schema)):
        if schema is None:
            continue
        for found in cost_warnings(schema):
            path = (key, *_pointer_path(schema, found.schema_path))
            warnings.append(
                ManifestWarning(
                    found.reason, path=format_path(path), line=checker.line_of(path), source=source
                )
            )
    return card, warnings


def read_manifest_text(path: Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """The text of the manifest file ``path``: at most ``limit`` bytes are read, and a larger file, a file
    that cannot be read or bytes that are not UTF-8 are a ManifestError naming the file (and the line)."""
    source = str(path)
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read the file: {exc.strerror or exc}", source=source) from None
    if len(data) > limit:
        raise ManifestError(f"the file is larger than the limit of {limit} bytes", line=1, source=source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ManifestError(
            f"the file is not UTF-8 text: byte 0x{data[exc.start]:02x} (byte {column} of the line) cannot be "
            "decoded",
            line=line,
            source=source,
        ) from None


# -- the file: frontmatter and body -------------------------------------------------------------------------


def _split(text: str, source: str) -> tuple[str, str, int]:
    """(frontmatter, body, line of the body's first line). The delimiters are lines of ``---``."""
    text = text.removeprefix("\ufeff")  # a byte order mark some editors write
    end = text.find("\n")
    first = text if end < 0 else text[:end]
    if _strip_line(first) != _DELIMITER:
        raise ManifestError(
            "a SKILL.md must start with a '---' line that opens the YAML frontmatter", line=1, source=source
        )
    start = pos = end + 1
    line = 2
    while end >= 0:
        end = text.find("\n", pos)
        current = text[pos:] if end < 0 else text[pos:end]
        if _strip_line(current) == _DELIMITER:
            body = "" if end < 0 else text[end + 1 :]
            return text[start:pos], body, line + 1
        pos = end + 1
        line += 1
    raise ManifestError(
        "the frontmatter opened on line 1 is not closed by a '---' line", line=1, source=source
    )


def _strip_line(line: str) -> str:
    return line.rstrip(" \t\r")


def _compile_body(body: str, body_line: int, source: str) -> Template:
    surrogate = _SURROGATE.search(body)
    if surrogate is not None:  # it could never be encoded as a prompt
        line = body.count("\n", 0, surrogate.start()) + body_line
        raise ManifestError("a lone surrogate is not valid Unicode", line=line, source=source)
    try:
        return compile_template(body)
    except RenderError as exc:
        found = _LOCATION.fullmatch(exc.location)
        line = int(found[1]) if found else 1
        where = f" at column {found[2]}" if found else ""
        raise ManifestError(
            f"invalid template{where}: {exc.reason}", line=body_line + line - 1, source=source
        ) from None


# -- the frontmatter's keys ---------------------------------------------------------------------------------


def _suggest(key: str, known: tuple[str, ...]) -> str:
    """`` (did you mean 'inputSchema'?)`` for ``input_schema``, ``input-schema`` or ``InputSchema``."""
    folded = key.replace("_", "").replace("-", "").casefold()
    for name in known:
        if name.casefold() == folded:
            return f" (did you mean {name!r}?)"
    return f" (expected one of: {', '.join(known)})"


class _Checker:
    """Checks the frontmatter's values and turns them into SkillCard fields."""

    def __init__(self, lines: LineMap, source: str) -> None:
        self.lines = lines
        self.source = source

    def fail(self, reason: str, path: KeyPath) -> NoReturn:
        raise ManifestError(reason, path=format_path(path), line=self.line_of(path), source=self.source)

    def line_of(self, path: KeyPath) -> int:
        """The line of ``path``, or of its nearest ancestor that has one (else the opening ``---``)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return 1

    def check(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            got = "an empty frontmatter" if data is None else type_name(data)
            self.fail(f"the frontmatter must be a mapping of keys, got {got}", ())
        for key in data:
            if key not in KNOWN_KEYS:
                self.fail(f"unknown key {key!r}{_suggest(key, KNOWN_KEYS)}", (key,))
        for key in REQUIRED_KEYS:
            if key not in data:
                self.fail(f"required key {key!r} is missing", (key,))
        return {
            "id": self.skill_id(data["id"]),
            "name": self.text(data["name"], ("name",)),
            "description": self.text(data["description"], ("description",)),
            "tags": self.strings(data["tags"], ("tags",), non_empty=True, at_least_one=True),
            "examples": self.strings(data.get("examples", []), ("examples",)),
            "input_modes": self.strings(data.get("inputModes", []), ("inputModes",), check=self.media_type),
            "output_modes": self.strings(
                data.get("outputModes", []), ("outputModes",), check=self.media_type
            ),
            "security_requirements": self.security(data.get("securityRequirements", [])),
            "read_only": self.boolean(data.get("readOnly", False), ("readOnly",)),
            "execution_hints": self.hints(data.get("executionHints", {})),
            "provider_config": self.opaque(data.get("providerConfig")),
            **self.schema(data, "inputSchema", "input"),
            **self.schema(data, "outputSchema", "output"),
            "text_input": self.text_input(data),
        }

    # -- value kinds

    def text(self, value: Any, path: KeyPath) -> str:
        if not isinstance(value, str):
            self.fail(f"expected a non-empty string, got {type_name(value)}", path)
        if not value.strip():
            self.fail("expected a non-empty string, got an empty one", path)
        return value

    def boolean(self, value: Any, path: KeyPath) -> bool:
        if not isinstance(value, bool):
            self.fail(f"expected true or false, got {type_name(value)}", path)
        return value

    def strings(
        self,
        value: Any,
        path: KeyPath,
        *,
        non_empty: bool = False,
        at_least_one: bool = False,
        check: Callable[[str, KeyPath], None] | None = None,
    ) -> tuple[str, ...]:
        kind = "non-empty strings" if non_empty else "strings"
        if not isinstance(value, list):
            self.fail(f"expected a list of {kind}, got {type_name(value)}", path)
        if at_least_one and not value:
            self.fail(f"expected a list of one or more {kind}, got an empty list", path)
        for index, item in enumerate(value):
            item_path = (*path, index)
            if non_empty:
                self.text(item, item_path)
            elif not isinstance(item, str):
                self.fail(f"expected a string, got {type_name(item)}", item_path)
            if check is not None:
                check(item, item_path)
        return tuple(value)

    def skill_id(self, value: Any) -> str:
        self.text(value, ("id",))
        if len(value) > MAX_ID_LENGTH or not _ID.fullmatch(value):
            self.fail(
                f"{value!r} is not a valid skill id: use at most {MAX_ID_LENGTH} ASCII letters, digits, "
                "'.', '_' and '-', starting with a letter or digit",
                ("id",),
            )
        return str(value)

    def media_type(self, value: str, path: KeyPath) -> None:
        if not _MEDIA_TYPE.fullmatch(value):
            self.fail(f"{value!r} is not a media type (expected type/subtype, like 'text/plain')", path)

    # -- structured keys

    def security(self, value: Any) -> tuple[dict[str, tuple[str, ...]], ...]:
        path: KeyPath = ("securityRequirements",)
        if not isinstance(value, list):
            self.fail(f"expected a list of security requirements, got {type_name(value)}", path)
        out: list[dict[str, tuple[str, ...]]] = []
        for index, entry in enumerate(value):
            entry_path = (*path, index)
            if isinstance(entry, str):
                out.append({self.text(entry, entry_path): ()})
                continue
            if not isinstance(entry, dict):
                self.fail(
                    "expected a scheme name or a mapping of scheme names to lists of scopes, "
                    f"got {type_name(entry)}",
                    entry_path,
                )
            if not entry:
                self.fail("expected at least one scheme name, got an empty mapping", entry_path)
            requirement: dict[str, tuple[str, ...]] = {}
            for scheme, scopes in entry.items():
                if not scheme.strip():
                    self.fail("a scheme name must not be empty", entry_path)
                requirement[scheme] = self.strings(scopes, (*entry_path, scheme), non_empty=True)
            out.append(requirement)
        return tuple(out)

    def hints(self, value: Any) -> ExecutionHints:
        path: KeyPath = ("executionHints",)
        if not isinstance(value, dict):
            self.fail(f"expected a mapping of execution hints, got {type_name(value)}", path)
        for key in value:
            if key not in HINT_KEYS:
                self.fail(f"unknown execution hint {key!r}{_suggest(key, HINT_KEYS)}", (*path, key))
        retryable = self.boolean(value["retryable"], (*path, "retryable")) if "retryable" in value else None
        max_tokens = self.number(value, "maxTokens", "a positive integer", lambda n: n >= 1, integer=True)
        return ExecutionHints(
            max_tokens=None if max_tokens is None else int(max_tokens),
            temperature=self.number(value, "temperature", "a number from 0 to 2", lambda n: 0 <= n <= 2),
            top_p=self.number(value, "topP", "a number from 0 to 1", lambda n: 0 <= n <= 1),
            timeout_seconds=self.number(value, "timeoutSeconds", "a positive number", lambda n: n > 0),
            retryable=retryable,
        )

    def number(
        self,
        hints: dict[str, Any],
        key: str,
        expected: str,
        in_range: Callable[[float], bool],
        *,
        integer: bool = False,
    ) -> float | None:
        if key not in hints:
            return None
        value, path = hints[key], ("executionHints", key)
        if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
            self.fail(f"expected {expected}, got {type_name(value)}", path)
        if not in_range(value):
            self.fail(f"expected {expected}, got {value}", path)
        return value if integer else float(value)

    def opaque(self, value: Any) -> dict[str, Any] | None:
        if value is not None and not isinstance(value, dict):
            self.fail(f"expected a mapping, got {type_name(value)}", ("providerConfig",))
        return value

    def text_input(self, data: dict[str, Any]) -> str | None:
        """``textInput``: a property of the input schema's top level (a text message becomes ``{name: text}``)."""
        if "textInput" not in data:
            return None
        name = self.text(data["textInput"], ("textInput",))
        schema = data.get("inputSchema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(properties, dict) and name not in properties:
            self.fail(
                f"{name!r} is not a property of inputSchema (properties: {', '.join(properties)})",
                ("textInput",),
            )
        return name

    def schema(self, data: dict[str, Any], key: str, prefix: str) -> dict[str, Any]:
        if key not in data:
            return {f"{prefix}_schema": None, f"{prefix}_validator": None}
        value = data[key]
        if not isinstance(value, dict):
            self.fail(f"expected a mapping (a JSON Schema object), got {type_name(value)}", (key,))
        try:
            validator = compile_schema(value)
        except SchemaError as exc:
            self.fail(f"invalid JSON Schema: {exc.reason}", (key, *_pointer_path(value, exc.schema_path)))
        return {f"{prefix}_schema": value, f"{prefix}_validator": validator}


def _pointer_path(schema: Any, pointer: str) -> KeyPath:
    """A JSON pointer into ``schema`` as a key path (list indexes as ints), e.g. ``/allOf/0`` -> (allOf, 0)."""
    pointer = pointer.removeprefix("#")
    if not pointer or pointer == "/":
        return ()
    path: list[str | int] = []
    node = schema
    for raw in pointer.removeprefix("/").split("/"):
        segment = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and segment.isdigit():
            index = int(segment)
            path.append(index)
            node = node[index] if index < len(node) else None
        else:
            path.append(segment)
            node = node.get(segment) if isinstance(node, dict) else None
    return tuple(path)
