"""Push notifications end to end (issue 13): a real skillwire server under uvicorn, a real webhook receiver on
127.0.0.1 (the allowlist opened for it), real signatures verified as a receiver would, and the server killed
with deliveries pending."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import serving
from conftest import (
    A2A_V1,
    EXAMPLES,
    PROCESS_TIMEOUT,
    RunningServer,
    assert_proto,
    example_agent,
    free_port,
    postgres_dsn,
    postgres_schema,
    rpc,
    start_process,
    user_message,
)
from skillwire import PushSettings, Task, WebhookPolicy
from skillwire.client import Client
from skillwire.errors import A2AError, install_command
from skillwire.models import AuthenticationInfo, TaskPushNotificationConfig
from skillwire.server.notifications.push import PushService
from skillwire.server.notifications.push_delivery import DeliveryRetry, _retry_after
from skillwire.stores import MemoryTaskStore, open_store
from skillwire.stores.base import write_task
from skillwire.stores.postgres import PostgresTaskStore
from skillwire.stores.push import Outgoing, PushConfigRecord, PushStore
from skillwire.testing.store_contract import make_task, with_deliveries
from skillwire.webhooks import HEADER, WebhookSigner, WebhookVerifier, generate_key, load_or_create

LOCAL = WebhookPolicy(allow=["127.0.0.1"], allow_http=True)
#: Retries fast enough for a test, and few of them.
QUICK = PushSettings(first_delay=0.01, max_delay=0.05, max_attempts=4, timeout=2.0)
WAIT = 20.0


# -- the receiver -------------------------------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int
    #: The sender's address and port: one per connection.
    peer: tuple[str, int] = ("", 0)

    @property
    def event(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.body)
        return decoded


class Hook:
    """A webhook receiver: records every request, and answers each by ``answers`` (a status, a (status,
    headers) pair, or ``"hang"``: no answer until the test ends), else ``default``."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: list[Any] = []
        self.default: Any = 200
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None
        self.url = ""

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self._cond:
                answer = self.answers.pop(0) if self.answers else self.default
                status = answer[0] if isinstance(answer, tuple) else 0 if answer == "hang" else answer
                peer = (request.client.host, request.client.port) if request.client else ("", 0)
                self.received.append(Received(dict(request.headers), body, status, peer))
                self._cond.notify_all()
            if answer == "hang":
                self._loop = asyncio.get_running_loop()
                self._release = self._release or asyncio.Event()
                await self._release.wait()
                return Response(status_code=200)
            if isinstance(answer, tuple):
                return Response(status_code=answer[0], headers=answer[1])
            return Response(status_code=answer)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    def wait_for(self, count: int, *, ok_only: bool = True) -> list[Received]:
        """The first ``count`` requests received (answered 2xx, unless ``ok_only`` is false)."""

        def chosen() -> list[Received]:
            return [r for r in self.received if not ok_only or 200 <= r.status < 300]

        with self._cond:
            assert self._cond.wait_for(lambda: len(chosen()) >= count, WAIT), (
                f"{len(chosen())} of {count} requests arrived: {self.received}"
            )
            return chosen()[:count]

    def wait_until(self, done: Any) -> list[Received]:
        """The requests answered 2xx, once ``done`` (a function of them) is true."""
        with self._cond:
            ok = [r for r in self.received if 200 <= r.status < 300]
            assert self._cond.wait_for(
                lambda: done([r for r in self.received if 200 <= r.status < 300]), WAIT
            ), f"not done: {self.received}"
            return [r for r in self.received if 200 <= r.status < 300] or ok

    def release(self) -> None:
        loop, event = self._loop, self._release
        if loop is not None and event is not None:
            loop.call_soon_threadsafe(event.set)


@contextlib.contextmanager
def receiving(port: int = 0) -> Iterator[Hook]:
    """A webhook receiver on 127.0.0.1 (on ``port``, else a free one), for the block."""
    hook = Hook()
    with serving.running(hook.app(), port=port, name="receiver") as server:
        hook.url = f"{server.url}/hook"
        try:
            yield hook
        finally:
            hook.release()  # before the server stops: it waits for the requests held open


@pytest.fixture
def hook() -> Iterator[Hook]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture
def other_hook() -> Iterator[Hook]:
    with receiving() as receiver:
        yield receiver


