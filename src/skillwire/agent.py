"""The facade: ``Agent(...)`` describes an agent; ``agent.asgi()`` serves it; ``agent.run()`` runs it.

An agent is made of skills (``@agent.skill`` for code, ``agent.add_skill`` for anything from a registry,
``Agent.from_folder`` for a folder of SKILL.md skills), or, for full control, of one executor::

    from skillwire import Agent

    agent = Agent("Echo", "Says it back")

    @agent.skill(tags=["echo"])
    async def echo(params, ctx):
        \"\"\"Says the text back.\"\"\"
        return params["text"]

    agent.run()            # http://127.0.0.1:8000, tasks in ./.skillwire/echo.db
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence, Set
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack, cast

import msgspec

from skillwire.errors import SkillwireError
from skillwire.protocol.limits import Limits, parse_duration
from skillwire.protocol.models import AgentCapabilities, AgentCard, AgentExtension, AgentProvider, AgentSkill
from skillwire.security.policy import Requirement, Security, as_card, requirement_sets
from skillwire.security.principal import Principal
from skillwire.server.app import A2AApplication, Mounted, MountFactory
from skillwire.server.buses.base import EventBus
from skillwire.server.buses.memory import InProcessEventBus
from skillwire.server.handler import Dispatcher, RequestHandler
from skillwire.server.notifications.push import PushService, PushSettings, signer_for
from skillwire.server.observability.instrument import observe_bus, observe_store
from skillwire.server.options import (
    CardOptions,
    Network,
    Retention,
    Serving,
    ServingKeywords,
    serving,
    signers_of,
)
from skillwire.server.tasks.executor import Executor, ExecutorFunction, as_executor
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.skills.executor import OutcomeHook, SkillExecutor
from skillwire.skills.registry import (
    Follower,
    InMemorySkillRegistry,
    Skill,
    SkillDetails,
    SkillRegistry,
    report_code_skill,
    skill_from_function,
)
from skillwire.skills.schema_card import skill_schemas_extension
from skillwire.stores.base import DEFAULT_STORE, TaskStore, default_store
from skillwire.stores.push import PushStore, missing_push_methods
from skillwire.stores.schemes import open_store

if TYPE_CHECKING:
    from skillwire.mcp.config import McpServer
    from skillwire.testing.client import AgentTestClient
    from skillwire.wire.card_signing import CardSigner

__all__ = ["DEFAULT_STORE", "Agent", "RuntimeWrapper", "default_store"]

#: ``wrap=`` of :meth:`Agent.asgi`: makes the request handler that stands in front of the task runtime.
RuntimeWrapper = Callable[[TaskRuntime], RequestHandler]
F = TypeVar("F", bound=Callable[..., Any])


class Agent:
    """An agent: its card's description, its skills (or one executor), and how it is served."""

    #: Serve only skills marked readOnly (the others are left off the card and refused).
    read_only: bool
    #: Extensions declared on the card; ``required=True`` ones must be activated by every client.
    extensions: list[AgentExtension]
    #: Whether the agent card also carries the v0.3 fields (url, protocolVersion, ...) for v0.3 clients.
    card_v03_fields: bool
    #: The schemes and requirements enforced on every call (None: every caller is anonymous). A skill's
    #: securityRequirements must name its schemes and are checked on top of the agent's.
    security: Security | None
    #: Signs the public and extended cards served (several: one signature each, for key rotation).
    card_signer: CardSigner | Sequence[CardSigner] | None
    #: Push notifications (on by default; False or ``PushSettings(enabled=False)``: off). They need a store
    #: that keeps deliveries (memory://, SQLite): with another, they are off.
    push: PushSettings
    #: MCP servers whose tools become skills when the agent is served (:meth:`load_mcp_tools`).
    mcp_servers: list[McpServer]
    #: How long finished tasks are kept (seconds; None: forever), or ``"default"``: as the app's
    #: ``Limits.task_retention`` says (1 day). Also ``"7d"``, ``"12h"``, a timedelta (docs/retention.md).
    task_retention: Retention

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
        default_input_modes: Sequence[str] = ("text/plain", "application/json"),
        default_output_modes: Sequence[str] = ("text/plain", "application/json"),
        extended_card: AgentCard | Callable[[Principal], AgentCard] | None = None,
        extended_card_enabled: bool | None = None,
        registry: SkillRegistry | None = None,
        read_only: bool = False,
        extensions: Sequence[AgentExtension] = (),
        card_v03_fields: bool = True,
        security: Security | None = None,
        card_signer: CardSigner | Sequence[CardSigner] | None = None,
        push: PushSettings | bool = True,
        mcp_servers: Sequence[McpServer] = (),
        task_retention: float | timedelta | str | None = "default",
    ) -> None:
        self.name = name
        self.description = description or name
        self.executor = as_executor(executor) if executor is not None else None
        self.version = version
        self.skills = list(skills)
        self.provider, self.documentation_url, self.icon_url = provider, documentation_url, icon_url
        self.streaming = streaming
        self.default_input_modes = list(default_input_modes)
        self.default_output_modes = list(default_output_modes)
        self.extended_card = extended_card
        self.extended_card_enabled = (
            extended_card is not None if extended_card_enabled is None else extended_card_enabled
        )
        self.registry: SkillRegistry = registry if registry is not None else InMemorySkillRegistry()
        self.read_only = read_only
        self.hooks: list[OutcomeHook] = []
        self.extensions = list(extensions)
        self.card_v03_fields = card_v03_fields
        self.security = security
        self.card_signer = card_signer
        self.push = push if isinstance(push, PushSettings) else PushSettings(enabled=push)
        self.mcp_servers = list(mcp_servers)
        self._mcp_loaded = False
        self.task_retention = task_retention

    def limits_for(self, limits: Limits | None = None) -> Limits:
        """``limits`` (default: Limits()) with this agent's ``task_retention`` applied, unless it is
        ``"default"``."""
        return with_retention(limits or Limits(), self.task_retention)

    # -- skills -------------------------------------------------------------------------------------------

    def add_skill(self, skill: Skill) -> Skill:
        """Register a skill (duplicate ids are refused)."""
        return self.registry.register(skill)

    def skill(self, **keywords: Unpack[SkillKeywords]) -> Callable[[F], F]:
        """Register the decorated function as a skill (sugar over ``add_skill(skill_from_function(...))``)::

            @agent.skill(tags=["money"])
            def convert(amount: float, currency: str = "EUR") -> dict:
                \"\"\"Converts an amount.\"\"\"

        The handler is ``async def`` or ``def`` (run in a worker thread), and takes the whole input
        (``params``, maybe annotated with a msgspec Struct or a pydantic model) or typed parameters, plus
        the context (the parameter annotated ``SkillContext``). The id is the function's name as written
        (``def count_words`` is ``count_words``) unless ``id=`` says otherwise, the description its
        docstring; like a manifest, a skill needs a description and at least one tag. Without
        ``input_schema``, the parameters' types are the input schema, and without ``output_schema`` the
        return annotation is the output schema (docs/skills.md has the table; both at once is refused).
        ``timeout_seconds`` is the skill's deadline (like a manifest's ``executionHints.timeoutSeconds``;
        default: ``Limits.task_timeout``); ``retryable=True`` lets another process run it again from the
        task's first message when the process running it died (its ``executionHints.retryable``).
        ``text_input`` names the input property a text message fills (a
        manifest's ``textInput``). ``security`` is the skill's securityRequirements, checked on top of the
        agent's (``[{"bearer": ["deploy"]}]``: a token with that scope); they must name schemes the agent's
        ``security=`` declares. ``input_modes`` and ``output_modes`` are the media types the skill takes
        and gives (its card's inputModes and outputModes; without them, the agent's defaults apply): a
        message part of another type is refused, and a result or artifact of another type fails the task,
        except a text where only ``application/json`` is declared, which is sent as a JSON string."""

        _refuse_unknown("skill", keywords.keys() - SkillKeywords.__optional_keys__)

        def register(handler: F) -> F:
            try:
                skill_id = keywords.get("id") or str(getattr(handler, "__name__", "skill"))
                skill = self.add_skill(skill_from_function(handler, id=skill_id, **_skill_details(keywords)))
            except SkillwireError as exc:
                if not report_code_skill(None, handler, exc):  # `skills check` collects, others raise
                    raise
                return handler
            report_code_skill(skill, handler)
            return handler

        return register

    def load_mcp_tools(self) -> list[Skill]:
        """Make skills of the tools of :attr:`mcp_servers` (once; :meth:`asgi` calls it): each server is
        asked for its tools, and a server that cannot be reached adds none, with a warning in the log
        (docs/mcp.md). Needs ``pip install 'skillwire[mcp]'``. Returns the skills added."""
        if self._mcp_loaded or not self.mcp_servers:
            return []
        try:
            from skillwire.mcp.client import discover_blocking
        except ImportError as exc:
            raise SkillwireError(
                f"mcp_servers need the mcp package: pip install 'skillwire[mcp]' ({exc})"
            ) from None
        self._mcp_loaded = True
        return [self.add_skill(skill) for skill in discover_blocking(self.mcp_servers)]

    def on_outcome(self, hook: OutcomeHook) -> OutcomeHook:
        """Call ``hook(outcome)`` after every skill run (in registration order, best effort)."""
        self.hooks.append(hook)
        return hook

    @classmethod
    def from_folder(cls, folder: str | Path, *, read_only: bool = False, plugins: bool = False) -> Agent:
        """An agent for a folder of skills (sub-folders with SKILL.md and skill.py, optional agent.yaml);
        with ``plugins``, also the skills installed packages offer through the ``skillwire.skills`` group."""
        from skillwire.mcp.config import McpServer
        from skillwire.skills.loader import load_agent_config, load_skills_folder, plugin_skills
        from skillwire.skills.security_config import build_security

        config = load_agent_config(folder)
        agent = cls(
            config.name,
            config.description,
            version=config.version,
            provider=config.provider,
            documentation_url=config.documentation_url,
            icon_url=config.icon_url,
            read_only=read_only,
            security=build_security(config.security) if config.security is not None else None,
            mcp_servers=[McpServer(**entry) for entry in config.mcp_servers],
        )
        for skill in load_skills_folder(folder):
            agent.add_skill(skill)
        if plugins:
            for skill in plugin_skills():
                agent.add_skill(skill)
        return agent

    def served_skills(self) -> list[Skill]:
        """The skills on the card: all of them, or only the read-only ones in read-only mode."""
        return [s for s in self.registry if s.read_only or not self.read_only]

    def check_security(self) -> None:
        """Refuse what cannot be enforced: a skill's securityRequirements naming a scheme the agent does
        not declare (or any, when it declares none), and an extended card without security (the spec wants
        it authenticated). Start-up and ``skills check`` call it."""
        declared = self.security.schemes if self.security is not None else {}
        # the card's skill entries: the served skills' and the ones given as AgentSkill
        for entry in [*(skill.agent_skill for skill in self.served_skills()), *self.skills]:
            for requirement in entry.security_requirements:
                for name in requirement.schemes:
                    if name not in declared:
                        known = ", ".join(sorted(declared)) or "none: the agent declares no security"
                        raise SkillwireError(
                            f"skill {entry.id!r}: securityRequirements name scheme {name!r}, which the agent"
                            f" does not declare (declared: {known})"
                        )
        if self.extended_card is not None and self.security is None:
            raise SkillwireError(
                "an extended agent card must be served to authenticated callers only: declare security=..."
            )

    def _executor(self, limits: Limits | None = None) -> Executor:
        limits = limits or Limits()
        if self.executor is not None:
            return self.executor
        if len(self.registry) == 0:
            raise TypeError(f"Agent {self.name!r} has no skills and no executor")
        return SkillExecutor(
            self.registry,
            hooks=self.hooks,
            read_only=self.read_only,
            schema_steps=limits.schema_steps,
            offload_bytes=limits.offload_decode_bytes,
            security=self.security,
            default_output_modes=self.default_output_modes,
        )

    def card(self) -> AgentCard:
        """The public card, without interfaces (the server adds them for the URL it is reached at). The
        skills' input and output schemas are published in the skill-schemas extension
        (:mod:`skillwire.skills.schema_card`), unless the agent declares that extension itself."""
        served = self.served_skills()
        extensions = list(self.extensions)
        schemas = skill_schemas_extension(served)
        if schemas is not None and all(e.uri != schemas.uri for e in extensions):
            extensions.append(schemas)
        return AgentCard(
            name=self.name,
            description=self.description,
            supported_interfaces=[],
            provider=self.provider,
            version=self.version,
            documentation_url=self.documentation_url,
            capabilities=AgentCapabilities(
                streaming=self.streaming,
                push_notifications=self.push.enabled,
                extensions=extensions,
                extended_agent_card=self.extended_card_enabled,
            ),
            security_schemes=self.security.card_schemes() if self.security is not None else {},
            security_requirements=self.security.card_requirements() if self.security is not None else [],
            default_input_modes=self.default_input_modes,
            default_output_modes=self.default_output_modes,
            skills=[*self.skills, *(_card_entry(s) for s in served)],
            icon_url=self.icon_url,
        )

    def asgi(
        self,
        *,
        store: str | TaskStore = DEFAULT_STORE,
        bus: EventBus | None = None,
        handler: RequestHandler | None = None,
        wrap: RuntimeWrapper | None = None,
        options: Serving | None = None,
        **keywords: Unpack[ServingKeywords],
    ) -> A2AApplication:
        """An ASGI application serving this agent.

        ``handler`` replaces the default request handler (the task runtime) with your own; ``wrap`` puts your
        own in front of it: ``wrap=lambda runtime: MyLoggingHandler(runtime)`` (at most one of the two).
        ``grpc_port`` also serves the gRPC binding (needs ``pip install 'skillwire[grpc]'``; 0 picks a free
        port), whose status codes ``grpc_status_overrides`` may change (``GRPC_STATUSES_V1_0_0`` of
        :mod:`skillwire.server.bindings.grpc`). ``tls`` (:class:`~skillwire.server.bindings.tls.TLSConfig`) is the certificate
        gRPC and skillwire's own HTTP server (``run()``, ``skillwire serve``) serve with, mutual TLS included.
        ``allowed_hosts`` are the Host headers served (others are refused,
        and the card names the one a request used); without it or ``public_url`` the card names the address
        each connection reached (docs/security.md). ``webhook_policy``
        (:class:`~skillwire.server.notifications.outbound.WebhookPolicy`, default: public https hosts only) is the SSRF
        guard of the webhook URLs callers name, for push notifications; ``push`` overrides the agent's
        ``push`` settings for this app (docs/push.md). ``console`` serves the web console at ``/console/``
        (docs/console.md). ``telemetry`` traces requests and task runs with OpenTelemetry: True for the
        global tracer provider, or a :class:`~skillwire.server.observability.telemetry.Telemetry`; ``metrics`` counts
        requests and runs and serves them at ``/metrics`` (True, or a :class:`~skillwire.server.observability.metrics.Metrics`;
        docs/observability.md). ``cors_origins`` (``["https://app.example"]``) are the origins whose web pages
        may call the agent (CORS); a request a browser marks as coming from any other site is refused
        (docs/security.md, "Browsers"). ``mcp`` also serves the skills as MCP tools, over Streamable HTTP at
        ``/mcp`` behind the same security schemes and budgets (needs ``pip install 'skillwire[mcp]'``;
        docs/mcp.md). ``json_logs`` adds each request's and run's fields to its log records, for JSON logs
        (``skillwire serve --log-format json``). ``card_v03_fields``, ``card_signer`` and ``task_retention``
        override the agent's own for this app (None, None, ``"default"``: the agent's).

        The keywords are turned once into the frozen :class:`~skillwire.server.options.Serving` object the
        application takes; ``options=`` gives that object itself (the keywords given beside it are applied
        over it)::

            agent.asgi(options=Serving(network=Network(allowed_hosts=("agent.example",))))
        """
        return self._application(serving(options, keywords), store, bus, handler, wrap)

    def _application(
        self,
        options: Serving,
        store: str | TaskStore,
        bus: EventBus | None,
        handler: RequestHandler | None,
        wrap: RuntimeWrapper | None,
    ) -> A2AApplication:
        """The application of :meth:`asgi`, from its options (the agent's own choices resolved in them)."""
        options = self._resolved(options)
        limits = options.limits
        _check_handler(handler, wrap)
        self.load_mcp_tools()
        self.check_security()
        store = default_store(self.name) if store == DEFAULT_STORE else store
        task_store = open_store(store, limits=limits) if isinstance(store, str) else store
        observed = options.observability
        task_store = observe_store(task_store, observed.telemetry, observed.metrics)
        runtime: TaskRuntime | None = None
        push_service: PushService | None = None
        if handler is None:
            push_service = self._push_service(task_store, options)
            runtime = self._runtime(task_store, bus, options, push_service)
            handler = runtime if wrap is None else wrap(runtime)
        mcp: list[MountFactory] = [functools.partial(self._mcp_mount, limits=limits)] if options.mcp else []
        return A2AApplication(
            card=self._served_card(push_service is not None),
            handler=handler,
            runtime=runtime,
            store=task_store if runtime is not None else None,
            options=options,
            security=self.security,
            card_signer=options.card.signers,
            push=push_service,
            mounts=mcp,
        )

    def _resolved(self, options: Serving) -> Serving:
        """``options`` with what they leave to the agent filled in: its task retention (in the limits), its
        v0.3 card fields and its card signers."""
        retention = options.task_retention
        if isinstance(retention, str) and retention == "default":
            retention = self.task_retention
        card = options.card
        return dataclasses.replace(
            options,
            limits=with_retention(options.limits, retention),
            card=CardOptions(
                v03_fields=self.card_v03_fields if card.v03_fields is None else card.v03_fields,
                signers=signers_of(self.card_signer) if card.signers is None else card.signers,
            ),
            task_retention="default",
        )

    def _push_service(self, task_store: TaskStore, options: Serving) -> PushService | None:
        """The push notifications this app offers: None when they are off, or the store cannot keep them."""
        given = options.push.settings
        settings = self.push if given is None else given
        if not isinstance(settings, PushSettings):
            settings = PushSettings(enabled=settings)
        _warn_partial_push_store(task_store, settings)
        if not settings.enabled or not isinstance(task_store, PushStore):
            return None
        issuer = (options.network.public_url or "").rstrip("/") or settings.issuer or "urn:skillwire:agent"
        return PushService(
            task_store,
            functools.partial(signer_for, settings, task_store.url, issuer),
            issuer=issuer,
            policy=options.push.webhook_policy,
            settings=settings,
            telemetry=options.observability.telemetry,
        )

    def _runtime(
        self, task_store: TaskStore, bus: EventBus | None, options: Serving, push: PushService | None
    ) -> TaskRuntime:
        limits, observed = options.limits, options.observability
        bus = bus or InProcessEventBus(
            max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes
        )
        return TaskRuntime(
            self._executor(limits),
            task_store,
            observe_bus(bus, observed.telemetry, observed.metrics),
            extended_card=self.extended_card,
            limits=limits,
            input_modes=self.default_input_modes,
            push=push,
            observability=observed,
        )

    def _served_card(self, push: bool) -> AgentCard:
        """The card, offering push notifications as served (off for this app, or with a store or handler
        that cannot keep deliveries)."""
        card = self.card()
        if card.capabilities.push_notifications == push:
            return card
        offered = msgspec.structs.replace(card.capabilities, push_notifications=push)
        return msgspec.structs.replace(card, capabilities=offered)

    def _mcp_mount(self, dispatcher: Dispatcher, limits: Limits) -> Mounted:
        try:
            from skillwire.mcp.http import McpMount
            from skillwire.mcp.local import local_server
        except ImportError as exc:
            raise SkillwireError(
                f"serving MCP needs the mcp package: pip install 'skillwire[mcp]' ({exc})"
            ) from None
        server = local_server(
            self.name, self.version, self.served_skills(), dispatcher, instructions=self.description
        )
        return McpMount(server, limits=limits)

    def run(
        self,
        host: str | None = None,
        port: int | None = None,
        *,
        store: str | TaskStore | None = None,
        log_level: str | None = None,
        on_ready: Callable[[], None] | None = None,
        **keywords: Unpack[RunKeywords],
    ) -> None:
        """Serve the agent until interrupted (Ctrl-C), shutting down gracefully; once it serves, print where
        (like ``skillwire serve``: the URL, the card's URL, the task store), then call ``on_ready``. Raises
        SkillwireError if it cannot start (the store cannot be opened, ...).

        What is not given comes, as for ``skillwire serve``, from ``SKILLWIRE_HOST``, ``SKILLWIRE_PORT``,
        ``SKILLWIRE_STORE``, ``SKILLWIRE_LOG_LEVEL``, ``SKILLWIRE_ALLOWED_HOSTS`` and ``SKILLWIRE_CORS_ORIGINS``
        (``cors_origins``: the origins whose web pages may call the agent), else the defaults:
        ``127.0.0.1``, 8000, the agent's own SQLite file (:data:`DEFAULT_STORE`), ``info``, and on a loopback
        address its loopback names (``127.0.0.1``, ``localhost``, ``[::1]``: other Hosts are refused).
        ``SKILLWIRE_TASK_RETENTION`` (``7d``, ``none``) says how long finished tasks are kept when the agent
        has no ``task_retention`` of its own (default 1 day: docs/retention.md).

        ``tls_cert`` and ``tls_key`` (PEM files; else ``SKILLWIRE_TLS_CERT``, ``SKILLWIRE_TLS_KEY``) serve
        HTTPS; ``tls_client_ca`` (``SKILLWIRE_TLS_CLIENT_CA``) asks for client certificates that CA signs,
        ``tls_client_cert`` ``"required"`` (the default) or ``"optional"`` (``SKILLWIRE_TLS_CLIENT_CERT``);
        ``tls_min_version`` ``"1.3"`` (``SKILLWIRE_TLS_MIN_VERSION``) refuses TLS 1.2 clients: see
        :mod:`skillwire.server.bindings.tls`.

        ``console`` serves the web console at ``/console/`` (docs/console.md); by default (else
        ``SKILLWIRE_CONSOLE``: ``1`` or ``0``) it is on when ``host`` is a loopback address, off otherwise."""
        _refuse_unknown("run", keywords.keys() - RunKeywords.__optional_keys__)
        host = host if host is not None else os.environ.get("SKILLWIRE_HOST", "127.0.0.1")
        port = port if port is not None else _env_port()
        store = store if store is not None else os.environ.get("SKILLWIRE_STORE", DEFAULT_STORE)
        log_level = log_level if log_level is not None else os.environ.get("SKILLWIRE_LOG_LEVEL", "info")
        options = run_options(host, keywords, os.environ)
        if isinstance(store, str):  # opened here, so that its errors name run()'s own setting
            url = default_store(self.name) if store == DEFAULT_STORE else store
            store = open_store(url, setting="run(store=...) (SKILLWIRE_STORE)")
        self._serve(self.asgi(store=store, options=options), host, port, log_level, on_ready)

    def _serve(
        self, app: A2AApplication, host: str, port: int, log_level: str, on_ready: Callable[[], None] | None
    ) -> None:
        """Serve ``app`` as :meth:`run` says: the banner once it serves, then ``on_ready``."""
        from skillwire.server.serving.serve import print_banner, serve

        def ready() -> None:
            print_banner(app, self.name, host=host, port=port)
            if on_ready is not None:
                on_ready()

        try:
            serve(app, host=host, port=port, log_level=log_level, on_ready=ready)
        except SystemExit:  # uvicorn's way of saying start-up failed
            if app.startup_error is None:
                raise
        if app.startup_error is not None:
            raise SkillwireError(f"cannot start: {app.startup_error}") from app.startup_error

    def test_client(
        self,
        *,
        store: str | TaskStore = "memory://",
        limits: Limits | None = None,
        bindings: Sequence[str] = ("JSONRPC", "HTTP+JSON"),
        headers: dict[str, str] | None = None,
        extensions: Sequence[str] = (),
        shutdown_grace: float = 0.0,
    ) -> AgentTestClient:
        """A client for this agent in process, for its tests: ``with`` gives a SyncClient, ``async with`` a
        Client. Each ``with`` serves a fresh app (``store``: an empty memory store by default) and runs its
        lifespan; streams arrive event by event (:class:`~skillwire.testing.StreamingASGITransport`)::

            with agent.test_client() as client:
                assert client.send("Ada").status.state is TaskState.COMPLETED

        ``shutdown_grace`` is how long tasks still running at the end of the ``with`` may take (0: failed at
        once). A ``store`` given as a TaskStore object is opened and closed by each ``with``."""
        from skillwire.testing.client import AgentTestClient

        def make_app() -> A2AApplication:
            return self.asgi(store=store, limits=limits, shutdown_grace=shutdown_grace)

        return AgentTestClient(make_app, bindings=bindings, headers=headers, extensions=extensions)


