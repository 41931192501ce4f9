"""An a2a-sdk 0.3 agent for tests/test_client_v03.py, run with the python of a virtualenv holding
``a2a-sdk[http-server]==0.3.*`` and uvicorn (it cannot be installed beside a2a-sdk 1.x).

    python server.py PORT

Serves the v0.3 JSON-RPC binding at ``/`` and the v0.3 HTTP+JSON binding under ``/v1`` on 127.0.0.1:PORT
(0 picks a free port), with its card at ``/.well-known/agent-card.json``, then prints one line,
``READY <port>``, once the socket accepts connections. The first word of a message's text picks what the
agent does:

* ``message ...``: replies with a Message (no task), ``echo: <text>``;
* ``stream ...``: a task that is submitted, works, sends the artifact ``chunks`` in three chunks
  (``chunk-1``, ``chunk-2``, ``chunk-3``), then completes;
* ``long ...``: a task that works until it is canceled;
* ``tick ...``: a task that works until it is canceled, adding a chunk (``tick-<n>``) to the artifact
  ``ticks`` every 0.1 s, so that a subscriber sees it alive;
* ``input ...``: a task that asks for input;
* anything else: a task that works, sends the artifact ``echo`` (``echo: <text>``) and completes with
  the status message ``done``.

Push notification configs are kept in memory (none are sent). The card declares security schemes (none
are enforced) and an authenticated extended card, which adds a skill. Only the standard library, ``a2a``
(0.3), starlette/fastapi and uvicorn are imported: this file never runs in the main venv.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import sys

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2ARESTFastAPIApplication, A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    In,
    Part,
    SecurityScheme,
    TaskState,
    TextPart,
)
from a2a.utils import new_agent_text_message, new_task
from a2a.utils.message import get_message_text


def text_part(text: str) -> Part:
    return Part(root=TextPart(text=text))


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = get_message_text(context.message)
        mode = text.split(maxsplit=1)[0] if text.strip() else ""
        if mode == "message":
            await event_queue.enqueue_event(new_agent_text_message(f"echo: {text}", context.context_id))
            return
        task = context.current_task
        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if mode == "long":
            await asyncio.Event().wait()  # until the handler cancels this coroutine
        elif mode == "tick":
            for n in itertools.count(1):  # until the handler cancels this coroutine
                await updater.add_artifact([text_part(f"tick-{n}")], artifact_id="ticks", append=n > 1)
                await asyncio.sleep(0.1)
        elif mode == "input":
            await updater.requires_input(updater.new_agent_message([text_part("more please")]), final=True)
        elif mode == "stream":
            for n in (1, 2, 3):
                await updater.add_artifact(
                    [text_part(f"chunk-{n}")],
                    artifact_id="chunks",
                    name="chunks",
                    append=n > 1,
                    last_chunk=n == 3,
                )
            await updater.complete()
        else:
            await updater.add_artifact([text_part(f"echo: {text}")], artifact_id="echo", name="echo")
            await updater.complete(updater.new_agent_message([text_part("done")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.update_status(TaskState.canceled, final=True)


def card(url: str) -> AgentCard:
    skill = AgentSkill(
        id="echo",
        name="Echo",
        description="Echoes, streams, waits or asks for input by the first word",
        tags=["echo"],
        examples=["hello", "stream it"],
    )
    return AgentCard(
        name="a2a-sdk 0.3 echo",
        description="An a2a-sdk 0.3 agent for skillwire's v0.3 client tests",
        url=url,
        version="0.3.26",
        protocol_version="0.3.0",
        preferred_transport="JSONRPC",
        additional_interfaces=[
            AgentInterface(url=url, transport="JSONRPC"),
            AgentInterface(url=url, transport="HTTP+JSON"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={
            "bearer": SecurityScheme(root=HTTPAuthSecurityScheme(scheme="bearer", bearer_format="JWT")),
            "key": SecurityScheme(root=APIKeySecurityScheme(name="X-Key", in_=In.header)),
        },
        security=[{"bearer": []}],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[skill],
        supports_authenticated_extended_card=True,
    )


def main() -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen(64)
    port = sock.getsockname()[1]
    public = card(f"http://127.0.0.1:{port}")
    extended = public.model_copy(
        update={
            "skills": [
                *public.skills,
                AgentSkill(id="secret", name="Secret", description="Only on the extended card", tags=[]),
            ]
        }
    )
    handler = DefaultRequestHandler(
        agent_executor=Executor(),
        task_store=InMemoryTaskStore(),
        push_config_store=InMemoryPushNotificationConfigStore(),
    )
    app = A2ARESTFastAPIApplication(public, handler, extended_agent_card=extended).build()
    jsonrpc = A2AStarletteApplication(public, handler, extended_agent_card=extended)
    app.router.routes.extend(jsonrpc.routes())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"READY {port}", flush=True)  # the socket listens: connections queue until uvicorn accepts
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
