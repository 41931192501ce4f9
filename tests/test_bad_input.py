"""Bad input never gives a 500, a traceback, a hang or a corrupted task (JSON-RPC binding, one real server).

Every response goes through one check (``Api.post``): the status is not 5xx, the server logged nothing at
ERROR while answering (uvicorn's "Exception in ASGI application" or skillwire's own ``log.exception``), and
the body is empty (204, a notification) or valid JSON holding one JSON-RPC response: a result (strict
ProtoJSON where the result type is known) or an error with ErrorInfo and a *documented* code. -32603
(internal error) is not a documented answer to bad input, so it fails the check. The client has a timeout of
a few seconds, so a hang fails too. The last test checks that the fuzzing corrupted no task.

Bugs that fuzzing found are kept as focused regression tests in a section of their own near the end.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import (
    A2A_V1,
    RESULT_TYPES,
    RunningServer,
    assert_rpc_error,
    assert_rpc_result,
    example_agent,
    start_server,
    user_message,
)
from skillwire import Limits
from skillwire.protocol.media import accepts
from skillwire.protocol.operations import OPERATIONS_BY_METHOD
from skillwire.wire.sse import SSEDecoder

TIMEOUT = 5.0
#: A small body limit keeps the oversized-body tests fast; the 10 MiB default is checked in process.
MAX_BODY = 1024 * 1024
DEFAULT_MAX_BODY = 10 * 1024 * 1024
JSON_HEADERS = {**A2A_V1, "Content-Type": "application/json"}
METHODS = sorted(OPERATIONS_BY_METHOD)
#: The codes bad input may get. -32002 (not cancelable) is what CancelTask answers for a finished task.
DOCUMENTED_CODES = frozenset({-32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32009})
TASK_STATES = frozenset(
    {
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    }
)
ABSENT: Any = object()  # "leave this member out" (no ``id`` makes a notification)

FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- the server, the client, and the one response check ------------------------------------------------


class ServerErrors(logging.Handler):
    """Collects what the server logs at ERROR (tracebacks) from its thread."""

    LOGGERS = ("uvicorn.error", "uvicorn.asgi", "skillwire")

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self._lock = threading.Lock()
        self._records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            self._records.append(record)

    def drain(self) -> list[str]:
        with self._lock:
            records, self._records = self._records, []
        return [self.format(r) for r in records]


@dataclass
class Api:
    srv: RunningServer
    client: httpx.Client
    errors: ServerErrors

    def post(
        self,
        content: bytes | Iterator[bytes],
        headers: dict[str, Any] | None = None,
        *,
        method: str | None = None,
        proto: bool = True,
        url: str | None = None,
        timeout: float = TIMEOUT,
    ) -> httpx.Response:
        """POST ``content`` and check the response (see the module docstring); returns it."""
        response = self.client.post(
            url or self.srv.rpc_url,
            content=content,
            headers=JSON_HEADERS if headers is None else headers,
            timeout=timeout,
        )
        check_response(self, response, method=method, proto=proto)
        return response

    def call(
        self,
        method: str,
        params: Any = ABSENT,
        request_id: Any = 1,
        *,
        headers: dict[str, Any] | None = None,
        proto: bool = True,
    ) -> dict[str, Any]:
        """One JSON-RPC exchange that must get a JSON body; returns the JSON-RPC response."""
        response = self.post(envelope(method, params, request_id), headers, method=method, proto=proto)
        assert response.status_code == 200, response.text[:500]
        body = response.json()
        assert isinstance(body, dict)
        return body

    def call_body(self, body: bytes, method: str | None, *, proto: bool = True) -> dict[str, Any]:
        """POST a hand-built body that must get a JSON-RPC response; returns it."""
        response = self.post(body, method=method, proto=proto)
        assert response.status_code == 200, response.text[:500]
        answer = response.json()
        assert isinstance(answer, dict)
        return answer

    def stream(self, params: Any) -> list[dict[str, Any]]:
        """SendStreamingMessage; returns the JSON-RPC responses of the SSE events."""
        response = self.post(envelope("SendStreamingMessage", params), method="SendStreamingMessage")
        assert response.headers["content-type"].startswith("text/event-stream"), response.text[:500]
        return sse_events(response)


def envelope(method: Any, params: Any = ABSENT, request_id: Any = 1) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not ABSENT:
        body["id"] = request_id
    body["method"] = method
    if params is not ABSENT:
        body["params"] = params
    return json.dumps(body, ensure_ascii=False).encode()


def sse_events(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(data) for data in SSEDecoder().feed(response.content)]


def check_response(api: Api, response: httpx.Response, *, method: str | None, proto: bool) -> None:
    logged = api.errors.drain()
    assert response.status_code < 500, (response.status_code, response.text[:500], logged)
    assert not logged, "the server logged errors:\n" + "\n".join(logged)
    if response.status_code == 204 or response.request.method == "HEAD":
        assert response.content == b""
        return
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        assert response.status_code == 200
        events = sse_events(response)
        assert events, "an empty stream"
        for event in events:
            check_rpc(event, "SendStreamingMessage" if method == "SubscribeToTask" else method, proto)
        return
    assert content_type.startswith("application/json"), (response.status_code, content_type)
    check_rpc(json.loads(response.content), method, proto)  # valid JSON, or json.loads raises


def check_rpc(body: Any, method: str | None, proto: bool = True) -> None:
    """One JSON-RPC response: a result, or an error with a documented code and ErrorInfo."""
    assert isinstance(body, dict), body
    assert body.get("jsonrpc") == "2.0", body
    assert "id" in body, body
    assert ("result" in body) != ("error" in body), body
    if "error" in body:
        code = body["error"].get("code")
        assert code in DOCUMENTED_CODES, body
        if isinstance(body["error"].get("data"), dict):  # a v0.3 caller (no A2A-Version): free-form data
            assert isinstance(body["error"]["message"], str) and body["error"]["data"]["reason"], body
        else:
            assert_rpc_error(body, code)
    elif proto and method in RESULT_TYPES:
        assert_rpc_result(body, method)


def error_code(body: dict[str, Any]) -> int | None:
    return body["error"]["code"] if "error" in body else None


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    path = tmp_path_factory.mktemp("bad_input") / "t.db"
    app = example_agent("echo").asgi(store=f"sqlite:///{path}", limits=Limits(max_body_bytes=MAX_BODY))
    srv = start_server(app)
    errors = ServerErrors()
    loggers = [logging.getLogger(name) for name in ServerErrors.LOGGERS]
    for logger in loggers:  # after start: uvicorn's dictConfig replaces the handlers of its loggers
        logger.addHandler(errors)
    try:
        with httpx.Client(timeout=TIMEOUT) as client:
            yield Api(srv, client, errors)
    finally:
        for logger in loggers:
            logger.removeHandler(errors)
        srv.stop()


@pytest.fixture(autouse=True)
def _server_stays_healthy(api: Api) -> Iterator[None]:
    yield
    logged = api.errors.drain()
    assert not logged, "the server logged errors:\n" + "\n".join(logged)
    assert api.srv.thread.is_alive()


def send_params(text: str = "hello", **message: Any) -> dict[str, Any]:
    return {"message": user_message(text, **message)}


def echoed_text(task: dict[str, Any]) -> str:
    (artifact,) = task["artifacts"]
    return "".join(part.get("text", "") for part in artifact["parts"])


# -- strategies ---------------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
#: Values that get past a first type check, or sit on a boundary.
plausible = st.uuids().map(str) | st.sampled_from(
    [
        "",
        "x",
        "ROLE_USER",
        "ROLE_AGENT",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_BOGUS",
        "2024-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "yesterday",
        "AAAA",
        "!!",
        0,
        1,
        -1,
        100,
        101,
        2**31,
        2**63,
        2**64,
        -(2**63) - 1,
        1.5,
        1e300,
        True,
        False,
        None,
        [],
        {},
    ]
)
field_values = plausible | json_values
# The echo agent treats "stream N" specially (N chunks); ordinary bad input never needs that.
texts = st.text(max_size=30).filter(lambda s: "stream" not in s)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def mostly(valid: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` nine times in ten, else ``bad``: so that a fair share of near-valid requests succeed."""
    return st.integers(0, 9).flatmap(lambda i: valid if i else bad)