class SkillKeywords(TypedDict, total=False):
    """The keyword options of :meth:`Agent.skill`, each documented there."""

    id: str | None
    name: str | None
    description: str | None
    tags: Sequence[str]
    examples: Sequence[str]
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    read_only: bool
    follow: Follower | None
    timeout_seconds: float | None
    text_input: str | None
    security: Sequence[Requirement]
    retryable: bool
    input_modes: Sequence[str]
    output_modes: Sequence[str]


def _refuse_unknown(function: str, unknown: Set[str]) -> None:
    """Refuse keywords a function does not take, as a signature of named parameters would."""
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {sorted(unknown)[0]!r}")


def _skill_details(keywords: SkillKeywords) -> SkillDetails:
    """:meth:`Agent.skill`'s keywords as :func:`skill_from_function` takes them: the security requirements
    in the card's form, the id apart."""
    details = {key: value for key, value in keywords.items() if key not in ("id", "security")}
    details["security_requirements"] = as_card(requirement_sets(keywords.get("security", ())))
    return cast(SkillDetails, details)


class RunKeywords(TypedDict, total=False):
    """The keyword options of :meth:`Agent.run` beside host, port, store, log level and ``on_ready``, each
    documented there; :func:`run_options` turns them, with the ``SKILLWIRE_*`` variables, into the serving
    options."""

    tls_cert: str | None
    tls_key: str | None
    tls_client_ca: str | None
    tls_client_cert: str | None
    tls_min_version: str | None
    allowed_hosts: Sequence[str] | None
    console: bool | None
    cors_origins: Sequence[str] | None


