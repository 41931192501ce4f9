"""The benchmark echo agent written against the official a2a-sdk 1.3.

This is the baseline that ``bench/run.py`` measures skillwire against. It behaves
like skillwire's ``examples/echo`` agent:

* ``stream N``: create a task, go WORKING, emit N artifact-update chunks of one
  artifact (``chunk 0`` .. ``chunk N-1``; the first with ``append=false``, the
  rest with ``append=true``, the last with ``lastChunk=true``), then complete.
* any other text: create a task and complete it at once, echoing the text back
  as a single text artifact.

Served over the JSON-RPC binding (``POST /``) and the HTTP+JSON binding
(``POST /message:send``, ``POST /message:stream``, ``GET /tasks/{id}``, ...), both
protocol v1.0, with an in-memory task store, as a plain Starlette app (no FastAPI) so
the framework overhead is the SDK's own::

    BENCH_PORT=8000 uvicorn bench.a2a_sdk_echo:app --host 127.0.0.1 --port 8000

With ``BENCH_GRPC_PORT`` set, the app also starts the SDK's gRPC binding
(``lf.a2a.v1.A2AService`` through ``GrpcHandler``, a ``grpc.aio`` server) on
``BENCH_HOST:BENCH_GRPC_PORT`` from its lifespan, on uvicorn's event loop, over the
same request handler and task store, and lists it on the card; it needs the SDK's
``grpc`` extra.

With ``BENCH_PUSH=1`` (``bench/push.py``), push notifications are on: the SDK's
``InMemoryPushNotificationConfigStore`` and ``BasePushNotificationSender`` (one
``httpx.AsyncClient``, no URL validator, so a ``http://127.0.0.1`` webhook is
accepted), and the card says ``pushNotifications: true``. The SDK POSTs each event
to every config of the task from the request that runs it, before answering; off by
default, so ``bench/run.py`` measures the SDK without them.

``BENCH_HOST`` / ``BENCH_PORT`` only decide the URL the agent card advertises;
uvicorn's own ``--host`` / ``--port`` decide where it listens, so keep them equal.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks.base_push_notification_sender import BasePushNotificationSender
from a2a.server.tasks.inmemory_push_notification_config_store import (
    InMemoryPushNotificationConfigStore,
)
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette

RPC_PATH = "/"
REST_PREFIX = ""
_STREAM_COMMAND = re.compile(r"^\s*stream\s+(\d+)\s*$")


class EchoExecutor(AgentExecutor):
    """Echoes the user's text, or streams ``N`` chunks for ``stream N``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id
        context_id = context.context_id
        message = context.message
        if not task_id or not context_id or message is None:
            return

        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
        )
        updater = TaskUpdater(event_queue=event_queue, task_id=task_id, context_id=context_id)
        text = context.get_user_input()

        command = _STREAM_COMMAND.match(text)
        if command is None:
            await updater.add_artifact(parts=[Part(text=text)], name="echo")
            await updater.complete()
            return

        chunks = int(command.group(1))
        await updater.start_work()
        artifact_id = f"{task_id}-stream"
        for i in range(chunks):
            await updater.add_artifact(
                parts=[Part(text=f"chunk {i}")],
                artifact_id=artifact_id,
                name="stream",
                append=i > 0,
                last_chunk=i == chunks - 1,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(
            event_queue=event_queue,
            task_id=context.task_id or "",
            context_id=context.context_id or "",
        )
        await updater.cancel()


def build_agent_card(host: str, port: int, grpc_port: int | None = None, push: bool = False) -> AgentCard:
    """The card of the echo agent: JSON-RPC and HTTP+JSON on ``host:port``, gRPC on ``grpc_port``."""
    interfaces = [
        AgentInterface(
            protocol_binding="JSONRPC",
            protocol_version="1.0",
            url=f"http://{host}:{port}{RPC_PATH}",
        ),
        AgentInterface(
            protocol_binding="HTTP+JSON",
            protocol_version="1.0",
            url=f"http://{host}:{port}{REST_PREFIX}",
        ),
    ]
    if grpc_port is not None:
        interfaces.append(
            AgentInterface(protocol_binding="GRPC", protocol_version="1.0", url=f"{host}:{grpc_port}")
        )
    return AgentCard(
        name="Echo (a2a-sdk)",
        description="Benchmark echo agent built on the official a2a-sdk.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=push),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="Echoes the text back; 'stream N' streams N chunks.",
                tags=["benchmark"],
                examples=["hello", "stream 10"],
            )
        ],
        supported_interfaces=interfaces,
    )


def create_app(host: str, port: int, grpc_port: int | None = None, push: bool = False) -> Starlette:
    """A Starlette app serving the agent card, JSON-RPC and HTTP+JSON; gRPC too with ``grpc_port``;
    push notifications with ``push``."""
    card = build_agent_card(host, port, grpc_port, push)
    push_client: httpx.AsyncClient | None = None
    push_options: dict[str, Any] = {}
    if push:
        push_client = httpx.AsyncClient(timeout=10.0)
        configs = InMemoryPushNotificationConfigStore()
        push_options = {
            "push_config_store": configs,
            "push_sender": BasePushNotificationSender(push_client, configs),
        }
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        **push_options,
    )
    routes = [
        *create_agent_card_routes(agent_card=card),
        *create_jsonrpc_routes(request_handler=handler, rpc_url=RPC_PATH),
        # Last: the REST routes end with a catch-all ``/{tenant}`` mount.
        *create_rest_routes(request_handler=handler, path_prefix=REST_PREFIX),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if push_client is not None:
                stack.push_async_callback(push_client.aclose)
            await stack.enter_async_context(grpc_lifespan())
            yield

    @contextlib.asynccontextmanager
    async def grpc_lifespan() -> AsyncIterator[None]:
        if grpc_port is None:
            yield
            return
        # Imported here: only the gRPC run needs grpcio (a2a-sdk's ``grpc`` extra).
        import grpc.aio  # type: ignore[import-untyped]
        from a2a.server.request_handlers import GrpcHandler
        from a2a.types import a2a_pb2_grpc

        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)  # type: ignore[no-untyped-call]
        if server.add_insecure_port(f"{host}:{grpc_port}") == 0:
            raise RuntimeError(f"cannot bind gRPC to {host}:{grpc_port}")
        await server.start()
        try:
            yield
        finally:
            await server.stop(grace=1.0)

    return Starlette(routes=routes, lifespan=lifespan)


_grpc_port = os.environ.get("BENCH_GRPC_PORT")
app = create_app(
    host=os.environ.get("BENCH_HOST", "127.0.0.1"),
    port=int(os.environ.get("BENCH_PORT", "8000")),
    grpc_port=int(_grpc_port) if _grpc_port else None,
    push=os.environ.get("BENCH_PUSH", "") not in ("", "0"),
)