def echo_app(push: PushSettings | bool = QUICK, **options: Any) -> Any:
    return example_agent("echo").asgi(store="memory://", webhook_policy=LOCAL, push=push, **options)


def call(
    server: RunningServer, method: str, params: dict[str, Any], status: int = 200, **headers: str
) -> dict[str, Any]:
    response = httpx.post(server.rpc_url, json=rpc(method, params), headers={**A2A_V1, **headers}, timeout=30)
    assert response.status_code == status
    answer: dict[str, Any] = response.json()
    return answer


def send_with_push(server: RunningServer, text: str, url: str, **config: Any) -> dict[str, Any]:
    answer = call(
        server,
        "SendMessage",
        {
            "message": user_message(text),
            "configuration": {"taskPushNotificationConfig": {"url": url, **config}},
        },
    )
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


def kinds(received: list[Received]) -> list[str]:
    """Each event as its kind and, for a status update, its state."""
    out = []
    for r in received:
        event = r.event
        if "statusUpdate" in event:
            out.append(event["statusUpdate"]["status"]["state"])
        else:
            [kind] = event
            out.append(kind)
    return out


def task_of(received: Received) -> str:
    inner = next(iter(received.event.values()))
    return str(inner.get("taskId") or inner["id"])


ECHO_EVENTS = ["task", "artifactUpdate", "TASK_STATE_COMPLETED"]


# -- the capability and the config operations ---------------------------------------------------------------


def test_the_card_offers_push_notifications_by_default(serve: Any) -> None:
    server = serve(example_agent("echo").asgi(store="memory://"))
    card = httpx.get(server.url + "/.well-known/agent-card.json").json()
    assert card["capabilities"]["pushNotifications"] is True
    jwks = httpx.get(server.url + "/.well-known/webhook-jwks.json")
    assert jwks.status_code == 200
    assert jwks.headers["content-type"] == "application/jwk-set+json"
    [key] = jwks.json()["keys"]
    assert key["kty"] == "EC" and key["crv"] == "P-256" and "d" not in key


def test_push_turned_off_answers_push_not_supported(serve: Any) -> None:
    server = serve(echo_app(push=False))
    card = httpx.get(server.url + "/.well-known/agent-card.json").json()
    assert not card["capabilities"].get("pushNotifications")
    answer = call(server, "CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/h"})
    assert answer["error"]["code"] == -32003
    assert httpx.get(server.url + "/.well-known/webhook-jwks.json").status_code == 404


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_config_operations_on_every_binding(serve: Any, binding: str) -> None:
    pytest.importorskip("grpc")
    server = serve(echo_app(grpc_port=0))
    async with await Client.connect(server.url, bindings=[binding]) as client:
        assert client.interface is not None and client.interface.protocol_binding == binding
        task = await client.send("hello")
        assert isinstance(task, Task)
        created = await client.create_push_config(
            task.id,
            "https://hooks.example.com/a2a",
            token="tok-1",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="secret"),
        )
        assert created.id and created.task_id == task.id and created.token == "tok-1"
        named = await client.create_push_config(task.id, "https://hooks.example.com/b", id="b-config")
        assert named.id == "b-config"
        got = await client.get_push_config(task.id, created.id)
        assert got.url == "https://hooks.example.com/a2a"
        assert got.authentication == AuthenticationInfo(scheme="Bearer", credentials="secret")
        listed = await client.list_push_configs(task.id)
        assert sorted(c.id for c in listed.configs) == sorted([created.id, "b-config"])
        first = await client.list_push_configs(task.id, page_size=1)
        assert len(first.configs) == 1 and first.next_page_token
        second = await client.list_push_configs(task.id, page_size=1, page_token=first.next_page_token)
        assert [*first.configs, *second.configs] == listed.configs and not second.next_page_token
        await client.delete_push_config(task.id, "b-config")
        await client.delete_push_config(task.id, "b-config")  # idempotent
        with pytest.raises(A2AError) as missing:
            await client.get_push_config(task.id, "b-config")
        assert missing.value.code == -32001
        with pytest.raises(A2AError) as unknown_task:
            await client.create_push_config("no-such-task", "https://hooks.example.com/a2a")
        assert unknown_task.value.code == -32001


