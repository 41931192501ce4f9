"""``agent.asgi()`` mounted in another application (issue 11): FastAPI's ``app.mount`` and Starlette's
``Mount``, under ``/a2a`` and at ``/``, on a real uvicorn port.

Mounted, the app honours ASGI ``root_path`` (the card and every binding are served under the prefix, the
card's URLs point there, tenants are read after it), and it starts itself on its first request, since a
mounted app gets no lifespan events; ``A2AApplication.lifespan`` gives the parent a clean shutdown. Each
test is called by skillwire's own client and by the official a2a-sdk client over JSON-RPC and HTTP+JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

import serving
from conftest import A2A_V1, collect, example_agent, rpc, state_of, user_message
from serving import Running
from skillwire import Client, Task, TaskState
from skillwire.server.app import A2AApplication

WAIT = 10.0  # the cap on every wait in this module, in seconds
HTTP_BINDINGS = ["JSONRPC", "HTTP+JSON"]


@contextlib.contextmanager
def run(app: Any, a2a: A2AApplication, *, must_start: bool = True) -> Iterator[Running]:
    """Any ASGI ``app`` (that mounts ``a2a``) under a real uvicorn in a thread, lifespan on (the parent's
    own, if it has one); the agent is shut down with the server, as ``skillwire serve`` does: a mounted app
    whose parent has no lifespan for it is shut down by nothing else (its SQLite file would stay open)."""
    with serving.running(
        app,
        name="mounted",
        must_start=must_start,
        on_shutdown=a2a.shutdown,
        lifespan="on",
        log_level="critical",
        timeout_graceful_shutdown=5,
        timeout=WAIT,
    ) as server:
        yield server


def _health(request: Any) -> PlainTextResponse:
    return PlainTextResponse("ok")


def fastapi_app(a2a: A2AApplication, prefix: str, *, lifespan: bool = False) -> FastAPI:
    api = FastAPI(lifespan=a2a.lifespan) if lifespan else FastAPI()

    @api.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    api.mount(prefix, a2a)
    return api


def starlette_app(a2a: A2AApplication, prefix: str) -> Starlette:
    return Starlette(routes=[Route("/health", _health), Mount(prefix, app=a2a)])


def stripped_mount(a2a: A2AApplication, prefix: str) -> Callable[..., Any]:
    """A parent that mounts the way Starlette did before 0.33: ``root_path`` set, ``path`` without it, and
    ``raw_path`` as sent (with it)."""

    async def parent(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(prefix + "/"):
            scope = {**scope, "root_path": prefix, "path": scope["path"][len(prefix) :]}
        elif scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await a2a(scope, receive, send)

    return parent


#: (name, prefix, how the parent is made): FastAPI without a lifespan for the agent (it starts on first use)
#: and with one, Starlette's Mount, the pre-0.33 Mount, and FastAPI at "/".
MOUNTS: list[tuple[str, str, Callable[[A2AApplication, str], Any]]] = [
    ("fastapi", "/a2a", fastapi_app),
    ("fastapi-lifespan", "/a2a", lambda a2a, prefix: fastapi_app(a2a, prefix, lifespan=True)),
    ("starlette", "/a2a", starlette_app),
    ("stripped-path", "/a2a", stripped_mount),
    ("fastapi-root", "/", fastapi_app),
]


@pytest.fixture(params=MOUNTS, ids=[m[0] for m in MOUNTS])
def mounted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of the echo agent (SQLite store) mounted in a parent app on a real server."""
    _, prefix, make = request.param
    a2a = example_agent("echo").asgi(store=f"sqlite:///{tmp_path}/tasks.db")
    with run(make(a2a, prefix), a2a) as server:
        yield server.url + prefix.rstrip("/")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


# -- the card and the paths --------------------------------------------------------------------------------


async def test_card_is_served_under_the_prefix_and_points_there(
    mounted: str, http: httpx.AsyncClient
) -> None:
    response = await http.get(mounted + "/.well-known/agent-card.json")
    assert response.status_code == 200, response.text
    interfaces = [(i["protocolBinding"], i["url"]) for i in response.json()["supportedInterfaces"]]
    # JSON-RPC below a prefix ends with "/": a POST to "/a2a" itself would be redirected by the parent.
    jsonrpc = mounted + "/" if mounted.endswith("/a2a") else mounted
    assert interfaces == [("JSONRPC", jsonrpc), ("HTTP+JSON", mounted)]


