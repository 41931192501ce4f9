"""The client's helpers against real servers: the sync facade, credentials from the card's security schemes,
polling with backoff, input-required conversations, Retry-After dates and requested extensions."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import msgspec
import pytest

from conftest import RecordingHandler, RunningServer, example_agent
from skillwire import (
    Agent,
    Client,
    RequestContext,
    RetryPolicy,
    SyncClient,
    TaskEvents,
    TaskFailedError,
    TaskState,
)
from skillwire.client import Credentials, JsonRpcTransport, NoCompatibleInterfaceError, RestTransport
from skillwire.client.auth import CardAuth, credential_headers
from skillwire.client.client import select_interface
from skillwire.client.retry import parse_retry_after
from skillwire.errors import TaskNotFoundError
from skillwire.protocol import models as m
from skillwire.types import AgentExtension, Operation
from skillwire.wire.generations import GENERATIONS_URI

BINDINGS = ["JSONRPC", "HTTP+JSON"]
WAIT = 10.0
FAST = RetryPolicy(retries=3, base=0.0, cap=0.01)


def msg(prefix: str, text: str = "hi") -> m.Message:
    return m.Message(message_id=f"{prefix}-{uuid.uuid4()}", role=m.Role.USER, parts=[m.Part(text=text)])


@pytest.fixture
def tck(serve: Any) -> RunningServer:
    return serve(example_agent("tck").asgi(store="memory://"))  # type: ignore[no-any-return]


# -- the sync facade ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
def test_sync_client_runs_every_kind_of_call(tck: RunningServer, binding: str) -> None:
    with SyncClient.connect(tck.url, bindings=(binding,), timeout=WAIT) as client:
        assert client.card.name and client.aclient.interface is not None
        assert client.aclient.interface.protocol_binding == binding
        task = client.send(msg("tck-complete-task"))
        assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
        assert client.get_task(task.id).id == task.id
        assert task.id in [t.id for t in client.list_tasks().tasks]
        events = list(client.stream(msg("tck-stream-task")))
        assert events[0].task is not None
        assert events[-1].status_update is not None
        assert events[-1].status_update.status.state is TaskState.COMPLETED
        with pytest.raises(TaskNotFoundError):
            client.get_task("no-such-task")
        assert client.refresh_card().name == client.card.name


def test_sync_stream_left_early_is_closed_and_the_client_goes_on(tck: RunningServer) -> None:
    with SyncClient.connect(tck.url, timeout=WAIT) as client:
        stream = client.stream(msg("tck-stream-task"))
        first = next(stream)
        assert first.task is not None
        stream.close()  # what leaving a for loop early does
        assert client.get_task(first.task.id).id == first.task.id


def test_sync_client_works_inside_a_running_event_loop(tck: RunningServer) -> None:
    async def notebook_cell() -> m.Task | m.Message:
        # A script in a notebook calls the blocking client while the notebook's own loop runs.
        with SyncClient.connect(tck.url, timeout=WAIT) as client:
            return client.send(msg("tck-complete-task"))

    result = asyncio.run(notebook_cell())
    assert isinstance(result, m.Task) and result.status.state is TaskState.COMPLETED


def test_sync_connect_failure_raises_and_leaves_no_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(Exception) as caught:
        SyncClient.connect("http://127.0.0.1:9", retries=0, timeout=2.0)
    assert type(caught.value).__name__ == "AgentConnectionError"
    assert "skillwire-sync" not in {t.name for t in threading.enumerate()} - before


# -- polling and conversations -----------------------------------------------------------------------------


def slow_agent(gate: threading.Event) -> Agent:
    async def run(context: RequestContext, events: TaskEvents) -> None:
        await events.working("started")
        await asyncio.to_thread(gate.wait, WAIT)
        await events.complete("finished")

    return Agent("slow", "Works until the test lets it finish.", executor=run)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_wait_polls_an_agent_without_generations_until_the_task_ends(
    serve: Any, gate: threading.Event, binding: str
) -> None:
    srv = serve(slow_agent(gate).asgi(store="memory://"))
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
        client.generations = False  # as with an agent that does not keep them
        polls = 0
        original = client.get_task

        async def counting_get_task(id: str, history_length: int | None = None, **kw: Any) -> m.Task:
            nonlocal polls
            polls += 1
            assert kw.get("current_generation") is None
            if polls == 3:
                gate.set()  # let the task finish once the client has polled a few times
            return await original(id, history_length, **kw)

        client.get_task = counting_get_task  # type: ignore[method-assign]
        config = m.SendMessageConfiguration(return_immediately=True)
        task = await client.send("go", configuration=config)
        assert isinstance(task, m.Task) and task.status.state is not TaskState.COMPLETED
        done = await client.wait(task.id, timeout=WAIT, interval=0.01, max_interval=0.05)
        assert done.status.state is TaskState.COMPLETED and polls >= 3


def held_until(condition: Any) -> None:
    """Wait (in a thread: ``condition`` reads the server's state) until ``condition()`` holds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_wait_long_polls_an_agent_with_generations_one_request_per_change(
    serve: Any, gate: threading.Event, binding: str
) -> None:
    app = slow_agent(gate).asgi(store="memory://")
    srv = serve(app)
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
        assert client.generations
        asked: list[int | None] = []
        original = client.get_task

        async def counting_get_task(id: str, history_length: int | None = None, **kw: Any) -> m.Task:
            asked.append(kw.get("current_generation"))
            return await original(id, history_length, **kw)

        client.get_task = counting_get_task  # type: ignore[method-assign]
        task = await client.send("go", configuration=m.SendMessageConfiguration(return_immediately=True))
        assert isinstance(task, m.Task)
        waiting = asyncio.ensure_future(client.wait(task.id, timeout=WAIT))
        runtime = app.runtime
        assert runtime is not None
        # the long-poll is held by the agent while nothing happens: let the task finish then
        await asyncio.to_thread(held_until, lambda: runtime._polls > 0)
        gate.set()
        done = await waiting
    assert done.status.state is TaskState.COMPLETED
    assert asked[0] is None and all(g is not None for g in asked[1:]) and len(asked) <= 3


