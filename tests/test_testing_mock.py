"""skillwire.testing.MockAgent: scripted replies, tasks, streams and errors, served in process and on a real
port, checked with skillwire's own Client and with the official a2a-sdk client."""

from __future__ import annotations

import ast
import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils import errors as sdk_errors

from conftest import A2A_V1, ROOT, assert_rpc_error, rpc, user_message
from skillwire import Client, Message, Task, TaskFailedError, TaskState
from skillwire.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from skillwire.testing import MockAgent, Pause, ReceivedRequest, StreamingASGITransport, artifact, status
from skillwire.types import Artifact, Operation, Part, Role, SendMessageConfiguration, StreamResponse

WAIT = 10.0


def user(text: str, *, skill: str | None = None, task_id: str = "") -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.USER,
        parts=[Part(text=text)],
        task_id=task_id,
        metadata={"skillId": skill} if skill else None,
    )


def kinds(events: list[StreamResponse]) -> list[str]:
    names = ("task", "message", "status_update", "artifact_update")
    return [next(n for n in names if getattr(e, n) is not None) for e in events]


def states(events: list[StreamResponse]) -> list[TaskState]:
    return [e.status_update.status.state for e in events if e.status_update is not None]


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    async with asyncio.timeout(WAIT), aclosing(stream):  # type: ignore[type-var]
        return [event async for event in stream]


def as_task(result: Task | Message) -> Task:
    assert isinstance(result, Task), result
    return result


def status_text(task: Task) -> str:
    assert task.status.message is not None
    return task.status.message.text()


# -- replies and tasks, in process --------------------------------------------------------------------------


async def test_a_mock_without_rules_echoes_each_message_as_a_direct_reply() -> None:
    mock = MockAgent("Echo mock")
    async with mock.client() as client:
        assert client.card.name == "Echo mock"
        reply = await client.send("hello")
    assert isinstance(reply, Message)
    assert reply.role is Role.AGENT and reply.text() == "hello"


async def test_reply_set_on_the_mock_answers_what_no_rule_matches() -> None:
    mock = MockAgent()
    mock.reply("hello back")
    mock.on(text="weather").reply("sunny")
    async with mock.client() as client:
        first, second = await client.send("hi"), await client.send("the weather?")
    assert isinstance(first, Message) and first.text() == "hello back"
    assert isinstance(second, Message) and second.text() == "sunny"


async def test_complete_gives_a_task_with_its_artifacts_and_status_message() -> None:
    mock = MockAgent()
    mock.on(text="weather").complete("sunny", artifact={"temp": 21}, artifacts=["a text artifact"])
    async with mock.client() as client:
        task = as_task(await client.send("weather in Paris"))
        stored = await client.get_task(task.id)
    assert task.status.state is TaskState.COMPLETED and status_text(task) == "sunny"
    assert [a.parts[0].data for a in task.artifacts[:1]] == [{"temp": 21}]
    assert task.artifacts[1].parts[0].text == "a text artifact"
    assert stored.status.state is TaskState.COMPLETED and len(stored.artifacts) == 2


async def test_fail_and_reject_end_the_task_with_their_message() -> None:
    mock = MockAgent()
    mock.on(text="break").fail("it broke")
    mock.reject("no")
    async with mock.client() as client:
        failed = as_task(await client.send("break it"))
        rejected = as_task(await client.send("anything"))
        with pytest.raises(TaskFailedError) as raised:
            await client.send("break again", raise_on_failure=True)
    assert (failed.status.state, status_text(failed)) == (TaskState.FAILED, "it broke")
    assert (rejected.status.state, status_text(rejected)) == (TaskState.REJECTED, "no")
    assert raised.value.task.status.state is TaskState.FAILED


async def test_run_answers_with_a_script_of_your_own() -> None:
    mock = MockAgent()

    async def shout(context: Any, events: Any) -> None:
        await events.working("thinking")
        await events.artifact(context.text.upper(), name="loud")

    mock.on(text="say").run(shout)
    async with mock.client() as client:
        task = as_task(await client.send("say hi"))
    assert task.status.state is TaskState.COMPLETED  # the runtime completes a task the script leaves working
    assert (task.artifacts[0].name, task.artifacts[0].parts[0].text) == ("loud", "SAY HI")


# -- rules -------------------------------------------------------------------------------------------------


