"""Decoded-JSON budgets (issue 9): nesting depth, values, string length, parts, metadata keys.

First the sans-IO checks of :mod:`skillwire.wire.budget` against a reference count; then every budget on
every binding of one real server (JSON-RPC and HTTP+JSON, each in v1.0 and v0.3, and gRPC) with small
limits, each answer checked for its protocol shape: -32602 / 400 / INVALID_ARGUMENT with ErrorInfo naming
the budget and its limit, and a message saying where. Then what the bindings do with a body's size: the
``Content-Length`` refusal before reading, the decoding of large bodies off the event loop, and
``CallContext.request_bytes``.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import grpc
import httpx
import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import A2A_V1, RunningServer, assert_rpc_error, example_agent, start_server
from skillwire import Limits
from skillwire.errors import InvalidParamsError
from skillwire.protocol import models as m
from skillwire.wire import budget
from skillwire.wire.budget import check_json, check_shape, shape_may_exceed

TIMEOUT = 10.0
LIMITS = Limits(max_json_depth=8, max_json_nodes=300, max_string_length=200, max_parts=3, max_metadata_keys=4)


# -- the raw check against a reference count ----------------------------------------------------------------


def values(value: Any) -> int:
    """Values as check_json counts them: every value, and every object key."""
    if isinstance(value, list):
        return 1 + sum(map(values, value))
    if isinstance(value, dict):
        return 1 + sum(1 + values(v) for v in value.values())
    return 1


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


tricky_text = st.text(alphabet='ab"\\[]{},:\n \u2603', max_size=8)
scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | tricky_text
)
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(tricky_text, kids, max_size=4),
    max_leaves=60,
)


@settings(max_examples=400, deadline=None, database=None)
@given(
    value=json_values, indent=st.booleans(), ascii_only=st.booleans(), chunk=st.sampled_from([1, 2, 7, 65536])
)
def test_the_scan_counts_values_and_nesting_exactly(
    value: Any, indent: bool, ascii_only: bool, chunk: int
) -> None:
    """Strings full of quotes, escapes and brackets, whitespace, and every chunk boundary (the chunk size is
    shrunk to a few bytes) do not change the count."""
    body = json.dumps(value, indent=1 if indent else None, ensure_ascii=ascii_only).encode()
    original = budget._CHUNK
    budget._CHUNK = chunk
    try:
        nodes, brackets = budget._scan(body, 10**9)
    finally:
        budget._CHUNK = original
    assert nodes == values(value)
    assert max(accumulate(memoryview(brackets.translate(budget._DELTAS)).cast("b")), default=0) == depth(
        value
    )


@pytest.mark.parametrize("kind", ["[", '{"a":'])
def test_depth_at_and_over_the_limit(kind: str) -> None:
    close = b"]" if kind == "[" else b"}"
    limits = Limits(max_json_depth=150)
    check_json(kind.encode() * 150 + b"1" + close * 150, limits, "body")  # at the limit: fine
    with pytest.raises(InvalidParamsError) as info:
        check_json(kind.encode() * 151 + b"1" + close * 151, limits, "body")
    assert info.value.message == "body: nesting 151 levels deep, the limit is 150 (max_json_depth)"
    assert info.value.metadata == {"budget": "max_json_depth", "limit": "150"}
    assert info.value.field_violations == [
        ("body", "nesting 151 levels deep, the limit is 150 (max_json_depth)")
    ]


def test_values_at_and_over_the_limit() -> None:
    limits = Limits(max_json_nodes=1000)
    check_json(json.dumps(list(range(999))).encode(), limits, "request")  # the array and 999 numbers
    with pytest.raises(InvalidParamsError) as info:
        check_json(json.dumps(list(range(1000))).encode(), limits, "request")
    assert info.value.message == "request: more than 1000 JSON values, the limit is 1000 (max_json_nodes)"


def test_brackets_and_commas_inside_strings_are_not_structure() -> None:
    text = '[{"a":1},' * 20_000 + '\\"]]]'
    body = json.dumps({"text": text, "list": [[[]]]}).encode()
    check_json(body, Limits(max_json_depth=4, max_json_nodes=7), "body")  # 5 values and 2 keys
    with pytest.raises(InvalidParamsError):
        check_json(body, Limits(max_json_depth=2, max_json_nodes=7), "body")


def test_ten_mib_of_tiny_arrays_is_refused_without_building_them() -> None:
    """The issue's case: today's decoder spent ~500 MB on this body; the check allocates a few chunks."""
    body = b"[" + b"[]," * 3_500_000 + b"[]]"
    tracemalloc.start()
    try:
        with pytest.raises(InvalidParamsError, match="max_json_nodes"):
            check_json(body, Limits(), "request")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_small_bodies_skip_the_shape_walk() -> None:
    small = b'{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":{"a":1}}}'
    assert not shape_may_exceed(small, Limits())
    assert shape_may_exceed(small, Limits(max_metadata_keys=2))  # four colons: a walk might find three keys
    assert shape_may_exceed(small, Limits(max_string_length=10))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            m.SendMessageRequest(
                message=m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(text="x")] * 4)
            ),
            "params.message.parts: 4 parts, the limit is 3 (max_parts)",
        ),
        (
            m.SendMessageRequest(
                message=m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(text="x")]),
                metadata={str(i): i for i in range(5)},
            ),
            "params.metadata: 5 keys, the limit is 4 (max_metadata_keys)",
        ),
        (
            m.SendMessageRequest(
                message=m.Message(
                    message_id="m", role=m.Role.USER, parts=[m.Part(text="x"), m.Part(raw=b"y" * 151)]
                )
            ),
            "params.message.parts[1].raw: a string of 204 characters, the limit is 200 (max_string_length)",
        ),
        (
            m.SendMessageRequest(
                message=m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(data={"k" * 201: 1})])
            ),
            'params.message.parts[0].data["'
            + "k" * 64
            + '..."]: a string of 201 characters, the limit is 200'
            " (max_string_length)",
        ),
        (
            m.SendMessageRequest(
                message=m.Message(
                    message_id="m",
                    role=m.Role.USER,
                    parts=[m.Part(text="x")],
                    metadata={"deep": [[[[[[[1]]]]]]]},
                )
            ),
            "params.message.metadata.deep[0][0][0][0][0]: nesting more than 8 levels deep, the limit is 8 (max_json_depth)",
        ),
        (
            m.SendMessageRequest(
                message=m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(data=list(range(400)))])
            ),
            "params.message.parts[0].data[*]: more than 300 JSON values, the limit is 300 (max_json_nodes)",
        ),
    ],
    ids=["parts", "metadata-keys", "raw-as-base64", "key", "depth", "values"],
)
def test_the_shape_walk_names_where(value: msgspec.Struct, message: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        check_shape(value, LIMITS, "params")
    pattern = re.escape(message).replace(r"\*", r"\d+")
    assert re.fullmatch(pattern, info.value.message), info.value.message


# -- one server, every binding ------------------------------------------------------------------------------


class ErrorLog(logging.Handler):
    """What the server logs at ERROR (tracebacks, uvicorn's "Exception in ASGI application")."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.name}: {record.getMessage()}")


@dataclass
class Peer:
    srv: RunningServer
    http: httpx.Client
    grpc: Any  # the A2AService stub

    @property
    def limits(self) -> Limits:
        return self.srv.app.limits


@pytest.fixture(scope="module")
def peer() -> Iterator[Peer]:
    app = example_agent("echo").asgi(store="memory://", limits=LIMITS, grpc_port=0)
    srv = start_server(app)
    log = ErrorLog()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "skillwire")]
    for logger in loggers:
        logger.addHandler(log)
    try:
        assert app.grpc_address is not None
        with httpx.Client(timeout=TIMEOUT) as http, grpc.insecure_channel(app.grpc_address) as channel:
            yield Peer(srv, http, a2a_pb2_grpc.A2AServiceStub(channel))
        assert not log.records, log.records
    finally:
        for logger in loggers:
            logger.removeHandler(log)
        srv.stop()


