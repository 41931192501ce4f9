"""The plan skill: route the parts of a request to downstream A2A agents and follow their tasks.

The planner is deterministic (SKILL.md says how it routes): it reads the downstream agents' cards, matches
the first word of each part naming a skill id or tag, and sends the rest of the part to that skill with
``skillwire.Client``. Configuration, read at every run:

* ``PLANNER_AGENTS``: the downstream agents' base URLs, comma-separated (required);
* ``PLANNER_MAX_STEPS``: the most parts one request may have (default 8);
* ``PLANNER_CALL_TIMEOUT``: seconds for one step, card discovery included (default 30).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from msgspec import UNSET

from skillwire import A2AError, Client, ClientError, SkillContext, SkillError, Task, TaskState
from skillwire.errors import UnsupportedOperationError
from skillwire.types import SendMessageConfiguration, StreamResponse

AGENTS_ENV = "PLANNER_AGENTS"
MAX_STEPS_ENV = "PLANNER_MAX_STEPS"
CALL_TIMEOUT_ENV = "PLANNER_CALL_TIMEOUT"
DEFAULT_MAX_STEPS = 8
DEFAULT_CALL_TIMEOUT = 30.0
#: How long cancelling a downstream task that ran out of time (or whose plan was cancelled) may take.
CANCEL_WAIT = 2.0
_ENDED = {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
_WAITING = {TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED}
_AT_ONCE = SendMessageConfiguration(return_immediately=True)


@dataclass(frozen=True, slots=True)
class Budget:
    agents: list[str]
    max_steps: int
    call_timeout: float


@dataclass(slots=True)
class Downstream:
    url: str
    client: Client | None = None
    reason: str = ""  # why the card could not be read

    @property
    def name(self) -> str:
        return self.client.card.name if self.client is not None else self.url


@dataclass(frozen=True, slots=True)
class Route:
    agent: Downstream
    skill: str
    text: str


@dataclass(slots=True)
class Step:
    """One routed part as it is followed; ``record()`` is its entry in the result."""

    route: Route
    task_id: str | None = None
    state: str = "ERROR"
    output: list[str] = field(default_factory=list)
    message: str | None = None

    def record(self) -> dict[str, Any]:
        agent = self.route.agent
        return {
            "agent": agent.url,
            "agentName": agent.name,
            "skill": self.route.skill,
            "input": self.route.text,
            "taskId": self.task_id,
            "state": self.state,
            "output": "\n".join(self.output),
            "message": self.message,
        }


async def run(params: dict[str, Any], ctx: SkillContext) -> dict[str, Any]:
    request = params["request"]
    parts = split(request)
    budget = read_budget()
    if not parts:
        raise SkillError.invalid_request("The request is empty: name a skill and what to send it.")
    if len(parts) > budget.max_steps:
        raise SkillError.rejected(
            f"The request has {len(parts)} parts; this planner runs at most {budget.max_steps} steps"
            f" ({MAX_STEPS_ENV})."
        )
    async with contextlib.AsyncExitStack() as stack:
        agents = await discover(budget, stack)
        routes = plan(parts, agents)
        await ctx.working(f"Planned {len(routes)} step(s): " + ", ".join(_label(r) for r in routes))
        steps = [await follow(Step(r), i, len(routes), budget, ctx) for i, r in enumerate(routes, 1)]
    done = sum(step.state == "COMPLETED" for step in steps)
    return {
        "summary": f"{done} of {len(steps)} step(s) completed",
        "steps": [step.record() for step in steps],
        "unreachable": [{"agent": a.url, "reason": a.reason} for a in agents if a.client is None],
    }


# -- planning ----------------------------------------------------------------------------------------------


def split(request: str) -> list[str]:
    """The parts of a request: split at ``;`` and line breaks, blank parts left out."""
    return [part.strip() for part in re.split(r"[;\n]", request) if part.strip()]


def read_budget() -> Budget:
    agents = [url.strip() for url in os.environ.get(AGENTS_ENV, "").split(",") if url.strip()]
    if not agents:
        raise SkillError.invalid_request(
            f"No downstream agents are configured: set {AGENTS_ENV} to their URLs, comma-separated."
        )
    return Budget(
        agents,
        _number(MAX_STEPS_ENV, DEFAULT_MAX_STEPS, int),
        _number(CALL_TIMEOUT_ENV, DEFAULT_CALL_TIMEOUT, float),
    )


def _number(name: str, default: float, kind: type[int] | type[float]) -> Any:
    raw = os.environ.get(name, "").strip()
    try:
        value = kind(raw) if raw else default
    except ValueError:
        value = 0
    if not (math.isfinite(value) and value > 0):
        raise SkillError.invalid_request(f"{name} must be a positive number, not {raw!r}.")
    return value


async def discover(budget: Budget, stack: contextlib.AsyncExitStack) -> list[Downstream]:
    """The downstream agents, connected (their cards read) at once; each failure keeps its reason."""
    agents = [Downstream(url) for url in budget.agents]
    await asyncio.gather(*(_connect(agent, budget.call_timeout, stack) for agent in agents))
    return agents


async def _connect(agent: Downstream, timeout: float, stack: contextlib.AsyncExitStack) -> None:  # noqa: ASYNC109
    if not agent.url.startswith(("http://", "https://")):
        agent.reason = "not an http:// or https:// URL"
        return
    try:
        async with asyncio.timeout(timeout):
            agent.client = await Client.connect(agent.url, timeout=timeout, retries=1)
        stack.push_async_callback(agent.client.aclose)
    except TimeoutError:
        agent.reason = f"its agent card was not read within {timeout:g} s"
    except (ClientError, A2AError) as exc:
        agent.reason = f"cannot read its agent card: {exc}"


def plan(parts: Sequence[str], agents: Sequence[Downstream]) -> list[Route]:
    """A route for every part, or a SkillError naming the first part that no skill matches or that has
    nothing to send."""
    keywords = _keywords(agents)
    routes = []
    for part in parts:
        route = _route(part, keywords)
        if route is None:
            known = ", ".join(sorted(keywords)) or "none"
            missing = "; ".join(f"{a.url} ({a.reason})" for a in agents if a.client is None)
            raise SkillError.invalid_request(
                f"No downstream skill matches {part!r}: start it with a skill id or tag (known: {known})."
                + (f" Unreachable agents: {missing}." if missing else "")
            )
        if not route.text:
            raise SkillError.invalid_request(
                f"Nothing to send in {part!r}: write what {route.skill} should get after its name."
            )
        routes.append(route)
    return routes


def _keywords(agents: Sequence[Downstream]) -> dict[str, tuple[tuple[int, int, int], Downstream, str]]:
    """keyword -> (rank, agent, skill id): the best skill each id or tag names (ids first, then order)."""
    found: dict[str, tuple[tuple[int, int, int], Downstream, str]] = {}
    for a, agent in enumerate(agents):
        if agent.client is None:
            continue
        for s, skill in enumerate(agent.client.card.skills):
            for kind, words in ((0, [skill.id]), (1, skill.tags)):
                for word in words:
                    rank = (kind, a, s)
                    key = word.lower()
                    if key not in found or rank < found[key][0]:
                        found[key] = (rank, agent, skill.id)
    return found


def _route(part: str, keywords: dict[str, tuple[tuple[int, int, int], Downstream, str]]) -> Route | None:
    for word in re.finditer(r"\S+", part):
        hit = keywords.get(word.group().lower().rstrip(".,:!?"))
        if hit is not None:
            return Route(hit[1], hit[2], part[word.end() :].strip())
    return None


def _label(route: Route) -> str:
    return f"{route.skill} on {route.agent.name}"


# -- following ---------------------------------------------------------------------------------------------


async def follow(step: Step, index: int, total: int, budget: Budget, ctx: SkillContext) -> Step:
    """Send the step and follow its task until it ends or waits, within the budget; never raises for a
    downstream failure: the step records it."""
    client = step.route.agent.client
    assert client is not None  # routes only go to connected agents
    label = f"Step {index}/{total} ({_label(step.route)})"
    try:
        async with asyncio.timeout(budget.call_timeout):
            task = await _send(client, step, label, ctx)
    except TimeoutError:
        step.state, step.message = "TIMEOUT", f"no end within {budget.call_timeout:g} s ({CALL_TIMEOUT_ENV})"
        await _cancel(client, step.task_id)
    except (ClientError, A2AError) as exc:
        step.state, step.message = "ERROR", str(exc)
    except asyncio.CancelledError:  # the plan itself was cancelled or ran out of time
        await _cancel(client, step.task_id)
        raise
    else:
        if task is not None:
            step.state = task.status.state.name
            # one line per artifact; the parts of an artifact (chunks of a stream) run on
            step.output = ["".join(_text(part) for part in artifact.parts) for artifact in task.artifacts]
            status = task.status.message
            step.message = status.text() if status is not None else None
        return step  # (its progress is reported)
    await ctx.working(f"{label}: {step.state}: {step.message}")
    return step


async def _send(client: Client, step: Step, label: str, ctx: SkillContext) -> Task | None:
    """The task's final snapshot (None when the agent answered with a message, kept as the output).

    The message is sent with ``returnImmediately``, so that the task exists (and has an id to report and to
    cancel) before the agent has said anything; then the task is followed with SubscribeToTask, or polled
    with GetTask when the agent does not stream."""
    route = step.route
    sent = await client.send(route.text, skill=route.skill, configuration=_AT_ONCE)
    if not isinstance(sent, Task):
        step.state, step.output = "COMPLETED", [sent.text()]
        await ctx.working(f"{label}: answered with a message")
        return None
    step.task_id = sent.id
    reported: list[TaskState] = []

    async def report(state: TaskState) -> None:
        if not reported or reported[-1] is not state:
            reported.append(state)
            await ctx.working(f"{label}: task {sent.id} is {state.name}")

    await report(sent.status.state)
    if sent.status.state not in _ENDED | _WAITING and client.card.capabilities.streaming:
        try:
            async with contextlib.aclosing(client.subscribe(sent.id)) as events:  # type: ignore[type-var]
                async for event in events:
                    state = _state(event)
                    if state is not None:
                        await report(state)
                        if state in _ENDED | _WAITING:
                            break
        except UnsupportedOperationError:  # it ended between the two calls: nothing left to follow
            pass
    task = await client.get_task(sent.id)
    if task.status.state not in _ENDED | _WAITING:  # an agent without streaming, or a stream cut short
        task = await client.wait(sent.id)
    await report(task.status.state)
    return task


def _state(event: StreamResponse) -> TaskState | None:
    if event.task is not None:
        return event.task.status.state
    if event.status_update is not None:
        return event.status_update.status.state
    return None


def _text(part: Any) -> str:
    if part.text is not UNSET:
        return str(part.text)
    if part.data is not UNSET:
        return json.dumps(part.data, separators=(",", ":"), ensure_ascii=False)
    return f"[file {part.filename or part.media_type or 'attachment'}]"


async def _cancel(client: Client, task_id: str | None) -> None:
    """Best effort: a downstream task this plan gives up on is cancelled, not left working."""
    if task_id is None:
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CANCEL_WAIT):
            await client.cancel_task(task_id)
