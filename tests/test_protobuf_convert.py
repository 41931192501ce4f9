"""The direct protobuf <-> Struct conversion gives what the ProtoJSON route gave, value for value and error
for error.

The oracle is the route the gRPC bindings took before (``json_format.MessageToJson`` then msgspec's decoder
with a ``float_hook``; ``msgspec.json.encode`` then ``json_format.Parse``). Hypothesis compares the two over
random Structs of every protocol type, Structs with a field of the wrong type, random protobuf messages (most
of them invalid requests) and valid ones; golden cases pin the corners by name.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format, message_factory, struct_pb2, timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from skillwire import TaskState
from skillwire.client.grpc import _to_message as client_to_message
from skillwire.client.grpc import _to_struct as client_to_struct
from skillwire.errors import InvalidParamsError
from skillwire.protocol import models as m
from skillwire.server.bindings.grpc import to_struct as server_to_struct
from skillwire.wire.protobuf import MAX_DEPTH, ConversionError, message_to_struct, struct_to_message

#: Every Struct of the protocol with its protobuf message (same name): all that the 11 rpcs carry.
PAIRS: list[tuple[type[msgspec.Struct], Any]] = [
    (getattr(m, name), getattr(pb, name))
    for name in m.__all__
    if isinstance(getattr(m, name), type)
    and issubclass(getattr(m, name), msgspec.Struct)
    and hasattr(pb, name)
]
PAIR_IDS = [struct.__name__ for struct, _ in PAIRS]
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the ProtoJSON route, as the bindings had it --------------------------------------------------------------


def _number(literal: str) -> int | float:
    value = float(literal)
    return int(value) if value.is_integer() and abs(value) <= 2**53 else value


def protojson_to_struct(message: Any, struct_type: type[Any], with_defaults: bool) -> Any:
    text = json_format.MessageToJson(
        message,
        preserving_proto_field_name=False,
        always_print_fields_with_no_presence=with_defaults,
        indent=None,
    )
    return msgspec.json.Decoder(struct_type, float_hook=_number).decode(text)


def protojson_to_message(struct: Any, message_type: Any) -> Any:
    message = message_type()
    json_format.Parse(msgspec.json.encode(struct), message, ignore_unknown_fields=False)
    return message


def outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, call()
    except Exception as exc:
        return False, exc


def assert_same_failure(expected: BaseException, got: Any) -> None:
    """A ParseError or SerializeToJsonError becomes ConversionError; msgspec's errors stay word for word;
    anything else (TypeError, UnicodeEncodeError ...) keeps its class."""
    assert isinstance(got, Exception), f"the ProtoJSON route raised {expected!r}, the direct one gave {got!r}"
    if isinstance(expected, json_format.Error):
        assert isinstance(got, ConversionError), (expected, got)
    elif isinstance(expected, msgspec.ValidationError):
        assert type(got) is msgspec.ValidationError and str(got) == str(expected)
    else:
        assert type(got) is type(expected), (expected, got)


def assert_same_struct(message: Any, struct_type: type[Any], with_defaults: bool) -> Any:
    ok, expected = outcome(lambda: protojson_to_struct(message, struct_type, with_defaults))
    done, got = outcome(lambda: message_to_struct(message, struct_type, with_defaults=with_defaults))
    if not ok:
        assert_same_failure(expected, got)
        return None
    assert done, f"the direct route raised {got!r} for {message}"
    assert type(got) is type(expected)
    assert got == expected
    assert msgspec.json.encode(got) == msgspec.json.encode(expected)  # 42 vs 42.0, +00:00 vs Z
    return got


def assert_same_message(struct: Any, message_type: Any) -> Any:
    ok, expected = outcome(lambda: protojson_to_message(struct, message_type))
    done, got = outcome(lambda: struct_to_message(struct, message_type))
    if not ok:
        assert_same_failure(expected, got)
        return None
    assert done, f"the direct route raised {got!r} for {struct!r}"
    assert got == expected
    assert got.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    return got


# -- strategies: Structs ------------------------------------------------------------------------------------

TIMEZONES = [
    UTC,
    timezone(timedelta(hours=5, minutes=30)),
    timezone(timedelta(hours=-8)),
    timezone(timedelta(hours=14)),
    timezone(timedelta(hours=1, seconds=30)),  # msgspec writes it cut to +01:00
]
aware_datetimes = st.datetimes(timezones=st.sampled_from(TIMEZONES))
datetimes = st.one_of(aware_datetimes, aware_datetimes, aware_datetimes, st.datetimes())  # naive: refused

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.sampled_from([0.0, -0.0, 42.0, 2.0**53, 2.0**53 + 2, 1e300, math.nan, math.inf])
    | st.text(max_size=8)
)
#: What msgspec writes as JSON without being JSON: to_builtins' work on both routes.
exotic = (
    aware_datetimes
    | st.datetimes()
    | st.binary(max_size=4)
    | st.sampled_from(list(TaskState))
    | st.tuples(json_leaves, json_leaves)
    | st.frozensets(st.integers(0, 5), max_size=2)
)
json_values = st.recursive(
    json_leaves | exotic,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        | st.dictionaries(st.integers(0, 9), inner, max_size=2)
    ),  # msgspec writes int keys as strings
    max_leaves=10,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)

INT32 = (-(2**31), 2**31 - 1)


def strategy_for(t: mi.Type) -> st.SearchStrategy[Any]:
    if isinstance(t, mi.UnionType):
        return st.one_of(*(strategy_for(u) for u in t.types))
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.StrType):
        return st.text(min_size=t.min_length or 0, max_size=8)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.IntType):
        low = t.ge if t.ge is not None else INT32[0]
        high = t.le if t.le is not None else INT32[1]
        return st.integers(low, high) | st.sampled_from([low, high, 2**31, -(2**31) - 1])
    if isinstance(t, mi.BytesType):
        return st.binary(max_size=6)
    if isinstance(t, mi.DateTimeType):
        return datetimes
    if isinstance(t, mi.EnumType):
        return st.sampled_from(list(t.cls))
    if isinstance(t, mi.AnyType):
        return json_values
    if isinstance(t, mi.ListType):
        return st.lists(strategy_for(t.item_type), max_size=2)
    if isinstance(t, mi.DictType):
        if isinstance(t.value_type, mi.AnyType):
            return json_objects
        return st.dictionaries(st.text(max_size=6), strategy_for(t.value_type), max_size=2)
    if isinstance(t, mi.StructType):
        return structs(t.cls)
    raise AssertionError(f"no strategy for {t}")


def _scheme_dicts(with_defaults: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Security schemes as the card holds them: the ProtoJSON of a random SecurityScheme."""
    return pb_messages(pb.SecurityScheme.DESCRIPTOR).map(
        lambda s: json_format.MessageToDict(s, always_print_fields_with_no_presence=with_defaults)
    )