@dataclass(frozen=True)
class Refusal:
    """A refused call, whatever the binding: its message and its ErrorInfo (reason, metadata)."""

    message: str
    reason: str
    metadata: dict[str, str]


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


#: Message contents past each budget of LIMITS (text parts, and metadata), as plain values.
OVER: dict[str, tuple[list[str], dict[str, Any]]] = {
    "max_parts": (["p"] * 4, {}),
    "max_metadata_keys": (["p"], {f"k{i}": i for i in range(5)}),
    "max_string_length": (["x" * 201], {}),
    "max_json_depth": (["p"], {"k": nested(9)}),
    "max_json_nodes": (["p"], {"k": list(range(400))}),
}
AT_THE_LIMIT = (["x" * 200, "b", "c"], {f"k{i}": i for i in range(4)})

BINDINGS = ["jsonrpc", "rest", "jsonrpc-v0.3", "rest-v0.3", "grpc"]


def message_for(binding: str, texts: list[str], metadata: dict[str, Any]) -> dict[str, Any]:
    """The message as the binding writes it."""
    message_id = f"budget-{uuid.uuid4()}"
    if binding == "jsonrpc-v0.3":
        parts: list[dict[str, Any]] = [{"kind": "text", "text": t} for t in texts]
        out: dict[str, Any] = {"kind": "message", "messageId": message_id, "role": "user", "parts": parts}
    elif binding == "rest-v0.3":
        out = {"messageId": message_id, "role": "ROLE_USER", "content": [{"text": t} for t in texts]}
    else:
        out = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": t} for t in texts]}
    if metadata:
        out["metadata"] = metadata
    return out