def run_options(host: str, given: RunKeywords, environ: Mapping[str, str]) -> Serving:
    """The serving options :meth:`Agent.run` serves with: what it was given, else what ``environ`` (the
    ``SKILLWIRE_*`` variables) says, else the defaults (see its docstring)."""
    from skillwire.server.bindings.browser import BrowserPolicy
    from skillwire.server.bindings.hosts import is_loopback, served_hosts, split_hosts
    from skillwire.server.bindings.tls import tls_from

    tls = tls_from(
        given.get("tls_cert"),
        given.get("tls_key"),
        given.get("tls_client_ca"),
        given.get("tls_client_cert"),
        min_version=given.get("tls_min_version"),
        env=environ,
    )
    try:
        hosts = served_hosts(host, given.get("allowed_hosts"), env=environ.get("SKILLWIRE_ALLOWED_HOSTS"))
    except ValueError as exc:
        raise SkillwireError(f"allowed hosts: {exc}") from None
    console = given.get("console")
    if console is None:
        console = _env_flag(environ, "SKILLWIRE_CONSOLE", default=is_loopback(host))
    origins = given.get("cors_origins")
    if origins is None:
        origins = split_hosts(environ.get("SKILLWIRE_CORS_ORIGINS"))
    try:
        BrowserPolicy(origins)
    except ValueError as exc:
        raise SkillwireError(f"cors origins: {exc}") from None
    network = Network(
        allowed_hosts=tuple(hosts) if hosts else None, cors_origins=tuple(origins), tls=tls, console=console
    )
    return Serving(limits=_env_limits(environ), network=network)