async def test_rules_are_tried_in_order_and_once_rules_step_aside() -> None:
    mock = MockAgent()
    first = mock.on(text="hi").once().reply("first hi")
    regex = mock.on(text=re.compile(r"^h\w+$")).reply("any h-word")
    mock.on(text="hi").reply("never: the regex rule comes first")
    skill = mock.on(skill="deploy").times(2).reply("deploying")
    async with mock.client() as client:
        answers = [
            await client.send("hi"),
            await client.send("hi"),
            await client.send("hello"),
            await client.send(user("go", skill="deploy")),
            await client.send(user("go", skill="deploy")),
            await client.send(user("go", skill="deploy")),
        ]
    texts = [a.text() for a in answers if isinstance(a, Message)]
    assert texts == ["first hi", "any h-word", "any h-word", "deploying", "deploying", "go"]
    assert (first.hits, regex.hits, skill.hits, mock.default.hits) == (1, 2, 2, 1)


def test_bad_scripts_are_refused_when_written() -> None:
    mock = MockAgent()
    with pytest.raises(ValueError, match="not a task state"):
        mock.on(text="x").stream(["working", "some log text"])
    with pytest.raises(TypeError, match="not an A2AError"):
        mock.on(text="x").error(RuntimeError("boom"))  # type: ignore[arg-type]
    assert status("input-required").state is TaskState.INPUT_REQUIRED
    assert status(TaskState.AUTH_REQUIRED, "log in").text == "log in"


# -- ask and answer ------------------------------------------------------------------------------------


async def test_ask_leaves_the_task_waiting_and_the_answer_is_matched_by_the_next_rules() -> None:
    mock = MockAgent()
    mock.on(text="book", in_task=False).ask("Which city?")
    mock.on(text="Paris", in_task=True).complete("booked in Paris", artifact="ticket-42")
    mock.on(in_task=True).ask("Sorry, which city?")
    async with mock.client() as client:
        waiting = as_task(await client.send("book a hotel"))
        again = as_task(await client.send("somewhere", task_id=waiting.id))
        done = as_task(await client.send("Paris please", task_id=waiting.id))
    assert (waiting.status.state, status_text(waiting)) == (TaskState.INPUT_REQUIRED, "Which city?")
    assert (again.status.state, status_text(again)) == (TaskState.INPUT_REQUIRED, "Sorry, which city?")
    assert (done.id, done.status.state, status_text(done)) == (
        waiting.id,
        TaskState.COMPLETED,
        "booked in Paris",
    )
    assert done.artifacts[0].parts[0].text == "ticket-42"
    assert [m.text() for m in done.history if m.role is Role.USER] == [
        "book a hotel",
        "somewhere",
        "Paris please",
    ]


# -- streams -----------------------------------------------------------------------------------------------


async def test_stream_arrives_event_by_event_in_process_and_a_pause_holds_it() -> None:
    gate = Pause()
    mock = MockAgent(skills=["deploy"])
    mock.on(skill="deploy").stream(
        [status("working", "step 1"), artifact("log line", name="log"), gate, "completed"]
    )
    seen: list[StreamResponse] = []
    async with mock.client() as client:
        assert [s.id for s in client.card.skills] == ["deploy"]
        async with asyncio.timeout(WAIT):
            async for event in client.stream(user("ship it", skill="deploy")):
                seen.append(event)
                if event.artifact_update is not None:
                    # The agent is held at the pause: what came before it is all there is.
                    await gate.reached()
                    task = await client.get_task(event.artifact_update.task_id)
                    assert task.status.state is TaskState.WORKING and not gate.released
                    assert [a.name for a in task.artifacts] == ["log"]
                    gate.release()
    assert kinds(seen) == ["task", "status_update", "artifact_update", "status_update"]
    assert states(seen) == [TaskState.WORKING, TaskState.COMPLETED]


async def test_artifact_chunks_stream_as_appends_to_one_artifact() -> None:
    mock = MockAgent()
    mock.stream(
        [
            "working",
            artifact("a", artifact_id="out"),
            artifact("b", artifact_id="out", append=True),
            artifact(Artifact(artifact_id="out", parts=[Part(text="c")]), append=True, last_chunk=True),
        ]
    )
    async with mock.client(bindings=["HTTP+JSON"]) as client:
        events = await collect(client.stream("go"))
        task = await client.get_task(events[0].task.id if events[0].task else "")
    updates = [e.artifact_update for e in events if e.artifact_update is not None]
    assert [(u.append, u.last_chunk) for u in updates] == [(False, False), (True, False), (True, True)]
    assert [p.text for p in task.artifacts[0].parts] == ["a", "b", "c"]
    assert task.status.state is TaskState.COMPLETED  # completed after the last step