#: Fields whose values are not built from their type alone.
OVERRIDES: dict[tuple[type[Any], str], Callable[[], st.SearchStrategy[Any]]] = {
    (m.AgentCard, "security_schemes"): lambda: st.dictionaries(
        st.text(max_size=6), _scheme_dicts(False) | _scheme_dicts(True), max_size=2
    ),
}


@functools.cache
def structs(cls: type[Any]) -> st.SearchStrategy[Any]:
    if cls is m.Part:
        return parts()
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    strategies = {
        f.name: OVERRIDES[(cls, f.name)]() if (cls, f.name) in OVERRIDES else strategy_for(f.type)
        for f in info.fields
    }
    required = {f.name: strategies[f.name] for f in info.fields if f.required}
    optional = {f.name: strategies[f.name] for f in info.fields if not f.required}
    built = st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))
    if cls in (m.StreamResponse, m.SendMessageResponse):  # oneofs: mostly one member, sometimes several
        one = st.one_of(*(st.builds(cls, **{name: s}) for name, s in optional.items()))
        return one | one | built
    return built


def parts() -> st.SearchStrategy[m.Part]:
    contents = {
        "text": st.text(max_size=8),
        "raw": st.binary(max_size=8),
        "url": st.text(max_size=8),
        "data": json_values,
    }
    extras = {
        "metadata": st.none() | json_objects,
        "filename": st.text(max_size=4),
        "media_type": st.text(max_size=4),
    }
    return st.one_of(
        *(
            st.fixed_dictionaries({name: s}, optional=extras).map(lambda kw: m.Part(**kw))
            for name, s in contents.items()
        )
    )


