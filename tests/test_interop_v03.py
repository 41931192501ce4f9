"""Interop: the official a2a-sdk **0.3** client (PyPI ``a2a-sdk`` 0.3.x) against a real skillwire server.

A v0.3 client sends no ``A2A-Version`` header, so skillwire speaks v0.3 to it on the same endpoints that
serve v1.0: JSON-RPC ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel`` and
``tasks/resubscribe`` at the server root, and the v0.3 HTTP+JSON binding under ``/v1/...``.

a2a-sdk 0.3 cannot be installed beside the a2a-sdk 1.x of the test venv, so each test runs
``tests/interop_v03/client.py`` with the python of a virtualenv holding it (the ``sdk03_python`` fixture,
built and cached by tests/sdk03.py) against a server started in this process. The script resolves the agent card with
the sdk's ``A2ACardResolver``, builds its client with ``ClientFactory`` restricted to one transport, runs a
scenario and prints what the sdk returned as v0.3 JSON. If PyPI cannot be reached the sdk tests skip, or
fail when ``SKILLWIRE_REQUIRE_SERVICES=1`` (CI).

The raw ``httpx`` tests at the end need no second venv: they check the v0.3 shape of JSON-RPC results and
that one task store serves both protocol versions.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, RunningServer, assert_rpc_result, example_agent, rpc
from sdk03 import client_env, tail
from skillwire import Agent

CLIENT = Path(__file__).resolve().parent / "interop_v03" / "client.py"
WAIT = 15.0
CLIENT_TIMEOUT = 90.0
TRANSPORTS = ["JSONRPC", "HTTP+JSON"]

Json = dict[str, Any]


# -- running the 0.3 client --------------------------------------------------------------------------------


@dataclass
class Sdk03:
    """A skillwire server running the TCK agent and the a2a-sdk 0.3 client script aimed at it."""

    srv: RunningServer
    python: Path
    transport: str

    def run(self, scenario: str) -> Json:
        command = [str(self.python), str(CLIENT), self.srv.url, self.transport, scenario]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT, env=client_env()
            )
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"the a2a-sdk 0.3 client did not finish {scenario!r} in {CLIENT_TIMEOUT} s: {e}")
        if done.returncode != 0:
            pytest.fail(f"the a2a-sdk 0.3 client failed in {scenario!r}:\n{tail(done.stderr, 40)}")
        result: Json = json.loads(done.stdout)
        self.check_requests(result["requests"])
        return result

    def check_requests(self, requests: list[Json]) -> None:
        """The sdk spoke v0.3 (no ``A2A-Version`` header) over the transport it was restricted to."""
        assert requests, "the sdk made no request"
        card, *calls = requests
        assert (card["method"], card["path"], card["status"]) == ("GET", "/.well-known/agent-card.json", 200)
        for call in requests:
            assert call["a2a_version"] is None, call
        for call in calls:
            if self.transport == "JSONRPC":
                assert (call["method"], call["path"]) == ("POST", "/"), call
            else:
                assert call["path"].startswith("/v1/"), call


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def tck_agent() -> Agent:
    """examples/tck, with the v0.3 card fields it leaves off for the v1.0 TCK (``serve --v03-card``)."""
    agent = example_agent("tck")
    agent.card_v03_fields = True
    return agent


@pytest.fixture
def sdk03(serve: Callable[[Any], RunningServer], sdk03_python: Path, transport: str) -> Sdk03:
    srv = serve(tck_agent().asgi(store="memory://"))
    return Sdk03(srv, sdk03_python, transport)


def texts(parts: list[Json]) -> list[str]:
    assert all(p["kind"] == "text" for p in parts), parts
    return [p["text"] for p in parts]


def status_text(task_or_event: Json) -> list[str]:
    status_message = task_or_event["status"]["message"]
    assert status_message["kind"] == "message"
    assert status_message["role"] == "agent"
    return texts(status_message["parts"])


def assert_final_flags(events: list[Json]) -> None:
    """Only the last event of a stream is a ``final: true`` status update."""
    *before, last = events
    assert last["kind"] == "status-update" and last["final"] is True, last
    assert all(not e.get("final", False) for e in before), before


# -- agent card --------------------------------------------------------------------------------------------


def test_card_is_accepted_by_the_v03_resolver(
    serve: Callable[[Any], RunningServer], sdk03_python: Path
) -> None:
    srv = serve(tck_agent().asgi(store="memory://"))
    out = Sdk03(srv, sdk03_python, "JSONRPC").run("card")
    card = out["card"]

    assert card["name"] == "skillwire TCK agent"
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"].rstrip("/") == srv.url
    assert card["preferredTransport"] == "JSONRPC"
    interfaces = {(i["transport"], i["url"].rstrip("/")) for i in card["additionalInterfaces"]}
    assert {("JSONRPC", srv.url), ("HTTP+JSON", srv.url)} <= interfaces
    assert card["capabilities"]["streaming"] is True
    assert [skill["id"] for skill in card["skills"]] == ["tck"]
    assert card["defaultInputModes"] == ["*/*"]  # the TCK agent takes any part (CORE-SEND-003)
    # The sdk's ClientFactory finds an endpoint for each transport: JSON-RPC at the root, REST under it.
    assert {t: u.rstrip("/") for t, u in out["transport_urls"].items()} == {
        "JSONRPC": srv.url,
        "HTTP+JSON": srv.url,
    }


# -- message/send ------------------------------------------------------------------------------------------


def test_send_blocking_returns_completed_task_and_get_honours_history_length(sdk03: Sdk03) -> None:
    out = sdk03.run("send-task")
    task = out["result"]

    assert task["kind"] == "task"
    assert task["id"] and task["contextId"]
    assert task["status"]["state"] == "completed"
    assert status_text(task) == ["Hello from TCK"]
    sent = next(m for m in task["history"] if m["messageId"] == out["sent_message_id"])
    assert sent["kind"] == "message"
    assert sent["role"] == "user"
    assert sent["taskId"] == task["id"]
    assert sent["contextId"] == task["contextId"]

    full = out["full"]
    assert full["id"] == task["id"]
    assert full["status"]["state"] == "completed"
    assert len(full["history"]) >= 2
    assert full["history"][0]["messageId"] == out["sent_message_id"]
    last_one = out["last_one"]
    assert last_one["history"] == full["history"][-1:]
    assert last_one["status"] == full["status"]
    if sdk03.transport == "HTTP+JSON":
        assert [(r["method"], r["path"]) for r in out["requests"][1:]] == [
            ("POST", "/v1/message:send"),
            ("GET", f"/v1/tasks/{task['id']}"),
            ("GET", f"/v1/tasks/{task['id']}"),
        ]


def test_send_returns_direct_message(sdk03: Sdk03) -> None:
    out = sdk03.run("send-message")

    reply = out["blocking"]
    assert reply["kind"] == "message"
    assert reply["role"] == "agent"
    assert texts(reply["parts"]) == ["Direct message response"]
    assert reply["messageId"] and reply["messageId"] != out["sent_message_id"]
    assert "taskId" not in reply

    (streamed,) = out["streaming"]
    assert streamed["kind"] == "message"
    assert texts(streamed["parts"]) == ["Direct message response"]


def test_send_returns_data_artifact(sdk03: Sdk03) -> None:
    out = sdk03.run("artifact-data")
    task = out["result"]
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    (artifact,) = task["artifacts"]
    assert artifact["artifactId"]
    assert artifact["parts"] == [{"kind": "data", "data": {"key": "value", "count": 42}}]
    assert out["stored"]["artifacts"] == task["artifacts"]


def test_input_required_round_trip(sdk03: Sdk03) -> None:
    out = sdk03.run("input-required")
    first, done = out["first"], out["done"]

    assert first["kind"] == "task"
    assert first["status"]["state"] == "input-required"
    assert status_text(first)[0].startswith("Input required")

    assert done["kind"] == "task"
    assert done["id"] == first["id"]
    assert done["contextId"] == first["contextId"]
    assert done["status"]["state"] == "completed"
    assert status_text(done) == ["Hello from TCK"]
    assert out["follow_up_message_id"] in [m["messageId"] for m in done["history"]]

    stored = out["stored"]  # tasks/get with historyLength 2
    assert stored["status"]["state"] == "completed"
    assert len(stored["history"]) == 2
    assert stored["history"] == done["history"][-2:]


# -- message/stream ----------------------------------------------------------------------------------------


def test_stream_delivers_events_in_order_with_final_last(sdk03: Sdk03) -> None:
    out = sdk03.run("stream")
    events = out["events"]

    assert [e["kind"] for e in events] == ["task", "status-update", "artifact-update", "status-update"]
    task = events[0]
    assert task["status"]["state"] == "submitted"
    for event in events[1:]:
        assert (event["taskId"], event["contextId"]) == (task["id"], task["contextId"])
    assert events[1]["status"]["state"] == "working"
    assert texts(events[2]["artifact"]["parts"]) == ["Stream hello from TCK"]
    assert events[3]["status"]["state"] == "completed"
    assert_final_flags(events)

    stored = out["stored"]
    assert stored["status"]["state"] == "completed"
    assert [texts(a["parts"]) for a in stored["artifacts"]] == [["Stream hello from TCK"]]
    if sdk03.transport == "HTTP+JSON":
        assert out["requests"][1]["path"] == "/v1/message:stream"
        assert out["requests"][1]["content_type"].startswith("text/event-stream")


# -- tasks/cancel and tasks/resubscribe --------------------------------------------------------------------


def test_cancel_long_running_task(sdk03: Sdk03) -> None:
    out = sdk03.run("cancel")
    started = out["started"]

    assert started["kind"] == "task"
    assert started["status"]["state"] in ("submitted", "working")  # sent with blocking: false
    canceled = out["canceled"]
    assert canceled["id"] == started["id"]
    assert canceled["status"]["state"] == "canceled"
    assert out["stored"]["status"]["state"] == "canceled"
    if sdk03.transport == "JSONRPC":
        assert out["again"]["error"]["code"] == -32002  # TaskNotCancelableError
    else:
        # a2a-sdk 0.3's own REST server answered 409; skillwire answers 400 (FAILED_PRECONDITION, as in
        # v1.0). The sdk's REST client only reports the status, so either reads as "not cancelable".
        assert out["again"]["http_error"] in (400, 409), out


def test_resubscribe_then_cancel(sdk03: Sdk03) -> None:
    out = sdk03.run("resubscribe-cancel")
    started, first = out["started"], out["first"]

    assert first["kind"] == "task"
    assert first["id"] == started["id"]
    assert first["status"]["state"] in ("submitted", "working")
    assert out["canceled"]["status"]["state"] == "canceled"
    rest = out["rest"]
    assert rest, "the stream ended without the cancellation"
    assert rest[-1]["taskId"] == started["id"]
    assert rest[-1]["status"]["state"] == "canceled"
    assert_final_flags([first, *rest])


def test_resubscribe_then_follow_up_completes(sdk03: Sdk03) -> None:
    out = sdk03.run("resubscribe-follow-up")
    assert "stream_error" not in out, out.get("stream_error")
    first, snapshot = out["first"], out["snapshot"]

    assert snapshot["kind"] == "task"
    assert snapshot["id"] == first["id"]
    assert snapshot["status"]["state"] == "input-required"
    rest = out["rest"]
    assert rest[-1]["kind"] == "status-update"
    assert rest[-1]["status"]["state"] == "completed"
    assert status_text(rest[-1]) == ["Hello from TCK"]
    assert_final_flags([snapshot, *rest])
    assert out["done"]["status"]["state"] == "completed"


# -- errors ------------------------------------------------------------------------------------------------


def test_unknown_task_id_is_task_not_found(sdk03: Sdk03) -> None:
    out = sdk03.run("unknown-task")
    calls = ["tasks/get", "tasks/cancel", "message/send"]
    if sdk03.transport == "JSONRPC":
        codes = {call: out[call].get("error", {}).get("code") for call in calls}
        assert codes == dict.fromkeys(calls, -32001), out
        assert out["task_id"] in out["tasks/get"]["error"]["message"]
    else:
        statuses = {call: out[call].get("http_error") for call in calls}
        assert statuses == dict.fromkeys(calls, 404), out


def test_unknown_task_id_on_streaming_calls(sdk03: Sdk03) -> None:
    out = sdk03.run("unknown-task-stream")
    calls = ["tasks/resubscribe", "message/stream"]
    if sdk03.transport == "JSONRPC":
        codes = {call: out[call].get("error", {}).get("code") for call in calls}
        assert codes == dict.fromkeys(calls, -32001), out
    else:
        resubscribe, stream = out["requests"][1:]
        assert (resubscribe["path"], resubscribe["status"]) == (f"/v1/tasks/{out['task_id']}:subscribe", 404)
        assert (stream["path"], stream["status"]) == ("/v1/message:stream", 404)
        assert out["message/stream"].get("http_error") == 404, out
        # The sdk's REST resubscribe reads the body as SSE without checking the status first, so the 404
        # reaches its caller as the sdk's "invalid SSE response" error.
        assert out["tasks/resubscribe"].get("http_error") == 400, out


# -- raw v0.3 JSON-RPC, and one store for both versions ----------------------------------------------------


def v03_message(message_id_prefix: str, **extra: Any) -> Json:
    return {
        "kind": "message",
        "role": "user",
        "messageId": f"{message_id_prefix}-{uuid.uuid4()}",
        "parts": [{"kind": "text", "text": message_id_prefix}],
        **extra,
    }


def v03_call(
    http: httpx.Client, srv: RunningServer, method: str, params: Json, headers: dict[str, str] | None = None
) -> Json:
    response = http.post(srv.rpc_url, json=rpc(method, params), headers=headers)
    assert response.status_code == 200, response.text
    body: Json = response.json()
    assert body.get("jsonrpc") == "2.0" and "error" not in body, body
    return body["result"]  # type: ignore[no-any-return]


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=WAIT) as client:
        yield client


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/t.db"


@pytest.mark.parametrize("version_header", [None, "0.3"], ids=["no-header", "A2A-Version-0.3"])
def test_raw_message_send_result_is_v03_shaped(
    serve: Callable[[Any], RunningServer], http: httpx.Client, version_header: str | None
) -> None:
    srv = serve(tck_agent().asgi(store="memory://"))
    headers = {"A2A-Version": version_header} if version_header else {}
    sent = v03_message("tck-complete-task")
    task = v03_call(
        http, srv, "message/send", {"message": sent, "configuration": {"blocking": True}}, headers
    )

    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert status_text(task) == ["Hello from TCK"]
    assert task["status"]["message"]["taskId"] == task["id"]
    (user,) = [m for m in task["history"] if m["role"] == "user"]
    assert user == sent | {"taskId": task["id"], "contextId": task["contextId"]}
    assert all(m["kind"] == "message" and m["role"] in ("user", "agent") for m in task["history"])
    text = json.dumps(task)
    for v10_only in ("TASK_STATE_", "ROLE_"):
        assert v10_only not in text, task

    got = v03_call(http, srv, "tasks/get", {"id": task["id"], "historyLength": 1}, headers)
    assert got["kind"] == "task"
    assert got["history"] == task["history"][-1:]


@pytest.mark.parametrize(
    "configuration", [None, {}, {"historyLength": 5}], ids=["no-configuration", "empty", "no-blocking"]
)
def test_raw_message_send_without_blocking_is_blocking(
    serve: Callable[[Any], RunningServer], http: httpx.Client, configuration: Json | None
) -> None:
    """Issue 9: v0.3 SDK servers and clients read an absent ``blocking`` as blocking (docs/conformance.md)."""
    srv = serve(tck_agent().asgi(store="memory://"))
    params: Json = {"message": v03_message("tck-complete-task")}
    if configuration is not None:
        params["configuration"] = configuration
    task = v03_call(http, srv, "message/send", params)
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert status_text(task) == ["Hello from TCK"]


def test_raw_message_send_with_blocking_false_returns_at_once(
    serve: Callable[[Any], RunningServer], http: httpx.Client
) -> None:
    srv = serve(tck_agent().asgi(store="memory://"))
    params = {"message": v03_message("tck-long-running"), "configuration": {"blocking": False}}
    task = v03_call(http, srv, "message/send", params)
    assert task["kind"] == "task"
    assert task["status"]["state"] in ("submitted", "working")

    canceled = v03_call(http, srv, "tasks/cancel", {"id": task["id"]})
    assert canceled["kind"] == "task"
    assert canceled["status"]["state"] == "canceled"


@pytest.mark.parametrize(
    ("configuration", "blocks"),
    [(None, True), ({"blocking": True}, True), ({}, False), ({"blocking": False}, False)],
    ids=["no-configuration", "true", "empty", "false"],
)
def test_raw_rest_message_send_blocks_without_a_configuration(
    serve: Callable[[Any], RunningServer], http: httpx.Client, configuration: Json | None, blocks: bool
) -> None:
    """``POST /v1/message:send`` (v0.3 HTTP+JSON, ProtoJSON): a request without ``configuration`` blocks;
    in a configuration, proto3 JSON's absent ``blocking`` is false (docs/conformance.md)."""
    srv = serve(tck_agent().asgi(store="memory://"))
    prefix = "tck-complete-task" if blocks else "tck-long-running"
    body: Json = {
        "message": {
            "messageId": f"{prefix}-{uuid.uuid4()}",
            "role": "ROLE_USER",
            "content": [{"text": prefix}],
        }
    }
    if configuration is not None:
        body["configuration"] = configuration
    response = http.post(srv.url + "/v1/message:send", json=body)
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    if blocks:
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        return
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    canceled = http.post(srv.url + f"/v1/tasks/{task['id']}:cancel")
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELLED"