part_extras = {
    "metadata": mostly(json_objects, field_values),
    "filename": mostly(st.text(max_size=10), field_values),
    "mediaType": mostly(st.sampled_from(["text/plain", "application/json", ""]), field_values),
}
good_part = st.one_of(
    st.fixed_dictionaries({"text": texts}, optional=part_extras),
    st.fixed_dictionaries({"raw": st.binary(max_size=20).map(b64)}, optional=part_extras),
    st.fixed_dictionaries({"url": st.sampled_from(["https://example.com/x", ""])}, optional=part_extras),
    st.fixed_dictionaries({"data": json_values}, optional=part_extras),
)
#: Any subset of the content members (none, one, several), each of any type.
any_part = st.fixed_dictionaries(
    {},
    optional={
        "text": texts | field_values,
        "raw": st.binary(max_size=20).map(b64) | field_values,
        "url": field_values,
        "data": json_values,
        **part_extras,
    },
)
messages = st.fixed_dictionaries(
    {
        "messageId": mostly(st.uuids().map(str) | st.text(min_size=1, max_size=10), field_values),
        "role": mostly(st.sampled_from(["ROLE_USER", "ROLE_AGENT"]), field_values),
        "parts": mostly(
            st.lists(good_part, min_size=1, max_size=3), st.lists(any_part, max_size=3) | field_values
        ),
    },
    optional={
        "contextId": mostly(st.text(max_size=10), field_values),
        "taskId": mostly(st.just(""), field_values),
        "metadata": mostly(json_objects, field_values),
        "extensions": mostly(st.lists(st.text(max_size=10), max_size=2), field_values),
        "referenceTaskIds": mostly(st.lists(st.text(max_size=10), max_size=2), field_values),
    },
)
configurations = st.fixed_dictionaries(
    {},
    optional={
        "historyLength": mostly(st.integers(min_value=0) | st.none(), field_values),
        "returnImmediately": mostly(st.booleans(), field_values),
        "acceptedOutputModes": mostly(st.lists(st.text(max_size=10), max_size=2), field_values),
        "taskPushNotificationConfig": mostly(
            st.fixed_dictionaries({"url": st.just("https://example.com/hook")}), field_values
        ),
    },
)
#: Tenants are limited to a few names so that the last test can list every task the fuzzing created.
FUZZ_TENANT = "fuzz-tenant"
DEEP_TENANT = "deep"
tenants = mostly(
    st.sampled_from(["", FUZZ_TENANT]),
    st.none() | st.booleans() | st.integers() | st.lists(st.text(max_size=3), max_size=2),
)
send_message_params = st.fixed_dictionaries(
    {"message": messages},
    optional={
        "configuration": mostly(configurations, field_values),
        "metadata": mostly(json_objects, field_values),
        "tenant": tenants,
    },
)


