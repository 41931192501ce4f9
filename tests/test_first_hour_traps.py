"""The smaller traps of a first hour with skillwire, each seen once and now gone, with real servers: the
``.skillwire/`` folder keeps itself out of git, the error for a store another process owns names the setting
of the way the server was started, the card is also where clients before A2A 0.3 look, and a request
without ``A2A-Version`` is what docs/conformance.md says it is."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc

from conftest import (
    EXAMPLES,
    PROCESS_TIMEOUT,
    ROOT,
    RunningServer,
    Served,
    example_agent,
    free_port,
    start_process,
)
from skillwire.errors import StoreError

WAIT = 10.0


# -- .skillwire/ and git -----------------------------------------------------------------------------------


async def test_the_default_store_folder_keeps_itself_out_of_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(tmp_path)], check=True, timeout=WAIT)
    monkeypatch.chdir(tmp_path)
    app = example_agent("greeter").asgi()  # the default store: .skillwire/greeter.db, and its push key
    await app.startup()
    try:
        assert app.push is not None
        await app.push.public_jwks()  # the push signing key is made when first needed
        assert (tmp_path / ".skillwire" / "greeter.db").exists()
        assert any(p.suffix == ".pem" for p in (tmp_path / ".skillwire").iterdir())  # a private key
    finally:
        await app.shutdown()
    status = await asyncio.to_thread(
        subprocess.run,
        ["git", "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
        timeout=WAIT,
    )
    assert status.stdout == "", status.stdout


# -- a store another process owns ---------------------------------------------------------------------------


async def test_a_store_in_use_names_store_for_an_app_in_code(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    first = example_agent("greeter").asgi(store=store)
    await first.startup()
    try:
        second = example_agent("greeter").asgi(store=store)
        with pytest.raises(StoreError) as refused:
            await second.startup()
    finally:
        await first.shutdown()
    assert "give this one another store=" in str(refused.value)
    assert "--store" not in str(refused.value)


@pytest.mark.slow
def test_a_store_in_use_names_store_for_the_command_line(tmp_path: Path, processes: list[Served]) -> None:
    processes.append(start_process(str(EXAMPLES / "greeter"), "sqlite:///tasks.db", tmp_path))
    greeter = str(EXAMPLES / "greeter")
    argv = ["serve", greeter, "--store", "sqlite:///tasks.db", "--port", str(free_port())]
    second = subprocess.run(
        [sys.executable, "-m", "skillwire", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=PROCESS_TIMEOUT,
    )
    assert second.returncode == 2
    assert "give this one another --store (SKILLWIRE_STORE)" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1, second.stderr


# -- the card's older path ----------------------------------------------------------------------------------


def test_the_card_is_also_at_the_path_of_clients_before_0_3(serve: Any) -> None:
    srv: RunningServer = serve(example_agent("greeter").asgi(store="memory://"))
    current = httpx.get(srv.url + "/.well-known/agent-card.json", timeout=WAIT)
    older = httpx.get(srv.url + "/.well-known/agent.json", timeout=WAIT)
    assert older.status_code == 200 and older.json() == current.json()
    assert older.json()["name"] == "Greeter"


# -- docs/conformance.md: a request without A2A-Version ----------------------------------------------------


def conformance_row() -> str:
    text = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    return next(line for line in text.splitlines() if line.startswith("| Missing `A2A-Version`"))


def test_a_request_without_a2a_version_is_what_the_conformance_doc_says(serve: Any) -> None:
    row = conformance_row()
    assert "Served as v0.3" in row and "-32009" not in row
    srv: RunningServer = serve(example_agent("greeter").asgi(store="memory://", grpc_port=0))
    v03 = {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "Ada"}]}
    served = httpx.post(
        srv.url, json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": v03}}
    ).json()
    assert served["result"]["kind"] == "task" and served["result"]["status"]["state"] == "completed"
    v10 = {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "Ada"}]}
    refused = httpx.post(
        srv.url, json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": v10}}
    ).json()
    assert refused["error"]["code"] == -32601 and "A2A-Version: 1.0" in refused["error"]["message"]
    rest = httpx.post(srv.url + "/message:send", json={"message": v10})
    assert rest.status_code == 400 and rest.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert srv.app.grpc_address is not None
    with grpc.insecure_channel(srv.app.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        message = a2a_pb2.Message(message_id="g1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="Ada")])
        with pytest.raises(grpc.RpcError) as caught:
            stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), timeout=WAIT)
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
