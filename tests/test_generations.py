"""A2A 1.1 generations on every binding (issue 29): who sees them, resuming from a cursor, long-polls and
optimistic concurrency, against a real server.

- Every task and event carries its generation; a 1.1 call (``A2A-Version: 1.1``) or a 1.0 call activating
  the generations extension sees them, a plain 1.0 call never does (its answers parse strictly into the
  v1.0 protobuf types).
- SubscribeToTask resumes after the last generation a client saw: ``Last-Event-ID`` (SSE event ids are
  generations), gRPC metadata of that name, or ``afterGeneration``; no gap, no duplicate.
- GetTask with ``currentGeneration`` waits until the task moves past it (at once if it already has), is
  bounded in time and in waiters, and lets go of a client that went away.
- SendMessage with ``ifGenerationMatch`` on a task that moved on is refused: JSON-RPC -32010, HTTP 409,
  gRPC ABORTED.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, RunningServer, assert_proto, rpc, start_server, user_message
from skillwire import Agent, Limits
from skillwire.wire.generations import GENERATIONS_URI

WAIT = 15.0
V11 = {"A2A-Version": "1.1"}
EXTENSION = {**A2A_V1, "A2A-Extensions": GENERATIONS_URI}


class Steps:
    """A skill that works in steps the test lets through one at a time: each ``step()`` lets it emit one
    artifact chunk; after ``count`` of them it asks a question (input-required), and an answer completes it."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.gates = [threading.Event() for _ in range(count)]
        self.taken = 0

    def step(self) -> None:
        self.gates[self.taken].set()
        self.taken += 1

    async def __call__(self, context: Any, events: Any) -> None:
        if context.task is not None:  # the answer to the question
            await events.complete("thanks")
            return
        await events.working()
        for i, gate in enumerate(self.gates):
            await asyncio.to_thread(gate.wait, WAIT)
            await events.artifact(f"c{i}", artifact_id="a", append=i > 0)
        await events.input_required("Which city?")


@pytest.fixture
def steps(request: pytest.FixtureRequest) -> Iterator[tuple[RunningServer, Steps]]:
    skill = Steps(4)
    agent = Agent("steps", "Works in steps.", executor=skill)
    # a long-poll's time limit: 3 s, or (for the tests that show a client leaving ends it) far past their wait
    timeout = 600.0 if request.node.get_closest_marker("long_time_limit") else 3.0
    limits = Limits(long_poll_timeout=timeout, max_long_polls=2)
    srv = start_server(agent.asgi(store="memory://", limits=limits, grpc_port=0))
    yield srv, skill
    for gate in skill.gates:
        gate.set()
    srv.stop()


def call(srv: RunningServer, method: str, params: dict[str, Any], headers: dict[str, str] = A2A_V1) -> Any:
    return httpx.post(srv.rpc_url, json=rpc(method, params), headers=headers, timeout=WAIT).json()


def start(srv: RunningServer) -> dict[str, Any]:
    answer = call(
        srv, "SendMessage", {"message": user_message("go"), "configuration": {"returnImmediately": True}}
    )
    return answer["result"]["task"]  # type: ignore[no-any-return]


