"""The client commands of the ``skillwire`` CLI (card, send, tasks) against real servers."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import EXAMPLES, RecordingHandler, RunningServer, assert_proto, free_port
from skillwire import Agent, RequestContext, TaskEvents
from skillwire.cli import calls
from skillwire.cli.main import main
from skillwire.protocol import models as m
from skillwire.server.app import A2AApplication

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


async def files_agent(context: RequestContext, events: TaskEvents) -> None:
    """Echoes the files it receives; "evil" returns files named to escape any folder; "link" returns a
    URL part and a data part."""
    if context.text == "evil":
        names = [
            "../../escape.txt",
            "/etc/escape.txt",
            "..\\..\\win.txt",
            "C:drive.txt",
            "con.txt",
            "keep.txt",
        ]
        parts = [m.Part(raw=name.encode(), filename=name, media_type="text/plain") for name in names]
        parts += [
            m.Part(raw=b"dots", filename="..", media_type="text/plain"),
            m.Part(raw=b"\x89PNG", media_type="image/png"),
            m.Part(raw=b"?", filename=""),
        ]
        await events.artifact(parts, artifact_id="evil-artifact", name="evil")
        return
    if context.text == "link":
        link = m.Part(url="https://example.com/r.pdf", filename="r.pdf", media_type="application/pdf")
        await events.artifact([link, m.Part(data={"pages": 2})], name="links")
        return
    files = [p for p in context.message.parts if isinstance(p.raw, bytes)]
    received = "\n".join(f"{p.filename} {p.media_type} {len(p.raw or b'')}" for p in files)
    await events.artifact(received or "no files", name="received")
    if files:
        await events.artifact(files, name="files")


@pytest.fixture
def files_server(serve: Serve) -> RunningServer:
    agent = Agent("Files", "Echoes files.", executor=files_agent, default_input_modes=["*/*"])
    return serve(agent.asgi(store="memory://"))


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
    assert "\r" not in out and "\x1b" not in out  # not a terminal: no status line


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


def test_send_refused_params_exits_4(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", greeter.url, "--data", '{"name": ""}')
    assert code == 4
    assert out == ""
    line = one_error_line(err)
    assert line.startswith("skillwire: SendMessage failed: ")
    assert line.endswith("(INVALID_PARAMS)")


def test_send_to_unknown_task_exits_4(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "send", greeter.url, "Ada", "--task", "no-such-task")
    assert code == 4
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
    assert code == 4
    assert one_error_line(err).startswith("skillwire: CancelTask failed: ")
    assert err.strip().endswith("(TASK_NOT_CANCELABLE)")


def test_stream_an_answer_to_the_next_question(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _start_interview(workshop.url, capsys)
    code, out, _ = run(capsys, "send", workshop.url, "Ada", "--task", task["id"], "--stream")
    assert code == 0
    assert "[input-required] Nice to meet you, Ada. What is your favourite colour?" in out.splitlines()


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


def test_get_unknown_task_exits_4(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "tasks", "get", greeter.url, "missing")
    assert code == 4
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
        ["send", "http://127.0.0.1:1", "x", "--max-file-size", "lots"],
        ["tasks", "cancel", "http://127.0.0.1:1", "id", "--out", "files"],
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


# -- files: --file and --out -----------------------------------------------------------------------------


@pytest.fixture
def attachments(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "attach"
    folder.mkdir()
    files = {"note.txt": b"hello", "pic.png": b"\x89PNG\x00\xff", "blob.zzz": b"abc"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return [folder / name for name in files]


def file_args(paths: list[Path]) -> list[str]:
    return [arg for path in paths for arg in ("--file", str(path))]


def test_send_file_attaches_bytes_name_and_guessed_media_type(
    files_server: RunningServer, attachments: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "send", files_server.url, "see attached", *file_args(attachments))
    assert code == 0, err
    lines = out.splitlines()
    received = lines.index("Artifact received:")
    assert lines[received + 1 : received + 4] == [
        "note.txt text/plain 5",
        "pic.png image/png 6",
        "blob.zzz application/octet-stream 3",
    ]
    # without --out the returned files are listed, with one hint to save them
    files = lines.index("Artifact files:")
    assert lines[files + 1 :] == [
        "[text/plain note.txt, 5 bytes]",
        "[image/png pic.png, 6 bytes]",
        "[application/octet-stream blob.zzz, 3 bytes]",
        "(add --out DIR to save the files)",
    ]


def test_send_file_alone_is_a_message(
    files_server: RunningServer, attachments: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "send", files_server.url, "--file", str(attachments[0]))
    assert code == 0
    assert "note.txt text/plain 5" in out.splitlines()


def test_out_saves_returned_files_without_overwriting(
    files_server: RunningServer, attachments: list[Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "results" / "today"  # created, parents too
    argv = ["send", files_server.url, "x", *file_args(attachments), "--out", str(out_dir)]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert f"saved {out_dir / 'note.txt'} (5 bytes)" in out.splitlines()
    assert f"saved {out_dir / 'pic.png'} (6 bytes)" in out.splitlines()
    assert "--out DIR" not in out
    for path in attachments:
        assert (out_dir / path.name).read_bytes() == path.read_bytes()

    # the same files again: new names with a suffix, the first copies kept
    (out_dir / "note.txt").write_bytes(b"edited")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert f"saved {out_dir / 'note-1.txt'} (5 bytes)" in out.splitlines()
    assert (out_dir / "note.txt").read_bytes() == b"edited"
    assert (out_dir / "blob-1.zzz").read_bytes() == b"abc"


def test_out_keeps_hostile_names_inside_the_folder(
    files_server: RunningServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "deep" / "out"
    out_dir.mkdir(parents=True)
    (out_dir / "keep.txt").write_bytes(b"mine")
    before = {p for p in tmp_path.rglob("*") if not p.is_relative_to(out_dir)}
    code, out, err = run(capsys, "send", files_server.url, "evil", "--out", str(out_dir))
    assert code == 0, err
    assert {p for p in tmp_path.rglob("*") if not p.is_relative_to(out_dir)} == before
    saved = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    assert saved == {
        "escape.txt": b"../../escape.txt",
        "escape-1.txt": b"/etc/escape.txt",
        "win.txt": b"..\\..\\win.txt",
        "C_drive.txt": b"C:drive.txt",
        "_con.txt": b"con.txt",
        "keep.txt": b"mine",
        "keep-1.txt": b"keep.txt",
        "evil-artifact.txt": b"dots",  # ".." is no name: the artifact id and the media type's extension
        "evil-artifact.png": b"\x89PNG",
        "evil-artifact.bin": b"?",
    }
    lines = out.splitlines()
    assert lines[lines.index("Artifact evil:") + 1] == f"saved {out_dir / 'escape.txt'} (16 bytes)"


def test_url_and_data_parts_are_printed_not_saved(
    files_server: RunningServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "send", files_server.url, "link", "--out", str(tmp_path / "out"))
    assert code == 0
    lines = out.splitlines()
    start = lines.index("Artifact links:")
    assert lines[start + 1 :] == [
        "[application/pdf r.pdf] https://example.com/r.pdf",
        "{",
        '  "pages": 2',
        "}",
    ]
    assert not (tmp_path / "out").exists()


def test_tasks_get_and_watch_save_files(
    files_server: RunningServer, attachments: list[Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "send", files_server.url, "x", "--file", str(attachments[1]), "--json")
    assert code == 0
    task_id = json.loads(out)["task"]["id"]

    code, out, _ = run(capsys, "tasks", "get", files_server.url, task_id, "--out", str(tmp_path / "get"))
    assert code == 0
    assert f"saved {tmp_path / 'get' / 'pic.png'} (6 bytes)" in out.splitlines()
    assert "  user: x" in out  # the history still shows; its file part as a listing
    assert (tmp_path / "get" / "pic.png").read_bytes() == attachments[1].read_bytes()

    # watching a task that has ended shows (and saves) its final state
    code, out, _ = run(capsys, "tasks", "watch", files_server.url, task_id, "--out", str(tmp_path / "watch"))
    assert code == 0
    assert f"saved {tmp_path / 'watch' / 'pic.png'} (6 bytes)" in out.splitlines()

    # with --json the files are saved and stdout is only the JSON
    code, out, _ = run(
        capsys, "tasks", "get", files_server.url, task_id, "--json", "--out", str(tmp_path / "json")
    )
    assert code == 0
    assert_proto(out.strip(), "Task")
    assert (tmp_path / "json" / "pic.png").read_bytes() == attachments[1].read_bytes()


def test_missing_file_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    code, out, err = run(capsys, "send", "http://127.0.0.1:1", "x", "--file", str(missing))
    assert code == 2
    assert out == ""
    assert one_error_line(err) == f"skillwire: cannot read --file {missing}: No such file or directory"

    code, _, err = run(capsys, "send", "http://127.0.0.1:1", "x", "--file", str(tmp_path))
    assert code == 2
    assert one_error_line(err).startswith(f"skillwire: cannot read --file {tmp_path}: ")


def test_file_above_the_limit_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 2048)
    argv = ["send", "http://127.0.0.1:1", "x", "--file", str(big)]
    code, _, err = run(capsys, *argv, "--max-file-size", "1K")
    assert code == 2
    assert one_error_line(err) == (
        f"skillwire: --file {big} is 2048 bytes, above the limit of 1024 bytes (see --max-file-size)"
    )
    assert calls.MAX_FILE_BYTES == 10 * 1024 * 1024


def test_out_that_is_a_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    file = tmp_path / "taken"
    file.write_text("")
    code, _, err = run(capsys, "tasks", "get", "http://127.0.0.1:1", "id", "--out", str(file))
    assert code == 2
    assert one_error_line(err) == f"skillwire: --out {file} is not a folder"


# -- the live status line (stdout a terminal) ---------------------------------------------------------------

STATUS = re.compile(r"\r[^\r\n]*?\x1b\[K")


def without_status(out: str) -> str:
    """What stays on screen: the output with every status-line draw and clear taken out."""
    return STATUS.sub("", out).replace("\r\n", "\n")


@pytest.fixture
def stdout_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout counts as a terminal (stdin does not: no prompts)."""
    monkeypatch.setattr("skillwire.cli.terminal.is_terminal", lambda stream: stream is sys.stdout)
    monkeypatch.setenv("TERM", "xterm")