async def test_wait_times_out(serve: Any, gate: threading.Event) -> None:
    srv = serve(slow_agent(gate).asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        task = await client.send("go", configuration=m.SendMessageConfiguration(return_immediately=True))
        assert isinstance(task, m.Task)
        with pytest.raises(TimeoutError):
            await client.wait(task.id, timeout=0.2, interval=0.01, max_interval=0.02)


async def test_wait_refuses_nonsense_intervals(tck: RunningServer) -> None:
    async with await Client.connect(tck.url, timeout=WAIT) as client:
        with pytest.raises(ValueError):
            await client.wait("t", interval=0)
        with pytest.raises(ValueError):
            await client.wait("t", interval=1.0, max_interval=0.5)


def interviewer() -> Agent:
    """Asks for a name, then a city, then completes with both; "quit" as an answer fails the task."""

    async def run(context: RequestContext, events: TaskEvents) -> None:
        answers = [
            message.text()
            for message in (context.task.history if context.task is not None else [])
            if message.role == m.Role.USER
        ][1:] + ([context.text] if context.task is not None else [])
        if "quit" in answers:
            await events.fail("the user quit")
        elif len(answers) == 0:
            await events.input_required("What is your name?")
        elif len(answers) == 1:
            await events.input_required("Which city?")
        else:
            await events.artifact(f"{answers[0]} from {answers[1]}", name="card")
            await events.complete("done")

    return Agent("interviewer", "Asks two questions.", executor=run)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_converse_answers_each_question_until_done(serve: Any, binding: str) -> None:
    srv = serve(interviewer().asgi(store="memory://"))
    asked: list[str] = []

    async def answer(task: m.Task) -> str:
        assert task.status.state is TaskState.INPUT_REQUIRED and task.status.message is not None
        question = task.status.message.text()
        asked.append(question)
        return {"What is your name?": "Ada", "Which city?": "London"}[question]

    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
        result = await client.converse("register me", answer)
    assert asked == ["What is your name?", "Which city?"]
    assert isinstance(result, m.Task) and result.status.state is TaskState.COMPLETED
    assert result.artifacts[0].parts[0].text == "Ada from London"


async def test_converse_stops_when_the_answer_is_none_and_after_max_turns(serve: Any) -> None:
    srv = serve(interviewer().asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        waiting = await client.converse("register me", lambda task: None)
        assert isinstance(waiting, m.Task) and waiting.status.state is TaskState.INPUT_REQUIRED
        capped = await client.converse("register me", lambda task: "Ada", max_turns=1)
        assert isinstance(capped, m.Task) and capped.status.state is TaskState.INPUT_REQUIRED
        assert capped.status.message is not None and capped.status.message.text() == "Which city?"
        # the conversation can be picked up where it stopped
        done = await client.converse("London", lambda task: None, task_id=capped.id)
        assert isinstance(done, m.Task) and done.status.state is TaskState.COMPLETED


async def test_converse_failure_is_a_result_or_raised(serve: Any) -> None:
    srv = serve(interviewer().asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        failed = await client.converse("register me", lambda task: "quit")
        assert isinstance(failed, m.Task) and failed.status.state is TaskState.FAILED
        with pytest.raises(TaskFailedError):
            await client.converse("register me", lambda task: "quit", raise_on_failure=True)


def test_sync_converse_with_a_plain_function(serve: Any) -> None:
    srv = serve(interviewer().asgi(store="memory://"))
    answers = iter(["Grace", "Arlington"])
    with SyncClient.connect(srv.url, timeout=WAIT) as client:
        result = client.converse("register me", lambda task: next(answers))
    assert isinstance(result, m.Task) and result.artifacts[0].parts[0].text == "Grace from Arlington"


# -- credentials -------------------------------------------------------------------------------------------

SCHEMES: dict[str, Any] = {
    "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
    "queryKey": {"apiKeySecurityScheme": {"location": "query", "name": "key"}},
    "cookieKey": {"apiKeySecurityScheme": {"location": "cookie", "name": "session"}},
    "bearer": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}},
    "basic": {"httpAuthSecurityScheme": {"scheme": "Basic"}},
    "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://id.example/.well-known"}},
    "mtls": {"mtlsSecurityScheme": {}},
}