def _env_limits(environ: Mapping[str, str]) -> Limits:
    """Limits() with ``SKILLWIRE_TASK_RETENTION`` applied (the agent's own task_retention, when it has one,
    still wins: see :meth:`Agent.limits_for`)."""
    retention = environ.get("SKILLWIRE_TASK_RETENTION")
    if not retention:
        return Limits()
    try:
        return Limits(task_retention=parse_duration(retention))
    except ValueError as exc:
        raise SkillwireError(f"SKILLWIRE_TASK_RETENTION: {exc}") from None


def with_retention(limits: Limits, retention: Retention) -> Limits:
    """``limits`` with ``retention`` (seconds, a timedelta, ``"7d"``, None: forever) as their
    ``task_retention``; ``"default"``: ``limits`` as they are. Raises SkillwireError for a bad one."""
    if isinstance(retention, str) and retention == "default":
        return limits
    if isinstance(retention, str):
        try:
            seconds = parse_duration(retention)
        except ValueError as exc:
            raise SkillwireError(f"task_retention: {exc}") from None
    elif isinstance(retention, timedelta):
        seconds = retention.total_seconds()
    else:
        seconds = None if retention is None else float(retention)
    if seconds is not None and seconds <= 0:
        raise SkillwireError("task_retention must be above 0 (None keeps finished tasks forever)")
    return limits.replace(task_retention=seconds)