@pytest.mark.usefixtures("stdout_terminal")
def test_status_line_on_a_terminal_then_the_same_output(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "send", workshop.url, "3", "--skill", "countdown")
    assert code == 0, err
    # streamed under the hood: the status line follows the task's progress, redrawn in place
    draws = STATUS.findall(out)
    assert any(re.fullmatch(r"\r. working: Counting down from 3\x1b\[K", d) for d in draws), draws
    assert any(re.fullmatch(r"\r. working: countdown: 2\.\.\.\x1b\[K", d) for d in draws), draws
    assert out.count("\n") == len(without_status(out).splitlines())  # the line never ends a line

    monkeypatch.setattr("skillwire.cli.terminal.is_terminal", lambda stream: False)
    code, plain, _ = run(capsys, "send", workshop.url, "3", "--skill", "countdown")
    assert code == 0
    shown, expected = without_status(out).splitlines(), plain.splitlines()
    assert (
        shown[1:]
        == expected[1:]
        == ["Artifact countdown:", "3...", "2...", "1...", "Artifact result:", "Liftoff!"]
    )
    assert re.fullmatch(r"Task \S+: completed \(context \S+\)", shown[0])


@pytest.mark.usefixtures("stdout_terminal")
def test_status_line_while_a_stream_prints_events(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "send", workshop.url, "2", "--skill", "countdown", "--stream")
    assert code == 0
    assert "\r" in out
    lines = without_status(out).splitlines()
    assert lines[1:] == [
        "[working] Counting down from 2",
        "Artifact countdown:",
        "2...",
        "1...",
        "Artifact result:",
        "Liftoff!",
        "[completed]",
    ]