# -- strategies: protobuf messages --------------------------------------------------------------------------

pb_values = st.recursive(
    st.builds(lambda x: struct_pb2.Value(number_value=x), st.floats())
    | st.builds(lambda x: struct_pb2.Value(number_value=x), st.integers(-(2**60), 2**60).map(float))
    | st.builds(lambda s: struct_pb2.Value(string_value=s), st.text(max_size=5))
    | st.builds(lambda b: struct_pb2.Value(bool_value=b), st.booleans())
    | st.builds(lambda: struct_pb2.Value(null_value=0))
    | st.builds(struct_pb2.Value),  # no kind set: printed as null
    lambda inner: (
        st.builds(
            lambda xs: struct_pb2.Value(list_value=struct_pb2.ListValue(values=xs)),
            st.lists(inner, max_size=3),
        )
        | st.builds(
            lambda d: struct_pb2.Value(struct_value=struct_pb2.Struct(fields=d)),
            st.dictionaries(st.text(max_size=4), inner, max_size=3),
        )
    ),
    max_leaves=8,
)
pb_structs = st.builds(struct_pb2.Struct, fields=st.dictionaries(st.text(max_size=4), pb_values, max_size=3))
pb_timestamps = st.builds(
    timestamp_pb2.Timestamp,
    seconds=st.integers(-62135596800, 253402300799)
    | st.sampled_from([-62135596801, 253402300799, 253402300800, 0, 1_700_000_000]),
    nanos=st.integers(0, 999_999_999) | st.sampled_from([0, 500, 499, 999_999_500, 999_999_999, -1, 10**9]),
)


def _pb_field(field: Any, depth: int) -> st.SearchStrategy[Any]:
    sub = field.message_type
    if sub is not None:
        if sub.full_name == "google.protobuf.Timestamp":
            return pb_timestamps
        if sub.full_name == "google.protobuf.Struct":
            return pb_structs
        if sub.full_name == "google.protobuf.Value":
            return pb_values
        return pb_messages(sub, depth + 1)
    if field.enum_type is not None:
        return st.sampled_from([v.number for v in field.enum_type.values] + [99])
    if field.type == field.TYPE_BYTES:
        return st.binary(max_size=6)
    if field.cpp_type == field.CPPTYPE_BOOL:
        return st.booleans()
    if field.cpp_type == field.CPPTYPE_INT32:
        return st.integers(*INT32) | st.sampled_from([0, 1, 5, 100, 101, -1])
    return st.text(max_size=6) | st.just("")


def _entry(field: Any, depth: int) -> st.SearchStrategy[Any]:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        value = entry.fields_by_name["value"]
        return st.dictionaries(st.text(max_size=4), _pb_field(value, depth), max_size=2)
    if field.is_repeated:
        return st.lists(_pb_field(field, depth), max_size=2)
    return _pb_field(field, depth)