def _field_names(method: str) -> list[str]:
    """The request fields of ``method``, as ProtoJSON names and proto (snake_case) names."""
    names: set[str] = set()
    for f in msgspec.structs.fields(OPERATIONS_BY_METHOD[method].request_type):
        names.update((f.encode_name, f.name))
    return sorted(names)


def _field_value(key: str) -> st.SearchStrategy[Any]:
    if key == "message":
        return messages | field_values
    if key == "configuration":
        return configurations | field_values
    if key == "tenant":
        return tenants
    if key in ("pageToken", "page_token"):
        # Numbers outside SQLite's int64 and non-ASCII digits are a known bug
        # (test_page_token_that_decodes_to_a_bad_number), so the numbers here stay in range.
        int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
        tokens = st.builds(
            lambda us, seq: base64.urlsafe_b64encode(f"{us}:{seq}".encode()).decode().rstrip("="),
            int64,
            int64 | st.text(alphabet="abc:-0123456789", max_size=10),
        )
        return tokens | field_values
    return field_values


def params_for(method: str) -> st.SearchStrategy[Any]:
    """Arbitrary JSON, or an object whose members are the method's own fields with arbitrary values."""
    keys = _field_names(method)
    shaped = st.lists(st.sampled_from(keys) | st.text(max_size=8), max_size=6, unique=True).flatmap(
        lambda ks: st.fixed_dictionaries({k: _field_value(k) for k in ks})
    )
    if method in ("SendMessage", "SendStreamingMessage"):
        shaped = shaped | send_message_params
    return json_values | shaped


valid_ids = st.integers() | st.text(max_size=20) | st.none()
request_ids = valid_ids | st.just(ABSENT)


# -- bodies that are not JSON-RPC requests -------------------------------------------------------------

prefixes = st.sampled_from(
    [b"", b"{", b"[", b'"', b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":', b"\xef\xbb\xbf"]
)


@FUZZ
@given(body=st.binary(max_size=300) | st.builds(bytes.__add__, prefixes, st.binary(max_size=300)))
def test_arbitrary_bytes(api: Api, body: bytes) -> None:
    response = api.post(body)
    if response.status_code != 204:
        assert response.status_code == 200
        assert error_code(response.json()) is not None


@FUZZ
@given(value=json_values)
def test_arbitrary_json_value_as_the_body(api: Api, value: Any) -> None:
    response = api.post(json.dumps(value, ensure_ascii=False).encode())
    if not isinstance(value, dict):
        assert response.status_code == 200
        assert_rpc_error(response.json(), -32600)
        assert response.json()["id"] is None
    elif response.status_code == 204:
        # An object without an `id` member is answered as a notification, even when it is not a valid
        # Request object; see test_invalid_request_object_without_id_gets_an_error.
        assert "id" not in value
    else:
        assert error_code(response.json()) is not None


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b" ",
        b"{",
        b'{"jsonrpc":"2.0"',
        b"nul",
        b"\xff\xfe",
        b'{"a":1}x',
        b"\x00",
    ],
    ids=repr,
)
def test_not_json_is_a_parse_error(api: Api, body: bytes) -> None:
    answer = api.call_body(body, None)
    assert_rpc_error(answer, -32700)
    assert answer["id"] is None


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\\udc00x"], ids=repr)
def test_bad_utf8_or_surrogate_in_params_is_a_parse_error(api: Api, bad: bytes) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"' + bad + b'"}}'
    answer = api.call_body(body, "GetTask")
    assert_rpc_error(answer, -32700)
    assert answer["id"] in (None, 1)  # 1 if the envelope was read before the params were


@pytest.mark.parametrize(
    "body", [b"null", b"1", b'"x"', b"[]", b"[1]", b'[{"jsonrpc":"2.0","id":1}]', b"true"]
)
def test_not_an_object_is_an_invalid_request(api: Api, body: bytes) -> None:
    answer = api.call_body(body, None)
    assert_rpc_error(answer, -32600)
    assert answer["id"] is None


# -- valid envelopes with arbitrary params -------------------------------------------------------------


