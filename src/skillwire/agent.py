"""The facade: ``Agent(...)`` describes an agent; ``agent.asgi()`` serves it; ``agent.run()`` runs it.

from skillwire import Agent

async def echo(context, events):
    await events.artifact(context.text)

agent = Agent("Echo", "Says it back", executor=echo)
agent.run()            # http://127.0.0.1:8000, tasks in ./.skillwire/tasks.db
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from skillwire.protocol.models import AgentCapabilities, AgentCard, AgentProvider, AgentSkill
from skillwire.server.app import A2AApplication
from skillwire.server.bus import EventBus
from skillwire.server.executor import Executor, ExecutorFunction, as_executor
from skillwire.server.handler import RequestHandler
from skillwire.server.runtime import TaskRuntime
from skillwire.stores.base import TaskStore, open_store

__all__ = ["DEFAULT_STORE", "Agent"]

DEFAULT_STORE = "sqlite:///.skillwire/tasks.db"

HandlerFactory = Callable[[TaskRuntime], RequestHandler]


class Agent:
    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        executor: Executor | ExecutorFunction | None = None,
        version: str = "1.0.0",
        skills: Sequence[AgentSkill] = (),
        provider: AgentProvider | None = None,
        documentation_url: str | None = None,
        icon_url: str | None = None,
        streaming: bool = True,
        default_input_modes: Sequence[str] = ("text/plain",),
        default_output_modes: Sequence[str] = ("text/plain",),
        extended_card: AgentCard | None = None,
        extended_card_enabled: bool | None = None,
    ) -> None:
        self.name = name
        self.description = description or name
        self.executor = as_executor(executor) if executor is not None else None
        self.version = version
        self.skills = list(skills)
        self.provider = provider
        self.documentation_url = documentation_url
        self.icon_url = icon_url
        self.streaming = streaming
        self.default_input_modes = list(default_input_modes)
        self.default_output_modes = list(default_output_modes)
        self.extended_card = extended_card
        self.extended_card_enabled = (
            extended_card is not None if extended_card_enabled is None else extended_card_enabled
        )

    def card(self) -> AgentCard:
        """The public card, without interfaces (the server adds them for the URL it is reached at)."""
        return AgentCard(
            name=self.name,
            description=self.description,
            supported_interfaces=[],
            provider=self.provider,
            version=self.version,
            documentation_url=self.documentation_url,
            capabilities=AgentCapabilities(
                streaming=self.streaming,
                push_notifications=False,
                extended_agent_card=self.extended_card_enabled,
            ),
            default_input_modes=self.default_input_modes,
            default_output_modes=self.default_output_modes,
            skills=self.skills,
            icon_url=self.icon_url,
        )

    def asgi(
        self,
        *,
        store: str | TaskStore = DEFAULT_STORE,
        bus: EventBus | None = None,
        handler: RequestHandler | HandlerFactory | None = None,
        public_url: str | None = None,
        keepalive: float = 15.0,
        shutdown_grace: float = 5.0,
        max_body_bytes: int = 10 * 1024 * 1024,
    ) -> A2AApplication:
        """An ASGI application serving this agent.

        ``handler`` replaces the default request handler (the task runtime) with your own, or, given a
        callable, wraps it: ``handler=lambda runtime: MyLoggingHandler(runtime)``.
        """
        task_store = open_store(store) if isinstance(store, str) else store
        custom = handler if isinstance(handler, RequestHandler) and not isinstance(handler, type) else None
        runtime: TaskRuntime | None = None
        if custom is None:
            if self.executor is None:
                raise TypeError(f"Agent {self.name!r} has no executor: pass executor=... or a handler")
            runtime = TaskRuntime(self.executor, task_store, bus, extended_card=self.extended_card)
        if custom is not None:
            chosen: RequestHandler = custom
        elif handler is None:
            assert runtime is not None
            chosen = runtime
        else:
            assert runtime is not None and callable(handler)
            chosen = handler(runtime)
        return A2AApplication(
            card=self.card(),
            handler=chosen,
            runtime=runtime,
            store=task_store if runtime is not None else None,
            public_url=public_url,
            keepalive=keepalive,
            shutdown_grace=shutdown_grace,
            max_body_bytes=max_body_bytes,
        )

    def run(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        store: str | TaskStore = DEFAULT_STORE,
        log_level: str = "warning",
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        """Serve the agent until interrupted (Ctrl-C), shutting down gracefully."""
        from skillwire.server.serve import serve

        serve(self.asgi(store=store), host=host, port=port, log_level=log_level, on_ready=on_ready)