async def test_leaving_a_stream_early_does_not_cancel_the_task() -> None:
    gate = Pause()
    mock = MockAgent()
    mock.stream(["working", gate, artifact("done"), "completed"])
    async with mock.client() as client, asyncio.timeout(WAIT):
        async with aclosing(client.stream("go")) as stream:  # type: ignore[type-var]
            first = await anext(stream)
        assert first.task is not None
        await gate.reached()  # the stream is closed; the task waits at the pause
        async with aclosing(client.subscribe(first.task.id)) as events:  # type: ignore[type-var]
            snapshot = await anext(events)
            gate.release()
            rest = [event async for event in events]
    assert snapshot.task is not None and snapshot.task.status.state is TaskState.WORKING
    assert kinds(rest) == ["artifact_update", "status_update"]
    assert states(rest) == [TaskState.COMPLETED]


# -- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_error_rule_is_a_typed_protocol_error_and_makes_no_task(binding: str) -> None:
    mock = MockAgent()
    mock.on(text="boom").error(TaskNotFoundError("nope", metadata={"taskId": "t-1"}))
    mock.on(text="odd").error(InvalidParamsError("bad input"))
    async with mock.client(bindings=[binding]) as client:
        with pytest.raises(TaskNotFoundError, match="nope"):
            await client.send("boom")
        with pytest.raises(TaskNotFoundError, match="nope"):
            await collect(client.stream("boom"))
        with pytest.raises(InvalidParamsError, match="bad input"):
            await client.send("odd")
        listed = await client.list_tasks()
    assert listed.tasks == []
    assert [r.binding for r in mock.requests] == [binding] * 4


async def test_errors_have_the_wire_shape_of_each_binding() -> None:
    mock = MockAgent()
    mock.error(TaskNotFoundError("nope"))
    app = mock.asgi()
    await app.startup()
    try:
        transport = StreamingASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mock", headers=A2A_V1) as http:
            rpc_answer = await http.post("/", json=rpc("SendMessage", {"message": user_message("x")}))
            rest_answer = await http.post("/message:send", json={"message": user_message("x")})
    finally:
        await app.shutdown()
    assert rpc_answer.status_code == 200
    assert assert_rpc_error(rpc_answer.json(), -32001)["message"] == "nope"
    assert rest_answer.status_code == 404
    assert rest_answer.json()["error"]["status"] == "NOT_FOUND"


# -- what the mock received ------------------------------------------------------------------------------


async def test_requests_records_every_call_with_its_operation_and_params() -> None:
    mock = MockAgent()
    mock.on(text="task").stream(["working", Pause()])  # stays working until canceled
    async with mock.client() as client, asyncio.timeout(WAIT):
        await client.send(user("hi", skill="greet"))
        now = SendMessageConfiguration(return_immediately=True)
        task = as_task(await client.send("a task", configuration=now, metadata={"trace": "1"}))
        await client.cancel_task(task.id)
        with pytest.raises(UnsupportedOperationError):
            await client.send("more", task_id=task.id)
    assert [r.operation for r in mock.requests] == [
        Operation.SEND_MESSAGE,
        Operation.SEND_MESSAGE,
        Operation.CANCEL_TASK,
        Operation.SEND_MESSAGE,
    ]
    assert [r.text for r in mock.requests] == ["hi", "a task", "", "more"]
    assert mock.requests[1].params.metadata == {"trace": "1"}
    assert mock.requests[2].params.id == task.id
    assert [m.text() for m in mock.messages] == ["hi", "a task", "more"]
    assert mock.messages[0].metadata == {"skillId": "greet"}
    assert isinstance(mock.requests[0], ReceivedRequest) and mock.requests[0].binding == "JSONRPC"


# -- on a real port --------------------------------------------------------------------------------------


async def test_serve_runs_a_real_server_that_a_paused_stream_crosses_threads_with() -> None:
    gate = Pause()
    mock = MockAgent("Threaded")
    mock.on(text="long").stream(["working", gate, "completed"])
    mock.on(text="boom").error(TaskNotFoundError("nope"))
    with mock.serve() as url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        async with await Client.connect(url, bindings=["HTTP+JSON"]) as client:
            assert client.card.name == "Threaded"
            reply = await client.send("hi")
            with pytest.raises(TaskNotFoundError):
                await client.send("boom")
            seen: list[StreamResponse] = []
            async with asyncio.timeout(WAIT):
                async for event in client.stream("long job"):
                    seen.append(event)
                    if event.status_update is not None and not gate.released:
                        await gate.reached()
                        gate.release()
    assert isinstance(reply, Message) and reply.text() == "hi"
    assert states(seen) == [TaskState.WORKING, TaskState.COMPLETED]
    with pytest.raises(httpx.ConnectError):  # stopped with the block
        async with httpx.AsyncClient() as http:
            await http.get(url)


