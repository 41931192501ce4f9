"""What the agent keeps on disk is its owner's alone (docs/security.md): the SQLite store holds webhook
tokens and credentials in clear, so it, its -wal and -shm files, its lock and skillwire's own folder
(``.skillwire/``) are 0600/0700, under a umask that would make them readable by everyone."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, example_agent, rpc, user_message
from skillwire import WebhookPolicy
from skillwire.agent import default_store
from skillwire.stores import SQLiteTaskStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The umask most systems start with: files 0644, folders 0755 unless made otherwise."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_the_default_store_and_its_folder_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: Any, open_umask: None
) -> None:
    monkeypatch.chdir(tmp_path)
    agent = example_agent("echo")
    server = serve(agent.asgi(webhook_policy=WebhookPolicy(allow=["127.0.0.1"], allow_http=True)))
    config = {
        "url": "http://127.0.0.1:1/hook",
        "token": "secret-token",
        "authentication": {"scheme": "Bearer"},
    }
    params = {"message": user_message("hi"), "configuration": {"taskPushNotificationConfig": config}}
    answer = httpx.post(server.rpc_url, json=rpc("SendMessage", params), headers=A2A_V1).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    db = tmp_path / default_store(agent.name).removeprefix("sqlite:///")
    folder = db.parent
    assert folder.name == ".skillwire" and mode(folder) == 0o700
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}.lock")):
        assert path.exists() and mode(path) == 0o600, path
    assert b"secret-token" in db.read_bytes() + Path(f"{db}-wal").read_bytes()  # what the modes protect


def open_and_close(db: Path, while_open: Callable[[], None] = lambda: None) -> None:
    """Open the store at ``db``, call ``while_open``, close the store."""

    async def cycle() -> None:
        store = SQLiteTaskStore(db)
        await store.open()
        try:
            while_open()
        finally:
            await store.close()

    asyncio.run(cycle())


def test_files_an_older_version_left_readable_are_made_private(tmp_path: Path, open_umask: None) -> None:
    folder = tmp_path / ".skillwire"
    folder.mkdir(mode=0o755)
    db = folder / "old.db"
    open_and_close(db)
    for path in (folder, db):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    wal = Path(f"{db}-wal")
    wal.write_bytes(b"")
    os.chmod(wal, 0o644)
    seen: list[int] = []
    open_and_close(db, lambda: seen.extend(mode(p) for p in (folder, db, wal)))
    assert seen == [0o700, 0o600, 0o600]


def test_a_folder_of_the_users_is_left_as_it_is_and_one_made_for_the_store_is_private(
    tmp_path: Path, open_umask: None
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    made = tmp_path / "new" / "data"
    for db in (shared / "a.db", made / "b.db"):
        open_and_close(db)
        assert mode(db) == 0o600
    assert mode(shared) == 0o755  # the user's own folder: not ours to change
    assert mode(made) == 0o700
