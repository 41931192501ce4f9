"""Agent.asgi: ``handler=`` replaces the task runtime, ``wrap=`` stands in front of it; and skill errors end
their tasks in the state their type names, seen through a real server and the skillwire client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conftest import RecordingHandler, RunningServer
from skillwire import (
    Agent,
    BaseRequestHandler,
    CallContext,
    Client,
    SkillContext,
    SkillError,
    Task,
    TaskState,
)
from skillwire.errors import SkillInvalidRequestError, SkillRejectedError, TaskNotFoundError
from skillwire.protocol.models import GetTaskRequest

WAIT = 10.0
Serve = Callable[[Any], RunningServer]


def echo() -> Agent:
    async def run(context: Any, events: Any) -> None:
        await events.artifact(context.text)

    return Agent("echo", "Says it back.", executor=run)


class NoTasks(BaseRequestHandler):
    """A handler of its own: every task is missing."""

    async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> Task:
        raise TaskNotFoundError(f"{request.id} is not here (NoTasks)")


async def test_wrap_puts_a_handler_in_front_of_the_runtime(serve: Serve) -> None:
    wrappers: list[RecordingHandler] = []

    def wrap(runtime: Any) -> RecordingHandler:
        wrappers.append(RecordingHandler(runtime))
        return wrappers[-1]

    app = echo().asgi(store="memory://", wrap=wrap)
    assert len(wrappers) == 1 and app.runtime is not None and wrappers[0].inner is app.runtime
    srv = serve(app)
    async with await Client.connect(srv.url, timeout=WAIT, headers={"X-Probe": "1"}) as client:
        task = await client.send("hello")
    assert isinstance(task, Task) and task.artifacts[0].parts[0].text == "hello"
    assert [h.get("x-probe") for h in wrappers[0].headers] == ["1"]


async def test_handler_replaces_the_runtime(serve: Serve) -> None:
    app = echo().asgi(store="memory://", handler=NoTasks())
    assert app.runtime is None
    srv = serve(app)
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        with pytest.raises(TaskNotFoundError, match="NoTasks"):
            await client.get_task("t-1")


def test_handler_and_wrap_together_are_refused() -> None:
    with pytest.raises(TypeError, match="not both"):
        echo().asgi(store="memory://", handler=NoTasks(), wrap=RecordingHandler)


@pytest.mark.parametrize("given", [RecordingHandler, lambda runtime: RecordingHandler(runtime)])
def test_handler_takes_no_wrapper(given: Any) -> None:
    with pytest.raises(TypeError, match="pass wrap="):
        echo().asgi(store="memory://", handler=given)


# -- skill errors end tasks by their type --------------------------------------------------------------


class OverBudget(SkillRejectedError):
    """A skill's own refusal type: still a rejection."""


def refusing() -> Agent:
    agent = Agent("refusing", "Ends tasks by the error it raises.")

    @agent.skill(tags=["test"])
    async def order(params: Any, ctx: SkillContext) -> str:
        """The order skill."""
        errors: dict[str, SkillError] = {
            "invalid": SkillError.invalid_request("The date must be in the future."),
            "bare": SkillError("No such product."),
            "typed-invalid": SkillInvalidRequestError("Quantity must be positive."),
            "rejected": SkillError.rejected("Orders over 100 need approval."),
            "subclass": OverBudget("Over this month's budget."),
        }
        raise errors[params["text"]]

    return agent


@pytest.mark.parametrize(
    ("text", "state", "message"),
    [
        ("invalid", TaskState.FAILED, "The date must be in the future."),
        ("bare", TaskState.FAILED, "No such product."),
        ("typed-invalid", TaskState.FAILED, "Quantity must be positive."),
        ("rejected", TaskState.REJECTED, "Orders over 100 need approval."),
        ("subclass", TaskState.REJECTED, "Over this month's budget."),
    ],
)
async def test_skill_errors_end_the_task_in_the_state_of_their_type(
    serve: Serve, text: str, state: TaskState, message: str
) -> None:
    srv = serve(refusing().asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        task = await client.send(text)
        assert isinstance(task, Task)
        stored = await client.get_task(task.id)
    for seen in (task, stored):
        assert seen.status.state is state
        assert seen.status.message is not None and seen.status.message.parts[0].text == message