@FUZZ
@given(data=st.data(), method=st.sampled_from(METHODS), request_id=request_ids)
def test_arbitrary_params_for_every_method(
    api: Api, data: st.DataObject, method: str, request_id: Any
) -> None:
    params = data.draw(params_for(method) | st.just(ABSENT), label="params")
    response = api.post(envelope(method, params, request_id), method=method)
    if request_id is ABSENT:
        assert response.status_code == 204
        return
    assert response.status_code == 200
    if response.headers["content-type"].startswith("text/event-stream"):
        assert method == "SendStreamingMessage"
        answers = sse_events(response)
    else:
        answers = [response.json()]
    for answer in answers:
        assert answer["id"] == request_id
    answer = answers[0]
    event(f"{method}: {error_code(answer)}")
    if method not in ("SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask"):
        # No such task, no push notifications, no extended card, or bad params: always an error.
        assert error_code(answer) in (-32602, -32001, -32003, -32004), answer
    if not isinstance(params, dict) and params is not ABSENT:
        assert_rpc_error(answer, -32602)


@FUZZ
@given(params=send_message_params)
def test_send_message_with_wrong_typed_fields(api: Api, params: dict[str, Any]) -> None:
    """Near-valid SendMessage params: either -32602, or a task that the echo agent completed."""
    answer = api.call("SendMessage", params)
    code = error_code(answer)
    event(f"code {code}")
    if code is not None:
        # -32001: a taskId that names no task; -32004: one of the (finished) tasks; -32003: a push
        # notification config on an agent without push notifications; -32005: a part of a media type the
        # agent does not accept (a file part).
        assert code in (-32602, -32001, -32004, -32003, -32005), answer
        if code == -32602:
            fields = [
                v["field"]
                for d in answer["error"]["data"]
                if d["@type"].endswith("BadRequest")
                for v in d["fieldViolations"]
            ]
            assert fields and all(f.startswith("params") for f in fields), answer
        return
    task = answer["result"]["task"]
    assert task["status"]["state"] in TASK_STATES
    configuration = params.get("configuration")
    accepted = configuration.get("acceptedOutputModes") if isinstance(configuration, dict) else None
    if not (isinstance(configuration, dict) and configuration.get("returnImmediately")):
        if accepted and not accepts(accepted, "text/plain"):  # the echo's text artifact is refused
            assert task["status"]["state"] == "TASK_STATE_FAILED", task
            return
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        sent = "\n".join(p.get("text", "") for p in params["message"]["parts"] if "text" in p)
        assert echoed_text(task) == sent
    again = api.call("GetTask", {"tenant": params.get("tenant", ""), "id": task["id"]}, proto=False)["result"]
    assert again["id"] == task["id"]
    assert again["history"][0]["messageId"] == params["message"]["messageId"]


