"""Push deliveries shared fairly between callers and between hosts, and every attempt ending as a success, a
retry or a failure (docs/push.md): a real server, real receivers on 127.0.0.1, one of them a tarpit that
never answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import example_agent, user_message
from skillwire import PushSettings, WebhookPolicy
from skillwire.client import Client
from skillwire.errors import InvalidParamsError
from skillwire.models import AuthenticationInfo, TaskPushNotificationConfig
from skillwire.security import APIKey, Security
from skillwire.server.notifications.push import PushService
from skillwire.stores import MemoryTaskStore
from skillwire.stores.base import write_task
from skillwire.stores.push import Outgoing, PushConfigRecord
from skillwire.testing.store_contract import make_task
from skillwire.webhooks import WebhookSigner, generate_key
from test_push import LOCAL, Hook, call, kinds, receiving

MALLORY = {"X-API-Key": "k-mallory"}
ADA = {"X-API-Key": "k-ada"}
EVE = {"X-API-Key": "k-eve"}


@pytest.fixture
def tarpit() -> Iterator[Hook]:
    """A receiver that takes every delivery and never answers (until the test ends)."""
    with receiving() as receiver:
        receiver.default = "hang"
        yield receiver


@pytest.fixture
def good() -> Iterator[Hook]:
    with receiving() as receiver:
        yield receiver


def shared_agent(settings: PushSettings) -> Any:
    agent = example_agent("echo")
    agent.security = Security(APIKey(keys={"mallory": "k-mallory", "ada": "k-ada", "eve": "k-eve"}))
    return agent.asgi(store="memory://", webhook_policy=LOCAL, push=settings)


def with_push(server: Any, url: str, headers: dict[str, str], status: int = 200) -> dict[str, Any]:
    params = {"message": user_message("hi"), "configuration": {"taskPushNotificationConfig": {"url": url}}}
    return call(server, "SendMessage", params, status, **headers)


def test_a_callers_tarpit_delays_neither_another_callers_first_delivery_nor_its_configs(
    serve: Any, tarpit: Hook, good: Hook
) -> None:
    # 8 slots (a share is 2), attempts that wait 60 s, 100 deliveries waiting at most (a share is 25)
    settings = PushSettings(concurrency=8, timeout=60.0, max_pending=100, max_attempts=1)
    server = serve(shared_agent(settings))
    refused = None
    for n in range(20):  # 3 deliveries a task, all to the tarpit, until mallory's share is used up
        answer = with_push(server, tarpit.url, MALLORY, status=503 if n >= 9 else 200)
        if "error" in answer:
            refused = answer
            break
    assert refused is not None and refused["error"]["data"][0]["reason"] == "SERVER_BUSY"
    assert "this caller's tasks" in refused["error"]["message"]
    # mallory's 9 lanes hold the slots they may: all but a share of them
    held = tarpit.wait_for(6, ok_only=False)
    started = time.perf_counter()
    task = with_push(server, good.url, ADA)["result"]["task"]  # ada's config is taken
    assert kinds(good.wait_for(3)) == ["task", "artifactUpdate", "TASK_STATE_COMPLETED"]
    first = time.perf_counter() - started
    assert all(task["id"] in r.body.decode() for r in good.received)
    assert len(tarpit.received) == len(held) == 6  # mallory got no more slots meanwhile
    print(f"another caller's deliveries with the tarpit holding 6 of 8 slots: {first * 1000:.0f} ms")


def test_a_slow_host_holds_its_share_of_the_slots_whatever_its_owners(
    serve: Any, tarpit: Hook, good: Hook
) -> None:
    """Two callers' lanes to one tarpit host hold at most what slots leave a share free; a third caller's
    webhook on another host is served at once (the two callers, each over its share, wait for theirs)."""
    settings = PushSettings(concurrency=8, timeout=60.0, max_attempts=1)
    server = serve(shared_agent(settings))
    for _ in range(5):
        with_push(server, tarpit.url, MALLORY)
        with_push(server, tarpit.url, ADA)
    tarpit.wait_for(6, ok_only=False)
    with_push(server, good.url, EVE)
    good.wait_for(3)
    assert len(tarpit.received) == 6


# -- header values: refused when set, and a poisoned lane ends ---------------------------------------------

BAD_VALUES = [
    pytest.param("tök-en", id="non-ascii"),
    pytest.param("a\r\nX-Injected: 1", id="cr-lf"),
    pytest.param("\x1b[31mred", id="escape"),
    pytest.param(" padded", id="leading-space"),
]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
@pytest.mark.parametrize("value", BAD_VALUES)
async def test_a_token_or_credentials_that_are_not_visible_ascii_are_refused_when_set(
    serve: Any, binding: str, value: str
) -> None:
    pytest.importorskip("grpc")
    server = serve(example_agent("echo").asgi(store="memory://", webhook_policy=LOCAL, grpc_port=0))
    async with await Client.connect(server.url, bindings=[binding]) as client:
        task = await client.send("hello")
        with pytest.raises(InvalidParamsError, match="visible ASCII"):
            await client.create_push_config(task.id, "http://127.0.0.1:1/hook", token=value)
        with pytest.raises(InvalidParamsError, match="visible ASCII"):
            await client.create_push_config(
                task.id,
                "http://127.0.0.1:1/hook",
                authentication=AuthenticationInfo(scheme="Bearer", credentials=value),
            )
        assert (await client.list_push_configs(task.id)).configs == []


def test_the_wire_errors_of_a_refused_header_value(serve: Any) -> None:
    import httpx

    server = serve(example_agent("echo").asgi(store="memory://", webhook_policy=LOCAL))
    task = call(server, "SendMessage", {"message": user_message("hi")})["result"]["task"]
    config = {"taskId": task["id"], "url": "http://127.0.0.1:1/hook", "token": "tök-en"}
    answer = call(server, "CreateTaskPushNotificationConfig", config)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"][1]["fieldViolations"][0]["field"] == "params.token"
    rest = httpx.post(
        f"{server.url}/tasks/{task['id']}/pushNotificationConfigs",
        json=config,
        headers={"A2A-Version": "1.0"},
    )
    assert rest.status_code == 400 and rest.json()["error"]["status"] == "INVALID_ARGUMENT"
    inline = {"url": "http://127.0.0.1:1/hook", "authentication": {"scheme": "Bearer", "credentials": "é"}}
    sent = call(
        server,
        "SendMessage",
        {"message": user_message("hi"), "configuration": {"taskPushNotificationConfig": inline}},
    )
    assert sent["error"]["code"] == -32602
    assert "taskPushNotificationConfig.authentication.credentials" in sent["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            b'{"url":"http://127.0.0.1:1/hook","taskId":"t","token":"t\\u00f6ken"}', id="non-ascii-token"
        ),
        pytest.param(b'{"url":"http://127.0.0.1:1/hook","taskId":"t","token":"a\\r\\nb"}', id="cr-lf-token"),
        pytest.param(b"not json at all", id="unreadable-config"),
    ],
)
async def test_a_config_stored_before_the_check_ends_as_one_recorded_failure(
    tmp_path: Path, body: bytes
) -> None:
    """A config no attempt can send (stored before such values were refused, or damaged) is one failed
    attempt, recorded, and the lane is done: not a lane rescheduled every second forever."""
    store = MemoryTaskStore()
    await store.open()
    push = PushService(
        store,
        WebhookSigner(generate_key(tmp_path / "key.pem"), issuer="https://agent.example"),
        policy=WebhookPolicy(allow=["127.0.0.1"], allow_http=True),
        settings=PushSettings(max_attempts=8),
    )
    task = make_task()
    await store.put_push_config(PushConfigRecord("", task.id, "c1", body), 10)
    await push.start()
    try:
        write = write_task(task, version=1)
        outgoing = (Outgoing("c1", b"{}"), Outgoing("c1", b"[]"))
        await store.commit(msgspec.structs.replace(write, deliveries=outgoing))
        push.ready("", task.id, {"c1": "1.0"}, 2)
        await push.deliverer.idle()
        failed = await store.failed_deliveries()
        assert [f.attempts for f in failed] == [1, 1]
        assert push.deliverer.stats.failed == 2 and push.deliverer.stats.retried == 0
        assert await store.pending_count() == 0 and push.deliverer.pending == 0
    finally:
        await push.stop()
        await store.close()


def test_header_problem_names_what_cannot_be_sent() -> None:
    from skillwire.server.notifications.push_delivery import header_problem

    def config(**fields: Any) -> TaskPushNotificationConfig:
        return TaskPushNotificationConfig(url="https://hooks.example.com/a2a", **fields)

    assert header_problem(config(token="abc DEF-123_~!")) == ""
    assert "token" in header_problem(config(token="tab\there"))
    auth = AuthenticationInfo(scheme="Basic", credentials="dXNlcjpwYXNz\x7f")
    assert "credentials" in header_problem(config(authentication=auth))