def _env_port() -> int:
    value = os.environ.get("SKILLWIRE_PORT", "8000")
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise SkillwireError(f"SKILLWIRE_PORT={value!r}: expected a port number (0 to 65535)")
    return int(value)


def _env_flag(environ: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SkillwireError(f"{name}={value!r}: expected 1 or 0")


def _check_handler(handler: RequestHandler | None, wrap: RuntimeWrapper | None) -> None:
    if handler is not None and wrap is not None:
        raise TypeError("pass handler= (replaces the task runtime) or wrap= (wraps it), not both")
    if handler is not None and (isinstance(handler, type) or not isinstance(handler, RequestHandler)):
        raise TypeError(
            f"handler= takes a request handler (an object with async handle(operation, params, context)),"
            f" not {handler!r}: to wrap the task runtime, pass wrap={handler!r}"
        )


def _card_entry(skill: Skill) -> AgentSkill:
    """The card's entry for a skill; a plugin skill's tags say which package it came from."""
    if skill.source.startswith("plugin:"):
        return msgspec.structs.replace(skill.agent_skill, tags=[*skill.agent_skill.tags, skill.source])
    return skill.agent_skill


def _warn_partial_push_store(store: TaskStore, settings: PushSettings) -> None:
    """Say so when a store of one's own keeps push configs but lacks part of ``PushStore`` (a method added
    in a later version, say): push is then off, which would otherwise pass unseen."""
    missing = missing_push_methods(store) if settings.enabled else []
    if missing:
        logging.getLogger("skillwire.push").warning(
            "push notifications are off: the store %s implements part of PushStore but not %s",
            type(store).__name__,
            ", ".join(missing),
        )
