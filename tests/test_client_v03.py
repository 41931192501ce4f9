"""The v0.3 client transports (skillwire.client.v03) through the full Client, against real v0.3 servers.

Two peers. skillwire's own server answers v0.3 to requests that carry ``A2A-Version: 0.3``, which these
transports send, on the same endpoints that serve v1.0 (JSON-RPC at the root, HTTP+JSON under ``/v1``).
And a real a2a-sdk 0.3 agent, ``tests/interop_v03/server.py``, run with the python of a virtualenv holding
``a2a-sdk[http-server]`` 0.3 and uvicorn (the venv of tests/test_interop_v03.py, built once and cached,
whose fixture and helpers it reuses); its card is a pure v0.3 card, which ``Client.connect``
reads through the v0.3 codec. Clients are made by hand (``Client(transport, card=..., interface=...)``)
from the card as ``card_from_v03`` reads it, except in the test of ``Client.connect`` itself. If PyPI cannot be reached the a2a-sdk tests skip, or fail when
``SKILLWIRE_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import asyncio
import queue
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from conftest import RunningServer, assert_proto, collect, example_agent
from sdk03 import client_env, tail
from skillwire import Agent, Client, RetryPolicy, TaskState
from skillwire.client import AgentConnectionError, JsonRpcTransport, RestTransport
from skillwire.client.client import select_interface
from skillwire.errors import (
    InternalError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol import models as m
from skillwire.security import APIKey, Security
from skillwire.wire import v03
from test_interop_v03 import tck_agent

S = TaskState
BINDINGS = ["JSONRPC", "HTTP+JSON"]
TRANSPORTS = {"JSONRPC": JsonRpcTransport, "HTTP+JSON": RestTransport}
WAIT = 15.0  # the cap on every wait in this module, in seconds
FAST = RetryPolicy(retries=2, base=0.0, cap=0.01)
NON_BLOCKING = m.SendMessageConfiguration(return_immediately=True)
SERVER = Path(__file__).resolve().parent / "interop_v03" / "server.py"


def msg(prefix: str, text: str = "hi") -> m.Message:
    return m.Message(message_id=f"{prefix}-{uuid.uuid4()}", role=m.Role.USER, parts=[m.Part(text=text)])


def kinds(events: list[m.StreamResponse]) -> list[str]:
    out = []
    for e in events:
        if e.task is not None:
            out.append(f"task:{e.task.status.state.name}")
        elif e.message is not None:
            out.append("message")
        elif e.status_update is not None:
            out.append(f"status:{e.status_update.status.state.name}")
        else:
            assert e.artifact_update is not None
            out.append("artifact")
    return out


def texts(parts: list[m.Part]) -> list[str]:
    return [p.text for p in parts if isinstance(p.text, str)]


@pytest.fixture(params=BINDINGS)
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def v03_client(base_url: str, binding: str, http: httpx.AsyncClient) -> Client:
    """A Client over the card's v0.3 interface for ``binding``, made by hand (Client(transport, ...))."""
    response = await http.get(base_url + "/.well-known/agent-card.json")
    raw = response.json()
    assert v03.is_v03_card(raw)
    card = v03.card_from_v03(raw)
    interface = select_interface(card, [binding], ["0.3"])
    transport = TRANSPORTS[binding](interface.url, http, version="0.3", timeout=httpx.Timeout(WAIT))
    return Client(transport, card=card, interface=interface, retry=FAST)


# -- against skillwire's own server, in v0.3 -------------------------------------------------------------


@pytest.fixture
def ours(serve: Callable[[Any], RunningServer]) -> RunningServer:
    return serve(tck_agent().asgi(store="memory://"))


@pytest.fixture
async def client(ours: RunningServer, binding: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        yield await v03_client(ours.url, binding, http)


async def test_our_card_offers_v03_interfaces_beside_v10(ours: RunningServer) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = v03.card_from_v03((await http.get(ours.url + "/.well-known/agent-card.json")).json())
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "0.3"),
    ]
    assert {i.url.rstrip("/") for i in card.supported_interfaces} == {ours.url}
    assert_proto(m.to_builtins(card), "AgentCard")