async def test_serve_async_runs_the_server_in_the_running_loop() -> None:
    mock = MockAgent()
    mock.on(text="weather").complete("sunny", artifact={"temp": 21})
    async with mock.serve_async() as url, await Client.connect(url) as client:
        task = as_task(await client.send("weather"))
        events = await collect(client.stream("weather"))
    assert task.artifacts[0].parts[0].data == {"temp": 21}
    assert states(events) == [TaskState.COMPLETED]


# -- the official a2a-sdk client against mock.serve() -----------------------------------------------------


def sdk_request(text: str, *, task_id: str = "") -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)], task_id=task_id
        )
    )


async def sdk_collect(events: AsyncIterator[pb.StreamResponse]) -> list[pb.StreamResponse]:
    async with asyncio.timeout(WAIT), aclosing(events):  # type: ignore[type-var]
        return [event async for event in events]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a2a_sdk_client_against_the_served_mock(binding: str) -> None:
    mock = MockAgent("SDK mock")
    mock.on(text="weather").complete("sunny", artifact={"temp": 21})
    mock.on(text="deploy").stream([status("working", "step 1"), artifact("log", name="log"), "completed"])
    mock.on(text="boom").error(TaskNotFoundError("nope"))
    mock.on(text="book").ask("Which city?")
    mock.on(in_task=True).complete("booked")
    with mock.serve() as url:
        async with httpx.AsyncClient(timeout=WAIT) as http:

            def config(streaming: bool) -> ClientConfig:
                return ClientConfig(
                    httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
                )

            card = await A2ACardResolver(http, url).get_agent_card()
            blocking = ClientFactory(config(False)).create(card)
            streaming = ClientFactory(config(True)).create(card)
            async with blocking, streaming:
                (reply,) = await sdk_collect(blocking.send_message(sdk_request("hello")))
                (done,) = await sdk_collect(blocking.send_message(sdk_request("weather?")))
                events = await sdk_collect(streaming.send_message(sdk_request("deploy")))
                with pytest.raises(sdk_errors.TaskNotFoundError, match="nope"):
                    await sdk_collect(blocking.send_message(sdk_request("boom")))
                (asked,) = await sdk_collect(blocking.send_message(sdk_request("book")))
                answer = await sdk_collect(
                    streaming.send_message(sdk_request("Paris", task_id=asked.task.id))
                )
    assert reply.message.parts[0].text == "hello"
    assert done.task.status.state == pb.TASK_STATE_COMPLETED
    assert done.task.status.message.parts[0].text == "sunny"
    assert dict(done.task.artifacts[0].parts[0].data.struct_value) == {"temp": 21}
    assert [e.WhichOneof("payload") for e in events] == [
        "task",
        "status_update",
        "artifact_update",
        "status_update",
    ]
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    assert asked.task.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert asked.task.status.message.parts[0].text == "Which city?"
    # The answer's stream opens with the task working on the answer, then it completes.
    assert [e.WhichOneof("payload") for e in answer] == ["task", "status_update"]
    assert answer[0].task.id == asked.task.id
    assert answer[0].task.status.state == pb.TASK_STATE_WORKING
    assert answer[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    assert [r.text for r in mock.requests if r.message] == [
        "hello",
        "weather?",
        "deploy",
        "boom",
        "book",
        "Paris",
    ]
    assert {r.binding for r in mock.requests} == {binding}


# -- the user guide --------------------------------------------------------------------------------------

GUIDE = ROOT / "docs" / "testing.md"


async def test_the_guides_first_example_runs_and_the_others_compile() -> None:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    blocks = [b for b in blocks if "test_client()" not in b]  # those are run by tests/test_test_client.py
    first, *fragments = blocks
    namespace: dict[str, Any] = {}
    exec(compile(first, str(GUIDE), "exec"), namespace)
    await namespace["test_my_client_reads_the_forecast"]()
    assert namespace["mock"].requests[0].text == "weather in Paris?"
    for code in fragments:  # fragments of a test: they may await
        compile(code, str(GUIDE), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert len(fragments) >= 2
