"""A mock A2A agent for testing clients: canned replies, tasks, streams and errors, served for real.

::

    from skillwire.testing import MockAgent, Pause, artifact, status

    mock = MockAgent("Weather")
    mock.on(text="weather").complete("sunny", artifact={"temp": 21})
    mock.on(text="boom").error(TaskNotFoundError("no such task"))

    async with mock.client() as client:          # in process, no port
        task = await client.send("weather in Paris")

    with mock.serve() as url:                    # a real server on 127.0.0.1, for any client
        ...

The mock is a real skillwire agent (task runtime, memory store, every HTTP binding) whose executor plays
the scripted answers, so what a client sees is what a conformant agent sends. Rules are tried in the order
they were added; the first that matches answers. A message no rule matches gets the default answer: an echo
of its parts as a direct Message, unless ``mock.reply(...)``, ``mock.error(...)`` ... set another one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from skillwire.agent import Agent
from skillwire.errors import A2AError
from skillwire.protocol.models import AgentSkill, Artifact, Message, Part
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import TaskState
from skillwire.server.app import A2AApplication
from skillwire.server.context import CallContext
from skillwire.server.handler import RequestHandler
from skillwire.server.serving.serve import build_server
from skillwire.server.tasks.executor import Executor, RequestContext, TaskEvents, Work
from skillwire.skills.executor import routed_skill_id
from skillwire.stores.memory import MemoryTaskStore
from skillwire.testing.transport import StreamingASGITransport

if TYPE_CHECKING:
    from skillwire.client import Client

__all__ = [
    "MockAgent",
    "Pause",
    "ReceivedRequest",
    "Rule",
    "artifact",
    "status",
]

Content = str | Message | Sequence[Part]
Script = Callable[[RequestContext, TaskEvents], Awaitable[None]]


# -- stream steps -------------------------------------------------------------------------------------------


class _Flag:
    """An event that any thread may set and any event loop may await."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            self._set = True
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody is waiting any more
                loop.call_soon_threadsafe(_resolve, future)

    async def wait(self) -> None:
        with self._lock:
            if self._set:
                return
            loop = asyncio.get_running_loop()
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter[1]
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove(waiter)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Pause:
    """A point in a canned stream where the agent waits until the test calls :meth:`release`.

    The test sees everything emitted before the pause (stream events, ``GetTask``) with no sleeps::

        gate = Pause()
        mock.on(text="deploy").stream(["working", gate, "completed"])
        ...                       # observe the WORKING task
        gate.release()

    It works from any thread and event loop (``mock.serve()`` runs the agent in a thread). Once released it
    stays released; a task still paused when the mock stops is failed."""

    def __init__(self) -> None:
        self._released = _Flag()
        self._reached = _Flag()

    def release(self) -> None:
        self._released.set()

    @property
    def released(self) -> bool:
        return self._released.is_set()

    @property
    def is_reached(self) -> bool:
        """Whether the agent has come to this pause."""
        return self._reached.is_set()

    async def reached(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 - a cap for tests
        """Wait until the agent comes to this pause (TimeoutError after ``timeout`` seconds)."""
        await asyncio.wait_for(self._reached.wait(), timeout)

    async def _hold(self) -> None:
        self._reached.set()
        await self._released.wait()


@dataclass(frozen=True, slots=True)
class _Status:
    state: TaskState
    text: str | None


@dataclass(frozen=True, slots=True)
class _ArtifactUpdate:
    artifact: Artifact
    append: bool
    last_chunk: bool


Step = _Status | _ArtifactUpdate | Pause | TaskState | str


def _state(value: TaskState | str) -> TaskState:
    if isinstance(value, TaskState):
        return value
    name = value.strip().upper().replace("-", "_")
    try:
        return TaskState(name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}")
    except ValueError:
        raise ValueError(
            f"{value!r} is not a task state (working, completed, input-required, failed, ...);"
            " use status(state, text) or artifact(content) for a step with content"
        ) from None


def status(state: TaskState | str, text: str | None = None) -> _Status:
    """A stream step: the task moves to ``state`` ("working", "input-required", TaskState.COMPLETED ...),
    with ``text`` as the status message."""
    return _Status(_state(state), text)


def _parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part(text=content)]
    if isinstance(content, Part):
        return [content]
    if isinstance(content, list | tuple) and content and all(isinstance(p, Part) for p in content):
        return list(content)
    return [Part(data=content)]  # any other JSON value is a data part


def _artifact(content: Any, name: str = "", description: str = "", artifact_id: str = "") -> Artifact:
    if isinstance(content, Artifact):
        return content
    return Artifact(
        artifact_id=artifact_id or str(uuid.uuid4()),
        name=name,
        description=description,
        parts=_parts(content),
    )


