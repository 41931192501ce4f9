"""Idempotency keys (issue 29): a request sent again with its ``Idempotency-Key`` gets the first one's
result and its skill is not run twice, on every binding, across concurrent calls, restarts and processes;
the same key with another request is refused (422); the client sends a key with every send and retries.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, RunningServer, TcpProxy, rpc, start_server, user_message
from skillwire import Agent, Client
from skillwire.client.retry import RetryPolicy
from skillwire.protocol import models as m
from skillwire.protocol.states import TaskState
from skillwire.wire.generations import IDEMPOTENCY_URI

WAIT = 15.0


class Counted:
    """A skill that counts its runs; a message starting with "ask" asks a question first, and its answer
    completes the task. ``hold`` (when set up) keeps each run waiting until the test lets it finish."""

    def __init__(self) -> None:
        self.runs = 0
        self.started = threading.Event()
        self.hold: threading.Event | None = None
        self.lock = threading.Lock()

    async def __call__(self, context: Any, events: Any) -> None:
        with self.lock:
            self.runs += 1
        self.started.set()
        if self.hold is not None:
            assert await asyncio.to_thread(self.hold.wait, WAIT)
        if context.task is not None:
            await events.complete(f"answered: {context.text}")
        elif context.text.startswith("ask"):
            await events.input_required("Which city?")
        else:
            await events.artifact(f"run {self.runs}", name="result")


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[RunningServer, Counted]]:
    skill = Counted()
    app = Agent("counted", "Counts its runs.", executor=skill).asgi(
        store=f"sqlite:///{tmp_path / 'keys.db'}", grpc_port=0
    )
    srv = start_server(app)
    yield srv, skill
    if skill.hold is not None:
        skill.hold.set()
    srv.stop()


def keyed(key: str) -> dict[str, str]:
    return {**A2A_V1, "Idempotency-Key": key}


def send_rpc(srv: RunningServer, message: dict[str, Any], key: str, **config: Any) -> Any:
    params: dict[str, Any] = {"message": message}
    if config:
        params["configuration"] = config
    return httpx.post(srv.rpc_url, json=rpc("SendMessage", params), headers=keyed(key), timeout=WAIT).json()


def test_the_card_declares_idempotency_keys(counted: tuple[RunningServer, Counted]) -> None:
    srv, _ = counted
    card = httpx.get(srv.url + "/.well-known/agent-card.json", timeout=WAIT).json()
    declared = {e["uri"]: e for e in card["capabilities"]["extensions"]}
    assert declared[IDEMPOTENCY_URI]["params"] == {"window": 86400.0}


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_a_message_sent_again_with_its_key_returns_the_same_task_and_runs_once(
    counted: tuple[RunningServer, Counted], binding: str
) -> None:
    srv, skill = counted
    message, key = user_message("hello"), str(uuid.uuid4())
    answers = [send_on(binding, srv, message, key) for _ in range(3)]
    assert skill.runs == 1
    assert len({a["id"] for a in answers}) == 1
    assert all(a["status"]["state"] == "TASK_STATE_COMPLETED" for a in answers)
    assert [a["artifacts"][0]["parts"][0]["text"] for a in answers] == ["run 1"] * 3
    other = send_on(binding, srv, user_message("hello"), str(uuid.uuid4()))  # a new key: a new request
    assert other["id"] != answers[0]["id"] and skill.runs == 2


def send_on(binding: str, srv: RunningServer, message: dict[str, Any], key: str) -> dict[str, Any]:
    """SendMessage with ``key`` over ``binding``; the task, as JSON."""
    if binding == "JSONRPC":
        return send_rpc(srv, message, key)["result"]["task"]  # type: ignore[no-any-return]
    if binding == "HTTP+JSON":
        answer = httpx.post(
            f"{srv.url}/message:send", json={"message": message}, headers=keyed(key), timeout=WAIT
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["task"]  # type: ignore[no-any-return]
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.protobuf import json_format

    request = json_format.ParseDict({"message": message}, a2a_pb2.SendMessageRequest())
    with grpc.insecure_channel(srv.app.grpc_address or "") as channel:
        reply = a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            request, metadata=(("a2a-version", "1.0"), ("idempotency-key", key)), timeout=WAIT
        )
    return json_format.MessageToDict(reply)["task"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_the_same_key_with_another_request_is_refused(
    counted: tuple[RunningServer, Counted], binding: str
) -> None:
    srv, skill = counted
    key = str(uuid.uuid4())
    send_on(binding, srv, user_message("first"), key)
    other = user_message("second")
    if binding == "JSONRPC":
        error = send_rpc(srv, other, key)["error"]
        assert error["code"] == -32602 and error["data"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"
    elif binding == "HTTP+JSON":
        refused = httpx.post(
            f"{srv.url}/message:send", json={"message": other}, headers=keyed(key), timeout=WAIT
        )
        assert refused.status_code == 422
        assert refused.json()["error"]["details"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"
    else:
        import grpc

        with pytest.raises(grpc.RpcError) as caught:
            send_on("GRPC", srv, other, key)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert skill.runs == 1


def test_a_key_that_is_no_visible_ascii_is_refused(counted: tuple[RunningServer, Counted]) -> None:
    srv, skill = counted
    for bad in ("", "x" * 256, "tab\there"):
        answer = httpx.post(
            srv.rpc_url,
            content=json.dumps(rpc("SendMessage", {"message": user_message("hi")})).encode(),
            headers={**A2A_V1, "Content-Type": "application/json", "Idempotency-Key": bad},
            timeout=WAIT,
        ).json()
        assert answer["error"]["code"] == -32602, bad
    assert skill.runs == 0


def test_concurrent_calls_with_one_key_run_once(counted: tuple[RunningServer, Counted]) -> None:
    srv, skill = counted
    skill.hold = threading.Event()
    message, key = user_message("hello"), str(uuid.uuid4())
    answers: list[Any] = []
    callers = [threading.Thread(target=lambda: answers.append(send_rpc(srv, message, key))) for _ in range(5)]
    for caller in callers:
        caller.start()
    assert skill.started.wait(WAIT)
    skill.hold.set()
    for caller in callers:
        caller.join(WAIT)
    assert skill.runs == 1
    tasks = [a["result"]["task"] for a in answers]
    assert len(tasks) == 5 and len({t["id"] for t in tasks}) == 1
    assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" for t in tasks)


def test_an_answer_sent_again_is_not_taken_twice(counted: tuple[RunningServer, Counted]) -> None:
    srv, skill = counted
    asked = send_rpc(srv, user_message("ask me"), str(uuid.uuid4()))["result"]["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answer, key = user_message("Paris", taskId=asked["id"], contextId=asked["contextId"]), str(uuid.uuid4())
    first, again = send_rpc(srv, answer, key)["result"]["task"], send_rpc(srv, answer, key)["result"]["task"]
    assert first["status"]["state"] == again["status"]["state"] == "TASK_STATE_COMPLETED"
    assert skill.runs == 2  # the question and the answer, each once
    history = httpx.post(
        srv.rpc_url, json=rpc("GetTask", {"id": asked["id"]}), headers=A2A_V1, timeout=WAIT
    ).json()
    assert [m["parts"][0]["text"] for m in history["result"]["history"] if m["role"] == "ROLE_USER"] == [
        "ask me",
        "Paris",
    ]


def test_a_stream_sent_again_with_its_key_follows_the_same_task(
    counted: tuple[RunningServer, Counted],
) -> None:
    srv, skill = counted
    message, key = user_message("hello"), str(uuid.uuid4())
    body = rpc("SendStreamingMessage", {"message": message})

    def stream(headers: dict[str, str]) -> list[dict[str, Any]]:
        with httpx.stream("POST", srv.rpc_url, json=body, headers=headers, timeout=WAIT) as response:
            return [
                json.loads(line[6:])["result"] for line in response.iter_lines() if line.startswith("data: ")
            ]

    first = stream(keyed(key))
    again = stream(keyed(key))
    assert skill.runs == 1
    assert first[0]["task"]["id"] == again[0]["task"]["id"]
    assert again[-1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # the task as it is now: done
    resumed = stream({**keyed(key), "Last-Event-ID": "2"})  # after the first two events
    assert [next(iter(r)) for r in resumed] == [next(iter(r)) for r in first[2:]]
    assert skill.runs == 1


def test_a_push_config_created_again_with_its_key_is_the_same_config(
    counted: tuple[RunningServer, Counted],
) -> None:
    srv, _ = counted
    task = send_rpc(srv, user_message("hello"), str(uuid.uuid4()))["result"]["task"]
    config = {"taskId": task["id"], "url": "https://hooks.example.com/a2a"}
    key = str(uuid.uuid4())

    def create(body: dict[str, Any]) -> Any:
        return httpx.post(
            srv.rpc_url, json=rpc("CreateTaskPushNotificationConfig", body), headers=keyed(key), timeout=WAIT
        ).json()

    first, again = create(config)["result"], create(config)["result"]
    assert first == again and first["id"]
    listed = httpx.post(
        srv.rpc_url,
        json=rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        headers=A2A_V1,
        timeout=WAIT,
    ).json()["result"]
    assert [c["id"] for c in listed["configs"]] == [first["id"]]
    refused = create({**config, "url": "https://hooks.example.com/other"})
    assert refused["error"]["data"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"
    delete = {"taskId": task["id"], "id": first["id"]}
    delete_key = {**A2A_V1, "Idempotency-Key": str(uuid.uuid4())}
    for _ in range(2):  # the second is the first's retry: answered as it was
        done = httpx.post(
            srv.rpc_url,
            json=rpc("DeleteTaskPushNotificationConfig", delete),
            headers=delete_key,
            timeout=WAIT,
        ).json()
        assert "result" in done, done


def test_a_key_is_kept_across_a_restart(tmp_path: Path) -> None:
    skill = Counted()
    store = f"sqlite:///{tmp_path / 'restart.db'}"
    message, key = user_message("hello"), str(uuid.uuid4())
    first_app = Agent("counted", "Counts its runs.", executor=skill).asgi(store=store)
    srv = start_server(first_app)
    first = send_rpc(srv, message, key)["result"]["task"]
    srv.stop()
    srv = start_server(Agent("counted", "Counts its runs.", executor=skill).asgi(store=store))
    try:
        again = send_rpc(srv, message, key)["result"]["task"]
    finally:
        srv.stop()
    assert again["id"] == first["id"] and skill.runs == 1


# -- the client ----------------------------------------------------------------------------------------------


async def test_the_client_retries_a_send_whose_answer_was_lost_and_the_skill_runs_once(
    counted: tuple[RunningServer, Counted],
) -> None:
    srv, skill = counted
    skill.hold = threading.Event()
    proxy = TcpProxy(("127.0.0.1", srv.port))
    proxy.start()
    try:
        fast = RetryPolicy(retries=5, base=0.05, cap=0.5)
        async with await Client.connect(
            f"http://127.0.0.1:{proxy.port}", retries=fast, timeout=WAIT
        ) as client:
            assert client.idempotency_keys
            sending = asyncio.ensure_future(client.send("hello"))
            assert await asyncio.to_thread(skill.started.wait, WAIT)
            proxy.cut()  # the request arrived; its answer will not: the client sends it again
            proxy.start()
            skill.hold.set()
            task = await asyncio.wait_for(sending, WAIT)
    finally:
        proxy.cut()
    assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
    assert skill.runs == 1


async def test_the_client_sends_a_fresh_key_with_each_send(counted: tuple[RunningServer, Counted]) -> None:
    srv, skill = counted
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        one, two = await client.send("same"), await client.send("same")
    assert isinstance(one, m.Task) and isinstance(two, m.Task) and one.id != two.id
    assert skill.runs == 2


BLOCKING_AGENT = """
import asyncio, os
from skillwire import Agent

