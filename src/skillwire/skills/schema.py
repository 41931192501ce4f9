"""Compile JSON Schemas (an explicit subset of draft 2020-12) into fast validators.

A schema is compiled once into a tree of small closures; validating a value then runs those closures and never
looks at the schema dict again::

    >>> from skillwire.skills.schema import compile_schema
    >>> greeter = compile_schema({
    ...     "type": "object",
    ...     "properties": {"name": {"type": "string", "minLength": 1}},
    ...     "required": ["name"],
    ...     "additionalProperties": False,
    ... })
    >>> greeter.is_valid({"name": "Ada"})
    True
    >>> greeter.validate({"name": ""})
    Traceback (most recent call last):
    skillwire.errors.ValidationError: /name: length 0 is less than minLength 1 (schema /properties/name/minLength)

``validate_json(schema, instance)`` does the same through a bounded cache of compiled validators.

Supported keywords (``SUPPORTED_KEYWORDS``); any other keyword is a :class:`~skillwire.errors.SchemaError`::

    any value     type (null, boolean, object, array, number, integer, string; one name or an array of names),
                  enum, const
    objects       properties, required, additionalProperties (boolean or schema), patternProperties,
                  propertyNames, minProperties, maxProperties, dependentRequired
    arrays        prefixItems, items (the 2020-12 meaning: the schema for items after prefixItems), contains,
                  minContains, maxContains, minItems, maxItems, uniqueItems
    strings       minLength, maxLength (in code points), pattern (RE2 syntax, searched, not anchored),
                  format (an annotation: never fails)
    numbers       minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, not the draft-04 booleans),
                  multipleOf (exact on the decimal values: 0.3 is a multiple of 0.1)
    logic         allOf, anyOf, oneOf, not, if, then, else
    structure     $ref (local JSON pointers only: "#", "#/$defs/Name", "#/properties/a"; recursion allowed),
                  $defs, definitions (same as $defs), $schema (2020-12 only), $id (root only, ignored)
    annotations   $comment, title, description, default, examples, deprecated, readOnly, writeOnly,
                  contentEncoding, contentMediaType (the content vocabulary, which 2020-12 makes annotations),
                  discriminator (OpenAPI's, which msgspec and pydantic write beside a oneOf/anyOf of
                  objects; the oneOf/anyOf is what is checked)

``true`` and ``false`` are schemas. Values are compared as JSON: ``bool`` is neither an integer nor a number,
``3.0`` is an integer, ``1 == 1.0`` but ``true != 1``, and objects are equal regardless of key order. Instances
are decoded JSON: ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``.

A failure is reported as the *first* violation found: keywords in the order they appear in the schema, object
members in the instance's key order, array items by index. ``instance_path`` is an RFC 6901 pointer into the
instance (``""`` for the root); ``schema_path`` points at the failing keyword in the schema document, after
following ``$ref`` (``/$defs/node/properties/value/type``).

Refused with a reason, at compile time: remote, relative and ``$id``-based refs, anchors, refs that point nowhere
or not at a schema, ``$ref`` cycles that never step into the instance (``{"$ref": "#"}``), which could only
recurse forever, and patterns RE2 cannot run (backreferences, lookaround; see ``_regex``).

What one validation may cost. Patterns run in linear time (RE2). Without ``$ref``, a schema is a tree and
applies each of its subschemas at most once to each part of the value, so the work is bounded by the size of
the schema times the size of the value. ``$ref`` is what lets a small schema do more: recursion, and the
same definition reached along many ``anyOf``/``oneOf``/``allOf``/``if`` paths, which a naive validator
repeats (``2 ** depth`` times for a two-branch combinator around a recursive ``$ref``). Two measures, both
per validation, and both only in schemas that have a ``$ref``:

* memoization: the result of applying a ``$ref``'s target to a value is kept (keyed by the target and the
  value's identity, which is safe because the value does not change while it is validated and a result
  does not depend on where the value sits), so each definition is applied at most once to each part of the
  value and the exponential constructs run in linear time, with the same verdict and the same first
  violation;
* a step budget (``max_steps``, default ``DEFAULT_MAX_STEPS``): every ``$ref`` application that is not
  answered from the memo is a step, and a validation that would take more steps ends with a
  ``ValidationError`` saying so. It bounds what memoization leaves: a value with many parts, each checked
  against many definitions.

Memoization alone leaves the work proportional to (definitions x parts of the value), which a large schema
and a large value can still make expensive; a budget alone would refuse valid values of schemas that are
merely exponential for a naive validator. Together, every validation ends after at most ``max_steps``
definition applications, and a value that fits the budget gets the right answer. The state lives in a
thread-local, because compiled validators are shared by the event loop and worker threads.
``skills.schema_cost`` finds the constructs that are exponential for validators without memoization, for
``skillwire skills check``.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Sized
from fractions import Fraction
from functools import lru_cache, partial
from itertools import islice
from operator import ge, gt, le, lt
from typing import Any, Final, cast
from urllib.parse import unquote

from skillwire.errors import SchemaError, ValidationError
from skillwire.skills._regex import PatternSet, compile_patterns

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DIALECT",
    "SUPPORTED_KEYWORDS",
    "SchemaGraph",
    "Validator",
    "compile_schema",
    "schema_graph",
    "validate_json",
]

#: The one ``$schema`` value accepted (with or without a trailing ``#``).
DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

SUPPORTED_KEYWORDS: Final = frozenset(
    {
        # any instance
        "type", "enum", "const",
        # objects
        "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
        "minProperties", "maxProperties", "dependentRequired",
        # arrays
        "prefixItems", "items", "contains", "minContains", "maxContains", "minItems", "maxItems", "uniqueItems",
        # strings
        "minLength", "maxLength", "pattern", "format",
        # numbers
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        # logic
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
        # structure
        "$ref", "$defs", "definitions", "$schema", "$id",
        # annotations
        "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
        "contentEncoding", "contentMediaType", "discriminator",
    }
)  # fmt: skip

_HINTS: Final = {
    "dependencies": " (use dependentRequired)",
    "additionalItems": " (in 2020-12, use prefixItems for the leading items and items for the rest)",
    "$anchor": " (refer to schemas by JSON pointer: '#/$defs/Name')",
    "$dynamicRef": " (refer to schemas by JSON pointer: '#/$defs/Name')",
    "$recursiveRef": " (refer to schemas by JSON pointer: '#/$defs/Name')",
}

_ANNOTATIONS: Final[dict[str, tuple[type, str]]] = {
    "$comment": (str, "a string"),
    "title": (str, "a string"),
    "description": (str, "a string"),
    "format": (str, "a string"),
    "examples": (list, "an array"),
    "deprecated": (bool, "a boolean"),
    "readOnly": (bool, "a boolean"),
    "writeOnly": (bool, "a boolean"),
    "contentEncoding": (str, "a string"),
    "contentMediaType": (str, "a string"),
    "discriminator": (dict, "an object"),
}

_TYPE_NAMES: Final = ("null", "boolean", "object", "array", "number", "integer", "string")
_INDEX: Final = re.compile(r"0|[1-9][0-9]*")

_TOO_DEEP: Final = "the value is nested too deeply to validate"
#: ``$ref`` applications one validation may make (memo hits are free); see the module docstring.
DEFAULT_MAX_STEPS: Final = 100_000


class Validator:
    """A compiled schema. ``validate`` raises :class:`ValidationError`; ``is_valid`` answers without raising.

    >>> compile_schema({"type": "integer"}).is_valid(3.0)
    True

    ``max_steps`` bounds the ``$ref`` applications of one validation (the compiled default, or the one given
    to ``validate``/``is_valid``); a validation that needs more fails with a ValidationError saying so.
    """

    __slots__ = ("_check", "_counted", "max_steps", "schema")

    def __init__(
        self, schema: object, check: _Check, *, counted: bool = True, max_steps: int = DEFAULT_MAX_STEPS
    ) -> None:
        self.schema = schema
        self._check = check
        self._counted = counted
        self.max_steps = max_steps

    def validate(self, instance: object, *, max_steps: int | None = None) -> None:
        if self._counted:
            failure = self._counted_run(instance, max_steps)
        else:  # no $ref: the work is bounded by the sizes of the schema and the value
            try:
                failure = self._check(instance)
            except RecursionError:
                raise ValidationError(_TOO_DEEP) from None
        if failure is not None:
            raise failure.error()

    def convert(self, instance: object, *, max_steps: int | None = None) -> Any:
        """Validate ``instance`` as ``validate`` does, and return it with each integral float that a ``type:
        integer`` accepted made an ``int``: 2.0 is an integer in JSON Schema, and a handler whose schema
        says integer gets one (a protobuf ``Value``, in which the official A2A clients send data, holds only
        doubles). ``instance`` itself is not changed: the containers of a changed number are copied.

        >>> compile_schema({"type": "array", "items": {"type": "integer"}}).convert([2.0, 3])
        [2, 3]
        """
        outer = getattr(_local, "integral", None)
        noted: set[int] = set()
        _local.integral = noted
        try:
            self.validate(instance, max_steps=max_steps)
        finally:
            _local.integral = outer
        return _with_integers(instance, noted) if noted else instance

    def is_valid(self, instance: object, *, max_steps: int | None = None) -> bool:
        try:
            if self._counted:
                return self._counted_run(instance, max_steps) is None
            return self._check(instance) is None
        except (RecursionError, ValidationError):  # too deep, or over the step budget
            return False

    def _counted_run(self, instance: object, max_steps: int | None) -> _Failure | None:
        budget = self.max_steps if max_steps is None else max_steps
        outer = getattr(_local, "state", None)
        _local.state = _State(budget)
        try:
            return self._check(instance)
        except RecursionError:
            raise ValidationError(_TOO_DEEP) from None
        except _OutOfSteps as out:
            raise ValidationError(
                f"validating this value takes more than {budget} schema steps ($ref applications), the limit "
                "for one validation",
                schema_path=out.at,
            ) from None
        finally:
            _local.state = outer

    def __repr__(self) -> str:
        return f"Validator({_show(self.schema)})"


def compile_schema(schema: object, *, max_steps: int = DEFAULT_MAX_STEPS) -> Validator:
    """Compile ``schema`` once; raise :class:`SchemaError` (with a JSON pointer) if it is outside the subset.

    ``max_steps`` is the default step budget of each validation (see the module docstring)."""
    try:
        compiler = _Compiler(schema)
        check = compiler.compile()
    except RecursionError:
        raise SchemaError("the schema is nested too deeply") from None
    return Validator(schema, check, counted=bool(compiler.refs), max_steps=max_steps)


def validate_json(schema: object, instance: object, *, max_steps: int | None = None) -> None:
    """Validate ``instance`` against ``schema``, reusing the validator compiled for the same JSON text.

    The cache key is the schema's compact JSON text with its key order kept, because key order decides which
    violation is reported first. The 256 most recently used validators are kept.

    >>> validate_json({"enum": ["casual", "formal"]}, "casual")
    """
    try:
        key = _Key(_json_text(schema), schema)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"the schema is not JSON: {exc}") from None
    _cached_validator(key).validate(instance, max_steps=max_steps)


#: Subschema location -> [(child location, how)]: ``how`` is None for a subschema applied to the same value
#: (``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``, ``$ref``), else the relative pointer
#: of the keyword that steps into a part of the value (``/properties/name``, ``/items``, ...).
SchemaGraph = dict[str, list[tuple[str, str | None]]]


def schema_graph(schema: object) -> SchemaGraph:
    """How the subschemas of a valid ``schema`` apply to one another (raises SchemaError like compile)."""
    compiler = _Compiler(schema)
    try:
        compiler.compile()
    except RecursionError:
        raise SchemaError("the schema is nested too deeply") from None
    return compiler.edges


# -- the per-validation state of schemas with $ref --------------------------------------------------------

_local = threading.local()


#: A failure as it left a $ref's target: reason, schema path, instance path (reversed); None when valid.
_Saved = tuple[str | Callable[[], str], str, tuple[str | int, ...]] | None


class _State:
    __slots__ = ("memo", "steps")

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.memo: dict[tuple[str, int], _Saved] = {}  # (target location, id(value)) -> outcome


class _OutOfSteps(Exception):
    def __init__(self, at: str) -> None:
        self.at = at


_json_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


class _Key:
    """A cache key that compares by JSON text but carries the schema to compile on a miss."""

    __slots__ = ("schema", "text")

    def __init__(self, text: str, schema: object) -> None:
        self.text = text
        self.schema = schema

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.text == self.text


@lru_cache(maxsize=256)
def _cached_validator(key: _Key) -> Validator:
    return compile_schema(key.schema)


# -- failures ---------------------------------------------------------------------------------------------


class _Failure:
    """A violation on its way up. The instance path is collected in reverse as it leaves each container, and the
    reason may be a callable so that branches which fail inside anyOf/oneOf/not never format a message."""

    __slots__ = ("reason", "reversed_path", "schema_path")

    def __init__(self, reason: str | Callable[[], str], schema_path: str) -> None:
        self.reason = reason
        self.schema_path = schema_path
        self.reversed_path: list[str | int] = []

    def text(self) -> str:
        return self.reason if isinstance(self.reason, str) else self.reason()

    def under(self, part: str | int) -> _Failure:
        """This failure, one container further up (``part`` is its key or index there)."""
        self.reversed_path.append(part)
        return self

    def error(self) -> ValidationError:
        pointer = "".join("/" + _escape(str(part)) for part in reversed(self.reversed_path))
        return ValidationError(self.text(), instance_path=pointer, schema_path=self.schema_path)


_Check = Callable[[Any], _Failure | None]


def _accept(instance: Any) -> _Failure | None:
    return None


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _unescape(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


# -- JSON values ------------------------------------------------------------------------------------------


def _type_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: object) -> bool:
    if isinstance(value, int):
        return not isinstance(value, bool)
    return isinstance(value, float) and value.is_integer()


def _is_integer_noted(value: object) -> bool:
    """``_is_integer``, noting an integral float for ``Validator.convert`` (when one is converting)."""
    if isinstance(value, float):
        if not value.is_integer():
            return False
        noted = getattr(_local, "integral", None)
        if noted is not None:
            noted.add(id(value))  # the instance holds the float while it is validated: its id is stable
        return True
    return isinstance(value, int) and not isinstance(value, bool)


def _with_integers(value: Any, noted: set[int]) -> Any:
    """``value`` with the floats whose ids are ``noted`` made ints (containers copied)."""
    if isinstance(value, float):
        return int(value) if id(value) in noted else value
    if isinstance(value, dict):
        return {key: _with_integers(item, noted) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_integers(item, noted) for item in value]
    return value


_TYPE_TESTS: Final[dict[str, Callable[[object], bool]]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "number": _is_number,
    "integer": _is_integer,
    "string": lambda v: isinstance(v, str),
}
_TYPE_CLASSES: Final[dict[str, type]] = {"object": dict, "array": list, "string": str}


def _canon(value: object) -> object:
    """A hashable form in which two values are equal exactly when they are equal as JSON."""
    if isinstance(value, bool):
        return ("b", value)  # True == 1 in Python, not in JSON
    if value is None or isinstance(value, (str, int, float)):
        return value  # 1 == 1.0 in both
    if isinstance(value, list):
        return ("a", tuple(_canon(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((key, _canon(item)) for key, item in value.items()))
    return ("?", id(value))  # not JSON: equal to nothing else


def _is_json(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if value is None or isinstance(value, (str, int)):
        return True
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_json(item) for key, item in value.items())
    return False


def _show(value: object, limit: int = 60) -> str:
    """JSON-like text for reasons (``'a'``, ``true``, ``null``, ``[1, 2]``), cut to ``limit`` characters."""
    text = _json_repr(value, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_repr(value: object, limit: int) -> str:
    # Only the first `limit` characters survive, so no string or container is read further than that.
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value[: limit + 1])
    if isinstance(value, list):
        return "[" + ", ".join(_json_repr(item, limit) for item in value[:limit]) + "]"
    if isinstance(value, dict):
        pairs = islice(value.items(), limit)
        return "{" + ", ".join(f"{key!r}: {_json_repr(item, limit)}" for key, item in pairs) + "}"
    return repr(value)


def _count(n: int, noun: str, plural: str) -> str:
    return f"{n} {noun if n == 1 else plural}"


def _multiple_of(value: int | float, divisor: int | float) -> bool:
    if isinstance(value, int) and isinstance(divisor, int):
        return value % divisor == 0
    try:  # compare the decimal numbers as written, not their binary approximations
        return Fraction(repr(value)) % Fraction(repr(divisor)) == 0
    except (ValueError, OverflowError):  # inf, nan
        return False


# -- the compiler -----------------------------------------------------------------------------------------

_Handler = Callable[["_Compiler", dict[str, Any], str, str], "_Check | None"]


class _Compiler:
    def __init__(self, root: object) -> None:
        self.root = root
        self.compiled: dict[str, _Check] = {}  # every subschema location -> its check
        self.refs: list[tuple[str, str, str, list[_Check]]] = []  # ($ref location, ref, pointer, cell)
        # Subschemas applied to the same instance (allOf, not, if, $ref, ...): a cycle here never terminates.
        self.in_place: dict[str, list[tuple[str, str]]] = {}  # path -> [(child path, $ref location or "")]
        self.edges: SchemaGraph = {}  # every application, in place or into a part of the value

    def compile(self) -> _Check:
        check = self.schema(self.root, "")
        for where, ref, pointer, cell in self.refs:
            target = self.compiled.get(pointer)
            if target is None:
                raise SchemaError(f"$ref {ref!r} points at a value that is not a schema", schema_path=where)
            cell.append(target)
        self.refuse_cycles()
        return check

    def schema(self, schema: object, path: str) -> _Check:
        check = self.build(schema, path)
        self.compiled[path] = check
        return check

    def build(self, schema: object, path: str) -> _Check:
        if schema is True:
            return _accept
        if schema is False:
            return _reject(path)
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, got {_type_of(schema)}", schema_path=path
            )
        for key in schema:
            if not isinstance(key, str):
                raise SchemaError(f"schema keys must be strings, got {key!r}", schema_path=path)
            if key not in SUPPORTED_KEYWORDS:
                raise SchemaError(
                    f"unsupported keyword {key!r}{_HINTS.get(key, '')}; the supported subset of JSON Schema "
                    "2020-12 is listed in skillwire.skills.schema.SUPPORTED_KEYWORDS",
                    schema_path=f"{path}/{_escape(key)}",
                )
        checks: list[_Check] = []
        for key in schema:
            check = _HANDLERS[key](self, schema, key, path)
            if check is not None:
                checks.append(check)
        return _all(checks)

    def in_place_child(self, parent: str, child: str, ref_at: str = "") -> None:
        self.in_place.setdefault(parent, []).append((child, ref_at))
        self.edges.setdefault(parent, []).append((child, None))

    def descend(self, parent: str, child: str) -> None:
        self.edges.setdefault(parent, []).append((child, child[len(parent) :]))

    def refuse_cycles(self) -> None:
        done: set[str] = set()
        for start in list(self.in_place):
            if start in done:
                continue
            # iterative depth-first search; `trail` is the current chain of (path, $ref location)
            trail: list[tuple[str, str]] = [(start, "")]
            on_trail = {start}
            pending = [iter(self.in_place.get(start, ()))]
            while pending:
                step = next(pending[-1], None)
                if step is None:
                    pending.pop()
                    finished, _ = trail.pop()
                    on_trail.discard(finished)
                    done.add(finished)
                    continue
                child, ref_at = step
                if child in on_trail:  # the edges after `child` on the trail, and this one, close a loop
                    since = [p for p, _ in trail].index(child) + 1
                    loop = [at for _, at in [*trail[since:], (child, ref_at)] if at]
                    raise SchemaError(
                        "$ref cycle that never steps into the instance, so it could recurse forever: "
                        + " -> ".join(at or "/" for at in loop),
                        schema_path=loop[0],
                    )
                if child not in done:
                    trail.append((child, ref_at))
                    on_trail.add(child)
                    pending.append(iter(self.in_place.get(child, ())))

    # -- keyword values -------------------------------------------------------------------------------

    def schema_list(self, schema: dict[str, Any], kw: str, path: str, *, in_place: bool) -> list[_Check]:
        at = f"{path}/{kw}"
        value = schema[kw]
        if not isinstance(value, list) or not value:
            raise SchemaError(
                f"{kw} must be a non-empty array of schemas, got {_show(value)}", schema_path=at
            )
        checks = []
        for i, sub in enumerate(value):
            checks.append(self.schema(sub, f"{at}/{i}"))
            if in_place:
                self.in_place_child(path, f"{at}/{i}")
            else:
                self.descend(path, f"{at}/{i}")
        return checks

    def schema_map(
        self, schema: dict[str, Any], kw: str, path: str, *, applied: bool = True
    ) -> dict[str, _Check]:
        at = f"{path}/{kw}"
        value = schema[kw]
        if not isinstance(value, dict):
            raise SchemaError(f"{kw} must be an object of schemas, got {_show(value)}", schema_path=at)
        checks = {}
        for name, sub in value.items():
            if not isinstance(name, str):
                raise SchemaError(f"{kw} keys must be strings, got {name!r}", schema_path=at)
            checks[name] = self.schema(sub, f"{at}/{_escape(name)}")
            if applied:
                self.descend(path, f"{at}/{_escape(name)}")
        return checks

    def subschema(
        self, schema: dict[str, Any], kw: str, path: str, *, in_place: bool, applied: bool = True
    ) -> _Check:
        if in_place:
            self.in_place_child(path, f"{path}/{kw}")
        elif applied:
            self.descend(path, f"{path}/{kw}")
        return self.schema(schema[kw], f"{path}/{kw}")


def _all(checks: list[_Check]) -> _Check:
    """One check that runs ``checks`` in order and returns the first failure."""
    checks = [check for check in checks if check is not _accept]
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks

        def check_two(instance: Any) -> _Failure | None:
            return first(instance) or second(instance)

        return check_two
    frozen = tuple(checks)

    def check_all(instance: Any) -> _Failure | None:
        for check in frozen:
            failure = check(instance)
            if failure is not None:
                return failure
        return None

    return check_all


def _reject(path: str) -> _Check:
    def check(instance: Any) -> _Failure | None:
        return _Failure("no value is allowed here (the schema is false)", path)

    return check


def _count_value(schema: dict[str, Any], kw: str, path: str) -> int:
    value = schema[kw]
    if isinstance(value, bool) or not _is_integer(value) or value < 0:
        raise SchemaError(
            f"{kw} must be a non-negative integer, got {_show(value)}", schema_path=f"{path}/{kw}"
        )
    return int(value)


def _number_value(schema: dict[str, Any], kw: str, path: str) -> int | float:
    value = schema[kw]
    if not _is_number(value) or not math.isfinite(value):
        extra = " (the draft-04 boolean form is not supported)" if isinstance(value, bool) else ""
        raise SchemaError(f"{kw} must be a number, got {_show(value)}{extra}", schema_path=f"{path}/{kw}")
    return cast("int | float", value)


def _unique_strings(value: object, what: str, at: str) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not all(isinstance(item, str) for item in value)
        or len(set(value)) != len(value)
    ):
        raise SchemaError(f"{what} must be an array of unique strings, got {_show(value)}", schema_path=at)
    return tuple(value)


def _regex(pattern: object, what: str, at: str) -> PatternSet:
    if not isinstance(pattern, str):
        raise SchemaError(f"{what} must be a string, got {_show(pattern)}", schema_path=at)
    return compile_patterns([(pattern, at)], at)


def _sibling_patterns(schema: dict[str, Any], path: str) -> PatternSet:
    patterns = schema.get("patternProperties")
    if not isinstance(patterns, dict):
        return PatternSet(())  # absent, or refused by its own handler
    at = f"{path}/patternProperties"
    return compile_patterns([(str(p), f"{at}/{_escape(str(p))}") for p in patterns], at)


# -- keyword handlers: each validates its value and returns a check, or None when there is nothing to check --


def _type(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    value = schema[kw]
    names = [value] if isinstance(value, str) else value
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(name, str) and name in _TYPE_NAMES for name in names)
        or len(set(names)) != len(names)
    ):
        raise SchemaError(
            f"type must be one of {', '.join(_TYPE_NAMES)} or a non-empty array of them, got {_show(value)}",
            schema_path=at,
        )
    expected = " or ".join(names)
    if all(name in _TYPE_CLASSES for name in names):
        classes = tuple(_TYPE_CLASSES[name] for name in names)

        def check_class(instance: Any) -> _Failure | None:
            if isinstance(instance, classes):
                return None
            return _Failure(lambda: f"expected {expected}, got {_type_of(instance)}", at)

        return check_class
    # an integral float that only "integer" admits becomes an int in Validator.convert (not when "number"
    # admits it too: then the value is a number, whatever its spelling)
    integer = _is_integer_noted if "number" not in names else _is_integer
    tests = tuple(integer if name == "integer" else _TYPE_TESTS[name] for name in names)

    def check_type(instance: Any) -> _Failure | None:
        for test in tests:
            if test(instance):
                return None
        return _Failure(lambda: f"expected {expected}, got {_type_of(instance)}", at)

    return check_type


def _enum(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    values = schema[kw]
    if not isinstance(values, list) or not _is_json(values):
        raise SchemaError(f"enum must be an array of JSON values, got {_show(values)}", schema_path=at)
    strings = frozenset(value for value in values if isinstance(value, str))
    others = frozenset(_canon(value) for value in values if not isinstance(value, str))

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, str):
            if instance in strings:
                return None
        elif _canon(instance) in others:
            return None
        return _Failure(lambda: f"{_show(instance)} is not one of {_show(values)}", at)

    return check


def _const(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    value = schema[kw]
    if not _is_json(value):
        raise SchemaError(f"const must be a JSON value, got {value!r}", schema_path=at)
    expected = _canon(value)

    def check(instance: Any) -> _Failure | None:
        if _canon(instance) == expected:
            return None
        return _Failure(lambda: f"expected {_show(value)}, got {_show(instance)}", at)

    return check


# objects


def _properties(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    checks = {name: check for name, check in c.schema_map(schema, kw, path).items() if check is not _accept}
    if not checks:
        return None

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, dict):
            for name, value in instance.items():
                sub = checks.get(name)
                if sub is not None:
                    failure = sub(value)
                    if failure is not None:
                        return failure.under(name)
        return None

    return check


def _pattern_properties(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    checks = tuple(c.schema_map(schema, kw, path).values())
    patterns = _sibling_patterns(schema, path)
    matching = patterns.matching

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, dict):
            for name, value in instance.items():
                for index in matching(name):
                    failure = checks[index](value)
                    if failure is not None:
                        return failure.under(name)
        return None

    return check


def _additional_properties(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    sub = c.subschema(schema, kw, path, in_place=False)
    if sub is _accept:
        return None
    properties = schema.get("properties")
    known = frozenset(properties if isinstance(properties, dict) else ())
    patterned = _sibling_patterns(schema, path).search

    def additional(name: str) -> bool:
        return name not in known and not patterned(name)

    if schema[kw] is False:

        def check_none(instance: Any) -> _Failure | None:
            if isinstance(instance, dict) and not instance.keys() <= known:
                for name in instance:
                    if additional(name):
                        return _Failure(f"additional property {name!r} is not allowed", at)
            return None

        return check_none

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, dict) and not instance.keys() <= known:
            for name, value in instance.items():
                if additional(name):
                    failure = sub(value)
                    if failure is not None:
                        return failure.under(name)
        return None

    return check


def _property_names(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    sub = c.subschema(schema, kw, path, in_place=False)
    if sub is _accept:
        return None

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, dict):
            for name in instance:
                inner = sub(name)
                if inner is not None:
                    return _Failure(partial(_name_reason, name, inner), inner.schema_path)
        return None

    return check


def _name_reason(name: str, inner: _Failure) -> str:
    return f"property name {name!r}: {inner.text()}"


def _required(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    names = _unique_strings(schema[kw], "required", at)
    if not names:
        return None

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, dict):
            for name in names:
                if name not in instance:
                    return _Failure(f"missing required property {name!r}", at)
        return None

    return check


def _dependent_required(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    value = schema[kw]
    if not isinstance(value, dict):
        raise SchemaError(f"dependentRequired must be an object, got {_show(value)}", schema_path=at)
    rules = tuple(
        (trigger, _unique_strings(names, f"dependentRequired[{trigger!r}]", f"{at}/{_escape(trigger)}"))
        for trigger, names in value.items()
    )

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, dict):
            for trigger, names in rules:
                if trigger in instance:
                    for name in names:
                        if name not in instance:
                            return _Failure(
                                f"property {name!r} is required when {trigger!r} is present",
                                f"{at}/{_escape(trigger)}",
                            )
        return None

    return check


# arrays


def _prefix_items(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    checks = tuple(c.schema_list(schema, kw, path, in_place=False))

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, list):
            for i, (sub, item) in enumerate(zip(checks, instance)):  # noqa: B905 - arrays may be shorter
                failure = sub(item)
                if failure is not None:
                    return failure.under(i)
        return None

    return check


def _items(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    if isinstance(schema[kw], list):
        raise SchemaError(
            "items must be a schema; for per-position schemas use prefixItems (the array form of items is "
            "draft-07, not 2020-12)",
            schema_path=at,
        )
    sub = c.subschema(schema, kw, path, in_place=False)
    prefix = schema.get("prefixItems")
    start = len(prefix) if isinstance(prefix, list) else 0
    if sub is _accept:
        return None
    if schema[kw] is False:
        allowed = f"but only the {start} in prefixItems are allowed" if start else "but items is false"

        def check_none(instance: Any) -> _Failure | None:
            if isinstance(instance, list) and len(instance) > start:
                return _Failure(f"has {_count(len(instance), 'item', 'items')}, {allowed}", at)
            return None

        return check_none

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, list):
            for i in range(start, len(instance)):
                failure = sub(instance[i])
                if failure is not None:
                    return failure.under(i)
        return None

    return check


def _contains(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    sub = c.subschema(schema, kw, path, in_place=False)
    least = _count_value(schema, "minContains", path) if "minContains" in schema else 1
    most = _count_value(schema, "maxContains", path) if "maxContains" in schema else None
    explicit_least = "minContains" in schema
    least_at = f"{path}/minContains" if explicit_least else f"{path}/contains"
    most_at = f"{path}/maxContains"

    def check(instance: Any) -> _Failure | None:
        if not isinstance(instance, list):
            return None
        matches = 0
        for item in instance:
            if sub(item) is None:
                matches += 1
                if most is None and matches >= least:
                    return None
        if matches < least:
            if not explicit_least:
                return _Failure("no item matches contains", least_at)
            n = _count(matches, "item matches", "items match")
            return _Failure(f"{n} contains, fewer than minContains {least}", least_at)
        if most is not None and matches > most:
            n = _count(matches, "item matches", "items match")
            return _Failure(f"{n} contains, more than maxContains {most}", most_at)
        return None

    return check


def _contains_bound(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    _count_value(schema, kw, path)  # applied by contains; without contains it has no effect
    return None


def _unique_items(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    if not isinstance(schema[kw], bool):
        raise SchemaError(f"uniqueItems must be a boolean, got {_show(schema[kw])}", schema_path=at)
    if not schema[kw]:
        return None

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, list) and len(instance) > 1:
            seen: dict[object, int] = {}
            for i, item in enumerate(instance):
                first = seen.setdefault(_canon(item), i)
                if first != i:
                    return _Failure(f"items {first} and {i} are equal, but uniqueItems is true", at)
        return None

    return check


# strings


def _pattern(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    pattern = _regex(schema[kw], "pattern", at)
    search, text = pattern.search, pattern.patterns[0]

    def check(instance: Any) -> _Failure | None:
        if isinstance(instance, str) and not search(instance):
            return _Failure(lambda: f"{_show(instance)} does not match pattern {text!r}", at)
        return None

    return check


# numbers


def _bound(relation: str, fails: Callable[[Any, Any], bool]) -> _Handler:
    def handler(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
        at, limit = f"{path}/{kw}", _number_value(schema, kw, path)

        def check(instance: Any) -> _Failure | None:
            if (
                isinstance(instance, (int, float))
                and not isinstance(instance, bool)
                and fails(instance, limit)
            ):
                return _Failure(f"{instance!r} {relation} {kw} {limit!r}", at)
            return None

        return check

    return handler


def _multiple_of_handler(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at, divisor = f"{path}/{kw}", _number_value(schema, kw, path)
    if divisor <= 0:
        raise SchemaError(f"multipleOf must be greater than 0, got {divisor!r}", schema_path=at)

    def check(instance: Any) -> _Failure | None:
        if _is_number(instance) and not _multiple_of(instance, divisor):
            return _Failure(f"{instance!r} is not a multiple of {divisor!r}", at)
        return None

    return check


# sizes: of strings (in code points), arrays and objects


def _size(
    kind: type[Sized], describe: Callable[[int], str], relation: str, fails: Callable[[int, int], bool]
) -> _Handler:
    def handler(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
        at, limit = f"{path}/{kw}", _count_value(schema, kw, path)
        if limit == 0 and fails is lt:
            return None

        def check(instance: Any) -> _Failure | None:
            if isinstance(instance, kind) and fails(len(instance), limit):
                return _Failure(f"{describe(len(instance))} {relation} {kw} {limit}", at)
            return None

        return check

    return handler


def _length(n: int) -> str:
    return f"length {n}"


def _items_count(n: int) -> str:
    return f"has {_count(n, 'item', 'items')},"


def _properties_count(n: int) -> str:
    return f"has {_count(n, 'property', 'properties')},"


# logic


def _all_of(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    check = _all(c.schema_list(schema, kw, path, in_place=True))
    return None if check is _accept else check


def _any_of(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    checks = tuple(c.schema_list(schema, kw, path, in_place=True))
    if _accept in checks:
        return None

    def check(instance: Any) -> _Failure | None:
        for sub in checks:
            if sub(instance) is None:
                return None
        return _Failure(lambda: f"{_show(instance)} matches none of the {len(checks)} schemas in anyOf", at)

    return check


def _one_of(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    checks = tuple(c.schema_list(schema, kw, path, in_place=True))

    def check(instance: Any) -> _Failure | None:
        matched = -1
        for i, sub in enumerate(checks):
            if sub(instance) is None:
                if matched >= 0:
                    return _Failure(f"matches more than one schema in oneOf ({matched} and {i})", at)
                matched = i
        if matched < 0:
            return _Failure(
                lambda: f"{_show(instance)} matches none of the {len(checks)} schemas in oneOf", at
            )
        return None

    return check


def _not(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    sub = c.subschema(schema, kw, path, in_place=True)

    def check(instance: Any) -> _Failure | None:
        if sub(instance) is None:
            return _Failure(lambda: f"{_show(instance)} must not match the schema in not", at)
        return None

    return check


def _if(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    condition = c.subschema(schema, kw, path, in_place=True)
    then = c.subschema(schema, "then", path, in_place=True) if "then" in schema else _accept
    otherwise = c.subschema(schema, "else", path, in_place=True) if "else" in schema else _accept
    if then is _accept and otherwise is _accept:
        return None

    def check(instance: Any) -> _Failure | None:
        return then(instance) if condition(instance) is None else otherwise(instance)

    return check


def _then_else(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    if "if" not in schema:  # without "if" they do nothing, but must still be valid schemas
        c.subschema(schema, kw, path, in_place=False, applied=False)
    return None  # with "if", its handler compiles and applies them


# structure


def _ref(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    ref = schema[kw]
    if not isinstance(ref, str):
        raise SchemaError(f"$ref must be a string, got {_show(ref)}", schema_path=at)
    if not ref.startswith("#"):
        raise SchemaError(
            f"$ref {ref!r} is not supported: only local JSON pointers into the same schema are "
            "('#', '#/$defs/Name'); remote, relative and $id-based refs are refused",
            schema_path=at,
        )
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        raise SchemaError(
            f"$ref {ref!r} is an anchor; only JSON pointers ('#', '#/$defs/Name') are supported",
            schema_path=at,
        )
    _resolve(c.root, ref, pointer, at)
    cell: list[_Check] = []  # filled once every subschema is compiled, so recursion needs no special case
    c.refs.append((at, ref, pointer, cell))
    c.in_place_child(path, pointer, at)

    def check(instance: Any) -> _Failure | None:
        state: _State = _local.state
        key = (pointer, id(instance))
        memo = state.memo
        if key in memo:
            saved = memo[key]
            if saved is None:
                return None
            again = _Failure(saved[0], saved[1])
            again.reversed_path.extend(saved[2])
            return again
        state.steps -= 1
        if state.steps < 0:
            raise _OutOfSteps(at)
        failure = cell[0](instance)
        memo[key] = (
            None if failure is None else (failure.reason, failure.schema_path, tuple(failure.reversed_path))
        )
        return failure

    return check


def _resolve(root: object, ref: str, pointer: str, at: str) -> None:
    node, where = root, ""
    for raw in pointer.split("/")[1:]:
        if re.search(r"~(?![01])", raw):
            raise SchemaError(f"$ref {ref!r} is not a valid JSON pointer (bad '~' escape)", schema_path=at)
        segment = _unescape(raw)
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and _INDEX.fullmatch(segment) and int(segment) < len(node):
            node = node[int(segment)]
        else:
            raise SchemaError(
                f"$ref {ref!r} points nowhere: {where or '/'} has no {segment!r}", schema_path=at
            )
        where = f"{where}/{raw}"


def _defs(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    c.schema_map(schema, kw, path, applied=False)  # compiled now so that errors surface and $ref finds them
    return None


def _schema_keyword(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    if schema[kw] not in (DIALECT, DIALECT + "#"):
        raise SchemaError(
            f"unsupported $schema {_show(schema[kw])}: only JSON Schema 2020-12 ({DIALECT}) is supported",
            schema_path=f"{path}/{kw}",
        )
    return None


def _id(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    at = f"{path}/{kw}"
    if path:
        raise SchemaError(
            "$id is only allowed at the root of the schema (embedded resources are not supported)",
            schema_path=at,
        )
    if not isinstance(schema[kw], str):
        raise SchemaError(f"$id must be a string, got {_show(schema[kw])}", schema_path=at)
    return None


def _annotation(c: _Compiler, schema: dict[str, Any], kw: str, path: str) -> _Check | None:
    if kw in _ANNOTATIONS:
        kind, name = _ANNOTATIONS[kw]
        if not isinstance(schema[kw], kind):
            raise SchemaError(f"{kw} must be {name}, got {_show(schema[kw])}", schema_path=f"{path}/{kw}")
    return None


_HANDLERS: Final[dict[str, _Handler]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional_properties,
    "patternProperties": _pattern_properties,
    "propertyNames": _property_names,
    "minProperties": _size(dict, _properties_count, "fewer than", lt),
    "maxProperties": _size(dict, _properties_count, "more than", gt),
    "dependentRequired": _dependent_required,
    "prefixItems": _prefix_items,
    "items": _items,
    "contains": _contains,
    "minContains": _contains_bound,
    "maxContains": _contains_bound,
    "minItems": _size(list, _items_count, "fewer than", lt),
    "maxItems": _size(list, _items_count, "more than", gt),
    "uniqueItems": _unique_items,
    "minLength": _size(str, _length, "is less than", lt),
    "maxLength": _size(str, _length, "is greater than", gt),
    "pattern": _pattern,
    "minimum": _bound("is less than", lt),
    "maximum": _bound("is greater than", gt),
    "exclusiveMinimum": _bound("is not greater than", le),
    "exclusiveMaximum": _bound("is not less than", ge),
    "multipleOf": _multiple_of_handler,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
    "then": _then_else,
    "else": _then_else,
    "$ref": _ref,
    "$defs": _defs,
    "definitions": _defs,
    "$schema": _schema_keyword,
    "$id": _id,
    **dict.fromkeys(("$comment", "title", "description", "default", "examples"), _annotation),
    **dict.fromkeys(("format", "deprecated", "readOnly", "writeOnly"), _annotation),
    **dict.fromkeys(("contentEncoding", "contentMediaType", "discriminator"), _annotation),
}
assert _HANDLERS.keys() == SUPPORTED_KEYWORDS