def _message(**changes: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    for key, value in changes.items():
        if value is ABSENT:
            message.pop(key)
        else:
            message[key] = value
    return message


BAD_SEND_PARAMS = {
    "parts is an object": {"message": _message(parts={"text": "hi"})},
    "parts is a string": {"message": _message(parts="hi")},
    "parts is empty": {"message": _message(parts=[])},
    "parts is null": {"message": _message(parts=None)},
    "parts missing": {"message": _message(parts=ABSENT)},
    "part is a string": {"message": _message(parts=["hi"])},
    "part has text and url": {"message": _message(parts=[{"text": "a", "url": "https://example.com"}])},
    "part has text and data": {"message": _message(parts=[{"text": "a", "data": {"b": 1}}])},
    "part has no content": {"message": _message(parts=[{"filename": "a.txt"}])},
    "part is empty": {"message": _message(parts=[{}])},
    "part text is a number": {"message": _message(parts=[{"text": 1}])},
    "part raw is not base64": {"message": _message(parts=[{"raw": "***"}])},
    "role is a number": {"message": _message(role=1)},
    "role is unknown": {"message": _message(role="user")},
    "role missing": {"message": _message(role=ABSENT)},
    "messageId is empty": {"message": _message(messageId="")},
    "messageId is a number": {"message": _message(messageId=5)},
    "messageId missing": {"message": _message(messageId=ABSENT)},
    "message_id is empty": {"message": _message(messageId=ABSENT, message_id="")},
    "message missing": {},
    "message is a string": {"message": "hi"},
    "message is null": {"message": None},
    "metadata is a string": {"message": _message(metadata="x")},
    "extensions is a string": {"message": _message(extensions="x")},
    "historyLength is negative": {"message": _message(), "configuration": {"historyLength": -1}},
    "historyLength is a string": {"message": _message(), "configuration": {"historyLength": "5"}},
    "historyLength is a float": {"message": _message(), "configuration": {"historyLength": 1.5}},
    "history_length is negative": {"message": _message(), "configuration": {"history_length": -1}},
    "returnImmediately is a string": {"message": _message(), "configuration": {"returnImmediately": "yes"}},
    "configuration is a list": {"message": _message(), "configuration": []},
    "params is a list": [],
    "params is a string": "SendMessage",
}


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("params", list(BAD_SEND_PARAMS.values()), ids=list(BAD_SEND_PARAMS))
def test_send_message_bad_field_is_invalid_params(api: Api, method: str, params: Any) -> None:
    assert_rpc_error(api.call(method, params), -32602)


BAD_OTHER_PARAMS = [
    ("GetTask", {}),
    ("GetTask", {"id": ""}),
    ("GetTask", {"id": 1}),
    ("GetTask", {"id": "x", "historyLength": -1}),
    ("GetTask", {"id": "x", "historyLength": "1"}),
    ("ListTasks", {"pageSize": 0}),
    ("ListTasks", {"pageSize": 101}),
    ("ListTasks", {"pageSize": "10"}),
    ("ListTasks", {"status": "TASK_STATE_BOGUS"}),
    ("ListTasks", {"statusTimestampAfter": "yesterday"}),
    ("ListTasks", {"pageToken": "!!!"}),
    ("ListTasks", {"pageToken": b64(b"x:y")}),
    ("ListTasks", {"historyLength": -1}),
    ("ListTasks", {"includeArtifacts": "yes"}),
    ("CancelTask", {"id": ""}),
    ("CancelTask", {"id": None}),
    ("SubscribeToTask", {"id": ""}),
    ("SubscribeToTask", []),
]


@pytest.mark.parametrize(("method", "params"), BAD_OTHER_PARAMS, ids=[repr(c) for c in BAD_OTHER_PARAMS])
def test_other_bad_params_are_invalid_params(api: Api, method: str, params: Any) -> None:
    assert_rpc_error(api.call(method, params), -32602)


@pytest.mark.parametrize("method", ["Nope", "", "sendMessage", "tasks/send", "message/send", "x" * 100_000])
def test_unknown_method(api: Api, method: str) -> None:
    answer = api.call(method, {})
    assert_rpc_error(answer, -32601)
    assert len(answer["error"]["message"]) < 1000


@pytest.mark.parametrize("method", [1, None, [], {}, True])
def test_method_not_a_string(api: Api, method: Any) -> None:
    assert_rpc_error(api.call(method, {}), -32600)


@FUZZ
@given(request_id=valid_ids)
def test_request_id_is_echoed(api: Api, request_id: Any) -> None:
    answer = api.call("ListTasks", {"pageSize": 1}, request_id=request_id)
    assert answer["id"] == request_id


@pytest.mark.parametrize("request_id", [True, False, 1.5, [], [1], {}, {"a": 1}])
def test_request_id_of_the_wrong_type(api: Api, request_id: Any) -> None:
    answer = api.call("ListTasks", {}, request_id=request_id)
    assert_rpc_error(answer, -32600)
    assert answer["id"] is None


@pytest.mark.parametrize("version", [ABSENT, None, 1, "1.0", "3.0", ""])
def test_wrong_jsonrpc_member(api: Api, version: Any) -> None:
    body: dict[str, Any] = {"id": 7, "method": "ListTasks"}
    if version is not ABSENT:
        body["jsonrpc"] = version
    answer = api.post(json.dumps(body).encode()).json()
    assert_rpc_error(answer, -32600)
    assert answer["id"] == 7


# -- deep nesting --------------------------------------------------------------------------------------


def nested(kind: str, depth: int) -> bytes:
    """``depth`` levels of arrays or objects around 1, built without recursion."""
    if kind == "array":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def send_with_metadata(value: bytes) -> bytes:
    """A SendMessage body whose params.message.metadata is ``{"k": value}``: 4 levels above ``value``."""
    head = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"tenant": DEEP_TENANT, "message": user_message("deep", metadata={"k": None})},
        }
    ).encode()
    assert head.count(b'{"k": null}') == 1
    return head.replace(b'{"k": null}', b'{"k": ' + value + b"}")


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("depth", [50, 96, 97, 101, 10_000])
def test_deep_nesting_in_metadata(api: Api, kind: str, depth: int) -> None:
    # The envelope, params, message and metadata objects are 4 levels: 96 more make exactly 100.
    # Strict ProtoJSON parsing of a result this deep would exceed protobuf's own recursion limit, and the
    # tasks go to their own tenant so that ListTasks results elsewhere stay strictly checkable.
    answer = api.call_body(send_with_metadata(nested(kind, depth)), "SendMessage", proto=False)
    if depth + 4 > 100:
        error = assert_rpc_error(answer, -32602)
        assert error["message"].startswith("request: nesting ") and "(max_json_depth)" in error["message"]
        # The id is read by skipping the rest, which a body too deep for Python's stack does not allow.
        assert answer["id"] == (1 if depth < 900 else None)
        return
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    stored = api.call("GetTask", {"tenant": DEEP_TENANT, "id": task["id"]}, proto=False)["result"]
    assert stored["history"][0]["metadata"] == {"k": json.loads(nested(kind, depth))}


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("depth", [50, 99, 100, 101, 10_000])
def test_deep_nesting_in_the_body(api: Api, kind: str, depth: int) -> None:
    if kind == "array":  # the whole body
        body = nested(kind, depth)
    else:  # an extra envelope member: 1 level for the envelope itself
        body = b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","extra":' + nested(kind, depth - 1) + b"}"
    answer = api.call_body(body, "ListTasks")
    if depth > 100:
        assert_rpc_error(answer, -32602)
    elif kind == "array":
        assert_rpc_error(answer, -32600)
    else:
        assert "result" in answer


