"""The HTTP+JSON (REST) binding against a real server; extensions and tenants on every HTTP binding."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, RunningServer, assert_proto, assert_rpc_error, example_agent, rpc, user_message
from skillwire import Agent, RequestContext, TaskEvents
from skillwire.types import AgentExtension
from skillwire.wire.generations import GENERATIONS_URI, IDEMPOTENCY_URI
from skillwire.wire.sse import SSEDecoder

TIMEOUT = 10.0


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=A2A_V1) as c:
        yield c


@pytest.fixture
def tck(serve: Any) -> RunningServer:
    return serve(example_agent("tck").asgi(store="memory://"))  # type: ignore[no-any-return]


def assert_status(response: httpx.Response, status: int, reason: str | None = None) -> dict[str, Any]:
    """An AIP-193 error body with ErrorInfo; returns the error object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == status and isinstance(error["message"], str) and error["status"]
    info = error["details"][0]
    assert (
        info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" and info["domain"] == "a2a-protocol.org"
    )
    if reason is not None:
        assert info["reason"] == reason
    return error  # type: ignore[no-any-return]


def send_body(message_id: str, **extra: Any) -> dict[str, Any]:
    return {"message": user_message("hi", messageId=message_id), **extra}


async def sse(response: httpx.Response) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    out = []
    async for chunk in response.aiter_bytes():
        out += [json.loads(d) for d in decoder.feed(chunk)]
    return out


async def test_send_get_list_cancel(tck: RunningServer, client: httpx.AsyncClient) -> None:
    sent = await client.post(tck.url + "/message:send", json=send_body("tck-complete-task-1"))
    assert sent.status_code == 200 and sent.headers["content-type"] == "application/json"
    task = assert_proto(sent.text, "SendMessageResponse").task
    assert task.status.state == 3  # TASK_STATE_COMPLETED
    got = await client.get(f"{tck.url}/tasks/{task.id}", params={"historyLength": "1"})
    assert got.status_code == 200
    body = got.json()
    assert_proto(body, "Task")
    assert body["id"] == task.id and len(body["history"]) == 1
    waiting = (await client.post(tck.url + "/message:send", json=send_body("tck-input-required-1"))).json()[
        "task"
    ]
    listed = await client.get(tck.url + "/tasks", params={"contextId": waiting["contextId"], "pageSize": "5"})
    page = listed.json()
    assert_proto(page, "ListTasksResponse")
    assert [t["id"] for t in page["tasks"]] == [waiting["id"]]
    assert page["pageSize"] == 5 and page["totalSize"] == 1 and page["nextPageToken"] == ""
    by_state = (await client.get(tck.url + "/tasks", params={"status": "TASK_STATE_INPUT_REQUIRED"})).json()
    assert [t["id"] for t in by_state["tasks"]] == [waiting["id"]]
    with_artifacts = (await client.get(tck.url + "/tasks", params={"includeArtifacts": "true"})).json()
    assert any("artifacts" in t for t in with_artifacts["tasks"]) is False  # neither task has artifacts
    # an empty body is fine, with a JSON Content-Type (without one, a POST is refused: docs/security.md)
    canceled = await client.post(
        f"{tck.url}/tasks/{waiting['id']}:cancel", headers={"Content-Type": "application/json"}
    )
    assert canceled.status_code == 200 and canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    again = await client.post(f"{tck.url}/tasks/{waiting['id']}:cancel", json={})
    assert_status(again, 400, "TASK_NOT_CANCELABLE")