def requirement(*names: str) -> m.SecurityRequirement:
    return m.SecurityRequirement(schemes={n: m.StringList() for n in names})


def secured_app(requirements: list[m.SecurityRequirement]) -> tuple[Any, list[RecordingHandler]]:
    made: list[RecordingHandler] = []

    def wrap(runtime: Any) -> RecordingHandler:
        made.append(RecordingHandler(runtime))
        return made[-1]

    app = example_agent("tck").asgi(store="memory://", wrap=wrap)
    app.card = msgspec.structs.replace(app.card, security_schemes=SCHEMES, security_requirements=requirements)
    return app, made


@pytest.mark.parametrize("binding", BINDINGS)
async def test_credentials_go_where_the_card_says(serve: Any, binding: str) -> None:
    app, made = secured_app([requirement("apiKey", "bearer")])
    srv = serve(app)
    tokens = iter(["t1", "t2"])
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        creds = {"apiKey": "k-123", "bearer": lambda: next(tokens), "undeclared": "never-sent"}
        async with await Client.connect(
            srv.url, bindings=(binding,), http=http, credentials=creds, timeout=WAIT
        ) as client:
            with pytest.raises(TaskNotFoundError):
                await client.get_task("a")
            with pytest.raises(TaskNotFoundError):
                await client.get_task("b")
    first, second = made[0].headers
    assert first["x-api-key"] == "k-123" and first["authorization"] == "Bearer t1"
    assert second["authorization"] == "Bearer t2"  # a callable secret is asked for on every request
    assert all("never-sent" not in str(r.headers) + str(r.url) for r in seen)
    assert "x-api-key" not in seen[0].headers  # the public card is fetched without credentials


async def test_credentials_go_into_grpc_metadata(serve: Any) -> None:
    app, made = secured_app([requirement("apiKey"), requirement("bearer")])
    app.grpc_port = 0
    srv = serve(app)
    # gRPC listens on a port of its own, another origin: credentials go there only once it is allowed
    allowed = [app.grpc_address]
    async with await Client.connect(
        srv.url, bindings=("GRPC",), credentials={"bearer": "tok"}, allowed_origins=allowed, timeout=WAIT
    ) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task("a")
    assert made[0].headers[-1]["authorization"] == "Bearer tok"
    assert "x-api-key" not in made[0].headers[-1]


