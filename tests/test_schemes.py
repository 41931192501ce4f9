"""Stores and buses are opened from a scheme table beside their implementations (issue 28): every row of
each table opens, and neither protocol module imports an implementation."""

from __future__ import annotations

import ast
import importlib
import json
import textwrap
from pathlib import Path

import pytest

import skillwire
from skillwire.cli.main import main
from skillwire.server.buses import schemes as bus_schemes
from skillwire.stores import schemes as store_schemes
from skillwire.stores.base import TaskStore

SRC = Path(skillwire.__file__).parent

#: A URL of every scheme in the tables; a scheme added to a table without a URL here fails the test below.
STORE_URLS = {
    "memory": "memory://",
    "sqlite": "sqlite:///{tmp}/tasks.db",
    "postgresql": "postgresql://127.0.0.1/test",
    "postgres": "postgres://127.0.0.1/test",
}
BUS_URLS = {
    "memory": "memory://",
    "redis": "redis://127.0.0.1:6379/0",
    "rediss": "rediss://127.0.0.1:6379/0",
    "postgresql": "postgresql://127.0.0.1/test",
    "postgres": "postgres://127.0.0.1/test",
}


def implementation(opener: str) -> str:
    return opener.partition(":")[0]


async def test_every_store_scheme_opens_the_store_its_row_names(tmp_path: Path) -> None:
    assert set(STORE_URLS) == set(store_schemes.SCHEMES)
    for scheme, opener in store_schemes.SCHEMES.items():
        store = store_schemes.open_store(STORE_URLS[scheme].format(tmp=tmp_path))  # opening does not connect
        assert isinstance(store, TaskStore)
        assert type(store).__module__ == implementation(opener), scheme
        await store.close()


async def test_every_bus_scheme_opens_the_bus_its_row_names() -> None:
    assert set(BUS_URLS) == set(bus_schemes.SCHEMES)
    for scheme, row in bus_schemes.SCHEMES.items():
        bus = bus_schemes.open_bus(BUS_URLS[scheme])  # opening does not connect
        assert all(callable(getattr(bus, name)) for name in ("subscribe", "publish", "fail", "close"))
        assert type(bus).__module__ == implementation(row.opener), scheme
        close = getattr(bus, "aclose", None)
        if close is not None:
            await close()
        else:
            bus.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memory://anything", "Unknown store URL 'memory://anything'"),
        ("MEMORY://", "Unknown store URL"),
        ("mysql://host/db", "Unknown store URL 'mysql://host/db'"),
        ("tasks.db", "Unknown store URL 'tasks.db'"),
    ],
)
def test_a_store_url_outside_the_table_is_refused(url: str, message: str) -> None:
    with pytest.raises(skillwire.SkillwireError, match=message):
        store_schemes.open_store(url)


def test_a_bus_url_outside_the_table_is_refused() -> None:
    for url in ("memory://x", "nats://host", "localhost:6379"):
        with pytest.raises(skillwire.SkillwireError, match="Unknown event bus"):
            bus_schemes.open_bus(url)


def imported_modules(path: Path) -> set[str]:
    """Every skillwire module ``path`` imports, at any depth (functions and TYPE_CHECKING blocks too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("skillwire"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("skillwire"))
    return found


@pytest.mark.parametrize(
    ("protocol", "table"),
    [
        ("stores/base.py", sorted({implementation(o) for o in store_schemes.SCHEMES.values()})),
        ("server/buses/base.py", sorted({implementation(r.opener) for r in bus_schemes.SCHEMES.values()})),
        ("stores/schemes.py", sorted({implementation(o) for o in store_schemes.SCHEMES.values()})),
        ("server/buses/schemes.py", sorted({implementation(r.opener) for r in bus_schemes.SCHEMES.values()})),
    ],
)
def test_no_protocol_or_table_module_imports_an_implementation(protocol: str, table: list[str]) -> None:
    for module in table:
        importlib.import_module(module)  # each row names a real module
    assert imported_modules(SRC / protocol) & set(table) == set()


def test_each_store_offers_the_operator_tools_it_can() -> None:
    offered = {
        scheme: {name for name, tool in vars(store_schemes.store_tools(url)).items() if tool is not None}
        for scheme, url in STORE_URLS.items()
    }
    assert offered == {
        "memory": set(),
        "sqlite": {"read_stats", "read_failed_deliveries", "vacuum"},
        "postgresql": {"read_stats", "read_failed_deliveries", "upgrade"},
        "postgres": {"read_stats", "read_failed_deliveries", "upgrade"},
    }


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["db", "stats", "memory://"], "this store keeps nothing to read from outside a server"),
        (["db", "prune", "memory://"], "this store lives inside a server"),
        (["db", "upgrade", "memory://"], "this store has no schema to migrate"),
        (["deliveries", "memory://"], "this store keeps no deliveries to read from outside a server"),
        (["db", "stats", "mysql://host/db"], "Unknown store URL 'mysql://host/db'"),
    ],
)
def test_an_operator_command_a_store_cannot_serve_says_so(
    command: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command) == 2
    assert message in capsys.readouterr().err


def test_a_store_added_as_one_module_and_one_row_reaches_the_operator_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kept_store.py").write_text(
        textwrap.dedent(
            """
            from skillwire.protocol.limits import Limits
            from skillwire.stores.memory import MemoryTaskStore
            from skillwire.stores.retention import StoreStats
            from skillwire.stores.schemes import StoreTools

            def open_url(url: str, limits: Limits, setting: str) -> MemoryTaskStore:
                return MemoryTaskStore()

            async def read_stats(url: str) -> StoreStats:
                return StoreStats(tasks={"TASK_STATE_COMPLETED": len(url)}, size_bytes=7)

            TOOLS = StoreTools(read_stats=read_stats)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(store_schemes.SCHEMES, "kept", "kept_store:open_url")
    assert type(store_schemes.open_store("kept://x")).__name__ == "MemoryTaskStore"
    assert main(["db", "stats", "kept://abc", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["tasks"], stats["sizeBytes"]) == ({"completed": len("kept://abc")}, 7)
    assert main(["deliveries", "kept://abc"]) == 2
    assert "keeps no deliveries" in capsys.readouterr().err
