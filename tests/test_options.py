"""The serving options (issue 28): a few frozen objects, built once from ``skillwire serve``'s flags, the
``SKILLWIRE_*`` variables or Python arguments (the same options whichever way they are given), and handed to
what uses them; the documented keyword forms of ``agent.asgi()`` and ``agent.run()`` keep working."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from conftest import EXAMPLES
from skillwire import Agent, Limits, PushSettings
from skillwire.agent import run_options
from skillwire.cli.assembly import application, serving_from
from skillwire.cli.main import _parse
from skillwire.cli.targets import load_agent
from skillwire.errors import SkillwireError, TaskNotFoundError
from skillwire.server.notifications.outbound import WebhookPolicy
from skillwire.server.options import (
    CardOptions,
    Grpc,
    Network,
    Observability,
    PushOptions,
    Serving,
    Timing,
    serving,
)

GREETER = str(EXAMPLES / "greeter")
_VARIABLES = (
    "PUBLIC_URL",
    "ALLOWED_HOSTS",
    "CORS_ORIGINS",
    "LIMIT",
    "CONSOLE",
    "TASK_RETENTION",
    "WEBHOOK_ALLOW",
    "WEBHOOK_ALLOW_HTTP",
    "PUSH",
    "V03_CARD",
    "LOG_FORMAT",
    "HOST",
    "OTEL",
    "METRICS",
)


@pytest.fixture(autouse=True)
def _no_serve_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(f"SKILLWIRE_{name}", raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (Network(), "public_url"),
        (Grpc(), "port"),
        (Timing(), "keepalive"),
        (Observability(), "json_logs"),
        (PushOptions(), "webhook_policy"),
        (CardOptions(), "v03_fields"),
        (Serving(), "limits"),
    ],
)
def test_every_options_object_is_frozen(options: Any, field: str) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(options, field, None)


def test_the_grpc_status_table_cannot_be_changed_through_the_options() -> None:
    given = {TaskNotFoundError: "UNAVAILABLE"}
    grpc = Grpc(status_overrides=given)
    given[TaskNotFoundError] = "INTERNAL"  # the caller's dict, changed later, is not the options'
    assert grpc.status_overrides == {TaskNotFoundError: "UNAVAILABLE"}
    with pytest.raises(TypeError):
        grpc.status_overrides[TaskNotFoundError] = "INTERNAL"  # type: ignore[index]


def test_the_keywords_become_the_options_objects() -> None:
    options = serving(
        None,
        {
            "public_url": "https://agent.example",
            "allowed_hosts": ["agent.example"],
            "cors_origins": ["https://app.example"],
            "keepalive": 3.0,
            "shutdown_grace": 1.0,
            "grpc_port": 0,
            "console": True,
            "json_logs": True,
            "card_v03_fields": False,
            "task_retention": "2h",
            "telemetry": False,
            "metrics": None,
        },
    )
    assert options == Serving(
        network=Network(
            public_url="https://agent.example",
            allowed_hosts=("agent.example",),
            cors_origins=("https://app.example",),
            console=True,
        ),
        grpc=Grpc(port=0),
        timing=Timing(keepalive=3.0, shutdown_grace=1.0),
        observability=Observability(json_logs=True),
        card=CardOptions(v03_fields=False),
        task_retention="2h",
    )
    # the keywords given beside an options object are applied over it
    assert serving(options, {"keepalive": 9.0}).timing == Timing(keepalive=9.0, shutdown_grace=1.0)
    assert serving(options, {}) is options


def test_the_keyword_form_and_the_options_form_serve_alike() -> None:
    agent = Agent("Echo", "Says it back", executor=lambda context: None)
    by_keywords = agent.asgi(
        store="memory://",
        keepalive=2.0,
        limits=Limits(max_connections=7),
        allowed_hosts=["agent.example"],
        cors_origins=["https://app.example"],
        webhook_policy=WebhookPolicy(allow=["127.0.0.1"]),
    )
    by_options = agent.asgi(
        store="memory://",
        options=Serving(
            limits=Limits(max_connections=7),
            timing=Timing(keepalive=2.0),
            network=Network(allowed_hosts=("agent.example",), cors_origins=("https://app.example",)),
            push=PushOptions(webhook_policy=WebhookPolicy(allow=["127.0.0.1"])),
        ),
    )
    assert by_keywords.options == by_options.options
    for app in (by_keywords, by_options):  # each part reached what uses it, at construction
        assert app.jsonrpc.keepalive == app.rest.keepalive == 2.0
        assert app.limits.max_connections == app.jsonrpc.limits.max_connections == 7
        assert app.allowed_hosts is not None and app.allowed_hosts.allows("agent.example", "http")
        assert app.browser.allows("https://app.example")
        assert app.runtime is not None and app.runtime.push is not None
        assert app.runtime.push.policy == WebhookPolicy(allow=["127.0.0.1"])


def test_json_logs_reach_the_bindings_and_the_runtime() -> None:
    agent = Agent("Echo", "Says it back", executor=lambda context: None)
    app = agent.asgi(store="memory://", json_logs=True)
    assert app.jsonrpc.json_logs and app.rest.json_logs
    assert app.runtime is not None and app.runtime.json_logs
    plain = agent.asgi(store="memory://")
    assert not plain.jsonrpc.json_logs and plain.runtime is not None and not plain.runtime.json_logs


def serve_args(*flags: str) -> list[str]:
    return ["serve", GREETER, "--store", "memory://", "--host", "0.0.0.0", *flags]


_FLAGS = (
    "--public-url",
    "https://agent.example",
    "--allowed-host",
    "agent.example",
    "--cors-origin",
    "https://app.example",
    "--limit",
    "max_connections=7",
    "--no-console",
    "--task-retention",
    "2h",
    "--webhook-allow",
    "10.0.0.0/8",
    "--no-push",
    "--no-v03-card",
    "--log-format",
    "json",
)


def test_serve_flags_give_the_options_python_arguments_give() -> None:
    agent = load_agent(GREETER)
    from_flags = serving_from(_parse(serve_args(*_FLAGS)), agent)
    from_python = serving(
        None,
        {
            "public_url": "https://agent.example",
            "allowed_hosts": ["agent.example"],
            "cors_origins": ["https://app.example"],
            "limits": Limits(max_connections=7),
            "console": False,
            "task_retention": "2h",
            "webhook_policy": WebhookPolicy(allow=["10.0.0.0/8"]),
            "push": PushSettings(enabled=False),
            "card_v03_fields": False,
            "json_logs": True,
            "grpc_host": "0.0.0.0",
        },
    )
    assert from_flags == from_python


def test_serve_variables_give_the_options_their_flags_give(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = load_agent(GREETER)
    from_flags = serving_from(_parse(serve_args(*_FLAGS)), agent)
    for name, value in {
        "PUBLIC_URL": "https://agent.example",
        "ALLOWED_HOSTS": "agent.example",
        "CORS_ORIGINS": "https://app.example",
        "LIMIT": "max_connections=7",
        "CONSOLE": "0",
        "TASK_RETENTION": "2h",
        "WEBHOOK_ALLOW": "10.0.0.0/8",
        "PUSH": "0",
        "V03_CARD": "0",
        "LOG_FORMAT": "json",
    }.items():
        monkeypatch.setenv(f"SKILLWIRE_{name}", value)
    assert serving_from(_parse(serve_args()), agent) == from_flags


def test_serve_leaves_the_agent_as_it_was_loaded() -> None:
    """The flags that override the agent's own choices are options of its app, not changes to the agent."""
    agent, app = application(_parse(serve_args(*_FLAGS)))
    assert agent.card_v03_fields is True and agent.task_retention == "default" and agent.push.enabled
    assert app.options.card.v03_fields is False
    assert app.limits.task_retention == 7200
    assert app.push is None and not app.card.capabilities.push_notifications
    assert app.options.observability.json_logs and app.jsonrpc.json_logs


