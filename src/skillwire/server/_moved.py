"""The old paths of the modules that moved into the server's folders (issue 28), kept for one release.

Each old module is a stub whose names come from here: ``from skillwire.server.runtime import TaskRuntime``
still works, and warns (``DeprecationWarning``) with the new path. Nothing in skillwire imports an old
path (tests/test_moved.py holds this); the stubs and this table go in the release after next.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

#: old module -> the modules its names are now in (looked up in this order).
MOVED: dict[str, tuple[str, ...]] = {
    "skillwire.server.access": ("skillwire.server.observability.access",),
    "skillwire.server.asgi": ("skillwire.server.bindings.asgi",),
    "skillwire.server.browser": ("skillwire.server.bindings.browser",),
    "skillwire.server.bus": (
        "skillwire.server.buses.base",
        "skillwire.server.buses.memory",
        "skillwire.server.buses.schemes",
    ),
    "skillwire.server.bus_postgres": ("skillwire.server.buses.postgres",),
    "skillwire.server.bus_redis": ("skillwire.server.buses.redis",),
    "skillwire.server.card": ("skillwire.server.bindings.card",),
    "skillwire.server.descriptors": ("skillwire.server.bindings.descriptors",),
    "skillwire.server.endpoint": ("skillwire.server.bindings.endpoint",),
    "skillwire.server.executor": ("skillwire.server.tasks.executor",),
    "skillwire.server.grpc": ("skillwire.server.bindings.grpc",),
    "skillwire.server.grpc_limits": ("skillwire.server.bindings.grpc_limits",),
    "skillwire.server.guard": ("skillwire.server.bindings.guard",),
    "skillwire.server.hosts": ("skillwire.server.bindings.hosts",),
    "skillwire.server.http": ("skillwire.server.serving.http",),
    "skillwire.server.idempotency": ("skillwire.server.tasks.idempotency",),
    "skillwire.server.instrument": ("skillwire.server.observability.instrument",),
    "skillwire.server.jsonrpc": ("skillwire.server.bindings.jsonrpc",),
    "skillwire.server.logs": ("skillwire.server.observability.logs",),
    "skillwire.server.metrics": ("skillwire.server.observability.metrics",),
    "skillwire.server.observe": ("skillwire.server.observability.observe",),
    "skillwire.server.outbound": (
        "skillwire.server.notifications.outbound",
        "skillwire.server.notifications.outbound_http",
    ),
    "skillwire.server.outbound_http": ("skillwire.server.notifications.outbound_http",),
    "skillwire.server.push": ("skillwire.server.notifications.push",),
    "skillwire.server.push_delivery": ("skillwire.server.notifications.push_delivery",),
    "skillwire.server.rest": ("skillwire.server.bindings.rest",),
    "skillwire.server.retention": ("skillwire.server.tasks.retention",),
    "skillwire.server.run": ("skillwire.server.tasks.run",),
    "skillwire.server.runtime": ("skillwire.server.tasks.runtime",),
    "skillwire.server.serve": ("skillwire.server.serving.serve",),
    "skillwire.server.telemetry": ("skillwire.server.observability.telemetry",),
    "skillwire.server.tls": ("skillwire.server.bindings.tls",),
    "skillwire.server.uvicorn_tls": ("skillwire.server.serving.uvicorn_tls",),
}


def forward(old: str, name: str) -> Any:
    """``old``'s attribute ``name``, from the module it moved to, with a DeprecationWarning that names it."""
    if name.startswith("__"):  # the import system's and tools' probes (__path__, __wrapped__): no forwarding
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    for new in MOVED[old]:
        module = importlib.import_module(new)
        if name in vars(module):
            warnings.warn(
                f"{old} moved: import {name} from {new} (the old path goes in the release after next)",
                DeprecationWarning,
                stacklevel=3,
            )
            return vars(module)[name]
    raise AttributeError(f"module {old!r} has no attribute {name!r}")