def artifact(
    content: Any,
    *,
    name: str = "",
    description: str = "",
    artifact_id: str = "",
    append: bool = False,
    last_chunk: bool = False,
) -> _ArtifactUpdate:
    """A stream step: an artifact (text for a ``str``, a data part for any other JSON value, or Parts, or
    an Artifact). Chunks of one artifact share an ``artifact_id`` and set ``append``/``last_chunk``."""
    return _ArtifactUpdate(_artifact(content, name, description, artifact_id), append, last_chunk)


def _step(value: Step) -> _Status | _ArtifactUpdate | Pause:
    return value if isinstance(value, _Status | _ArtifactUpdate | Pause) else _Status(_state(value), None)


# -- responses ------------------------------------------------------------------------------------------


async def _echo(context: RequestContext, events: TaskEvents) -> None:
    await events.reply(list(context.message.parts))


def _reply(content: Content) -> Script:
    async def play(context: RequestContext, events: TaskEvents) -> None:
        await events.reply(content)

    return play


def _steps(steps: Sequence[Step]) -> Script:
    script = [_step(s) for s in steps]  # bad steps fail here, when the rule is written

    async def play(context: RequestContext, events: TaskEvents) -> None:
        for step in script:
            if isinstance(step, Pause):
                await step._hold()
            elif isinstance(step, _Status):
                await events.status(step.state, step.text)
            else:
                await events.artifact(step.artifact, append=step.append, last_chunk=step.last_chunk)

    return play


@dataclass(frozen=True, slots=True)
class _Refusal:
    error: A2AError


class Rule:
    """When a message matches, how the mock answers. Made by :meth:`MockAgent.on`; every method returns the
    rule, so a rule reads as one line: ``mock.on(text="hi").once().reply("hello")``."""

    def __init__(
        self,
        *,
        text: str | re.Pattern[str] | None = None,
        skill: str | None = None,
        in_task: bool | None = None,
        when: Callable[[RequestContext], bool] | None = None,
    ) -> None:
        self.text = text
        self.skill = skill
        self.in_task = in_task
        self.when = when
        #: How many messages this rule has answered.
        self.hits = 0
        self.limit: int | None = None
        self._answer: Script | _Refusal | None = None

    def matches(self, context: RequestContext, skill_id: str | None = None) -> bool:
        """Whether this rule answers ``context``, routed to the skill ``skill_id`` (None: no skill)."""
        if self._answer is None or (self.limit is not None and self.hits >= self.limit):
            return False
        if isinstance(self.text, str) and self.text not in context.text:
            return False
        if isinstance(self.text, re.Pattern) and self.text.search(context.text) is None:
            return False
        if self.skill is not None and self.skill != skill_id:
            return False
        if self.in_task is not None and self.in_task != (context.task is not None):
            return False
        return self.when is None or self.when(context)

    # -- how often ------------------------------------------------------------------------------------------

    def times(self, n: int) -> Rule:
        """Answer at most ``n`` messages; later ones go to the next rule that matches."""
        self.limit = n
        return self

    def once(self) -> Rule:
        return self.times(1)

    # -- answers ----------------------------------------------------------------------------------------

    def reply(self, content: Content) -> Rule:
        """Answer with a direct Message (no task); in a task that asked for input, complete it with it."""
        return self._set(_reply(content))

    def complete(
        self, text: str | None = None, *, artifact: Any = None, artifacts: Sequence[Any] = ()
    ) -> Rule:
        """A task that completes with ``text`` as its status message, after its artifacts (a ``str`` is a
        text part, an Artifact or Parts are used as they are, any other JSON value is a data part)."""
        items = [*([artifact] if artifact is not None else []), *artifacts]
        return self.stream(
            [*(_ArtifactUpdate(_artifact(a), False, False) for a in items), status("completed", text)]
        )

    def ask(self, question: str) -> Rule:
        """A task that stops in INPUT_REQUIRED with ``question``; the client's answer (a message in the same
        task) is matched against the rules like any message (see ``in_task``)."""
        return self.stream([status("input-required", question)])

    def fail(self, text: str = "The task failed.") -> Rule:
        return self.stream([status("failed", text)])

    def reject(self, text: str = "The task was rejected.") -> Rule:
        return self.stream([status("rejected", text)])

    def stream(self, steps: Sequence[Step]) -> Rule:
        """A task that goes through ``steps``: state names or TaskStates, :func:`status`, :func:`artifact` and
        :class:`Pause`. A task still SUBMITTED or WORKING after the last step is completed. A streaming
        client sees each step as an event; a blocking one gets the task when it ends or asks for input."""
        return self._set(_steps(steps))

    def error(self, error: A2AError) -> Rule:
        """Refuse the message with a protocol error (JSON-RPC error, HTTP error status); no task is made."""
        if not isinstance(error, A2AError):
            raise TypeError(f"{error!r} is not an A2AError")
        return self._set(_Refusal(error))

    def run(self, script: Script) -> Rule:
        """Answer with your own ``async def script(context, events)``, as an Executor would."""
        return self._set(script)

    def _set(self, answer: Script | _Refusal) -> Rule:
        self._answer = answer
        return self


