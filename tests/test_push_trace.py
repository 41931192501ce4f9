"""Push deliveries continue the trace of the request that caused their event (issue 16): real uvicorn servers,
a real webhook receiver on 127.0.0.1, the OpenTelemetry SDK with a span processor that records every span
that ends, and deliveries that outlive the server that stored them.

The chain asserted: SendMessage (SERVER) -> the task run (INTERNAL) -> ``A2A push`` (CLIENT, one per
attempt) -> the webhook request, whose ``traceparent`` names the CLIENT span."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from conftest import (
    A2A_V1,
    RunningServer,
    example_agent,
    postgres_dsn,
    postgres_schema,
    rpc,
    serve_asgi,
    start_server,
    user_message,
)

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

from otel_spans import Spans
from skillwire import PushSettings, WebhookPolicy
from skillwire.server.notifications.push import _trace
from skillwire.server.notifications.push_delivery import _bare_url
from skillwire.server.observability.telemetry import Telemetry
from skillwire.stores import postgres_sql
from skillwire.stores.base import write_task
from skillwire.stores.postgres import PostgresTaskStore
from skillwire.stores.postgres import read_failed_deliveries as read_failed_postgres
from skillwire.stores.push import Delivery, Outgoing
from skillwire.stores.sqlite import _SCHEMA, SCHEMA_VERSION, SQLiteTaskStore, read_failed_deliveries
from skillwire.testing.store_contract import make_task

T = TypeVar("T")

LOCAL = WebhookPolicy(allow=["127.0.0.1"], allow_http=True)
#: Retries fast, and (for the restart test) never running out before the server is stopped.
QUICK = PushSettings(first_delay=0.01, max_delay=0.05, max_attempts=100_000, timeout=5.0)
WAIT = 20.0
#: The caller's own trace context on SendMessage: the deliveries must join this trace.
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
CONFIG = "hook-1"
#: What the echo agent's task delivers: the task, its artifact, its end.
EVENTS = ["task", "artifactUpdate", "statusUpdate"]


# -- spans and the receiver -----------------------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def kind(self) -> str:
        [kind] = json.loads(self.body)
        return str(kind)

    @property
    def traceparent(self) -> tuple[str, str]:
        """The trace id and parent span id of the request's ``traceparent`` (hex)."""
        version, trace_id, span_id, flags = self.headers["traceparent"].split("-")
        assert (version, flags) == ("00", "01")
        return trace_id, span_id


class Hook:
    """A webhook receiver on 127.0.0.1: records every request and answers ``status``."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.status = 200
        self._cond = threading.Condition()
        self.url = ""

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self._cond:
                self.received.append(Received(dict(request.headers), body))
                self._cond.notify_all()
                return Response(status_code=self.status)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    def wait_for(self, count: int) -> list[Received]:
        with self._cond:
            found = self._cond.wait_for(lambda: len(self.received) >= count, WAIT)
            assert found, f"{len(self.received)} of {count} requests arrived"
            return self.received[:count]

    def answer(self, status: int) -> None:
        """Answer ``status`` from now on, and forget what was received."""
        with self._cond:
            self.status = status
            self.received.clear()


@pytest.fixture
def hook() -> Iterator[Hook]:
    receiver = Hook()
    url, stop = serve_asgi(receiver.app())
    receiver.url = url + "/hook"
    try:
        yield receiver
    finally:
        stop()


def tracing() -> tuple[Telemetry, Spans, TracerProvider]:
    spans = Spans()
    provider = TracerProvider()
    provider.add_span_processor(spans)
    return Telemetry(provider), spans, provider


@pytest.fixture
def traced() -> Iterator[tuple[Telemetry, Spans]]:
    telemetry, spans, provider = tracing()
    yield telemetry, spans
    provider.shutdown()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "postgres":
        async with postgres_schema() as url:  # skips (skip_without_service) without PostgreSQL
            yield url
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        yield "memory://"


def echo_server(store: str, telemetry: Telemetry | None) -> RunningServer:
    app = example_agent("echo").asgi(store=store, webhook_policy=LOCAL, push=QUICK, telemetry=telemetry)
    return start_server(app)


def send_with_push(server: RunningServer, url: str) -> dict[str, Any]:
    """SendMessage with an inline push config, in the caller's trace (``CLIENT_PARENT``)."""
    config = {"url": url, "id": CONFIG}
    params = {"message": user_message("hello"), "configuration": {"taskPushNotificationConfig": config}}
    headers = {**A2A_V1, "traceparent": CLIENT_PARENT}
    answer = httpx.post(server.rpc_url, json=rpc("SendMessage", params), headers=headers, timeout=WAIT).json()
    task: dict[str, Any] = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task


