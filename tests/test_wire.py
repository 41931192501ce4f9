"""Sans-IO codecs against golden vectors: the JSON-RPC envelope, errors, SSE framing."""

from __future__ import annotations

import json

import pytest

from skillwire import Limits
from skillwire.errors import (
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    TaskNotFoundError,
)
from skillwire.protocol.models import (
    Artifact,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from skillwire.protocol.states import TaskState
from skillwire.stores.base import write_task
from skillwire.wire.codec import _CODECS, jsonrpc_codec, rest_codec
from skillwire.wire.jsonrpc import (
    JsonRpcFailure,
    ResultFramer,
    encode_error,
    encode_result,
    parse_request,
)
from skillwire.wire.sse import KEEPALIVE, SSEDecoder, encode_event, encode_json_event

MAX_DEPTH = Limits().max_json_depth


def test_parse_a_valid_request() -> None:
    request = parse_request(
        b'{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"t","historyLength":2}}'
    )
    assert request.id == "a" and request.expects_response
    assert request.params == GetTaskRequest(id="t", history_length=2)


def test_proto_field_names_are_accepted_but_user_data_is_untouched() -> None:
    request = parse_request(
        b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"message_id":"m","role":"ROLE_USER",'
        b'"parts":[{"data":{"snake_key":1},"media_type":"application/json"}],"metadata":{"my_key":2}},'
        b'"configuration":{"history_length":0,"return_immediately":true}}}'
    )
    params = request.params
    assert isinstance(params, SendMessageRequest)
    assert params.message.message_id == "m"
    assert params.message.parts[0].data == {"snake_key": 1}
    assert params.message.parts[0].media_type == "application/json"
    assert params.message.metadata == {"my_key": 2}
    assert params.configuration is not None
    assert params.configuration.history_length == 0 and params.configuration.return_immediately
    listed = parse_request(
        b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"page_size":2,"context_id":"c"}}'
    )
    assert listed.params == ListTasksRequest(page_size=2, context_id="c")


def test_notification_has_no_response() -> None:
    request = parse_request(b'{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t"}}')
    assert request.expects_response is False and request.id is None


def test_null_id_still_expects_a_response() -> None:
    request = parse_request(b'{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"t"}}')
    assert request.expects_response is True and request.id is None


@pytest.mark.parametrize(
    ("body", "error", "request_id"),
    [
        (b"", JSONParseError, None),
        (b"{", JSONParseError, None),
        (b"\xff\xfe", JSONParseError, None),
        (b"[]", InvalidRequestError, None),
        (b"3", InvalidRequestError, None),
        (b'{"jsonrpc":"1.0","id":4,"method":"GetTask"}', InvalidRequestError, 4),
        (b'{"jsonrpc":"2.0","id":{},"method":"GetTask"}', InvalidRequestError, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}', InvalidRequestError, None),
        (b'{"jsonrpc":"2.0","id":"x","method":null}', InvalidRequestError, "x"),
        (b'{"jsonrpc":"2.0","id":"x","method":"tasks/get"}', MethodNotFoundError, "x"),
        (b'{"jsonrpc":"2.0","id":9,"method":"GetTask","params":{}}', InvalidParamsError, 9),
        (b'{"jsonrpc":"2.0","id":9,"method":"GetTask","params":"t"}', InvalidParamsError, 9),
        (
            b'{"jsonrpc":"2.0","id":9,"method":"GetTask","params":{"id":"t","historyLength":-1}}',
            InvalidParamsError,
            9,
        ),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), InvalidParamsError, None),
        (b'{"id":3,"x":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}", InvalidParamsError, 3),
    ],
)
def test_parse_failures(body: bytes, error: type, request_id: object) -> None:
    with pytest.raises(JsonRpcFailure) as info:
        parse_request(body)
    assert type(info.value.error) is error
    assert info.value.request_id == request_id


def test_deep_nesting_inside_strings_is_fine() -> None:
    text = "[" * 1000
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}},
        }
    ).encode()
    assert parse_request(body).params.message.parts[0].text == text


def test_invalid_params_name_the_field() -> None:
    with pytest.raises(JsonRpcFailure) as info:
        parse_request(
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER",'
            b'"parts":[{"text":5}]}}}'
        )
    error = info.value.error
    assert error.message == "Invalid params: params.message.parts[0].text: Expected `str`, got `int`"
    assert error.field_violations == [("params.message.parts[0].text", "Expected `str`, got `int`")]
    with pytest.raises(JsonRpcFailure) as missing:
        parse_request(b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}')
    assert missing.value.error.message == "Invalid params: params.message: required field is missing"


