"""The client commands of the ``skillwire`` CLI (card, send, tasks) against real servers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLES, RunningServer, assert_proto, free_port
from skillwire import A2AApplication, Agent
from skillwire.cli.main import main

Serve = Callable[[A2AApplication], RunningServer]


@pytest.fixture
def greeter(serve: Serve) -> RunningServer:
    return serve(Agent.from_folder(EXAMPLES / "greeter").asgi(store="memory://"))


@pytest.fixture
def workshop(serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    monkeypatch.setenv("SKILLWIRE_JOBS_DIR", str(tmp_path / "jobs"))
    agent = Agent.from_folder(EXAMPLES / "workshop")
    yield serve(agent.asgi(store="memory://"))
    # Reap the release jobs the deploy skill started (they end on their own once their log says done).
    jobs: list[subprocess.Popen[bytes]] = agent.registry.get("deploy").handler.__globals__["_started"]
    for job in jobs:
        job.wait(timeout=30)
    jobs.clear()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(out: str) -> list[Any]:
    return [json.loads(line) for line in out.splitlines()]


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("skillwire: ")
    return lines[0]


# -- card ------------------------------------------------------------------------------------------------


def test_card_human(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "card", greeter.url)
    assert code == 0, err
    assert out.startswith("Greeter 1.0.0\n")
    assert "Greets people by name, casually or formally." in out
    assert f"JSONRPC 1.0  {greeter.url}" in out
    assert "HTTP+JSON 1.0" in out
    assert "  greet: Greet\n" in out
    assert "Greets a person by name, in a casual or a formal style." in out


def test_card_json(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "card", greeter.url, "--json")
    assert code == 0
    assert out.count("\n") == 1
    card = json.loads(out)
    assert card["name"] == "Greeter"
    assert [s["id"] for s in card["skills"]] == ["greet"]
    assert_proto(out, "AgentCard")


# -- send ------------------------------------------------------------------------------------------------


def test_send_text(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", greeter.url, "Ada")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Task ") and ": completed (context " in lines[0]
    assert lines[-2:] == ["Artifact result:", "Hi Ada!"]
    assert err == ""


def test_send_json(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "send", greeter.url, "Ada", "--json")
    assert code == 0
    [response] = json_lines(out)
    assert_proto(out.strip(), "SendMessageResponse")
    task = response["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "Hi Ada!"}]


def test_send_data_and_headers_over_rest(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    data = '{"name": "Ada", "style": "formal"}'
    code, out, _ = run(
        capsys, "send", greeter.url, "--data", data, "--binding", "HTTP+JSON", "--header", "X-Trace=1"
    )
    assert code == 0
    assert out.splitlines()[-1] == "Good day, Ada. It is a pleasure to meet you."


def test_send_data_from_file(
    greeter: RunningServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    file = tmp_path / "params.json"
    file.write_text('{"name": "Grace"}')
    code, out, _ = run(capsys, "send", greeter.url, "--data", f"@{file}", "--skill", "greet")
    assert code == 0
    assert out.splitlines()[-1] == "Hi Grace!"


def test_send_failed_task_exits_1(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", greeter.url, "   ")
    assert code == 1
    assert ": failed (context " in out.splitlines()[0]
    assert "Status: Tell me whom to greet: send a name." in out
    assert err == ""


def test_send_refused_params_exits_3(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", greeter.url, "--data", '{"name": ""}')
    assert code == 3
    assert out == ""
    line = one_error_line(err)
    assert line.startswith("skillwire: SendMessage failed: ")
    assert line.endswith("(INVALID_PARAMS)")


def test_send_to_unknown_task_exits_3(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "send", greeter.url, "Ada", "--task", "no-such-task")
    assert code == 3
    line = one_error_line(err)
    assert line.startswith("skillwire: SendMessage failed: ")
    assert "no-such-task" in line and line.endswith("(TASK_NOT_FOUND)")


def test_send_stream_human(workshop: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", workshop.url, "3", "--skill", "countdown", "--stream")
    assert code == 0, err
    lines = out.splitlines()
    assert "[working] Counting down from 3" in lines
    start = lines.index("Artifact countdown:")
    assert lines[start + 1 : start + 4] == ["3...", "2...", "1..."]
    assert "Liftoff!" in lines
    assert lines[-1] == "[completed]"


def test_send_stream_json(workshop: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "send", workshop.url, "2", "--skill", "countdown", "--stream", "--json")
    assert code == 0
    for line in out.splitlines():
        assert_proto(line, "StreamResponse")
    events = json_lines(out)
    chunks = [e["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events if "artifactUpdate" in e]
    assert chunks == ["2...", "1...", "Liftoff!"]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- multi-turn and the tasks commands ---------------------------------------------------------------------


def _start_interview(url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, _ = run(capsys, "send", url, "start", "--skill", "interview", "--json")
    assert code == 0
    task: dict[str, Any] = json.loads(out)["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task


def test_input_required_answer_get_list_cancel(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = workshop.url
    code, out, _ = run(capsys, "send", url, "start", "--skill", "interview")
    assert code == 0
    assert ": input-required (context " in out
    assert "Status: What is your name?" in out
    task_id = out.splitlines()[0].split()[1].rstrip(":")
    assert f"answer with `skillwire send {url} TEXT --task {task_id}`" in out

    code, out, _ = run(capsys, "send", url, "Ada", "--task", task_id)
    assert code == 0
    assert "Status: Nice to meet you, Ada. What is your favourite colour?" in out

    code, out, _ = run(capsys, "tasks", "get", url, task_id, "--history", "10")
    assert code == 0
    assert "  user: start" in out and "  user: Ada" in out and "  agent: What is your name?" in out

    other = _start_interview(url, capsys)
    code, out, _ = run(capsys, "tasks", "list", url, "--context", other["contextId"])
    assert code == 0
    assert out.splitlines()[0].startswith(f"{other['id']}  input-required  {other['contextId']}")
    assert out.splitlines()[-1] == "1 of 1 task(s)"

    code, out, _ = run(capsys, "tasks", "list", url, "--json")
    assert code == 0
    assert_proto(out.strip(), "ListTasksResponse")
    assert {t["id"] for t in json.loads(out)["tasks"]} == {task_id, other["id"]}

    code, out, _ = run(capsys, "tasks", "cancel", url, task_id)
    assert code == 0
    assert out.splitlines()[0].startswith(f"Task {task_id}: canceled (context ")
    code, out, _ = run(capsys, "tasks", "get", url, task_id, "--json")
    assert code == 0
    assert_proto(out.strip(), "Task")
    assert json.loads(out)["status"]["state"] == "TASK_STATE_CANCELED"

    # watching a task that has ended shows its final state; a canceled task exits 1
    code, out, _ = run(capsys, "tasks", "watch", url, task_id)
    assert code == 1
    assert ": canceled " in out

    code, _, err = run(capsys, "tasks", "cancel", url, task_id)
    assert code == 3
    assert one_error_line(err).startswith("skillwire: CancelTask failed: ")
    assert err.strip().endswith("(TASK_NOT_CANCELABLE)")


def test_watch_stops_when_the_task_waits_for_input(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _start_interview(workshop.url, capsys)
    code, out, err = run(capsys, "tasks", "watch", workshop.url, task["id"])
    assert code == 0
    assert err == ""
    assert "Status: What is your name?" in out
    assert f"--task {task['id']}`" in out


def test_watch_follows_a_running_task_to_the_end(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    data = '{"release": "v7", "steps": 1}'
    code, out, _ = run(capsys, "send", workshop.url, "--skill", "deploy", "--data", data)
    assert code == 0
    assert ": working (context " in out
    task_id = out.splitlines()[0].split()[1].rstrip(":")
    assert f"follow it with `skillwire tasks watch {workshop.url} {task_id}`" in out

    code, out, err = run(capsys, "tasks", "watch", workshop.url, task_id, "--json")
    assert code == 0, err
    for line in out.splitlines():
        assert_proto(line, "StreamResponse")
    code, out, _ = run(capsys, "tasks", "get", workshop.url, task_id)
    assert code == 0
    assert ": completed (context " in out
    assert "release v7 is live." in out


def test_get_unknown_task_exits_3(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "tasks", "get", greeter.url, "missing")
    assert code == 3
    assert out == ""
    assert one_error_line(err) == "skillwire: GetTask failed: Task missing not found (TASK_NOT_FOUND)"


# -- errors ----------------------------------------------------------------------------------------------


def test_connection_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run(capsys, "card", url, "--retries", "0")
    assert code == 3
    assert out == ""
    line = one_error_line(err)
    assert line.startswith(f"skillwire: reading the agent card at {url} failed: ConnectError")


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, "send", url, "Ada", "--retries", "0", "--debug")
    assert code == 3
    assert err.startswith("Traceback (most recent call last):")
    assert "AgentConnectionError" in err
    assert err.splitlines()[-1].startswith(f"skillwire: reading the agent card at {url} failed: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["send", "http://127.0.0.1:1"],
        ["send", "http://127.0.0.1:1", "--data", "{not json"],
        ["send", "http://127.0.0.1:1", "--data", "@/no/such/file.json"],
        ["send", "http://127.0.0.1:1", "x", "--header", "novalue"],
        ["tasks", "get", "http://127.0.0.1:1"],
        ["tasks"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage: skillwire" in capsys.readouterr().err


# -- a real process --------------------------------------------------------------------------------------


def test_python_m_skillwire_send(greeter: RunningServer) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "skillwire", "send", greeter.url, "Ada"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "Hi Ada!"
    assert result.stderr == ""