async def test_send_blocking_returns_the_completed_task(client: Client) -> None:
    task = await client.send(msg("tck-complete-task"))
    assert isinstance(task, m.Task) and task.status.state is S.COMPLETED
    assert task.status.message is not None and task.status.message.text() == "Hello from TCK"
    assert task.history[0].role is m.Role.USER


async def test_send_returns_a_direct_message(client: Client) -> None:
    reply = await client.send("tck-message-response")
    assert isinstance(reply, m.Message) and reply.role is m.Role.AGENT
    assert reply.text() == "Direct message response"


async def test_send_returns_data_artifact_and_get_honours_history_length(client: Client) -> None:
    sent = await client.send(msg("tck-artifact-data"))
    assert isinstance(sent, m.Task)
    assert sent.artifacts[0].parts[0].data == {"key": "value", "count": 42}
    full = await client.get_task(sent.id)
    assert full.id == sent.id and len(full.history) >= 1
    one = await client.get_task(sent.id, history_length=1)
    assert one.history == full.history[-1:]
    none = await client.get_task(sent.id, history_length=0)  # v0.3 cannot say it: the transport trims
    assert none.history == [] and none.artifacts == full.artifacts


async def test_non_blocking_send_then_cancel(client: Client) -> None:
    task = await client.send(msg("tck-long-running"), configuration=NON_BLOCKING)
    assert isinstance(task, m.Task) and task.status.state in (S.SUBMITTED, S.WORKING)
    canceled = await client.cancel_task(task.id)
    assert canceled.id == task.id and canceled.status.state is S.CANCELED
    assert (await client.get_task(task.id)).status.state is S.CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(task.id)


async def test_stream_delivers_every_event_in_order(client: Client) -> None:
    events = await collect(client.stream(msg("tck-stream-001")))
    assert kinds(events) == ["task:SUBMITTED", "status:WORKING", "artifact", "status:COMPLETED"]
    task = events[0].task
    assert task is not None
    for event in events[1:]:
        update = event.status_update or event.artifact_update
        assert update is not None and (update.task_id, update.context_id) == (task.id, task.context_id)
    artifact = events[2].artifact_update
    assert artifact is not None and texts(artifact.artifact.parts) == ["Stream hello from TCK"]


async def test_stream_keeps_chunk_flags(client: Client) -> None:
    events = await collect(client.stream(msg("tck-stream-chunked")))
    chunks = [e.artifact_update for e in events if e.artifact_update is not None]
    assert [(texts(c.artifact.parts), c.append, c.last_chunk) for c in chunks] == [
        (["chunk-1 "], False, False),
        (["chunk-2"], True, True),
    ]
    assert kinds(events)[-1] == "status:COMPLETED"


async def test_stream_of_a_direct_message(client: Client) -> None:
    events = await collect(client.stream(msg("tck-message-response")))
    assert kinds(events) == ["message"]


async def test_subscribe_then_cancel_ends_the_stream(client: Client) -> None:
    task = await client.send(msg("tck-long-running"), configuration=NON_BLOCKING)
    assert isinstance(task, m.Task)
    events: list[m.StreamResponse] = []
    first = asyncio.Event()

    async def follow() -> None:
        async for event in client.subscribe(task.id):
            events.append(event)
            first.set()

    async with asyncio.timeout(WAIT):
        follower = asyncio.create_task(follow())
        await first.wait()  # the snapshot: the subscription is live
        await client.cancel_task(task.id)
        await follower
    assert events[0].task is not None and events[0].task.id == task.id
    assert kinds(events)[-1] == "status:CANCELED"


