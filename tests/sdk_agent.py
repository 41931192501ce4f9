"""A test agent written against the official a2a-sdk 1.3, the peer of ``test_client_interop_sdk.py``.

It serves the agent card, JSON-RPC (``/a2a/jsonrpc``) and HTTP+JSON (under ``/a2a/rest`` by default) from one
Starlette app, with the sdk's in-memory task and push-config stores and an extended card; given a ``grpc_port``,
the app's lifespan also serves gRPC there (``host:grpc_port``, the sdk's ``GrpcHandler`` over the same request
handler). What it does depends on the text of the user's message:

=============  ==========================================================================================
``message``    a direct Message reply, no task
``tenant``     a direct Message reply naming the tenant the request was routed to (``tenant=...``)
``stream N``   WORKING, then N chunks of one artifact (``chunk 0`` .. ``chunk N-1``, appended), COMPLETED
``slow``       WORKING, then waits until :meth:`SdkExecutor.release` (an artifact ``released``, COMPLETED)
               or a cancel (CANCELED, from the executor's ``cancel``)
``ask``        INPUT_REQUIRED with a question; the next message on the task completes it
``fail``       WORKING, then FAILED with a status message
``crash``      WORKING, then the executor raises (the sdk marks the task FAILED)
anything else  COMPLETED with one artifact echoing the text
=============  ==========================================================================================

::

    app, executor = create_app("127.0.0.1", 8000, grpc_port=50051)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator

import grpc.aio  # type: ignore[import-untyped]
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    a2a_pb2_grpc,
)
from starlette.applications import Starlette

RPC_PATH = "/a2a/jsonrpc"
REST_PREFIX = "/a2a/rest"
AGENT_NAME = "skillwire interop agent (a2a-sdk)"
EXTENDED_SKILL = "secret"
QUESTION = "What is your name?"
FAILURE = "the agent failed on purpose"
DIRECT_REPLY = "a direct reply"
CRASH = "the agent crashed on purpose"
GRPC_GRACE = 1.0  # seconds the gRPC server gives open calls to end when the app stops
_STREAM = re.compile(r"^stream\s+(\d+)$")


class SdkExecutor(AgentExecutor):
    """The behaviours in the module docstring. ``slow`` tasks wait on an asyncio.Event each, which
    :meth:`release` sets from any thread."""

    def __init__(self) -> None:
        self._gates: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def release(self, task_id: str) -> None:
        """Let the ``slow`` task ``task_id`` complete (thread-safe; the task must have been seen)."""
        gate = self._gates[task_id]
        assert self._loop is not None
        self._loop.call_soon_threadsafe(gate.set)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id, message = context.task_id, context.context_id, context.message
        if not task_id or not context_id or message is None:
            return
        self._loop = asyncio.get_running_loop()
        text = context.get_user_input().strip()
        updater = TaskUpdater(event_queue=event_queue, task_id=task_id, context_id=context_id)
        current = context.current_task
        if current is not None:  # a follow-up on a task waiting for input
            await updater.add_artifact(parts=[Part(text=f"hello, {text}")], name="answer")
            await updater.complete()
            return
        if text in ("message", "tenant"):  # a reply with no task
            reply = DIRECT_REPLY if text == "message" else f"tenant={context.tenant}"
            await event_queue.enqueue_event(
                Message(
                    message_id=str(uuid.uuid4()),
                    context_id=context_id,
                    role=Role.ROLE_AGENT,
                    parts=[Part(text=reply)],
                )
            )
            return
        if text == "slow":
            # Made before the task is announced, so a client that has seen the task can release it.
            self._gates[task_id] = asyncio.Event()
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
        )
        await self._run(text, task_id, updater)

    async def _run(self, text: str, task_id: str, updater: TaskUpdater) -> None:
        command = _STREAM.match(text)
        if command is not None:
            await updater.start_work()
            chunks = int(command.group(1))
            for i in range(chunks):
                await updater.add_artifact(
                    parts=[Part(text=f"chunk {i}")],
                    artifact_id=f"{task_id}-stream",
                    name="stream",
                    append=i > 0,
                    last_chunk=i == chunks - 1,
                )
            await updater.complete()
        elif text == "slow":
            await updater.start_work()
            try:
                await self._gates[task_id].wait()  # or cancelled by the sdk after cancel() below
            finally:
                del self._gates[task_id]
            await updater.add_artifact(parts=[Part(text="released")], name="slow")
            await updater.complete()
        elif text == "ask":
            await updater.requires_input(updater.new_agent_message([Part(text=QUESTION)]))
        elif text == "crash":
            await updater.start_work()
            raise RuntimeError(CRASH)
        elif text == "fail":
            await updater.start_work()
            await updater.failed(updater.new_agent_message([Part(text=FAILURE)]))
        else:
            await updater.add_artifact(parts=[Part(text=text)], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The sdk calls this before it cancels ``execute``: announce CANCELED while the queue is open."""
        updater = TaskUpdater(
            event_queue=event_queue, task_id=context.task_id or "", context_id=context.context_id or ""
        )
        await updater.cancel(updater.new_agent_message([Part(text="canceled by the client")]))