@pytest.mark.parametrize(
    "body", [b"[" * 10_000, b"{" * 10_000, b'{"a":' * 10_000, b"[{" * 5_000 + b"]}" * 5_000]
)
def test_deep_unbalanced_body(api: Api, body: bytes) -> None:
    assert error_code(api.call_body(body, None)) in (-32602, -32700)


@FUZZ
@given(text=st.text(alphabet='[]{}"\\a:,é', max_size=300))
def test_brackets_inside_strings_do_not_count_as_nesting(api: Api, text: str) -> None:
    # 120 brackets inside strings make the depth pre-check scan the body; none of them is nesting.
    params = send_params("brackets", metadata={"s": "[" * 120 + text, "t": text + "{" * 120})
    answer = api.call("SendMessage", params)
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["history"][0]["metadata"] == params["message"]["metadata"]


# -- body size -----------------------------------------------------------------------------------------


def padded(body: bytes, size: int) -> bytes:
    """``body`` padded with trailing whitespace to exactly ``size`` bytes."""
    assert len(body) <= size
    return body + b" " * (size - len(body))


def test_body_over_the_limit_is_413(api: Api) -> None:
    body = padded(envelope("ListTasks", {}), MAX_BODY + 1)
    response = api.post(body)
    assert response.status_code == 413
    assert_rpc_error(response.json(), -32600)
    assert "result" in api.call("ListTasks", {})  # the server is fine afterwards


def test_chunked_body_over_the_limit_is_413(api: Api) -> None:
    chunk = 64 * 1024
    total = MAX_BODY + 1
    body = padded(envelope("ListTasks", {}), total)
    response = api.post(iter([body[i : i + chunk] for i in range(0, total, chunk)]))
    assert response.status_code == 413
    assert_rpc_error(response.json(), -32600)


def test_body_at_the_limit_is_read(api: Api) -> None:
    response = api.post(padded(envelope("ListTasks", {}), MAX_BODY), method="ListTasks")
    assert response.status_code == 200
    assert "result" in response.json()


def test_huge_string_within_the_limit(api: Api) -> None:
    text = "é" * ((MAX_BODY - 4096) // 2)  # two UTF-8 bytes each
    answer = api.call("SendMessage", send_params(text))
    task = answer["result"]["task"]
    assert echoed_text(task) == text
    stored = api.call("GetTask", {"id": task["id"]})["result"]
    assert stored["history"][0]["parts"][0]["text"] == text


def test_huge_escaped_string_within_the_limit(api: Api) -> None:
    text = "\u2603" * ((MAX_BODY - 4096) // 6)  # sent as \u2603 escapes, six bytes each
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params(text)})
    answer = api.call_body(body.encode(), "SendMessage")
    assert echoed_text(answer["result"]["task"]) == text


def test_huge_ids_and_names_within_the_limit(api: Api) -> None:
    long = "i" * 300_000
    assert_rpc_error(api.call("GetTask", {"id": long}), -32001)
    assert_rpc_error(api.call("CancelTask", {"id": long}), -32001)
    answer = api.call("SendMessage", {"message": user_message("long ids", messageId=long, contextId=long)})
    task = answer["result"]["task"]
    assert task["contextId"] == long
    assert task["history"][0]["messageId"] == long
    assert api.call("ListTasks", {"contextId": long})["result"]["totalSize"] == 1


def many(parts: int, keys: int) -> dict[str, Any]:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": str(i)} for i in range(parts)],
            "metadata": {f"k{i}": i for i in range(keys)},
        }
    }


def test_parts_and_metadata_keys_at_the_limit(api: Api) -> None:
    limits = api.srv.app.limits
    params = many(limits.max_parts, limits.max_metadata_keys)
    task = api.call("SendMessage", params)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert echoed_text(task) == "\n".join(str(i) for i in range(limits.max_parts))
    stored = api.call("GetTask", {"id": task["id"]})["result"]
    assert len(stored["history"][0]["parts"]) == limits.max_parts
    assert stored["history"][0]["metadata"] == params["message"]["metadata"]


def test_parts_and_metadata_keys_over_the_limit(api: Api) -> None:
    limits = api.srv.app.limits
    parts = assert_rpc_error(api.call("SendMessage", many(limits.max_parts + 1, 1)), -32602)
    assert (
        parts["message"]
        == f"params.message.parts: {limits.max_parts + 1} parts, the limit is 256 (max_parts)"
    )
    keys = assert_rpc_error(api.call("SendMessage", many(1, 20_000)), -32602)
    assert keys["message"] == "params.message.metadata: 20000 keys, the limit is 128 (max_metadata_keys)"