def send(peer: Peer, binding: str, texts: list[str], metadata: dict[str, Any]) -> Refusal | dict[str, Any]:
    """SendMessage over ``binding``: the refusal, checked for the binding's error shape, or the result."""
    message = message_for(binding, texts, metadata)
    url = peer.srv.url
    if binding == "grpc":
        request = json_format.ParseDict({"message": message}, pb.SendMessageRequest())
        try:
            answer = peer.grpc.SendMessage(request, metadata=(("a2a-version", "1.0"),), timeout=TIMEOUT)
        except grpc.RpcError as error:
            return grpc_refusal(error)
        return json_format.MessageToDict(answer)
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}
        response = peer.http.post(url + "/", json=body, headers=A2A_V1)
        assert response.status_code == 200, response.text
        answer = response.json()
        if "result" in answer:
            return answer["result"]  # type: ignore[no-any-return]
        error = assert_rpc_error(answer, -32602)
        assert answer["id"] == 7
        info = error["data"][0]
        return Refusal(error["message"], info["reason"], info.get("metadata", {}))
    if binding == "jsonrpc-v0.3":
        body = {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": message}}
        response = peer.http.post(url + "/", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        if "result" in answer:
            return answer["result"]  # type: ignore[no-any-return]
        assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
        data = answer["error"]["data"]  # v0.3: free-form data, here the ErrorInfo's fields
        return Refusal(answer["error"]["message"], data["reason"], data.get("metadata", {}))
    path, headers = ("/message:send", A2A_V1) if binding == "rest" else ("/v1/message:send", {})
    response = peer.http.post(url + path, json={"message": message}, headers=headers)
    if response.status_code == 200:
        return response.json()  # type: ignore[no-any-return]
    return rest_refusal(response)


def rest_refusal(response: httpx.Response) -> Refusal:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT"), error
    info = error["details"][0]
    assert (
        info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" and info["domain"] == "a2a-protocol.org"
    )
    return Refusal(error["message"], info["reason"], info.get("metadata", {}))


def grpc_refusal(error: Any) -> Refusal:
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.domain == "a2a-protocol.org"
    return Refusal(error.details(), info.reason, dict(info.metadata))


def where(binding: str, name: str) -> str:
    """Where each binding says the budget was passed."""
    raw = {"jsonrpc": "request", "jsonrpc-v0.3": "request", "rest": "body", "rest-v0.3": "body"}
    if name in ("max_json_depth", "max_json_nodes"):
        return raw.get(binding, "message.metadata")  # gRPC has no JSON bytes: the walk finds it
    root = {"jsonrpc": "params.", "jsonrpc-v0.3": "params.", "rest": "body.", "rest-v0.3": "body."}.get(
        binding, ""
    )
    parts = "content" if binding == "rest-v0.3" else "parts"
    return (
        root
        + {
            "max_parts": f"message.{parts}",
            "max_metadata_keys": "message.metadata",
            "max_string_length": f"message.{parts}[0].text",
        }[name]
    )


FOUND = {
    "max_parts": "4 parts",
    "max_metadata_keys": "5 keys",
    "max_string_length": "a string of 201 characters",
}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("name", sorted(OVER))
def test_every_budget_on_every_binding_is_a_clear_invalid_params(peer: Peer, binding: str, name: str) -> None:
    refusal = send(peer, binding, *OVER[name])
    assert isinstance(refusal, Refusal), refusal
    limit = getattr(LIMITS, name)
    assert refusal.reason == "INVALID_PARAMS"
    assert refusal.metadata == {"budget": name, "limit": str(limit)}
    assert refusal.message.startswith(where(binding, name)), refusal.message
    assert refusal.message.endswith(f"the limit is {limit} ({name})"), refusal.message
    if name in FOUND:
        assert refusal.message == f"{where(binding, name)}: {FOUND[name]}, the limit is {limit} ({name})"


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_request_at_every_limit_is_served(peer: Peer, binding: str) -> None:
    answer = send(peer, binding, *AT_THE_LIMIT)
    assert not isinstance(answer, Refusal), answer
    task = answer.get("task", answer)
    state = task["status"]["state"]
    assert state in ("TASK_STATE_COMPLETED", "completed"), answer


@pytest.mark.parametrize(
    ("path", "headers", "message"),
    [
        ("/tasks?contextId=" + "c" * 201, A2A_V1, "query.contextId: a string of 201 characters"),
        ("/tasks/" + "t" * 201, A2A_V1, "path.id: a string of 201 characters"),
        ("/tasks?status=" + ",".join(["TASK_STATE_WORKING"] * 301), A2A_V1, "query: 301 values"),
        ("/v1/tasks/" + "t" * 201, {}, "path: a string of 211 characters"),
        ("/v1/tasks/t?historyLength=1" + "&x=1" * 400, {}, "query: more than 300 values"),
    ],
    ids=["query-string", "path-string", "query-values", "v0.3-path", "v0.3-query-fields"],
)
def test_rest_query_and_path_are_budgeted_too(
    peer: Peer, path: str, headers: dict[str, str], message: str
) -> None:
    refusal = rest_refusal(peer.http.get(peer.srv.url + path, headers=headers))
    assert refusal.message.startswith(message + ", the limit is"), refusal.message


@pytest.mark.parametrize("binding", ["jsonrpc", "jsonrpc-v0.3"])
def test_a_refusal_before_decoding_keeps_the_request_id(peer: Peer, binding: str) -> None:
    method = "SendMessage" if binding == "jsonrpc" else "message/send"
    body = {"jsonrpc": "2.0", "id": "keep-me", "method": method, "params": {"filler": list(range(400))}}
    headers = A2A_V1 if binding == "jsonrpc" else {}
    answer = peer.http.post(peer.srv.url + "/", json=body, headers=headers).json()
    assert answer["id"] == "keep-me"
    assert answer["error"]["code"] == -32602
    assert "(max_json_nodes)" in answer["error"]["message"]


# -- random shapes never cost a 500 ---------------------------------------------------------------------------

shapes = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=250),
    lambda kids: st.lists(kids, max_size=6) | st.dictionaries(st.text(max_size=6), kids, max_size=6),
    max_leaves=80,
)


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    binding=st.sampled_from(BINDINGS),
    texts=st.lists(st.text(max_size=250), min_size=1, max_size=6),
    metadata=st.dictionaries(st.text(max_size=8), shapes, max_size=7),
)
def test_random_shapes_over_or_under_the_budgets_never_fail_the_server(
    peer: Peer, binding: str, texts: list[str], metadata: dict[str, Any]
) -> None:
    answer = send(peer, binding, texts, metadata)  # any 5xx (or other shape) fails inside send()
    if isinstance(answer, Refusal):
        assert answer.reason == "INVALID_PARAMS", answer


