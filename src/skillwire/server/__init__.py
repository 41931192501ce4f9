"""Running an agent's server yourself: the task runtime, the event buses, TLS, telemetry and metrics.

Its modules are internal (they may change in any release); the names in ``__all__`` are public, imported
from here on first use (so that ``skillwire.server`` loads neither Redis nor PostgreSQL drivers until one
of their buses is asked for)::

    from skillwire.server import RedisEventBus, TaskRuntime, open_bus

    app = agent.asgi(store=store, bus=open_bus("redis://127.0.0.1:6379/0"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillwire.server.bindings.tls import (
        PeerCertificate,
        TLSConfig,
        peer_certificate_from_grpc,
        peer_certificate_from_scope,
    )
    from skillwire.server.buses.base import EventBus
    from skillwire.server.buses.memory import InProcessEventBus
    from skillwire.server.buses.postgres import PostgresEventBus
    from skillwire.server.buses.redis import RedisEventBus
    from skillwire.server.observability.metrics import Metrics
    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.server.tasks.runtime import TaskRuntime

_PUBLIC = {
    "EventBus": "buses.base",
    "InProcessEventBus": "buses.memory",
    "Metrics": "observability.metrics",
    "PeerCertificate": "bindings.tls",
    "PostgresEventBus": "buses.postgres",
    "RedisEventBus": "buses.redis",
    "TLSConfig": "bindings.tls",
    "TaskRuntime": "tasks.runtime",
    "Telemetry": "observability.telemetry",
    "open_bus": "buses.schemes",
    "peer_certificate_from_grpc": "bindings.tls",
    "peer_certificate_from_scope": "bindings.tls",
}

__all__ = [
    "EventBus",
    "InProcessEventBus",
    "Metrics",
    "PeerCertificate",
    "PostgresEventBus",
    "RedisEventBus",
    "TLSConfig",
    "TaskRuntime",
    "Telemetry",
    "open_bus",
    "peer_certificate_from_grpc",
    "peer_certificate_from_scope",
]
assert sorted(_PUBLIC) == __all__


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'skillwire.server' has no attribute {name!r}")
    return getattr(importlib.import_module(f"skillwire.server.{module}"), name)