def _build(cls: Any, values: dict[str, Any]) -> Any:
    message = cls()
    for name, value in values.items():
        field = cls.DESCRIPTOR.fields_by_name[name]
        target = getattr(message, name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            for key, item in value.items():
                if entry.fields_by_name["value"].message_type is not None:
                    target[key].CopyFrom(item)
                else:
                    target[key] = item
        elif field.is_repeated:
            for item in value:
                if entry is not None:
                    target.add().CopyFrom(item)
                else:
                    target.append(item)
        elif entry is not None:
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


@functools.cache
def pb_messages(descriptor: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    cls = message_factory.GetMessageClass(descriptor)
    if depth > 4:
        return st.builds(cls)
    fields = {f.name: _entry(f, depth) for f in descriptor.fields}
    return st.fixed_dictionaries({}, optional=fields).map(lambda values: _build(cls, values))


# -- properties ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("struct_type", "message_type"), PAIRS, ids=PAIR_IDS)
@PROPERTY
@given(data=st.data())
def test_structs_become_the_messages_protojson_makes(
    struct_type: type[Any], message_type: Any, data: st.DataObject
) -> None:
    assert_same_message(data.draw(structs(struct_type)), message_type)


junk = (
    json_values
    | st.integers()
    | st.builds(m.Part, text=st.text(max_size=3))
    | st.lists(json_values, max_size=2)
)


@pytest.mark.parametrize(("struct_type", "message_type"), PAIRS, ids=PAIR_IDS)
@PROPERTY
@given(data=st.data())
def test_a_field_of_the_wrong_type_fares_as_on_protojson(
    struct_type: type[Any], message_type: Any, data: st.DataObject
) -> None:
    """Structs do not check types when built: a str for an enum, a dict for a Struct, a float for an int."""
    struct = data.draw(structs(struct_type))
    name = data.draw(st.sampled_from(struct.__struct_fields__))
    bad = msgspec.structs.replace(struct, **{name: data.draw(junk)}) if struct_type is not m.Part else struct
    assert_same_message(bad, message_type)


@pytest.mark.parametrize("with_defaults", [False, True], ids=["server", "client"])
@pytest.mark.parametrize(("struct_type", "message_type"), PAIRS, ids=PAIR_IDS)
@PROPERTY
@given(data=st.data())
def test_random_messages_read_as_protojson_reads_them(
    struct_type: type[Any], message_type: Any, with_defaults: bool, data: st.DataObject
) -> None:
    message = data.draw(pb_messages(message_type.DESCRIPTOR))
    assert_same_struct(message, struct_type, with_defaults)


@pytest.mark.parametrize("with_defaults", [False, True], ids=["server", "client"])
@pytest.mark.parametrize(("struct_type", "message_type"), PAIRS, ids=PAIR_IDS)
@PROPERTY
@given(data=st.data())
def test_valid_messages_read_back_as_protojson_reads_them(
    struct_type: type[Any], message_type: Any, with_defaults: bool, data: st.DataObject
) -> None:
    ok, message = outcome(lambda: protojson_to_message(data.draw(structs(struct_type)), message_type))
    if ok:
        assert_same_struct(message, struct_type, with_defaults)


# -- golden cases: values -----------------------------------------------------------------------------------


def user_message(**fields: Any) -> m.Message:
    return m.Message(message_id="m-1", role=m.Role.USER, parts=[m.Part(text="hi")], **fields)


def test_json_values_keep_their_shape_and_integral_numbers_come_back_as_ints() -> None:
    metadata = {
        "int": 42,
        "float": 1.5,
        "whole float": 3.0,
        "past 2**53": 2**60,
        "null": None,
        "yes": True,
        "nested": [1, [2.5, {"x": None, "y": []}], {}],
        "empty": {},
        "text": "é\u0000✓",
    }
    request = m.SendMessageRequest(message=user_message(), metadata=metadata)
    message = assert_same_message(request, pb.SendMessageRequest)
    assert (
        message.metadata["int"] == 42.0 and message.metadata.fields["null"].WhichOneof("kind") == "null_value"
    )
    assert message.metadata.fields["empty"].WhichOneof("kind") == "struct_value"
    back = assert_same_struct(message, m.SendMessageRequest, with_defaults=False)
    assert back.metadata == {**metadata, "whole float": 3, "past 2**53": float(2**60)}
    assert type(back.metadata["whole float"]) is int and type(back.metadata["past 2**53"]) is float


def test_nan_and_infinity_are_null_on_the_way_out_and_refused_on_the_way_in() -> None:
    out = assert_same_message(m.Part(data=[math.nan, -math.inf, 1.0]), pb.Part)
    assert [v.WhichOneof("kind") for v in out.data.list_value.values] == [
        "null_value",
        "null_value",
        "number_value",
    ]
    request = pb.SendMessageRequest(
        message=pb.Message(message_id="m", role=pb.ROLE_USER, parts=[pb.Part(text="a")])
    )
    request.message.metadata.update({"x": {"y": [1, float("nan")]}})
    with pytest.raises(ConversionError) as caught:
        message_to_struct(request, m.SendMessageRequest)
    assert caught.value.path == "message.metadata.x.y[1]"
    with pytest.raises(InvalidParamsError) as invalid:
        server_to_struct(request, m.SendMessageRequest)
    assert invalid.value.field_violations[0][0] == "message.metadata.x.y[1]"
    assert "message.metadata.x.y[1]" in invalid.value.message
    assert_same_struct(request, m.SendMessageRequest, with_defaults=True)


def test_bytes_travel_raw() -> None:
    part = m.Part(raw=b"\x00\xff binary", filename="f.bin", media_type="application/octet-stream")
    message = assert_same_message(part, pb.Part)
    assert message.raw == b"\x00\xff binary" and message.WhichOneof("content") == "raw"
    assert assert_same_struct(message, m.Part, with_defaults=True) == part


@pytest.mark.parametrize(
    "items",
    [[b"\x00"], [b"ok"], ["a", b"b"], [1], [True], [1.5], [None], [["a"]]],
    ids=["nul-bytes", "bytes", "str-then-bytes", "int", "bool", "float", "null", "list"],
)
def test_a_repeated_string_of_items_of_another_type_fares_as_on_protojson(items: list[Any]) -> None:
    """protobuf's own setter takes UTF-8 bytes for a string (``\\x00``, where msgspec writes base64 ``AA==``)."""
    assert_same_message(m.AgentSkill(id="s", name="s", description="", tags=items), pb.AgentSkill)


@pytest.mark.parametrize(
    "value", [b"\x00", b"ok", 1, True, None], ids=["nul-bytes", "bytes", "int", "bool", "null"]
)
def test_a_map_of_strings_holding_another_type_fares_as_on_protojson(value: Any) -> None:
    flow = {"clientCredentials": {"tokenUrl": "https://idp.example/token", "scopes": {"read": value}}}
    card = m.AgentCard(
        name="a", description="", supported_interfaces=[], version="1", capabilities=m.AgentCapabilities(),
        default_input_modes=[], default_output_modes=[], skills=[],
        security_schemes={"idp": {"oauth2SecurityScheme": {"flows": flow}}},
    )  # fmt: skip
    assert_same_message(card, pb.AgentCard)


@pytest.mark.parametrize(
    ("seconds", "nanos", "expected"),
    [
        (0, 0, datetime(1970, 1, 1, tzinfo=UTC)),
        (1_700_000_000, 123_456_789, datetime(2023, 11, 14, 22, 13, 20, 123457, tzinfo=UTC)),
        (1_700_000_000, 123_456_499, datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)),
        (1_700_000_000, 999_999_500, datetime(2023, 11, 14, 22, 13, 21, tzinfo=UTC)),
        (1_700_000_000, 500, datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=UTC)),
        (-62135596800, 0, datetime(1, 1, 1, tzinfo=UTC)),
        (253402300799, 999_999_000, datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ],
)
def test_timestamps_read_to_the_microsecond_msgspec_parses(
    seconds: int, nanos: int, expected: datetime
) -> None:
    status = pb.TaskStatus(
        state=pb.TASK_STATE_WORKING, timestamp=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)
    )
    got = assert_same_struct(status, m.TaskStatus, with_defaults=False)
    assert got.timestamp == expected and got.timestamp.tzinfo is UTC


