"""ProtoJSON decoding of request messages.

ProtoJSON writers use lowerCamelCase names, but parsers must also accept the original proto field names
(``history_length`` for ``historyLength``), and some clients send them. The fast path decodes JSON names
directly; only a body holding a *key* that is one of the schema's proto names (those that differ from their
JSON name) takes the slow path, which renames proto names to JSON names *by schema* (so keys inside
``metadata`` and ``data`` values, which are user data, are never touched) and decodes again. Unknown fields
are ignored either way. (Looking for an underscore anywhere would not do: every message says
``"role":"ROLE_USER"``.)
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import inspect as mi

__all__ = ["Decoder", "rename"]


class _Names:
    __slots__ = ("by_key",)

    def __init__(self, info: mi.StructType) -> None:
        self.by_key: dict[str, mi.Field] = {}
        for f in info.fields:
            self.by_key[f.name] = f
            self.by_key[f.encode_name] = f


_names_cache: dict[type, _Names] = {}


def _names(info: mi.StructType) -> _Names:
    names = _names_cache.get(info.cls)
    if names is None:
        names = _names_cache[info.cls] = _Names(info)
    return names


def _rename(t: mi.Type, value: Any) -> Any:
    if isinstance(t, mi.StructType) and isinstance(value, dict):
        by_key = _names(t).by_key
        out: dict[str, Any] = {}
        for key, item in value.items():
            f = by_key.get(key)
            if f is None:
                out[key] = item
            else:
                out[f.encode_name] = _rename(f.type, item)
        return out
    if isinstance(t, mi.ListType) and isinstance(value, list):
        return [_rename(t.item_type, item) for item in value]
    if isinstance(t, mi.UnionType):
        for option in t.types:
            if isinstance(option, mi.StructType) and isinstance(value, dict):
                return _rename(option, value)
            if isinstance(option, mi.ListType) and isinstance(value, list):
                return _rename(option, value)
    return value


_info_cache: dict[type, mi.Type] = {}


def rename(struct: type[msgspec.Struct], value: Any) -> Any:
    """``value`` (decoded JSON for ``struct``) with proto field names renamed to JSON names, by schema."""
    info = _info_cache.get(struct)
    if info is None:
        info = _info_cache[struct] = mi.type_info(struct)
    return _rename(info, value)


def _proto_names(t: mi.Type, seen: set[type], out: set[str]) -> None:
    """The field names under ``t`` that differ from their JSON names."""
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return
        seen.add(t.cls)
        for f in t.fields:
            if f.name != f.encode_name:
                out.add(f.name)
            _proto_names(f.type, seen, out)
    elif isinstance(t, mi.ListType):
        _proto_names(t.item_type, seen, out)
    elif isinstance(t, mi.UnionType):
        for option in t.types:
            _proto_names(option, seen, out)


def _proto_key(info: mi.Type) -> re.Pattern[bytes] | None:
    """A pattern finding a proto name used as a key (a quoted name, then a colon), or None if there are none.
    An alternation of literals: linear in the body."""
    names: set[str] = set()
    _proto_names(info, set(), names)
    if not names:
        return None
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
    return re.compile(b'"(?:' + alternatives + rb')"\s*:')


class Decoder:
    """Decodes JSON bytes into ``type_``, accepting camelCase and proto (snake_case) field names."""

    def __init__(self, type_: type[msgspec.Struct]) -> None:
        self._decoder = msgspec.json.Decoder(type_)
        self._info = mi.type_info(type_)
        self._proto_key = _proto_key(self._info)

    def decode(self, raw: bytes | msgspec.Raw) -> Any:
        if isinstance(raw, msgspec.Raw):
            raw = bytes(memoryview(raw))
        if self._proto_key is None or self._proto_key.search(raw) is None:
            return self._decoder.decode(raw)
        try:
            value = msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return self._decoder.decode(raw)  # raises the same error the fast path would
        return self._decoder.decode(msgspec.json.encode(_rename(self._info, value)))
