"""The benchmark echo agent written against the official a2a-sdk 1.3.

This is the baseline that ``bench/run.py`` measures skillwire against. It behaves
like skillwire's ``examples/echo`` agent:

* ``stream N``: create a task, go WORKING, emit N artifact-update chunks of one
  artifact (``chunk 0`` .. ``chunk N-1``; the first with ``append=false``, the
  rest with ``append=true``, the last with ``lastChunk=true``), then complete.
* any other text: create a task and complete it at once, echoing the text back
  as a single text artifact.

Served over the JSON-RPC binding (protocol v1.0) with an in-memory task store,
as a plain Starlette app (no FastAPI) so the framework overhead is the SDK's own::

    BENCH_PORT=8000 uvicorn bench.a2a_sdk_echo:app --host 127.0.0.1 --port 8000

``BENCH_HOST`` / ``BENCH_PORT`` only decide the URL the agent card advertises;
uvicorn's own ``--host`` / ``--port`` decide where it listens, so keep them equal.
"""

from __future__ import annotations

import os
import re

from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
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


def build_agent_card(host: str, port: int) -> AgentCard:
    """The card of the echo agent, advertising its JSON-RPC URL on ``host:port``."""
    return AgentCard(
        name="Echo (a2a-sdk)",
        description="Benchmark echo agent built on the official a2a-sdk.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
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
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC",
                protocol_version="1.0",
                url=f"http://{host}:{port}{RPC_PATH}",
            )
        ],
    )


def create_app(host: str, port: int) -> Starlette:
    """A Starlette app serving the agent card and the JSON-RPC endpoint."""
    card = build_agent_card(host, port)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [
        *create_agent_card_routes(agent_card=card),
        *create_jsonrpc_routes(request_handler=handler, rpc_url=RPC_PATH),
    ]
    return Starlette(routes=routes)


app = create_app(
    host=os.environ.get("BENCH_HOST", "127.0.0.1"),
    port=int(os.environ.get("BENCH_PORT", "8000")),
)