def on_loop(server: RunningServer, work: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(work, server.loop).result(WAIT)


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def parent_of(span: ReadableSpan) -> str:
    assert span.parent is not None, f"{span.name} has no parent"
    return f"{span.parent.span_id:016x}"


# -- the trace continues ------------------------------------------------------------------------------------


def test_each_delivery_continues_the_trace_of_the_run_that_made_its_event(
    store_url: str, hook: Hook, traced: tuple[Telemetry, Spans]
) -> None:
    telemetry, spans = traced
    server = echo_server(store_url, telemetry)
    try:
        task = send_with_push(server, hook.url + "?key=secret")
        received = hook.wait_for(3)
        pushes = spans.wait("A2A push", 3)
        (request,) = spans.wait("A2A SendMessage")
        (run,) = spans.wait(SpanKind.INTERNAL)  # the task's run
    finally:
        server.stop()
    assert [r.kind for r in received] == EVENTS
    trace_id, request_id = hex_ids(request)
    assert trace_id == CLIENT_TRACE  # the caller's trace, continued by the request span ...
    assert parent_of(run) == request_id  # ... and its run
    by_id = {hex_ids(p)[1]: p for p in pushes}
    for r in received:
        sent_trace, sent_parent = r.traceparent
        assert sent_trace == trace_id, "the webhook request is in the trace of the SendMessage request"
        push = by_id[sent_parent]  # its parent is the CLIENT span of its attempt
        assert hex_ids(push)[0] == trace_id and push.kind is SpanKind.CLIENT
        assert push.status.status_code is StatusCode.UNSET
        assert parent_of(push) == hex_ids(run)[1]  # the span current when the event was produced
        assert push.attributes is not None
        assert dict(push.attributes) == {
            "a2a.task.id": task["id"],
            "a2a.push.config.id": CONFIG,
            "a2a.push.attempt": 1,
            "http.request.method": "POST",
            "url.full": hook.url,  # without its query
            "http.response.status_code": 200,
        }


def test_with_telemetry_off_nothing_is_stored_and_no_trace_context_is_sent(
    hook: Hook, tmp_path: Path
) -> None:
    hook.status = 410  # each delivery fails at once, and is kept: its stored trace context can be read
    server = echo_server(f"sqlite:///{tmp_path / 'tasks.db'}", None)
    try:
        send_with_push(server, hook.url)  # the caller sends a traceparent: it is not kept
        received = hook.wait_for(3)
        push = server.app.runtime.push  # type: ignore[union-attr]
        on_loop(server, push.deliverer.idle())
        failed: list[Delivery] = on_loop(server, push.store.failed_deliveries())
    finally:
        server.stop()
    assert [r.kind for r in received] == EVENTS
    assert not any("traceparent" in r.headers or "tracestate" in r.headers for r in received)
    assert len(failed) == 3 and all(d.trace == "" for d in failed)


def test_the_url_of_a_span_shows_no_credentials_query_or_fragment() -> None:
    for url, shown in [
        ("https://user:secret@hooks.example:8443/a2a?token=x#part", "https://hooks.example:8443/a2a"),
        ("https://hooks.example/a2a?sig=abc", "https://hooks.example/a2a"),
        ("http://[::1]:8080/hook", "http://[::1]:8080/hook"),
        ("https://hooks.example", "https://hooks.example"),
    ]:
        assert _bare_url(url) == shown, url


def test_a_large_baggage_is_not_kept_with_every_delivery() -> None:
    parent = {"traceparent": CLIENT_PARENT, "tracestate": "k=v"}
    assert json.loads(_trace({**parent, "baggage": "k=v"})) == {**parent, "baggage": "k=v"}
    assert json.loads(_trace({**parent, "baggage": "k=" + "v" * 5000})) == parent
    assert _trace({}) == ""


# -- after a restart ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("telemetry_after", [True, False], ids=["traced-after", "untraced-after"])
def test_a_delivery_stored_with_its_context_keeps_it_across_a_restart(
    hook: Hook, tmp_path: Path, telemetry_after: bool
) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    before, spans_before, provider_before = tracing()
    hook.status = 503  # refused (and retried) until the server stops: the deliveries stay in the store
    first = echo_server(store, before)
    try:
        send_with_push(first, hook.url)
        hook.wait_for(1)
        (failed_attempt, *_) = spans_before.wait("A2A push")
    finally:
        first.stop()
        provider_before.shutdown()
    (request,) = spans_before.wait("A2A SendMessage")
    (run,) = spans_before.wait(SpanKind.INTERNAL)
    trace_id = hex_ids(request)[0]
    assert failed_attempt.status.status_code is StatusCode.ERROR  # a failed attempt is an error
    assert failed_attempt.status.description == "HTTP 503"
    assert failed_attempt.attributes is not None
    assert failed_attempt.attributes["http.response.status_code"] == 503
    assert failed_attempt.attributes["error.type"] == "503"

    hook.answer(200)
    after, spans_after, provider_after = tracing()
    second = echo_server(store, after if telemetry_after else None)
    try:
        received = hook.wait_for(3)
        pushes = spans_after.wait("A2A push", 3) if telemetry_after else []
    finally:
        second.stop()
        provider_after.shutdown()
    assert [r.kind for r in received] == EVENTS
    assert {r.traceparent[0] for r in received} == {trace_id}  # the trace of the request before the restart
    if telemetry_after:
        by_id = {hex_ids(p)[1]: p for p in pushes}
        for r in received:
            push = by_id[r.traceparent[1]]  # a CLIENT span of the new process ...
            assert push.parent is not None and push.parent.is_remote  # ... under the stored context
            assert parent_of(push) == hex_ids(run)[1]
            assert push.attributes is not None and push.attributes["http.response.status_code"] == 200
    else:  # the stored context as it is: the run's span, current when the events were produced
        assert {r.traceparent[1] for r in received} == {hex_ids(run)[1]}


# -- stores written before deliveries kept a trace context --------------------------------------------------

TRACE = '{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'


def _schema_3() -> str:
    """The SQLite layout of schema 3: schema 4 without the deliveries' trace column."""
    old = _SCHEMA.replace(",\n    trace      TEXT    NOT NULL DEFAULT ''", "")
    assert old != _SCHEMA and "trace" not in old
    return old


async def test_a_schema_3_sqlite_file_opens_and_keeps_its_deliveries(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(_schema_3())
        conn.executemany(
            "INSERT INTO deliveries (tenant, task_id, config_id, body, failed, error, created_us)"
            " VALUES ('', 't1', 'c1', ?, ?, ?, 1)",
            [(b"pending", 0, ""), (b"failed", 1, "HTTP 410")],
        )
        conn.execute("PRAGMA user_version=3")
        conn.commit()
    # the operator's command reads a file as it is, before any server migrated it
    [failed] = read_failed_deliveries(path)
    assert (failed.body, failed.error, failed.trace) == (b"failed", "HTTP 410", "")
    store = SQLiteTaskStore(path)
    await store.open()
    try:
        [pending] = await store.next_deliveries(("", "t1", "c1"), 5)
        assert (pending.body, pending.trace) == (b"pending", "")
        task = make_task()
        write = write_task(task, version=1)
        await store.commit(msgspec.structs.replace(write, deliveries=(Outgoing("c1", b"new", TRACE),)))
        [new] = await store.next_deliveries(("", task.id, "c1"), 5)
        assert (new.body, new.trace) == (b"new", TRACE)
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    assert read_failed_deliveries(path) == [failed]


async def test_a_postgres_schema_at_version_1_is_migrated_and_keeps_its_deliveries() -> None:
    import asyncpg

    async with postgres_schema() as url:
        s = '"' + url.rpartition("schema=")[2] + '"'
        conn = await asyncpg.connect(await postgres_dsn(), timeout=5)
        try:
            await conn.execute(f"CREATE SCHEMA {s}")
            await conn.execute(postgres_sql.MIGRATIONS[0].format(s=s))
            await conn.execute(f"CREATE TABLE {s}.skillwire_schema (version INT NOT NULL)")
            await conn.execute(f"INSERT INTO {s}.skillwire_schema (version) VALUES (1)")
            await conn.executemany(
                f"INSERT INTO {s}.skillwire_deliveries (tenant, task_id, config_id, body, failed, error,"
                " created_us, owner) VALUES ('', 't1', 'c1', $1, $2, $3, 1, 'old')",
                [(b"pending", False, b""), (b"failed", True, b"HTTP 410")],
            )
            [failed] = await read_failed_postgres(url)  # read as it is: no migration
            assert (failed.body, failed.error, failed.trace) == (b"failed", "HTTP 410", "")
            assert await conn.fetchval(f"SELECT MAX(version) FROM {s}.skillwire_schema") == 1
            store = PostgresTaskStore(url, owner="old")
            await store.open()
            try:
                [pending] = await store.next_deliveries(("", "t1", "c1"), 5)
                assert (pending.body, pending.trace) == (b"pending", "")
                task = make_task()
                write = write_task(task, version=1)
                await store.commit(
                    msgspec.structs.replace(write, deliveries=(Outgoing("c1", b"new", TRACE),))
                )
                [new] = await store.next_deliveries(("", task.id, "c1"), 5)
                assert (new.body, new.trace) == (b"new", TRACE)
            finally:
                await store.close()
            assert (
                await conn.fetchval(f"SELECT MAX(version) FROM {s}.skillwire_schema")
                == postgres_sql.SCHEMA_VERSION
                == 5
            )
            assert await read_failed_postgres(url) == [failed]
        finally:
            await conn.close()