def _route(context: RequestContext, skills: Sequence[AgentSkill]) -> str | None:
    """The skill the message goes to, as skillwire's skill router picks it: ``skillId`` in the metadata of
    the message that started the task (this one, for a new task), else the only skill; a mock whose card
    lists skills refuses what the router refuses (an unknown skillId, none among several: -32602). Without
    skills on its card the mock refuses nothing: the skill is the skillId named, if any."""
    origin = context.task.history[0] if context.task is not None and context.task.history else context.message
    if skills:
        return routed_skill_id(origin, [s.id for s in skills])
    wanted = (origin.metadata or {}).get("skillId")
    return wanted if isinstance(wanted, str) else None


# -- what the mock received ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One call the mock received: the operation, its decoded v1.0 request, and the binding."""

    operation: Operation
    params: Any
    binding: str

    @property
    def message(self) -> Message | None:
        """The message of a SendMessage or SendStreamingMessage, else None."""
        message = getattr(self.params, "message", None)
        return message if isinstance(message, Message) else None

    @property
    def text(self) -> str:
        return self.message.text() if self.message is not None else ""


class _Recorder:
    """Wraps the task runtime to note every call before handing it on."""

    def __init__(self, inner: RequestHandler, log: list[ReceivedRequest]) -> None:
        self._inner = inner
        self._log = log

    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any:
        self._log.append(ReceivedRequest(operation, params, context.binding))
        return await self._inner.handle(operation, params, context)


class _ScriptedExecutor(Executor):
    """Picks the rule in ``admit`` (so an error rule refuses the message before any task exists) and
    returns the work that plays it."""

    def __init__(self, mock: MockAgent) -> None:
        self._mock = mock

    async def admit(self, context: RequestContext) -> Work:
        rule = self._mock._rule_for(context, _route(context, self._mock.skills))
        rule.hits += 1
        answer = rule._answer
        if isinstance(answer, _Refusal):
            raise answer.error
        assert answer is not None  # a rule without an answer matches nothing
        return functools.partial(answer, context)

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        play = await self.admit(context)
        await play(events)


# -- the mock ---------------------------------------------------------------------------------------------