def test_default_body_limit_is_10_mib(tmp_path: Path) -> None:
    """In process (no second server): the default limit answers 413 one byte over 10 MiB, not at it."""
    app = example_agent("echo").asgi(store=f"sqlite:///{tmp_path}/d.db")
    assert app.jsonrpc.limits.max_body_bytes == DEFAULT_MAX_BODY

    async def exchange(body: bytes) -> tuple[int, bytes]:
        chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        headers = [(b"a2a-version", b"1.0"), (b"content-type", b"application/json")]
        scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
        await app.jsonrpc(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    unknown = envelope("NoSuchMethod", {})
    status, body = asyncio.run(exchange(padded(unknown, DEFAULT_MAX_BODY)))
    assert status == 200
    assert_rpc_error(json.loads(body), -32601)
    status, body = asyncio.run(exchange(padded(unknown, DEFAULT_MAX_BODY + 1)))
    assert status == 413
    assert_rpc_error(json.loads(body), -32600)


# -- headers and HTTP methods --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/jsonx",
        "application/octet-stream",
        "json",
        "",
        "*/*",
    ],
)
def test_wrong_content_type(api: Api, content_type: str) -> None:
    response = api.post(envelope("ListTasks", {}), {**A2A_V1, "Content-Type": content_type})
    assert response.status_code == 200
    assert_rpc_error(response.json(), -32005)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        "application/a2a+json",
        "application/x+json",
    ],
)
def test_json_content_types_are_accepted(api: Api, content_type: str) -> None:
    answer = api.call("ListTasks", {}, headers={**A2A_V1, "Content-Type": content_type})
    assert "result" in answer


@FUZZ
@given(
    content_type=st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(
        str.strip
    )
)
def test_arbitrary_content_type(api: Api, content_type: str) -> None:
    answer = api.call("ListTasks", {}, headers={**A2A_V1, "Content-Type": content_type})
    assert "result" in answer or error_code(answer) == -32005


@pytest.mark.parametrize("version", ["0.2.5", "2.0", "1", "1.", "1.0.0.0", "one", "1.0-rc"])
def test_unsupported_version(api: Api, version: str | None) -> None:
    headers = {**JSON_HEADERS, "A2A-Version": version}
    assert_rpc_error(api.call("ListTasks", {}, headers=headers), -32009)


@pytest.mark.parametrize("version", [None, "", "0.3", "0.3.0"])
def test_missing_or_0_3_version_speaks_v0_3(api: Api, version: str | None) -> None:
    """ListTasks is not a v0.3 method: a header-less (v0.3) caller gets method-not-found, v0.3 style."""
    headers = (
        {"Content-Type": "application/json"} if version is None else {**JSON_HEADERS, "A2A-Version": version}
    )
    answer = api.post(envelope("ListTasks", {}), headers).json()
    assert answer["error"]["code"] == -32601 and answer["error"]["data"]["reason"] == "METHOD_NOT_FOUND"


@FUZZ
# Printable ASCII only: latin-1 superscript digits crash the server (test_version_header_with_a_superscript_digit).
@given(version=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12))
def test_arbitrary_version_header(api: Api, version: str) -> None:
    answer = api.post(envelope("ListTasks", {}), {**JSON_HEADERS, "A2A-Version": version}).json()
    # 1.0.x lists tasks; 0.3.x (or a blank value) is v0.3, which has no ListTasks; the rest is refused
    assert "result" in answer or answer["error"]["code"] in (-32009, -32601)


def test_version_in_the_query_string(api: Api) -> None:
    url = api.srv.rpc_url + "?A2A-Version=1.0"
    response = api.post(envelope("ListTasks", {}), {"Content-Type": "application/json"}, url=url)
    assert "result" in response.json()


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
def test_non_post_methods(api: Api, method: str) -> None:
    response = api.client.request(
        method, api.srv.rpc_url, content=envelope("ListTasks", {}), headers=JSON_HEADERS
    )
    check_response(api, response, method=None, proto=True)
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]
    if method == "HEAD":
        assert response.content == b""
    else:
        assert_rpc_error(response.json(), -32600)


# -- notifications -------------------------------------------------------------------------------------

NOTIFICATIONS = [
    ("SendMessage", send_params("notification")),
    ("SendStreamingMessage", send_params("streaming notification")),
    ("GetTask", {"id": "nope"}),
    ("ListTasks", {}),
    ("CancelTask", {"id": "nope"}),
    ("SubscribeToTask", {"id": "nope"}),
    ("CreateTaskPushNotificationConfig", {"taskId": "nope", "url": "https://example.com"}),
    ("GetTaskPushNotificationConfig", {"taskId": "nope", "id": "x"}),
    ("ListTaskPushNotificationConfigs", {"taskId": "nope"}),
    ("DeleteTaskPushNotificationConfig", {"taskId": "nope", "id": "x"}),
    ("GetExtendedAgentCard", {}),
    ("SendMessage", {"message": "bad params"}),
    ("GetTask", []),
    ("NoSuchMethod", {}),
]


@pytest.mark.parametrize(
    ("method", "params"), NOTIFICATIONS, ids=[f"{m}-{i}" for i, (m, _) in enumerate(NOTIFICATIONS)]
)
def test_notification_gets_204_and_no_body(api: Api, method: str, params: Any) -> None:
    response = api.post(envelope(method, params, ABSENT))
    assert response.status_code == 204
    assert response.content == b""


def test_notification_with_a_bad_version_gets_204(api: Api) -> None:
    response = api.post(envelope("ListTasks", {}, ABSENT), {**JSON_HEADERS, "A2A-Version": "9.9"})
    assert response.status_code == 204
    assert response.content == b""


