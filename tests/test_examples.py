"""The example skills end to end over HTTP, driven by the official a2a-sdk client.

greeter (schemas, text or data input), workshop/countdown (progress and chunked artifacts),
workshop/interview (a multi-turn conversation), workshop/deploy (delegated long-running work, followed
again after a `kill -9` of the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf import json_format, struct_pb2

from conftest import EXAMPLES, RunningServer, free_port
from skillwire import Agent

WAIT = 20.0
T = TypeVar("T")


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


async def collect(events: AsyncIterator[pb.StreamResponse]) -> list[pb.StreamResponse]:
    async def drain() -> list[pb.StreamResponse]:
        async with aclosing(events):  # type: ignore[type-var]
            return [event async for event in events]

    return await within(drain())


def data_part(value: dict[str, Any]) -> pb.Part:
    data = struct_pb2.Value()
    data.struct_value.update(value)
    return pb.Part(data=data)


def request(*parts: pb.Part, skill: str | None = None, task_id: str = "") -> pb.SendMessageRequest:
    message = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=list(parts), task_id=task_id)
    if skill is not None:
        message.metadata.update({"skillId": skill})
    return pb.SendMessageRequest(message=message)


def say(text: str, **kw: Any) -> pb.SendMessageRequest:
    return request(pb.Part(text=text), **kw)


async def send(client: Client, req: pb.SendMessageRequest) -> pb.Task:
    (response,) = await collect(client.send_message(req))
    assert response.HasField("task"), response
    return response.task


def value(part: pb.Part) -> Any:
    return json_format.MessageToDict(part.data)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


@pytest.fixture
async def clients(
    serve: Callable[[Any], RunningServer], http: httpx.AsyncClient, tmp_path: Path
) -> AsyncIterator[Callable[[str], Awaitable[tuple[Client, Client]]]]:
    made: list[Client] = []

    async def connect(folder: str) -> tuple[Client, Client]:
        agent = Agent.from_folder(EXAMPLES / folder)
        srv = serve(agent.asgi(store=f"sqlite:///{tmp_path}/{folder}.db"))
        card = await A2ACardResolver(http, srv.url).get_agent_card()
        blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        made.extend([blocking, streaming])
        connect.cards.append(card)  # type: ignore[attr-defined]
        return blocking, streaming

    connect.cards = []  # type: ignore[attr-defined]
    yield connect
    for client in made:
        await client.close()


async def test_greeter_card_and_schemas(clients: Any, http: httpx.AsyncClient) -> None:
    blocking, _ = await clients("greeter")
    card = clients.cards[-1]
    assert card.name == "Greeter" and card.provider.organization == "skillwire examples"
    (skill,) = card.skills
    assert skill.id == "greet" and list(skill.input_modes) == ["text/plain", "application/json"]
    casual = await send(blocking, say("Ada"))
    assert casual.status.state == pb.TASK_STATE_COMPLETED
    assert casual.artifacts[0].parts[0].text == "Hi Ada!"
    formal = await send(blocking, request(data_part({"name": "Ada", "style": "formal"})))
    assert formal.artifacts[0].parts[0].text == "Good day, Ada. It is a pleasure to meet you."
    with pytest.raises(InvalidParamsError, match="style"):
        await send(blocking, request(data_part({"name": "Ada", "style": "shouty"})))
    with pytest.raises(InvalidParamsError, match="additional property"):
        await send(blocking, request(data_part({"name": "Ada", "mood": "happy"})))


async def test_countdown_streams_progress_and_chunks(clients: Any) -> None:
    _, streaming = await clients("workshop")
    events = await collect(streaming.send_message(say("4", skill="countdown")))
    assert events[0].HasField("task")
    assert events[1].status_update.status.state == pb.TASK_STATE_WORKING
    assert events[1].status_update.status.message.parts[0].text == "Counting down from 4"
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [c.artifact.parts[0].text for c in chunks] == ["4...", "3...", "2...", "1...", "Liftoff!"]
    assert [(c.append, c.last_chunk) for c in chunks[:4]] == [
        (False, False),
        (True, False),
        (True, False),
        (True, True),
    ]
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_interview_is_a_multi_turn_conversation(clients: Any) -> None:
    blocking, _ = await clients("workshop")
    first = await send(blocking, say("start", skill="interview"))
    assert first.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert first.status.message.parts[0].text == "What is your name?"
    second = await send(blocking, say("Ada", task_id=first.id))
    assert second.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert second.status.message.parts[0].text == "Nice to meet you, Ada. What is your favourite colour?"
    third = await send(blocking, say("teal", task_id=first.id))
    assert third.id == first.id and third.status.state == pb.TASK_STATE_COMPLETED
    assert value(third.artifacts[-1].parts[0]) == {"name": "Ada", "colour": "teal"}


async def test_routing_needs_a_skill_id_when_there_are_several(clients: Any) -> None:
    blocking, _ = await clients("workshop")
    with pytest.raises(InvalidParamsError, match="countdown, deploy, interview"):
        await send(blocking, say("hello"))


# -- delegated work across a server crash ------------------------------------------------------------------


class Server:
    def __init__(self, folder: Path, store: str, jobs: Path, cwd: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "SKILLWIRE_JOBS_DIR": str(jobs)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "skillwire",
                "serve",
                str(folder),
                "--port",
                str(self.port),
                "--store",
                store,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=cwd,
            env=env,
        )
        assert self.proc.stdout is not None
        seen = []
        for line in self.proc.stdout:
            seen.append(line)
            if "task store:" in line:
                break
        else:
            raise AssertionError("server did not start:\n" + "".join(seen))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(WAIT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


async def test_deploy_is_followed_again_after_kill_9(
    servers: list[Server], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path}/tasks.db"
    jobs = tmp_path / "jobs"
    first = Server(EXAMPLES / "workshop", store, jobs, tmp_path)
    servers.append(first)
    card = await A2ACardResolver(http, first.url).get_agent_card()
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
    try:
        events = client.send_message(request(data_part({"release": "v1.2.3", "steps": 6}), skill="deploy"))
        async with aclosing(events):  # type: ignore[type-var]
            async for event in events:
                if event.HasField("artifact_update"):
                    break  # the first step was reported: the job is running elsewhere
        task_id = event.artifact_update.task_id
    finally:
        await client.close()
    first.stop(signal.SIGKILL)  # the agent dies; the job does not

    second = Server(EXAMPLES / "workshop", store, jobs, tmp_path)
    servers.append(second)
    card = await A2ACardResolver(http, second.url).get_agent_card()
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
    try:
        done = await within(client.get_task(pb.GetTaskRequest(id=task_id)))
        if done.status.state == pb.TASK_STATE_WORKING:
            with contextlib.suppress(UnsupportedOperationError):  # it may finish between the two calls
                await collect(client.subscribe(pb.SubscribeToTaskRequest(id=task_id)))
            done = await within(client.get_task(pb.GetTaskRequest(id=task_id)))
    finally:
        await client.close()
    assert done.status.state == pb.TASK_STATE_COMPLETED
    steps = [p.text for a in done.artifacts if a.artifact_id == "job-log" for p in a.parts]
    assert steps == [f"step {i}/6: deploying v1.2.3." for i in range(1, 7)]
    assert done.artifacts[-1].parts[0].text == "release v1.2.3 is live."
    assert dict(done.metadata)["delegation"]["skillId"] == "deploy"


# -- deploy's workers: bounded, and stopped with their task --------------------------------------------------


def deploy_module(agent: Agent) -> dict[str, Any]:
    skill = agent.registry.get("deploy")
    assert skill is not None
    return skill.handler.__globals__


async def test_deploy_workers_are_bounded_and_stop_with_their_task(
    serve: Callable[[Any], RunningServer],
    http: httpx.AsyncClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SKILLWIRE_JOBS_DIR", str(tmp_path / "jobs"))
    monkeypatch.setenv("SKILLWIRE_DEPLOY_WORKERS", "1")
    agent = Agent.from_folder(EXAMPLES / "workshop")
    module = deploy_module(agent)
    srv = serve(agent.asgi(store=f"sqlite:///{tmp_path}/tasks.db"))
    card = await A2ACardResolver(http, srv.url).get_agent_card()
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
    slow = data_part({"release": "v9", "steps": 100})  # 30 s of work: longer than any wait here
    try:
        first = await send(client, request(slow, skill="deploy"))
        assert first.status.state == pb.TASK_STATE_WORKING
        (job,) = module["running_jobs"]()
        assert dict(first.metadata)["delegation"]["ref"]["pid"] == job.pid

        busy = await send(client, request(slow, skill="deploy"))
        assert busy.status.state == pb.TASK_STATE_REJECTED
        assert busy.status.message.parts[0].text == (
            "All 1 release workers are busy; try again when a release has finished."
        )

        canceled = await within(client.cancel_task(pb.CancelTaskRequest(id=first.id)))
        assert canceled.status.state == pb.TASK_STATE_CANCELED
        assert await within(asyncio.to_thread(job.wait, WAIT)) == -signal.SIGTERM  # stopped, not finished
        log = Path(dict(first.metadata)["delegation"]["ref"]["log"])
        assert "done:" not in await asyncio.to_thread(log.read_text)

        again = await send(client, request(slow, skill="deploy"))  # the slot is free again
        assert again.status.state == pb.TASK_STATE_WORKING
        (second,) = module["running_jobs"]()
        await within(client.cancel_task(pb.CancelTaskRequest(id=again.id)))
        assert await within(asyncio.to_thread(second.wait, WAIT)) == -signal.SIGTERM
    finally:
        await client.close()
        for process in module["running_jobs"]():
            process.kill()
            process.wait(WAIT)


def test_a_deploy_worker_stops_when_asked_through_its_stop_file(tmp_path: Path) -> None:
    # A job started by an earlier agent process cannot be signalled by this one: the stop file reaches it.
    log = tmp_path / "job.log"
    log.touch()
    worker = EXAMPLES / "workshop" / "deploy" / "worker.py"
    process = subprocess.Popen([sys.executable, str(worker), str(log), "v1", "1000"])
    try:
        (tmp_path / "job.log.stop").touch()
        assert process.wait(WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT)
    assert "done:" not in log.read_text()