#: The a2a-sdk 0.3 legacy ``A2AClient`` (JSON-RPC): it builds ``message/send`` with no ``configuration``
#: at all and expects the finished task.
LEGACY_CLIENT = """
import asyncio, json, sys, uuid, warnings
import httpx
from a2a.client import A2AClient
from a2a.types import Message, MessageSendParams, Part, Role, SendMessageRequest, TextPart

async def main(url):
    async with httpx.AsyncClient(timeout=15) as http:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            client = A2AClient(http, url=url)
        sent = Message(
            role=Role.user,
            parts=[Part(root=TextPart(text="tck-complete-task"))],
            message_id=f"tck-complete-task-{uuid.uuid4()}",
        )
        request = SendMessageRequest(id="1", params=MessageSendParams(message=sent))
        assert request.params.configuration is None
        response = await asyncio.wait_for(client.send_message(request), 15)
        print(json.dumps(response.model_dump(mode="json", by_alias=True, exclude_none=True)))

asyncio.run(main(sys.argv[1]))
"""


def test_legacy_a2a_client_send_without_configuration_gets_the_finished_task(
    serve: Callable[[Any], RunningServer], sdk03_python: Path
) -> None:
    srv = serve(tck_agent().asgi(store="memory://"))
    done = subprocess.run(
        [str(sdk03_python), "-c", LEGACY_CLIENT, srv.rpc_url],
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        env=client_env(),
    )
    assert done.returncode == 0, tail(done.stderr, 40)
    answer = json.loads(done.stdout)
    task = answer["result"]
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert status_text(task) == ["Hello from TCK"]


