"""Direct conversion between the protocol Structs and the ``lf.a2a.v1`` protobuf messages (sans-IO).

The gRPC bindings used to cross through ProtoJSON text: a message printed by ``json_format.MessageToJson``
and decoded by msgspec, a Struct encoded by msgspec and parsed by ``json_format.Parse``. Both json_format
halves are slow Python walks over every field, a large share of a gRPC call's CPU. This module does what
they do without the text, with the same results::

    from a2a.types import a2a_pb2
    from skillwire.protocol import models as m

    message = struct_to_message(m.GetTaskRequest(id="t1", history_length=0), a2a_pb2.GetTaskRequest)
    request = message_to_struct(message, m.GetTaskRequest)                       # as a server reads it
    task = message_to_struct(reply, m.Task, with_defaults=True)                  # as a client reads it

Only the gRPC bindings import it (the ``skillwire[grpc]`` extra: protobuf, and a2a-sdk's ``a2a_pb2``).

**Message to Struct**: the message becomes the very object that ``MessageToJson`` prints, as Python values
rather than text (bytes stay bytes, a Timestamp becomes the ``datetime`` msgspec would parse), and
``msgspec.convert`` turns it into the Struct: it validates and names a bad field exactly as the JSON decoder
does (``Object missing required field `role` - at `$.message```). ``ListFields()`` lists what the printer
prints: the fields with presence that are set and the others that are not at their default.
``with_defaults=True`` adds the fields without presence at their default too (json_format's
``always_print_fields_with_no_presence``): a client reads replies so. Without it they are absent and so
missing if required, as a server reads requests (protobuf cannot tell ``""`` or ``ROLE_UNSPECIFIED`` from
unset). A number in a ``Value`` is a double: an integral one up to 2**53 becomes an int, as msgspec's
``float_hook`` made it; nanoseconds round half up to microseconds, as msgspec parses the printed digits.

**Struct to message**: ``msgspec.to_builtins`` gives what ``msgspec.json.encode`` writes, as Python values
(defaults left out, enums as their names, camelCase keys), keeping datetimes and bytes; that object is set
into the message the way ``json_format.ParseDict`` sets it. ``null`` leaves a field unset (a ``Value`` gets
``null_value``); in a ``Value`` NaN and infinities are ``null``, as msgspec writes them. Where protobuf's
setter refuses a value (an int32 out of range, an unknown enum name, a wrong type, a naive datetime), that
one field is handed to ``json_format.Parse`` after all, so its result or its error is json_format's own.
Nesting deeper than Parse's limit (:data:`MAX_DEPTH` messages, each level of a ``Value`` counting two) is
refused as Parse refused it.

**Plans**: each message descriptor gets a plan, built on first use: one row per field, of a kind, and each
kind has one reader and one writer (the tables ``_READERS`` and ``_WRITERS``):

==============  =================================  ========================================================
kind            protobuf field                     Python value (ProtoJSON object, text aside)
==============  =================================  ========================================================
``SCALAR``      string, bytes, bool, 32-bit ints   ``str``, ``bytes``, ``bool``, ``int``
``ENUM``        an enum                            the value's name (an unknown number: the number)
``MESSAGE``     a message                          ``dict`` (by its own plan)
``MESSAGES``    ``repeated`` message               ``list`` of ``dict``
``SCALARS``     ``repeated`` scalar                ``list``
``MAP``         ``map<string, message>``           ``dict`` of ``dict``
``SCALAR_MAP``  ``map<string, scalar>``            ``dict``
``TIME``        ``google.protobuf.Timestamp``      ``datetime`` (UTC)
``OBJECT``      ``google.protobuf.Struct``         ``dict`` of JSON values
``VALUE``       ``google.protobuf.Value``          any JSON value
==============  =================================  ========================================================

Other field types (64-bit ints, floats, other well-known types, non-string map keys) do not occur in
``lf.a2a.v1`` and are refused when a plan is built. Custom JSON names of enum values are not read.

Errors: a message that does not fit the Struct raises ``msgspec.ValidationError`` (as its ProtoJSON would);
a value without a ProtoJSON form (NaN in a ``Value``, a Timestamp out of range) or one that json_format
refuses to parse raises :class:`ConversionError`, whose ``path`` names the field in ProtoJSON names
(``message.metadata.x``). What msgspec raises while encoding user values (the TypeError of an unsupported
type, the UnicodeEncodeError of a lone surrogate) passes through unchanged, as it did on the ProtoJSON route.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import msgspec
from google.protobuf import json_format  # type: ignore[import-untyped]
from google.protobuf.descriptor import FieldDescriptor as FD  # type: ignore[import-untyped]

__all__ = ["MAX_DEPTH", "ConversionError", "message_to_struct", "struct_to_message"]

S = TypeVar("S", bound=msgspec.Struct)


class ConversionError(ValueError):
    """A value that has no place on the other side; ``path`` is the field in ProtoJSON names, e.g.
    ``message.parts[1].data.x`` (empty for the message itself)."""

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path

    def under(self, segment: str) -> ConversionError:
        """This error, one level further out: ``segment`` is a field name or an ``[index]``."""
        if not self.path:
            self.path = segment
        elif self.path.startswith("["):
            self.path = segment + self.path
        else:
            self.path = f"{segment}.{self.path}"
        return self

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


# -- plans ------------------------------------------------------------------------------------------------


class _Kind(enum.Enum):
    SCALAR = "scalar"
    ENUM = "enum"
    MESSAGE = "message"
    MESSAGES = "repeated message"
    SCALARS = "repeated scalar"
    MAP = "map of messages"
    SCALAR_MAP = "map of scalars"
    TIME = "google.protobuf.Timestamp"
    OBJECT = "google.protobuf.Struct"
    VALUE = "google.protobuf.Value"


_WELL_KNOWN = {
    "google.protobuf.Timestamp": _Kind.TIME,
    "google.protobuf.Struct": _Kind.OBJECT,
    "google.protobuf.Value": _Kind.VALUE,
}

#: Python type of a scalar in the ProtoJSON object, by cpp type (string: str, unless the field is bytes).
_SCALAR_TYPES: dict[int, type] = {
    FD.CPPTYPE_INT32: int,
    FD.CPPTYPE_UINT32: int,
    FD.CPPTYPE_BOOL: bool,
    FD.CPPTYPE_STRING: str,
}


class _Row:
    """One field of a plan: its names, its kind, and the Python type its fast path takes."""

    __slots__ = (
        "field",
        "item",
        "key",
        "kind",
        "name",
        "names",
        "numbers",
        "oneof",
        "plan",
        "python",
        "read",
        "write",
    )

    def __init__(self, field: Any, kind: _Kind, python: type | None) -> None:
        self.field = field
        self.name: str = field.name  # the attribute (snake_case)
        self.key: str = field.json_name  # the ProtoJSON name, as msgspec's rename="camel" writes it
        self.kind = kind
        #: the type of value the writer takes; any other goes to json_format (None: the writer takes any)
        self.python = python
        #: SCALARS, SCALAR_MAP: the type of item the writer takes; a list or map holding any other goes to
        #: json_format whole (protobuf's own setter would take UTF-8 bytes for a string, or True for an int)
        self.item: type | None = None
        self.plan: _Plan | None = None  # MESSAGE, MESSAGES, MAP: the plan of the (value) message
        self.names: dict[int, str] = {}  # ENUM: number -> name
        self.numbers: dict[str, int] = {}  # ENUM: name -> number
        oneof = field.containing_oneof
        #: a real oneof (not the one-member oneof of a proto3 ``optional``), where a second member is an error
        self.oneof: str | None = oneof.name if oneof is not None and len(oneof.fields) > 1 else None
        self.read = _READERS[kind]
        self.write = _WRITERS[kind]


class _Plan:
    __slots__ = ("by_field", "by_key", "defaults", "descriptor")

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor
        self.by_field: dict[Any, _Row] = {}  # field descriptor -> row
        self.by_key: dict[str, _Row] = {}  # ProtoJSON name and proto name -> row (Parse accepts both)
        #: ProtoJSON name -> what is printed for a field without presence at its default (``with_defaults``)
        self.defaults: dict[str, Any] = {}


_plans: dict[Any, _Plan] = {}


def _plan(descriptor: Any) -> _Plan:
    plan = _plans.get(descriptor)
    if plan is None:
        plan = _plans[descriptor] = _Plan(descriptor)  # cached before its rows: messages may nest
        try:
            for field in descriptor.fields:
                row = _row(field)
                plan.by_field[field] = row
                plan.by_key[row.key] = plan.by_key[row.name] = row
                if not field.has_presence:
                    plan.defaults[row.key] = _default(row)
        except BaseException:
            del _plans[descriptor]
            raise
    return plan


def _row(field: Any) -> _Row:
    sub = field.message_type
    if sub is not None and sub.GetOptions().map_entry:
        key, value = sub.fields_by_name["key"], sub.fields_by_name["value"]
        if key.cpp_type != FD.CPPTYPE_STRING:
            raise TypeError(f"{field.full_name}: only maps with string keys are supported")
        if value.message_type is not None:
            row = _Row(field, _Kind.MAP, dict)
            row.plan = _plan(value.message_type)
        else:
            row = _Row(field, _Kind.SCALAR_MAP, dict)
            row.item = _scalar_type(value)
    elif field.is_repeated:
        if sub is None:
            row = _Row(field, _Kind.SCALARS, list)
            row.item = _scalar_type(field)
            return row
        if sub.full_name.startswith("google.protobuf."):
            raise TypeError(f"{field.full_name}: repeated {sub.full_name} is not supported")
        row = _Row(field, _Kind.MESSAGES, list)
        row.plan = _plan(sub)
    elif sub is not None and sub.full_name in _WELL_KNOWN:
        kind = _WELL_KNOWN[sub.full_name]
        row = _Row(field, kind, {_Kind.TIME: datetime, _Kind.OBJECT: dict}.get(kind))
    elif sub is not None:
        if sub.full_name.startswith("google.protobuf."):
            raise TypeError(f"{field.full_name}: {sub.full_name} is not supported")
        row = _Row(field, _Kind.MESSAGE, dict)
        row.plan = _plan(sub)
    elif field.cpp_type == FD.CPPTYPE_ENUM:
        row = _Row(field, _Kind.ENUM, str)
        row.names = {v.number: v.name for v in field.enum_type.values}
        row.numbers = {v.name: v.number for v in field.enum_type.values}
    else:
        row = _Row(field, _Kind.SCALAR, _scalar_type(field))
    return row


def _scalar_type(field: Any) -> type:
    if field.type == FD.TYPE_BYTES:
        return bytes
    python = _SCALAR_TYPES.get(field.cpp_type)
    if python is None:
        raise TypeError(f"{field.full_name}: a field of type {field.type} is not supported")
    return python


def _default(row: _Row) -> Any:
    """What ``always_print_fields_with_no_presence`` prints for a field at its default."""
    if row.kind is _Kind.ENUM:
        return row.names[0]
    if row.kind in (_Kind.SCALARS, _Kind.MESSAGES):
        return []  # shared, but msgspec.convert copies every container into the Struct
    if row.kind in (_Kind.MAP, _Kind.SCALAR_MAP):
        return {}
    return row.field.default_value


# -- message -> Struct ------------------------------------------------------------------------------------


def message_to_struct(message: Any, struct_type: type[S], *, with_defaults: bool = False) -> S:
    """The ``struct_type`` that msgspec would decode from ``MessageToJson(message)``.

    ``with_defaults`` reads the fields without presence that are at their default as that value (a client
    reading a reply); without it they are absent, so a required one is missing (a server reading a request).
    Raises ``msgspec.ValidationError`` or :class:`ConversionError`::

        message_to_struct(a2a_pb2.GetTaskRequest(id="t1"), GetTaskRequest)  # GetTaskRequest(id="t1")
        message_to_struct(a2a_pb2.GetTaskRequest(), GetTaskRequest)         # ValidationError: ... `id`
    """
    data = _read(_plan(message.DESCRIPTOR), message, with_defaults)
    return msgspec.convert(data, struct_type)


def _read(plan: _Plan, message: Any, with_defaults: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    by_field = plan.by_field
    for field, value in message.ListFields():
        row = by_field[field]
        read = row.read
        if read is None:
            out[row.key] = value
            continue
        try:
            out[row.key] = read(row, value, with_defaults)
        except ConversionError as exc:
            raise exc.under(row.key) from None
    if with_defaults:  # after the set fields, as the printer adds them (the order shows in JSON objects)
        for key, default in plan.defaults.items():
            out.setdefault(key, default)
    return out


def _read_enum(row: _Row, number: int, with_defaults: bool) -> Any:
    return row.names.get(number, number)  # an unknown number prints as itself (and then fails the enum)


def _read_message(row: _Row, message: Any, with_defaults: bool) -> Any:
    assert row.plan is not None
    return _read(row.plan, message, with_defaults)


def _read_messages(row: _Row, messages: Any, with_defaults: bool) -> Any:
    assert row.plan is not None
    plan, out = row.plan, []
    for index, message in enumerate(messages):
        try:
            out.append(_read(plan, message, with_defaults))
        except ConversionError as exc:
            raise exc.under(f"[{index}]") from None
    return out


def _read_scalars(row: _Row, values: Any, with_defaults: bool) -> Any:
    return list(values)


def _read_map(row: _Row, entries: Any, with_defaults: bool) -> Any:
    assert row.plan is not None
    plan, out = row.plan, {}
    for key, message in entries.items():
        try:
            out[key] = _read(plan, message, with_defaults)
        except ConversionError as exc:
            raise exc.under(key) from None
    return out


def _read_scalar_map(row: _Row, entries: Any, with_defaults: bool) -> Any:
    return dict(entries)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECONDS_MIN = -62135596800  # 0001-01-01T00:00:00Z: the Timestamp range, which ProtoJSON checks
_SECONDS_MAX = 253402300799  # 9999-12-31T23:59:59Z


def _read_time(row: _Row, stamp: Any, with_defaults: bool) -> Any:
    seconds, nanos = stamp.seconds, stamp.nanos
    if not _SECONDS_MIN <= seconds <= _SECONDS_MAX or not 0 <= nanos < 1_000_000_000:
        raise ConversionError(f"not a valid Timestamp (seconds {seconds}, nanos {nanos})")
    try:
        return _EPOCH + timedelta(seconds=seconds, microseconds=(nanos + 500) // 1000)
    except OverflowError:  # rounds up past 9999-12-31T23:59:59.999999: msgspec refuses the text, as it did
        return stamp.ToJsonString()


def _read_object(row: _Row, struct: Any, with_defaults: bool) -> Any:
    return _object(struct)


def _read_value(row: _Row, value: Any, with_defaults: bool) -> Any:
    return _json(value)


def _number(value: float) -> int | float:
    """A double as msgspec's ``float_hook`` read it in the bindings: integral (up to 2**53) means int."""
    return int(value) if value.is_integer() and abs(value) <= 2**53 else value