class MockAgent:
    """A scripted A2A agent. ``on(...)`` adds a rule; ``reply``/``complete``/``ask``/``fail``/``reject``/
    ``stream``/``error``/``run`` on the mock itself set the answer to messages no rule matches (an echo until
    then). Serve it with :meth:`client` (in process), :meth:`serve` (a thread) or :meth:`serve_async`."""

    def __init__(
        self,
        name: str = "Mock Agent",
        description: str = "",
        *,
        skills: Sequence[AgentSkill | str] = (),
        streaming: bool = True,
    ) -> None:
        self.name = name
        self.description = description or f"{name}, a scripted agent for tests"
        self.skills = [s if isinstance(s, AgentSkill) else _card_skill(s) for s in skills]
        self.streaming = streaming
        self.rules: list[Rule] = []
        #: Every call received, in order (across servings); clear it with ``requests.clear()``.
        self.requests: list[ReceivedRequest] = []
        self.default = Rule().run(_echo)

    # -- rules ------------------------------------------------------------------------------------------

    def on(
        self,
        *,
        text: str | re.Pattern[str] | None = None,
        skill: str | None = None,
        in_task: bool | None = None,
        when: Callable[[RequestContext], bool] | None = None,
    ) -> Rule:
        """A rule for messages whose text contains ``text`` (or matches it, for a compiled pattern), that go
        to skill ``skill`` (routed as a skillwire skill agent routes it: its first message's
        ``metadata.skillId``, else the only skill on the card), that continue a task (``in_task=True``) or start one
        (``False``), and for which ``when(context)`` is true; every condition given must hold. The rule
        answers once it is given an answer: ``mock.on(text="hi").reply("hello")``."""
        rule = Rule(text=text, skill=skill, in_task=in_task, when=when)
        self.rules.append(rule)
        return rule

    def reply(self, content: Content) -> Rule:
        return self.default.reply(content)

    def complete(
        self, text: str | None = None, *, artifact: Any = None, artifacts: Sequence[Any] = ()
    ) -> Rule:
        return self.default.complete(text, artifact=artifact, artifacts=artifacts)

    def ask(self, question: str) -> Rule:
        return self.default.ask(question)

    def fail(self, text: str = "The task failed.") -> Rule:
        return self.default.fail(text)

    def reject(self, text: str = "The task was rejected.") -> Rule:
        return self.default.reject(text)

    def stream(self, steps: Sequence[Step]) -> Rule:
        return self.default.stream(steps)

    def error(self, error: A2AError) -> Rule:
        return self.default.error(error)

    def run(self, script: Script) -> Rule:
        return self.default.run(script)

    def _rule_for(self, context: RequestContext, skill_id: str | None) -> Rule:
        return next((r for r in self.rules if r.matches(context, skill_id)), self.default)

    @property
    def messages(self) -> list[Message]:
        """The messages received (SendMessage and SendStreamingMessage), in order."""
        return [r.message for r in self.requests if r.message is not None]

    # -- serving ----------------------------------------------------------------------------------------

    def asgi(self) -> A2AApplication:
        """A fresh ASGI application for the mock (a new memory store), to mount wherever you like."""
        agent = Agent(
            self.name,
            self.description,
            executor=_ScriptedExecutor(self),
            skills=self.skills,
            streaming=self.streaming,
            # a stand-in for any agent: it takes every part (a rule may still answer with an error)
            default_input_modes=["*/*"],
        )
        # Tasks still running when the mock stops (a stream the test left, an unreleased Pause) are failed at
        # once: a test should not wait for them.
        return agent.asgi(
            store=MemoryTaskStore(),
            wrap=lambda runtime: _Recorder(runtime, self.requests),
            shutdown_grace=0.0,
        )

    @asynccontextmanager
    async def client(
        self,
        *,
        bindings: Sequence[str] = ("JSONRPC", "HTTP+JSON"),
        headers: dict[str, str] | None = None,
    ) -> AsyncIterator[Client]:
        """A skillwire :class:`~skillwire.Client` talking to the mock in this event loop, with no socket.
        Responses stream as the agent sends them (see :class:`StreamingASGITransport`)."""
        from skillwire.client import Client

        app = self.asgi()
        await app.startup()
        try:
            base_url = "http://mock-agent.test"
            async with httpx.AsyncClient(transport=StreamingASGITransport(app), base_url=base_url) as http:
                client = await Client.connect(
                    base_url, http=http, bindings=bindings, headers=headers, retries=0
                )
                async with client:
                    yield client
        finally:
            await app.shutdown()

    @contextmanager
    def serve(self, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 15.0) -> Iterator[str]:
        """Serve the mock under uvicorn in a background thread; yields its base URL for any client (the
        a2a-sdk, curl, your own). ``port=0`` takes a free port."""
        app = self.asgi()
        sock, url = _listen(host, port)
        ready = threading.Event()
        server = build_server(app, host=host, port=port, on_ready=ready.set)

        def run_server() -> None:
            try:
                server.run(sockets=[sock])
            finally:
                ready.set()  # also when start-up failed

        thread = threading.Thread(target=run_server, name=f"mock-agent-{url}", daemon=True)
        thread.start()
        try:
            if not ready.wait(timeout) or not server.started:
                raise RuntimeError(f"the mock agent did not start on {url}")
            yield url
        finally:
            server.should_exit = True
            thread.join(timeout)
            sock.close()

    @asynccontextmanager
    async def serve_async(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 15.0,  # noqa: ASYNC109 - a cap on start-up
    ) -> AsyncIterator[str]:
        """Like :meth:`serve`, but in the running event loop: use it with async clients only (a blocking
        client would block the loop the mock runs in)."""
        app = self.asgi()
        sock, url = _listen(host, port)
        ready = asyncio.Event()
        server = build_server(app, host=host, port=port, on_ready=ready.set)
        serving = asyncio.create_task(server.serve(sockets=[sock]), name=f"mock-agent-{url}")
        started = asyncio.create_task(ready.wait())
        try:
            await asyncio.wait({serving, started}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():
                raise RuntimeError(f"the mock agent did not start on {url}")
            yield url
        finally:
            started.cancel()
            server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(serving, timeout)
            sock.close()


def _card_skill(skill_id: str) -> AgentSkill:
    return AgentSkill(id=skill_id, name=skill_id, description=f"The {skill_id} skill (mocked)", tags=["mock"])


def _listen(host: str, port: int) -> tuple[socket.socket, str]:
    """A bound socket (the server listens on it) and its URL: no race for a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    return sock, f"http://[{host}]:{bound}" if family == socket.AF_INET6 else f"http://{host}:{bound}"