# -- what the bindings do with a body's size ------------------------------------------------------------------


def raw_exchange(port: int, head: bytes) -> bytes:
    """Send ``head`` (request line and headers, no body) and return the response head and what follows."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


@pytest.mark.parametrize("path", ["/", "/message:send"])
def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(peer: Peer, path: str) -> None:
    """The client sends only the headers: the 413 comes without the server waiting for (or reading) the
    body it announced."""
    too_big = peer.limits.max_body_bytes + 1
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n"
        f"Content-Length: {too_big}\r\n\r\n"
    ).encode()
    answer = raw_exchange(peer.srv.port, head)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert peer.http.get(peer.srv.url + "/.well-known/agent-card.json").status_code == 200


class Recorder:
    """Wraps the runtime and records, per call, CallContext.request_bytes and the thread it ran on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.request_bytes: list[int] = []

    async def handle(self, operation: Any, params: Any, context: Any) -> Any:
        self.request_bytes.append(context.request_bytes)
        return await self.inner.handle(operation, params, context)


@pytest.fixture(scope="module")
def sized() -> Iterator[tuple[RunningServer, Recorder, list[str]]]:
    """A server that decodes bodies over 2 KiB on a worker thread; the names of the threads that decoded."""
    recorders: list[Recorder] = []

    def wrap(runtime: Any) -> Recorder:
        recorders.append(Recorder(runtime))
        return recorders[-1]

    limits = Limits(offload_decode_bytes=2048)
    app = example_agent("echo").asgi(store="memory://", limits=limits, wrap=wrap, grpc_port=0)
    decoded_on: list[str] = []
    for endpoint in (app.jsonrpc, app.rest):
        decode = endpoint.decode

        def spy(*args: Any, _decode: Callable[..., Any] = decode) -> Any:
            decoded_on.append(threading.current_thread().name)
            return _decode(*args)

        endpoint.decode = spy  # type: ignore[method-assign]
    srv = start_server(app)
    try:
        yield srv, recorders[0], decoded_on
    finally:
        srv.stop()