@pytest.mark.usefixtures("stdout_terminal")
def test_status_line_for_an_agent_without_streaming(serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    agent = Agent.from_folder(EXAMPLES / "greeter")
    agent.streaming = False
    server = serve(agent.asgi(store="memory://"))
    code, out, _ = run(capsys, "send", server.url, "Ada")
    assert code == 0
    assert re.search(r"\r. sending\x1b\[K", out)
    assert without_status(out).splitlines()[1:] == ["Artifact result:", "Hi Ada!"]


@pytest.mark.usefixtures("stdout_terminal")
def test_answer_on_a_terminal_shows_the_next_question(
    workshop: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _start_interview(workshop.url, capsys)
    code, out, _ = run(capsys, "send", workshop.url, "Ada", "--task", task["id"])
    assert code == 0
    shown = without_status(out)
    assert "Status: Nice to meet you, Ada. What is your favourite colour?" in shown
    assert "What is your name?" not in shown


@pytest.mark.usefixtures("stdout_terminal")
def test_no_status_line_with_json(workshop: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "send", workshop.url, "2", "--skill", "countdown", "--json")
    assert code == 0
    assert "\r" not in out and "\x1b" not in out
    assert_proto(out.strip(), "SendMessageResponse")


# -- a real terminal: answering questions, the status line ---------------------------------------------------

WAIT = 30.0
posix_only = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")


class Terminal:
    """``skillwire ...`` in a process whose stdin, stdout and stderr are a pseudo-terminal."""

    def __init__(self, *argv: str, stdin_terminal: bool = True) -> None:
        import fcntl
        import struct
        import termios

        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 300, 0, 0))  # no truncated lines
        self.process = subprocess.Popen(
            [sys.executable, "-m", "skillwire", *argv],
            stdin=slave if stdin_terminal else subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "TERM": "xterm"},
        )
        os.close(slave)
        self.master = master
        self.output = b""
        self._read = 0  # how far read_until has consumed

    def _more(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"nothing more from the terminal; so far: {self.output!r}"
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # Linux: EIO once every copy of the other end is closed
            chunk = b""
        self.output += chunk
        return bool(chunk)

    def read_until(self, marker: str) -> str:
        """The output up to and including the next ``marker``."""
        deadline = time.monotonic() + WAIT
        wanted = marker.encode()
        while wanted not in self.output[self._read :]:
            assert self._more(deadline), f"ended before {marker!r}: {self.output!r}"
        end = self.output.index(wanted, self._read) + len(wanted)
        text, self._read = self.output[self._read : end].decode(), end
        return text

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> tuple[int, str]:
        """Read to the end; the exit code and everything the terminal showed."""
        deadline = time.monotonic() + WAIT
        while self._more(deadline):
            pass
        return self.process.wait(timeout=WAIT), self.output.decode()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=WAIT)
        os.close(self.master)