def test_encode_result_and_error_golden() -> None:
    assert encode_result(1, None) == b'{"jsonrpc":"2.0","id":1,"result":null}'
    assert encode_result("x", GetTaskRequest(id="t")) == b'{"jsonrpc":"2.0","id":"x","result":{"id":"t"}}'
    error = TaskNotFoundError("Task t not found", metadata={"taskId": "t", "n": 3})
    assert json.loads(encode_error(7, error)) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32001,
            "message": "Task t not found",
            "data": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": "t", "n": "3"},
                }
            ],
        },
    }


def test_result_framer_matches_encode_result() -> None:
    framer = ResultFramer("s-1")
    value = GetTaskRequest(id="t", history_length=0)
    assert framer.frame(value) == encode_result("s-1", value)


def test_sse_encode_and_decode() -> None:
    assert encode_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_event(b"x", event="error") == b"event: error\ndata: x\n\n"
    assert encode_event(b"a\nb") == b"data: a\ndata: b\n\n"
    decoder = SSEDecoder()
    stream = KEEPALIVE + encode_event(b'{"a":1}') + b"data: x\r\ndata: y\r\n\r\n" + b"data: partial"
    got = []
    for i in range(0, len(stream), 3):  # fed in awkward pieces
        got += list(decoder.feed(stream[i : i + 3]))
    assert got == [b'{"a":1}', b"x\ny"]
    assert list(decoder.feed(b"\n\n")) == [b"partial"]


LINE_BREAKS = ["a\nb", "a\rb", "a\r\nb", "\n", "a\u2028b\u2029c", "\x85"]


@pytest.mark.parametrize("version", list(_CODECS))
@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_every_codec_encodes_a_stream_event_on_one_line_so_it_is_framed_without_a_scan(
    version: str, binding: str
) -> None:
    """Stream events are framed by encode_json_event, which does not look for line breaks: every codec's
    encoding of an event must have none, whatever its text holds, and the event must come back whole."""
    codec = jsonrpc_codec(version) if binding == "jsonrpc" else rest_codec(version)
    for text in LINE_BREAKS:
        event = StreamResponse(
            artifact_update=TaskArtifactUpdateEvent(
                task_id="t\n1",
                context_id="c\r",
                artifact=Artifact(artifact_id="a", parts=[Part(text=text)], metadata={"k\n": "v\r"}),
                generation=7,
            )
        )
        raw = codec.encode_event(event)
        data = ResultFramer(1).frame_raw(raw) if binding == "jsonrpc" else raw
        assert b"\n" not in data and b"\r" not in data
        frame = encode_json_event(data, 7)
        assert frame == encode_event(data, event_id=7)
        assert list(SSEDecoder().feed(frame)) == [data]
        back = codec.decode_event(raw)
        assert isinstance(back, StreamResponse) and back.artifact_update is not None
        assert back.artifact_update.artifact.parts[0].text == text


def _events_to_log() -> list[StreamResponse]:
    status = TaskStatus(
        state=TaskState.WORKING,
        message=Message(
            message_id="s", role=Role.AGENT, parts=[Part(text="on it")], metadata={"generation": 3}
        ),
    )
    events = []
    for generation in (0, 1, 9, 12_345_678):
        for metadata in (None, {"generation": 5}, {"a": {"generation": 7}}, {"k": ',"generation":1}}'}):
            artifact = Artifact(artifact_id="a", parts=[Part(text="x\n")], metadata=metadata)
            events.append(
                StreamResponse(
                    artifact_update=TaskArtifactUpdateEvent(
                        task_id="t", context_id="c", artifact=artifact, append=True, generation=generation
                    )
                )
            )
            events.append(
                StreamResponse(
                    status_update=TaskStatusUpdateEvent(
                        task_id="t", context_id="c", status=status, metadata=metadata, generation=generation
                    )
                )
            )
        task = Task(id="t", context_id="c", status=status, generation=generation)
        events.append(StreamResponse(task=task))
    events.append(StreamResponse(message=Message(message_id="r", role=Role.AGENT, parts=[Part(text="hi")])))
    return events


@pytest.mark.parametrize("version", list(_CODECS))
@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_an_event_encoded_from_its_logged_json_is_what_the_codec_encodes_afresh(
    version: str, binding: str
) -> None:
    """A stream reuses the JSON the store's log holds of each event (the bus carries it): whatever the
    version, the result must be exactly the codec's own encoding of the event, metadata that names a
    generation included."""
    codec = jsonrpc_codec(version) if binding == "jsonrpc" else rest_codec(version)
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    for event in _events_to_log():
        (logged,) = write_task(task, version=1, events=[event]).logged
        assert codec.encode_logged_event(event, logged) == codec.encode_event(event)
