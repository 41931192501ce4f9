"""A restricted YAML loader for SKILL.md frontmatter: JSON values only, and nothing that can run code.

A manifest comes from whoever wrote the skill, so its frontmatter is read as untrusted input. The loader is
built on PyYAML's *event parser* and never on a constructor: it walks the events itself and builds plain
``dict``/``list``/``str``/``int``/``float``/``bool``/``None`` values. It refuses, with the line::

    anchors and aliases         so an alias bomb ("billion laughs") cannot even start
    explicit tags               !!python/object, !include, !!binary, even !!str and the bare "!"
    directives                  %YAML, %TAG
    several documents
    merge keys                  a plain "<<" key
    mapping keys                that are not strings (1:, true:, null:, a list or mapping as a key)
    duplicate keys
    .inf, .nan and floats too large to be finite (JSON has no such numbers)
    input over MAX_FRONTMATTER_BYTES or nesting deeper than MAX_DEPTH
    characters that YAML 1.1 and 1.2 read differently (U+0085, U+2028, U+2029, a CR without LF), and
    lone surrogates

Plain scalars resolve like the YAML 1.2 core schema cut down to JSON::

    null  Null  NULL  ~  (empty)        -> None
    true  True  TRUE  false False FALSE -> bool
    12  -3  +7  0o17  0x1F              -> int
    1.5  -2e3  .5  6.                   -> float
    anything else (yes, on, 2024-01-01) -> str

Quoted and block scalars are always strings. Unlike YAML 1.1 (PyYAML's own resolver) there are no
timestamps, sexagesimal numbers, ``yes``/``no`` booleans, sets or binary.

>>> value, lines = load("id: greet\\ntags: [a, b]\\n", first_line=2)
>>> value
{'id': 'greet', 'tags': ['a', 'b']}
>>> lines[("tags", 1)]
3
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

import yaml

from skillwire.errors import ManifestError

__all__ = [
    "MAX_DEPTH",
    "MAX_FRONTMATTER_BYTES",
    "KeyPath",
    "LineMap",
    "check_characters",
    "format_path",
    "load",
    "type_name",
    "utf8_size",
]

#: The largest frontmatter accepted, in UTF-8 bytes.
MAX_FRONTMATTER_BYTES = 256 * 1024
#: The deepest nesting of lists and mappings accepted (the top-level mapping is depth 1).
MAX_DEPTH = 64

#: A key path: mapping keys (str) and list indexes (int), from the top of the document.
KeyPath: TypeAlias = tuple[str | int, ...]

# The C parser when PyYAML was built with libyaml, the pure-Python one otherwise. Either way only the
# parser part is used: the loader's constructor is never called.
_LOADER: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+", re.ASCII)
_OCT = re.compile(r"0o[0-7]+", re.ASCII)
_HEX = re.compile(r"0x[0-9a-fA-F]+", re.ASCII)
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?", re.ASCII)
_INF_NAN = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Characters that YAML 1.1 (PyYAML) and YAML 1.2 disagree about as line breaks, lone surrogates, and a CR
# without LF: refused so that every reader, and our line numbers, see the same lines.
_AMBIGUOUS = re.compile("[\x85\u2028\u2029\ud800-\udfff]|\r(?!\n)")
_YAML11_BREAKS = {
    "\x85": "U+0085 (NEXT LINE)",
    "\u2028": "U+2028 (LINE SEPARATOR)",
    "\u2029": "U+2029 (PARAGRAPH SEPARATOR)",
}
_SIMPLE_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*", re.ASCII)


def format_path(path: KeyPath) -> str:
    """A key path as text: ``inputSchema.properties.name``, ``tags[1]``, ``providerConfig["a.b"]``."""
    out: list[str] = []
    for segment in path:
        if isinstance(segment, int):
            out.append(f"[{segment}]")
        elif _SIMPLE_KEY.fullmatch(segment):
            out.append(f".{segment}" if out else segment)
        else:
            out.append(f"[{json.dumps(segment, ensure_ascii=False)}]")
    return "".join(out)


def type_name(value: object) -> str:
    """The JSON name of a loaded value's type, for error messages (``integer``, ``mapping``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def utf8_size(text: str) -> int:
    """The size of ``text`` in UTF-8 bytes (lone surrogates counted as three, as they would encode)."""
    return len(text.encode("utf-8", "surrogatepass"))


class _Lines:
    """The lines under one list or mapping: segment -> line, or -> _Lines when the value is a container."""

    __slots__ = ("children", "line")

    def __init__(self, line: int | None) -> None:
        self.line = line
        self.children: dict[str | int, int | _Lines] = {}

    def branch(self, segment: str | int) -> _Lines:
        entry = self.children[segment]
        if isinstance(entry, int):
            entry = self.children[segment] = _Lines(entry)
        return entry