def test_send_message_notification_still_runs_the_task(api: Api) -> None:
    context_id = str(uuid.uuid4())
    response = api.post(envelope("SendMessage", send_params("quiet", contextId=context_id), ABSENT))
    assert response.status_code == 204
    listed = api.call("ListTasks", {"contextId": context_id, "includeArtifacts": True})["result"]
    (task,) = listed["tasks"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert echoed_text(task) == "quiet"


# -- bugs found by fuzzing, kept as regression tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "query"), [(b"1.\xb3", ""), (b"\xb9.0", ""), (None, "?A2A-Version=1.%E2%81%B0")]
)
def test_version_header_with_a_superscript_digit(api: Api, header: bytes | None, query: str) -> None:
    headers: dict[str, Any] = {"Content-Type": "application/json"}
    if header is not None:
        headers["A2A-Version"] = header
    response = api.post(envelope("ListTasks", {}), headers, url=api.srv.rpc_url + query)
    assert_rpc_error(response.json(), -32009)


@pytest.mark.parametrize("decoded", [f"{2**63}:1", f"1:{2**63}", "1:\u00b3"])
def test_page_token_that_decodes_to_a_bad_number(api: Api, decoded: str) -> None:
    token = base64.urlsafe_b64encode(decoded.encode()).decode().rstrip("=")
    assert_rpc_error(api.call("ListTasks", {"pageToken": token}), -32602)


def test_depth_check_on_an_unterminated_string(api: Api) -> None:
    # 400 KB: 101 brackets (so the scan runs), a quote, then 200,000 escaped quotes and no closing quote.
    # The scan is linear by construction; the quadratic one it replaced took minutes on this input, which
    # the client's timeout turns into a failure.
    body = b"[" * 101 + b'"' + b'\\"' * 200_000
    answer = api.post(body).json()
    assert error_code(answer) in (-32600, -32602, -32700)


@pytest.mark.parametrize(
    "body", [b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}', b"{}", b'{"method": "ListTasks"}'], ids=repr
)
def test_invalid_request_object_without_id_gets_an_error(api: Api, body: bytes) -> None:
    response = api.post(body)
    assert response.status_code == 200
    answer = response.json()
    assert_rpc_error(answer, -32600)
    assert answer["id"] is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","extra":"\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"extra":"\xff"}}',
    ],
    ids=repr,
)
def test_invalid_utf8_in_an_ignored_member_is_a_parse_error(api: Api, body: bytes) -> None:
    assert_rpc_error(api.call_body(body, "ListTasks"), -32700)


# -- and nothing was corrupted (keep this test last) -------------------------------------------------


def list_all(api: Api, tenant: str) -> list[dict[str, Any]]:
    """Every task of ``tenant``, following nextPageToken (no history: deep metadata stays out)."""
    listed: list[dict[str, Any]] = []
    params: dict[str, Any] = {"tenant": tenant, "pageSize": 100, "historyLength": 0, "includeArtifacts": True}
    while True:
        page = api.call("ListTasks", params)["result"]
        listed += page["tasks"]
        if not page["nextPageToken"]:
            break
        params["pageToken"] = page["nextPageToken"]
    ids = [t["id"] for t in listed]
    assert len(ids) == len(set(ids)) == page["totalSize"]
    return listed


def test_nothing_was_corrupted(api: Api) -> None:
    task = api.call("SendMessage", send_params("still fine"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert echoed_text(task) == "still fine"

    events = api.stream(send_params("still streaming"))
    assert all("result" in e for e in events)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    seen = 0
    for tenant in ("", FUZZ_TENANT, DEEP_TENANT):
        listed = list_all(api, tenant)
        seen += len(listed)
        if tenant == "":
            assert task["id"] in [t["id"] for t in listed]
        for entry in listed:
            key = {"tenant": tenant, "id": entry["id"]}
            # historyLength 0 keeps deep user metadata out of the strict ProtoJSON check.
            got = api.call("GetTask", {**key, "historyLength": 0})["result"]
            assert got["status"]["state"] in TASK_STATES
            # echo always completes, unless the request's acceptedOutputModes refused its text artifact
            if got["status"]["state"] == "TASK_STATE_FAILED":
                reason = got["status"]["message"]["parts"][0]["text"]
                assert "which the client does not accept (acceptedOutputModes" in reason, got
                assert not got.get("artifacts"), got
            else:
                assert got["status"]["state"] == "TASK_STATE_COMPLETED", got
                assert len(got["artifacts"]) == 1
            assert got["status"] == entry["status"]
            assert got["contextId"] == entry["contextId"]
            full = api.call("GetTask", key, proto=False)["result"]
            first = full["history"][0]  # the message that created the task, as it was sent
            assert first["role"] in ("ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED")
            assert first["taskId"] == entry["id"]
            assert first["contextId"] == entry["contextId"]
            assert first["parts"]
            # A finished task accepts nothing more, and bad input against it changes nothing.
            assert_rpc_error(api.call("CancelTask", key), -32002)
            assert_rpc_error(api.call("SubscribeToTask", key), -32004)
            more = {"tenant": tenant, "message": user_message("more", taskId=entry["id"], contextId="x")}
            assert_rpc_error(api.call("SendMessage", more), -32004)
            assert api.call("GetTask", key, proto=False)["result"] == full
    assert seen >= 2
