"""The a2a-sdk **0.3** virtualenv the v0.3 interop tests run their peers in.

a2a-sdk 0.3 cannot be installed beside the a2a-sdk 1.x of the test venv, so :func:`python` builds a
virtualenv holding it with its server extra (the 0.3 client of tests/interop_v03/client.py and the 0.3 agent
of tests/interop_v03/server.py both run there), cached in ``$XDG_CACHE_HOME/skillwire-tests`` (``~/.cache``
by default) and reused while its ``a2a-sdk`` is the pinned version. If PyPI cannot be reached, the tests
that need it skip, or fail when ``SKILLWIRE_REQUIRE_SERVICES=1`` (CI). The ``sdk03_python`` fixture in
conftest.py calls it once per session (in each pytest-xdist worker; a lock lets one build).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

A2A_SDK_03 = "0.3.26"  # the newest a2a-sdk 0.3 release
REQUIRE_ENV = "SKILLWIRE_REQUIRE_SERVICES"


def unavailable(reason: str) -> None:
    message = f"a2a-sdk {A2A_SDK_03} venv unavailable: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message}; {REQUIRE_ENV}=1 forbids skipping", pytrace=False)
    pytest.skip(message)


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def client_env() -> dict[str, str]:
    """The environment for the 0.3 venv's python: nothing of the test venv leaks in, loopback unproxied."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    env["NO_PROXY"] = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    return env


#: What the venv holds: the 0.3 client (tests/interop_v03/client.py) and the 0.3 server
#: (tests/interop_v03/server.py, used by test_client_v03.py).
REQUIREMENTS = (f"a2a-sdk[http-server]=={A2A_SDK_03}", "uvicorn", "httpx")


def _has_sdk(venv: Path) -> bool:
    """``venv`` imports a2a's client and server, uvicorn and httpx, and its a2a-sdk is the pinned version."""
    python = venv_python(venv)
    if not python.exists():
        return False
    probe = (
        "import importlib.metadata as m, a2a.client, a2a.server.apps, fastapi, uvicorn, httpx;"
        " print(m.version('a2a-sdk'))"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", probe], capture_output=True, text=True, timeout=60, env=client_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == A2A_SDK_03


def tail(text: str, lines: int = 15) -> str:
    """The last ``lines`` lines of ``text``, without pip's warnings about local index folders."""
    kept = [line for line in text.strip().splitlines() if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])


def _build_venv(target: Path) -> None:
    """Create a venv with :data:`REQUIREMENTS` beside ``target`` and move it into place."""
    build = target.with_name(f"{target.name}.build-{os.getpid()}")
    shutil.rmtree(build, ignore_errors=True)
    build.parent.mkdir(parents=True, exist_ok=True)
    try:
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(build)], capture_output=True, text=True, timeout=180
        )
        if made.returncode != 0:
            unavailable(f"`python -m venv` failed:\n{tail(made.stderr)}")
        install = [
            str(venv_python(build)), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "--quiet", "--timeout", "30", "--retries", "1", *REQUIREMENTS,
        ]  # fmt: skip
        try:
            pip = subprocess.run(install, capture_output=True, text=True, timeout=600, env=client_env())
        except subprocess.TimeoutExpired:
            unavailable(f"pip did not install {' '.join(REQUIREMENTS)} from PyPI within 600 s")
        if pip.returncode != 0:
            unavailable(f"pip could not install {' '.join(REQUIREMENTS)} from PyPI:\n{tail(pip.stderr)}")
        if not _has_sdk(build):
            unavailable(f"{' '.join(REQUIREMENTS)} were installed but do not import")
        shutil.rmtree(target, ignore_errors=True)
        try:
            build.rename(target)
        except OSError:
            if not _has_sdk(target):  # another run did not put a good one there at the same time
                raise
    finally:
        shutil.rmtree(build, ignore_errors=True)


def python() -> Path:
    """The python of the a2a-sdk 0.3 venv (built on first use, then reused from the cache)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "skillwire-tests" / "a2a-sdk-0.3-with-server"
    venv.parent.mkdir(parents=True, exist_ok=True)
    # The suite's workers (pytest-xdist) each ask: one builds while the others wait, then find it built.
    with open(venv.with_name(f"{venv.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _has_sdk(venv):
            _build_venv(venv)
    return venv_python(venv)
