"""Security declared in agent.yaml (schemes, requirements, tenants; secrets from the environment), and
``skills check`` / start-up refusing a skill whose securityRequirements name an undeclared scheme."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import EXAMPLES
from skillwire import Agent
from skillwire.cli.main import main
from skillwire.errors import ManifestError, SkillwireError
from skillwire.skills.loader import check_skills_folder

SECURE_YAML = """\
name: Keeper
security:
  schemes:
    apiKey: {type: apiKey, location: header, name: X-Keeper-Key, keysFromEnv: KEEPER_KEYS, scopes: {alice: [greet]}}
    bearer: {type: bearer, jwksUrlFromEnv: KEEPER_JWKS, issuer: https://idp.example, audience: keeper, optional: true}
  require:
    - {apiKey: []}
    - {bearer: [greet]}
  tenants: {alice: [acme]}
"""


def skills_folder(tmp_path: Path, agent_yaml: str, requirement: str | None = None) -> Path:
    folder = tmp_path / "keeper"
    shutil.copytree(EXAMPLES / "greeter" / "greet", folder / "greet")
    (folder / "agent.yaml").write_text(agent_yaml)
    if requirement is not None:
        manifest = folder / "greet" / "SKILL.md"
        text = manifest.read_text().replace(
            "readOnly: true\n", f"readOnly: true\nsecurityRequirements: {requirement}\n"
        )
        manifest.write_text(text)
    return folder


def test_agent_yaml_declares_schemes_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: Any
) -> None:
    monkeypatch.setenv("KEEPER_KEYS", "alice:k-alice-0001,bob:k-bob-0002")
    monkeypatch.delenv("KEEPER_JWKS", raising=False)
    agent = Agent.from_folder(skills_folder(tmp_path, SECURE_YAML, "[{apiKey: [greet]}]"))
    card = agent.card()
    # the optional bearer scheme is left out (its variable is unset), and so is the alternative naming it
    assert list(card.security_schemes) == ["apiKey"]
    assert card.security_schemes["apiKey"] == {
        "apiKeySecurityScheme": {"location": "header", "name": "X-Keeper-Key"}
    }
    srv = serve(agent.asgi(store="memory://"))
    body = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "Ada"}]}}
    v1 = {"A2A-Version": "1.0"}
    with httpx.Client(timeout=15) as http:
        assert http.post(srv.url + "/message:send", json=body, headers=v1).status_code == 401
        # bob is authenticated, but the skill needs scope greet, which only alice's key grants
        bob = http.post(srv.url + "/message:send", json=body, headers={**v1, "X-Keeper-Key": "k-bob-0002"})
        assert bob.status_code == 403
        alice = http.post(
            srv.url + "/message:send", json=body, headers={**v1, "X-Keeper-Key": "k-alice-0001"}
        )
        assert alice.status_code == 200 and alice.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # tenants come from agent.yaml: alice may use acme, bob may not
        acme = srv.url + "/acme/message:send"
        assert http.post(acme, json=body, headers={**v1, "X-Keeper-Key": "k-bob-0002"}).status_code == 403
        assert http.post(acme, json=body, headers={**v1, "X-Keeper-Key": "k-alice-0001"}).status_code == 200


def test_a_scheme_whose_secret_is_not_in_the_environment_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KEEPER_KEYS", raising=False)
    with pytest.raises(ManifestError, match="KEEPER_KEYS is not set"):
        Agent.from_folder(skills_folder(tmp_path, SECURE_YAML))


@pytest.mark.parametrize(
    ("yaml", "reason"),
    [
        ("security: {schemes: {k: {type: apiKey, keys: {a: secret}}}}", "API keys are secrets"),
        ("security: {schemes: {k: {type: magic}}}", "`type` must be one of"),
        ("security: {schemes: {k: {type: apiKey, keysFromEnv: K, colour: red}}}", "unknown key 'colour'"),
        ("security: {schemes: {k: {type: apiKey, keysFromEnv: K}}, require: [{other: []}]}", "'other'"),
        ("security: {schemes: {}}", "`schemes` must map"),
    ],
)
def test_a_bad_security_section_is_refused_with_where(tmp_path: Path, yaml: str, reason: str) -> None:
    folder = skills_folder(tmp_path, "name: Keeper\n" + yaml + "\n")
    checked = check_skills_folder(folder)
    assert len(checked.problems) == 1 and reason in str(checked.problems[0])
    assert "security" in str(checked.problems[0])


def test_skills_check_refuses_a_requirement_naming_an_undeclared_scheme(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = skills_folder(tmp_path, SECURE_YAML, "[{oauth: [write]}]")
    assert main(["skills", "check", str(folder)]) == 1
    err = capsys.readouterr()
    assert "names security scheme 'oauth', which agent.yaml does not declare (declared: apiKey, bearer)" in (
        err.out + err.err
    )
    bare = skills_folder(tmp_path / "bare", "name: Bare\n", "[{apiKey: []}]")
    problems = check_skills_folder(bare).problems
    assert len(problems) == 1 and "agent.yaml declares no security" in str(problems[0])
    # and start-up refuses the same (the manifest parses; the names do not resolve)
    with pytest.raises(SkillwireError, match="the agent declares no security"):
        Agent.from_folder(bare).asgi(store="memory://")


def test_skills_check_runs_the_code_agents_security_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agent.py").write_text(
        "from skillwire import Agent\n"
        "from skillwire.security import APIKey, Security\n"
        "agent = Agent('A', security=Security(APIKey(keys={'a': 'k-aaaa'})))\n"
        "@agent.skill(tags=['t'], security=[{'bearer': []}])\n"
        "async def s(params, ctx):\n"
        "    '''S.'''\n"
        "    return 'ok'\n"
    )
    assert main(["skills", "check", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert "scheme 'bearer', which the agent does not declare (declared: apiKey)" in out.out + out.err