async def block(context, events):
    with open(os.environ["RUNS"], "a") as runs:
        runs.write(context.message.message_id + "\\n")
    await asyncio.Event().wait()  # stores nothing: a blocking call's task is written when it settles

agent = Agent("blocking", "Works without a word until its process dies.", executor=block)
"""


@pytest.mark.slow
def test_a_request_whose_process_died_before_storing_anything_is_failed_not_run_again(
    tmp_path: Path, processes: list[Any]
) -> None:
    import os
    import signal

    from conftest import start_process

    (tmp_path / "blocking_agent.py").write_text(BLOCKING_AGENT)
    runs = tmp_path / "runs.txt"
    runs.touch()
    env = {**os.environ, "RUNS": str(runs), "PYTHONPATH": str(tmp_path)}
    store = f"sqlite:///{tmp_path / 'died.db'}"
    first = start_process("blocking_agent:agent", store, tmp_path, env=env)
    processes.append(first)
    message, key = user_message("work"), str(uuid.uuid4())
    body = rpc("SendMessage", {"message": message})
    lost: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(first.url, json=body, headers=keyed(key), timeout=WAIT)
        except httpx.HTTPError as exc:
            lost.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    with runs.open() as log:  # the skill began: its claim was made first
        while not log.read():
            assert caller.is_alive()
            caller.join(0.01)  # the call is still waiting; look at the file again
            log.seek(0)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(WAIT)
    caller.join(WAIT)
    assert lost  # the first call got no answer
    second = start_process("blocking_agent:agent", store, tmp_path, env=env)
    processes.append(second)
    again = httpx.post(second.url, json=body, headers=keyed(key), timeout=WAIT).json()["result"]["task"]
    assert again["status"]["state"] == "TASK_STATE_FAILED"
    assert "not run again" in again["status"]["message"]["parts"][0]["text"]
    assert runs.read_text().splitlines() == [message["messageId"]]  # the skill began once
    twice = httpx.post(second.url, json=body, headers=keyed(key), timeout=WAIT).json()["result"]["task"]
    assert twice["id"] == again["id"] and twice["status"]["state"] == "TASK_STATE_FAILED"