def sse(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event id, data) of each SSE event of a streaming response."""
    event_id = ""
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            yield event_id, json.loads(line[6:])
            event_id = ""


def generation(result: dict[str, Any]) -> int:
    for kind in ("statusUpdate", "artifactUpdate", "task"):
        if kind in result:
            return int(result[kind].get("generation", 0))
    return 0


def wait_for_generation(srv: RunningServer, task_id: str, at_least: int) -> dict[str, Any]:
    task = call(srv, "GetTask", {"id": task_id, "currentGeneration": at_least - 1}, V11)["result"]
    assert int(task["generation"]) >= at_least, task
    return task  # type: ignore[no-any-return]


# -- who sees generations ---------------------------------------------------------------------------------


def test_a_plain_1_0_client_never_sees_generations_and_a_1_1_or_extension_client_does(
    steps: tuple[RunningServer, Steps],
) -> None:
    srv, skill = steps
    task = start(srv)
    assert "generation" not in task
    assert_proto(task, "Task")
    skill.step()
    got = wait_for_generation(srv, task["id"], 3)  # created, working, one chunk
    assert got["generation"] == 3
    plain = call(srv, "GetTask", {"id": task["id"]})["result"]
    assert "generation" not in plain and assert_proto(plain, "Task")
    extension = httpx.post(
        srv.rpc_url, json=rpc("GetTask", {"id": task["id"]}), headers=EXTENSION, timeout=WAIT
    )
    assert extension.json()["result"]["generation"] == 3
    assert extension.headers["a2a-extensions"] == GENERATIONS_URI
    rest = httpx.get(f"{srv.url}/tasks/{task['id']}", headers=V11, timeout=WAIT).json()
    assert rest["generation"] == 3
    rest_plain = httpx.get(f"{srv.url}/tasks/{task['id']}", headers=A2A_V1, timeout=WAIT).json()
    assert "generation" not in rest_plain
    listed = call(srv, "ListTasks", {}, V11)["result"]["tasks"]
    assert [t["generation"] for t in listed] == [3]
    assert all("generation" not in t for t in call(srv, "ListTasks", {})["result"]["tasks"])


def test_events_carry_their_generation_and_sse_ids_are_generations(
    steps: tuple[RunningServer, Steps],
) -> None:
    srv, skill = steps
    for gate in skill.gates:
        gate.set()
    body = rpc("SendStreamingMessage", {"message": user_message("go")})
    with httpx.stream("POST", srv.rpc_url, json=body, headers=V11, timeout=WAIT) as response:
        events = list(sse(response))
    ids = [int(event_id) for event_id, _ in events]
    assert ids == [generation(data["result"]) for _, data in events] == list(range(1, 8))
    with httpx.stream("POST", srv.rpc_url, json=body, headers=A2A_V1, timeout=WAIT) as response:
        plain = list(sse(response))
    for _, data in plain:  # a 1.0 stream: the same ids, no generation fields
        assert_proto(data["result"], "StreamResponse")


# -- resuming from a cursor -------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["Last-Event-ID", "afterGeneration", "HTTP+JSON Last-Event-ID"])
def test_subscribe_resumes_after_the_last_event_seen_with_no_gap_and_no_duplicate(
    steps: tuple[RunningServer, Steps], how: str
) -> None:
    srv, skill = steps
    task = start(srv)
    skill.step()
    skill.step()
    wait_for_generation(srv, task["id"], 4)
    params: dict[str, Any] = {"id": task["id"]}
    headers = dict(V11)
    if how == "afterGeneration":
        params["afterGeneration"] = 3
    else:
        headers["Last-Event-ID"] = "3"
    if how.startswith("HTTP+JSON"):
        request = httpx.Request("GET", f"{srv.url}/tasks/{task['id']}:subscribe", headers=headers)
        unwrap = lambda data: data  # noqa: E731
    else:
        request = httpx.Request("POST", srv.rpc_url, json=rpc("SubscribeToTask", params), headers=headers)
        unwrap = lambda data: data["result"]  # noqa: E731
    with httpx.Client(timeout=WAIT) as client:
        response = client.send(request, stream=True)
        try:
            events = sse(response)
            seen = [generation(unwrap(next(events)[1]))]  # generation 4, the second chunk, from the log
            skill.step()
            skill.step()
            for _, data in events:
                seen.append(generation(unwrap(data)))
                if "statusUpdate" in unwrap(data):
                    break  # the question: a subscription follows on, this test stops here
        finally:
            response.close()
    assert seen == [4, 5, 6, 7]


def test_a_resume_cursor_that_is_no_generation_is_refused(steps: tuple[RunningServer, Steps]) -> None:
    srv, _ = steps
    task = start(srv)
    bad = call(srv, "SubscribeToTask", {"id": task["id"]}, {**V11, "Last-Event-ID": "x1"})
    assert bad["error"]["code"] == -32602
    ahead = call(srv, "SubscribeToTask", {"id": task["id"], "afterGeneration": 99}, V11)
    assert ahead["error"]["code"] == -32602 and "generation" in ahead["error"]["message"]


def test_grpc_resumes_after_the_cursor_in_metadata_and_carries_generations_for_1_1(
    steps: tuple[RunningServer, Steps],
) -> None:
    grpc = pytest.importorskip("grpc")
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    from skillwire.wire.protobuf_generations import ARTIFACT_UPDATE_GENERATION, TASK_GENERATION

    srv, skill = steps
    task = start(srv)
    skill.step()
    wait_for_generation(srv, task["id"], 3)
    address = srv.app.grpc_address
    assert address is not None

    def unknown(message: Any, number: int) -> int | None:
        from google.protobuf.unknown_fields import UnknownFieldSet

        return next((int(f.data) for f in UnknownFieldSet(message) if f.field_number == number), None)

    with grpc.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        got = stub.GetTask(
            a2a_pb2.GetTaskRequest(id=task["id"]), metadata=(("a2a-version", "1.1"),), timeout=WAIT
        )
        assert unknown(got, TASK_GENERATION) == 3
        plain = stub.GetTask(
            a2a_pb2.GetTaskRequest(id=task["id"]), metadata=(("a2a-version", "1.0"),), timeout=WAIT
        )
        assert unknown(plain, TASK_GENERATION) is None
        stream = stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task["id"]),
            metadata=(("a2a-version", "1.1"), ("last-event-id", "2")),
            timeout=WAIT,
        )
        first = next(stream)
        assert first.HasField("artifact_update") and first.artifact_update.artifact.parts[0].text == "c0"
        assert unknown(first.artifact_update, ARTIFACT_UPDATE_GENERATION) == 3
        stream.cancel()


# -- long-polls ---------------------------------------------------------------------------------------------


def test_get_task_long_polls_until_the_task_moves_past_the_generation(
    steps: tuple[RunningServer, Steps],
) -> None:
    srv, skill = steps
    task = start(srv)
    wait_for_generation(srv, task["id"], 2)  # created, working
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(call(srv, "GetTask", {"id": task["id"], "currentGeneration": 2}, V11))
    )
    waiting.start()
    runtime = srv.app.runtime
    assert runtime is not None
    _until(lambda: runtime._polls == 1)  # held: the task has not moved
    assert not answers
    skill.step()
    waiting.join(WAIT)
    assert answers[0]["result"]["generation"] == 3
    at_once = call(srv, "GetTask", {"id": task["id"], "currentGeneration": 1}, V11)
    assert at_once["result"]["generation"] == 3


def test_a_long_poll_answers_the_task_as_it_is_at_its_time_limit(steps: tuple[RunningServer, Steps]) -> None:
    srv, _ = steps
    task = start(srv)
    wait_for_generation(srv, task["id"], 2)
    runtime = srv.app.runtime
    assert runtime is not None
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(call(srv, "GetTask", {"id": task["id"], "currentGeneration": 2}, V11))
    )
    waiting.start()
    _until(lambda: runtime._polls == 1)  # held, while nothing happens to the task
    waiting.join(WAIT)  # long_poll_timeout is 3 s here
    assert answers[0]["result"]["generation"] == 2 and runtime._polls == 0


@pytest.mark.long_time_limit
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_long_polls_past_their_budget_are_refused_as_busy_and_a_client_that_left_frees_its_place(
    steps: tuple[RunningServer, Steps], binding: str
) -> None:
    srv, _ = steps
    task = start(srv)
    wait_for_generation(srv, task["id"], 2)
    body = json.dumps(rpc("GetTask", {"id": task["id"], "currentGeneration": 2})).encode()
    runtime = srv.app.runtime
    assert runtime is not None
    held = [raw_post(srv, body) for _ in range(2)]  # max_long_polls is 2 here: both are held
    try:
        _until(lambda: runtime._polls == 2)
        if binding == "GRPC":
            grpc = pytest.importorskip("grpc")
            from a2a.types import a2a_pb2, a2a_pb2_grpc

            from skillwire.protocol.models import GetTaskRequest
            from skillwire.wire.protobuf_generations import put_generations

            request = a2a_pb2.GetTaskRequest(id=task["id"])
            put_generations(GetTaskRequest(id=task["id"], current_generation=2), request)
            with (
                grpc.insecure_channel(srv.app.grpc_address or "") as channel,
                pytest.raises(grpc.RpcError) as caught,
            ):
                a2a_pb2_grpc.A2AServiceStub(channel).GetTask(
                    request, metadata=(("a2a-version", "1.1"),), timeout=WAIT
                )
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        elif binding == "HTTP+JSON":
            busy = httpx.get(f"{srv.url}/tasks/{task['id']}?currentGeneration=2", headers=V11, timeout=WAIT)
            assert busy.status_code == 503 and "max_long_polls" in busy.text
        else:
            busy = httpx.post(
                srv.rpc_url, content=body, headers={**V11, "Content-Type": "application/json"}, timeout=WAIT
            )
            assert busy.status_code == 503 and "max_long_polls" in busy.text
    finally:
        for sock in held:
            sock.close()  # the clients go away: their long-polls end now, not at their time limit (600 s)
    _until(lambda: runtime._polls == 0)


def raw_post(srv: RunningServer, body: bytes) -> socket.socket:
    """A JSON-RPC POST of ``body`` on a socket of its own, left waiting for its answer."""
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT)
    head = (
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.1\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    return sock


def _until(condition: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


# -- optimistic concurrency ---------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_a_message_whose_generation_match_is_stale_is_refused_and_a_fresh_one_is_taken(
    steps: tuple[RunningServer, Steps], binding: str
) -> None:
    srv, skill = steps
    task = start(srv)
    for _ in range(4):
        skill.step()
    asked = wait_for_generation(srv, task["id"], 7)  # created, working, 4 chunks, input-required
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answer = user_message("Paris", taskId=task["id"], contextId=task["contextId"])
    stale = {"message": answer, "configuration": {"ifGenerationMatch": 6}}
    if binding == "JSONRPC":
        refused = call(srv, "SendMessage", stale)
        assert refused["error"]["code"] == -32010
        info = refused["error"]["data"][0]
    elif binding == "HTTP+JSON":
        response = httpx.post(f"{srv.url}/message:send", json=stale, headers=A2A_V1, timeout=WAIT)
        assert response.status_code == 409
        body = response.json()["error"]
        assert body["status"] == "ABORTED"
        info = body["details"][0]
    else:
        grpc = pytest.importorskip("grpc")
        from a2a.types import a2a_pb2, a2a_pb2_grpc

        from skillwire.protocol.models import (
            Message,
            Part,
            Role,
            SendMessageConfiguration,
            SendMessageRequest,
        )
        from skillwire.wire.protobuf_generations import put_generations

        request = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(
                message_id="m-grpc",
                role=a2a_pb2.ROLE_USER,
                parts=[a2a_pb2.Part(text="Paris")],
                task_id=task["id"],
            ),
            configuration=a2a_pb2.SendMessageConfiguration(),
        )
        put_generations(
            SendMessageRequest(
                message=Message(message_id="m", role=Role.USER, parts=[Part(text="x")]),
                configuration=SendMessageConfiguration(if_generation_match=6),
            ),
            request,
        )
        with (
            grpc.insecure_channel(srv.app.grpc_address or "") as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                request, metadata=(("a2a-version", "1.0"),), timeout=WAIT
            )
        assert caught.value.code() == grpc.StatusCode.ABORTED
        info = {"reason": "TASK_GENERATION_MISMATCH", "metadata": {"currentGeneration": "7"}}
        assert "expected 6 but current generation is 7" in (caught.value.details() or "")
    assert info["reason"] == "TASK_GENERATION_MISMATCH" and info["metadata"]["currentGeneration"] == "7"
    still = call(srv, "GetTask", {"id": task["id"]}, V11)["result"]
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and still["generation"] == 7
    fresh = call(srv, "SendMessage", {"message": answer, "configuration": {"ifGenerationMatch": 7}}, V11)
    assert fresh["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fresh["result"]["task"]["generation"] == 9  # working on the answer, completed
