"""Budgets on a request's decoded JSON, from :class:`~skillwire.protocol.limits.Limits` (sans-IO).

Five budgets, checked in two places::

    check_json(body, limits, "request")       # raw bytes, BEFORE decoding: nesting depth, value count
    value = decode(body)
    check_shape(value, limits, "params")      # the decoded request: parts, metadata keys, strings (and
                                              # depth and values again, for gRPC's protobuf-made values)

Exceeding one raises :class:`~skillwire.errors.InvalidParamsError` (-32602 / 400 / INVALID_ARGUMENT) whose
message names where, the count, the limit and the budget: ``params.message.parts: 300 parts, the limit is
256 (max_parts)``; the ErrorInfo metadata carries ``budget`` and ``limit``, the BadRequest the field.

Why hand-written: msgspec (like the standard library's json) has no budget but Python's recursion limit,
and decoding a 10 MiB body of tiny arrays allocates about 500 MB before anything can look at it. The raw
check runs on the bytes with ``bytes`` methods (C loops, no object per value), in linear time:

* An upper bound first, which settles every ordinary body at once: a body has at most one value per byte,
  and at most ``1 + commas + colons + brackets`` values (object keys count: each is a string to allocate)
  and ``brackets`` levels, all counted inside strings too.
* Only a body past a bound is scanned exactly. Escapes are dropped, so every remaining quote opens or
  closes a string; the text is split at quotes in 64 KiB chunks (a piece per string would be an object per
  string, so chunks keep the memory at one chunk's pieces) and only the pieces outside strings are kept.
  Values are then ``strings + containers + scalars`` (``quotes / 2``, opening brackets, and runs of scalar
  characters found with ``translate`` and ``count``); nesting is the running sum of the brackets, which
  exist only if the value count is in budget, so there are at most ``2 * max_json_nodes`` of them.

:func:`check_shape` walks the decoded value in Python, so the bindings call it only when the raw body could
exceed a shape budget (:func:`shape_may_exceed`: a body shorter than ``max_string_length`` cannot hold a
longer string, one with fewer ``{`` than ``max_parts`` cannot hold more parts, one with fewer ``:`` than
``max_metadata_keys`` cannot hold an object with more keys); gRPC, which has no JSON bytes, always calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

import msgspec

from skillwire.errors import InvalidParamsError
from skillwire.protocol.limits import Limits

__all__ = ["check_json", "check_shape", "check_strings", "exceeded", "shape_may_exceed"]

_CHUNK = 64 * 1024
#: Bytes that are not brackets, deleted to leave the bracket sequence.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: Brackets as signed deltas for the running nesting sum: openers +1 (0x01), closers -1 (0xff).
_DELTAS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
#: Outside strings: characters of numbers and literals become "0", everything else a delimiter ",",
#: and whitespace goes, so each scalar is one run of "0" after a ",".
_SCALAR_CHARS = b"0123456789+-.eEtrufalsn"
_SCALARS = bytes.maketrans(bytes(range(256)), bytes(0x30 if b in _SCALAR_CHARS else 0x2C for b in range(256)))
_WHITESPACE = b" \t\r\n"

#: The encoded field names whose list holds a message's parts (v1.0 and v0.3 JSON-RPC ``parts``, v0.3
#: HTTP+JSON ``content``).
_PARTS = frozenset({"parts", "content"})


def exceeded(where: str, found: str, budget: str, limit: int) -> InvalidParamsError:
    """The error for a request past a budget: ``where: found, the limit is limit (budget)``."""
    reason = f"{found}, the limit is {limit} ({budget})"
    return InvalidParamsError(
        f"{where}: {reason}",
        metadata={"budget": budget, "limit": limit},
        field_violations=[(where, reason)],
    )


# -- the raw bytes ----------------------------------------------------------------------------------------


def check_json(body: bytes, limits: Limits, where: str) -> None:
    """Raise InvalidParamsError if ``body`` nests deeper than ``max_json_depth`` or holds more than
    ``max_json_nodes`` values. Linear in ``body`` and cheap for ordinary bodies; run it before decoding."""
    max_depth, max_nodes = limits.max_json_depth, limits.max_json_nodes
    size = len(body)
    if size <= max_depth and size <= max_nodes:
        return
    opens = body.count(b"[") + body.count(b"{")
    nodes_fit = size <= max_nodes or 1 + opens + body.count(b",") + body.count(b":") <= max_nodes
    if nodes_fit and opens <= max_depth:
        return
    nodes, brackets = _scan(body, max_nodes)
    if nodes > max_nodes:
        raise exceeded(where, f"more than {max_nodes} JSON values", "max_json_nodes", max_nodes)
    depth = max(accumulate(memoryview(brackets.translate(_DELTAS)).cast("b")), default=0)
    if depth > max_depth:
        raise exceeded(where, f"nesting {depth} levels deep", "max_json_depth", max_depth)


def _outside_strings(text: bytes) -> Iterator[bytes]:
    """The parts of ``text`` (escapes already dropped) outside strings, one joined piece per chunk."""
    inside = False
    for start in range(0, len(text), _CHUNK):
        pieces = text[start : start + _CHUNK].split(b'"')
        yield b"".join(pieces[1 if inside else 0 :: 2])
        if len(pieces) % 2 == 0:  # an odd number of quotes: the chunk ends on the other side
            inside = not inside


def _scan(body: bytes, stop: int) -> tuple[int, bytes]:
    """(the number of values in ``body``, its brackets outside strings) for valid JSON (for invalid JSON
    something close, which the decoder then refuses anyway); once the count passes ``stop`` it is returned
    at once, with the brackets seen so far."""
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    nodes = text.count(b'"') // 2
    if nodes > stop:
        return nodes, b""
    brackets: list[bytes] = []
    last = b","
    for outside in _outside_strings(text):
        kept = outside.translate(None, _NOT_BRACKETS)
        nodes += kept.count(b"[") + kept.count(b"{")
        brackets.append(kept)
        marks = outside.translate(_SCALARS, _WHITESPACE)
        if marks:
            nodes += (last + marks).count(b",0")  # a scalar run split by the chunk boundary counts once
            last = marks[-1:]
        if nodes > stop:
            break
    return nodes, b"".join(brackets)


def shape_may_exceed(body: bytes, limits: Limits) -> bool:
    """Whether the value decoded from ``body`` could break a shape budget (string length, parts per
    message, keys per metadata object), so that :func:`check_shape` must walk it. False for ordinary
    bodies, which then skip the walk."""
    if len(body) > limits.max_string_length:
        return True
    return body.count(b"{") > limits.max_parts or body.count(b":") > limits.max_metadata_keys


# -- the decoded value ------------------------------------------------------------------------------------

_Fields = tuple[tuple[str, str], ...]
_fields_cache: dict[type, _Fields] = {}


def _fields(cls: type[msgspec.Struct]) -> _Fields:
    """(attribute, encoded name) of each field of a Struct class."""
    fields = _fields_cache.get(cls)
    if fields is None:
        fields = _fields_cache[cls] = tuple(
            zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True)
        )
    return fields


class _Walk:
    """One walk over a decoded request, counting values; ``path`` holds the segments down to the value
    being looked at, rendered only for an error."""

    __slots__ = ("limits", "nodes", "path", "root")

    def __init__(self, limits: Limits, root: str) -> None:
        self.limits = limits
        self.root = root
        self.nodes = 0
        self.path: list[str | int] = []

    def where(self) -> str:
        out = [self.root]
        for seg in self.path:
            if isinstance(seg, int):
                out.append(f"[{seg}]")
            elif seg.isidentifier() and len(seg) <= 64:
                out.append(f".{seg}" if out[-1] else seg)
            else:
                shown = seg if len(seg) <= 64 else seg[:64] + "..."
                out.append(f"[{msgspec.json.encode(shown).decode()}]")
        return "".join(out) or "request"

    def fail(self, found: str, budget: str, limit: int) -> InvalidParamsError:
        return exceeded(self.where(), found, budget, limit)

    def value(self, value: Any, depth: int) -> None:
        self.nodes += 1
        limits = self.limits
        if self.nodes > limits.max_json_nodes:
            raise self.fail(
                f"more than {limits.max_json_nodes} JSON values", "max_json_nodes", limits.max_json_nodes
            )
        kind = type(value)
        if kind is str:
            if len(value) > limits.max_string_length:
                self.string(len(value))
        elif kind is bytes:
            if (len(value) + 2) // 3 * 4 > limits.max_string_length:  # as the base64 text it came as
                self.string((len(value) + 2) // 3 * 4)
        elif kind is list or kind is dict or isinstance(value, msgspec.Struct):
            if depth >= limits.max_json_depth:
                raise self.fail(
                    f"nesting more than {limits.max_json_depth} levels deep",
                    "max_json_depth",
                    limits.max_json_depth,
                )
            if kind is list:
                self.items(value, depth + 1)
            elif kind is dict:
                self.members(value, depth + 1)
            else:
                self.struct(value, depth + 1)

    def string(self, length: int) -> None:
        limit = self.limits.max_string_length
        raise self.fail(f"a string of {length} characters", "max_string_length", limit)

    def items(self, items: list[Any], depth: int) -> None:
        path = self.path
        for index, item in enumerate(items):
            path.append(index)
            self.value(item, depth)
            path.pop()

    def members(self, members: dict[Any, Any], depth: int) -> None:
        path = self.path
        for key, item in members.items():
            self.nodes += 1  # the key, as in check_json
            path.append(key)
            if isinstance(key, str) and len(key) > self.limits.max_string_length:
                self.string(len(key))
            self.value(item, depth)
            path.pop()

    def struct(self, struct: msgspec.Struct, depth: int) -> None:
        limits = self.limits
        path = self.path
        for attr, name in _fields(type(struct)):
            item = getattr(struct, attr)
            if item is None or item is msgspec.UNSET:
                continue
            path.append(name)
            if name in _PARTS and type(item) is list and len(item) > limits.max_parts:
                raise self.fail(f"{len(item)} parts", "max_parts", limits.max_parts)
            if name == "metadata" and type(item) is dict and len(item) > limits.max_metadata_keys:
                raise self.fail(f"{len(item)} keys", "max_metadata_keys", limits.max_metadata_keys)
            self.value(item, depth)
            path.pop()


def check_shape(value: Any, limits: Limits, where: str) -> None:
    """Raise InvalidParamsError if the decoded request ``value`` (a msgspec Struct of any protocol version,
    with builtins inside) breaks a budget: parts per message, keys per metadata object, string length
    (keys, values, and ``bytes`` as their base64 length), nesting depth or value count. ``where`` names
    the root in the message (``params``, ``body``; ``""`` for gRPC's request message)."""
    try:
        _Walk(limits, where).value(value, 0)
    except RecursionError:  # only with a max_json_depth above Python's recursion limit
        raise exceeded(
            where or "request", "nesting too deep to check", "max_json_depth", limits.max_json_depth
        ) from None


def check_strings(items: Iterable[tuple[str, str]], limits: Limits, where: str) -> None:
    """Raise InvalidParamsError if a ``(name, text)`` pair (query parameters, path segments) holds a
    string longer than ``max_string_length``, or there are more than ``max_json_nodes`` of them."""
    limit = limits.max_string_length
    for count, (name, text) in enumerate(items, 1):
        if count > limits.max_json_nodes:
            raise exceeded(
                where, f"more than {limits.max_json_nodes} values", "max_json_nodes", limits.max_json_nodes
            )
        longest = max(len(name), len(text))
        if longest > limit:
            named = f"{where}.{name[:64]}" if name else where
            raise exceeded(named, f"a string of {longest} characters", "max_string_length", limit)