def _json(value: Any) -> Any:
    """A ``google.protobuf.Value`` as a Python JSON value (a Value with no kind set prints as ``null``)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            raise ConversionError(f"{number} has no JSON form")
        return _number(number)
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _object(value.struct_value)
    if kind == "list_value":
        out = []
        for index, item in enumerate(value.list_value.values):
            try:
                out.append(_json(item))
            except ConversionError as exc:
                raise exc.under(f"[{index}]") from None
        return out
    return None


def _object(struct: Any) -> dict[str, Any]:
    out = {}
    for key, item in struct.fields.items():
        try:
            out[key] = _json(item)
        except ConversionError as exc:
            raise exc.under(key) from None
    return out


_READERS: dict[_Kind, Callable[[_Row, Any, bool], Any] | None] = {
    _Kind.SCALAR: None,  # as is
    _Kind.ENUM: _read_enum,
    _Kind.MESSAGE: _read_message,
    _Kind.MESSAGES: _read_messages,
    _Kind.SCALARS: _read_scalars,
    _Kind.MAP: _read_map,
    _Kind.SCALAR_MAP: _read_scalar_map,
    _Kind.TIME: _read_time,
    _Kind.OBJECT: _read_object,
    _Kind.VALUE: _read_value,
}


# -- Struct -> message ------------------------------------------------------------------------------------

#: Kept as they are by to_builtins: the writers take them directly (msgspec would write them as text).
_KEPT = (datetime, bytes)

#: json_format.Parse's nesting limit, counted in messages: each Struct, Value and ListValue is one.
MAX_DEPTH = 100


def struct_to_message(struct: Any, message_type: Any) -> Any:
    """A new ``message_type`` holding what ``json_format.Parse(msgspec.json.encode(struct))`` would set
    (``None`` gives the empty message). Raises :class:`ConversionError` where Parse raised ParseError::

        struct_to_message(GetTaskRequest(id="t1"), a2a_pb2.GetTaskRequest)  # id: "t1"
    """
    message = message_type()
    if struct is None:
        return message
    data = msgspec.to_builtins(struct, builtin_types=_KEPT, str_keys=True)
    if type(data) is not dict:  # not an object: json_format says what it makes of it
        _parse(data, message, 1)
    else:
        _write(_plan(message.DESCRIPTOR), data, message, 1)
    return message


def _write(plan: _Plan, data: dict[str, Any], message: Any, depth: int) -> None:
    """``data`` into ``message``, which sits ``depth`` messages deep (the top one is 1)."""
    _check_depth(depth)
    by_key = plan.by_key
    oneofs: set[str] | None = None
    for key, value in data.items():
        row = by_key.get(key)
        if row is None:  # a key of a dict given for a Struct: Parse refuses it
            _parse({key: value}, message, depth)
            continue
        if value is None or (type(value) is float and not math.isfinite(value)):
            # null (msgspec writes NaN and infinities as null): Parse leaves the field unset, but sets a
            # Value to null_value
            if row.kind is _Kind.VALUE:
                getattr(message, row.name).null_value = 0
            continue
        if row.oneof is not None:
            oneofs = oneofs if oneofs is not None else set()
            if row.oneof in oneofs:
                raise ConversionError(f"a second member of the oneof {row.oneof!r}", key)
            oneofs.add(row.oneof)
        try:
            if row.python is None or type(value) is row.python:
                row.write(row, message, value, depth)
            else:
                _parse({key: value}, message, depth)
        except ConversionError as exc:
            raise exc.under(key) from None


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ConversionError(f"Message too deep. Max recursion depth is {MAX_DEPTH}")


def _parse(data: Any, message: Any, depth: int) -> None:
    """The ProtoJSON route into ``message`` (``depth`` deep): json_format's result, or its error."""
    try:
        json_format.Parse(msgspec.json.encode(data), message, max_recursion_depth=MAX_DEPTH + 1 - depth)
    except json_format.ParseError as exc:
        raise ConversionError(str(exc).removesuffix(".")) from None


