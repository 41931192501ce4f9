"""What a skill handler knows about its call, through real servers: the request's id (``ctx.request_id``: the
caller's ``X-Request-Id`` or a made-up one, the same on the access line and the span), its time
(``ctx.deadline``, ``ctx.time_left()``: the run's time limit and the caller's gRPC deadline), and whether its
progress reached anyone (``TaskClosedError`` when the task had ended, ``ProgressNotStoredError`` when the
store could not record it), and what the skill runner does with an error the handler lets go."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc

from conftest import A2A_V1, ROOT, RunningServer, Served, rpc, start_process, user_message
from skillwire import Agent, Client, Limits, SkillContext, TaskState
from skillwire.errors import ProgressError, ProgressNotStoredError, TaskClosedError

WAIT = 10.0
Serve = Callable[[Any], RunningServer]


def agent(seen: dict[str, Any], release: threading.Event | None = None) -> Agent:
    made = Agent("Context", "Says what it knows.")

    @made.skill(tags=["test"], timeout_seconds=30)
    async def about(params: Any, ctx: SkillContext) -> dict[str, Any]:
        """Answers its request id and the seconds it has left."""
        return {"requestId": ctx.request_id, "left": ctx.time_left()}

    @made.skill(tags=["test"])
    async def unlimited(params: Any, ctx: SkillContext) -> dict[str, Any]:
        """Answers the seconds it has left, with no time limit of its own."""
        return {"left": ctx.time_left(), "deadline": ctx.deadline}

    @made.skill(tags=["test"], timeout_seconds=0.2)
    async def overrun(params: Any, ctx: SkillContext) -> str:
        """Outlives its time limit, then tries to report."""
        await report_after_cancel(ctx, seen)
        return "never"

    @made.skill(tags=["test"])
    async def lingering(params: Any, ctx: SkillContext) -> str:
        """Waits to be canceled, then tries to report."""
        await report_after_cancel(ctx, seen)
        return "never"

    @made.skill(tags=["test"])
    async def asking(params: Any, ctx: SkillContext) -> str:
        """Works, waits for the test to lock the store, then asks a question."""
        await ctx.working("starting")
        assert release is not None
        seen["working"].set()
        await asyncio.to_thread(release.wait, WAIT)
        try:
            await ctx.input_required("Which one?")
        except ProgressError as exc:
            seen["error"] = exc
            raise
        return "asked"

    @made.on_outcome
    def outcome(result: Any) -> None:
        seen.setdefault("outcomes", []).append(result)
        if "done" in seen:
            seen["done"].set()

    return made


async def report_after_cancel(ctx: SkillContext, seen: dict[str, Any]) -> None:
    seen["started"].set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        try:
            await ctx.working("still here")
        except TaskClosedError as exc:
            seen["error"] = exc
        try:
            await ctx.artifact("late")
        except TaskClosedError as exc:
            seen["artifact_error"] = exc
        raise


def call(srv: RunningServer, skill: str, **headers: str) -> dict[str, Any]:
    message = user_message("go", metadata={"skillId": skill})
    answer = httpx.post(
        srv.rpc_url,
        json=rpc("SendMessage", {"message": message}),
        headers={**A2A_V1, **headers},
        timeout=WAIT,
    )
    task: dict[str, Any] = answer.json()["result"]["task"]
    return task


def data_of(task: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = task["artifacts"][0]["parts"][0]["data"]
    return value


# -- the request id ------------------------------------------------------------------------------------------


def test_the_request_id_is_the_callers_or_one_made_up(serve: Serve) -> None:
    srv = serve(agent({}).asgi(store="memory://"))
    assert data_of(call(srv, "about", **{"X-Request-Id": "req-77"}))["requestId"] == "req-77"
    made = data_of(call(srv, "about"))["requestId"]
    assert re.fullmatch("[0-9a-f]{16}", made)
    assert made != data_of(call(srv, "about"))["requestId"]


AGENT = '''
import logging
from skillwire import Agent, SkillContext

agent = Agent("Logged", "Logs its request id")


@agent.skill(tags=["test"])
async def work(params, ctx: SkillContext) -> str:
    """Logs a line and answers the request id."""
    logging.getLogger("my.skill").warning("working")
    return ctx.request_id
'''


def test_the_text_log_lines_end_with_the_request_id(tmp_path: Path, processes: list[Served]) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    served = start_process(str(tmp_path / "agent.py"), "memory://", ROOT)
    processes.append(served)
    message = user_message("go")
    answer = httpx.post(
        served.url, json=rpc("SendMessage", {"message": message}), headers=A2A_V1, timeout=WAIT
    )
    request_id = answer.json()["result"]["task"]["artifacts"][0]["parts"][0]["text"]
    assert re.fullmatch("[0-9a-f]{16}", request_id)
    access = served.wait_for_output("INFO skillwire.access: JSONRPC SendMessage")
    assert access.rstrip().endswith(f"request={request_id}"), access
    own = served.wait_for_output("WARNING my.skill: working")
    assert own.rstrip().endswith(f"request={request_id}"), own


def test_the_span_has_the_request_id(serve: Serve) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider

    from otel_spans import Spans
    from skillwire.server.observability.telemetry import Telemetry

    spans = Spans()
    provider = TracerProvider()
    provider.add_span_processor(spans)
    srv = serve(agent({}).asgi(store="memory://", telemetry=Telemetry(provider)))
    call(srv, "about", **{"X-Request-Id": "req-span"})
    (span,) = spans.wait("A2A SendMessage")
    assert (span.attributes or {})["a2a.request_id"] == "req-span"
    provider.shutdown()


# -- time ----------------------------------------------------------------------------------------------------


def test_time_left_is_the_skills_time_limit(serve: Serve) -> None:
    srv = serve(agent({}).asgi(store="memory://"))
    assert 0 < data_of(call(srv, "about"))["left"] <= 30


def test_without_any_limit_there_is_no_deadline(serve: Serve) -> None:
    srv = serve(agent({}).asgi(store="memory://", limits=Limits(task_timeout=None)))
    assert data_of(call(srv, "unlimited")) == {"left": None, "deadline": None}
    limited = serve(agent({}).asgi(store="memory://"))
    assert 3000 < data_of(call(limited, "unlimited"))["left"] <= 3600  # Limits.task_timeout


def test_the_callers_grpc_deadline_comes_first(serve: Serve) -> None:
    import json

    srv = serve(agent({}).asgi(store="memory://", grpc_port=0))
    assert srv.app.grpc_address is not None
    with grpc.insecure_channel(srv.app.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        message = a2a_pb2.Message(message_id="g1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="go")])
        message.metadata.update({"skillId": "about"})
        answer = stub.SendMessage(
            a2a_pb2.SendMessageRequest(message=message), metadata=(("a2a-version", "1.0"),), timeout=5
        )
    from google.protobuf import json_format

    data = json.loads(json_format.MessageToJson(answer.task.artifacts[0].parts[0].data))
    # the caller's 5 s, not the skill's 30: gRPC's own time_remaining() in a handler can exceed the timeout
    # its client sent by a few ms (it rounds the grpc-timeout header up; measured with grpc.aio alone: 4.9988
    # to 5.0098 s over 200 calls with timeout=5), so the bound allows 0.1 s of that
    assert 0 < data["left"] <= 5.1


# -- progress that reached no one ---------------------------------------------------------------------------


async def test_progress_on_a_canceled_task_raises_task_closed(serve: Serve) -> None:
    seen: dict[str, Any] = {"started": threading.Event(), "done": threading.Event()}
    srv = serve(agent(seen).asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        from skillwire.types import SendMessageConfiguration

        now = SendMessageConfiguration(return_immediately=True)
        task = await client.send("go", skill="lingering", configuration=now)
        assert await asyncio.to_thread(seen["started"].wait, WAIT)
        canceled = await client.cancel_task(task.id)
    assert canceled.status.state is TaskState.CANCELED
    assert await asyncio.to_thread(seen["done"].wait, WAIT)  # the handler has run its except block
    for key in ("error", "artifact_error"):
        error = seen[key]
        assert isinstance(error, TaskClosedError) and error.state == "CANCELED" and error.task_id == task.id
    stored = await client_task(srv, task.id)
    assert stored.status.state is TaskState.CANCELED and not stored.artifacts


async def client_task(srv: RunningServer, task_id: str) -> Any:
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        return await client.get_task(task_id)


def test_progress_past_the_deadline_raises_task_closed(serve: Serve) -> None:
    seen: dict[str, Any] = {"started": threading.Event(), "done": threading.Event()}
    srv = serve(agent(seen).asgi(store="memory://"))
    task = call(srv, "overrun")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert seen["done"].wait(WAIT)  # the handler has run its except block
    assert isinstance(seen["error"], TaskClosedError) and seen["error"].state == "FAILED"


async def test_progress_the_store_cannot_record_raises_not_stored(
    serve: Serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: dict[str, Any] = {"working": threading.Event(), "done": threading.Event()}
    release = threading.Event()
    db = tmp_path / "tasks.db"
    srv = serve(agent(seen, release).asgi(store=f"sqlite:///{db}?timeout=0.2"))
    lock = None
    try:
        async with await Client.connect(srv.url, timeout=WAIT) as client:
            # a stream's events are published once the store holds them: WORKING is stored when it comes
            async for event in client.stream("go", skill="asking"):
                if event.status_update is not None and event.status_update.status.state is TaskState.WORKING:
                    break
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # another connection holds the write lock past the store's 0.2 s
        with caplog.at_level("WARNING", logger="skillwire.skills"):
            release.set()
            assert await asyncio.to_thread(seen["done"].wait, WAIT)
    finally:
        release.set()
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
    error = seen["error"]
    (outcome,) = seen["outcomes"]
    assert isinstance(error, ProgressNotStoredError) and error.task_id == outcome.task_id
    assert outcome.state is TaskState.FAILED and outcome.error is error
    stopped = [r for r in caplog.records if "stopped" in r.getMessage()]
    assert len(stopped) == 1 and "asking" in stopped[0].getMessage() and not stopped[0].exc_info