@pytest.mark.parametrize("make", [fastapi_app, starlette_app], ids=["fastapi", "starlette"])
async def test_the_parents_own_routes_still_answer(
    make: Callable[[A2AApplication, str], Any], tmp_path: Path, http: httpx.AsyncClient
) -> None:
    a2a = example_agent("echo").asgi(store=f"sqlite:///{tmp_path}/tasks.db")
    with run(make(a2a, "/a2a"), a2a) as server:
        origin = server.url
        assert (await http.get(origin + "/health")).status_code == 200
        assert (await http.get(origin + "/.well-known/agent-card.json")).status_code == 404
        assert (await http.get(origin + "/a2a/.well-known/agent-card.json")).status_code == 200


async def test_tenants_are_read_after_the_prefix(mounted: str, http: httpx.AsyncClient) -> None:
    async def send(tenant: str) -> str:
        path = f"/{tenant}/message:send" if tenant else "/message:send"
        response = await http.post(mounted + path, json={"message": user_message("hi")}, headers=A2A_V1)
        assert response.status_code == 200, response.text
        return str(response.json()["task"]["id"])

    untenanted, acme = await send(""), await send("acme")
    for tenant, task_id, other in (("", untenanted, "acme"), ("acme", acme, "")):
        mine = f"{mounted}/{tenant}/tasks/{task_id}" if tenant else f"{mounted}/tasks/{task_id}"
        theirs = f"{mounted}/{other}/tasks/{task_id}" if other else f"{mounted}/tasks/{task_id}"
        assert (await http.get(mine, headers=A2A_V1)).status_code == 200
        assert (await http.get(theirs, headers=A2A_V1)).status_code == 404


async def test_jsonrpc_answers_at_the_prefix(mounted: str, http: httpx.AsyncClient) -> None:
    body = rpc("SendMessage", {"message": user_message("over json-rpc")})
    response = await http.post(mounted + "/", json=body, headers=A2A_V1)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- skillwire's client --------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", HTTP_BINDINGS)
async def test_skillwire_client_streams_sends_and_lists(mounted: str, binding: str) -> None:
    async with asyncio.timeout(WAIT):
        client = await Client.connect(mounted, bindings=(binding,))
        async with client:
            assert client.interface.protocol_binding == binding  # type: ignore[union-attr]
            # The first call is a stream, on an app whose lifespan may never have run: it must be served.
            events = await collect(client.stream("stream 3"))
            assert state_of(events[-1]) is TaskState.COMPLETED
            task = await client.send("hello")
            assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
            listed = await client.list_tasks()
    assert task.id in {t.id for t in listed.tasks}
    assert len(listed.tasks) == 2


# -- the official a2a-sdk client ---------------------------------------------------------------------------


@pytest.mark.parametrize("binding", HTTP_BINDINGS)
async def test_a2a_sdk_client_sends_and_streams(mounted: str, binding: str, http: httpx.AsyncClient) -> None:
    async with asyncio.timeout(WAIT):
        card = await A2ACardResolver(http, mounted).get_agent_card()

        def client(streaming: bool) -> Any:
            config = ClientConfig(
                httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
            )
            return ClientFactory(config).create(card)

        request = pb.SendMessageRequest(
            message=pb.Message(message_id="m-1", role=pb.ROLE_USER, parts=[pb.Part(text="stream 2")])
        )
        streaming, blocking = client(True), client(False)
        try:
            async with aclosing(streaming.send_message(request)) as events:
                streamed = [event async for event in events]
            request.message.message_id = "m-2"
            request.message.parts[0].text = "hello sdk"
            async with aclosing(blocking.send_message(request)) as answers:
                (answer,) = [event async for event in answers]
        finally:
            await streaming.close()
            await blocking.close()
    last = streamed[-1]
    final = last.task.status.state if last.HasField("task") else last.status_update.status.state
    assert final == pb.TASK_STATE_COMPLETED
    assert answer.task.status.state == pb.TASK_STATE_COMPLETED
    assert answer.task.artifacts[0].parts[0].text == "hello sdk"


# -- start-up on first use, and when it fails --------------------------------------------------------------