@pytest.mark.parametrize(
    ("seconds", "nanos"), [(253402300799, 999_999_999), (253402300800, 0), (0, -1), (0, 10**9)]
)
def test_timestamps_protojson_cannot_hold_fail_alike(seconds: int, nanos: int) -> None:
    status = pb.TaskStatus(
        state=pb.TASK_STATE_WORKING, timestamp=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)
    )
    for with_defaults in (False, True):
        assert assert_same_struct(status, m.TaskStatus, with_defaults) is None


@pytest.mark.parametrize(
    "when",
    [
        datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=UTC),
        datetime(2024, 2, 29, 17, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2024, 2, 29, 4, 0, tzinfo=timezone(timedelta(hours=-8))),
        datetime(2024, 2, 29, 13, 0, 30, tzinfo=timezone(timedelta(hours=1, seconds=30))),
        datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))),  # before year 1 in UTC
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 0),  # naive: ProtoJSON wants an offset
    ],
    ids=["utc", "plus-0530", "minus-08", "offset-with-seconds", "before-year-1", "last-microsecond", "naive"],
)
def test_timestamps_are_written_as_parse_reads_msgspec_text(when: datetime) -> None:
    status = m.TaskStatus(state=TaskState.WORKING, timestamp=when)
    message = assert_same_message(status, pb.TaskStatus)
    if when.tzinfo is not None and when.year > 1 and when.utcoffset() == timedelta(0):
        assert message.timestamp.ToDatetime(tzinfo=UTC) == when


