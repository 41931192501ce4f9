"""A busy server and a store that cannot commit answer the same way on every binding.

Busy (the running-task budget): HTTP 503 with ``Retry-After`` on JSON-RPC and HTTP+JSON, gRPC UNAVAILABLE with
a ``google.rpc.RetryInfo``; each with ErrorInfo reason ``SERVER_BUSY``. A commit the store cannot make (here:
SQLite's write lock held by another connection past the store's timeout): an internal error, and the task is
not reported anywhere.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

from conftest import A2A_V1, RunningServer, assert_rpc_error, rpc, start_server, user_message
from skillwire import Agent, Limits, RequestContext, TaskEvents

WAIT = 15.0
V1 = (("a2a-version", "1.0"),)


class Holder:
    """``hold`` works until the test lets it go; anything else completes at once."""

    def __init__(self) -> None:
        self.go = threading.Event()

    async def __call__(self, context: RequestContext, events: TaskEvents) -> None:
        if context.text == "hold":
            await events.working()
            await asyncio.to_thread(self.go.wait, WAIT)
        await events.artifact("done")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningServer, Holder, Path]]:
    holder = Holder()
    agent = Agent("holder", "Holds one task.", executor=holder)
    db = tmp_path / "tasks.db"
    app = agent.asgi(
        store=f"sqlite:///{db}?timeout=0.2", limits=Limits(max_running_tasks=1, retry_after=2), grpc_port=0
    )
    srv = start_server(app)
    try:
        yield srv, holder, db
    finally:
        holder.go.set()
        srv.stop()


def grpc_send(srv: RunningServer, text: str) -> grpc.RpcError:
    assert srv.app.grpc_address is not None
    with grpc.insecure_channel(srv.app.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        request = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(message_id="g1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)])
        )
        with pytest.raises(grpc.RpcError) as caught:
            stub.SendMessage(request, metadata=V1, timeout=WAIT)
    return caught.value


def grpc_details(error: Any) -> list[Any]:
    raw = dict(error.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    found = []
    for packed in status.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo):
            if packed.Is(kind.DESCRIPTOR):
                message = kind()
                packed.Unpack(message)
                found.append(message)
    return found


def rest_send(srv: RunningServer, text: str) -> httpx.Response:
    return httpx.post(
        srv.url + "/message:send", json={"message": user_message(text)}, headers=A2A_V1, timeout=WAIT
    )


def rpc_send(srv: RunningServer, text: str) -> httpx.Response:
    body = rpc("SendMessage", {"message": user_message(text)})
    return httpx.post(srv.rpc_url, json=body, headers=A2A_V1, timeout=WAIT)


def test_past_the_running_task_budget_every_binding_says_busy_and_when_to_come_back(
    served: tuple[RunningServer, Holder, Path],
) -> None:
    srv, holder, _ = served
    body = rpc("SendMessage", {"message": user_message("hold"), "configuration": {"returnImmediately": True}})
    assert "result" in httpx.post(srv.rpc_url, json=body, headers=A2A_V1, timeout=WAIT).json()  # the one slot

    busy = rpc_send(srv, "quick")
    assert busy.status_code == 503 and busy.headers["retry-after"] == "2"
    error = assert_rpc_error(busy.json(), -32603)
    assert error["data"][0]["reason"] == "SERVER_BUSY"

    rest = rest_send(srv, "quick")
    assert rest.status_code == 503 and rest.headers["retry-after"] == "2"
    assert rest.json()["error"]["status"] == "UNAVAILABLE"

    failure = grpc_send(srv, "quick")
    assert failure.code() == grpc.StatusCode.UNAVAILABLE
    details = grpc_details(failure)
    assert [d.reason for d in details if isinstance(d, error_details_pb2.ErrorInfo)] == ["SERVER_BUSY"]
    delays = [d.retry_delay.seconds for d in details if isinstance(d, error_details_pb2.RetryInfo)]
    assert delays == [2]

    holder.go.set()


def test_a_commit_the_store_cannot_make_is_an_internal_error_on_every_binding(
    served: tuple[RunningServer, Holder, Path],
) -> None:
    srv, _, db = served
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")  # another connection holds the write lock past the store's 0.2 s
    try:
        assert_rpc_error(rpc_send(srv, "quick").json(), -32603)
        rest = rest_send(srv, "quick")
        assert rest.status_code == 500 and rest.json()["error"]["status"] == "INTERNAL"
        assert grpc_send(srv, "quick").code() == grpc.StatusCode.INTERNAL
        listed = httpx.post(srv.rpc_url, json=rpc("ListTasks", {}), headers=A2A_V1, timeout=WAIT).json()
        assert listed["result"]["tasks"] == []  # nothing was reported, so nothing is listed
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    again = rpc_send(srv, "quick").json()
    assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
