"""Regular expressions for JSON Schema ``pattern``, ``patternProperties`` and ``propertyNames``: RE2 syntax,
matched in time linear in the length of the text, whatever the pattern.

A backtracking engine (Python's ``re``, ECMA-262's) takes exponential time on patterns such as
``^(a+)+$``, and a schema pattern is applied to text a client chose, so a request of a few dozen characters
could hold the event loop for seconds. RE2 (the ``google-re2`` package) runs an automaton instead and has
no such worst case; the price is that it cannot run backreferences or lookaround, which are refused when
the schema is compiled, with the construct named.

Patterns are searched, not anchored (``"b"`` matches ``"abc"``), as JSON Schema says. Matching goes through
``re2.Set``: it answers "does any pattern match" (and which) without building match objects, which makes one
search several times cheaper than ``re2.compile(...).search`` and lets ``patternProperties`` test a property
name against all its patterns in one pass.
"""

from __future__ import annotations

from typing import Final

import re2  # type: ignore[import-untyped]  # ships no type information

from skillwire.errors import SchemaError

__all__ = ["MAX_PATTERN_MEMORY", "PatternSet", "compile_patterns"]

#: RE2's memory budget per compiled pattern set (its program and its lazily built automaton), in bytes.
MAX_PATTERN_MEMORY: Final = 8 * 1024 * 1024  # RE2's own default
_SYNTAX: Final = "https://github.com/google/re2/wiki/Syntax"

# What RE2 says about a construct it cannot run (the start of its message), and what the construct is.
_CONSTRUCTS: Final = (
    ("invalid perl operator: (?=", "a lookahead (?=...)"),
    ("invalid perl operator: (?!", "a negative lookahead (?!...)"),
    ("invalid perl operator: (?<=", "a lookbehind (?<=...)"),
    ("invalid perl operator: (?<!", "a negative lookbehind (?<!...)"),
    ("invalid perl operator: (?>", "an atomic group (?>...)"),
    ("invalid perl operator: (?(", "a conditional group (?(...)...)"),
    ("invalid perl operator: (?P>", "a recursive call (?P>name)"),
    ("invalid perl operator: (?R", "a recursive pattern (?R)"),
    ("invalid escape sequence: \\k", "a named backreference \\k<name>"),
    ("invalid escape sequence: \\g", "a backreference \\g"),
    ("bad repetition operator: ++", "a possessive quantifier ++"),
    ("bad repetition operator: *+", "a possessive quantifier *+"),
    ("bad repetition operator: ?+", "a possessive quantifier ?+"),
)
# Constructs RE2 spells differently or bounds, and what to write instead.
_SPELLINGS: Final = (
    ("invalid escape sequence: \\Z", "\\Z is written \\z (the end of the text)"),
    ("invalid escape sequence: \\u", "\\uXXXX is written \\x{XXXX}"),
    ("invalid escape sequence: \\c", "control escapes \\cX are written \\x01 ... \\x1F"),
    ("invalid repetition size", "a repetition count is at most 1000"),
)


def _options() -> re2.Options:
    options = re2.Options()
    options.never_capture = True  # only "does it match" is asked: no group positions to track
    options.log_errors = False  # errors are raised as SchemaError, not written to stderr
    options.max_mem = MAX_PATTERN_MEMORY
    return options


_OPTIONS: Final = _options()


def _construct(message: str, pattern: str) -> str | None:
    if "(?P=" in pattern and message.startswith("invalid perl operator: (?P"):
        return "a named backreference (?P=name)"  # RE2 names only the "(?P" of it
    if message.startswith("invalid escape sequence: \\") and message[-1:].isdigit():
        return f"a backreference {message.rpartition(' ')[2]}"
    return next((construct for start, construct in _CONSTRUCTS if message.startswith(start)), None)


def _reason(message: str, pattern: str) -> str:
    """Why RE2 refused ``pattern``, naming the construct when it is one RE2 leaves out on purpose."""
    construct = _construct(message, pattern)
    message = message if len(message) <= 100 else message[:97] + "..."
    pattern = pattern if len(pattern) <= 100 else pattern[:97] + "..."
    if construct is not None:
        return (
            f"unsupported regular expression {pattern!r}: {construct} cannot be matched in linear time; "
            f"patterns are RE2 syntax, without backreferences or lookaround: {_SYNTAX}"
        )
    spelling = next((hint for start, hint in _SPELLINGS if message.startswith(start)), None)
    if spelling is not None:
        return f"unsupported regular expression {pattern!r}: in RE2 syntax {spelling}: {_SYNTAX}"
    return f"invalid regular expression {pattern!r}: {message}; patterns are RE2 syntax: {_SYNTAX}"


def _check(pattern: str, at: str) -> str:
    try:
        re2.compile(pattern, _OPTIONS)  # for its error message: re2.Set only says that it failed
    except re2.error as exc:
        raw = exc.args[0] if exc.args else ""
        message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise SchemaError(_reason(message, pattern), schema_path=at) from None
    finally:
        re2.purge()  # re2.compile keeps its last 128 programs; this one is not needed again
    return pattern


class PatternSet:
    """Compiled patterns, searched together: ``matching(text)`` gives the indexes of those that match."""

    __slots__ = ("_set", "patterns")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        self._set: re2.Set | None = None
        if patterns:
            self._set = re2.Set.SearchSet(_OPTIONS)
            for pattern in patterns:
                self._set.Add(pattern)
            self._set.Compile()

    def matching(self, text: str) -> list[int]:
        """The indexes of the patterns found in ``text``, in ascending order."""
        if self._set is None:
            return []
        found = self._set.Match(text.encode("utf-8", "surrogatepass"))  # None when there is none
        if found is None:
            return []
        return sorted(found) if len(found) > 1 else found

    def search(self, text: str) -> bool:
        """Whether any pattern is found in ``text``."""
        return self._set is not None and self._set.Match(text.encode("utf-8", "surrogatepass")) is not None


def compile_patterns(patterns: list[tuple[str, str]], where: str) -> PatternSet:
    """``(pattern, schema location)`` pairs as one :class:`PatternSet`; a pattern that is not RE2 syntax is
    a SchemaError at its location, patterns too large for :data:`MAX_PATTERN_MEMORY` one at ``where``."""
    checked = tuple(_check(pattern, at) for pattern, at in patterns)
    try:
        return PatternSet(checked)
    except re2.error:
        raise SchemaError(
            f"the regular expressions here need more than {MAX_PATTERN_MEMORY} bytes to compile",
            schema_path=where,
        ) from None