class LineMap(Mapping[KeyPath, int]):
    """Key path -> 1-based line of the key (or of the list item; ``()`` is the document's first node).

    Stored as a tree, so that a deeply nested document costs memory per node rather than per path segment.
    """

    __slots__ = ("_size", "root")

    def __init__(self) -> None:
        self.root = _Lines(None)
        self._size = 0

    def __getitem__(self, path: KeyPath) -> int:
        entry: int | _Lines = self.root
        for segment in path:
            if not isinstance(entry, _Lines) or segment not in entry.children:
                raise KeyError(path)
            entry = entry.children[segment]
        line = entry if isinstance(entry, int) else entry.line
        if line is None:
            raise KeyError(path)
        return line

    def __iter__(self) -> Iterator[KeyPath]:
        stack: list[tuple[KeyPath, int | _Lines]] = [((), self.root)]
        while stack:
            path, entry = stack.pop()
            if isinstance(entry, int) or entry.line is not None:
                yield path
            if isinstance(entry, _Lines):
                stack.extend(((*path, k), v) for k, v in reversed(entry.children.items()))

    def __len__(self) -> int:
        return self._size

    def _record(self, parent: _Lines | None, segment: str | int, line: int) -> None:
        if parent is None:
            self.root.line = line
        else:
            parent.children[segment] = line
        self._size += 1

    def __repr__(self) -> str:
        return f"LineMap({dict(self)!r})"


class _Frame:
    """An open list or mapping while its events stream in."""

    __slots__ = ("container", "key", "lines", "parent", "segment")

    def __init__(
        self, container: list[Any] | dict[str, Any], parent: _Frame | None, segment: str | int, lines: _Lines
    ) -> None:
        self.container = container
        self.parent = parent
        self.segment = segment  # where this container sits in its parent (unused at the top)
        self.lines = lines
        self.key: str | None = None  # in a mapping: the key whose value comes next

    def path(self) -> KeyPath:
        """This container's key path (walked up only for error messages, so frames stay small)."""
        segments: list[str | int] = []
        frame: _Frame | None = self
        while frame is not None and frame.parent is not None:
            segments.append(frame.segment)
            frame = frame.parent
        return tuple(reversed(segments))


class _Builder:
    """Turns parser events into JSON values, refusing anything outside the subset above."""

    def __init__(self, first_line: int, source: str) -> None:
        self.first_line = first_line
        self.source = source
        self.lines = LineMap()
        self.top: _Frame | None = None
        self.depth = 0
        self.root: Any = None
        self.documents = 0

    def error(self, reason: str, event: Any, path: KeyPath = ()) -> ManifestError:
        return ManifestError(reason, path=format_path(path), line=self.line(event), source=self.source)

    def line(self, event: Any) -> int:
        return int(event.start_mark.line) + self.first_line

    def feed(self, event: Any) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.error("only one YAML document is allowed in the frontmatter", event)
            if event.version is not None or event.tags:
                raise self.error("YAML directives (%YAML, %TAG) are not allowed", event)
        elif isinstance(event, yaml.AliasEvent):
            raise self.error(f"aliases are not allowed (found *{event.anchor})", event, self.next_path())
        elif isinstance(event, yaml.ScalarEvent | yaml.SequenceStartEvent | yaml.MappingStartEvent):
            self.node(event)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            assert self.top is not None
            self.top = self.top.parent
            self.depth -= 1

    def next_path(self) -> KeyPath:
        """The path of the node the next event starts (a key's path while a key is expected)."""
        top = self.top
        if top is None:
            return ()
        if isinstance(top.container, list):
            return (*top.path(), len(top.container))
        return top.path() if top.key is None else (*top.path(), top.key)

    def node(self, event: Any) -> None:
        if event.anchor is not None:
            raise self.error(f"anchors are not allowed (found &{event.anchor})", event, self.next_path())
        if event.tag is not None:
            raise self.error(f"explicit tags are not allowed (found {event.tag})", event, self.next_path())
        top = self.top
        if top is not None and isinstance(top.container, dict) and top.key is None:
            self.key(top, event)
            return
        segment: str | int = ""
        if top is None or isinstance(top.container, list):
            segment = 0 if top is None else len(top.container)
            self.lines._record(None if top is None else top.lines, segment, self.line(event))
        else:
            assert top.key is not None
            segment = top.key  # its line is the key's, recorded with the key
        if isinstance(event, yaml.ScalarEvent):
            self.attach(top, self.scalar(event))
            return
        if self.depth >= MAX_DEPTH:
            raise self.error(f"nesting is deeper than {MAX_DEPTH} levels", event, self.next_path())
        container: list[Any] | dict[str, Any] = [] if isinstance(event, yaml.SequenceStartEvent) else {}
        lines = self.lines.root if top is None else top.lines.branch(segment)
        self.attach(top, container)
        self.top = _Frame(container, top, segment, lines)
        self.depth += 1

    def key(self, top: _Frame, event: Any) -> None:
        if not isinstance(event, yaml.ScalarEvent):
            kind = "list" if isinstance(event, yaml.SequenceStartEvent) else "mapping"
            raise self.error(f"mapping keys must be strings, got a {kind}", event, top.path())
        if not event.style and event.value == "<<":
            raise self.error("merge keys (<<) are not allowed", event, (*top.path(), "<<"))
        key = self.scalar(event)
        if not isinstance(key, str):
            reason = f"mapping keys must be strings, got {type_name(key)} {event.value!r}"
            raise self.error(reason, event, top.path())
        if key in top.container:
            first = self.lines[(*top.path(), key)]
            raise self.error(f"duplicate key {key!r} (first on line {first})", event, (*top.path(), key))
        self.lines._record(top.lines, key, self.line(event))
        top.key = key

    def attach(self, top: _Frame | None, value: Any) -> None:
        if top is None:
            self.root = value
        elif isinstance(top.container, list):
            top.container.append(value)
        else:
            assert top.key is not None
            top.container[top.key] = value
            top.key = None

    def scalar(self, event: Any) -> Any:
        text: str = event.value
        if _SURROGATE.search(text):  # only an escape (\ud800) can make one; the C parser refuses it too
            raise self.error("invalid Unicode: a lone surrogate escape", event, self.next_path())
        if event.style:  # quoted or block: always a string
            return text
        if text in _NULL:
            return None
        if text in _BOOL:
            return _BOOL[text]
        try:
            if _INT.fullmatch(text):
                return int(text, 10)
            if _OCT.fullmatch(text):
                return int(text[2:], 8)
            if _HEX.fullmatch(text):
                return int(text[2:], 16)
        except ValueError:  # more digits than int() accepts from text
            raise self.error(f"the integer {text[:20]}... is too large", event, self.next_path()) from None
        if _INF_NAN.fullmatch(text):
            reason = f"{text} is not a JSON number (no infinity or NaN); quote it to mean a string"
            raise self.error(reason, event, self.next_path())
        if _FLOAT.fullmatch(text):
            number = float(text)
            if not math.isfinite(number):
                raise self.error(f"the number {text} is too large", event, self.next_path())
            return number
        return text