@pytest.mark.parametrize("path", ["/", "/message:send"])
@pytest.mark.parametrize("size", [100, 5000])
def test_large_bodies_are_decoded_off_the_event_loop(
    sized: tuple[RunningServer, Recorder, list[str]], path: str, size: int
) -> None:
    srv, recorder, decoded_on = sized
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x" * size}]}
    params = {"message": message}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params} if path == "/" else params
    )
    decoded_on.clear()
    response = httpx.post(
        srv.url + path, content=body, headers={**A2A_V1, "Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert decoded_on, "the endpoint did not decode"
    on_the_loop = decoded_on[-1] == srv.thread.name  # uvicorn's event loop runs in the server's thread
    assert on_the_loop is (size < 2048), decoded_on
    assert recorder.request_bytes[-1] == len(body.encode())


def test_grpc_fills_request_bytes(sized: tuple[RunningServer, Recorder, list[str]]) -> None:
    srv, recorder, _ = sized
    assert srv.app.grpc_address is not None
    request = pb.SendMessageRequest(
        message=pb.Message(
            message_id=str(uuid.uuid4()),
            role=pb.ROLE_USER,
            parts=[pb.Part(text="sized")],
            metadata=struct_pb2.Struct(fields={"k": struct_pb2.Value(string_value="v")}),
        )
    )
    with grpc.insecure_channel(srv.app.grpc_address) as channel:
        a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            request, metadata=(("a2a-version", "1.0"),), timeout=TIMEOUT
        )
    assert recorder.request_bytes[-1] == request.ByteSize()
