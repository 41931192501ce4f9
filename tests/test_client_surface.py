"""The client's surface: ``SyncClient`` has every method and property ``Client`` has, and both connect to an
agent by any URL form the command line takes (``http(s)://...``, ``host:port``, ``:port``)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from conftest import RunningServer, example_agent
from skillwire import Client, SyncClient
from skillwire.client.origins import agent_url, is_short_url

#: Client's names that SyncClient spells otherwise.
RENAMED = {"aclose": "close"}


def public(obj: Any) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


@pytest.fixture
def greeter(serve: Any) -> RunningServer:
    return serve(example_agent("greeter").asgi(store="memory://"))  # type: ignore[no-any-return]


async def test_sync_client_has_everything_client_has(greeter: RunningServer) -> None:
    async with await Client.connect(greeter.url) as client:
        wanted = {RENAMED.get(name, name) for name in public(client)}
    with SyncClient.connect(greeter.url) as sync:
        missing = wanted - public(sync)
        assert not missing, f"SyncClient lacks {sorted(missing)}"
        assert sync.interface is not None and sync.interface == sync.aclient.interface
        assert sync.transport is sync.aclient.transport and sync.retry is sync.aclient.retry
    for name in public(Client):
        if inspect.iscoroutinefunction(getattr(Client, name)) or inspect.isasyncgenfunction(
            getattr(Client, name)
        ):
            assert callable(getattr(SyncClient, RENAMED.get(name, name))), name


@pytest.mark.parametrize("form", ["{url}", "127.0.0.1:{port}", ":{port}", "localhost:{port}/"])
async def test_connect_takes_every_url_form(greeter: RunningServer, form: str) -> None:
    typed = form.format(url=greeter.url, port=greeter.port)
    async with await Client.connect(typed) as client:
        assert client.card.name == "Greeter"
    with SyncClient.connect(typed) as sync:
        assert sync.card.name == "Greeter"


def test_short_urls_are_told_from_module_names() -> None:
    assert agent_url(":8000") == "http://127.0.0.1:8000"
    assert agent_url("[::1]:8000/a2a") == "http://[::1]:8000/a2a"
    assert agent_url("https://agent.example") == "https://agent.example"
    for short in (":8000", "127.0.0.1:8800", "localhost:8000/a2a", "[::1]:9"):
        assert is_short_url(short), short
    for other in ("agent:agent", "pkg.mod:app", "agent.py", "skills", "http://x", "a:b:1"):
        assert not is_short_url(other), other
