"""Manifest files on disk (issue 9): SKILL.md and agent.yaml are size-checked before they are read, and bytes
that are not UTF-8 are a ManifestError naming the file and the line, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillwire import Agent
from skillwire.cli.main import main
from skillwire.errors import ManifestError
from skillwire.skills.loader import MAX_AGENT_FILE_BYTES, check_skills_folder, load_agent_config
from skillwire.skills.manifest import MAX_FILE_BYTES, read_manifest_text

MANIFEST = "---\nid: greet\nname: Greet\ndescription: Says hello.\ntags: [demo]\n---\nHello {{ name }}!\n"
CODE = "async def run(params, ctx):\n    return 'hi'\n"


def skill_folder(root: Path, manifest: bytes | str = MANIFEST) -> Path:
    folder = root / "greet"
    folder.mkdir(parents=True)
    data = manifest.encode() if isinstance(manifest, str) else manifest
    (folder / "SKILL.md").write_bytes(data)
    (folder / "skill.py").write_text(CODE)
    return folder / "SKILL.md"


def bytes_read() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def test_a_latin1_skill_md_names_the_file_line_and_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = skill_folder(tmp_path, MANIFEST.replace("Says hello.", "Dit café.").encode("latin-1"))
    with pytest.raises(ManifestError) as caught:
        Agent.from_folder(tmp_path)
    error = caught.value
    assert (error.source, error.line) == (str(file), 4)
    assert error.reason == "the file is not UTF-8 text: byte 0xe9 (byte 21 of the line) cannot be decoded"
    assert main(["serve", str(tmp_path), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{file}:4: the file is not UTF-8 text" in err and "Traceback" not in err
    assert main(["skills", "check", str(tmp_path)]) == 1
    assert f"{file}:4: the file is not UTF-8 text" in capsys.readouterr().err


def test_a_utf16_skill_md_is_refused_at_its_first_byte(tmp_path: Path) -> None:
    file = skill_folder(tmp_path, MANIFEST.encode("utf-16"))
    with pytest.raises(ManifestError, match="byte 0xff") as caught:
        Agent.from_folder(tmp_path)
    assert (caught.value.source, caught.value.line) == (str(file), 1)


def test_an_undecodable_agent_yaml_names_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skill_folder(tmp_path)
    agent_yaml = tmp_path / "agent.yaml"
    agent_yaml.write_bytes(b"name: Greeter\ndescription: \xc3\x28 broken\n")
    with pytest.raises(ManifestError) as caught:
        load_agent_config(tmp_path)
    assert (caught.value.source, caught.value.line) == (str(agent_yaml), 2)
    assert "not UTF-8" in caught.value.reason
    assert main(["serve", str(tmp_path), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{agent_yaml}:2: the file is not UTF-8 text" in err and "Traceback" not in err


def test_a_skill_md_over_the_limit_is_refused(tmp_path: Path) -> None:
    padding = "x" * (MAX_FILE_BYTES - len(MANIFEST) + 1)
    file = skill_folder(tmp_path, MANIFEST + padding)
    assert file.stat().st_size == MAX_FILE_BYTES + 1
    with pytest.raises(ManifestError, match=f"larger than the limit of {MAX_FILE_BYTES} bytes") as caught:
        Agent.from_folder(tmp_path)
    assert caught.value.source == str(file)
    (problem,) = check_skills_folder(tmp_path).problems
    assert problem.source == str(file)
    file.write_text(MANIFEST + padding[:-1])  # exactly at the limit: accepted
    assert Agent.from_folder(tmp_path).registry.get("greet") is not None


def test_an_agent_yaml_over_the_limit_is_refused(tmp_path: Path) -> None:
    skill_folder(tmp_path)
    agent_yaml = tmp_path / "agent.yaml"
    agent_yaml.write_text("name: Greeter\n# " + "x" * MAX_AGENT_FILE_BYTES + "\n")
    with pytest.raises(
        ManifestError, match=f"larger than the limit of {MAX_AGENT_FILE_BYTES} bytes"
    ) as caught:
        Agent.from_folder(tmp_path)
    assert caught.value.source == str(agent_yaml)


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
def test_a_huge_manifest_is_not_read_past_the_limit(tmp_path: Path) -> None:
    file = skill_folder(tmp_path)
    with file.open("r+b") as out:
        out.truncate(256 * MAX_FILE_BYTES)  # 256 MiB, sparse: reading it all would show in the counter
    before = bytes_read()
    with pytest.raises(ManifestError, match="larger than the limit"):
        read_manifest_text(file)
    assert bytes_read() - before <= MAX_FILE_BYTES + 64 * 1024