@pytest.fixture
def terminal() -> Iterator[Callable[..., Terminal]]:
    started: list[Terminal] = []

    def start(*argv: str, stdin_terminal: bool = True) -> Terminal:
        started.append(Terminal(*argv, stdin_terminal=stdin_terminal))
        return started[-1]

    yield start
    for term in started:
        term.close()


@posix_only
def test_terminal_answers_the_agents_questions(
    workshop: RunningServer, terminal: Callable[..., Terminal]
) -> None:
    term = terminal("send", workshop.url, "start", "--skill", "interview")
    assert "Status: What is your name?\n> " in without_status(term.read_until("> "))
    term.type("Ada\n")
    asked = without_status(term.read_until("> "))
    assert "Status: Nice to meet you, Ada. What is your favourite colour?\n> " in asked
    term.type("blue\n")
    code, output = term.finish()
    assert code == 0, output
    shown = without_status(output)
    assert re.search(r"Task \S+: completed \(context \S+\)\nArtifact result:\n", shown), shown
    assert '"name": "Ada",\n  "colour": "blue"' in shown
    assert "The task is waiting" not in shown


@posix_only
@pytest.mark.parametrize("stop", ["\x04", "\n"], ids=["ctrl-d", "empty-answer"])
def test_terminal_prompt_stops_and_leaves_the_task_waiting(
    stop: str, workshop: RunningServer, terminal: Callable[..., Terminal]
) -> None:
    term = terminal("send", workshop.url, "start", "--skill", "interview")
    term.read_until("> ")
    term.type(stop)
    code, output = term.finish()
    assert code == 0, output
    waiting = re.search(r"The task is waiting: answer with `skillwire send \S+ TEXT --task (\S+)`", output)
    assert waiting is not None, output
    task = json.loads(
        subprocess.run(
            [sys.executable, "-m", "skillwire", "tasks", "get", workshop.url, waiting[1], "--json"],
            capture_output=True,
            timeout=WAIT,
            check=True,
        ).stdout
    )
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