def test_a_config_for_a_refused_address_is_refused_when_set(serve: Any) -> None:
    server = serve(example_agent("echo").asgi(store="memory://"))  # the default guard
    task = call(server, "SendMessage", {"message": user_message("hi")})["result"]["task"]
    for url, reason in [
        ("https://127.0.0.1/hook", "loopback"),
        ("http://hooks.example.com/hook", "scheme"),
        ("https://169.254.169.254/latest", "metadata"),
        ("https://169.254.1.1/hook", "link-local"),
        ("https://10.1.2.3/hook", "private"),
        ("https://localhost/hook", "this machine"),
    ]:
        answer = call(server, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url})
        assert answer["error"]["code"] == -32602, url
        assert reason in answer["error"]["message"], answer
    listed = call(server, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})["result"]
    assert listed.get("configs", []) == []
    inline = call(
        server,
        "SendMessage",
        {
            "message": user_message("hi"),
            "configuration": {"taskPushNotificationConfig": {"url": "https://127.0.0.1/hook"}},
        },
    )
    assert inline["error"]["code"] == -32602
    assert "taskPushNotificationConfig.url" in json.dumps(inline["error"]["data"])


def test_configs_per_task_are_budgeted(serve: Any) -> None:
    server = serve(echo_app(push=PushSettings(max_configs_per_task=2)))
    task = call(server, "SendMessage", {"message": user_message("hi")})["result"]["task"]
    for n in range(2):
        config = {"taskId": task["id"], "id": f"c{n}", "url": "https://hooks.example.com/h"}
        assert "result" in call(server, "CreateTaskPushNotificationConfig", config)
    third = call(
        server,
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "url": "https://hooks.example.com/h"},
    )
    assert third["error"]["code"] == -32602 and "at most" not in third["error"]["message"]
    assert "2 push notification configs" in third["error"]["message"]
    again = {"taskId": task["id"], "id": "c1", "url": "https://hooks.example.com/other"}
    assert call(server, "CreateTaskPushNotificationConfig", again)["result"]["url"].endswith("/other")


# -- delivery -----------------------------------------------------------------------------------------------


async def test_every_event_is_delivered_in_order_signed_with_credentials(serve: Any, hook: Hook) -> None:
    server = serve(echo_app())
    task = send_with_push(
        server,
        "hello",
        hook.url,
        token="tok-42",
        authentication={"scheme": "Bearer", "credentials": "hook-secret"},
    )
    received = hook.wait_for(3)
    assert kinds(received) == ECHO_EVENTS
    verifier = WebhookVerifier(
        server.url + "/.well-known/webhook-jwks.json", issuer=server.url, audience=hook.url
    )
    try:
        for r in received:
            assert r.headers["authorization"] == "Bearer hook-secret"
            assert r.headers["x-a2a-notification-token"] == "tok-42"
            assert r.headers["content-type"] == "application/json"
            claims = await verifier.verify(r.body, r.headers)
            assert claims.issuer == server.url
            assert_proto(r.event, "StreamResponse")
    finally:
        await verifier.close()
    assert received[0].event["task"]["id"] == task["id"]
    assert received[-1].event["statusUpdate"]["taskId"] == task["id"]
    tokens = {r.headers[HEADER.lower()] for r in received}
    assert len(tokens) == 3
    assert len({r.peer for r in received}) == 1  # one connection, kept for the next delivery


