"""The modules that moved into the server's folders (issue 28) still work from their old paths for one
release, with a DeprecationWarning naming the new one; nothing in the project uses an old path."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from skillwire.server._moved import MOVED

ROOT = Path(__file__).parent.parent

#: old path -> (a name it held, where that name is now). One row per moved module.
OLD_TO_NEW = {
    "skillwire.server.access": ("Tracked", "skillwire.server.observability.access"),
    "skillwire.server.asgi": ("stream_sse", "skillwire.server.bindings.asgi"),
    "skillwire.server.browser": ("BrowserPolicy", "skillwire.server.bindings.browser"),
    "skillwire.server.bus": ("EventBus", "skillwire.server.buses.base"),
    "skillwire.server.bus_postgres": ("PostgresEventBus", "skillwire.server.buses.postgres"),
    "skillwire.server.bus_redis": ("RedisEventBus", "skillwire.server.buses.redis"),
    "skillwire.server.card": ("CardEndpoint", "skillwire.server.bindings.card"),
    "skillwire.server.descriptors": ("connection_ceiling", "skillwire.server.bindings.descriptors"),
    "skillwire.server.endpoint": ("HttpEndpoint", "skillwire.server.bindings.endpoint"),
    "skillwire.server.executor": ("Executor", "skillwire.server.tasks.executor"),
    "skillwire.server.grpc": ("GrpcServer", "skillwire.server.bindings.grpc"),
    "skillwire.server.grpc_limits": ("server_options", "skillwire.server.bindings.grpc_limits"),
    "skillwire.server.guard": ("Guard", "skillwire.server.bindings.guard"),
    "skillwire.server.hosts": ("AllowedHosts", "skillwire.server.bindings.hosts"),
    "skillwire.server.http": ("protocol_for", "skillwire.server.serving.http"),
    "skillwire.server.idempotency": ("Keys", "skillwire.server.tasks.idempotency"),
    "skillwire.server.instrument": ("observe_store", "skillwire.server.observability.instrument"),
    "skillwire.server.jsonrpc": ("JsonRpcEndpoint", "skillwire.server.bindings.jsonrpc"),
    "skillwire.server.logs": ("configure_logging", "skillwire.server.observability.logs"),
    "skillwire.server.metrics": ("Metrics", "skillwire.server.observability.metrics"),
    "skillwire.server.observe": ("Watch", "skillwire.server.observability.observe"),
    "skillwire.server.outbound": ("WebhookPolicy", "skillwire.server.notifications.outbound"),
    "skillwire.server.outbound_http": ("GuardedTransport", "skillwire.server.notifications.outbound_http"),
    "skillwire.server.push": ("PushService", "skillwire.server.notifications.push"),
    "skillwire.server.push_delivery": ("Deliverer", "skillwire.server.notifications.push_delivery"),
    "skillwire.server.rest": ("RestEndpoint", "skillwire.server.bindings.rest"),
    "skillwire.server.retention": ("Pruner", "skillwire.server.tasks.retention"),
    "skillwire.server.run": ("TaskRun", "skillwire.server.tasks.run"),
    "skillwire.server.runtime": ("TaskRuntime", "skillwire.server.tasks.runtime"),
    "skillwire.server.serve": ("serve", "skillwire.server.serving.serve"),
    "skillwire.server.telemetry": ("Telemetry", "skillwire.server.observability.telemetry"),
    "skillwire.server.tls": ("TLSConfig", "skillwire.server.bindings.tls"),
    "skillwire.server.uvicorn_tls": ("uvicorn_config", "skillwire.server.serving.uvicorn_tls"),
}
#: the bus module's names went to three modules; open_store left the store protocol for its scheme table
ALSO = [
    ("skillwire.server.bus", "InProcessEventBus", "skillwire.server.buses.memory"),
    ("skillwire.server.bus", "open_bus", "skillwire.server.buses.schemes"),
    ("skillwire.server.bus", "Behind", "skillwire.server.buses.base"),
    ("skillwire.stores.base", "open_store", "skillwire.stores.schemes"),
]
ROWS = [(old, name, new) for old, (name, new) in OLD_TO_NEW.items()] + ALSO


def test_the_table_names_every_moved_module() -> None:
    assert set(OLD_TO_NEW) == set(MOVED)
    for old, (_, new) in OLD_TO_NEW.items():
        assert new in MOVED[old]


@pytest.mark.parametrize(("old", "name", "new"), ROWS)
def test_an_old_path_still_works_and_warns(old: str, name: str, new: str) -> None:
    module = importlib.import_module(old)  # importing the old module alone does not warn
    with pytest.warns(DeprecationWarning, match=f"^{old}.* import {name} from {new} "):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)


def test_an_old_from_import_warns_where_it_is_written() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        from skillwire.server.runtime import TaskRuntime  # noqa: F401
    assert [Path(w.filename).name for w in caught] == ["test_moved.py"]


def test_every_public_name_of_a_moved_module_is_reachable_from_its_old_path() -> None:
    for old, news in MOVED.items():
        for new in news:
            target = importlib.import_module(new)
            for name in getattr(target, "__all__", ()):
                with pytest.warns(DeprecationWarning):
                    assert getattr(importlib.import_module(old), name) is getattr(target, name)


def test_a_name_no_module_had_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        importlib.import_module("skillwire.server.runtime").Nothing  # noqa: B018


def test_nothing_in_the_project_imports_an_old_path() -> None:
    old = set(MOVED)
    problems = []
    for folder in ("src", "tests", "examples", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "test_moved.py" or (
                path.parent.name == "server" and path.stem in {m.rpartition(".")[2] for m in old}
            ):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                problems += [f"{path.relative_to(ROOT)}: {name}" for name in names if name in old]
    assert problems == []
