"""Benchmark skillwire against the official a2a-sdk, side by side, in one run.

Each target is started as its own uvicorn process (one worker, loop/http ``auto``, log level warning, no
access log) on a free 127.0.0.1 port and measured in turn: cold start, blocking SendMessage throughput and
latency at several concurrencies, SSE events/s of one ``stream N`` request, and RSS. A target that fails to
start or answers wrongly is reported, and the run goes on with the next one. Progress goes to stderr, the
markdown report to stdout.

    python bench/run.py                      # every target, defaults (about 40 s per target)
    python bench/run.py --targets a2a-sdk --duration 3 --json /tmp/bench.json

See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
HOST = "127.0.0.1"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
CARD_PATH = "/.well-known/agent-card.json"
RPC_HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
# The settings `skillwire serve` gives uvicorn; the a2a-sdk app is started with the same ones.
UVICORN_FLAGS = ("--loop", "auto", "--http", "auto", "--log-level", "warning", "--no-access-log")
ECHO_TEXT = "hello"
ALL_TARGETS = ("a2a-sdk", "skillwire-memory", "skillwire-sqlite", "skillwire-skill")
BASELINE = "a2a-sdk"
LOADGEN_NOTES = {
    "wrk": "wrk (C, keep-alive connections, Lua script for unique messageIds)",
    "httpx": "asyncio httpx client inside the harness, one keep-alive connection per worker; "
    "it shares the cores with the server and may be the bottleneck",
}

WRK_SCRIPT = r"""
local tag = "bench"
local counter = 0
local threads = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  tag = (args[1] or "bench") .. "-" .. tostring(tid)
end