async def test_unknown_task_is_task_not_found(client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await collect(client.subscribe("no-such-task", resume=False))


async def test_every_request_says_a2a_version_0_3(ours: RunningServer, binding: str) -> None:
    seen: list[tuple[str, str | None]] = []

    async def record(request: httpx.Request) -> None:
        seen.append((request.url.path, request.headers.get("a2a-version")))

    async with httpx.AsyncClient(timeout=WAIT, event_hooks={"request": [record]}) as http:
        client = await v03_client(ours.url, binding, http)
        task = await client.send(msg("tck-complete-task"))
        assert isinstance(task, m.Task)
        await client.get_task(task.id)
        await collect(client.stream(msg("tck-stream-001")))
    card, *calls = seen
    assert card == ("/.well-known/agent-card.json", None)
    assert len(calls) == 3 and {version for _, version in calls} == {"0.3"}
    paths = [path for path, _ in calls]
    if binding == "JSONRPC":
        assert paths == ["/", "/", "/"]
    else:
        assert paths == ["/v1/message:send", f"/v1/tasks/{task.id}", "/v1/message:stream"]


async def test_list_tasks_is_refused_before_anything_is_sent(client: Client) -> None:
    with pytest.raises(UnsupportedOperationError, match=r"v0\.3"):
        await client.list_tasks()


async def test_push_configs_round_trip_in_v03(client: Client) -> None:
    task = await client.send(msg("tck-complete-task"))
    assert isinstance(task, m.Task)
    created = await client.create_push_config(task.id, "https://hook.example/", token="t")
    assert created.id == task.id  # the v0.3 convention: a config set without an id is the task's
    got = await client.get_push_config(task.id, created.id)
    assert got.url == "https://hook.example/" and got.token == "t"
    assert [c.url for c in (await client.list_push_configs(task.id)).configs] == ["https://hook.example/"]
    await client.delete_push_config(task.id, created.id)
    with pytest.raises(TaskNotFoundError):
        await client.get_push_config(task.id, created.id)


async def test_push_configs_are_refused_by_an_agent_without_them(
    serve: Callable[[Any], RunningServer], binding: str
) -> None:
    srv = serve(tck_agent().asgi(store="memory://", push=False))
    async with httpx.AsyncClient(timeout=WAIT) as http:
        client = await v03_client(srv.url, binding, http)
        task = await client.send(msg("tck-complete-task"))
        assert isinstance(task, m.Task)
        await _refused_push_calls(client, task)


async def _refused_push_calls(client: Client, task: m.Task) -> None:
    calls = [
        client.create_push_config(task.id, "https://hook.example/", token="t"),
        client.get_push_config(task.id, "p1"),
        client.list_push_configs(task.id),
        client.delete_push_config(task.id, "p1"),
    ]
    for call in calls:
        with pytest.raises(PushNotificationNotSupportedError):
            await call


async def test_extended_card(serve: Callable[[Any], RunningServer], binding: str) -> None:
    agent = example_agent("greeter")
    # Built without interfaces, as Agent.card() makes it: the server lists the public card's.
    extended = msgspec.structs.replace(agent.card(), name="Greeter (extended)")
    with_card = Agent(
        agent.name,
        agent.description,
        registry=agent.registry,
        extended_card=extended,
        provider=agent.provider,
        security=Security(APIKey(keys={"v03": "v03-extended-key"})),  # an extended card needs one
    )
    srv = serve(with_card.asgi(store="memory://"))
    async with httpx.AsyncClient(timeout=WAIT, headers={"X-API-Key": "v03-extended-key"}) as http:
        client = await v03_client(srv.url, binding, http)
        assert client.card.capabilities.extended_agent_card is True
        card = await client.get_extended_card()
        reply = await client.send('{"name": "Ada", "style": "formal"}')
    assert card.name == "Greeter (extended)"
    assert [s.id for s in card.skills] == [s.id for s in extended.skills]
    assert card.supported_interfaces[0].url.rstrip("/") == srv.url
    assert card.supported_interfaces[0].protocol_version.startswith("0.3")
    assert isinstance(reply, m.Task) and reply.status.state is S.COMPLETED


# -- against a real a2a-sdk 0.3 agent ----------------------------------------------------------------------


@dataclass
class Peer:
    url: str
    process: subprocess.Popen[str]


@pytest.fixture(scope="module")
def peer(sdk03_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    """tests/interop_v03/server.py, serving on a free port until the module's tests are done."""
    log_path = tmp_path_factory.mktemp("sdk03-server") / "stderr.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(sdk03_python), str(SERVER), "0"],
            stdout=subprocess.PIPE,
            stderr=log,  # a file, not a pipe nobody reads: the server's warnings never block it
            text=True,
            env=client_env(),
        )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: lines.put(process.stdout.readline() if process.stdout else ""))
    reader.start()
    try:
        try:
            ready = lines.get(timeout=60)
        except queue.Empty:
            ready = ""
        if not ready.startswith("READY "):
            pytest.fail(f"the a2a-sdk 0.3 server did not start:\n{tail(log_path.read_text(), 40)}")
        yield Peer(f"http://127.0.0.1:{int(ready.split()[1])}", process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=WAIT)
        reader.join(WAIT)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
