"""The command line, for real: `skillwire serve` in a subprocess, restart after kill -9, target errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import EXAMPLES, PROCESS_TIMEOUT, Served, assert_rpc_result, free_port, user_message
from conftest import start_process as start
from skillwire.cli.main import main

TIMEOUT = PROCESS_TIMEOUT


def test_serve_greeter_prints_where_it_is(tmp_path: Path, processes: list[Served]) -> None:
    served = start(str(EXAMPLES / "greeter"), "sqlite:///tasks.db", tmp_path)
    processes.append(served)
    text = "".join(served.lines)
    assert f"{served.url}/" in text
    assert f"{served.url}/.well-known/agent-card.json" in text
    assert "sqlite:///tasks.db" in text
    card = httpx.get(served.url + "/.well-known/agent-card.json", timeout=TIMEOUT).json()
    assert card["name"] == "Greeter" and card["skills"][0]["id"] == "greet"
    result = served.call("SendMessage", {"message": user_message("Ada")})
    task = assert_rpc_result(result, "SendMessage")["task"]
    assert task["artifacts"][0]["parts"][0]["text"] == "Hi Ada!"
    formal = {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"name": "Ada", "style": "formal"}}]}
    task = assert_rpc_result(served.call("SendMessage", {"message": formal}), "SendMessage")["task"]
    assert task["artifacts"][0]["parts"][0]["text"].startswith("Good day, Ada.")
    assert (tmp_path / "tasks.db").exists()
    # SIGTERM is a graceful stop (uvicorn re-raises the signal once it has shut down)
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(TIMEOUT) in (0, -signal.SIGTERM)
    assert served.proc.stdout is not None
    assert "Traceback" not in served.proc.stdout.read()


def test_default_store_is_a_sqlite_file_named_after_the_agent_in_the_working_directory(
    tmp_path: Path, processes: list[Served]
) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillwire", "serve", str(EXAMPLES / "echo"), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    served = Served(proc, port, [])
    processes.append(served)
    assert proc.stdout is not None
    for line in proc.stdout:
        served.lines.append(line)
        if "task store:" in line:
            break
    assert "sqlite:///.skillwire/echo.db" in "".join(served.lines)
    assert (tmp_path / ".skillwire" / "echo.db").exists()


def test_tasks_survive_kill_9_and_orphans_fail_on_restart(tmp_path: Path, processes: list[Served]) -> None:
    store = f"sqlite:///{tmp_path}/tasks.db"
    first = start(str(EXAMPLES / "tck"), store, tmp_path)
    processes.append(first)
    done = assert_rpc_result(
        first.call("SendMessage", {"message": user_message("tck-complete-task")}), "SendMessage"
    )
    waiting = assert_rpc_result(
        first.call("SendMessage", {"message": user_message("tck-input-required")}), "SendMessage"
    )
    running = assert_rpc_result(
        first.call(
            "SendMessage",
            {"message": user_message("tck-long-running"), "configuration": {"returnImmediately": True}},
        ),
        "SendMessage",
    )
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(TIMEOUT)

    second = start(str(EXAMPLES / "tck"), store, tmp_path)
    processes.append(second)
    got = assert_rpc_result(second.call("GetTask", {"id": done["task"]["id"]}), "GetTask")
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    orphan = assert_rpc_result(second.call("GetTask", {"id": running["task"]["id"]}), "GetTask")
    assert orphan["status"]["state"] == "TASK_STATE_FAILED"
    assert "stopped" in orphan["status"]["message"]["parts"][0]["text"]
    follow = user_message("tck-complete-task", taskId=waiting["task"]["id"])
    resumed = assert_rpc_result(second.call("SendMessage", {"message": follow}), "SendMessage")
    assert resumed["task"]["id"] == waiting["task"]["id"]
    assert resumed["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no/such/folder", "not a folder"),
        ("json:nothing", "must be a skillwire.Agent"),
        ("no_such_module_xyz:agent", "cannot import"),
    ],
)
def test_bad_targets_are_one_line_errors(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", target]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_folder_without_agent_py(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path)]) == 2
    assert "no agent.py" in capsys.readouterr().err


def test_bad_store_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(EXAMPLES / "echo"), "--store", "redis://x"]) == 2
    assert "Unknown store URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("statuses", "code"), [((), "FAILED_PRECONDITION"), (("--grpc-statuses", "v1.0.0"), "UNIMPLEMENTED")]
)
def test_serve_grpc_statuses_picks_the_status_table(
    tmp_path: Path, processes: list[Served], statuses: tuple[str, ...], code: str
) -> None:
    import grpc

    served = start(str(EXAMPLES / "tck"), "memory://", tmp_path, "--grpc-port", "0", *statuses)
    processes.append(served)
    address = next(line.split("gRPC: ")[1].strip() for line in served.lines if "gRPC: " in line)
    with grpc.insecure_channel(address) as channel:
        get_task = channel.unary_unary("/lf.a2a.v1.A2AService/GetTask")
        with pytest.raises(grpc.RpcError) as caught:
            get_task(b"", timeout=TIMEOUT)  # no a2a-version: VersionNotSupportedError
    assert caught.value.code().name == code


GC_PROBE = '''
import gc

from skillwire import Agent

agent = Agent("GC probe", "Says how the collector of its process is set")


@agent.skill(tags=["probe"])
async def collector(params, ctx):
    """The collector's thresholds, and whether start-up's objects were frozen."""
    return f"{gc.get_threshold()} {gc.get_freeze_count() > 0}"
'''

#: ``python -c`` that raises the young threshold past the server's own before the command line runs.
GC_RAISED = """
import gc, sys
gc.set_threshold(50_000, 7, 7)
from skillwire.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("raised", [False, True], ids=["interpreter-default", "raised-by-the-process"])
def test_a_serving_process_collects_young_objects_less_often_unless_it_chose_otherwise(
    tmp_path: Path, processes: list[Served], raised: bool
) -> None:
    # Requests in flight keep thousands of container objects alive at once, so the interpreter's young
    # threshold (700; 2,000 from 3.13) started a collection every 16-20 SendMessages that freed almost
    # nothing; `skillwire serve` raises it once it serves and freezes what start-up made. A process that set
    # a higher one keeps its own, and the older generations' thresholds are never touched.
    from skillwire.server.serving.serve import GC_YOUNG_THRESHOLD

    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "agent.py").write_text(GC_PROBE)
    launcher = ("-c", GC_RAISED) if raised else ("-m", "skillwire")
    served = start(str(tmp_path / "probe"), "memory://", tmp_path, launcher=launcher)
    processes.append(served)
    result = served.call("SendMessage", {"message": user_message("how")})
    text = assert_rpc_result(result, "SendMessage")["task"]["artifacts"][0]["parts"][0]["text"]
    default = subprocess.run(
        [sys.executable, "-c", "import gc; print(gc.get_threshold())"], capture_output=True, text=True
    ).stdout.split("\n")[0]
    young, *older = (int(n) for n in default.strip("()").split(","))
    assert young < GC_YOUNG_THRESHOLD  # else the server has nothing to raise here
    expected = (50_000, 7, 7) if raised else (GC_YOUNG_THRESHOLD, *older)
    assert text == f"{expected} True"
