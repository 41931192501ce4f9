"""The example agents of issue 17 that call or watch other work, end to end on real ports.

examples/planner-router: a planner and real downstream skillwire agents (examples/greeter, examples/echo_skill,
a clerk defined here), served by uvicorn in this process or by `skillwire serve` in subprocesses configured
through PLANNER_AGENTS. examples/outcome-hook: every way a run ends, recorded as JSON lines by its hook.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLES, RunningServer, Served, example_agent, free_port, start_process
from skillwire import Agent, Client, Outcome, SkillContext, SkillError, Task, TaskState
from skillwire.cli.main import main
from skillwire.errors import UnsupportedOperationError
from skillwire.types import StreamResponse

WAIT = 20.0
PLANNER = EXAMPLES / "planner-router"
HOOKED = EXAMPLES / "outcome-hook"
Serve = Callable[[Any], RunningServer]


def clerk() -> Agent:
    """A downstream agent whose skills complete, fail, ask for input and hang."""
    agent = Agent("Clerk", "Does small jobs for the planner's tests.")

    @agent.skill(tags=["shout"])
    async def upper(text: str) -> str:
        """Upper-cases the text."""
        return text.upper()

    @agent.skill(tags=["broken"])
    async def fail(text: str) -> str:
        """Always fails."""
        raise SkillError.invalid_request(f"Cannot handle {text!r}.")

    @agent.skill(tags=["question"])
    async def ask(text: str, ctx: SkillContext) -> str:
        """Asks which one before answering."""
        return (await ctx.ask(f"Which {text}?")).text

    @agent.skill(tags=["hang"])
    async def hang(text: str) -> str:
        """Never ends by itself (until cancelled)."""
        await asyncio.Event().wait()
        return text

    return agent


async def plan(url: str, request: str) -> Task:
    async with await Client.connect(url) as client:
        task = await asyncio.wait_for(client.send(request), WAIT)
    assert isinstance(task, Task)
    return task


def result(task: Task) -> Any:
    assert task.status.state is TaskState.COMPLETED, task.status
    (artifact,) = task.artifacts
    return artifact.parts[0].data


def reason(task: Task) -> str:
    assert task.status.message is not None
    return task.status.message.text()


def summary(step: dict[str, Any]) -> tuple[str, str, str, str | None]:
    return step["skill"], step["state"], step["output"], step["message"]


@pytest.fixture
def start_planner(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> Callable[..., RunningServer]:
    """``start_planner(*urls, **env)``: the planner served in this process, routing to ``urls``, with the
    environment variables ``env``."""

    def start(*urls: str, **env: str) -> RunningServer:
        monkeypatch.setenv("PLANNER_AGENTS", ",".join(urls))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return serve(Agent.from_folder(PLANNER).asgi(store="memory://"))

    return start


# -- planner-router ----------------------------------------------------------------------------------------


async def test_planner_routes_to_agents_served_by_skillwire_serve(
    processes: list[Served], tmp_path: Path
) -> None:
    greeter = start_process(str(EXAMPLES / "greeter"), "memory://", tmp_path)
    processes.append(greeter)
    echo = start_process(str(EXAMPLES / "echo_skill"), "memory://", tmp_path)
    processes.append(echo)
    env = {**os.environ, "PLANNER_AGENTS": f"{greeter.url}, {echo.url}", "PLANNER_CALL_TIMEOUT": "15"}
    planner = start_process(str(PLANNER), "memory://", tmp_path, env=env)
    processes.append(planner)

    async with await Client.connect(planner.url) as client, asyncio.timeout(WAIT):
        events = [event async for event in client.stream("please greet Ada; echo hello there")]
    task = events[-1].status_update
    assert task is not None and task.status.state is TaskState.COMPLETED
    async with await Client.connect(planner.url) as client:
        done = await client.get_task(task.task_id)
    steps = result(done)["steps"]
    assert [(s["agent"], s["agentName"], s["input"]) for s in steps] == [
        (greeter.url, "Greeter", "Ada"),
        (echo.url, "Echo (skill)", "hello there"),
    ]
    assert [summary(s) for s in steps] == [
        ("greet", "COMPLETED", "Hi Ada!", None),
        ("echo", "COMPLETED", "hello there", None),
    ]
    assert result(done)["summary"] == "2 of 2 step(s) completed" and result(done)["unreachable"] == []
    async with await Client.connect(greeter.url) as client:  # the step's task is the downstream task
        followed = await client.get_task(steps[0]["taskId"])
    assert followed.status.state is TaskState.COMPLETED
    progress = [note for note in map(_note, events) if note is not None]
    assert progress[0] == "Planned 2 step(s): greet on Greeter, echo on Echo (skill)"
    first, second = (
        f"Step {i}/2 ({s['skill']} on {s['agentName']}): task {s['taskId']} is"
        for i, s in enumerate(steps, 1)
    )
    assert progress[1] == f"{first} SUBMITTED" and progress[-1] == f"{second} COMPLETED"
    assert f"{first} COMPLETED" in progress


def _note(event: StreamResponse) -> str | None:
    """The progress note of a WORKING status update."""
    update = event.status_update
    if update is None or update.status.state is not TaskState.WORKING or update.status.message is None:
        return None
    return update.status.message.text()


async def test_planner_reports_failed_and_waiting_downstream_tasks(
    serve: Serve, start_planner: Callable[..., RunningServer]
) -> None:
    greeter = serve(example_agent("greeter").asgi(store="memory://"))
    worker = serve(clerk().asgi(store="memory://"))
    planner = start_planner(greeter.url, worker.url)

    task = await plan(planner.url, "greet Ada\nshout hello; broken part; question colour; greet " + "A" * 101)
    steps = result(task)["steps"]
    assert [summary(s) for s in steps[:4]] == [
        ("greet", "COMPLETED", "Hi Ada!", None),
        ("upper", "COMPLETED", "HELLO", None),
        ("fail", "FAILED", "", "Cannot handle 'part'."),
        ("ask", "INPUT_REQUIRED", "", "Which colour?"),
    ]
    refused = steps[4]  # the greeter refuses a name over 100 characters outright: no task
    assert (refused["state"], refused["taskId"], refused["output"]) == ("ERROR", None, "")
    assert refused["message"].startswith("Invalid input for skill 'greet': /name")
    assert result(task)["summary"] == "2 of 5 step(s) completed"
    async with await Client.connect(worker.url) as client:  # the waiting task can be answered where it is
        answered = await client.send("teal", task_id=steps[3]["taskId"])
    assert isinstance(answered, Task) and answered.status.state is TaskState.COMPLETED
    empty = await plan(planner.url, "greet Ada; shout")  # refused before anything is sent
    assert reason(empty) == "Nothing to send in 'shout': write what upper should get after its name."


async def test_planner_reports_an_agent_that_is_down(
    serve: Serve, start_planner: Callable[..., RunningServer]
) -> None:
    greeter = serve(example_agent("greeter").asgi(store="memory://"))
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    planner = start_planner(greeter.url, closed, "ftp://agents.example")

    routed = result(await plan(planner.url, "greet Ada"))
    assert [summary(s) for s in routed["steps"]] == [("greet", "COMPLETED", "Hi Ada!", None)]
    down, odd = routed["unreachable"]
    assert down["agent"] == closed and down["reason"].startswith("cannot read its agent card: ConnectError")
    assert odd == {"agent": "ftp://agents.example", "reason": "not an http:// or https:// URL"}

    unroutable = await plan(planner.url, "greet Ada; echo hello")
    assert unroutable.status.state is TaskState.FAILED
    assert reason(unroutable).startswith(
        "No downstream skill matches 'echo hello': start it with a skill id or tag"
        " (known: example, greet, greeting). Unreachable agents: "
        f"{closed} (cannot read its agent card: ConnectError"
    )


async def test_planner_caps_its_steps_before_calling_anyone(
    serve: Serve, start_planner: Callable[..., RunningServer]
) -> None:
    greeter = serve(example_agent("greeter").asgi(store="memory://"))
    planner = start_planner(greeter.url, PLANNER_MAX_STEPS="2")
    capped = await plan(planner.url, "greet Ada; greet Alan; greet Grace")
    assert capped.status.state is TaskState.REJECTED
    assert reason(capped) == "The request has 3 parts; this planner runs at most 2 steps (PLANNER_MAX_STEPS)."
    async with await Client.connect(greeter.url) as client:
        assert (await client.list_tasks()).tasks == []
    assert [s["input"] for s in result(await plan(planner.url, "greet Ada; greet Alan"))["steps"]] == [
        "Ada",
        "Alan",
    ]


async def test_planner_stops_and_cancels_a_step_past_its_timeout(
    serve: Serve, start_planner: Callable[..., RunningServer]
) -> None:
    worker = serve(clerk().asgi(store="memory://"))
    planner = start_planner(worker.url, PLANNER_CALL_TIMEOUT="0.5")
    (step, after) = result(await plan(planner.url, "hang on; shout after"))["steps"]
    assert summary(step) == ("hang", "TIMEOUT", "", "no end within 0.5 s (PLANNER_CALL_TIMEOUT)")
    assert summary(after) == ("upper", "COMPLETED", "AFTER", None)  # the next step still runs
    async with await Client.connect(worker.url) as client:
        assert (await client.get_task(step["taskId"])).status.state is TaskState.CANCELED


async def test_a_cancelled_plan_cancels_its_downstream_task(
    serve: Serve, start_planner: Callable[..., RunningServer]
) -> None:
    worker = serve(clerk().asgi(store="memory://"))
    planner = start_planner(worker.url)
    async with await Client.connect(planner.url) as client:
        async with aclosing(client.stream("hang on")) as events:  # type: ignore[type-var]
            async for event in events:
                note = _note(event)
                if note is not None and note.endswith(" is SUBMITTED"):  # the downstream task exists
                    break
        assert event.status_update is not None
        await client.cancel_task(event.status_update.task_id)
    async with await Client.connect(worker.url) as client:
        (hanging,) = (await client.list_tasks()).tasks
    assert await final_state(worker.url, hanging.id) is TaskState.CANCELED


async def final_state(url: str, task_id: str) -> TaskState:
    """The state ``task_id`` ends in, waiting for its end on a stream."""
    async with await Client.connect(url) as client:
        try:
            async with asyncio.timeout(WAIT):
                async for _ in client.subscribe(task_id):
                    pass
        except UnsupportedOperationError:  # it had ended already
            pass
        return (await client.get_task(task_id)).status.state


async def test_planner_without_configuration_fails_with_the_reason(
    start_planner: Callable[..., RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    planner = start_planner(f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("PLANNER_AGENTS", " ")
    unset = await plan(planner.url, "greet Ada")
    assert unset.status.state is TaskState.FAILED
    assert (
        reason(unset)
        == "No downstream agents are configured: set PLANNER_AGENTS to their URLs, comma-separated."
    )
    monkeypatch.setenv("PLANNER_AGENTS", "http://127.0.0.1:1")
    monkeypatch.setenv("PLANNER_CALL_TIMEOUT", "soon")
    bad = await plan(planner.url, "greet Ada")
    assert reason(bad) == "PLANNER_CALL_TIMEOUT must be a positive number, not 'soon'."


# -- outcome-hook ------------------------------------------------------------------------------------------


@pytest.fixture
def outcomes() -> queue.Queue[Outcome]:
    """Outcomes seen by a hook registered after the example's: once one is here, its line is written."""
    return queue.Queue()