def test_enums_by_name_and_an_unknown_number_fails_alike() -> None:
    for state in TaskState:
        status = assert_same_message(m.TaskStatus(state=state), pb.TaskStatus)
        assert pb.TaskState.Name(status.state) == state.value
        if state is not TaskState.UNSPECIFIED:
            assert assert_same_struct(status, m.TaskStatus, with_defaults=False).state is state
    for role in m.Role:
        message = assert_same_message(
            m.Message(message_id="m", role=role, parts=[m.Part(text="x")]), pb.Message
        )
        assert assert_same_struct(message, m.Message, with_defaults=True).role is role
    unknown = pb.Message(message_id="m", role=99, parts=[pb.Part(text="x")])
    with pytest.raises(msgspec.ValidationError, match=r"Expected `str`, got `int` - at `\$.role`"):
        message_to_struct(unknown, m.Message, with_defaults=True)
    assert_same_struct(unknown, m.Message, with_defaults=False)


def test_an_unspecified_role_is_missing_for_a_server_and_a_value_for_a_client() -> None:
    message = pb.Message(message_id="m", parts=[pb.Part(text="x")])
    with pytest.raises(msgspec.ValidationError, match="missing required field `role`"):
        message_to_struct(message, m.Message)
    assert message_to_struct(message, m.Message, with_defaults=True).role is m.Role.UNSPECIFIED
    assert_same_struct(message, m.Message, with_defaults=False)


def test_optional_fields_keep_presence_and_zero_is_not_unset() -> None:
    zero = assert_same_message(m.GetTaskRequest(id="t", history_length=0), pb.GetTaskRequest)
    unset = assert_same_message(m.GetTaskRequest(id="t"), pb.GetTaskRequest)
    assert zero.HasField("history_length") and not unset.HasField("history_length")
    assert message_to_struct(zero, m.GetTaskRequest).history_length == 0
    assert message_to_struct(unset, m.GetTaskRequest).history_length is None
    listing = assert_same_message(
        m.ListTasksRequest(include_artifacts=False, page_size=100), pb.ListTasksRequest
    )
    assert listing.HasField("include_artifacts") and not listing.HasField("history_length")
    assert message_to_struct(listing, m.ListTasksRequest) == m.ListTasksRequest(
        include_artifacts=False, page_size=100
    )
    card = m.AgentCapabilities(streaming=False)
    assert assert_same_message(card, pb.AgentCapabilities).HasField("streaming")


def test_empty_metadata_is_present_and_empty_lists_are_not() -> None:
    message = assert_same_message(user_message(metadata={}, extensions=[]), pb.Message)
    assert message.HasField("metadata") and len(message.extensions) == 0
    assert assert_same_struct(message, m.Message, with_defaults=False).metadata == {}
    assert assert_same_struct(message, m.Message, with_defaults=True).extensions == []
    bare = assert_same_message(user_message(), pb.Message)
    assert not bare.HasField("metadata")
    assert message_to_struct(bare, m.Message).metadata is None


def test_oneofs_hold_one_member_and_a_second_one_is_refused() -> None:
    for part in (
        m.Part(text=""),
        m.Part(raw=b""),
        m.Part(url="https://x"),
        m.Part(data=None),
        m.Part(data={}),
    ):
        message = assert_same_message(part, pb.Part)
        assert message.WhichOneof("content") == next(
            k for k in ("text", "raw", "url", "data") if getattr(part, k) is not msgspec.UNSET
        )
        assert assert_same_struct(message, m.Part, with_defaults=False) == part
    task = m.Task(id="t", status=m.TaskStatus(state=TaskState.SUBMITTED))
    event = m.TaskStatusUpdateEvent(task_id="t", context_id="c", status=m.TaskStatus(state=TaskState.WORKING))
    artifact = m.TaskArtifactUpdateEvent(
        task_id="t",
        context_id="c",
        artifact=m.Artifact(artifact_id="a", parts=[m.Part(text="x")]),
        append=True,
    )
    for member, value in (
        ("task", task),
        ("message", user_message()),
        ("status_update", event),
        ("artifact_update", artifact),
    ):
        response = m.StreamResponse(**{member: value})
        message = assert_same_message(response, pb.StreamResponse)
        assert message.WhichOneof("payload") == member
        assert assert_same_struct(message, m.StreamResponse, with_defaults=True) == response
    both = m.StreamResponse(task=task, message=user_message())
    assert assert_same_message(both, pb.StreamResponse) is None
    with pytest.raises(ConversionError, match="oneof 'payload'"):
        struct_to_message(both, pb.StreamResponse)