async def test_errors_are_aip_193_with_the_v1_0_1_statuses(
    tck: RunningServer, client: httpx.AsyncClient, serve: Any
) -> None:
    assert_status(await client.get(tck.url + "/tasks/nope"), 404, "TASK_NOT_FOUND")
    assert_status(await client.post(tck.url + "/tasks/nope:cancel"), 404, "TASK_NOT_FOUND")
    push = {"url": "https://example.com/hook"}
    assert_status(
        await client.post(tck.url + "/tasks/t/pushNotificationConfigs", json=push), 404, "TASK_NOT_FOUND"
    )
    off = serve(example_agent("tck").asgi(store="memory://", push=False))
    error = assert_status(await client.post(off.url + "/tasks/t/pushNotificationConfigs", json=push), 400)
    assert (
        error["status"] == "FAILED_PRECONDITION"
        and error["details"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    )
    assert_status(
        await client.get(off.url + "/tasks/t/pushNotificationConfigs"), 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"
    )
    assert_status(await client.get(off.url + "/tasks/t/pushNotificationConfigs/c"), 400)
    assert_status(await client.delete(off.url + "/tasks/t/pushNotificationConfigs/c"), 400)
    assert_status(await client.get(tck.url + "/extendedAgentCard"), 400, "UNSUPPORTED_OPERATION")
    missing = await client.post(tck.url + "/message:send", json={})
    assert "message" in assert_status(missing, 400, "INVALID_PARAMS")["message"]
    bad_json = await client.post(
        tck.url + "/message:send", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert_status(bad_json, 400, "PARSE_ERROR")
    version = await client.post(
        tck.url + "/message:send", json=send_body("x"), headers={"A2A-Version": "99.0"}
    )
    assert_status(version, 400, "VERSION_NOT_SUPPORTED")
    text = await client.post(tck.url + "/message:send", content=b"hi", headers={"Content-Type": "text/plain"})
    assert_status(text, 415, "CONTENT_TYPE_NOT_SUPPORTED")
    a2a_json = await client.post(
        tck.url + "/message:send",
        content=json.dumps(send_body("tck-complete-task-2")),
        headers={"Content-Type": "application/a2a+json"},
    )
    assert a2a_json.status_code == 200
    wrong_method = await client.delete(tck.url + "/message:send")
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    assert (await client.get(tck.url + "/no/such/thing/here")).status_code == 404
    bad_query = await client.get(tck.url + "/tasks", params={"pageSize": "many"})
    assert "pageSize" in assert_status(bad_query, 400, "INVALID_PARAMS")["message"]


async def test_streams_are_bare_stream_responses(tck: RunningServer, client: httpx.AsyncClient) -> None:
    async with client.stream(
        "POST", tck.url + "/message:stream", json=send_body("tck-stream-001-a")
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = await sse(response)
    for event in events:
        assert_proto(event, "StreamResponse")
    assert [next(iter(e)) for e in events] == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    waiting = (await client.post(tck.url + "/message:send", json=send_body("tck-input-required-9"))).json()[
        "task"
    ]
    for method in ("GET", "POST"):
        async with client.stream(method, f"{tck.url}/tasks/{waiting['id']}:subscribe") as response:
            async for chunk in response.aiter_bytes():
                first = json.loads(next(SSEDecoder().feed(chunk)))
                break
        assert first["task"]["id"] == waiting["id"]
    done = (await client.get(tck.url + "/tasks")).json()["tasks"]
    finished = next(t for t in done if t["status"]["state"] == "TASK_STATE_COMPLETED")
    refused = await client.post(f"{tck.url}/tasks/{finished['id']}:subscribe")
    assert_status(refused, 400, "UNSUPPORTED_OPERATION")


async def test_tenants_scope_tasks_on_every_binding(tck: RunningServer, client: httpx.AsyncClient) -> None:
    sent = await client.post(tck.url + "/acme/message:send", json=send_body("tck-complete-task-t"))
    task = sent.json()["task"]
    assert (await client.get(f"{tck.url}/acme/tasks/{task['id']}")).status_code == 200
    assert_status(await client.get(f"{tck.url}/tasks/{task['id']}"), 404, "TASK_NOT_FOUND")
    assert_status(await client.get(f"{tck.url}/other/tasks/{task['id']}"), 404)
    assert [t["id"] for t in (await client.get(tck.url + "/acme/tasks")).json()["tasks"]] == [task["id"]]
    assert (await client.get(tck.url + "/tasks")).json()["totalSize"] == 0
    # JSON-RPC carries the tenant in params, and sees the same tenant's tasks
    body = rpc("GetTask", {"tenant": "acme", "id": task["id"]})
    assert (await client.post(tck.rpc_url, json=body)).json()["result"]["id"] == task["id"]
    assert_rpc_error((await client.post(tck.rpc_url, json=rpc("GetTask", {"id": task["id"]}))).json(), -32001)


EXT = "https://example.com/ext/audit/v1"
REQUIRED = "https://example.com/ext/signed/v1"


async def test_extensions_are_activated_echoed_and_required(serve: Any, client: httpx.AsyncClient) -> None:
    seen: list[frozenset[str]] = []

    async def work(context: RequestContext, events: TaskEvents) -> None:
        seen.append(context.call.extensions)

    agent = Agent(
        "Ext",
        executor=work,
        extensions=[
            AgentExtension(uri=EXT, description="audit"),
            AgentExtension(uri=REQUIRED, required=True),
        ],
    )
    srv = serve(agent.asgi(store="memory://"))
    card = (await client.get(srv.url + "/.well-known/agent-card.json")).json()
    assert [e["uri"] for e in card["capabilities"]["extensions"]] == [
        EXT,
        REQUIRED,
        GENERATIONS_URI,
        IDEMPOTENCY_URI,
    ]

    without = await client.post(srv.url + "/message:send", json=send_body("a"))
    assert_status(without, 400, "EXTENSION_SUPPORT_REQUIRED")
    rpc_without = (await client.post(srv.rpc_url, json=rpc("SendMessage", send_body("b")))).json()
    assert_rpc_error(rpc_without, -32008)

    headers = {"A2A-Extensions": f"{REQUIRED}, {EXT}, https://unknown.example/x"}
    ok = await client.post(srv.url + "/message:send", json=send_body("c"), headers=headers)
    assert ok.status_code == 200
    assert ok.headers["a2a-extensions"] == ",".join(sorted([EXT, REQUIRED]))
    legacy = {"X-A2A-Extensions": REQUIRED}
    rpc_ok = await client.post(srv.rpc_url, json=rpc("SendMessage", send_body("d")), headers=legacy)
    assert "result" in rpc_ok.json() and rpc_ok.headers["a2a-extensions"] == REQUIRED
    assert seen == [frozenset({EXT, REQUIRED}), frozenset({REQUIRED})]


async def test_v03_rest_lives_under_v1(tck: RunningServer) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as bare:  # no A2A-Version header: a v0.3 client
        body = {
            "request": {
                "messageId": "tck-complete-task-v03",
                "role": "ROLE_USER",
                "content": [{"text": "hi"}],
            },
            "configuration": {"blocking": True},
        }
        sent = await bare.post(tck.url + "/v1/message:send", json=body)
        assert sent.status_code == 200
        task = sent.json()["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["status"]["message"]["content"] == [{"text": "Hello from TCK"}]  # v0.3 REST: `content`
        got = await bare.get(f"{tck.url}/v1/tasks/{task['id']}")
        assert got.status_code == 200 and got.json()["id"] == task["id"]
        # the same task, read over v1.0
        v10 = await bare.get(f"{tck.url}/tasks/{task['id']}", headers=A2A_V1)
        assert v10.json()["status"]["message"]["parts"] == [{"text": "Hello from TCK"}]
        # v1.0 paths need the header; without it the caller speaks 0.3, whose paths start with /v1/
        refused = await bare.post(tck.url + "/message:send", json=send_body("x"))
        assert "/v1/" in assert_status(refused, 400, "VERSION_NOT_SUPPORTED")["message"]
        assert (await bare.get(tck.url + "/v1/nothing")).status_code == 404


# -- busy: 503 with Retry-After on both HTTP bindings, v1.0 and v0.3 ----------------------------------------


class Busy:
    """A request handler at a budget: sends are refused as busy (Retry-After 3); the first GetTask too
    (Retry-After 0, so a client that honours it retries at once), later ones answer."""

    def __init__(self) -> None:
        self.busy_gets = 1

    async def handle(self, operation: Any, params: Any, context: Any) -> Any:
        from skillwire import Task, TaskState
        from skillwire.errors import ServerBusyError
        from skillwire.types import Operation, TaskStatus

        if operation is Operation.GET_TASK:
            if self.busy_gets:
                self.busy_gets -= 1
                raise ServerBusyError("busy for a moment", retry_after=0)
            return Task(id=params.id, status=TaskStatus(state=TaskState.COMPLETED))
        raise ServerBusyError("at max_running_tasks: try again later", retry_after=3)


@pytest.fixture
def busy(serve: Any) -> tuple[RunningServer, Busy]:
    handler = Busy()
    agent = Agent("busy", "Always busy.", executor=lambda context, events: None)
    return serve(agent.asgi(store="memory://", handler=handler)), handler


V03_MESSAGE = {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage", "message/send", "message/stream"])
async def test_busy_json_rpc_is_503_with_retry_after(
    busy: tuple[RunningServer, Busy], client: httpx.AsyncClient, method: str
) -> None:
    srv, _ = busy
    v03 = "/" in method
    params = {"message": V03_MESSAGE} if v03 else {"message": user_message("hi")}
    headers = {"A2A-Version": "0.3"} if v03 else A2A_V1
    response = await client.post(srv.rpc_url, json=rpc(method, params, request_id=4), headers=headers)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "3"
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["id"] == 4
    if v03:  # v0.3: free-form data
        assert answer["error"]["code"] == -32603 and answer["error"]["data"]["reason"] == "SERVER_BUSY"
    else:
        error = assert_rpc_error(answer, -32603)
        assert error["data"][0]["reason"] == "SERVER_BUSY"
        assert error["data"][0]["metadata"] == {"retryAfter": "3"}


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        ("/message:send", {"message": user_message("hi")}, A2A_V1),
        ("/message:stream", {"message": user_message("hi")}, A2A_V1),
        (
            "/v1/message:send",
            {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]}},
            {},
        ),
        (
            "/v1/message:stream",
            {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]}},
            {},
        ),
    ],
)
async def test_busy_rest_is_503_unavailable_with_retry_after(
    busy: tuple[RunningServer, Busy], path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    srv, _ = busy
    async with httpx.AsyncClient(timeout=TIMEOUT) as bare:
        response = await bare.post(srv.url + path, json=body, headers=headers)
    error = assert_status(response, 503, "SERVER_BUSY")
    assert error["status"] == "UNAVAILABLE"
    assert response.headers["retry-after"] == "3"


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_our_client_retries_a_busy_read_after_retry_after_but_not_a_send(
    busy: tuple[RunningServer, Busy], binding: str
) -> None:
    from skillwire import Client, TaskState
    from skillwire.client import HTTPStatusError

    srv, handler = busy
    async with await Client.connect(srv.url, bindings=[binding]) as sw:
        task = await sw.get_task("t1")  # busy once with Retry-After: 0, then answered
        assert task.status.state is TaskState.COMPLETED and handler.busy_gets == 0
        with pytest.raises(HTTPStatusError) as refused:  # a send is never retried by the client
            await sw.send("hi")
    assert refused.value.status_code == 503 and refused.value.retry_after == 3.0
