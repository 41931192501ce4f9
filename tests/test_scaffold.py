"""`skillwire new skill NAME`: the folder it writes passes `skills check` and is served as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Served, assert_rpc_result, user_message
from conftest import start_process as start
from skillwire.cli.main import main
from skillwire.cli.targets import load_agent
from skillwire.errors import InvalidParamsError
from skillwire.protocol.models import Message, Part, Role, Task, new_id
from skillwire.protocol.states import TaskState


def new_skill(name: str, folder: Path) -> int:
    return main(["new", "skill", name, "--dir", str(folder)])


def result_text(task: Task | Message) -> str:
    assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED, task
    return task.artifacts[0].parts[0].text  # type: ignore[return-value]


def test_new_skill_writes_a_folder_that_skills_check_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_dir = tmp_path / "my-agent"  # made if missing
    assert new_skill("summarize", agent_dir) == 0
    assert sorted(p.name for p in (agent_dir / "summarize").iterdir()) == ["SKILL.md", "skill.py"]
    assert "created" in capsys.readouterr().out
    assert main(["skills", "check", str(agent_dir), "--strict"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "1 skill(s) valid" and "warning" not in captured.err


async def test_the_new_skill_is_served_as_skillwire_serve_loads_it(tmp_path: Path) -> None:
    assert new_skill("shout", tmp_path) == 0
    assert new_skill("whisper.v2", tmp_path) == 0
    agent = load_agent(str(tmp_path))  # what `skillwire serve DIR` serves
    async with agent.test_client() as client:
        assert sorted(s.id for s in client.card.skills) == ["shout", "whisper.v2"]
        shout = client.card.skills[0]
        assert shout.input_modes == ["text/plain", "application/json"] and shout.tags == ["shout"]

        def to(skill: str, *parts: Part) -> Message:
            return Message(
                message_id=new_id(), role=Role.USER, parts=list(parts), metadata={"skillId": skill}
            )

        assert result_text(await client.send(to("shout", Part(text="Ada")))) == "shout received: Ada"
        data = await client.send(to("whisper.v2", Part(data={"text": "Grace"})))
        assert result_text(data) == "whisper.v2 received: Grace"
        with pytest.raises(InvalidParamsError, match="text"):
            await client.send(to("shout", Part(data={"name": "Ada"})))
        blank = await client.send(to("shout", Part(text="   ")))
        assert isinstance(blank, Task) and blank.status.state is TaskState.FAILED
        assert blank.status.message is not None and blank.status.message.text() == "Send some text."


def test_skillwire_serve_serves_the_new_skill(tmp_path: Path, processes: list[Served]) -> None:
    agent_dir = tmp_path / "agent"
    assert new_skill("echo-back", agent_dir) == 0
    served = start(str(agent_dir), "memory://", tmp_path)
    processes.append(served)
    task = assert_rpc_result(served.call("SendMessage", {"message": user_message("Ada")}), "SendMessage")[
        "task"
    ]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "echo-back received: Ada"


def test_an_existing_folder_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert new_skill("greet", tmp_path) == 0
    manifest = tmp_path / "greet" / "SKILL.md"
    manifest.write_text("mine")
    assert new_skill("greet", tmp_path) == 2
    assert "already exists" in capsys.readouterr().err
    assert manifest.read_text() == "mine"


@pytest.mark.parametrize("name", ["bad name", "../escape", "_under", "x" * 65])
def test_a_name_that_is_not_a_skill_id_is_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert new_skill(name, tmp_path) == 2
    assert "is not a valid skill id" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_from_folder_reads_agent_yaml_and_the_new_skills(tmp_path: Path) -> None:
    """docs/skills.md, `Agent.from_folder`: agent.yaml names the agent; read_only leaves out the new skill,
    which is not marked readOnly."""
    from skillwire import Agent

    assert new_skill("draft", tmp_path) == 0
    assert Agent.from_folder(tmp_path).name == tmp_path.resolve().name
    (tmp_path / "agent.yaml").write_text("name: Drafts\nversion: 2.0.0\n")
    agent = Agent.from_folder(tmp_path)
    assert (agent.name, agent.version, [s.id for s in agent.served_skills()]) == (
        "Drafts",
        "2.0.0",
        ["draft"],
    )
    assert Agent.from_folder(tmp_path, read_only=True).served_skills() == []