def test_an_agent_card_with_everything_round_trips() -> None:
    oauth = {
        "oauth2SecurityScheme": {
            "description": "OAuth",
            "flows": {
                "authorizationCode": {
                    "authorizationUrl": "https://a",
                    "tokenUrl": "https://t",
                    "scopes": {"read": "Read"},
                    "pkceRequired": True,
                }
            },
        }
    }
    card = m.AgentCard(
        name="agent",
        description="does things",
        supported_interfaces=[
            m.AgentInterface(
                url="127.0.0.1:50051", protocol_binding="GRPC", protocol_version="1.0", tenant="t"
            )
        ],
        provider=m.AgentProvider(url="https://example.org", organization="Example"),
        version="1.2.3",
        documentation_url="",
        capabilities=m.AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extended_agent_card=True,
            extensions=[m.AgentExtension(uri="urn:x", required=True, params={"level": 2, "tags": ["a"]})],
        ),
        security_schemes={
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
            "oauth": oauth,
            "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
            "mtls": {"mtlsSecurityScheme": {}},
        },
        security_requirements=[
            m.SecurityRequirement(schemes={"oauth": m.StringList(list=["read"]), "bearer": m.StringList()})
        ],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            m.AgentSkill(
                id="s",
                name="S",
                description="d",
                tags=["t"],
                examples=["e"],
                security_requirements=[m.SecurityRequirement(schemes={"key": m.StringList()})],
            )
        ],
        signatures=[m.AgentCardSignature(protected="p", signature="s", header={"kid": "k1"})],
        icon_url="https://example.org/icon.png",
    )
    message = assert_same_message(card, pb.AgentCard)
    assert (
        message.security_schemes["oauth"].oauth2_security_scheme.flows.authorization_code.scopes["read"]
        == "Read"
    )
    assert message.HasField("documentation_url") and message.capabilities.HasField("push_notifications")
    for with_defaults in (False, True):
        back = assert_same_struct(message, m.AgentCard, with_defaults)
        assert back.skills == card.skills and back.signatures == card.signatures
    client_view = message_to_struct(message, m.AgentCard, with_defaults=True)
    assert client_view.security_schemes["mtls"] == {"mtlsSecurityScheme": {"description": ""}}
    assert message_to_struct(message, m.AgentCard).security_schemes == card.security_schemes


def test_security_schemes_protojson_refuses_are_refused() -> None:
    card = m.AgentCard(
        name="a", description="", supported_interfaces=[], version="1", capabilities=m.AgentCapabilities(),
        default_input_modes=[], default_output_modes=[], skills=[], security_schemes={"x": {"noSuchScheme": {}}},
    )  # fmt: skip
    assert assert_same_message(card, pb.AgentCard) is None


# -- golden cases: errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (pb.SendMessageRequest(), "message"),
        (pb.SendMessageRequest(message=pb.Message(message_id="m", role=pb.ROLE_USER)), "message.parts"),
        (
            pb.SendMessageRequest(message=pb.Message(role=pb.ROLE_USER, parts=[pb.Part(text="a")])),
            "message.messageId",
        ),
        (
            pb.SendMessageRequest(
                message=pb.Message(message_id="m", role=pb.ROLE_USER, parts=[pb.Part(text="a"), pb.Part()])
            ),
            "message.parts[1]",
        ),
        (pb.GetTaskRequest(id=""), "id"),
        (pb.ListTasksRequest(page_size=0), "pageSize"),
        (pb.GetTaskRequest(id="t", history_length=-1), "historyLength"),
        (pb.GetTaskPushNotificationConfigRequest(id="c"), "taskId"),
        (pb.TaskPushNotificationConfig(task_id="t"), "url"),
    ],
    ids=[
        "no-message",
        "no-parts",
        "no-message-id",
        "empty-part",
        "empty-id",
        "page-size-0",
        "negative-history",
        "no-task-id",
        "no-url",
    ],
)
def test_a_request_that_does_not_decode_names_the_field(message: Any, field: str) -> None:
    struct_type = getattr(m, message.DESCRIPTOR.name)
    assert_same_struct(message, struct_type, with_defaults=False)
    with pytest.raises(InvalidParamsError) as caught:
        server_to_struct(message, struct_type)
    assert [path for path, _ in caught.value.field_violations] == [field]