def _refused(row: _Row, message: Any, value: Any, depth: int) -> None:
    """A value protobuf's setter refused: json_format decides (for a repeated field, from scratch)."""
    message.ClearField(row.name)
    _parse({row.key: value}, message, depth)


def _write_scalar(row: _Row, message: Any, value: Any, depth: int) -> None:
    try:
        setattr(message, row.name, value)
    except (TypeError, ValueError):  # out of range, a lone surrogate ...
        _refused(row, message, value, depth)


def _write_enum(row: _Row, message: Any, value: str, depth: int) -> None:
    number = row.numbers.get(value)
    if number is None:
        _refused(row, message, value, depth)
    else:
        setattr(message, row.name, number)


def _write_message(row: _Row, message: Any, value: dict[str, Any], depth: int) -> None:
    assert row.plan is not None
    target = getattr(message, row.name)
    target.SetInParent()  # present even if every field of it is at its default, as Parse makes it
    _write(row.plan, value, target, depth + 1)


def _write_messages(row: _Row, message: Any, values: list[Any], depth: int) -> None:
    assert row.plan is not None
    plan, target = row.plan, getattr(message, row.name)
    for index, value in enumerate(values):
        if type(value) is not dict:  # null or not an object: json_format's error
            _refused(row, message, values, depth)
            return
        try:
            _write(plan, value, target.add(), depth + 1)
        except ConversionError as exc:
            raise exc.under(f"[{index}]") from None