def load(text: str, *, first_line: int = 1, source: str = "") -> tuple[Any, LineMap]:
    """Parse one YAML document of JSON values; return the value and the line of every key path.

    ``first_line`` is the line number, in the file, of the first line of ``text`` (so that errors and the
    line map name lines of the file). An empty document is ``None``. Raises :class:`ManifestError`.
    """
    size = len(text)
    if size > MAX_FRONTMATTER_BYTES or (size := utf8_size(text)) > MAX_FRONTMATTER_BYTES:
        raise ManifestError(
            f"the frontmatter is {size} bytes, more than the limit of {MAX_FRONTMATTER_BYTES}",
            line=first_line,
            source=source,
        )
    check_characters(text, first_line=first_line, source=source)
    builder = _Builder(first_line, source)
    events: Iterator[Any] = yaml.parse(text, Loader=_LOADER)
    try:
        for event in events:
            builder.feed(event)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        line = None if mark is None else int(mark.line) + first_line
        raise ManifestError(f"invalid YAML: {reason}", line=line, source=source) from None
    except yaml.YAMLError as exc:  # ReaderError: a character YAML does not allow
        reason = getattr(exc, "reason", None) or str(exc)
        character = getattr(exc, "character", None)
        if isinstance(character, int):
            reason = f"character #x{character:04x}: {reason}"
        line = _reader_line(text, exc, first_line)
        raise ManifestError(f"invalid YAML: {reason}", line=line, source=source) from None
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return builder.root, builder.lines


def check_characters(text: str, *, first_line: int = 1, source: str = "") -> None:
    """Refuse characters that would make different readers see different lines or text (see _AMBIGUOUS)."""
    found = _AMBIGUOUS.search(text)
    if found is None:
        return
    char = found.group()[0]
    if char == "\r":
        reason = "a carriage return without a line feed is not allowed"
    elif char in _YAML11_BREAKS:
        reason = (
            f"{_YAML11_BREAKS[char]} is a line break to YAML 1.1 but not to YAML 1.2, so it is not allowed; "
            "write it as an escape in a double-quoted string"
        )
    else:
        reason = f"a lone surrogate (U+{ord(char):04X}) is not valid Unicode"
    raise ManifestError(reason, line=text.count("\n", 0, found.start()) + first_line, source=source)


def _reader_line(text: str, exc: Any, first_line: int) -> int | None:
    position = getattr(exc, "position", None)
    if not isinstance(position, int):
        return None
    return text.count("\n", 0, position) + first_line
