"""The echo agent of ``skillwire-memory`` behind authentication: what bench/run.py's ``skillwire-apikey`` and
``skillwire-jwt`` targets serve (``skillwire serve bench/secure_echo.py``).

The executor and the skill list are those of ``examples/echo/agent.py`` (imported from that file, so the
work done per request is the same); only ``security=`` is added, chosen by ``BENCH_AUTH``:

* ``apikey``: ``Security(APIKey(keys={"bench": $BENCH_API_KEY}))``, the key in an ``X-API-Key`` header;
* ``jwt``: ``Security(Bearer(keys=$BENCH_JWK, issuer=$BENCH_JWT_ISSUER, audience=$BENCH_JWT_AUDIENCE))``,
  ``BENCH_JWK`` a public JWK as JSON (static keys: no JWKS is fetched), issuer and audience by default
  ``https://bench.example`` and ``bench``.

The harness generates the key material for each run and sets these variables. By hand::

    BENCH_AUTH=apikey BENCH_API_KEY=k1 skillwire serve bench/secure_echo.py --store memory://
    curl -s localhost:8000/ -H 'X-API-Key: k1' -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \\
      -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1",
           "role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from skillwire import Agent
from skillwire.security import APIKey, Bearer, Scheme, Security

ECHO_FILE = Path(__file__).resolve().parent.parent / "examples" / "echo" / "agent.py"
DEFAULT_ISSUER = "https://bench.example"
DEFAULT_AUDIENCE = "bench"


def _echo_agent() -> Agent:
    """``examples/echo/agent.py``'s agent, loaded from its file (it is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_echo_example", ECHO_FILE)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {ECHO_FILE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    echo: Agent = module.agent
    return echo


def _required(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise RuntimeError(f"bench/secure_echo.py: set {variable} (bench/run.py does)")
    return value


def _scheme(auth: str) -> Scheme:
    if auth == "apikey":
        return APIKey(keys={"bench": _required("BENCH_API_KEY")})
    if auth == "jwt":
        return Bearer(
            keys=json.loads(_required("BENCH_JWK")),
            issuer=os.environ.get("BENCH_JWT_ISSUER", DEFAULT_ISSUER),
            audience=os.environ.get("BENCH_JWT_AUDIENCE", DEFAULT_AUDIENCE),
        )
    raise RuntimeError(f"bench/secure_echo.py: BENCH_AUTH must be apikey or jwt, not {auth!r}")


_echo = _echo_agent()
agent = Agent(
    _echo.name,
    _echo.description,
    executor=_echo.executor,
    skills=_echo.skills,
    security=Security(_scheme(os.environ.get("BENCH_AUTH", ""))),
)