def test_new_configs_wait_while_too_many_deliveries_wait(serve: Any, hook: Hook) -> None:
    hook.default = 503
    slow = PushSettings(max_pending=3, first_delay=30, max_delay=30, timeout=2.0)
    server = serve(echo_app(push=slow))
    send_with_push(server, "hello", hook.url)  # 3 deliveries, none of which gets through
    hook.wait_for(1, ok_only=False)
    refused = call(
        server,
        "SendMessage",
        {"message": user_message("more"), "configuration": {"taskPushNotificationConfig": {"url": hook.url}}},
        503,  # JSON-RPC answers a busy server with its HTTP status, and Retry-After
    )
    assert refused["error"]["code"] == -32603
    assert "push deliveries of this caller's tasks are waiting" in refused["error"]["message"]
    assert refused["error"]["data"][0]["reason"] == "SERVER_BUSY"
    plain = call(server, "SendMessage", {"message": user_message("no push")})
    assert plain["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_config_set_while_the_task_runs_gets_the_events_after_it(serve: Any, hook: Hook) -> None:
    server = serve(example_agent("tck").asgi(store="memory://", webhook_policy=LOCAL, push=QUICK))
    first = call(server, "SendMessage", {"message": user_message("tck-input-required please")})
    task = first["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    config = {"taskId": task["id"], "url": hook.url}
    assert "result" in call(server, "CreateTaskPushNotificationConfig", config)
    follow = user_message("tck-complete-task now", taskId=task["id"], contextId=task["contextId"])
    assert call(server, "SendMessage", {"message": follow})["result"]["task"]["id"] == task["id"]
    received = hook.wait_until(lambda got: got and kinds(got)[-1] == "TASK_STATE_COMPLETED")
    states = kinds(received)
    # the answer's turn: the task works on it, then completes
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED", states
    assert "TASK_STATE_INPUT_REQUIRED" not in states  # that event came before the config
    assert {task_of(r) for r in received} == {task["id"]}


def test_a_v03_client_gets_v03_bodies(serve: Any, hook: Hook) -> None:
    server = serve(echo_app())
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "m-1",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": message, "configuration": {"pushNotificationConfig": {"url": hook.url}}},
    }
    answer = httpx.post(server.rpc_url, json=body, timeout=30).json()  # no A2A-Version: v0.3
    assert answer["result"]["kind"] == "task"
    received = hook.wait_for(3)
    events = [r.event for r in received]
    assert [e["kind"] for e in events] == ["task", "artifact-update", "status-update"]
    assert events[-1]["status"]["state"] == "completed" and events[-1]["final"] is True


def test_a_receiver_that_fails_then_recovers_gets_everything_in_order(serve: Any, hook: Hook) -> None:
    hook.answers = [500, (503, {"Retry-After": "0"}), 429]
    app = echo_app()
    server = serve(app)
    send_with_push(server, "hello", hook.url)
    received = hook.wait_for(3)
    assert kinds(received) == ECHO_EVENTS
    attempts = hook.wait_for(6, ok_only=False)
    assert [r.status for r in attempts] == [500, 503, 429, 200, 200, 200]
    assert len({r.body for r in attempts[:4]}) == 1  # the first event, retried until it got through
    assert app.runtime.push.deliverer.stats.retried == 3


def test_a_hanging_receiver_slows_neither_the_task_nor_another_webhook(
    serve: Any, hook: Hook, other_hook: Hook
) -> None:
    hook.default = "hang"
    server = serve(echo_app(push=PushSettings(first_delay=0.01, max_delay=0.05, max_attempts=2, timeout=1.0)))
    first = send_with_push(server, "hello", hook.url)
    other = send_with_push(server, "hello again", other_hook.url)
    assert first["status"]["state"] == other["status"]["state"] == "TASK_STATE_COMPLETED"
    assert kinds(other_hook.wait_for(3)) == ECHO_EVENTS
    hung = hook.wait_for(1, ok_only=False)
    assert hung[0].event["task"]["id"] == first["id"]
    # the hanging attempt times out and is retried; after max_attempts the delivery is recorded as failed
    hook.wait_for(2, ok_only=False)


async def test_failed_deliveries_are_kept_with_their_reason(serve: Any, hook: Hook) -> None:
    hook.default = 404
    app = echo_app()
    server = serve(app)
    task = send_with_push(server, "hello", hook.url)
    hook.wait_for(3, ok_only=False)  # one attempt each: a 404 is not retried
    store = app.runtime.store

    async def failed() -> list[Any]:
        return await store.failed_deliveries()  # type: ignore[no-any-return]

    found = asyncio.run_coroutine_threadsafe(failed(), server.loop).result(WAIT)
    while len(found) < 3:  # the last one may still be being recorded
        hook.wait_for(3, ok_only=False)
        found = asyncio.run_coroutine_threadsafe(failed(), server.loop).result(WAIT)
    assert [d.task_id for d in found] == [task["id"]] * 3
    assert all(d.error == "HTTP 404" and d.attempts == 1 for d in found)
    assert len(hook.received) == 3


def test_a_deleted_config_gets_nothing_more(serve: Any, hook: Hook) -> None:
    """Once the delete is answered, no delivery to the config starts. The receiver holds the task's first
    delivery open until then: a lane delivers in order, so none of the task's later events can be on the
    wire at the delete (one already sent may still land; that is not what is tested here)."""
    settings = PushSettings(first_delay=0.01, max_delay=0.05, max_attempts=4, timeout=WAIT)
    server = serve(example_agent("tck").asgi(store="memory://", webhook_policy=LOCAL, push=settings))
    hook.answers = ["hang"]
    task = send_with_push(server, "tck-input-required please", hook.url, id="cfg")
    received = hook.wait_for(1, ok_only=False)
    assert received[0].event["task"]["id"] == task["id"]
    deleted = call(server, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"})
    assert "error" not in deleted
    before = len(hook.received)
    hook.release()  # the held delivery is answered 200 now
    follow = user_message("tck-complete-task now", taskId=task["id"], contextId=task["contextId"])
    done = call(server, "SendMessage", {"message": follow})["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    # a second task with a config shows the deliverer is working, yet the first task's hook got no more
    send_with_push(server, "tck-complete-task", hook.url, id="cfg2")
    later = hook.wait_for(before + 1)
    assert all(r.event.get("task", {}).get("id") != task["id"] for r in later[before:])
    assert all(task["id"] not in r.body.decode() for r in hook.received[before:])


def test_configs_belong_to_the_caller_that_owns_the_task(serve: Any, hook: Hook) -> None:
    from skillwire.security import APIKey, Security

    agent = example_agent("echo")
    agent.security = Security(APIKey(keys={"alice": "k-alice", "bob": "k-bob"}))
    server = serve(agent.asgi(store="memory://", webhook_policy=LOCAL, push=QUICK))
    alice, bob = {"X-API-Key": "k-alice"}, {"X-API-Key": "k-bob"}
    task = call(server, "SendMessage", {"message": user_message("hi")}, **alice)["result"]["task"]
    config = {"taskId": task["id"], "id": "mine", "url": hook.url}
    assert "result" in call(server, "CreateTaskPushNotificationConfig", config, **alice)
    for method, params in [
        ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"}),
        ("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": hook.url}),
    ]:
        assert call(server, method, params, **bob)["error"]["code"] == -32001, method
    assert call(server, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"}, **alice)[
        "result"
    ]


# -- a server killed with deliveries pending ---------------------------------------------------------------


def test_deliveries_pending_when_the_server_is_killed_arrive_after_restart_in_order(
    tmp_path: Path, processes: list[Any]
) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    allow = ("--webhook-allow", "127.0.0.1", "--webhook-allow-http")
    with receiving(port) as hook:
        hook.default = 503
        first = start_process(str(EXAMPLES / "echo"), store, tmp_path, *allow)
        processes.append(first)
        task_ids = []
        for n in range(3):
            answer = first.call(
                "SendMessage",
                {
                    "message": user_message(f"task {n}"),
                    "configuration": {"taskPushNotificationConfig": {"url": hook.url, "id": "c"}},
                },
            )
            task_ids.append(answer["result"]["task"]["id"])
        hook.wait_for(1, ok_only=False)  # deliveries are being attempted, and refused
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(PROCESS_TIMEOUT)
        with hook._cond:
            hook.default = 200
            hook.received.clear()
        second = start_process(str(EXAMPLES / "echo"), store, tmp_path, *allow)
        processes.append(second)
        received = hook.wait_for(9)
    by_task: dict[str, list[Received]] = {}
    for r in received:
        by_task.setdefault(task_of(r), []).append(r)
    assert sorted(by_task) == sorted(task_ids)
    for events in by_task.values():
        assert kinds(events) == ECHO_EVENTS


# -- key rotation, the guard at delivery time, the retry policy ---------------------------------------------


async def test_rotated_keys_stay_published_and_old_tokens_still_verify(tmp_path: Path, serve: Any) -> None:
    old, new = tmp_path / "old.pem", tmp_path / "new.pem"
    old_signer = WebhookSigner(load_or_create(old), issuer="https://agent.example")
    server = serve(echo_app(push=PushSettings(signing_key=[new, old])))
    async with httpx.AsyncClient() as http:
        jwks = (await http.get(server.url + "/.well-known/webhook-jwks.json")).json()
    assert len(jwks["keys"]) == 2 and new.exists()
    verifier = WebhookVerifier(jwks, issuer="https://agent.example", audience="https://me.example/hook")
    body = b'{"statusUpdate":{}}'
    token = old_signer.sign(body, audience="https://me.example/hook")
    claims = await verifier.verify(body, {HEADER: token})
    assert claims.issuer == "https://agent.example"
    [signing] = [k for k in jwks["keys"] if k["kid"] != old_signer.keys.current.kid]
    assert signing["kid"] == load_or_create(new).thumbprint()


async def test_a_name_that_resolves_to_a_refused_address_is_a_recorded_failure(tmp_path: Path) -> None:
    async def rebinding(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("127.0.0.1")]  # what an attacker's DNS answers at delivery time

    store = MemoryTaskStore()
    await store.open()
    key = generate_key(tmp_path / "key.pem")
    push = PushService(
        store,
        WebhookSigner(key, issuer="https://agent.example"),
        policy=WebhookPolicy(),
        settings=PushSettings(max_attempts=1),
        resolver=rebinding,
    )
    config = b'{"url":"https://hooks.example.com/a2a","taskId":"t"}'
    push.check(
        msgspec.json.decode(config, type=TaskPushNotificationConfig)
    )  # passes at set time: a public name
    task = make_task()
    await store.put_push_config(PushConfigRecord("", task.id, "c1", config), 10)
    write = write_task(task, version=1)
    await store.commit(msgspec.structs.replace(write, deliveries=(Outgoing("c1", b"{}"),)))
    await push.start()
    try:
        push.ready("", task.id, {"c1": "1.0"}, 1)
        await push.deliverer.idle()
        [failed] = await store.failed_deliveries()
        assert "resolves to a refused address" in failed.error and "loopback" in failed.error
        assert failed.attempts == 1 and push.deliverer.stats.failed == 1
    finally:
        await push.stop()
        await store.close()


def test_the_backoff_doubles_within_bounds_and_retry_after_can_only_lengthen_it() -> None:
    policy = DeliveryRetry(max_attempts=8, first_delay=1.0, max_delay=300.0)
    assert [policy.delay(n, None, lambda: 1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert [policy.delay(n, None, lambda: 0.0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]  # jitter: half
    assert policy.delay(20, None, lambda: 1.0) == 300.0
    assert policy.delay(1, 60.0, lambda: 1.0) == 60.0  # the receiver asked for longer
    assert policy.delay(3, 0.0, lambda: 1.0) == 4.0  # and never for shorter
    assert policy.delay(1, 10_000.0, lambda: 1.0) == 300.0  # at most max_delay
    assert _retry_after("120") == 120.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: now
    assert _retry_after("soon") is None and _retry_after(None) is None


# -- skillwire serve --------------------------------------------------------------------------------------


def _serve_args(*flags: str) -> list[str]:
    return ["serve", str(EXAMPLES / "echo"), "--store", "memory://", *flags]


def test_serve_offers_push_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse

    monkeypatch.delenv("SKILLWIRE_PUSH", raising=False)
    _, on = application(_parse(_serve_args()))
    assert on.push is not None and on.card.capabilities.push_notifications is True
    _, off = application(_parse(_serve_args("--no-push")))
    assert off.push is None and off.card.capabilities.push_notifications is False
    monkeypatch.setenv("SKILLWIRE_PUSH", "0")
    _, from_env = application(_parse(_serve_args()))
    assert from_env.push is None


def test_serve_push_signing_keys_survive_the_reload_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse
    from skillwire.cli.serve_options import as_env

    monkeypatch.delenv("SKILLWIRE_PUSH_SIGNING_KEY", raising=False)
    new, old = str(tmp_path / "new.pem"), str(tmp_path / "old.pem")
    args = _parse(_serve_args("--push-signing-key", new, "--push-signing-key", old))
    _, app = application(args)
    assert app.push is not None and app.push.settings.signing_key == [new, old]
    env = as_env(args)
    assert env["SKILLWIRE_PUSH_SIGNING_KEY"] == f"{new},{old}"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, again = application(_parse(["serve", "--store", "memory://"]))
    assert again.push is not None and again.push.settings.signing_key == [new, old]


def test_the_generated_key_is_kept_beside_the_store_and_reused(tmp_path: Path, serve: Any) -> None:
    store = f"sqlite:///{tmp_path / 'agent.db'}"
    first = serve(example_agent("echo").asgi(store=store, webhook_policy=LOCAL))
    kid = httpx.get(first.url + "/.well-known/webhook-jwks.json").json()["keys"][0]["kid"]
    key = tmp_path / "agent.webhook-key.pem"
    assert key.exists() and key.stat().st_mode & 0o777 == 0o600
    first.stop()
    second = serve(example_agent("echo").asgi(store=store, webhook_policy=LOCAL))
    assert httpx.get(second.url + "/.well-known/webhook-jwks.json").json()["keys"][0]["kid"] == kid


# -- skillwire deliveries -----------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a store that keeps deliveries: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "postgres":
        async with postgres_schema() as url:
            yield url
    else:
        yield f"sqlite:///{tmp_path / 'tasks.db'}"


def deliveries(store: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """``skillwire deliveries STORE FLAGS...`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "skillwire", "deliveries", store, *flags],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )


def listed(store: str, *flags: str) -> str:
    done = deliveries(store, *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_operator_lists_failed_deliveries_while_the_server_runs(
    store_url: str, tmp_path: Path, processes: list[Any], hook: Hook
) -> None:
    hook.default = 410
    allow = ("--webhook-allow", "127.0.0.1", "--webhook-allow-http")
    served = start_process(str(EXAMPLES / "echo"), store_url, tmp_path, *allow)
    processes.append(served)
    answer = served.call(
        "SendMessage",
        {
            "message": user_message("hi"),
            "configuration": {"taskPushNotificationConfig": {"url": hook.url, "id": "c"}},
        },
    )
    task_id = answer["result"]["task"]["id"]
    hook.wait_for(3, ok_only=False)  # each refused with 410: failed at once

    lines = listed(store_url, "--json").splitlines()
    for _ in range(50):  # the last failure may still be being written (each ask takes a process start)
        if len(lines) >= 3:
            break
        lines = listed(store_url, "--json").splitlines()
    entries = [json.loads(line) for line in lines]
    assert [(e["taskId"], e["configId"], e["attempts"], e["error"]) for e in entries] == [
        (task_id, "c", 1, "HTTP 410")
    ] * 3
    text = listed(store_url)
    assert f"task {task_id}  config c" in text and "HTTP 410" in text
    assert served.proc.poll() is None  # read while the server owns the store
    assert listed(store_url, "--after", str(entries[-1]["seq"])) == "no failed deliveries\n"


async def test_the_operator_pages_through_failed_deliveries(store_url: str) -> None:
    store = open_store(store_url)
    assert isinstance(store, PushStore)
    await store.open()
    try:
        task = make_task()
        write = write_task(task, version=1, tenant="acme\x00alice")
        await store.commit(with_deliveries(write, b"1", b"2", b"3", ("c2", b"4"), b"pending"))
        made = await store.next_deliveries(("acme\x00alice", task.id, "c1"), 3)
        made += await store.next_deliveries(("acme\x00alice", task.id, "c2"), 1)
        for n, d in enumerate(made, 1):
            await store.fail_delivery(d.seq, n, f"HTTP 50{n}")
        seqs = [d.seq for d in made]
        # read while the store is open (SQLite: its owner lock held)
        first = [
            json.loads(line)
            for line in (await asyncio.to_thread(listed, store_url, "--json", "--limit", "2")).splitlines()
        ]
    finally:
        await store.close()
    when = datetime.fromtimestamp(made[0].created_us / 1_000_000, UTC).isoformat(timespec="seconds")
    assert first == [
        {
            "seq": seqs[n - 1],
            "tenant": "acme",
            "owner": "alice",
            "taskId": task.id,
            "configId": "c1",
            "attempts": n,
            "error": f"HTTP 50{n}",
            "created": when.replace("+00:00", "Z"),
        }
        for n in (1, 2)
    ]
    rest = listed(store_url, "--after", str(seqs[1]), "--limit", "2")
    assert rest == (
        f"{seqs[2]}  task {task.id}  config c1 tenant 'acme' owner alice  3 attempt(s)  {when}\n    HTTP 503\n"
        f"{seqs[3]}  task {task.id}  config c2 tenant 'acme' owner alice  4 attempt(s)  {when}\n    HTTP 504\n"
    )  # the pending one is not listed
    assert listed(store_url, "--after", str(seqs[3])) == "no failed deliveries\n"
    assert listed(store_url, "--after", str(seqs[3]), "--json") == ""
    for bad in (("--limit", "0"), ("--limit", "-1"), ("--after", "x"), ("--after", str(2**63))):
        done = deliveries(store_url, *bad)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


async def test_deliveries_from_postgres_neither_migrates_nor_takes_a_lease() -> None:
    import asyncpg

    async with postgres_schema() as url:
        schema = url.rpartition("schema=")[2]
        done = deliveries(url)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip() == f"skillwire: the PostgreSQL schema {schema!r} at {url} does not exist"
        conn = await asyncpg.connect(await postgres_dsn(), timeout=5)
        try:
            assert await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema) is None
            await conn.execute(f'CREATE SCHEMA "{schema}"')
            done = deliveries(url)
            assert done.returncode == 2 and "has no skillwire tables" in done.stderr, done.stderr
            assert (
                await conn.fetchval("SELECT COUNT(*) FROM pg_tables WHERE schemaname = $1", schema) == 0
            )  # still none: it did not migrate
            store = PostgresTaskStore(url)
            await store.open()
            await store.close()
            assert listed(url.replace("postgresql://", "postgres://", 1)) == "no failed deliveries\n"
            assert await conn.fetchval(f'SELECT COUNT(*) FROM "{schema}".skillwire_leases') == 0
        finally:
            await conn.close()


def test_deliveries_from_an_unreachable_postgres_is_a_clear_error() -> None:
    for scheme in ("postgresql", "postgres"):
        url = f"{scheme}://postgres@127.0.0.1:{free_port()}/test?schema=agents&timeout=2"
        done = deliveries(url)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"skillwire: cannot reach PostgreSQL at {url}: ")


def test_deliveries_from_postgres_without_asyncpg_says_how_to_install_it() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['asyncpg'] = None\n"
            "from skillwire.cli.main import main\n"
            "sys.exit(main(['deliveries', 'postgresql://127.0.0.1/test']))",
        ],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert install_command("postgres") in done.stderr  # the command for where skillwire runs from


def test_an_unreadable_signing_key_makes_the_key_set_unavailable_not_a_500(
    tmp_path: Path, serve: Any
) -> None:
    broken = tmp_path / "key.pem"
    broken.write_text("not a key\n")
    server = serve(echo_app(push=PushSettings(signing_key=broken)))
    answer = httpx.get(server.url + "/.well-known/webhook-jwks.json")
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert answer.json()["error"]["message"] == "The push signing keys are not available yet"
    card = httpx.get(server.url + "/.well-known/agent-card.json")
    assert card.status_code == 200  # the agent itself goes on


class _StoreOfAnOlderVersion:
    """A store of one's own written before ``PushStore.pending_by_partition``: every other method of a
    real memory store, that one missing."""

    def __init__(self) -> None:
        self._inner = MemoryTaskStore()

    def __getattr__(self, name: str) -> Any:
        if name == "pending_by_partition":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_with_part_of_push_says_push_is_off(caplog: pytest.LogCaptureFixture) -> None:
    store = _StoreOfAnOlderVersion()
    assert not isinstance(store, PushStore)
    with caplog.at_level("WARNING", logger="skillwire.push"):
        app = example_agent("echo").asgi(store=store)  # type: ignore[arg-type]
    assert app.push is None and app.card.capabilities.push_notifications is False
    warned = [r.getMessage() for r in caplog.records if r.name == "skillwire.push"]
    assert warned == [
        "push notifications are off: the store _StoreOfAnOlderVersion implements part of PushStore but not "
        "pending_by_partition"
    ]


def test_a_store_without_push_turns_it_off_quietly(caplog: pytest.LogCaptureFixture) -> None:
    class NoPush:
        def __init__(self) -> None:
            self._inner = MemoryTaskStore()

        def __getattr__(self, name: str) -> Any:
            if name in vars(PushStore):
                raise AttributeError(name)
            return getattr(self._inner, name)

    with caplog.at_level("WARNING", logger="skillwire.push"):
        app = example_agent("echo").asgi(store=NoPush())  # type: ignore[arg-type]
    assert app.push is None
    assert not [r for r in caplog.records if r.name == "skillwire.push"]
    with caplog.at_level("WARNING", logger="skillwire.push"):
        on = example_agent("echo").asgi(store=MemoryTaskStore())
    assert on.push is not None
    assert not [r for r in caplog.records if r.name == "skillwire.push"]
