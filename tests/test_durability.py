"""The durability contract under real faults (docs/durability.md).

Each test causes a fault for real (the server's file size limit lowered with prlimit while it runs, a read-only
file system, a write lock held by another SQLite connection, a second server process on the same file) and
checks what callers were told against what the store holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    A2A_V1,
    EXAMPLES,
    PROCESS_TIMEOUT,
    Served,
    ServerExited,
    assert_rpc_error,
    assert_rpc_result,
    rpc,
    start_process,
    start_server,
    user_message,
)
from skillwire import Agent, RequestContext, TaskEvents
from skillwire.errors import StoreError
from skillwire.stores import SQLiteTaskStore, TaskQuery
from skillwire.wire.sse import SSEDecoder

INTERNAL = -32603


def send(served: Served, text: str, **configuration: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": user_message(text)}
    if configuration:
        params["configuration"] = configuration
    return served.call("SendMessage", params)


def stored_tasks(path: Path) -> dict[str, Any]:
    """Every task in the SQLite file at ``path`` (the server that owned it has stopped), by id."""

    async def read() -> dict[str, Any]:
        store = SQLiteTaskStore(path)
        await store.open()
        try:
            found: dict[str, Any] = {}
            token = ""
            while True:
                page = await store.list_tasks(
                    TaskQuery(page_size=100, page_token=token, include_artifacts=True)
                )
                found.update((t.id, t) for t in page.tasks)
                token = page.next_page_token
                if not token:
                    return found
        finally:
            await store.close()

    return asyncio.run(read())


def stop(served: Served) -> None:
    served.proc.terminate()
    served.proc.wait(PROCESS_TIMEOUT)


# -- the disk fills up ------------------------------------------------------------------------------------


def test_with_the_disk_full_callers_are_told_only_what_the_store_holds(
    tmp_path: Path, processes: list[Served]
) -> None:
    """The issue's finding: with the server's file size limit lowered mid-run, blocking SendMessage calls
    were answered COMPLETED while GetTask said the tasks did not exist. Now every answer matches the store."""
    db = tmp_path / "tasks.db"
    served = start_process(str(EXAMPLES / "echo"), f"sqlite:///{db}", tmp_path)
    processes.append(served)
    told: dict[str, str] = {}
    for i in range(3):
        task = assert_rpc_result(send(served, f"before {i}"), "SendMessage")["task"]
        told[task["id"]] = task["status"]["state"]

    # The disk is full: no file of the server's may grow past its current size.
    limit = max(f.stat().st_size for f in tmp_path.glob("tasks.db*"))
    resource.prlimit(served.proc.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    refused = 0
    big = "x" * 300_000
    for i in range(6):
        answer = send(served, f"{big} {i}")
        if "error" in answer:
            assert_rpc_error(answer, INTERNAL)
            refused += 1
        else:
            task = assert_rpc_result(answer, "SendMessage")["task"]
            told[task["id"]] = task["status"]["state"]
    assert refused, "the lowered file size limit caused no failed write"

    # Still serving, and every task a caller was told about reads back as it was told.
    card = httpx.get(served.url + "/.well-known/agent-card.json", timeout=PROCESS_TIMEOUT)
    assert card.status_code == 200
    for task_id, state in told.items():
        got = assert_rpc_result(served.call("GetTask", {"id": task_id}), "GetTask")
        assert got["status"]["state"] == state
    listed = assert_rpc_result(served.call("ListTasks", {"pageSize": 100}), "ListTasks")
    assert {t["id"] for t in listed["tasks"]} == set(told)

    # Space again: the server goes on as before.
    resource.prlimit(served.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    after = assert_rpc_result(send(served, f"{big} after"), "SendMessage")["task"]
    assert after["status"]["state"] == "TASK_STATE_COMPLETED"
    told[after["id"]] = after["status"]["state"]
    stop(served)
    held = stored_tasks(db)
    assert {task_id: task.status.state.value for task_id, task in held.items()} == told


# -- a read-only file system ----------------------------------------------------------------------------------


@contextlib.contextmanager
def read_only_folder() -> Iterator[Path]:
    """A folder the server cannot write to: a read-only tmpfs when we may mount one, else a folder without
    write permission (which only binds a server that does not run as root)."""
    base = Path(tempfile.mkdtemp(prefix="skillwire-ro-"))
    folder = base / "store"
    folder.mkdir()
    mounted = False
    try:
        if os.geteuid() == 0:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True
            )
            if done.returncode != 0:
                pytest.skip("running as root without mount privileges: cannot make a read-only folder")
            mounted = True
        else:
            folder.chmod(0o555)
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=False)
        else:
            folder.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_a_store_on_a_read_only_file_system_is_refused_at_start_with_its_path(tmp_path: Path) -> None:
    with read_only_folder() as folder, pytest.raises(ServerExited) as exited:
        start_process(str(EXAMPLES / "echo"), f"sqlite:///{folder}/tasks.db", tmp_path)
    assert exited.value.returncode == 2
    out = exited.value.output
    assert "cannot open the SQLite store" in out and str(folder) in out and "Read-only file system" in out
    assert "Traceback" not in out


# -- a lock held by another connection ------------------------------------------------------------------------


class Gate:
    """An executor that works, emits ``first``, then waits for the test before it completes."""

    def __init__(self) -> None:
        self.open = threading.Event()

    async def __call__(self, context: RequestContext, events: TaskEvents) -> None:
        if context.text == "quick":
            await events.artifact("done")
            return
        await events.working()
        await events.artifact("first", artifact_id="a1")
        await asyncio.to_thread(self.open.wait, PROCESS_TIMEOUT)
        await events.artifact("second", artifact_id="a2")


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Hold SQLite's write lock on ``path`` from another connection, as a stuck tool would."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def stream_events(url: str, text: str) -> Iterator[dict[str, Any]]:
    body = rpc("SendStreamingMessage", {"message": user_message(text)})
    with httpx.stream("POST", url, json=body, headers=A2A_V1, timeout=PROCESS_TIMEOUT) as response:
        decoder = SSEDecoder()
        for chunk in response.iter_bytes():
            for event in decoder.feed(chunk):
                yield json.loads(event)


def test_a_locked_database_fails_the_call_keeps_the_last_committed_state_and_repairs_later(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tasks.db"
    gate = Gate()
    agent = Agent("gate", "Waits for the test.", executor=gate)
    srv = start_server(agent.asgi(store=f"sqlite:///{db}?timeout=0.2"))
    try:
        events = stream_events(srv.rpc_url, "go")
        seen = [next(events) for _ in range(3)]  # the task, WORKING, artifact a1: each committed first
        task_id = seen[0]["result"]["task"]["id"]
        assert seen[2]["result"]["artifactUpdate"]["artifact"]["artifactId"] == "a1"
        with write_locked(db):
            # A new task cannot be stored: the caller is told so, and nothing is reported.
            refused = httpx.post(
                srv.rpc_url, json=rpc("SendMessage", {"message": user_message("quick")}), headers=A2A_V1
            ).json()
            assert_rpc_error(refused, INTERNAL)
            # The running task finishes, but its completion cannot be stored: its stream ends with an error.
            gate.open.set()
            rest = list(events)
            assert rest and "error" in rest[-1] and rest[-1]["error"]["code"] == INTERNAL
            assert all("statusUpdate" not in e.get("result", {}) for e in rest)
            # Readers still see the last committed state, never what could not be stored.
            got = assert_rpc_result(
                httpx.post(srv.rpc_url, json=rpc("GetTask", {"id": task_id}), headers=A2A_V1).json(),
                "GetTask",
            )
            assert got["status"]["state"] == "TASK_STATE_WORKING"
            assert [a["artifactId"] for a in got["artifacts"]] == ["a1"]
            listed = httpx.post(srv.rpc_url, json=rpc("ListTasks", {}), headers=A2A_V1).json()
            assert [t["id"] for t in assert_rpc_result(listed, "ListTasks")["tasks"]] == [task_id]
        # Once the lock is gone the runtime stores the task as failed, with the reason, and serves again.
        runtime = srv.app.runtime
        assert runtime is not None
        pending = asyncio.run_coroutine_threadsafe(runtime.retry_repairs(), srv.loop).result(PROCESS_TIMEOUT)
        assert pending == 0
        got = assert_rpc_result(
            httpx.post(srv.rpc_url, json=rpc("GetTask", {"id": task_id}), headers=A2A_V1).json(), "GetTask"
        )
        assert got["status"]["state"] == "TASK_STATE_FAILED"
        assert "could not store" in got["status"]["message"]["parts"][0]["text"]
        again = httpx.post(
            srv.rpc_url, json=rpc("SendMessage", {"message": user_message("quick")}), headers=A2A_V1
        ).json()
        assert assert_rpc_result(again, "SendMessage")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        gate.open.set()
        srv.stop()


# -- two processes on one file ----------------------------------------------------------------------------


def test_a_second_server_on_the_same_file_is_refused_and_the_first_keeps_its_tasks(
    tmp_path: Path, processes: list[Served]
) -> None:
    """The issue's finding: a second `skillwire serve` on a running one's file failed its live tasks and
    silently dropped its later writes. Now the second one refuses to start, naming the owner."""
    store = f"sqlite:///{tmp_path}/tasks.db"
    first = start_process(str(EXAMPLES / "tck"), store, tmp_path)
    processes.append(first)
    running = assert_rpc_result(send(first, "tck-long-running", returnImmediately=True), "SendMessage")[
        "task"
    ]
    with pytest.raises(ServerExited) as exited:
        start_process(str(EXAMPLES / "tck"), store, tmp_path)
    assert exited.value.returncode == 2
    assert f"in use by process {first.proc.pid}" in exited.value.output
    assert "Traceback" not in exited.value.output

    got = assert_rpc_result(first.call("GetTask", {"id": running["id"]}), "GetTask")
    assert got["status"]["state"] == "TASK_STATE_WORKING"
    canceled = assert_rpc_result(first.call("CancelTask", {"id": running["id"]}), "CancelTask")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    stop(first)
    third = start_process(str(EXAMPLES / "tck"), store, tmp_path)
    processes.append(third)
    kept = assert_rpc_result(third.call("GetTask", {"id": running["id"]}), "GetTask")
    assert kept["status"]["state"] == "TASK_STATE_CANCELED"


async def test_one_store_object_per_file_even_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    owner = SQLiteTaskStore(path)
    await owner.open()
    other = SQLiteTaskStore(path)
    with pytest.raises(StoreError, match=f"in use by process {os.getpid()}"):
        await other.open()
    await owner.close()
    await other.open()  # the owner is gone: the file is free
    await other.close()