def build_cards(
    host: str, port: int, *, rest_prefix: str = REST_PREFIX, tenant: str = "", grpc_port: int | None = None
) -> tuple[AgentCard, AgentCard]:
    """The public card and the extended card (one more skill) for an agent at ``host:port``, with a GRPC
    interface at ``host:grpc_port`` after the HTTP ones if given; with a ``tenant``, every interface names it."""
    base = f"http://{host}:{port}"
    skill = AgentSkill(
        id="echo",
        name="Echo",
        description="Echoes text; 'stream N', 'slow', 'ask', 'fail', 'crash', 'message', 'tenant' do more.",
        tags=["test"],
        examples=["hello", "stream 3"],
    )
    card = AgentCard(
        name=AGENT_NAME,
        description="An a2a-sdk agent for client interop tests.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[skill],
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base + RPC_PATH, tenant=tenant
            ),
            AgentInterface(
                protocol_binding="HTTP+JSON", protocol_version="1.0", url=base + rest_prefix, tenant=tenant
            ),
        ],
    )
    if grpc_port is not None:
        card.supported_interfaces.append(
            AgentInterface(
                protocol_binding="GRPC", protocol_version="1.0", url=f"{host}:{grpc_port}", tenant=tenant
            )
        )
    extended = AgentCard()
    extended.CopyFrom(card)
    extended.skills.append(
        AgentSkill(id=EXTENDED_SKILL, name="Secret", description="Only on the extended card.", tags=["test"])
    )
    return card, extended


def create_app(
    host: str, port: int, *, rest_prefix: str = REST_PREFIX, tenant: str = "", grpc_port: int | None = None
) -> tuple[Starlette, SdkExecutor]:
    """The Starlette app of the agent (its card advertises ``host:port``) and its executor. HTTP+JSON is
    served under ``rest_prefix``; a ``tenant`` is only advertised on the card (the sdk routes any). With a
    ``grpc_port``, the lifespan serves gRPC on ``host:grpc_port`` (on the app's event loop) until shutdown."""
    card, extended = build_cards(host, port, rest_prefix=rest_prefix, tenant=tenant, grpc_port=grpc_port)
    executor = SdkExecutor()
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore(),
        extended_agent_card=extended,
    )
    routes = [
        *create_agent_card_routes(agent_card=card),
        *create_jsonrpc_routes(request_handler=handler, rpc_url=RPC_PATH),
        # Last: the REST routes end with a catch-all ``/{tenant}`` mount.
        *create_rest_routes(request_handler=handler, path_prefix=rest_prefix),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            async with contextlib.AsyncExitStack() as stack:
                if grpc_port is not None:
                    await stack.enter_async_context(_grpc_server(handler, f"{host}:{grpc_port}"))
                yield
        finally:
            await handler.aclose()  # no agent task outlives the server

    return Starlette(routes=routes, lifespan=lifespan), executor


@contextlib.asynccontextmanager
async def _grpc_server(handler: DefaultRequestHandler, address: str) -> AsyncIterator[None]:
    """The sdk's gRPC binding of ``handler`` (``lf.a2a.v1.A2AService``), served on ``address`` meanwhile."""
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)  # type: ignore[no-untyped-call]
    if server.add_insecure_port(address) == 0:
        raise RuntimeError(f"cannot serve gRPC on {address}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(grace=GRPC_GRACE)
