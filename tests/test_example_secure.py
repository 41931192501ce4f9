"""examples/secure, served as a user serves it (``skillwire serve examples/secure`` in a subprocess): keys
from SECURE_EXAMPLE_KEYS, a bearer scheme when SECURE_EXAMPLE_JWKS_URL names a JWKS (here a local IdP's),
and a skill that answers with the caller's name."""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

from conftest import EXAMPLES, Served, start_process
from idp import AUDIENCE, Clock, running_idp
from skillwire.cli.main import main

TEXT = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}
V1 = {"A2A-Version": "1.0"}


def answer_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["task"]["artifacts"][0]["parts"][0]["text"])


def serve_secure(tmp_path: Any, processes: list[Served], **env: str) -> Served:
    served = start_process(str(EXAMPLES / "secure"), "memory://", tmp_path, env={**os.environ, **env})
    processes.append(served)
    return served


def test_keys_from_the_environment_and_no_bearer_without_a_jwks(
    tmp_path: Any, processes: list[Served]
) -> None:
    served = serve_secure(tmp_path, processes, SECURE_EXAMPLE_KEYS="alice:k-alice-1234,bob:k-bob-5678")
    card = httpx.get(served.url + "/.well-known/agent-card.json").json()
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"] == {
        "location": "header",
        "name": "X-API-Key",
    }
    assert "bearer" not in card["securitySchemes"]  # SECURE_EXAMPLE_JWKS_URL is unset
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {}}}]
    send = served.url + "/message:send"
    assert httpx.post(send, json=TEXT, headers=V1).status_code == 401
    assert httpx.post(send, json=TEXT, headers={**V1, "X-API-Key": "k-wrong"}).status_code == 401
    assert (
        answer_of(httpx.post(send, json=TEXT, headers={**V1, "X-API-Key": "k-bob-5678"}))
        == "Hello, bob (apiKey)"
    )


def test_the_cli_sends_the_key_the_card_asks_for(tmp_path: Any, processes: list[Served], capsys: Any) -> None:
    served = serve_secure(tmp_path, processes, SECURE_EXAMPLE_KEYS="alice:k-alice-1234")
    assert main(["send", served.url, "hello", "--credential", "apiKey=k-alice-1234"]) == 0
    assert "Hello, alice (apiKey)" in capsys.readouterr().out
    assert main(["send", served.url, "hello"]) != 0  # no key: the agent says 401, the CLI says why
    assert "credentials" in capsys.readouterr().err.lower()


def test_a_bearer_jwt_from_the_jwks_named_in_the_environment(tmp_path: Any, processes: list[Served]) -> None:
    with running_idp(Clock(time.time())) as idp:
        served = serve_secure(
            tmp_path,
            processes,
            SECURE_EXAMPLE_KEYS="alice:k-alice-1234",
            SECURE_EXAMPLE_JWKS_URL=idp.document()["jwks_uri"],
            SECURE_EXAMPLE_ISSUER=idp.issuer,
            SECURE_EXAMPLE_AUDIENCE=AUDIENCE,
        )
        card = httpx.get(served.url + "/.well-known/agent-card.json").json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"] == {
            "scheme": "bearer",
            "bearerFormat": "JWT",
        }
        send = served.url + "/message:send"
        token = idp.token(sub="carol")
        bearer = {**V1, "Authorization": f"Bearer {token}"}
        assert answer_of(httpx.post(send, json=TEXT, headers=bearer)) == "Hello, carol (bearer)"
        stranger = idp.token(sub="carol", aud="https://another.example")
        refused = httpx.post(send, json=TEXT, headers={**V1, "Authorization": f"Bearer {stranger}"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