function request()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter
    .. ',"method":"SendMessage","params":{"message":{"messageId":"' .. tag .. '-' .. counter
    .. '","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
  return wrk.format(nil, nil, nil, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%.0f,"p50_us":%.1f,"p99_us":%.1f,"errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


@dataclass(frozen=True)
class Settings:
    """What to measure and for how long (from the command line)."""

    targets: list[str]
    duration: float
    warmup: float
    settle: float
    concurrency: list[int]
    cold_starts: int
    stream_chunks: int
    stream_runs: int
    stream_timeout: float
    tasks: int
    start_timeout: float
    loadgen: str
    wrk_threads: int
    skillwire: list[str]
    json: Path | None


# --------------------------------------------------------------------------------------------- results


@dataclass
class LoadLevel:
    """Blocking SendMessage load at one concurrency."""

    concurrency: int
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


@dataclass
class TargetResult:
    """Everything measured for one server under test."""

    name: str
    command: list[str] = field(default_factory=list)
    error: str | None = None
    cold_start_ms: list[float] = field(default_factory=list)
    rss_start_mib: float | None = None
    rss_after_load_mib: float | None = None
    load: list[LoadLevel] = field(default_factory=list)
    tasks_during_load: int | None = None
    stream_events: list[int] = field(default_factory=list)
    stream_events_per_s: list[float] = field(default_factory=list)
    tasks_rss_mib: list[tuple[int, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class TargetFailed(Exception):
    """The server under test did not start or did not answer as expected."""


# --------------------------------------------------------------------------------------------- helpers


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (``q`` in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def rpc_body(method: str, text: str, message_id: str, request_id: int = 1) -> bytes:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"message": message}}
    ).encode()


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The fields after the ")" that closes the command name are: state, ppid, ...
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def tree_rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` and all its descendants (in case a CLI forks its server), in MiB."""
    total_kib = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
            pending.extend(_children(current))
    return total_kib / 1024


# --------------------------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class TargetSpec:
    """How to start one server under test on a given port."""

    name: str
    argv: Callable[[int], list[str]]
    env: Callable[[int], dict[str, str]] = lambda _port: {}


def target_spec(name: str, skillwire: list[str], workdir: Path) -> TargetSpec:
    """The command line of each target; skillwire's stores are chosen with ``--store``."""
    if name == "a2a-sdk":
        app = ("a2a_sdk_echo:app", "--app-dir", str(BENCH_DIR))
        return TargetSpec(
            name,
            argv=lambda port: [sys.executable, "-m", "uvicorn", *app, *_listen(port), *UVICORN_FLAGS],
            env=lambda port: {"BENCH_HOST": HOST, "BENCH_PORT": str(port)},
        )
    store = {
        "skillwire-memory": "memory://",
        "skillwire-sqlite": f"sqlite:///{workdir / 'tasks.db'}",
        "skillwire-skill": "memory://",
    }[name]
    # skillwire-skill: the same echo agent written as a SKILL.md skill (routing, input schema, result
    # conversion), against skillwire-memory's bare executor: the cost of the skill layer.
    example = "examples/echo_skill" if name == "skillwire-skill" else "examples/echo"
    return TargetSpec(
        name,
        argv=lambda port: [*skillwire, "serve", example, *_listen(port), "--store", store],
    )


def _listen(port: int) -> list[str]:
    return ["--host", HOST, "--port", str(port)]


class Server:
    """One spawned server process, in its own process group, with its output in a log file."""

    def __init__(self, spec: TargetSpec, log_dir: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://{HOST}:{self.port}"
        self.argv = spec.argv(self.port)
        self._log_path = log_dir / f"{spec.name}-{self.port}.log"
        self._log = self._log_path.open("wb")
        self.spawned_at = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=REPO_ROOT,
                env={**os.environ, **spec.env(self.port)},
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._log.close()
            raise TargetFailed(f"cannot run {shlex.join(self.argv)}: {exc.strerror}") from exc

    def wait_ready(self, timeout: float, poll: float = 0.005) -> float:
        """Poll the agent card until it answers 200; return the seconds since spawn."""
        deadline = self.spawned_at + timeout
        with httpx.Client(timeout=1.0) as client:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    raise TargetFailed(f"exited with code {self.proc.returncode}: {self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.base_url + CARD_PATH).status_code == 200:
                        return time.perf_counter() - self.spawned_at
                time.sleep(poll)
        raise TargetFailed(f"no 200 from {CARD_PATH} within {timeout:g} s: {self.log_tail()}")

    def rss_mib(self) -> float:
        return tree_rss_mib(self.proc.pid)

    def log_tail(self, lines: int = 8) -> str:
        self._log.flush()
        text = self._log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or "(no output)"

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(grace)
        self._log.close()


def jsonrpc_url(server: Server, notes: list[str]) -> str:
    """The JSON-RPC URL the card advertises, always sent to this server's loopback port."""
    reply = httpx.get(server.base_url + CARD_PATH, timeout=5.0)
    try:
        urls = [
            str(iface.get("url", ""))
            for iface in reply.json().get("supportedInterfaces", [])
            if iface.get("protocolBinding") == "JSONRPC"
        ]
    except (ValueError, AttributeError, TypeError) as exc:
        raise TargetFailed(f"unreadable agent card: {reply.text[:300]}") from exc
    if not urls:
        notes.append("the card advertises no JSONRPC interface; posting to /")
        return server.base_url + "/"
    parts = urlsplit(urls[0])
    if parts.hostname not in LOOPBACK_HOSTS or parts.port != server.port:
        notes.append(f"the card advertises {urls[0]}, not port {server.port}; posting to its path there")
    return f"{server.base_url}{parts.path or '/'}"


def check_echo(url: str) -> None:
    """One SendMessage must come back as a completed task echoing the text."""
    reply = httpx.post(url, content=rpc_body("SendMessage", ECHO_TEXT, "bench-check"), headers=RPC_HEADERS)
    try:
        task = reply.json()["result"]["task"]
        state = task["status"]["state"]
        text = task["artifacts"][0]["parts"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise TargetFailed(f"bad SendMessage reply (HTTP {reply.status_code}): {reply.text[:300]}") from exc
    if state != "TASK_STATE_COMPLETED" or text != ECHO_TEXT:
        raise TargetFailed(f"echo check failed: state={state} text={text!r}")


# ------------------------------------------------------------------------------------- load generators


def run_wrk(url: str, concurrency: int, seconds: float, threads: int, tag: str) -> LoadLevel:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    argv = [
        "wrk", f"-t{min(threads, concurrency)}", f"-c{concurrency}", f"-d{max(1, round(seconds))}s",
        "--timeout", "10s", "-s", script.name, url, "--", tag,
    ]  # fmt: skip
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=False)
    finally:
        Path(script.name).unlink()
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("BENCH_RESULT ")), None)
    if line is None:
        raise TargetFailed(f"wrk gave no result: {out.stdout[-300:]} {out.stderr[-300:]}")
    data = json.loads(line.removeprefix("BENCH_RESULT "))
    elapsed = data["duration_us"] / 1e6
    return LoadLevel(
        concurrency=concurrency,
        requests=data["requests"],
        seconds=elapsed,
        rps=data["requests"] / elapsed,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        errors=data["errors"],
    )


async def run_httpx(url: str, concurrency: int, seconds: float, tag: str) -> LoadLevel:
    latencies: list[float] = []
    errors = 0
    started = time.perf_counter()
    deadline = started + seconds

    async def worker(wid: int) -> None:
        nonlocal errors
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:
            n = 0
            while time.perf_counter() < deadline:
                n += 1
                body = rpc_body("SendMessage", ECHO_TEXT, f"{tag}-{wid}-{n}", n)
                sent = time.perf_counter()
                try:
                    reply = await client.post(url, content=body, headers=RPC_HEADERS)
                except httpx.HTTPError:
                    errors += 1
                    continue
                if reply.status_code == 200:
                    latencies.append(time.perf_counter() - sent)
                else:
                    errors += 1

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return LoadLevel(
        concurrency=concurrency,
        requests=len(latencies),
        seconds=elapsed,
        rps=len(latencies) / elapsed,
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        errors=errors,
    )


def run_load(settings: Settings, url: str, concurrency: int, seconds: float, tag: str) -> LoadLevel:
    if settings.loadgen == "wrk":
        level = run_wrk(url, concurrency, seconds, settings.wrk_threads, tag)
    else:
        level = asyncio.run(run_httpx(url, concurrency, seconds, tag))
    # wrk stops with requests still in flight; let the server finish them before the next measurement.
    time.sleep(settings.settle)
    return level


def stream_once(url: str, chunks: int, timeout: float) -> tuple[int, float]:
    """Send ``stream N``; count ``data:`` events until the stream closes. Return (events, seconds)."""
    body = rpc_body("SendStreamingMessage", f"stream {chunks}", f"bench-stream-{time.time_ns()}")
    headers = {**RPC_HEADERS, "Accept": "text/event-stream"}
    events = 0
    last = ""
    started = time.perf_counter()
    with httpx.stream("POST", url, content=body, headers=headers, timeout=timeout) as reply:
        if reply.status_code != 200:
            raise TargetFailed(f"SendStreamingMessage answered HTTP {reply.status_code}")
        for line in reply.iter_lines():
            if line.startswith("data:"):
                events += 1
                last = line
            if time.perf_counter() - started > timeout:
                raise TargetFailed(f"stream still open after {timeout:g} s")
    elapsed = time.perf_counter() - started
    if events < chunks or "TASK_STATE_COMPLETED" not in last:
        raise TargetFailed(f"stream ended after {events} events, last: {last[:200]}")
    return events, elapsed


async def send_many(url: str, count: int, concurrency: int, tag: str) -> int:
    """Send ``count`` SendMessage requests over ``concurrency`` connections; return the failures."""
    numbers = iter(range(count))
    failures = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal failures
        for n in numbers:
            body = rpc_body("SendMessage", ECHO_TEXT, f"{tag}-{n}", n)
            try:
                reply = await client.post(url, content=body, headers=RPC_HEADERS)
                failures += int(reply.status_code != 200)
            except httpx.HTTPError:
                failures += 1

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency), timeout=10.0) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return failures


# --------------------------------------------------------------------------------------------- the run


def start_server(spec: TargetSpec, settings: Settings, log_dir: Path, result: TargetResult) -> Server:
    """Spawn the target ``cold_starts`` times, timing each; keep the last one running."""
    server: Server | None = None
    for attempt in range(1, settings.cold_starts + 1):
        if server is not None:
            server.stop()
        server = Server(spec, log_dir)
        result.command = server.argv
        try:
            result.cold_start_ms.append(server.wait_ready(settings.start_timeout) * 1000)
        except BaseException:
            server.stop()
            raise
        log(f"{spec.name}: cold start {attempt}: {result.cold_start_ms[-1]:.0f} ms")
    assert server is not None
    return server


def measure_running(server: Server, settings: Settings, result: TargetResult) -> None:
    url = jsonrpc_url(server, result.notes)
    check_echo(url)
    if settings.warmup > 0:
        run_load(settings, url, max(settings.concurrency), settings.warmup, "warmup")
    for concurrency in settings.concurrency:
        level = run_load(settings, url, concurrency, settings.duration, f"c{concurrency}")
        result.load.append(level)
        log(
            f"{result.name}: c={concurrency}: {level.rps:.0f} req/s, "
            f"p50 {level.p50_ms:.2f} ms, p99 {level.p99_ms:.2f} ms, {level.errors} errors"
        )

    for _ in range(settings.stream_runs):
        events, seconds = stream_once(url, settings.stream_chunks, settings.stream_timeout)
        result.stream_events.append(events)
        result.stream_events_per_s.append(events / seconds)
    log(f"{result.name}: SSE {max(result.stream_events_per_s):.0f} events/s at best")
    result.rss_after_load_mib = server.rss_mib()

    step = max(1, settings.tasks // 10)
    sent = 0
    while sent < settings.tasks:
        batch = min(step, settings.tasks - sent)
        failed = asyncio.run(send_many(url, batch, 16, f"tasks{sent}"))
        if failed:
            result.notes.append(f"{failed} failed requests in --tasks batch {sent}..{sent + batch}")
        sent += batch
        result.tasks_rss_mib.append((sent, server.rss_mib()))
        log(f"{result.name}: RSS after {sent} more tasks: {result.tasks_rss_mib[-1][1]:.1f} MiB")


def measure_target(spec: TargetSpec, settings: Settings, log_dir: Path) -> TargetResult:
    result = TargetResult(spec.name)
    try:
        server = start_server(spec, settings, log_dir, result)
    except (TargetFailed, OSError, httpx.HTTPError) as exc:
        result.error = str(exc)
        log(f"{spec.name}: FAILED: {result.error}")
        return result
    result.rss_start_mib = server.rss_mib()
    try:
        measure_running(server, settings, result)
    except (TargetFailed, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        log(f"{spec.name}: FAILED: {result.error}")
    finally:
        server.stop()
    requests = sum(level.requests for level in result.load)
    result.tasks_during_load = requests + len(result.stream_events) if result.load else None
    return result


# ---------------------------------------------------------------------------------------------- report


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_info(loadgen: str) -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        models = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")]
        cpu = models[0].split(":", 1)[1].strip() if models else cpu
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    info = {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "uvicorn loop/http (auto)": f"{loop}/{http}",
        "load generator": LOADGEN_NOTES[loadgen],
    }
    if loadgen == "wrk":
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
        info["wrk"] = (out.stdout or out.stderr).split("Copyright")[0].strip()
    for dist in ("a2a-sdk", "skillwire", "uvicorn", "uvloop", "httptools", "starlette", "httpx", "msgspec"):
        info[dist] = _version(dist)
    return info


@dataclass(frozen=True)
class Row:
    """One line of the table: a metric, which way is better, how to read and print it."""

    metric: str
    better: str
    value: Callable[[TargetResult], float | None]
    fmt: str


def _level(concurrency: int, attr: str) -> Callable[[TargetResult], float | None]:
    def value(r: TargetResult) -> float | None:
        hits = [level for level in r.load if level.concurrency == concurrency]
        return float(getattr(hits[0], attr)) if hits else None

    return value


def _rss_after_tasks(count: int) -> Callable[[TargetResult], float | None]:
    return lambda r: dict(r.tasks_rss_mib).get(count)


def _stat(pick: Callable[[list[float]], float], attr: str) -> Callable[[TargetResult], float | None]:
    def value(r: TargetResult) -> float | None:
        values: list[float] = getattr(r, attr)
        return pick(values) if values else None

    return value


def report_rows(settings: Settings) -> list[Row]:
    stream = f"SSE `stream {settings.stream_chunks}`"
    rows = [
        Row("cold start, median (ms)", "lower", _stat(statistics.median, "cold_start_ms"), "{:.0f}"),
        Row("cold start, min (ms)", "lower", _stat(min, "cold_start_ms"), "{:.0f}"),
    ]
    for c in settings.concurrency:
        rows += [
            Row(f"SendMessage c={c} (req/s)", "higher", _level(c, "rps"), "{:.0f}"),
            Row(f"SendMessage c={c} p50 (ms)", "lower", _level(c, "p50_ms"), "{:.2f}"),
            Row(f"SendMessage c={c} p99 (ms)", "lower", _level(c, "p99_ms"), "{:.2f}"),
        ]
    rows += [
        Row(
            "SendMessage errors, all levels",
            "lower",
            lambda r: sum(lv.errors for lv in r.load) if r.load else None,
            "{:.0f}",
        ),
        Row(f"{stream}, best (events/s)", "higher", _stat(max, "stream_events_per_s"), "{:.0f}"),
        Row(
            f"{stream}, median (events/s)",
            "higher",
            _stat(statistics.median, "stream_events_per_s"),
            "{:.0f}",
        ),
        Row("RSS after start (MiB)", "lower", lambda r: r.rss_start_mib, "{:.1f}"),
        Row("tasks created by the load", "", lambda r: r.tasks_during_load, "{:.0f}"),
        Row("RSS after load (MiB)", "lower", lambda r: r.rss_after_load_mib, "{:.1f}"),
    ]
    step = max(1, settings.tasks // 10)
    for count in sorted({min(settings.tasks, step * k) for k in range(1, 11)} - {0}):
        rows.append(Row(f"RSS after {count} more tasks (MiB)", "lower", _rss_after_tasks(count), "{:.1f}"))
    return rows


def render_markdown(results: list[TargetResult], info: dict[str, str], settings: Settings) -> str:
    baseline = next((r for r in results if r.name == BASELINE), None)
    compared = [r for r in results if baseline is not None and r is not baseline]
    header = ["metric", "better", *(r.name for r in results), *(f"{r.name} / {BASELINE}" for r in compared)]
    lines = [
        "# skillwire vs a2a-sdk benchmark",
        "",
        *(f"- **{key}**: {value}" for key, value in info.items()),
        f"- **settings**: {settings.warmup:g} s warm-up, then {settings.duration:g} s per concurrency level "
        f"({', '.join(map(str, settings.concurrency))}), {settings.settle:g} s idle after each; "
        f"{settings.cold_starts} cold starts; {settings.stream_runs} SSE runs",
        f"- load generator and servers share the same {info['nproc']} cores: compare columns, "
        "do not read the figures as absolute capacity",
        "",
        "| " + " | ".join(header) + " |",
        "|---|---|" + "---:|" * (len(header) - 2),
    ]
    for row in report_rows(settings):
        cells = [row.metric, row.better or "-"]
        for r in results:
            value = row.value(r)
            cells.append(row.fmt.format(value) if value is not None else ("failed" if r.error else "n/a"))
        base = row.value(baseline) if baseline is not None else None
        for r in compared:
            value = row.value(r)
            cells.append(f"{value / base:.2f}x" if value is not None and base else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for r in results:
        lines.append(f"- `{r.name}`: " + (f"`{shlex.join(r.command)}`" if r.command else "not started"))
        if r.error:
            lines.append(f"  - **failed**: {' '.join(r.error.split())}")
        lines += [f"  - note: {note}" for note in r.notes]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--targets", default=",".join(ALL_TARGETS), help=f"comma-separated, from: {', '.join(ALL_TARGETS)}")
    add("--duration", type=float, default=5.0, help="seconds of load per concurrency level (default 5)")
    add("--warmup", type=float, default=2.0, help="seconds of warm-up load first (default 2; 0 for none)")
    add("--settle", type=float, default=1.0, help="idle seconds after each load run (default 1)")
    add("--concurrency", default="1,16,64", help="comma-separated concurrency levels (default 1,16,64)")
    add("--cold-starts", type=int, default=3, help="spawns to time; the last is then measured (default 3)")
    add("--stream-chunks", type=int, default=1000, help="N of the `stream N` SSE request (default 1000)")
    add("--stream-runs", type=int, default=5, help="SSE requests to time (default 5)")
    add("--stream-timeout", type=float, default=60.0, help="give up on one SSE request after this (s)")
    add("--tasks", type=int, default=0, help="then send N more SendMessage, sampling RSS every N/10")
    add("--start-timeout", type=float, default=30.0, help="give up on a start after this (s)")
    add("--loadgen", choices=("auto", "wrk", "httpx"), default="auto", help="auto: wrk if installed")
    add("--wrk-threads", type=int, default=1, help="wrk threads (default 1, leaving a core to the server)")
    add("--skillwire", default=None, help="skillwire command (default: the script beside this python)")
    add("--json", type=Path, default=None, help="also write the results as JSON to this file")
    ns = parser.parse_args(argv)

    targets = [t.strip() for t in ns.targets.split(",") if t.strip()]
    if unknown := sorted(set(targets) - set(ALL_TARGETS)):
        parser.error(f"unknown targets: {', '.join(unknown)}")
    concurrency = [int(c) for c in ns.concurrency.split(",")]
    if min(concurrency, default=0) < 1 or min(ns.cold_starts, ns.stream_runs, ns.wrk_threads) < 1:
        parser.error("concurrency levels, --cold-starts, --stream-runs and --wrk-threads must be >= 1")
    if min(ns.duration, ns.stream_chunks) <= 0 or min(ns.warmup, ns.settle, ns.tasks) < 0:
        parser.error("--duration and --stream-chunks must be > 0; --warmup, --settle and --tasks >= 0")
    loadgen = ns.loadgen if ns.loadgen != "auto" else ("wrk" if shutil.which("wrk") else "httpx")
    if ns.skillwire is None:
        beside = Path(sys.executable).parent / "skillwire"
        ns.skillwire = str(beside) if beside.exists() else "skillwire"
    return Settings(
        targets=targets,
        duration=ns.duration,
        warmup=ns.warmup,
        settle=ns.settle,
        concurrency=concurrency,
        cold_starts=ns.cold_starts,
        stream_chunks=ns.stream_chunks,
        stream_runs=ns.stream_runs,
        stream_timeout=ns.stream_timeout,
        tasks=ns.tasks,
        start_timeout=ns.start_timeout,
        loadgen=loadgen,
        wrk_threads=ns.wrk_threads,
        skillwire=shlex.split(ns.skillwire),
        json=ns.json,
    )


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit, so that `finally` blocks stop the servers."""

    def handler(_signum: int, _frame: object) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    info = machine_info(settings.loadgen)
    runs = len(settings.concurrency) + (settings.warmup > 0)
    estimate = settings.cold_starts + settings.warmup + len(settings.concurrency) * settings.duration
    estimate += runs * settings.settle
    log(f"{len(settings.targets)} target(s), roughly {estimate + settings.stream_runs:.0f} s each")

    results: list[TargetResult] = []
    with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="skillwire-bench-") as tmp:
        for name in settings.targets:
            workdir = Path(tmp) / name
            workdir.mkdir()
            log(f"{name}: starting")
            results.append(measure_target(target_spec(name, settings.skillwire, workdir), settings, workdir))

    print(render_markdown(results, info, settings), end="")
    if settings.json is not None:
        payload: dict[str, Any] = {
            "machine": info,
            "settings": {k: v for k, v in asdict(settings).items() if k != "json"},
            "targets": [asdict(r) for r in results],
        }
        settings.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        log(f"wrote {settings.json}")
    return 1 if all(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