def _write_scalars(row: _Row, message: Any, values: list[Any], depth: int) -> None:
    item = row.item
    if not all(type(value) is item for value in values):
        _refused(row, message, values, depth)
        return
    try:
        getattr(message, row.name).extend(values)
    except (TypeError, ValueError):
        _refused(row, message, values, depth)


def _write_map(row: _Row, message: Any, values: dict[str, Any], depth: int) -> None:
    assert row.plan is not None
    plan, target = row.plan, getattr(message, row.name)
    for key, value in values.items():
        if type(value) is not dict:
            _refused(row, message, values, depth)
            return
        try:
            _write(plan, value, target[key], depth + 1)
        except ConversionError as exc:
            raise exc.under(key) from None


def _write_scalar_map(row: _Row, message: Any, values: dict[str, Any], depth: int) -> None:
    item = row.item
    if not all(type(value) is item for value in values.values()):
        _refused(row, message, values, depth)
        return
    try:
        getattr(message, row.name).update(values)
    except (TypeError, ValueError):
        _refused(row, message, values, depth)


def _write_time(row: _Row, message: Any, value: datetime, depth: int) -> None:
    _check_depth(depth + 1)
    offset = value.utcoffset()
    if offset is None or offset % timedelta(minutes=1):
        # naive: Parse refuses it; or an offset with seconds, which msgspec writes cut to the minute
        _refused(row, message, value, depth)
        return
    delta = value - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    if not _SECONDS_MIN <= seconds <= _SECONDS_MAX:
        _refused(row, message, value, depth)
        return
    stamp = getattr(message, row.name)
    stamp.seconds = seconds
    stamp.nanos = delta.microseconds * 1000