def test_run_arguments_and_variables_give_the_same_options() -> None:
    given = run_options(
        "127.0.0.1",
        {"allowed_hosts": ["agent.example"], "console": False, "cors_origins": ["https://app.example"]},
        {"SKILLWIRE_TASK_RETENTION": "7d"},
    )
    from_env = run_options(
        "127.0.0.1",
        {},
        {
            "SKILLWIRE_ALLOWED_HOSTS": "agent.example",
            "SKILLWIRE_CONSOLE": "0",
            "SKILLWIRE_CORS_ORIGINS": "https://app.example",
            "SKILLWIRE_TASK_RETENTION": "7d",
        },
    )
    assert given == from_env
    assert given == serving(
        None,
        {
            "allowed_hosts": ["agent.example"],
            "console": False,
            "cors_origins": ["https://app.example"],
            "limits": Limits(task_retention=timedelta(days=7).total_seconds()),
        },
    )
    # the defaults on a loopback address: its loopback names, the console on
    defaults = run_options("127.0.0.1", {}, {})
    assert defaults.network.console and defaults.network.allowed_hosts


def test_run_refuses_a_bad_variable() -> None:
    with pytest.raises(SkillwireError, match="SKILLWIRE_CONSOLE"):
        run_options("127.0.0.1", {}, {"SKILLWIRE_CONSOLE": "maybe"})
    with pytest.raises(SkillwireError, match="SKILLWIRE_TASK_RETENTION"):
        run_options("127.0.0.1", {}, {"SKILLWIRE_TASK_RETENTION": "soon"})


def test_a_misspelt_keyword_is_refused_as_before() -> None:
    """The keywords are a TypedDict now: one it does not name is refused, as a named parameter list did."""
    agent = Agent("Echo", "Says it back", executor=lambda context: None)
    with pytest.raises(TypeError, match="asgi\\(\\) got an unexpected keyword argument 'stor'"):
        agent.asgi(stor="memory://")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="run\\(\\) got an unexpected keyword argument 'consol'"):
        agent.run(consol=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="skill\\(\\) got an unexpected keyword argument 'tag'"):
        agent.skill(tag=["x"])  # type: ignore[call-arg]