async def test_the_first_satisfiable_requirement_is_used(serve: Any) -> None:
    app, made = secured_app([requirement("oidc"), requirement("queryKey", "cookieKey")])
    srv = serve(app)
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request)

    async def token() -> str:
        return "async-token"

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        creds = Credentials(queryKey="q1", cookieKey="c1", bearer="unused")
        async with await Client.connect(srv.url, http=http, credentials=creds, timeout=WAIT) as client:
            with pytest.raises(TaskNotFoundError):
                await client.get_task("a")
        assert seen[-1].url.params["key"] == "q1"
        assert made[0].headers[-1]["cookie"] == "session=c1"
        assert "authorization" not in made[0].headers[-1]  # bearer is in no requirement that was chosen
        async with await Client.connect(
            srv.url, http=http, credentials={"oidc": token, "queryKey": "q1"}, timeout=WAIT
        ) as client:
            with pytest.raises(TaskNotFoundError):
                await client.get_task("b")
        assert made[0].headers[-1]["authorization"] == "Bearer async-token"
        assert "key" not in seen[-1].url.params


def test_basic_auth_is_encoded_and_mtls_sends_nothing() -> None:
    card = m.AgentCard(
        name="a",
        description="a",
        version="1",
        supported_interfaces=[],
        capabilities=m.AgentCapabilities(),
        default_input_modes=[],
        default_output_modes=[],
        skills=[],
        security_schemes=SCHEMES,
    )
    creds = Credentials(basic="ada:secret", mtls="ignored")
    headers = asyncio.run(credential_headers(card, creds))
    assert headers == {"Authorization": "Basic " + base64.b64encode(b"ada:secret").decode()}
    assert [p.name for p in CardAuth(card, creds).placements] == ["basic"]
    assert "ada:secret" not in repr(creds)


# -- Retry-After, extensions, interface choice ---------------------------------------------------------------


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3", now=now) == 3.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=90), usegmt=True), now=now) == 90.0
    assert parse_retry_after("Sun, 29 Nov 2026 11:00:00 GMT", now=now) == 0.0  # in the past: now
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


async def test_an_http_date_retry_after_is_honoured(serve: Any) -> None:
    class Busy:
        def __init__(self, app: Any) -> None:
            self.app, self.armed, self.requests = app, 0, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.app, name)

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and self.armed:
                self.armed -= 1
                self.requests += 1
                date = format_datetime(datetime.now(UTC), usegmt=True).encode()  # "now": wait 0 s
                headers = [(b"retry-after", date), (b"content-type", b"text/plain")]
                await send({"type": "http.response.start", "status": 429, "headers": headers})
                await send({"type": "http.response.body", "body": b"slow down"})
                return
            await self.app(scope, receive, send)

    busy = Busy(example_agent("tck").asgi(store="memory://"))
    srv = serve(busy)
    async with await Client.connect(srv.url, retries=RetryPolicy(retries=2, base=10.0, cap=5.0)) as client:
        busy.armed = 2
        async with asyncio.timeout(WAIT):  # the 10 s backoff would exceed this: the date was used
            with pytest.raises(TaskNotFoundError):
                await client.get_task("x")
        assert busy.requests == 2


@pytest.mark.parametrize("binding", BINDINGS)
async def test_requested_extensions_are_sent_and_activated(serve: Any, binding: str) -> None:
    uri = "https://example.com/ext/trace/v1"
    seen: list[frozenset[str]] = []

    async def run(context: RequestContext, events: TaskEvents) -> None:
        seen.append(context.call.extensions)
        await events.reply("ok")

    agent = Agent("ext", "Declares one extension.", executor=run, extensions=[AgentExtension(uri=uri)])
    srv = serve(agent.asgi(store="memory://"))
    async with await Client.connect(
        srv.url, bindings=(binding,), extensions=[uri, "https://example.com/unknown"], timeout=WAIT
    ) as client:
        await client.send("hi")
    # the unknown one is not activated; the generations extension the agent's card declares is asked too
    assert seen == [frozenset({uri, GENERATIONS_URI})]


def test_interfaces_are_chosen_by_version_then_binding() -> None:
    def iface(binding: str, version: str) -> m.AgentInterface:
        return m.AgentInterface(
            url=f"http://x/{binding}/{version}", protocol_binding=binding, protocol_version=version
        )

    card = m.AgentCard(
        name="a",
        description="a",
        version="1",
        supported_interfaces=[iface("JSONRPC", "0.3.0"), iface("HTTP+JSON", "0.3"), iface("GRPC", "1.0")],
        capabilities=m.AgentCapabilities(),
        default_input_modes=[],
        default_output_modes=[],
        skills=[],
    )
    assert select_interface(card, ["JSONRPC", "HTTP+JSON"]) is card.supported_interfaces[0]  # 0.3 fallback
    assert select_interface(card, ["JSONRPC", "GRPC"]) is card.supported_interfaces[2]  # 1.0 first
    assert select_interface(card, ["HTTP+JSON"], versions=["1.0", "0.3"]) is card.supported_interfaces[1]
    with pytest.raises(NoCompatibleInterfaceError, match=r"1\.0"):
        select_interface(card, ["HTTP+JSON"], versions=["1.0"])