def hooked(outcomes: queue.Queue[Outcome], *extra: Any) -> Agent:
    agent = example_agent("outcome-hook")
    for hook in extra:
        agent.on_outcome(hook)
    agent.on_outcome(outcomes.put)
    return agent


async def next_outcome(outcomes: queue.Queue[Outcome]) -> Outcome:
    return await asyncio.to_thread(outcomes.get, timeout=WAIT)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_outcome_hook_records_every_way_a_run_ends(
    serve: Serve, outcomes: queue.Queue[Outcome], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "logs" / "outcomes.jsonl"
    log.parent.mkdir()
    monkeypatch.setenv("OUTCOME_LOG", str(log))
    srv = serve(hooked(outcomes).asgi(store="memory://"))
    async with await Client.connect(srv.url) as client:
        upper = await client.send("hello", skill="upper")
        divide = await client.send(skill="divide", data={"a": 1, "b": 0})
        asked = await client.send("deploy", skill="confirm")
        refused = await client.send("delete", skill="confirm")
        assert isinstance(upper, Task) and isinstance(divide, Task)
        assert isinstance(asked, Task) and asked.status.state is TaskState.INPUT_REQUIRED
        assert isinstance(refused, Task) and refused.status.state is TaskState.INPUT_REQUIRED
        # A run is over once its hooks are: the task takes its answer after that.
        runs = {(await next_outcome(outcomes)).task_id for _ in range(4)}
        assert runs == {upper.id, divide.id, asked.id, refused.id}
        yes = await client.send("yes", task_id=asked.id)
        no = await client.send("no", task_id=refused.id)
        async with aclosing(client.stream(skill="pause", data={"seconds": 60})) as events:  # type: ignore[type-var]
            async for event in events:
                if event.status_update is not None and event.status_update.status.state is TaskState.WORKING:
                    paused = event.status_update.task_id
                    break
        await client.cancel_task(paused)
        for _ in range(3):
            await next_outcome(outcomes)
    assert isinstance(yes, Task) and yes.status.state is TaskState.COMPLETED
    assert isinstance(no, Task) and no.status.state is TaskState.REJECTED
    records = {(r["task"], r["state"]): r for r in lines(log)}
    expected = [
        (upper.id, "upper", "COMPLETED", None, None),
        (divide.id, "divide", "FAILED", "Cannot divide by zero.", "SkillInvalidRequestError"),
        (asked.id, "confirm", "INPUT_REQUIRED", None, None),
        (asked.id, "confirm", "COMPLETED", None, None),
        (refused.id, "confirm", "INPUT_REQUIRED", None, None),
        (refused.id, "confirm", "REJECTED", "Not confirmed: delete was not done.", "SkillRejectedError"),
        (paused, "pause", "CANCELED", "cancelled (CancelTask)", "CancelledError"),
    ]
    assert len(records) == len(expected) == len(lines(log))
    for task_id, skill, state, error, error_type in expected:
        line = records[(task_id, state)]
        assert (line["skill"], line["error"], line["errorType"]) == (skill, error, error_type)
        assert isinstance(line["durationSeconds"], float) and 0 <= line["durationSeconds"] < WAIT
        assert line["context"] and line["time"].endswith("+00:00")


async def test_a_failing_outcome_hook_does_not_fail_the_task(
    serve: Serve,
    outcomes: queue.Queue[Outcome],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(outcome: Outcome) -> None:
        raise RuntimeError("the hook broke")

    monkeypatch.setenv("OUTCOME_LOG", str(tmp_path))  # a folder: the example's hook cannot append to it
    srv = serve(hooked(outcomes, boom).asgi(store="memory://"))
    with caplog.at_level(logging.ERROR, logger="skillwire.skills"):
        async with await Client.connect(srv.url) as client:
            done = await client.send("still fine", skill="upper")
            seen = await next_outcome(outcomes)  # the hooks after the failing ones still ran
    assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED
    assert done.artifacts[0].parts[0].text == "STILL FINE"
    assert seen.task_id == done.id and seen.state is TaskState.COMPLETED
    failures = [r for r in caplog.records if r.getMessage().startswith("outcome hook")]
    assert len(failures) == 2
    assert {type(r.exc_info[1]) for r in failures if r.exc_info} == {IsADirectoryError, RuntimeError}


async def test_outcome_log_defaults_to_the_current_folder(
    serve: Serve, outcomes: queue.Queue[Outcome], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OUTCOME_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    srv = serve(hooked(outcomes).asgi(store="memory://"))
    async with await Client.connect(srv.url) as client:
        done = await client.send("here", skill="upper")
        await next_outcome(outcomes)
    assert isinstance(done, Task)
    ((line,),) = [lines(tmp_path / "outcomes.jsonl")]
    assert (line["task"], line["state"], line["error"]) == (done.id, "COMPLETED", None)


# -- both examples pass `skills check --strict` ----------------------------------------------------------------


@pytest.mark.parametrize("folder", [PLANNER, HOOKED], ids=["planner-router", "outcome-hook"])
def test_examples_pass_skills_check(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skills", "check", "--strict", str(folder)]) == 0
    assert "valid" in capsys.readouterr().out
