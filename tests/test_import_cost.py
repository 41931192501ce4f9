"""Issue 31: the command line starts like a command line. What a light path imports is held here, by module
(never by a timing): ``import skillwire``, the client and the CLI's own commands must not load the server,
the security schemes, the skill loader, telemetry or protobuf, which only serving an agent needs.

Each case runs in a fresh interpreter, since this one has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Modules (or packages, by their first part) that serving needs and calling does not.
HEAVY = (
    "skillwire.agent",
    "skillwire.server.app",
    "skillwire.server.tasks.runtime",
    "skillwire.server.notifications.push",
    "skillwire.server.observability.telemetry",
    "skillwire.security",
    "skillwire.skills.loader",
    "skillwire.skills.registry",
    "skillwire.stores.sqlite",
    "starlette",
    "uvicorn",
    "grpc",
    "google.protobuf",
    "opentelemetry",
    "prometheus_client",
    "cryptography",
    "asyncpg",
    "redis",
    "yaml",
    "mcp",
)

_REPORT = """
import json, sys
{code}
print(json.dumps(sorted(sys.modules)))
"""

CASES = {
    "import skillwire": "import skillwire",
    "import skillwire.client": "import skillwire.client",
    "from skillwire import Client, Task, TaskState": "from skillwire import Client, Task, TaskState",
    "skillwire --version": (
        "from skillwire.cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    ),
    "skillwire card --help": (
        "from skillwire.cli.main import main\ntry:\n    main(['card', '--help'])\nexcept SystemExit:\n    pass"
    ),
}


def _loaded(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _REPORT.format(code=code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return modules


def _heavy(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == h or name.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize("case", CASES)
def test_a_light_path_loads_nothing_serving_needs(case: str) -> None:
    assert _heavy(_loaded(CASES[case])) == []


def test_serving_does_load_them() -> None:
    """The check can fail: the path that serves an agent loads exactly what the light paths must not."""
    heavy = _heavy(_loaded("from skillwire import Agent"))
    assert {"skillwire.agent", "skillwire.server.app", "skillwire.security"} <= set(heavy)


#: What ``skillwire --version`` has no use for either, though a call to an agent loads it: the event loop, TLS,
#: the distribution's metadata (the version is read from ``skillwire._version``).
NOT_FOR_VERSION = (
    "asyncio",
    "ssl",
    "importlib.metadata",
    "skillwire.cli.console_relay",
    "skillwire.cli.db_work",
)


def test_skillwire_version_builds_the_parser_without_what_the_commands_use() -> None:
    loaded = _loaded(CASES["skillwire --version"])
    assert [name for name in loaded if name.startswith(NOT_FOR_VERSION)] == []
    assert {"skillwire.cli.console", "skillwire.cli.db"} <= set(loaded)  # their parsers are there


def test_the_script_answers_version_before_the_command_line_loads() -> None:
    """The console script (``skillwire._command``) prints the version without building the parser, which
    imports every command family: none of the command line, msgspec or the event loop is loaded."""
    loaded = _loaded("from skillwire._command import main\nmain(['--version'])")
    assert [n for n in loaded if n.startswith(("skillwire.cli", "msgspec", "asyncio"))] == []
    assert "skillwire._version" in loaded
    # the check can fail: any other command goes through the command line
    other = _loaded(
        "from skillwire._command import main\ntry:\n    main(['card', '--help'])\nexcept SystemExit:\n    pass"
    )
    assert "skillwire.cli.main" in other


def test_importing_the_security_schemes_derives_no_key() -> None:
    """A start-up derived an scrypt hash at import (55 ms of every `skillwire serve`, an agent without
    security too). Counted by wrapping hashlib.scrypt in a fresh interpreter before the import."""
    code = (
        "import hashlib\ncalls = []\nreal = hashlib.scrypt\n"
        "hashlib.scrypt = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
        "import skillwire.security.schemes\nimport skillwire.cli.assembly\nprint(len(calls))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "0"


def test_an_unknown_user_is_checked_against_a_valid_hash() -> None:
    """The hash an unknown user's password is checked against (so that it costs what a wrong password
    costs) is a real scrypt hash of the parameters in use, which no password tried here matches."""
    from skillwire.security import schemes

    kind, n, r, p, _salt, _hash = schemes._DUMMY_HASH.split("$")
    assert (kind, int(n), int(r), int(p)) == (
        "scrypt",
        schemes._SCRYPT["n"],
        schemes._SCRYPT["r"],
        schemes._SCRYPT["p"],
    )
    assert schemes._check_password("", schemes._DUMMY_HASH) is False
    assert schemes._check_password("s3cret", schemes._DUMMY_HASH) is False
