"""`skillwire serve` starts honestly and fails fast, as a process of its own: the banner (on stderr) lists
exactly what is served; a store or bus that cannot be reached is one line, printed once, before anything
listens; a missing extra names the pip command that works from where the user stands; ``--otel`` without a
collector warns once; the console exporter writes one JSON span per line on stdout."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import A2A_V1, EXAMPLES, PROCESS_TIMEOUT, ROOT, free_port, rpc, user_message
from skillwire.server.serving.serve import without_secret

pytestmark = pytest.mark.slow

GREETER = str(EXAMPLES / "greeter")


class Process:
    """``skillwire serve ...`` with stdout and stderr kept apart, each read by a thread of its own."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "skillwire", "serve", *args, "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = threading.Condition()
        self.ended: queue.Queue[None] = queue.Queue()
        #: whether both streams were read to their end
        self.drained = False
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    def _read(self, stream: object, lines: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._changed:
                lines.append(line)
                self._changed.notify_all()
        self.ended.put(None)

    def wait_for(self, lines: list[str], text: str) -> str:
        with self._changed:
            found = self._changed.wait_for(
                lambda: next((x for x in lines if text in x), None), PROCESS_TIMEOUT
            )
        assert found, f"never printed {text!r}; stdout:\n{''.join(self.out)}\nstderr:\n{''.join(self.err)}"
        return found

    def finish(self) -> int:
        """Stop it (SIGTERM, a graceful stop) and wait for its output to end; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(PROCESS_TIMEOUT)
        for _ in range(2):
            self.ended.get(timeout=PROCESS_TIMEOUT)
        self.drained = True
        return code


@pytest.fixture
def started() -> Iterator[list[Process]]:
    running: list[Process] = []
    yield running
    for process in running:
        if not process.drained:
            process.proc.kill()
            process.finish()
        for stream in (process.proc.stdout, process.proc.stderr):
            if stream is not None:
                stream.close()


def serve(started: list[Process], *args: str, **options: object) -> Process:
    process = Process(*args, **options)  # type: ignore[arg-type]
    started.append(process)
    return process


def run(*args: str, cwd: Path = ROOT, code: str = "") -> subprocess.CompletedProcess[str]:
    """``skillwire ARGS`` to its end; ``code`` runs first (to make a module unimportable)."""
    script = f"import sys\n{code}\nfrom skillwire.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def send(url: str) -> None:
    answer = httpx.post(url, json=rpc("SendMessage", {"message": user_message("Ada")}), headers=A2A_V1)
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


NO_OTEL_EXPORT = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}


# -- the banner ------------------------------------------------------------------------------------------------


def test_the_banner_lists_exactly_what_is_served_on_stderr(started: list[Process]) -> None:
    traced = serve(started, GREETER, "--store", "memory://", "--otel", env=NO_OTEL_EXPORT)
    traced.wait_for(traced.err, "task store: memory://")
    banner = "".join(traced.err)
    assert "metrics:" not in banner  # --otel alone serves no /metrics
    assert httpx.get(traced.url + "/metrics").status_code == 404
    assert "  traces: none (OTEL_TRACES_EXPORTER=none)\n" in banner
    assert "  event bus: memory:// (this process only)\n" in banner
    assert traced.out == []  # stdout is left to what the process is asked to write there
    counted = serve(started, GREETER, "--store", "memory://", "--metrics")
    counted.wait_for(counted.err, "task store:")
    assert f"  metrics: {counted.url}/metrics\n" in counted.err
    assert httpx.get(counted.url + "/metrics").status_code == 200
    assert not any("traces:" in line for line in counted.err)


def test_a_password_never_shows_in_the_banner() -> None:
    assert without_secret("postgresql://app:s3cret@db:5432/tasks") == "postgresql://app:***@db:5432/tasks"
    assert without_secret("redis://:s3cret@cache:6379/0") == "redis://:***@cache:6379/0"
    assert without_secret("sqlite:///.skillwire/greeter.db") == "sqlite:///.skillwire/greeter.db"
    assert without_secret("postgresql://app@db/tasks") == "postgresql://app@db/tasks"


# -- failing fast --------------------------------------------------------------------------------------------


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    output = (done.stdout + done.stderr).strip().splitlines()
    assert len(output) == 1, done.stdout + done.stderr
    return output[0]


def test_an_unreachable_redis_bus_refuses_to_start_in_one_line() -> None:
    bus = f"redis://127.0.0.1:{free_port()}/0"
    done = run("serve", GREETER, "--store", "memory://", "--bus", bus, "--port", str(free_port()))
    assert done.returncode == 2
    line = one_line(done)
    assert line.startswith(f"skillwire: cannot start: the Redis event bus at {bus} cannot be reached")


def test_an_unreachable_postgresql_store_refuses_to_start_in_one_line() -> None:
    store = f"postgresql://app:s3cret@127.0.0.1:{free_port()}/tasks"
    done = run("serve", GREETER, "--store", store, "--port", str(free_port()))
    assert done.returncode == 2
    assert one_line(done).startswith("skillwire: cannot start: cannot open the PostgreSQL store")
    assert "s3cret" not in done.stderr


def test_workers_reach_the_store_and_the_bus_before_any_fork() -> None:
    store = f"postgresql://127.0.0.1:{free_port()}/tasks"
    bus = f"redis://127.0.0.1:{free_port()}/0"
    args = ("serve", GREETER, "--store", store, "--bus", bus, "--workers", "2", "--port", str(free_port()))
    done = run(*args)
    assert done.returncode == 2
    assert one_line(done).startswith("skillwire: cannot start: cannot open the PostgreSQL store")


# -- extras ---------------------------------------------------------------------------------------------------


def test_a_missing_extra_names_the_command_that_works_from_here(tmp_path: Path) -> None:
    hide = "sys.modules['watchfiles'] = None"
    args = ("serve", GREETER, "--reload", "--store", "memory://", "--port", str(free_port()))
    in_checkout = run(*args, code=hide)
    assert in_checkout.returncode == 2
    assert one_line(in_checkout) == "skillwire: --reload needs watchfiles: pip install -e '.[reload]'"
    elsewhere = run(*args, code=hide, cwd=tmp_path)
    assert one_line(elsewhere) == f"skillwire: --reload needs watchfiles: pip install -e '{ROOT}[reload]'"


def test_otel_without_opentelemetry_says_what_to_install() -> None:
    done = run("serve", GREETER, "--otel", "--store", "memory://", code="sys.modules['opentelemetry'] = None")
    assert done.returncode == 2
    assert one_line(done) == "skillwire: --otel: tracing needs OpenTelemetry: pip install -e '.[otel]'"


# -- OpenTelemetry --------------------------------------------------------------------------------------------


def test_otel_without_a_collector_warns_once(started: list[Process]) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        "OTEL_BSP_SCHEDULE_DELAY": "20",
        "OTEL_METRIC_EXPORT_INTERVAL": "50",
    }
    process = serve(started, GREETER, "--store", "memory://", "--otel", env=env)
    process.wait_for(process.err, "task store:")
    for _ in range(3):
        send(process.url)
    process.finish()  # shutting down exports what is left, spans and metrics: both fail
    warned = [line for line in process.err if line.startswith(("WARNING", "ERROR"))]
    assert len(warned) == 1, "".join(process.err)
    assert warned[0].startswith("WARNING skillwire.telemetry: no OpenTelemetry collector answers at")


def test_the_console_exporter_writes_one_json_span_per_line_on_stdout(started: list[Process]) -> None:
    env = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "20",
    }
    process = serve(started, GREETER, "--store", "memory://", "--otel", env=env)
    process.wait_for(process.err, "task store:")
    assert "traces: stdout, one JSON span per line" in "".join(process.err)
    send(process.url)
    process.wait_for(process.out, '"name": "skill greet"')
    process.finish()
    spans = [json.loads(line) for line in process.out]
    assert {span["name"] for span in spans} >= {"A2A SendMessage", "skill greet"}
    assert not any("skillwire:" in line for line in process.out)
