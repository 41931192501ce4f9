"""Serving folders of skills: agent.yaml, broken manifests, `skills check`, plugins, read-only mode."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, EXAMPLES, assert_rpc_error, assert_rpc_result, rpc, user_message
from skillwire import Agent, SkillwireError
from skillwire.cli.main import main
from skillwire.cli.targets import load_agent
from skillwire.errors import ManifestError
from skillwire.skills.loader import check_skills_folder, load_agent_config, plugin_skills

SKILL = """\
---
id: {id}
name: {name}
description: A test skill.
tags: [test]
readOnly: {read_only}
---
Say {{{{ text }}}}.
"""

CODE = """\
async def run(params, ctx):
    return "{reply} " + ctx.prompt()
"""


def make_skill(
    root: Path, skill_id: str, *, reply: str = "ran", read_only: bool = False, code: str | None = None
) -> Path:
    folder = root / skill_id
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        SKILL.format(id=skill_id, name=skill_id.title(), read_only=str(read_only).lower())
    )
    (folder / "skill.py").write_text(code if code is not None else CODE.format(reply=reply))
    return folder


def test_folder_with_agent_yaml(tmp_path: Path) -> None:
    make_skill(tmp_path, "alpha")
    (tmp_path / "agent.yaml").write_text(
        "name: Tester\ndescription: Tests things.\nversion: 2.1.0\n"
        "provider: {organization: Acme, url: https://acme.example}\ndocumentationUrl: https://acme.example/docs\n"
    )
    agent = Agent.from_folder(tmp_path)
    card = agent.card()
    assert (card.name, card.description, card.version) == ("Tester", "Tests things.", "2.1.0")
    assert card.provider is not None and card.provider.organization == "Acme"
    assert card.documentation_url == "https://acme.example/docs"
    assert [s.id for s in card.skills] == ["alpha"]
    skill = agent.registry.get("alpha")
    assert skill is not None and skill.source == f"folder:{tmp_path / 'alpha'}"


def test_folder_without_agent_yaml_is_named_after_the_folder(tmp_path: Path) -> None:
    make_skill(tmp_path / "my-agent", "alpha")
    assert Agent.from_folder(tmp_path / "my-agent").name == "my-agent"


def test_bad_agent_yaml(tmp_path: Path) -> None:
    make_skill(tmp_path, "alpha")
    (tmp_path / "agent.yaml").write_text("name: X\ncolour: blue\n")
    with pytest.raises(ManifestError, match="unknown key 'colour'") as info:
        load_agent_config(tmp_path)
    assert info.value.line == 2
    (tmp_path / "agent.yaml").write_text("name: X\nprovider: Acme\n")
    with pytest.raises(ManifestError, match="organization"):
        load_agent_config(tmp_path)


def test_a_broken_manifest_stops_start_up_with_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path, "good")
    bad = make_skill(tmp_path, "bad")
    (bad / "SKILL.md").write_text(
        "---\nid: bad\nname: Bad\ndescription: d\ntags: [t]\ninput_schema: {}\n---\n"
    )
    with pytest.raises(ManifestError, match="did you mean 'inputSchema'"):
        Agent.from_folder(tmp_path)
    assert main(["serve", str(tmp_path), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{bad / 'SKILL.md'}:6 input_schema" in err and "Traceback" not in err


def test_missing_run_and_duplicate_ids(tmp_path: Path) -> None:
    make_skill(tmp_path, "a", code="run = 1\n")
    with pytest.raises(SkillwireError, match="async def run"):
        Agent.from_folder(tmp_path)
    other = tmp_path / "other"
    make_skill(other, "one")
    twin = make_skill(other, "two")
    (twin / "SKILL.md").write_text(SKILL.format(id="one", name="Two", read_only="false"))
    with pytest.raises(SkillwireError, match="already registered"):
        Agent.from_folder(other)


def test_skills_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skills", "check", str(EXAMPLES / "workshop")]) == 0
    assert "3 skill(s) valid" in capsys.readouterr().out
    make_skill(tmp_path, "fine")
    broken = make_skill(tmp_path, "broken")
    (broken / "SKILL.md").write_text("---\nid: broken\nname: B\ndescription: d\ntags: 7\n---\n")
    nocode = make_skill(tmp_path, "nocode")
    (nocode / "skill.py").unlink()
    twin = make_skill(tmp_path, "twin")
    (twin / "SKILL.md").write_text(SKILL.format(id="fine", name="Twin", read_only="false"))
    found = check_skills_folder(tmp_path)
    assert found.count == 4 and len(found.problems) == 3 and found.warnings == []
    assert main(["skills", "check", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{broken / 'SKILL.md'}:5 tags: expected a list of non-empty strings" in err
    assert "no skill.py" in err and "duplicate skill id" in err and "3 problem(s) in 4 skill(s)" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["skills", "check", str(empty)]) == 1
    assert "no skills found" in capsys.readouterr().err


def test_check_never_imports_skill_code(tmp_path: Path) -> None:
    make_skill(tmp_path, "trap", code="raise SystemExit('imported!')\n")
    found = check_skills_folder(tmp_path)
    assert (found.count, found.problems, found.warnings, found.notes) == (1, [], [], [])


# -- plugins ---------------------------------------------------------------------------------------------


@pytest.fixture
def installed_pack(tmp_path: Path) -> Iterator[Path]:
    """A pip-installed skill pack, as importlib.metadata sees one: a package plus a dist-info folder."""
    site = tmp_path / "site"
    package = site / "acme_pack"
    make_skill(package / "skills", "weather", reply="sunny", read_only=True)
    (package / "__init__.py").write_text(
        "from pathlib import Path\n\ndef skills():\n    return Path(__file__).parent / 'skills'\n"
    )
    info = site / "acme_pack-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-pack\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[skillwire.skills]\nweather = acme_pack:skills\n")
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))
    sys.modules.pop("acme_pack", None)


def test_plugins_come_from_entry_points(installed_pack: Path, tmp_path: Path) -> None:
    (skill,) = plugin_skills()
    assert skill.id == "weather" and skill.source == "plugin:acme-pack"
    make_skill(tmp_path / "mine", "local")
    without = Agent.from_folder(tmp_path / "mine")
    assert [s.id for s in without.card().skills] == ["local"]
    agent = load_agent(str(tmp_path / "mine"), plugins=True)
    entries = {s.id: s for s in agent.card().skills}
    assert set(entries) == {"local", "weather"}
    assert entries["weather"].tags == ["test", "plugin:acme-pack"]
    assert entries["local"].tags == ["test"]


# -- read-only, over HTTP ------------------------------------------------------------------------------------


async def test_read_only_serving(serve: Any, tmp_path: Path) -> None:
    make_skill(tmp_path, "look", reply="looked", read_only=True)
    make_skill(tmp_path, "change", reply="changed")
    srv = serve(load_agent(str(tmp_path), read_only=True).asgi(store="memory://"))
    async with httpx.AsyncClient(timeout=10) as client:
        card = (await client.get(srv.url + "/.well-known/agent-card.json")).json()
        assert [s["id"] for s in card["skills"]] == ["look"]

        async def call(skill: str) -> dict[str, Any]:
            body = rpc("SendMessage", {"message": user_message("hi", metadata={"skillId": skill})})
            return (await client.post(srv.rpc_url, json=body, headers=A2A_V1)).json()  # type: ignore[no-any-return]

        task = assert_rpc_result(await call("look"), "SendMessage")["task"]
        # the result is the body of SKILL.md rendered with the params
        assert task["artifacts"][0]["parts"][0]["text"] == "looked Say hi.\n"
        refused = assert_rpc_error(await call("change"), -32602)
        absent = assert_rpc_error(await call("absent"), -32602)
        assert refused["message"] == "unknown skillId 'change'; skills: look"
        assert absent["message"] == "unknown skillId 'absent'; skills: look"
        listed = (await client.post(srv.rpc_url, json=rpc("ListTasks", {}), headers=A2A_V1)).json()
        assert assert_rpc_result(listed, "ListTasks")["totalSize"] == 1


def test_cli_serve_accepts_read_only_and_plugins_flags() -> None:
    from skillwire.cli.main import _parser

    args = _parser().parse_args(["serve", "x", "--read-only", "--plugins"])
    assert args.read_only is True and args.plugins is True