async def sdk(peer: Peer, binding: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        yield await v03_client(peer.url, binding, http)


async def test_sdk_card_reads_as_a_v10_card(peer: Peer) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        raw = (await http.get(peer.url + "/.well-known/agent-card.json")).json()
    assert v03.is_v03_card(raw) and raw["protocolVersion"] == "0.3.0"
    card = v03.card_from_v03(raw)
    assert_proto(m.to_builtins(card), "AgentCard")
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (peer.url, "JSONRPC", "0.3"),
        (peer.url, "HTTP+JSON", "0.3"),
    ]
    assert card.capabilities == m.AgentCapabilities(
        streaming=True, push_notifications=True, extended_agent_card=True
    )
    assert card.security_schemes == {
        "bearer": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}},
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
    }
    assert card.security_requirements == [m.SecurityRequirement(schemes={"bearer": m.StringList()})]
    assert [s.id for s in card.skills] == ["echo"]
    assert (card.name, card.version, card.default_input_modes) == (
        "a2a-sdk 0.3 echo",
        "0.3.26",
        ["text/plain"],
    )


async def test_sdk_send_get_and_direct_message(sdk: Client) -> None:
    task = await sdk.send("hello there")
    assert isinstance(task, m.Task) and task.status.state is S.COMPLETED
    assert task.status.message is not None and task.status.message.text() == "done"
    assert [(a.artifact_id, texts(a.parts)) for a in task.artifacts] == [("echo", ["echo: hello there"])]
    got = await sdk.get_task(task.id, history_length=1)
    assert got.id == task.id and got.status.state is S.COMPLETED and len(got.history) == 1
    reply = await sdk.send("message for you")
    assert isinstance(reply, m.Message) and reply.text() == "echo: message for you"


async def test_sdk_stream_with_chunks(sdk: Client) -> None:
    events = await collect(sdk.stream("stream please"))
    assert kinds(events) == [
        "task:SUBMITTED",
        "status:WORKING",
        "artifact",
        "artifact",
        "artifact",
        "status:COMPLETED",
    ]
    chunks = [e.artifact_update for e in events if e.artifact_update is not None]
    assert [(texts(c.artifact.parts), c.append, c.last_chunk) for c in chunks] == [
        (["chunk-1"], False, False),
        (["chunk-2"], True, False),
        (["chunk-3"], True, True),
    ]
    task = events[0].task
    assert task is not None
    stored = await sdk.get_task(task.id)
    assert stored.status.state is S.COMPLETED
    assert [texts(a.parts) for a in stored.artifacts] == [["chunk-1", "chunk-2", "chunk-3"]]


async def test_sdk_cancel(sdk: Client) -> None:
    task = await sdk.send("long job", configuration=NON_BLOCKING)
    assert isinstance(task, m.Task) and task.status.state in (S.SUBMITTED, S.WORKING)
    canceled = await sdk.cancel_task(task.id)
    assert canceled.id == task.id and canceled.status.state is S.CANCELED
    assert (await sdk.get_task(task.id)).status.state is S.CANCELED
    with pytest.raises(TaskNotCancelableError):
        await sdk.cancel_task(task.id)


