"""A request handler's result that is not what its operation answers (the operation table's response type)
is an internal error to the caller on every binding and version, and the log names the handler: never
``{"result": null}``, ``{}``, a plain-text 500, or a dict passed through as if it were a task.

Every binding is served by a real server: JSON-RPC and HTTP+JSON at v1.0 and v0.3, and gRPC."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc

from conftest import A2A_V1, RunningServer, assert_rpc_error, rpc, start_server, user_message
from skillwire import Agent, BaseRequestHandler, CallContext
from skillwire.protocol import models as m

WAIT = 10.0

#: What a handler of one's own may wrongly return, for SendMessage and GetTask.
WRONG = {
    "None": None,
    "empty dict": {},
    "a dict that is not a task": {"not": "a task"},
    "text": "done",
    "a message where a task is due": m.Message(message_id="x", role=m.Role.AGENT, parts=[m.Part(text="hi")]),
}


class Wrong(BaseRequestHandler):
    """Answers every operation with the same wrong value."""

    def __init__(self, value: Any) -> None:
        self.value = value

    async def on_send_message(self, request: Any, call: CallContext) -> Any:
        return self.value if not isinstance(self.value, m.Message) else {"message": "not a struct"}

    async def on_get_task(self, request: Any, call: CallContext) -> Any:
        return self.value

    async def on_list_tasks(self, request: Any, call: CallContext) -> Any:
        return self.value

    async def on_send_streaming_message(self, request: Any, call: CallContext) -> Any:
        return self.value

    async def on_subscribe_to_task(self, request: Any, call: CallContext) -> Any:
        async def events() -> AsyncIterator[Any]:
            yield {"task": "not an event"}

        return events()


@pytest.fixture(params=list(WRONG), ids=list(WRONG))
def served(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    agent = Agent("wrong", "Answers wrongly.", executor=lambda context, events: events.complete())
    srv = start_server(agent.asgi(store="memory://", handler=Wrong(WRONG[request.param]), grpc_port=0))
    try:
        yield srv
    finally:
        srv.stop()


def _logged(caplog: pytest.LogCaptureFixture, operation: str) -> None:
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("Wrong.on_" in line and operation in line for line in lines), lines


SEND = {"message": user_message("hi")}


def test_jsonrpc_v10_answers_an_internal_error(
    served: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        for method, params in (("SendMessage", SEND), ("GetTask", {"id": "t1"}), ("ListTasks", {})):
            answer = httpx.post(served.rpc_url, json=rpc(method, params), headers=A2A_V1, timeout=WAIT)
            assert answer.status_code == 200, answer.text
            error = assert_rpc_error(answer.json(), -32603)
            assert error["message"] == "Internal error"
            _logged(caplog, method)


def test_rest_v10_answers_problem_json(served: RunningServer, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        calls = (("POST", "/message:send", SEND), ("GET", "/tasks/t1", None), ("GET", "/tasks", None))
        for method, path, body in calls:
            answer = httpx.request(method, served.url + path, json=body, headers=A2A_V1, timeout=WAIT)
            assert answer.status_code == 500, answer.text
            assert answer.headers["content-type"].startswith("application/problem+json") or answer.headers[
                "content-type"
            ].startswith("application/json")
            assert answer.json()["error"]["status"] == "INTERNAL", answer.text


def test_v03_jsonrpc_answers_a_jsonrpc_error(served: RunningServer) -> None:
    message = {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    for method, params in (("message/send", {"message": message}), ("tasks/get", {"id": "t1"})):
        answer = httpx.post(served.rpc_url, json=rpc(method, params), timeout=WAIT)  # no A2A-Version: v0.3
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert "result" not in body and body["error"]["code"] == -32603, body


def test_v03_rest_answers_an_error_not_plain_text(served: RunningServer) -> None:
    message = {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}]}
    answer = httpx.post(served.url + "/v1/message:send", json={"message": message}, timeout=WAIT)
    assert answer.status_code == 500, answer.text
    assert answer.headers["content-type"].split(";")[0] != "text/plain"
    answer.json()  # JSON, not "Internal Server Error"


def test_grpc_answers_internal(served: RunningServer) -> None:
    assert served.app.grpc_address is not None
    with grpc.insecure_channel(served.app.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        message = a2a_pb2.Message(message_id="g1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hi")])
        calls = (
            (stub.SendMessage, a2a_pb2.SendMessageRequest(message=message)),
            (stub.GetTask, a2a_pb2.GetTaskRequest(id="t1")),
        )
        for rpc_call, request in calls:
            with pytest.raises(grpc.RpcError) as caught:
                rpc_call(request, metadata=(("a2a-version", "1.0"),), timeout=WAIT)
            assert caught.value.code() is grpc.StatusCode.INTERNAL


def test_streams_of_the_wrong_type_answer_an_error(served: RunningServer) -> None:
    streamed = httpx.post(
        served.rpc_url, json=rpc("SendStreamingMessage", SEND), headers=A2A_V1, timeout=WAIT
    )
    assert_rpc_error(streamed.json(), -32603)
    # a stream whose events are not StreamResponse: its one event is the error
    with httpx.stream(
        "POST", served.rpc_url, json=rpc("SubscribeToTask", {"id": "t1"}), headers=A2A_V1, timeout=WAIT
    ) as answer:
        text = answer.read().decode()
    assert '"code":-32603' in text.replace(" ", ""), text
    assert "not an event" not in text


def test_send_message_may_answer_a_bare_task_or_message() -> None:
    """A Task or a Message is what SendMessage answers: one of them returned bare is wrapped, not refused."""
    task = m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=m.TaskState.COMPLETED))
    reply = m.Message(message_id="r1", role=m.Role.AGENT, parts=[m.Part(text="hi")])

    class Bare(BaseRequestHandler):
        async def on_send_message(self, request: m.SendMessageRequest, call: CallContext) -> Any:
            return task if request.message.text() == "task" else reply

    agent = Agent("bare", "Answers bare.", executor=lambda context, events: events.complete())
    srv = start_server(agent.asgi(store="memory://", handler=Bare()))
    try:
        for text, key in (("task", "task"), ("message", "message")):
            params = {"message": user_message(text)}
            answer = httpx.post(srv.rpc_url, json=rpc("SendMessage", params), headers=A2A_V1, timeout=WAIT)
            assert key in answer.json()["result"], answer.text
    finally:
        srv.stop()


def test_a_result_that_cannot_be_encoded_is_an_internal_error() -> None:
    """The right type holding what JSON cannot carry (an object in a data part): an internal error in the
    binding's shape, on every HTTP binding and version, not a plain-text 500."""
    bad = m.Task(
        id="t1",
        context_id="c1",
        status=m.TaskStatus(state=m.TaskState.COMPLETED),
        artifacts=[m.Artifact(artifact_id="a1", parts=[m.Part(data={"x": object()})])],
    )

    class Unencodable(BaseRequestHandler):
        async def on_get_task(self, request: Any, call: CallContext) -> Any:
            return bad

    agent = Agent(
        "bad", "Answers what cannot be encoded.", executor=lambda context, events: events.complete()
    )
    srv = start_server(agent.asgi(store="memory://", handler=Unencodable()))
    try:
        answer = httpx.post(srv.rpc_url, json=rpc("GetTask", {"id": "t1"}), headers=A2A_V1, timeout=WAIT)
        assert_rpc_error(answer.json(), -32603)
        v03 = httpx.post(srv.rpc_url, json=rpc("tasks/get", {"id": "t1"}), timeout=WAIT)
        assert v03.json()["error"]["code"] == -32603, v03.text
        for path, headers in (("/tasks/t1", A2A_V1), ("/v1/tasks/t1", {})):
            rest = httpx.get(srv.url + path, headers=headers, timeout=WAIT)
            assert rest.status_code == 500 and rest.headers["content-type"].split(";")[0] != "text/plain"
            rest.json()
    finally:
        srv.stop()
