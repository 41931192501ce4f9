"""``skillwire tasks watch`` survives a restart of the agent (issue 29): it follows a task at work, the agent
is killed and started again on the same port and store, the task is taken up again there (a retryable
skill) and completes, and the watch prints each of its events once, then ends with the task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, free_port, rpc, start_process, user_message

WAIT = 30.0
AGENT = str(Path(__file__).resolve().parent / "cluster_agent.py")


@pytest.mark.slow
def test_tasks_watch_outlasts_a_restart_of_the_agent_and_repeats_nothing(
    tmp_path: Path, processes: list[Any]
) -> None:
    store, port = f"sqlite:///{tmp_path / 'again.db'}", free_port()
    first = start_process(AGENT, store, tmp_path, "--no-push", port=port)
    processes.append(first)
    message = user_message("go", metadata={"skillId": "again"})
    body = rpc("SendMessage", {"message": message, "configuration": {"returnImmediately": True}})
    task = httpx.post(first.url, json=body, headers=A2A_V1, timeout=WAIT).json()["result"]["task"]
    watch = subprocess.Popen(
        [sys.executable, "-m", "skillwire", "tasks", "watch", f":{port}", task["id"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    seen = threading.Condition()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            with seen:
                lines.append(line.rstrip("\n"))
                seen.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with seen:  # the watch follows the task at work in the first process
            assert seen.wait_for(lambda: any(f"running in {first.proc.pid}" in line for line in lines), WAIT)
        os.kill(first.proc.pid, signal.SIGKILL)  # the agent dies ...
        first.proc.wait(WAIT)
        second = start_process(AGENT, store, tmp_path, "--no-push", port=port)  # ... and comes back
        processes.append(second)
        assert watch.wait(WAIT) == 0  # the task, taken up again, completed
        reader.join(WAIT)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        reader.join(WAIT)
        for pipe in (watch.stdout, watch.stderr):
            if pipe is not None:
                pipe.close()
    printed = [line for line in lines if line.strip()]
    assert any(f"done in {second.proc.pid}" in line for line in printed), printed
    assert len(printed) == len(set(printed)), printed  # every event once