async def test_sdk_subscribe_sees_updates_until_the_server_ends_the_stream(sdk: Client) -> None:
    task = await sdk.send("tick", configuration=NON_BLOCKING)
    assert isinstance(task, m.Task)
    events: list[m.StreamResponse] = []
    live = asyncio.Event()

    async def follow() -> None:
        async for event in sdk.subscribe(task.id, resume=False):
            events.append(event)
            if event.artifact_update is not None:
                live.set()

    async with asyncio.timeout(WAIT):
        follower = asyncio.create_task(follow())
        await live.wait()  # a tick arrived: the subscription is live
        await sdk.cancel_task(task.id)
        await follower  # a2a-sdk 0.3 ends the stream when the canceled task's producer stops
    ticks = [e.artifact_update for e in events if e.artifact_update is not None]
    assert ticks and all(t.task_id == task.id and t.artifact.artifact_id == "ticks" for t in ticks)
    assert (await sdk.get_task(task.id)).status.state is S.CANCELED


async def test_sdk_push_configs(sdk: Client, binding: str) -> None:
    task = await sdk.send("input needed")
    assert isinstance(task, m.Task) and task.status.state is S.INPUT_REQUIRED
    created = await sdk.create_push_config(task.id, "https://hook.example/a2a", id="p1", token="tok")
    expected = m.TaskPushNotificationConfig(
        id="p1", task_id=task.id, url="https://hook.example/a2a", token="tok"
    )
    assert created == expected
    assert await sdk.get_push_config(task.id, "p1") == expected
    if binding == "JSONRPC":
        listed = await sdk.list_push_configs(task.id)
        assert listed.configs == [expected]
        await sdk.delete_push_config(task.id, "p1")
        assert (await sdk.list_push_configs(task.id)).configs == []
    else:
        # a2a-sdk 0.3's REST binding leaves list unimplemented (HTTP 500) and has no delete route
        with pytest.raises(InternalError):
            await sdk.list_push_configs(task.id)
        with pytest.raises(MethodNotFoundError):
            await sdk.delete_push_config(task.id, "p1")


async def test_sdk_extended_card(sdk: Client) -> None:
    card = await sdk.get_extended_card()
    assert [s.id for s in card.skills] == ["echo", "secret"]
    assert {i.protocol_version for i in card.supported_interfaces} == {"0.3"}


async def test_sdk_unknown_task_and_list_tasks(sdk: Client, binding: str) -> None:
    with pytest.raises(TaskNotFoundError):
        await sdk.get_task("no-such-task")
    with pytest.raises(TaskNotFoundError):
        await sdk.cancel_task("no-such-task")
    with pytest.raises(UnsupportedOperationError):
        await sdk.list_tasks()
    if binding == "JSONRPC":
        with pytest.raises(TaskNotFoundError):
            await collect(sdk.subscribe("no-such-task", resume=False))
    else:
        # a2a-sdk 0.3's REST binding raises inside its SSE response: the connection just drops
        with pytest.raises(AgentConnectionError):
            await collect(sdk.subscribe("no-such-task", resume=False))


async def test_sdk_client_connect_reads_the_v03_card(peer: Peer, binding: str) -> None:
    """Client.connect restricted to v0.3 and one binding: the pure v0.3 card is read through the codec."""
    async with await Client.connect(peer.url, bindings=(binding,), versions=("0.3",), timeout=WAIT) as c:
        assert c.interface is not None
        assert (c.interface.url, c.interface.protocol_binding, c.interface.protocol_version) == (
            peer.url,
            binding,
            "0.3",
        )
        assert c.card.capabilities.extended_agent_card is True
        task = await c.send("connected")
        events = await collect(c.stream("stream connected"))
    assert isinstance(task, m.Task) and task.status.state is S.COMPLETED
    assert kinds(events)[-1] == "status:COMPLETED"
