"""The CLI prints what an agent says, never what it would make the terminal do (security issue 12): every
agent-provided string (the card's name, description, provider and skills; task ids, states and status
messages; artifacts and their names; data; history; the agent's error messages) loses its terminal control
sequences on the way out, while its visible text, newlines and tabs stay. ``--json`` stays valid JSON that
decodes to exactly what the agent sent. A real agent under uvicorn says the hostile things, and the commands
run through ``skillwire.cli.main.main``."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import RunningServer
from hostile import CardServer, Running, card, running
from skillwire import Agent
from skillwire.cli.main import main
from skillwire.cli.terminal import safe_text
from skillwire.protocol import models as m
from skillwire.types import AgentProvider, AgentSkill

#: One of each kind of thing a terminal acts on, named by a visible tag. Every payload says "evil", which
#: must never reach the output.
SEQUENCES = {
    "csi": "\x1b[31;1m",
    "csi-private": "\x1b[?1049h",
    "csi-clear": "\x1b[2J\x1b[H",
    "osc-title-bel": "\x1b]0;evil-title\x07",
    "osc-52-clipboard": "\x1b]52;c;ZXZpbC1jbGlw\x07",
    "osc-8-link-st": "\x1b]8;;https://evil.example/\x1b\\",
    "dcs": "\x1bP1$qevil-dcs\x1b\\",
    "sos": "\x1bXevil-sos\x1b\\",
    "pm": "\x1b^evil-pm\x1b\\",
    "apc": "\x1b_evil-apc\x1b\\",
    "esc-reset": "\x1bc",
    "esc-charset": "\x1b(0",
    "esc-save": "\x1b7",
    "c1-csi": "\x9b31m",
    "c1-osc": "\x9d0;evil-c1-title\x9c",
    "c1-other": "\x85\x8d\x8e",
    "bel": "\x07",
    "backspace": "\x08\x08",
    "carriage-return": "\r",
    "nul-vt-ff-del": "\x00\x0b\x0c\x7f",
    "bidi-override": "\u202e",
    "bidi-isolate": "\u2066\u2069",
}
HOSTILE = "".join(f"[{name}]{sequence}" for name, sequence in SEQUENCES.items()) + "\nsecond\tline"
#: What is left of it: the tags, the newline and the tab.
SHOWN = "".join(f"[{name}]" for name in SEQUENCES) + "\nsecond\tline"
#: A draw or a clear of the live status line: ``\r``, the line, ``ESC [ K``.
STATUS = re.compile(r"\r[^\r\n]*?\x1b\[K")
#: Nothing of these may be printed: C0 controls but newline and tab, DEL, C1, the bidi controls.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    return " ".join(text.split())


async def hostile(context: Any, events: Any) -> None:
    """Says HOSTILE in every place it can: status messages, the artifact and its name; "fail" fails with
    it; "data" answers with it inside a data part."""
    if context.text == "fail":
        await events.fail(HOSTILE)
        return
    if context.text == "data":
        await events.artifact([m.Part(data={"note": HOSTILE})], name="data")
        await events.complete()
        return
    await events.working(HOSTILE)
    await events.artifact(HOSTILE, name=f"report {SEQUENCES['osc-title-bel']}{SEQUENCES['c1-csi']}named")
    await events.complete(HOSTILE)


@pytest.fixture
def agent(serve: Callable[[Any], RunningServer]) -> RunningServer:
    app = Agent("Hostile", "Says things.", executor=hostile).asgi(store="memory://")
    skill = AgentSkill(
        id="speak",
        name=f"Speak{SEQUENCES['csi']}{SEQUENCES['osc-52-clipboard']}",
        description=HOSTILE,
        tags=["hostile"],
        examples=[HOSTILE],
    )
    app.card = msgspec.structs.replace(
        app.card,
        name=f"Hostile{SEQUENCES['osc-title-bel']}{SEQUENCES['c1-osc']}",
        description=HOSTILE,
        provider=AgentProvider(organization=HOSTILE, url="https://example.com"),
        skills=[skill],
    )
    return serve(app)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run a command: nothing it prints may act on the terminal, and what it shows as text may not show any
    sequence's payload ("evil"); JSON shows them, escaped."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    for printed in (out, err):
        found = FORBIDDEN.search(printed)
        assert found is None, f"{found[0]!r} at {found.start()}: {printed[max(found.start() - 40, 0) :]!r}"
    if "--json" not in argv:
        assert "evil" not in out + err, out + err
    return code, out, err


# -- the sanitizer ---------------------------------------------------------------------------------------


def test_the_sanitizer_keeps_the_text_and_drops_every_sequence() -> None:
    assert safe_text(HOSTILE) == SHOWN
    assert safe_text("naïve — 東京 ☃ 👍\tok\n") == "naïve — 東京 ☃ 👍\tok\n"


def test_an_unterminated_string_sequence_drops_only_its_introducer() -> None:
    """A terminal would swallow everything after an unterminated OSC; printed without its ESC ], the rest is
    plain text, so nothing the agent wrote afterwards disappears."""
    assert safe_text("a\x1b]0;title, never ended") == "a0;title, never ended"
    assert safe_text("a\x1b[12") == "a12"
    assert safe_text("trailing escape\x1b") == "trailing escape"


# -- every command -------------------------------------------------------------------------------------


def test_card_shows_the_names_and_descriptions_without_sequences(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "card", agent.url)
    assert code == 0, err
    assert out.startswith("Hostile 1.0.0\n")
    assert SHOWN in out  # the description, newline and tab kept
    assert f"Provider: {SHOWN} (https://example.com)" in out
    assert "  speak: Speak\n" in out


def test_send_shows_status_and_artifact_without_sequences(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "send", agent.url, "hi")
    assert code == 0, err
    assert f"Status: {SHOWN}\n" in out
    assert f"Artifact report named:\n{SHOWN}\n" in out


def test_send_stream_shows_every_event_without_sequences(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "send", agent.url, "hi", "--stream")
    assert code == 0, err
    assert f"[working] {SHOWN}\n" in out and f"[completed] {SHOWN}\n" in out


def test_a_failure_message_is_shown_without_sequences(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "send", agent.url, "fail")
    assert code == 1
    assert f"Status: {SHOWN}" in out


def test_data_is_shown_as_json_with_its_escapes_visible(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = main(["send", agent.url, "data"]), capsys.readouterr().out
    assert code == 0
    assert FORBIDDEN.search(out) is None
    assert '"note": "[csi]\\u001b[31;1m[csi-private]' in out  # the escape shows as text, it does not act


def test_tasks_get_list_and_watch_show_history_and_status_without_sequences(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "send", agent.url, HOSTILE, "--json")  # the user's words come back too
    assert code == 0
    task_id = json.loads(out)["task"]["id"]
    code, out, err = run(capsys, "tasks", "get", agent.url, task_id, "--history", "10")
    assert code == 0, err
    assert f"Status: {SHOWN}" in out and f"Artifact report named:\n{SHOWN}" in out
    assert f"History:\n  user: {SHOWN}" in out
    code, out, err = run(capsys, "tasks", "list", agent.url)
    assert code == 0, err
    assert one_line(SHOWN) in out
    code, out, err = run(capsys, "tasks", "watch", agent.url, task_id)
    assert code == 0, err
    assert f"Status: {SHOWN}" in out
    code, out, err = run(capsys, "tasks", "cancel", agent.url, task_id)
    assert code == 4 and "TASK_NOT_CANCELABLE" in err


def test_skills_list_shows_the_skills_without_sequences(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "skills", "list", agent.url)
    assert code == 0, err
    assert out.startswith(f"speak: {SHOWN} [hostile]")


@pytest.mark.usefixtures("stdout_terminal")
def test_the_live_status_line_and_the_output_on_a_terminal(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["send", agent.url, "hi"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert STATUS.search(out)  # the status line was drawn: the only sequences are the CLI's own
    shown = out.replace("\r", "").replace("\x1b[K", "")
    assert FORBIDDEN.search(shown) is None and "evil" not in shown
    assert f"Artifact report named:\n{SHOWN}\n" in STATUS.sub("", out)


@pytest.fixture
def stdout_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("skillwire.cli.terminal.is_terminal", lambda stream: stream is sys.stdout)
    monkeypatch.setenv("TERM", "xterm")


# -- JSON output ---------------------------------------------------------------------------------------


def test_json_output_is_valid_json_that_says_exactly_what_the_agent_said(
    agent: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "send", agent.url, "hi", "--stream", "--json")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    texts = [e["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events if "artifactUpdate" in e]
    assert texts == [HOSTILE]
    code, out, _ = run(capsys, "card", agent.url, "--json")
    shown = json.loads(out)
    assert shown["description"] == HOSTILE and shown["skills"][0]["examples"] == [HOSTILE]
    assert "\\u009b" in out and "\\u202e" in out  # C1 and bidi controls escaped, not dropped
    code, out, _ = run(capsys, "tasks", "list", agent.url, "--json")
    assert json.loads(out)["tasks"][0]["status"]["message"]["parts"][0]["text"] == HOSTILE


# -- what an agent that is not skillwire can say ---------------------------------------------------------


@pytest.fixture
def impostor() -> Iterator[tuple[CardServer, Running]]:
    server = CardServer()
    with running(server) as run_:
        server.card = card([("JSONRPC", run_.url + "/")], name=f"Impostor{SEQUENCES['osc-title-bel']}")
        yield server, run_


def test_the_agents_error_message_is_shown_without_sequences(
    impostor: tuple[CardServer, Running], capsys: pytest.CaptureFixture[str]
) -> None:
    server, run_ = impostor
    server.error = {"code": -32001, "message": HOSTILE}
    code, _, err = run(capsys, "send", run_.url, "hi")
    assert code == 4
    assert one_line(SHOWN) in err and "(TASK_NOT_FOUND)" in err
    code, _, err = run(capsys, "tasks", "get", run_.url, "t-1", "--json")
    assert code == 4 and one_line(SHOWN) in err
    code, _, err = run(capsys, "tasks", "get", run_.url, "t-1", "--debug")  # the traceback quotes it too
    assert code == 4 and "Traceback" in err and "TaskNotFoundError: [csi][csi-private]" in err


def test_ids_and_states_from_a_foreign_agent_are_shown_without_sequences(
    impostor: tuple[CardServer, Running], capsys: pytest.CaptureFixture[str]
) -> None:
    server, run_ = impostor
    task = {
        "id": f"task{SEQUENCES['csi-clear']}",
        "contextId": f"ctx{SEQUENCES['osc-52-clipboard']}",
        "status": {"state": "TASK_STATE_COMPLETED"},
    }
    server.result = {
        "tasks": [task],
        "nextPageToken": f"next{SEQUENCES['c1-osc']}",
        "pageSize": 1,
        "totalSize": 1,
    }
    code, out, err = run(capsys, "tasks", "list", run_.url)
    assert code == 0, err
    assert out.splitlines()[0] == "task  completed  ctx" and "Next page: --page-token next" in out
    task["status"] = {"state": f"TASK_STATE_{SEQUENCES['osc-title-bel']}"}
    code, err = main(["tasks", "list", run_.url]), capsys.readouterr().err
    assert code == 3 and err.startswith("skillwire: ListTasks failed: Invalid enum value")
    assert FORBIDDEN.search(err) is None  # the decoder's message quotes the value escaped: \x1b as text


def test_a_refusal_names_the_cards_url_without_sequences(
    impostor: tuple[CardServer, Running], capsys: pytest.CaptureFixture[str]
) -> None:
    server, run_ = impostor
    server.card = card([("JSONRPC", f"http://127.0.0.1:9/{SEQUENCES['osc-title-bel']}{SEQUENCES['c1-csi']}")])
    code, _, err = run(capsys, "send", run_.url, "hi", "--credential", "apiKey=s3cret")
    assert code == 3 and "--allow-origin http://127.0.0.1:9" in err
    assert [r.path for r in server.requests] == ["/.well-known/agent-card.json"]


def test_the_client_commands_print_only_through_the_output_module() -> None:
    """No door around the sanitizer: cli/calls.py writes nothing itself (cli/output.py's say, say_error and
    json_line do)."""
    import ast

    import skillwire.cli.calls as calls

    tree = ast.parse(Path(calls.__file__).read_text(encoding="utf-8"))
    printing = [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Name) and node.id == "print")
        or (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr", "write"))
    ]
    assert printing == []
