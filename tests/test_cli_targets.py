"""What the commands take and what their exit codes say, run as the user runs them.

``skills list`` takes a folder, a ``.py`` file, ``module:attribute`` and an agent's URL in every form the
README promises (``http(s)://...``, ``host:port``, ``:port``); ``skills check`` the first three, and a URL is
one readable line; ``serve`` refuses a URL on one line too. A refused input is not a connection error: the
agent's protocol errors exit 4, connection failures 3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, RunningServer, example_agent, free_port
from skillwire.cli.main import main

WAIT = 60.0

AGENT = '''
from skillwire import Agent, SkillContext

agent = Agent("Converter", "Converts amounts between currencies.")


@agent.skill(tags=["money"])
def convert(amount: float, currency: str = "USD") -> dict:
    """Converts an amount in euros into another currency."""
    return {"amount": round(amount * 1.1, 2), "currency": currency}
'''


def skillwire(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The ``skillwire`` command, as a process of its own (a fresh import of the user's module each time)."""
    return subprocess.run(
        [sys.executable, "-m", "skillwire", *args], capture_output=True, text=True, cwd=cwd, timeout=WAIT
    )


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


@pytest.fixture
def greeter(serve: Any) -> RunningServer:
    return serve(example_agent("greeter").asgi(store="memory://"))  # type: ignore[no-any-return]


@pytest.fixture
def code_agent(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    return tmp_path


@pytest.mark.parametrize("form", ["{url}", "{url}/", "127.0.0.1:{port}", ":{port}", "localhost:{port}"])
def test_skills_list_takes_every_url_form(
    greeter: RunningServer, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["skills", "list", form.format(url=greeter.url, port=greeter.port)]) == 0
    assert capsys.readouterr().out.startswith("greet: ")


@pytest.mark.slow
def test_skills_list_and_check_take_module_attribute_a_file_and_a_folder(code_agent: Path) -> None:
    for target in ("agent:agent", "agent.py", "."):
        listed = skillwire("skills", "list", target, cwd=code_agent)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("convert: Converts"), listed.stdout
        checked = skillwire("skills", "check", target, cwd=code_agent)
        assert checked.returncode == 0, checked.stderr
        assert checked.stdout.strip() == "1 skill(s) valid", checked


@pytest.mark.slow
def test_skills_check_of_a_url_and_serve_of_a_url_are_one_line() -> None:
    checked = skillwire("skills", "check", ":8800")
    assert checked.returncode == 2
    assert "skillwire skills list :8800" in one_line(checked.stderr)
    served = skillwire("serve", "http://127.0.0.1:8800", "--store", "memory://")
    assert served.returncode == 2
    assert "skillwire send" in one_line(served.stderr)


def test_skills_list_of_a_url_nobody_serves_is_one_line_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skills", "list", f":{free_port()}"]) == 3
    line = one_line(capsys.readouterr().err)
    assert line.startswith("skillwire: cannot read the agent card at http://127.0.0.1:")


@pytest.mark.parametrize("target", ["no/such/folder", "nosuchmodule:agent", "agent:"])
def test_a_target_that_is_nothing_is_one_line(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skills", "list", target]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"skillwire: {target}")
    assert main(["skills", "check", target]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"skillwire: {target}")


def test_a_refused_input_exits_4_not_as_a_connection_error(
    greeter: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["send", greeter.url, "--data", '{"name": ""}']) == 4
    assert one_line(capsys.readouterr().err).endswith("(INVALID_PARAMS)")
    assert main(["tasks", "get", greeter.url, "missing"]) == 4
    assert one_line(capsys.readouterr().err).endswith("(TASK_NOT_FOUND)")
    assert main(["card", f"http://127.0.0.1:{free_port()}", "--retries", "0"]) == 3


def test_the_exit_codes_are_documented() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "| 4 | the agent refused the request" in readme and "| 3 | the agent could not be called" in readme


ECHO_AGENT = """
from pathlib import Path

from skillwire import Agent
from skillwire.llm import Adapter, register_adapter


class Echo(Adapter):
    async def complete(self, messages, params=None, *, json=False):
        return messages[-1]["content"]


register_adapter("echo", Echo)
agent = Agent.from_folder(Path(__file__).parent)
"""

ECHO_SKILL = """---
id: repeat
name: Repeat
description: Says the text back through the echo model.
tags: [test]
inputSchema:
  type: object
  properties:
    text: {type: string}
  required: [text]
providerConfig:
  vendor: echo
  model: none
---
{{ text }}
"""


@pytest.mark.slow
def test_skills_check_loads_the_agents_own_adapters(tmp_path: Path) -> None:
    """An agent.py that registers a model adapter serves; `skills check` on its folder takes it too."""
    (tmp_path / "agent.py").write_text(ECHO_AGENT)
    (tmp_path / "repeat").mkdir()
    (tmp_path / "repeat" / "SKILL.md").write_text(ECHO_SKILL)
    listed = skillwire("skills", "list", ".", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.startswith("repeat: "), listed.stderr
    checked = skillwire("skills", "check", ".", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "1 skill(s) valid"


@pytest.mark.parametrize("command", [["console"], ["card"], ["send"], ["tasks", "list"]])
def test_every_command_reads_a_short_url(command: list[str]) -> None:
    from skillwire.cli.main import _parse

    for typed, meant in ((":8800", "http://127.0.0.1:8800"), ("localhost:8800", "http://localhost:8800")):
        extra = ["hi"] if command == ["send"] else []
        assert _parse([*command, typed, *extra]).url == meant