@posix_only
def test_terminal_watch_answers_too(
    workshop: RunningServer, terminal: Callable[..., Terminal], capsys: pytest.CaptureFixture[str]
) -> None:
    task = _start_interview(workshop.url, capsys)
    term = terminal("tasks", "watch", workshop.url, task["id"])
    assert "Status: What is your name?" in term.read_until("> ")
    term.type("Grace\n")
    assert "What is your favourite colour?" in term.read_until("> ")
    term.type("green\n")
    code, output = term.finish()
    assert code == 0, output
    assert '"colour": "green"' in output


@posix_only
def test_terminal_without_a_terminal_stdin_prints_the_hint(
    workshop: RunningServer, terminal: Callable[..., Terminal]
) -> None:
    term = terminal("send", workshop.url, "start", "--skill", "interview", stdin_terminal=False)
    code, output = term.finish()
    assert code == 0, output
    assert "> " not in output
    assert "The task is waiting: answer with" in output


@posix_only
def test_terminal_shows_a_live_status_line(
    workshop: RunningServer, terminal: Callable[..., Terminal]
) -> None:
    term = terminal("send", workshop.url, "3", "--skill", "countdown")
    code, output = term.finish()
    assert code == 0, output
    assert re.search(r"\r. working: Counting down from 3\x1b\[K", output), output
    assert without_status(output).splitlines()[1:] == [
        "Artifact countdown:",
        "3...",
        "2...",
        "1...",
        "Artifact result:",
        "Liftoff!",
    ]


# -- bindings and credentials --------------------------------------------------------------------------


def test_send_over_grpc(serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    srv = serve(Agent.from_folder(EXAMPLES / "greeter").asgi(store="memory://", grpc_port=0))
    code, out, err = run(capsys, "send", srv.url, "Ada", "--binding", "GRPC", "--json")
    assert code == 0, err
    (line,) = json_lines(out)
    assert_proto(line, "SendMessageResponse")
    assert line["task"]["artifacts"][0]["parts"][0]["text"] == "Hi Ada!"


def test_credentials_go_where_the_card_says(
    serve: Serve, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    made: list[RecordingHandler] = []

    def recording(runtime: Any) -> RecordingHandler:
        made.append(RecordingHandler(runtime))
        return made[-1]

    app = Agent.from_folder(EXAMPLES / "greeter").asgi(store="memory://", wrap=recording)
    schemes = {
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
        "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://id.example/"}},
    }
    app.card = msgspec.structs.replace(app.card, security_schemes=schemes)
    srv = serve(app)
    token = tmp_path / "token.txt"
    token.write_text("tok-1\n")
    code, _, err = run(
        capsys, "send", srv.url, "Ada", "--credential", "apiKey=k1", "--credential", f"oidc=@{token}"
    )
    assert code == 0, err
    seen = made[0].headers[-1]
    assert seen["x-api-key"] == "k1" and seen["authorization"] == "Bearer tok-1"
    with pytest.raises(SystemExit) as usage:
        main(["send", srv.url, "Ada", "--credential", "oops"])
    assert usage.value.code == 2 and "SCHEME=SECRET" in capsys.readouterr().err


def test_text_may_come_after_the_options(greeter: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "send", greeter.url, "--skill", "greet", "Ada")
    assert code == 0, err
    assert "Hi Ada!" in out
    with pytest.raises(SystemExit) as usage:
        main(["send", greeter.url, "--skill", "greet", "Ada", "Lovelace"])
    assert usage.value.code == 2 and "unrecognized arguments: Ada Lovelace" in capsys.readouterr().err