def unopenable_store(tmp_path: Path) -> str:
    """A SQLite URL whose directory cannot be made: its parent is a file (unwritable even as root)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    return f"sqlite:///{blocker}/tasks.db"


async def test_store_that_cannot_open_answers_an_error_at_once(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    a2a = example_agent("echo").asgi(store=unopenable_store(tmp_path))
    with run(fastapi_app(a2a, "/a2a"), a2a) as server:
        url = server.url + "/a2a"
        async with asyncio.timeout(WAIT):
            card = await http.get(url + "/.well-known/agent-card.json")
            assert card.status_code == 503
            assert card.json()["error"]["status"] == "UNAVAILABLE"
            assert "could not start" in card.json()["error"]["message"]

            for method in ("SendStreamingMessage", "ListTasks", "SendMessage"):
                params = {} if method == "ListTasks" else {"message": user_message("hi")}
                answer = await http.post(url + "/", json=rpc(method, params, request_id=7), headers=A2A_V1)
                assert answer.status_code == 503, answer.text
                error = answer.json()["error"]
                assert answer.json()["id"] == 7
                assert error["code"] == -32603
                assert (
                    "could not start" in error["message"]
                    and "cannot open the SQLite store" in error["message"]
                )

            rest = await http.post(
                url + "/message:stream", json={"message": user_message("hi")}, headers=A2A_V1
            )
            assert rest.status_code == 503
            assert rest.json()["error"]["status"] == "UNAVAILABLE"
            assert rest.headers["retry-after"] == "1"
            assert (await http.get(url + "/tasks", headers=A2A_V1)).status_code == 503
    assert a2a.startup_error is not None


async def test_a_failed_start_is_tried_again_once_the_store_can_open(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    blocker = tmp_path / "later"
    blocker.write_text("")
    a2a = example_agent("echo").asgi(store=f"sqlite:///{blocker}/tasks.db")
    api = fastapi_app(a2a, "/a2a")

    @api.get("/ready")
    async def ready() -> PlainTextResponse:  # a readiness probe: start-up asked for by hand is tried at once
        try:
            await a2a.startup()
        except Exception as exc:
            return PlainTextResponse(str(exc), status_code=503)
        return PlainTextResponse("ready")

    with run(api, a2a) as server:
        base = server.url
        card = base + "/a2a/.well-known/agent-card.json"
        async with asyncio.timeout(WAIT):
            assert (await http.get(card)).status_code == 503
            assert (await http.get(base + "/ready")).status_code == 503
            blocker.unlink()
            blocker.mkdir()
            assert (await http.get(base + "/ready")).text == "ready"
            assert (await http.get(card)).status_code == 200
            client = await Client.connect(base + "/a2a")
            async with client:
                assert (await client.send("at last")).status.state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert a2a.startup_error is None


async def test_parent_lifespan_with_a_store_that_cannot_open_fails_the_start(tmp_path: Path) -> None:
    a2a = example_agent("echo").asgi(store=unopenable_store(tmp_path))
    with run(fastapi_app(a2a, "/a2a", lifespan=True), a2a, must_start=False) as server:
        assert not server.started
    assert "cannot open the SQLite store" in str(a2a.startup_error)


async def test_lifespan_composes_with_the_parents_own(tmp_path: Path, http: httpx.AsyncClient) -> None:
    a2a = example_agent("echo").asgi(store=f"sqlite:///{tmp_path}/tasks.db")
    seen: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with a2a.lifespan(app):
            seen.append("started")
            yield
        seen.append("stopped")

    api = FastAPI(lifespan=lifespan)
    api.mount("/a2a", a2a)
    with run(api, a2a) as server:
        assert seen == ["started"]
        async with asyncio.timeout(WAIT):
            client = await Client.connect(server.url + "/a2a")
            async with client:
                task = await client.send("composed")
        assert task.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert seen == ["started", "stopped"]


async def test_startup_and_shutdown_may_be_awaited_by_hand(tmp_path: Path, http: httpx.AsyncClient) -> None:
    a2a = example_agent("echo").asgi(store=f"sqlite:///{tmp_path}/tasks.db")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await a2a.startup()
        await a2a.startup()  # once only, however often it is asked
        yield
        await a2a.shutdown()

    with run(Starlette(routes=[Mount("/agents/echo", app=a2a)], lifespan=lifespan), a2a) as server:
        async with asyncio.timeout(WAIT):
            client = await Client.connect(server.url + "/agents/echo", bindings=("HTTP+JSON",))
            async with client:
                assert (await client.list_tasks()).tasks == []


# -- the documented example ----------------------------------------------------------------------------------


async def test_docs_mounting_example_serves_under_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (Path(__file__).parent.parent / "docs" / "mounting.md").read_text(encoding="utf-8")
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)  # its store is a relative path
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/mounting.md", "exec"), namespace)
    with run(namespace["api"], namespace["a2a"]) as server:
        async with asyncio.timeout(WAIT):
            client = await Client.connect(server.url + "/a2a")
            async with client:
                task = await client.send("hello")
    assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
    assert task.artifacts[0].parts[0].text == "hello"
