"""Integration tests against a real uvicorn server on 127.0.0.1: card, JSON-RPC rules, streaming, shutdown."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    A2A_V1,
    RunningServer,
    assert_proto,
    assert_rpc_error,
    assert_rpc_result,
    rpc,
    user_message,
)
from skillwire import (
    Agent,
    BaseRequestHandler,
    CallContext,
    Executor,
    Limits,
    RequestContext,
    TaskEvents,
    TaskState,
)
from skillwire.protocol.models import GetTaskRequest
from skillwire.security import APIKey, Security
from skillwire.stores import SQLiteTaskStore
from skillwire.types import AgentCapabilities, AgentCard
from skillwire.wire.generations import GENERATIONS_URI, IDEMPOTENCY_URI
from skillwire.wire.sse import SSEDecoder

TIMEOUT = 10.0


class Gate:
    """Holds an executor until the test opens it (from another thread, the server's loop is elsewhere)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    async def wait(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self.entered.set()
        await self._event.wait()

    def open(self) -> None:
        assert self.entered.wait(TIMEOUT), "the executor never reached the gate"
        assert self._loop is not None and self._event is not None
        self._loop.call_soon_threadsafe(self._event.set)


class GatedExecutor(Executor):
    def __init__(self) -> None:
        self.gate = Gate()
        self.canceled = threading.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.text == "reply":
            await events.reply("hello there")
            return
        await events.working()
        if context.text == "gated":
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.canceled.set()
                raise
        await events.artifact(f"done: {context.text}", name="result")


def gated_agent(**kwargs: Any) -> tuple[Agent, GatedExecutor]:
    executor = GatedExecutor()
    return Agent("Gated", "A test agent", executor=executor, **kwargs), executor


async def post(client: httpx.AsyncClient, srv: RunningServer, body: Any, **kwargs: Any) -> httpx.Response:
    headers = {**A2A_V1, **kwargs.pop("headers", {})}
    return await client.post(srv.rpc_url, json=body, headers=headers, **kwargs)


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    decoder = SSEDecoder()
    async for chunk in response.aiter_bytes():
        for data in decoder.feed(chunk):
            yield json.loads(data)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as c:
        yield c


# -- agent card -------------------------------------------------------------------------------------------


async def test_card_is_served_with_caching_headers(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    response = await client.get(srv.url + "/.well-known/agent-card.json")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    card = response.json()
    v03 = {k: card.pop(k) for k in ("protocolVersion", "url", "preferredTransport", "additionalInterfaces")}
    assert v03 == {  # v0.3 clients read the same card
        "protocolVersion": "0.3.0",
        "url": srv.url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": srv.url, "transport": "JSONRPC"},
            {"url": srv.url, "transport": "HTTP+JSON"},
        ],
    }
    assert card.pop("supportsAuthenticatedExtendedCard") is False
    assert_proto(card, "AgentCard")
    assert card["name"] == "Gated" and card["version"] == "1.0.0"
    assert card["supportedInterfaces"] == [
        {"url": srv.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": srv.url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    generations = card["capabilities"].pop("extensions")  # the runtime keeps A2A 1.1 generations
    assert [e["uri"] for e in generations] == [GENERATIONS_URI, IDEMPOTENCY_URI]
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True, "extendedAgentCard": False}
    # a skill's input is text or a data part, its result a text or a data artifact
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["text/plain", "application/json"]
    assert "max-age=" in response.headers["cache-control"]
    assert response.headers["last-modified"].endswith("GMT")
    etag = response.headers["etag"]
    again = await client.get(srv.url + "/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    other = await client.get(srv.url + "/.well-known/agent-card.json", headers={"If-None-Match": '"stale"'})
    assert other.status_code == 200
    head = await client.head(srv.url + "/.well-known/agent-card.json")
    assert head.status_code == 200 and head.headers["etag"] == etag
    post_card = await client.post(srv.url + "/.well-known/agent-card.json")
    assert post_card.status_code == 405


async def test_card_uses_public_url(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://", public_url="https://agents.example.com/"))
    card = (await client.get(srv.url + "/.well-known/agent-card.json")).json()
    assert card["supportedInterfaces"][0]["url"] == "https://agents.example.com"


async def test_unknown_path_is_404_json(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    response = await client.get(srv.url + "/nowhere")
    assert response.status_code == 404 and response.json()["error"]["code"] == 404


# -- JSON-RPC envelope, version, content type -------------------------------------------------------------


async def test_version_negotiation(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    body = rpc("GetTask", {"id": "x"})
    missing = (await client.post(srv.rpc_url, json=body)).json()  # no header: v0.3, which has no GetTask
    assert missing["error"]["code"] == -32601 and missing["error"]["data"] == {"reason": "METHOD_NOT_FOUND"}
    v03 = (await client.post(srv.rpc_url, json=rpc("tasks/get", {"id": "x"}))).json()
    assert v03["error"]["code"] == -32001 and v03["error"]["data"]["reason"] == "TASK_NOT_FOUND"
    wrong = (await client.post(srv.rpc_url, json=body, headers={"A2A-Version": "99.0"})).json()
    error = assert_rpc_error(wrong, -32009)
    assert "1.0, 1.1, 0.3" in error["message"] and error["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    for accepted in ("1.0", "1.0.7"):
        ok = (await client.post(srv.rpc_url, json=body, headers={"A2A-Version": accepted})).json()
        assert_rpc_error(ok, -32001)  # the version passed; the task does not exist
    by_query = (await client.post(srv.rpc_url + "?A2A-Version=1.0", json=body)).json()
    assert_rpc_error(by_query, -32001)


async def test_content_type(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    body = json.dumps(rpc("GetTask", {"id": "x"}))
    plain = await client.post(srv.rpc_url, content=body, headers={**A2A_V1, "Content-Type": "text/plain"})
    assert plain.status_code == 200
    error = assert_rpc_error(plain.json(), -32005)
    assert error["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    for ok_type in ("application/json; charset=utf-8", "application/a2a+json"):
        ok = await client.post(srv.rpc_url, content=body, headers={**A2A_V1, "Content-Type": ok_type})
        assert_rpc_error(ok.json(), -32001)


async def test_json_rpc_envelope_errors(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    headers = {**A2A_V1, "Content-Type": "application/json"}

    async def raw(content: bytes) -> dict[str, Any]:
        response = await client.post(srv.rpc_url, content=content, headers=headers)
        assert response.status_code == 200
        return response.json()  # type: ignore[no-any-return]

    parse = await raw(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert_rpc_error(parse, -32700)
    assert parse["id"] is None
    assert_rpc_error(await raw(b"[]"), -32600)
    assert_rpc_error(await raw(b'[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]'), -32600)
    no_version = await raw(b'{"id": 7, "method": "GetTask", "params": {"id": "x"}}')
    assert_rpc_error(no_version, -32600)
    assert no_version["id"] == 7
    assert_rpc_error(await raw(b'{"jsonrpc": "2.0", "id": 1, "method": 5}'), -32600)
    assert_rpc_error(await raw(b'{"jsonrpc": "2.0", "id": true, "method": "GetTask"}'), -32600)
    unknown = await raw(b'{"jsonrpc": "2.0", "id": "abc", "method": "message/send", "params": {}}')
    assert assert_rpc_error(unknown, -32601) and unknown["id"] == "abc"


async def test_invalid_params_name_the_field(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    missing = (await post(client, srv, rpc("SendMessage", {}))).json()
    assert "params.message" in assert_rpc_error(missing, -32602)["message"]
    bad_role = user_message("hi", role=7)
    wrong = (await post(client, srv, rpc("SendMessage", {"message": bad_role}))).json()
    error = assert_rpc_error(wrong, -32602)
    assert "params.message.role" in error["message"]
    violations = [d for d in error["data"] if d["@type"].endswith("BadRequest")]
    assert violations[0]["fieldViolations"][0]["field"] == "params.message.role"
    two = user_message("hi")
    two["parts"] = [{"text": "a", "url": "https://x"}]
    assert_rpc_error((await post(client, srv, rpc("SendMessage", {"message": two}))).json(), -32602)
    negative = rpc("GetTask", {"id": "x", "historyLength": -1})
    assert_rpc_error((await post(client, srv, negative)).json(), -32602)
    big_page = rpc("ListTasks", {"pageSize": 101})
    assert_rpc_error((await post(client, srv, big_page)).json(), -32602)
    not_object = rpc("GetTask", [1, 2])  # type: ignore[arg-type]
    assert "params" in assert_rpc_error((await post(client, srv, not_object)).json(), -32602)["message"]


async def test_notification_gets_no_response_but_runs(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    note = {"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": user_message("note")}}
    response = await post(client, srv, note)
    assert response.status_code == 204 and response.content == b""
    listed = assert_rpc_result((await post(client, srv, rpc("ListTasks", {}))).json(), "ListTasks")
    assert listed["totalSize"] == 1
    bad = await post(client, srv, {"jsonrpc": "2.0", "method": "Nope"})
    assert bad.status_code == 204 and bad.content == b""


async def test_get_is_not_allowed(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    response = await client.get(srv.rpc_url)
    assert response.status_code == 405
    assert_rpc_error(response.json(), -32600)


async def test_oversized_body_is_refused(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://", limits=Limits(max_body_bytes=1000)))
    body = rpc("SendMessage", {"message": user_message("x" * 2000)})
    response = await post(client, srv, body)
    assert response.status_code == 413
    assert "1000 bytes" in assert_rpc_error(response.json(), -32600)["message"]


async def test_internal_errors_hide_details(serve: Any, client: httpx.AsyncClient) -> None:
    class Broken(BaseRequestHandler):
        async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> Any:
            raise RuntimeError("database password is hunter2")

    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://", handler=Broken()))
    response = await post(client, srv, rpc("GetTask", {"id": "x"}))
    assert response.status_code == 200
    error = assert_rpc_error(response.json(), -32603)
    assert "hunter2" not in response.text and error["message"] == "Internal error"
    missing = (await post(client, srv, rpc("ListTasks", {}))).json()
    assert "not implemented" in assert_rpc_error(missing, -32601)["message"]


async def test_wrapping_the_default_handler(serve: Any, client: httpx.AsyncClient) -> None:
    seen: list[str] = []

    class Recording:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def handle(self, operation: Any, params: Any, context: CallContext) -> Any:
            seen.append(f"{operation.value}@{context.protocol_version}")
            return await self.inner.handle(operation, params, context)

    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://", wrap=Recording))
    result = (await post(client, srv, rpc("SendMessage", {"message": user_message("hi")}))).json()
    assert assert_rpc_result(result, "SendMessage")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen == ["SendMessage@1.0"]


# -- the eleven methods -----------------------------------------------------------------------------------


async def test_push_config_methods_answer_not_supported_when_push_is_off(
    serve: Any, client: httpx.AsyncClient
) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://", push=False))
    calls = [
        rpc("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/hook"}),
        rpc("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        rpc("ListTaskPushNotificationConfigs", {"taskId": "t"}),
        rpc("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
    ]
    for call in calls:
        error = assert_rpc_error((await post(client, srv, call)).json(), -32003)
        assert error["data"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"


async def test_extended_card(serve: Any, client: httpx.AsyncClient) -> None:
    plain, _ = gated_agent()
    srv = serve(plain.asgi(store="memory://"))
    off = (await post(client, srv, rpc("GetExtendedAgentCard", {}))).json()
    assert_rpc_error(off, -32004)

    unconfigured, _ = gated_agent(extended_card_enabled=True)
    srv2 = serve(unconfigured.asgi(store="memory://"))
    card = (await client.get(srv2.url + "/.well-known/agent-card.json")).json()
    assert card["capabilities"]["extendedAgentCard"] is True
    assert_rpc_error((await post(client, srv2, rpc("GetExtendedAgentCard", {}))).json(), -32007)

    extended = AgentCard(
        name="Gated (full)",
        description="More detail for callers",
        supported_interfaces=[],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[],
    )
    # the extended card needs authentication: an agent offering one declares security
    keys = Security(APIKey(keys={"tester": "extended-card-key"}))
    configured, _ = gated_agent(extended_card=extended, security=keys)
    srv3 = serve(configured.asgi(store="memory://"))
    anonymous = await post(client, srv3, rpc("GetExtendedAgentCard", {}))
    assert anonymous.status_code == 401
    assert_rpc_error(anonymous.json(), -32040)
    got = assert_rpc_result(
        (
            await post(
                client, srv3, rpc("GetExtendedAgentCard", {}), headers={"X-API-Key": "extended-card-key"}
            )
        ).json(),
        "GetExtendedAgentCard",
    )
    assert got["name"] == "Gated (full)"
    # built without interfaces, it is served with the public card's, for the URL the client reached
    assert got["supportedInterfaces"][0] == {
        "url": srv3.url,
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    key = {"X-API-Key": "extended-card-key"}
    assert (await client.get(srv3.url + "/extendedAgentCard", headers=A2A_V1)).status_code == 401
    rest = (await client.get(srv3.url + "/extendedAgentCard", headers={**A2A_V1, **key})).json()
    assert rest["supportedInterfaces"] == got["supportedInterfaces"]
    # v0.3 clients (no A2A-Version) get it in v0.3 shape, with its url: it used to be an HTTP 500
    v03_rpc = await client.post(srv3.url + "/", json=rpc("agent/getAuthenticatedExtendedCard"), headers=key)
    assert v03_rpc.status_code == 200
    assert v03_rpc.json()["result"]["url"] == srv3.url
    v03_rest = await client.get(srv3.url + "/v1/card", headers=key)
    assert v03_rest.status_code == 200 and v03_rest.json()["name"] == "Gated (full)"


async def test_task_operations_round_trip(serve: Any, client: httpx.AsyncClient) -> None:
    agent, executor = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    sent = (await post(client, srv, rpc("SendMessage", {"message": user_message("one")}))).json()
    task = assert_rpc_result(sent, "SendMessage")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "done: one"}]
    assert task["status"]["timestamp"].endswith("Z")

    got = assert_rpc_result((await post(client, srv, rpc("GetTask", {"id": task["id"]}))).json(), "GetTask")
    assert got["id"] == task["id"] and "task" not in got

    listed = (await post(client, srv, rpc("ListTasks", {"pageSize": 1}))).json()
    page = assert_rpc_result(listed, "ListTasks")
    assert page == {
        "tasks": page["tasks"],
        "nextPageToken": "",
        "pageSize": 1,
        "totalSize": 1,
    }
    assert "artifacts" not in page["tasks"][0]

    immediate = {"message": user_message("gated"), "configuration": {"returnImmediately": True}}
    started = assert_rpc_result(
        (await post(client, srv, rpc("SendMessage", immediate))).json(), "SendMessage"
    )
    assert started["task"]["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    canceled = (await post(client, srv, rpc("CancelTask", {"id": started["task"]["id"]}))).json()
    assert assert_rpc_result(canceled, "CancelTask")["status"]["state"] == "TASK_STATE_CANCELED"
    assert executor.canceled.wait(TIMEOUT)
    again = (await post(client, srv, rpc("CancelTask", {"id": started["task"]["id"]}))).json()
    assert assert_rpc_error(again, -32002)["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
    assert_rpc_error((await post(client, srv, rpc("CancelTask", {"id": "nope"}))).json(), -32001)
    reply = assert_rpc_result(
        (await post(client, srv, rpc("SendMessage", {"message": user_message("reply")}))).json(),
        "SendMessage",
    )
    assert reply == {"message": reply["message"]} and reply["message"]["role"] == "ROLE_AGENT"


# -- streaming ----------------------------------------------------------------------------------------------


async def test_stream_events_are_json_rpc_responses(serve: Any, client: httpx.AsyncClient) -> None:
    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    body = rpc("SendStreamingMessage", {"message": user_message("streamed")}, request_id="s-1")
    async with client.stream("POST", srv.rpc_url, json=body, headers=A2A_V1) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [e async for e in sse_events(response)]
    results = []
    for event in events:
        assert event["id"] == "s-1" and event["jsonrpc"] == "2.0"
        results.append(assert_rpc_result(event, "SendStreamingMessage"))
    assert [next(iter(r)) for r in results] == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    reply_body = rpc("SendStreamingMessage", {"message": user_message("reply")})
    async with client.stream("POST", srv.rpc_url, json=reply_body, headers=A2A_V1) as response:
        only = [e async for e in sse_events(response)]
    assert len(only) == 1 and "message" in only[0]["result"]


async def test_stream_errors_before_the_first_event_are_plain_json(
    serve: Any, client: httpx.AsyncClient
) -> None:
    agent, _ = gated_agent(streaming=False)
    srv = serve(agent.asgi(store="memory://"))
    response = await post(client, srv, rpc("SendStreamingMessage", {"message": user_message("x")}))
    assert response.headers["content-type"] == "application/json"
    assert_rpc_error(response.json(), -32004)
    agent2, _ = gated_agent()
    srv2 = serve(agent2.asgi(store="memory://"))
    unknown = await post(client, srv2, rpc("SubscribeToTask", {"id": "nope"}))
    assert_rpc_error(unknown.json(), -32001)


async def test_subscribers_each_get_every_event_and_disconnects_do_not_cancel(
    serve: Any, client: httpx.AsyncClient
) -> None:
    agent, executor = gated_agent()
    srv = serve(agent.asgi(store="memory://"))
    immediate = {"message": user_message("gated"), "configuration": {"returnImmediately": True}}
    task = assert_rpc_result((await post(client, srv, rpc("SendMessage", immediate))).json(), "SendMessage")[
        "task"
    ]

    async def subscribe(leave_early: bool, attached: asyncio.Event | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        body = rpc("SubscribeToTask", {"id": task["id"]})
        async with (
            httpx.AsyncClient(timeout=TIMEOUT) as own,
            own.stream("POST", srv.rpc_url, json=body, headers=A2A_V1) as response,
        ):
            async for event in sse_events(response):
                out.append(assert_rpc_result(event, "SubscribeToTask"))
                if attached is not None:
                    attached.set()  # the snapshot arrived, so this subscriber is registered
                if leave_early:
                    break  # closes the connection mid-stream
        return out

    early = await subscribe(leave_early=True)
    assert early[0]["task"]["id"] == task["id"]
    attached = [asyncio.Event() for _ in range(3)]
    listeners = [asyncio.create_task(subscribe(False, event)) for event in attached]
    await asyncio.wait_for(asyncio.gather(*(event.wait() for event in attached)), TIMEOUT)
    executor.gate.open()
    streams = await asyncio.wait_for(asyncio.gather(*listeners), TIMEOUT)
    for events in streams:
        assert events[0]["task"]["id"] == task["id"]
        assert [next(iter(e)) for e in events[1:]] == ["artifactUpdate", "statusUpdate"]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert not executor.canceled.is_set()


async def test_idle_streams_get_keepalive_comments(serve: Any, client: httpx.AsyncClient) -> None:
    agent, executor = gated_agent()
    srv = serve(agent.asgi(store="memory://", keepalive=0.05))
    body = rpc("SendStreamingMessage", {"message": user_message("gated")})
    raw = b""
    opened = False
    async with client.stream("POST", srv.rpc_url, json=body, headers=A2A_V1) as response:
        async for chunk in response.aiter_bytes():
            raw += chunk
            if not opened and raw.count(b": keep-alive\n\n") >= 2:
                executor.gate.open()  # two idle intervals went by with a comment each; now finish
                opened = True
    assert opened and raw.startswith(b"id: 1\ndata: ")  # the event id is the task's generation
    events = [json.loads(d) for d in SSEDecoder().feed(raw)]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_graceful_shutdown_ends_streams_and_settles_tasks(serve: Any, tmp_path: Path) -> None:
    agent, executor = gated_agent()
    path = tmp_path / "t.db"
    srv = serve(agent.asgi(store=f"sqlite:///{path}", shutdown_grace=0.1))
    body = rpc("SendStreamingMessage", {"message": user_message("gated")})
    events: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=TIMEOUT) as sync,
        sync.stream("POST", srv.rpc_url, json=body, headers=A2A_V1) as r,
    ):
        decoder = SSEDecoder()
        stopper: threading.Thread | None = None
        for chunk in r.iter_bytes():
            for data in decoder.feed(chunk):
                events.append(json.loads(data)["result"])
            if stopper is None and executor.gate.entered.wait(TIMEOUT):
                stopper = threading.Thread(target=srv.stop)
                stopper.start()
    assert stopper is not None
    stopper.join(TIMEOUT)
    assert not srv.thread.is_alive()
    assert events[0]["task"]["id"]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"
    assert executor.canceled.is_set()

    async def stored_state() -> TaskState:
        store = SQLiteTaskStore(path)
        await store.open()
        try:
            found = await store.get(events[0]["task"]["id"])
            assert found is not None
            return found.task.status.state
        finally:
            await store.close()

    assert asyncio.run(stored_state()) is TaskState.FAILED


async def test_an_error_in_the_middle_of_a_stream_is_its_last_event(
    serve: Any, client: httpx.AsyncClient
) -> None:
    from skillwire import Message
    from skillwire.errors import TaskNotFoundError
    from skillwire.protocol.models import SendMessageRequest
    from skillwire.types import Part, Role, StreamResponse

    class Faulty(BaseRequestHandler):
        async def on_send_streaming_message(self, request: SendMessageRequest, call: CallContext) -> Any:
            async def events() -> AsyncIterator[StreamResponse]:
                hello = Message(message_id="r", context_id="c", role=Role.AGENT, parts=[Part(text="hi")])
                yield StreamResponse(message=hello)
                if request.message.text() == "a2a":
                    raise TaskNotFoundError("gone meanwhile")
                raise RuntimeError("secret detail")

            return events()

    agent, _ = gated_agent()
    srv = serve(agent.asgi(store="memory://", handler=Faulty()))
    for text, code in (("a2a", -32001), ("other", -32603)):
        body = rpc("SendStreamingMessage", {"message": user_message(text)}, request_id=5)
        async with client.stream("POST", srv.rpc_url, json=body, headers=A2A_V1) as response:
            events = [e async for e in sse_events(response)]
        assert len(events) == 2
        assert assert_rpc_result(events[0], "SendStreamingMessage")["message"]["parts"] == [{"text": "hi"}]
        assert assert_rpc_error(events[1], code) and events[1]["id"] == 5
        assert "secret" not in json.dumps(events)
