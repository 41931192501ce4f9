"""Render skill prompt templates: variables in double braces, and nothing else.

    >>> render("Hello {{ user.name }}, you have {{count}} new {{ kinds.0 }}s", {
    ...     "user": {"name": "Ada"}, "count": 3, "kinds": ["message"]})
    'Hello Ada, you have 3 new messages'

The rules, all of them:

- ``{{ path }}`` is replaced by the value at ``path``; spaces inside the braces are optional. A path is a name
  (``[A-Za-z_][A-Za-z0-9_-]*``) followed by ``.segment`` steps into nested mappings; a segment may also be an
  index (``0``, ``12``, no sign or leading zero) into a list: ``items.0.title``.
- A string value is inserted as-is. Any other value is inserted as compact JSON: ``3``, ``true``, ``null``,
  ``["a","b"]``, ``{"k":1}``. Inserted values are never parsed again, so a value may contain ``{{``.
- ``\\{{`` renders a literal ``{{`` (the backslash is dropped). A lone ``}}`` is literal text.
- There is no logic: no conditionals, loops, filters or expressions. Anything else in braces (``{{ a + b }}``,
  ``{{ }}``) and an opening ``{{`` that is never closed are :class:`~skillwire.errors.RenderError` with the
  ``line:column`` (1-based) of the opening braces.
- A missing variable, an index past the end of a list or a step into a value that is not a mapping (or list) is
  a :class:`~skillwire.errors.RenderError` naming the path in ``variable``: never an empty substitution.

``compile_template`` parses once and reports syntax errors at load time; ``Template.variables`` lists the paths
a template uses, so a manifest can check them against its input schema. ``render`` keeps a small cache of
compiled templates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache

from skillwire.errors import RenderError

__all__ = ["Template", "compile_template", "render"]

_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
_PATH = re.compile(rf"{_NAME}(?:\.(?:{_NAME}|0|[1-9][0-9]*))*")


def _as_json(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_to_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_as_json).encode


class Template:
    """A parsed template: literal text and variable slots. Build it with :func:`compile_template`.

    >>> greeting = compile_template("Hi {{ user.name }} ({{ user.id }})")
    >>> sorted(greeting.variables)
    ['user.id', 'user.name']
    >>> greeting.render({"user": {"name": "Ada", "id": 7}})
    'Hi Ada (7)'
    """

    __slots__ = ("_parts", "source", "variables")

    def __init__(self, source: str) -> None:
        self.source = source
        self._parts = _parse(source)
        self.variables = frozenset(part.path for part in self._parts if isinstance(part, _Slot))

    def render(self, variables: Mapping[str, object]) -> str:
        return "".join(part if isinstance(part, str) else part.render(variables) for part in self._parts)

    def __repr__(self) -> str:
        return f"Template({self.source!r})"


def compile_template(template: str) -> Template:
    """Parse ``template`` once; raise :class:`RenderError` (with ``line:column``) for a syntax error."""
    return Template(template)


def render(template: str, variables: Mapping[str, object]) -> str:
    """Render ``template`` with ``variables``, parsing each distinct template once (a small LRU cache).

    >>> render("{{ a }} and \\\\{{ b }}", {"a": [1, True, None]})
    '[1,true,null] and {{ b }}'
    """
    return _cached(template).render(variables)


_cached = lru_cache(maxsize=128)(compile_template)


class _Slot:
    """``{{ path }}`` at ``location``; ``steps`` are the path segments."""

    __slots__ = ("location", "path", "steps")

    def __init__(self, path: str, location: str) -> None:
        self.path = path
        self.location = location
        self.steps = tuple(path.split("."))

    def render(self, variables: Mapping[str, object]) -> str:
        value: object = variables
        for depth, step in enumerate(self.steps):
            if isinstance(value, Mapping):
                if step not in value:
                    raise self.error(self.missing(depth, f"has no {step!r}"))
                value = value[step]
            elif isinstance(value, (list, tuple)) and step.isdigit():
                if int(step) >= len(value):
                    raise self.error(self.missing(depth, f"has only {_count(len(value))}"))
                value = value[int(step)]
            else:
                parent = ".".join(self.steps[:depth])
                expected = "a mapping or a list" if step.isdigit() else "a mapping"
                raise self.error(
                    f"cannot resolve {self.path!r}: {parent!r} is {_kind(value)}, not {expected}"
                )
        if isinstance(value, str):
            return value
        try:
            return _to_json(value)
        except (TypeError, ValueError) as exc:  # ValueError: a container that contains itself
            raise self.error(f"variable {self.path!r} cannot be rendered as JSON: {exc}") from None

    def missing(self, depth: int, detail: str) -> str:
        if depth == 0:
            return f"missing variable {self.path!r}"
        return f"missing variable {self.path!r}: {'.'.join(self.steps[:depth])!r} {detail}"

    def error(self, reason: str) -> RenderError:
        return RenderError(reason, location=self.location, variable=self.path)


def _parse(source: str) -> list[str | _Slot]:
    parts: list[str | _Slot] = []
    text: list[str] = []  # literal text since the last slot
    pos = 0
    while (start := source.find("{{", pos)) >= 0:
        if start > 0 and source[start - 1] == "\\":
            text.append(source[pos : start - 1] + "{{")
            pos = start + 2
            continue
        text.append(source[pos:start])
        end = source.find("}}", start + 2)
        if end < 0:
            raise RenderError("'{{' is never closed by '}}'", location=_location(source, start))
        inner = source[start + 2 : end].strip()
        if not inner:
            raise RenderError("empty '{{ }}': expected a variable name", location=_location(source, start))
        if not _PATH.fullmatch(inner):
            raise RenderError(
                f"{inner!r} is not a variable: braces hold only a name or a dotted path such as user.name or "
                "items.0 (templates have no expressions, filters or logic)",
                location=_location(source, start),
            )
        if text:
            parts.append("".join(text))
            text = []
        parts.append(_Slot(inner, _location(source, start)))
        pos = end + 2
    tail = "".join(text) + source[pos:]
    if tail:
        parts.append(tail)
    return parts


def _location(source: str, offset: int) -> str:
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{column}"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    return f"a {type(value).__name__}"


def _count(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"