@pytest.mark.parametrize("binding", BINDINGS)
async def test_versions_picks_the_v03_endpoints_of_a_card_serving_both(serve: Any, binding: str) -> None:
    greeter = serve(example_agent("greeter").asgi(store="memory://"))  # its card carries the v0.3 fields

    async with await Client.connect(greeter.url, bindings=(binding,), timeout=WAIT) as client:
        assert client.interface is not None and client.interface.protocol_version == "1.0"
    async with await Client.connect(
        greeter.url, bindings=(binding,), versions=("0.3",), timeout=WAIT
    ) as client:
        assert client.interface is not None and client.interface.protocol_version.startswith("0.3")
        expected = JsonRpcTransport if binding == "JSONRPC" else RestTransport
        assert type(client.transport) is expected and client.transport.version == "0.3"
        task = await client.send("Ada")
        assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
        assert (await client.get_task(task.id)).status.state is TaskState.COMPLETED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_streaming_an_answer_into_a_waiting_task_follows_it_to_the_end(
    serve: Any, binding: str
) -> None:
    # The stream opens with the task as it was (INPUT_REQUIRED): that snapshot must not end the stream.
    srv = serve(interviewer().asgi(store="memory://"))
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
        task = await client.send("register me")
        assert isinstance(task, m.Task) and task.status.state is TaskState.INPUT_REQUIRED
        first = [e async for e in client.stream("Ada", task_id=task.id, context_id=task.context_id)]
        assert first[0].task is not None
        assert first[-1].status_update is not None
        assert first[-1].status_update.status.state is TaskState.INPUT_REQUIRED  # the second question
        assert first[-1].status_update.status.message is not None
        assert first[-1].status_update.status.message.text() == "Which city?"
        second = [e async for e in client.stream("London", task_id=task.id, context_id=task.context_id)]
        assert second[-1].status_update is not None
        assert second[-1].status_update.status.state is TaskState.COMPLETED
        assert any(e.artifact_update is not None for e in second)


# -- what the client sends is strict v1.0 ----------------------------------------------------------------


async def test_every_json_rpc_request_parses_strictly_into_the_proto(tck: RunningServer) -> None:
    from conftest import assert_proto
    from skillwire.protocol.operations import spec_of

    bodies: list[bytes] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            bodies.append(request.content)

    async with (
        httpx.AsyncClient(event_hooks={"request": [record]}) as http,
        await Client.connect(tck.url, bindings=("JSONRPC",), http=http, timeout=WAIT) as client,
    ):
        message = m.Message(
            message_id="m-1",
            role=m.Role.USER,
            parts=[
                m.Part(text="tck-long-running"),
                m.Part(data={"n": 1}),
                m.Part(raw=b"\x00\x01", filename="a.bin"),
            ],
            metadata={"skillId": "x"},
        )
        config = m.SendMessageConfiguration(
            return_immediately=True, history_length=2, accepted_output_modes=["text/plain"]
        )
        task = await client.send(message, configuration=config, metadata={"k": [1, "two"]})
        assert isinstance(task, m.Task)
        await client.get_task(task.id, history_length=0)
        await client.list_tasks(
            context_id=task.context_id, status=TaskState.WORKING, page_size=5, include_artifacts=True
        )
        await client.cancel_task(task.id, metadata={"why": "test"})
        [e async for e in client.stream(msg("tck-complete-task"))]
        with pytest.raises(Exception):  # noqa: B017 - only the request's shape matters here
            [e async for e in client.subscribe(task.id, resume=False)]
        await client.create_push_config(task.id, "https://example.com/hook", id="c1", token="t")
        await client.get_push_config(task.id, "c1")
        await client.list_push_configs(task.id, page_size=3)
        await client.delete_push_config(task.id, "c1")
        with pytest.raises(Exception):  # noqa: B017 - the extended card is off
            await client.get_extended_card()
    methods = set()
    for body in bodies:
        envelope = json.loads(body)
        methods.add(envelope["method"])
        request_type = spec_of(Operation(envelope["method"])).request_type.__name__
        assert_proto(envelope["params"], request_type)
    assert methods == {op.value for op in Operation}