def test_task_made_over_v10_reads_over_v03_and_back(
    serve: Callable[[Any], RunningServer], http: httpx.Client, store: str
) -> None:
    srv = serve(tck_agent().asgi(store=store))

    # v1.0 SendMessage, then v0.3 tasks/get.
    v10_message = {
        "messageId": f"tck-complete-task-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"text": "from v1.0"}],
    }
    response = http.post(srv.rpc_url, json=rpc("SendMessage", {"message": v10_message}), headers=A2A_V1)
    made_v10 = assert_rpc_result(response.json(), "SendMessage")["task"]
    assert made_v10["status"]["state"] == "TASK_STATE_COMPLETED"

    seen_v03 = v03_call(http, srv, "tasks/get", {"id": made_v10["id"]})
    assert seen_v03["kind"] == "task"
    assert (seen_v03["id"], seen_v03["contextId"]) == (made_v10["id"], made_v10["contextId"])
    assert seen_v03["status"]["state"] == "completed"
    assert status_text(seen_v03) == ["Hello from TCK"]
    assert [m["messageId"] for m in seen_v03["history"]] == [m["messageId"] for m in made_v10["history"]]
    user = next(m for m in seen_v03["history"] if m["messageId"] == v10_message["messageId"])
    assert user["role"] == "user"
    assert user["parts"] == [{"kind": "text", "text": "from v1.0"}]

    # v0.3 message/send, then v1.0 GetTask.
    sent = v03_message("tck-complete-task")
    made_v03 = v03_call(http, srv, "message/send", {"message": sent, "configuration": {"blocking": True}})
    assert made_v03["status"]["state"] == "completed"

    response = http.post(srv.rpc_url, json=rpc("GetTask", {"id": made_v03["id"]}), headers=A2A_V1)
    seen_v10 = assert_rpc_result(response.json(), "GetTask")
    assert (seen_v10["id"], seen_v10["contextId"]) == (made_v03["id"], made_v03["contextId"])
    assert seen_v10["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["messageId"] for m in seen_v10["history"]] == [m["messageId"] for m in made_v03["history"]]
    user = next(m for m in seen_v10["history"] if m["messageId"] == sent["messageId"])
    assert user["role"] == "ROLE_USER"
    assert user["parts"] == [{"text": "tck-complete-task"}]
