"""A task store whose database cannot be reached, on every binding (issue 14).

A real server (uvicorn in a thread, gRPC beside it) on a real PostgreSQL reached through a TCP proxy that the
test cuts: each binding answers the busy/unavailable class of error (HTTP 503 with Retry-After, gRPC
UNAVAILABLE, reason SERVICE_UNAVAILABLE) instead of an internal error, and a client whose retry policy
allows it waits as told and gets through once the database is back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from conftest import TcpProxy, example_agent, postgres_address, postgres_schema, via_proxy
from skillwire import Client, TaskState
from skillwire.client import RetryPolicy
from skillwire.client.errors import HTTPStatusError
from skillwire.errors import ServiceUnavailableError
from skillwire.protocol.models import Task
from skillwire.server.tasks.run import STORE_UNAVAILABLE

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
WAIT = 30.0


class _Seen(logging.Handler):
    """Sets ``event`` when the server logs a line holding ``text`` (the server runs in another thread)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


@pytest.fixture
def unavailable() -> Iterator[_Seen]:
    seen = _Seen("the task store is unavailable")
    logger = logging.getLogger("skillwire.runtime")
    logger.addHandler(seen)
    try:
        yield seen
    finally:
        logger.removeHandler(seen)


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[str, TcpProxy]]:
    """A fresh schema's URL through a proxy to PostgreSQL, and the proxy."""
    async with postgres_schema() as url:
        proxy = TcpProxy(postgres_address(url))
        proxy.start()
        try:
            yield via_proxy(url, proxy, timeout="3"), proxy
        finally:
            proxy.cut()


def _unavailable(error: BaseException) -> ServiceUnavailableError:
    """The A2A error a call failed with: HTTP bindings raise a 503 as HTTPStatusError (for the retry
    policy), holding it; gRPC raises it as it is."""
    if isinstance(error, HTTPStatusError):
        assert error.status_code == 503 and error.retry_after == 1, error
        assert str(error) == f"HTTP 503: {STORE_UNAVAILABLE} (SERVICE_UNAVAILABLE)"
        inner: Any = error.error
    else:
        inner = error
    assert isinstance(inner, ServiceUnavailableError), repr(error)
    assert inner.message == STORE_UNAVAILABLE and inner.retry_after == 1
    return inner


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_unreachable_store_is_unavailable_and_a_retrying_client_gets_through(
    serve: Any, proxied: tuple[str, TcpProxy], unavailable: _Seen, binding: str
) -> None:
    store, proxy = proxied
    srv = serve(example_agent("echo").asgi(store=store, grpc_port=0))
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT, retries=0) as client:
        task = await client.send("stored before")
        assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
        proxy.cut()
        with pytest.raises(Exception) as read:
            await client.get_task(task.id)
        _unavailable(read.value)
        with pytest.raises(Exception) as sent:
            await client.send("never stored")
        _unavailable(sent.value)
        with pytest.raises(Exception) as listed:
            await client.list_tasks()
        _unavailable(listed.value)

    patient = RetryPolicy(retries=20, base=0.05, cap=2.0)
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT, retries=patient) as client:
        unavailable.event.clear()
        reading = asyncio.create_task(client.get_task(task.id))
        assert await asyncio.to_thread(unavailable.event.wait, WAIT)  # refused at least once...
        proxy.start()  # ...and the database comes back while the client waits its Retry-After
        got = await asyncio.wait_for(reading, WAIT)
        assert got.id == task.id and got.status.state is TaskState.COMPLETED
        page = await client.list_tasks()
        assert [t.id for t in page.tasks] == [task.id]  # the message sent during the outage left nothing