def _write_object(row: _Row, message: Any, value: dict[str, Any], depth: int) -> None:
    _put_object(getattr(message, row.name), value, depth + 1)


def _write_value(row: _Row, message: Any, value: Any, depth: int) -> None:
    _put_json(getattr(message, row.name), value, depth + 1)


def _put_object(target: Any, value: dict[str, Any], depth: int) -> None:
    """A JSON object into a ``google.protobuf.Struct``; an empty one is still set, as Parse sets it."""
    _check_depth(depth)
    target.SetInParent()
    fields = target.fields
    for key, item in value.items():
        try:
            _put_json(fields[key], item, depth + 1)
        except ConversionError as exc:
            raise exc.under(key) from None


def _put_json(target: Any, value: Any, depth: int) -> None:
    """A JSON value into a ``google.protobuf.Value``, as msgspec writes it and Parse reads it back."""
    _check_depth(depth)
    kind = type(value)
    if kind is str:
        target.string_value = value
    elif kind is bool:
        target.bool_value = value
    elif kind is int:
        try:
            target.number_value = value
        except OverflowError as exc:  # past a double; Parse wraps every error it meets
            raise ConversionError(f"OverflowError: {exc}") from None
    elif kind is float:
        if math.isfinite(value):
            target.number_value = value
        else:  # msgspec writes NaN and infinities as null
            target.null_value = 0
    elif value is None:
        target.null_value = 0
    elif kind is dict:
        _put_object(target.struct_value, value, depth + 1)
    elif kind is list or kind is tuple:
        _check_depth(depth + 1)
        values = target.list_value.values
        target.list_value.SetInParent()
        for index, item in enumerate(value):
            try:
                _put_json(values.add(), item, depth + 2)
            except ConversionError as exc:
                raise exc.under(f"[{index}]") from None
    else:  # a datetime or bytes that to_builtins kept: what msgspec writes for it
        _put_json(target, msgspec.to_builtins(value, str_keys=True), depth)


_WRITERS: dict[_Kind, Callable[[_Row, Any, Any, int], None]] = {
    _Kind.SCALAR: _write_scalar,
    _Kind.ENUM: _write_enum,
    _Kind.MESSAGE: _write_message,
    _Kind.MESSAGES: _write_messages,
    _Kind.SCALARS: _write_scalars,
    _Kind.MAP: _write_map,
    _Kind.SCALAR_MAP: _write_scalar_map,
    _Kind.TIME: _write_time,
    _Kind.OBJECT: _write_object,
    _Kind.VALUE: _write_value,
}