@pytest.mark.parametrize(
    ("request_struct", "path"),
    [
        (m.GetTaskRequest(id="t", history_length=2**31), "historyLength"),
        (
            m.SendMessageRequest(
                message=user_message(), configuration=m.SendMessageConfiguration(history_length=2**40)
            ),
            "configuration.historyLength",
        ),
        (
            m.SendMessageRequest(
                message=m.Message(message_id="m", role="ROLE_ROBOT", parts=[m.Part(text="x")])
            ),
            "message.role",
        ),  # type: ignore[arg-type]
        (m.ListTasksRequest(status_timestamp_after=datetime(2024, 1, 1)), "statusTimestampAfter"),
    ],
    ids=["int32-range", "nested-int32-range", "unknown-enum-name", "naive-datetime"],
)
def test_a_request_protobuf_cannot_hold_is_invalid_params_naming_the_field(
    request_struct: Any, path: str
) -> None:
    message_type = getattr(pb, type(request_struct).__name__)
    assert assert_same_message(request_struct, message_type) is None
    with pytest.raises(ConversionError) as caught:
        struct_to_message(request_struct, message_type)
    assert caught.value.path == path
    with pytest.raises(
        InvalidParamsError, match=f"not a valid {message_type.DESCRIPTOR.full_name}: {path}: "
    ):
        client_to_message(request_struct, message_type)


def test_what_msgspec_or_a_double_cannot_hold_fails_as_it_did() -> None:
    surrogate = m.SendMessageRequest(
        message=m.Message(message_id="\ud800", role=m.Role.USER, parts=[m.Part(text="x")])
    )
    in_data = m.Part(data={"k": "\udfff"})
    unsupported = m.Part(data={"k": object()})
    too_big = m.Part(data=10**400)
    for struct, error in (
        (surrogate, UnicodeEncodeError),
        (in_data, UnicodeEncodeError),
        (unsupported, TypeError),
        (too_big, ConversionError),  # Parse turned the OverflowError into a ParseError
    ):
        message_type = getattr(pb, type(struct).__name__)
        assert assert_same_message(struct, message_type) is None
        with pytest.raises(error):
            struct_to_message(struct, message_type)


def test_nesting_deeper_than_parse_allows_is_refused_at_the_same_depth() -> None:
    def nested(levels: int) -> Any:
        value: Any = 1
        for _ in range(levels):
            value = {"a": value} if levels % 2 else [value]
        return value

    for levels in range(45, 52):
        request = m.SendMessageRequest(message=user_message(), metadata={"k": nested(levels)})
        ok = assert_same_message(request, pb.SendMessageRequest) is not None
        assert ok == (
            levels < (MAX_DEPTH - 2) // 2
        )  # request, Struct, then a Value and a container per level


def test_a_reply_that_does_not_decode_is_an_invalid_response() -> None:
    from skillwire.client.errors import InvalidResponseError

    with pytest.raises(InvalidResponseError, match="status"):
        client_to_struct(pb.Task(id="t"), m.Task)
    bad_time = pb.Task(id="t", status=pb.TaskStatus(timestamp=timestamp_pb2.Timestamp(nanos=-1)))
    with pytest.raises(InvalidResponseError, match=r"status\.timestamp"):
        client_to_struct(bad_time, m.Task)
    assert (
        client_to_struct(pb.Task(id="t", status=pb.TaskStatus()), m.Task).status.state
        is TaskState.UNSPECIFIED
    )


def test_a_non_finite_number_where_a_message_goes_is_null_as_on_protojson() -> None:
    """Found by the property above: msgspec writes inf as null, so ProtoJSON leaves the field unset, and the
    direct route took it for a second member of the oneof."""
    task = m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=TaskState.WORKING))
    bad = m.SendMessageResponse(task=task, message=math.inf)  # type: ignore[arg-type]
    got = assert_same_message(bad, pb.SendMessageResponse)
    assert got.WhichOneof("payload") == "task"
