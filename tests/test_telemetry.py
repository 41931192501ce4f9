"""OpenTelemetry traces over real HTTP: the OpenTelemetry SDK with an in-memory exporter, real uvicorn servers,
skillwire's own client between agents, and `skillwire serve --otel` as a subprocess with the console exporter.

Spans are awaited through a span processor that signals each one that ends (``Spans.wait``), never by
sleeping: a task run's span can end just after the request that started it has been answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    PROCESS_TIMEOUT,
    Served,
    example_agent,
    rpc,
    secure_agent,
    start_process,
    start_server,
    user_message,
)

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

from otel_spans import Spans
from skillwire import Agent, SkillContext
from skillwire.client import Client
from skillwire.server.observability.telemetry import METRIC_EXPORTERS, SPAN_EXPORTERS, Telemetry

V1 = {"A2A-Version": "1.0"}
WAIT = 15.0


@pytest.fixture
def spans() -> Spans:
    return Spans()


@pytest.fixture
def telemetry(spans: Spans) -> Iterator[Telemetry]:
    provider = TracerProvider()
    provider.add_span_processor(spans)
    yield Telemetry(provider)
    provider.shutdown()


def send(url: str, text: str, **extra: Any) -> dict[str, Any]:
    answer = httpx.post(
        url + "/", json=rpc("SendMessage", {"message": user_message(text)}), headers={**V1, **extra}
    )
    result: dict[str, Any] = answer.json()["result"]
    return result


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_request_span_and_a_run_span_as_its_child(telemetry: Telemetry, spans: Spans) -> None:
    server = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    try:
        task = send(server.url, "Ada")["task"]
        (request,) = spans.wait("A2A SendMessage")
        (run,) = spans.wait("skill greet")
    finally:
        server.stop()
    assert request.kind is SpanKind.SERVER
    request_id = attributes(request).pop("a2a.request_id")
    assert len(request_id) == 16  # none was sent: one made up (the caller's X-Request-Id otherwise)
    assert {k: v for k, v in attributes(request).items() if k != "a2a.request_id"} == {
        "rpc.system": "a2a",
        "rpc.method": "SendMessage",
        "a2a.binding": "JSONRPC",
        "a2a.operation": "SendMessage",
        "a2a.tenant": "",
        "a2a.task.id": task["id"],
        "a2a.outcome": "COMPLETED",
    }
    assert request.status.status_code is StatusCode.UNSET
    assert run.kind is SpanKind.INTERNAL
    assert run.parent is not None and run.parent.span_id == request.context.span_id
    assert run.context.trace_id == request.context.trace_id
    assert attributes(run) == {
        "a2a.task.id": task["id"],
        "a2a.context.id": task["contextId"],
        "a2a.skill.id": "greet",
        "a2a.task.state": "COMPLETED",
    }


def test_the_rest_binding_and_the_tenant(telemetry: Telemetry, spans: Spans) -> None:
    server = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    try:
        body = {"message": user_message("Ada")}
        answer = httpx.post(server.url + "/acme/message:send", json=body, headers=V1)
        assert answer.status_code == 200
        (request,) = spans.wait("A2A SendMessage")
    finally:
        server.stop()
    assert attributes(request)["a2a.binding"] == "HTTP+JSON"
    assert attributes(request)["a2a.tenant"] == "acme"


def test_an_incoming_traceparent_is_the_parent(telemetry: Telemetry, spans: Spans) -> None:
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    server = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    try:
        send(server.url, "Ada", traceparent=f"00-{trace_id}-{parent_id}-01")
        (request,) = spans.wait("A2A SendMessage")
        (run,) = spans.wait("skill greet")
    finally:
        server.stop()
    assert request.context.trace_id == int(trace_id, 16)
    assert request.parent is not None and request.parent.span_id == int(parent_id, 16)
    assert request.parent.is_remote
    assert run.context.trace_id == int(trace_id, 16)


def test_errors_and_failed_runs_set_the_status(telemetry: Telemetry, spans: Spans) -> None:
    agent = Agent("Failing", "Fails")

    @agent.skill(tags=["test"])
    async def fail(params: Any, ctx: SkillContext) -> str:
        """Fails."""
        raise RuntimeError("boom")

    server = start_server(agent.asgi(store="memory://", telemetry=telemetry))
    try:
        missing = httpx.post(server.url + "/", json=rpc("GetTask", {"id": "no-such-task"}), headers=V1)
        assert missing.json()["error"]["code"] == -32001
        (lookup,) = spans.wait("A2A GetTask")
        assert send(server.url, "go")["task"]["status"]["state"] == "TASK_STATE_FAILED"
        (run,) = spans.wait("skill fail")
    finally:
        server.stop()
    assert attributes(lookup)["a2a.outcome"] == "TASK_NOT_FOUND"
    assert attributes(lookup)["a2a.task.id"] == "no-such-task"
    assert lookup.status.status_code is StatusCode.ERROR
    assert attributes(run)["a2a.task.state"] == "FAILED"
    assert run.status.status_code is StatusCode.ERROR


def test_a_stream_span_ends_with_the_stream(telemetry: Telemetry, spans: Spans) -> None:
    server = start_server(example_agent("echo").asgi(store="memory://", telemetry=telemetry))
    try:
        body = rpc("SendStreamingMessage", {"message": user_message("stream 5")})
        with httpx.stream("POST", server.url + "/", json=body, headers=V1) as answer:
            events = [line for line in answer.iter_lines() if line.startswith("data:")]
        (request,) = spans.wait("A2A SendStreamingMessage")
        (run,) = spans.wait("task run")  # an executor agent: no skill
    finally:
        server.stop()
    assert len(events) == 8  # the task, working, 5 chunks, completed
    assert attributes(request)["a2a.outcome"] == "COMPLETED"
    assert run.parent is not None and run.parent.span_id == request.context.span_id
    assert request.end_time is not None and run.end_time is not None


def relaying_to(greeter_url: str) -> Agent:
    """An agent whose skill ``relay`` asks the greeter at ``greeter_url`` to greet Ada, with skillwire's client
    (which carries the current trace context), and answers what it said."""
    agent = Agent("Middle", "Asks the greeter")

    @agent.skill(tags=["test"])
    async def relay(params: Any, ctx: SkillContext) -> str:
        """Asks the greeter."""
        async with await Client.connect(greeter_url, timeout=WAIT) as client:
            task = await client.send("Ada")
        return str(task.artifacts[0].parts[0].text)

    return agent


def test_a_call_through_three_agents_is_one_trace(telemetry: Telemetry, spans: Spans) -> None:
    last = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    middle = start_server(relaying_to(last.url).asgi(store="memory://", telemetry=telemetry))
    first_agent = Agent("First", "Asks the middle")

    @first_agent.skill(tags=["test"])
    async def ask(params: Any, ctx: SkillContext) -> str:
        """Asks the middle agent."""
        async with await Client.connect(middle.url, timeout=WAIT) as client:
            task = await client.send("go")
        return f"via middle: {task.artifacts[0].parts[0].text}"

    first = start_server(first_agent.asgi(store="memory://", telemetry=telemetry))
    try:
        result = send(first.url, "go")["task"]
        assert result["artifacts"][0]["parts"][0]["text"] == "via middle: Hi Ada!"
        requests = spans.wait("A2A SendMessage", 3)
        runs = {name: spans.wait(name)[0] for name in ("skill ask", "skill relay", "skill greet")}
    finally:
        for server in (first, middle, last):
            server.stop()
    assert len({s.context.trace_id for s in [*requests, *runs.values()]}) == 1  # one trace
    by_parent = {s.parent.span_id if s.parent else None: s for s in requests}
    root = by_parent[None]  # the test's own call: no parent
    assert runs["skill ask"].parent is not None and runs["skill ask"].parent.span_id == root.context.span_id
    into_middle = by_parent[runs["skill ask"].context.span_id]  # the call made inside the first skill
    assert runs["skill relay"].parent is not None
    assert runs["skill relay"].parent.span_id == into_middle.context.span_id
    into_last = by_parent[runs["skill relay"].context.span_id]
    assert runs["skill greet"].parent is not None
    assert runs["skill greet"].parent.span_id == into_last.context.span_id


def test_off_by_default_and_nothing_imported() -> None:
    code = (
        "import sys, json\n"
        "from skillwire import Agent\n"
        "agent = Agent.from_folder('examples/greeter')\n"
        "with agent.test_client() as client:\n"
        "    client.send('Ada')\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry', 'prometheus_client'))]\n"
        "print(json.dumps(sorted(loaded)))\n"
    )
    root = Path(__file__).parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_serve_otel_exports_spans(tmp_path: Path, processes: list[Served]) -> None:
    root = Path(__file__).parents[1]
    env = {
        **__import__("os").environ,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_SERVICE_NAME": "greeter-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # the batch processor exports every 50 ms
    }
    served = start_process("examples/greeter", "memory://", root, "--otel", env=env)
    processes.append(served)
    assert send(served.url, "Ada")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    line = served.wait_for_output('"name": "skill greet"', timeout=PROCESS_TIMEOUT)
    assert "skill greet" in line
    served.wait_for_output('"service.name": "greeter-under-test"', timeout=PROCESS_TIMEOUT)


def test_serve_otel_without_the_sdk_says_what_to_install() -> None:
    # the SDK made unimportable (None in sys.modules), as on a machine with only opentelemetry-api
    code = (
        "import sys\n"
        "sys.modules['opentelemetry.sdk'] = None\n"
        "from skillwire.cli.main import main\n"
        "sys.exit(main(['serve', 'examples/greeter', '--otel', '--port', '0', '--store', 'memory://']))\n"
    )
    root = Path(__file__).parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=60)
    assert done.returncode == 2
    # run from the checkout: the command that installs the extra there
    assert done.stderr.strip().endswith("needs the OpenTelemetry SDK: pip install -e '.[otel]'")


def test_grpc_requests_have_spans_and_take_the_trace_context(telemetry: Telemetry, spans: Spans) -> None:
    pytest.importorskip("grpc")
    from opentelemetry import trace

    app = example_agent("greeter").asgi(store="memory://", telemetry=telemetry, grpc_port=0)
    server = start_server(app)
    tracer = TracerProvider()
    caller = Spans()
    tracer.add_span_processor(caller)

    async def call() -> Any:
        with trace.use_span(tracer.get_tracer("test").start_span("caller"), end_on_exit=True):
            async with await Client.connect(server.url, bindings=("GRPC",), timeout=WAIT) as client:
                return await client.send("Ada")

    try:
        import asyncio

        task = asyncio.run(call())
        (request,) = spans.wait("A2A SendMessage")
        (run,) = spans.wait("skill greet")
        (outer,) = caller.wait("caller")
    finally:
        server.stop()
    assert attributes(request)["a2a.binding"] == "GRPC"
    assert attributes(request)["a2a.outcome"] == "COMPLETED"
    assert attributes(request)["a2a.task.id"] == task.id
    # the client sent the caller's span as the parent, in the call's metadata
    assert request.context.trace_id == outer.context.trace_id
    assert request.parent is not None and request.parent.span_id == outer.context.span_id
    assert run.parent is not None and run.parent.span_id == request.context.span_id


def test_the_http_client_sends_the_trace_context(telemetry: Telemetry, spans: Spans) -> None:
    from opentelemetry import trace

    server = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    tracer = TracerProvider()
    caller = Spans()
    tracer.add_span_processor(caller)

    async def call(binding: str) -> Any:
        with trace.use_span(tracer.get_tracer("test").start_span(f"caller {binding}"), end_on_exit=True):
            async with await Client.connect(server.url, bindings=(binding,), timeout=WAIT) as client:
                return await client.send("Ada")

    try:
        import asyncio

        for binding in ("JSONRPC", "HTTP+JSON"):
            asyncio.run(call(binding))
        requests = spans.wait("A2A SendMessage", 2)
        outers = [caller.wait(f"caller {b}")[0] for b in ("JSONRPC", "HTTP+JSON")]
    finally:
        server.stop()
    for request, outer in zip(requests, outers, strict=True):
        assert request.parent is not None and request.parent.span_id == outer.context.span_id
        assert request.context.trace_id == outer.context.trace_id


# -- store and bus spans, refused requests ------------------------------------------------------------------


def test_store_and_bus_calls_are_child_spans_when_asked(spans: Spans, tmp_path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(spans)
    telemetry = Telemetry(provider, store_spans=True)
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    server = start_server(example_agent("greeter").asgi(store=store, telemetry=telemetry))
    try:
        send(server.url, "Ada")
        (request,) = spans.wait("A2A SendMessage")
        (run,) = spans.wait("skill greet")
        commits = spans.wait("store commit")
        # the request's span ends after its answer, so a publish would have ended: a task made and ended in
        # one commit has no subscriber anywhere, and is not published
        assert not spans.named("bus publish")
        body = rpc("SendStreamingMessage", {"message": user_message("Bob")})
        with httpx.stream("POST", server.url + "/", json=body, headers=V1) as answer:
            assert [line for line in answer.iter_lines() if line.startswith("data:")]
        (streamed,) = spans.wait("A2A SendStreamingMessage")
        streamed_run = next(s for s in spans.wait("skill greet", 2) if s is not run)
        publishes = spans.wait("bus publish")
    finally:
        server.stop()
        provider.shutdown()
    for outer, inner, children in ((request, run, commits), (streamed, streamed_run, publishes)):
        for span in children:
            assert span.context.trace_id == outer.context.trace_id
            assert span.parent is not None and span.parent.span_id in {
                outer.context.span_id,
                inner.context.span_id,
            }
    commit = commits[0]
    assert commit.kind is SpanKind.CLIENT
    assert attributes(commit) == {"db.system.name": "sqlite", "db.operation.name": "commit"}
    assert attributes(publishes[0])["messaging.system"] == "memory"
    assert publishes[0].kind is SpanKind.INTERNAL


def test_store_spans_are_off_unless_asked(telemetry: Telemetry, spans: Spans) -> None:
    server = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    try:
        send(server.url, "Ada")
        spans.wait("skill greet")
        spans.wait("A2A SendMessage")
    finally:
        server.stop()
    assert not [s for s in spans.ended if s.name.startswith(("store ", "bus "))]


def test_requests_refused_before_their_body_is_read_have_spans(telemetry: Telemetry, spans: Spans) -> None:
    agent = secure_agent({"ada": "k-1"})
    server = start_server(agent.asgi(store="memory://", telemetry=telemetry))
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    try:
        refused = httpx.post(
            server.url + "/", json=rpc("GetTask", {"id": "t"}), headers={**V1, "traceparent": parent}
        )
        assert refused.status_code == 401
        assert httpx.get(server.url + "/tasks/t", headers=V1).status_code == 401
        (unread,) = spans.wait("A2A request")
        (rest,) = spans.wait("A2A GetTask")
    finally:
        server.stop()
    assert unread.kind is SpanKind.SERVER
    assert unread.status.status_code is StatusCode.ERROR
    assert attributes(unread) == {
        "rpc.system": "a2a",
        "a2a.binding": "JSONRPC",
        "a2a.outcome": "UNAUTHENTICATED",
    }
    assert unread.context.trace_id == int("0af7651916cd43dd8448eb211c80319c", 16)
    assert unread.parent is not None and unread.parent.span_id == int("b7ad6b7169203331", 16)
    assert unread.end_time is not None and unread.start_time is not None
    assert unread.end_time >= unread.start_time
    assert attributes(rest)["a2a.operation"] == "GetTask"
    assert attributes(rest)["a2a.outcome"] == "UNAUTHENTICATED"
    assert rest.status.status_code is StatusCode.ERROR


def test_serve_otel_store_spans(processes: list[Served]) -> None:
    root = Path(__file__).parents[1]
    env = {
        **__import__("os").environ,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    served = start_process("examples/greeter", "memory://", root, "--otel", "--otel-store-spans", env=env)
    processes.append(served)
    assert send(served.url, "Ada")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    line = served.wait_for_output('"name": "store commit"', timeout=PROCESS_TIMEOUT)
    assert "store commit" in line


# -- the exporter tables: one function and one line each -----------------------------------------------------


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A socket that accepts connections, named as the OTLP endpoint: the exporters' reachability check
    finds something there and says nothing (it warns once per process, which other tests look for)."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        yield endpoint


@pytest.mark.parametrize("kind", sorted(SPAN_EXPORTERS))
def test_every_row_of_the_span_exporter_table_makes_its_exporter(kind: str, collector: str) -> None:
    from opentelemetry.sdk.trace.export import SpanExporter

    exporter, destination = SPAN_EXPORTERS[kind]()
    if kind == "none":
        assert exporter is None
        assert destination == "none (OTEL_TRACES_EXPORTER=none)"
        return
    assert isinstance(exporter, SpanExporter)
    exporter.shutdown()
    expected = {"otlp": f"OTLP over HTTP to {collector}/v1/traces", "console": "stdout"}[kind]
    assert destination.startswith(expected)


@pytest.mark.parametrize("kind", sorted(METRIC_EXPORTERS))
def test_every_row_of_the_metric_exporter_table_makes_its_exporter(kind: str, collector: str) -> None:
    from opentelemetry.sdk.metrics.export import MetricExporter

    exporter = METRIC_EXPORTERS[kind]()
    assert isinstance(exporter, MetricExporter)
    assert type(exporter).__name__ == {"otlp": "OTLPMetricExporter", "console": "ConsoleMetricExporter"}[kind]
    exporter.shutdown()


class Asked:
    """A sampler of the test's own (the SDK's ``Sampler`` interface): decides as ``inner`` does and keeps
    the name and trace id of every span it was asked about; ``describes`` False hides what ``inner`` is."""

    def __init__(self, inner: Any, *, describes: bool = True) -> None:
        self.inner = inner
        self.describes = describes
        self.asked: list[tuple[str, int]] = []

    def should_sample(self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any) -> Any:
        self.asked.append((name, trace_id))
        return self.inner.should_sample(parent_context, trace_id, name, *args, **kwargs)

    def get_description(self) -> str:
        return str(self.inner.get_description()) if self.describes else "Asked"


def test_children_of_an_unsampled_request_are_not_started(tmp_path: Path) -> None:
    """With a ParentBased sampler (the SDK's default kind), a request it does not sample has no child span
    recorded: the run's and the store's spans are not even started, and a skill's own call downstream still
    carries the request's trace id, unsampled."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    sampler = Asked(ParentBased(ALWAYS_OFF))
    provider = TracerProvider(sampler=sampler)  # type: ignore[arg-type]
    telemetry = Telemetry(provider, store_spans=True)
    last = start_server(example_agent("greeter").asgi(store="memory://", telemetry=telemetry))
    first = start_server(
        relaying_to(last.url).asgi(store=f"sqlite:///{tmp_path / 't.db'}", telemetry=telemetry)
    )
    try:
        assert send(first.url, "go")["task"]["artifacts"][0]["parts"][0]["text"] == "Hi Ada!"
    finally:
        first.stop()
        last.stop()
        provider.shutdown()
    names = [name for name, _ in sampler.asked]
    assert names == ["A2A SendMessage", "A2A SendMessage"], names
    assert len({trace_id for _, trace_id in sampler.asked}) == 1  # one trace, carried downstream


def test_a_sampler_of_ones_own_is_asked_for_every_span(spans: Spans) -> None:
    """A sampler that does not say it drops the children of what it did not sample is asked about every
    span, as the SDK would ask it, and what it samples is recorded."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, SamplingResult

    class RunsOnly:
        def should_sample(self, parent_context: Any, trace_id: int, name: str, *args: Any, **kw: Any) -> Any:
            if name.startswith("A2A"):
                return SamplingResult(Decision.DROP)
            return ALWAYS_ON.should_sample(parent_context, trace_id, name, *args, **kw)

        def get_description(self) -> str:
            return "RunsOnly"

    sampler = Asked(RunsOnly(), describes=False)
    provider = TracerProvider(sampler=sampler)  # type: ignore[arg-type]
    provider.add_span_processor(spans)
    server = start_server(example_agent("greeter").asgi(store="memory://", telemetry=Telemetry(provider)))
    try:
        send(server.url, "Ada")
        (run,) = spans.wait("skill greet")
    finally:
        server.stop()
        provider.shutdown()
    assert [name for name, _ in sampler.asked][:2] == ["A2A SendMessage", "skill greet"]
    assert not [s for s in spans.ended if s.name.startswith("A2A")]
    assert attributes(run)["a2a.task.state"] == "COMPLETED"
