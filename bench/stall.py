"""The stall benchmark: how much one hostile request costs everyone else, measured as card GET latency.

For each scenario a fresh server is started (``--serve``, by default ``skillwire serve bench/hostile_agent``
on a new SQLite file, with the interpreter given by ``--python``), a prober in its own process GETs the agent
card on a fixed 10 ms schedule over a fresh TCP connection each time (``--probe-keepalive`` reuses one), and
the scenario sends its hostile request. The report gives, per scenario: the card latency while the request
ran (p50, p99, max, failed probes), what the request itself got back, and the server's peak RSS and CPU
seconds over that window (``/proc/PID``). ``quiet`` is the same window with no hostile request.

    python bench/stall.py                                   # every scenario, 3 runs each, median reported
    python bench/stall.py --only regex,header --repeat 5
    python bench/stall.py --python /work/other/.venv/bin/python --json /tmp/stall.json
    python bench/stall.py --quick                           # small sizes, one run: a smoke run

The hostile clients speak raw HTTP/1.1 over sockets (headers trickled a byte a second, 100 MiB header
values, a reader that stops reading): client libraries refuse to send such requests, which is the point.
Latency is corrected for coordinated omission the usual way (HdrHistogram's expected interval): a probe that
took L ms stands for the probes the schedule could not send meanwhile, at L-10, L-20, ... ms. Timings depend
on the machine and its load; compare runs made side by side. bench/README.md lists every scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import multiprocessing
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
AGENT_DIR = BENCH_DIR / "hostile_agent"
HOST = "127.0.0.1"
CARD_PATH = "/.well-known/agent-card.json"
RPC_HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
DEFAULT_SERVE = "skillwire serve {agent} --port {port} --store sqlite:///{tmp}/tasks.db"
MiB = 1024 * 1024

# ------------------------------------------------------------------------------------- the target server


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def serve_argv(template: str, python: str, **values: Any) -> list[str]:
    """The server command: ``template`` with its ``{placeholders}`` filled; a leading ``skillwire`` is the
    script beside ``python`` (or ``python -m skillwire``), so another checkout's venv can be measured."""
    argv = [part.format(agent=AGENT_DIR, python=python, **values) for part in shlex.split(template)]
    if argv and argv[0] == "skillwire":
        script = Path(python).parent / "skillwire"
        argv[:1] = [str(script)] if script.is_file() else [python, "-m", "skillwire"]
    return argv


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def reset_peak_rss(pid: int) -> bool:
    """Restart the kernel's peak-RSS counter (VmHWM) of ``pid`` from its current RSS (Linux >= 4.0)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Server:
    """One server under test: a subprocess in its own session and temporary directory."""

    def __init__(
        self,
        template: str,
        python: str,
        *,
        nofile: int,
        grpc_port: int | None = None,
        workdir: Path | None = None,
    ) -> None:
        self.template = template
        self.python = python
        self.nofile = nofile
        self.port = free_port()
        self.grpc_port = (grpc_port or free_port()) if grpc_port is not None else None
        self.own_dir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="skillwire-bench-"))
        if self.grpc_port is not None and "{grpc_port}" not in template:
            template += " --grpc-port {grpc_port}"
        self.argv = serve_argv(
            template, python, port=self.port, tmp=self.workdir, grpc_port=self.grpc_port or ""
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "server.log"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> float:
        """Spawn the server; returns the monotonic time of the spawn."""
        with self.log_path.open("ab") as out:
            spawned = time.monotonic()
            self.process = subprocess.Popen(
                self.argv, cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        if self.nofile:
            # Set on the child right away rather than inherited: the harness raises its own limit for the
            # sockets it opens, and the server must keep the usual one to show fd exhaustion.
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(self.pid, resource.RLIMIT_NOFILE, (self.nofile, self.nofile))
        return spawned

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Poll the card every 20 ms until it answers 200; returns the monotonic time it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}: {self.log_tail()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                status, _ = http_get(self.port, CARD_PATH, timeout=1.0)
                if status == 200:
                    return time.monotonic()
            time.sleep(0.02)
        raise RuntimeError(f"no agent card within {timeout:g} s: {self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """``kill -9`` the server's whole process group and reap it."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def cleanup(self) -> None:
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def store_bytes(self) -> int:
        """Bytes of the SQLite files (database, WAL, shared memory) in the working directory."""
        return sum(p.stat().st_size for p in self.workdir.glob("*.db*") if p.is_file())


# ------------------------------------------------------------------------------------- plain HTTP calls


def http_get(port: int, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"A2A-Version": "1.0"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def rpc(
    port: int, method: str, params: dict[str, Any], *, timeout: float = 120.0, raw: bytes | None = None
) -> tuple[int, Any, int]:
    """One JSON-RPC call on a fresh connection: (HTTP status, decoded answer or None, answer bytes)."""
    body = raw or json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", "/", body=body, headers=RPC_HEADERS)
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    return response.status, answer, len(data)


def message(text: str, skill: str, *, task_id: str = "", **metadata: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": os.urandom(8).hex(),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skillId": skill, **metadata},
    }
    if task_id:
        msg["taskId"] = task_id
    return msg


def describe(status: int, answer: Any) -> str:
    """HTTP status and what the JSON-RPC answer says: an error code or the task's state."""
    if not isinstance(answer, dict):
        return f"HTTP {status}, not JSON"
    if "error" in answer:
        return f"HTTP {status}, error {answer['error'].get('code')}"
    result = answer.get("result") or {}
    if isinstance(result.get("tasks"), list):
        return f"HTTP {status}, {len(result['tasks'])} tasks"
    state = (result.get("task") or {}).get("status", {}).get("state", "")
    return f"HTTP {status}, {state.removeprefix('TASK_STATE_') or 'result'}"


# ------------------------------------------------------------------------------------------- the prober


def _probe_once(port: int, timeout: float, conn: http.client.HTTPConnection | None) -> str:
    """One card GET; '' when it answered 200, else what went wrong."""
    own = conn is None
    conn = conn or http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", CARD_PATH, headers={"Connection": "close"} if own else {})
        response = conn.getresponse()
        response.read()
        return "" if response.status == 200 else f"HTTP {response.status}"
    finally:
        if own:
            conn.close()


def probe_loop(port: int, interval: float, timeout: float, keepalive: bool, stop: Any, out: Any) -> None:
    """Runs in its own process so that the hostile clients do not slow the probes down: GET the card at
    each tick (skipping ticks missed while a probe was slow), then send the samples (tick, started, done,
    error) back through ``out``."""
    samples: list[tuple[float, float, float, str]] = []
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout) if keepalive else None
    tick = time.monotonic()
    while not stop.is_set():
        started = time.monotonic()
        try:
            error = _probe_once(port, timeout, conn)
        except (OSError, http.client.HTTPException) as exc:
            error = type(exc).__name__
            if conn is not None:
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        done = time.monotonic()
        if not samples:
            out.send("ready")
        samples.append((tick, started, done, error))
        tick += interval * max(1, int((done - tick) / interval) + 1)
        time.sleep(max(0.0, tick - time.monotonic()))
    out.send(samples)
    out.close()


class Prober:
    """The card prober in a child process, started and stopped around one scenario."""

    def __init__(self, port: int, *, interval: float, timeout: float, keepalive: bool) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop_event = ctx.Event()
        self.receiver, sender = ctx.Pipe(duplex=False)
        self.process = ctx.Process(
            target=probe_loop, args=(port, interval, timeout, keepalive, self.stop_event, sender), daemon=True
        )
        self.interval = interval
        self.samples: list[tuple[float, float, float, str]] = []

    def __enter__(self) -> Prober:
        self.process.start()
        if not self.receiver.poll(30) or self.receiver.recv() != "ready":
            raise RuntimeError("the card prober did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        if self.receiver.poll(60):
            self.samples = self.receiver.recv()
        self.process.join(10)

    def stats(self, begin: float, end: float) -> dict[str, Any]:
        """Card latency (ms) over the probes whose tick fell in [begin, end]."""
        window = [s for s in self.samples if begin <= s[0] <= end]
        latencies: list[float] = []
        for _tick, started, done, error in window:
            if error:
                continue
            took = done - started
            latencies.append(took)
            extra = took - self.interval
            while extra > 0:  # the probes the schedule could not send while this one was waiting
                latencies.append(extra)
                extra -= self.interval
        latencies.sort()
        failed = sum(1 for s in window if s[3])
        errors = sorted({s[3] for s in window if s[3]})

        def ms(q: float) -> float | None:
            if not latencies:
                return None
            return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 1)

        return {
            "probes": len(window),
            "failed": failed,
            "errors": errors,
            "p50_ms": ms(0.50),
            "p99_ms": ms(0.99),
            "max_ms": round(latencies[-1] * 1000, 1) if latencies else None,
        }


# ------------------------------------------------------------------------------------------- scenarios


Sizes = dict[str, float]

#: name: (full run, --quick run, what it is)
SIZES: dict[str, tuple[float, float, str]] = {
    "quiet_seconds": (3, 1, "length of the quiet window"),
    "min_window": (1.0, 0.5, "seconds each window lasts at least, however fast the request"),
    "regex_length": (25, 20, "characters sent to the regex skill ('a' * (n-1) + '!')"),
    "header_mib": (100, 4, "size of the one header value"),
    "trickle_sockets": (500, 40, "sockets trickling headers"),
    "trickle_seconds": (15, 2, "how long they trickle, one byte per second each"),
    "idle_sockets": (1100, 60, "sockets that connect and send nothing"),
    "idle_seconds": (8, 2, "how long they stay"),
    "tiny_mib": (10, 1, "size of the tiny-arrays body"),
    "list_tasks": (100, 4, "tasks created before the ListTasks call"),
    "list_artifact_bytes": (3_500_000, 100_000, "size of each task's artifact"),
    "sse_chunks": (55, 4, "chunks of the slow-read stream"),
    "sse_chunk_bytes": (MiB, 256 * 1024, "bytes per chunk"),
    "grpc_mib": (6, 6, "size of the gRPC SendMessage text"),
}


@dataclass
class Window:
    """The measured interval of one scenario, and what the server spent in it."""

    server: Server
    min_seconds: float
    begin: float = 0.0
    end: float = 0.0
    cpu_s: float = 0.0
    rss_before_mib: float = 0.0
    rss_peak_mib: float = 0.0
    rss_after_mib: float = 0.0
    peak_note: str = ""

    @contextlib.asynccontextmanager
    async def measure(self) -> AsyncIterator[Window]:
        pid = self.server.pid
        if not reset_peak_rss(pid):
            self.peak_note = "peak since the server started (clear_refs not writable)"
        self.rss_before_mib = status_kib(pid, "VmRSS") / 1024
        cpu0 = cpu_seconds(pid)
        self.begin = time.monotonic()
        try:
            yield self
        finally:
            left = self.begin + self.min_seconds - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
            self.end = time.monotonic()
            with contextlib.suppress(OSError, IndexError, ValueError):
                self.cpu_s = cpu_seconds(pid) - cpu0
                self.rss_peak_mib = status_kib(pid, "VmHWM") / 1024
                self.rss_after_mib = status_kib(pid, "VmRSS") / 1024


@dataclass
class Run:
    """What one scenario needs: the server, the sizes, and the window to measure in."""

    server: Server
    sizes: Sizes
    window: Window
    outcome: dict[str, Any] = field(default_factory=dict)


ScenarioFn = Callable[[Run], Coroutine[Any, Any, None]]


async def quiet(run: Run) -> None:
    async with run.window.measure():
        await asyncio.sleep(run.sizes["quiet_seconds"])
    run.outcome["summary"] = "no hostile request"


async def _timed_rpc(run: Run, method: str, params: dict[str, Any], raw: bytes | None = None) -> None:
    async with run.window.measure():
        started = time.monotonic()
        try:
            status, answer, size = await asyncio.to_thread(rpc, run.server.port, method, params, raw=raw)
            big = f", {size / MiB:.1f} MiB answer" if size >= 64 * 1024 else ""
            run.outcome["summary"] = describe(status, answer) + big
            run.outcome["response_bytes"] = size
        except (OSError, http.client.HTTPException) as exc:
            run.outcome["summary"] = f"no answer: {type(exc).__name__}"
        run.outcome["request_s"] = round(time.monotonic() - started, 3)


async def regex(run: Run) -> None:
    text = "a" * (int(run.sizes["regex_length"]) - 1) + "!"
    await _timed_rpc(run, "SendMessage", {"message": message(text, "regex")})


async def fanout(run: Run) -> None:
    await _timed_rpc(run, "SendMessage", {"message": message("toolong", "fanout")})


async def tiny_arrays(run: Run) -> None:
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    head = json.dumps({**envelope, "params": {"message": message("hi", "echo", pad=[])}}).encode()
    cut = head.rindex(b"[]") + 1  # inside the empty `pad` array
    room = int(run.sizes["tiny_mib"] * MiB) - len(head) - 1
    body = head[:cut] + b"[]" + b",[]" * (room // 3) + head[cut:]
    run.outcome["body_bytes"] = len(body)
    await _timed_rpc(run, "SendMessage", {}, raw=body)


def _send_huge_header(port: int, size: int, timeout: float) -> dict[str, Any]:
    """GET the card with one header value of ``size`` bytes, sent as fast as the socket takes it."""
    result: dict[str, Any] = {"sent_bytes": 0}
    started = time.monotonic()
    chunk = memoryview(b"a" * MiB)
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        try:
            sock.sendall(f"GET {CARD_PATH} HTTP/1.1\r\nHost: {HOST}\r\nX-Big: ".encode())
            left = size
            while left > 0:
                sent = sock.send(chunk[: min(left, len(chunk))])
                left -= sent
                result["sent_bytes"] += sent
            sock.sendall(b"\r\nConnection: close\r\n\r\n")
            result["upload_s"] = round(time.monotonic() - started, 3)
        except OSError as exc:
            result["send_error"] = type(exc).__name__
        try:
            answer = sock.recv(256)
            status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
            result["summary"] = status or "closed without an answer"
        except OSError as exc:
            result["summary"] = f"no answer: {type(exc).__name__}"
    result["request_s"] = round(time.monotonic() - started, 3)
    sent = f"{result['sent_bytes'] / MiB:.0f} MiB sent"
    result["summary"] += f" ({sent}{', then ' + result['send_error'] if 'send_error' in result else ''})"
    return result


async def header(run: Run) -> None:
    async with run.window.measure():
        size = int(run.sizes["header_mib"] * MiB)
        run.outcome.update(await asyncio.to_thread(_send_huge_header, run.server.port, size, 180.0))


async def _open_many(port: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    gate = asyncio.Semaphore(64)  # connect in waves, so that the listen backlog does not drop SYNs

    async def one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        async with gate:
            try:
                return await asyncio.wait_for(asyncio.open_connection(HOST, port), 10)
            except (OSError, TimeoutError):
                return None

    opened = await asyncio.gather(*(one() for _ in range(count)))
    return [c for c in opened if c is not None]


async def _hold(run: Run, count: int, seconds: float, trickle: bytes | None) -> None:
    """Open ``count`` connections, keep them ``seconds`` (trickling ``trickle`` a byte a second each), and
    report how many the server closed or answered meanwhile."""
    async with run.window.measure():
        conns = await _open_many(run.server.port, count)
        closed: dict[int, bytes] = {}

        async def watch(index: int, reader: asyncio.StreamReader) -> None:
            try:
                closed[index] = await reader.read(64)
            except OSError:
                closed[index] = b""

        watchers = [asyncio.create_task(watch(i, r)) for i, (r, _) in enumerate(conns)]
        deadline = time.monotonic() + seconds
        position = 0
        while time.monotonic() < deadline:
            if trickle is not None:
                byte = trickle[position % len(trickle) : position % len(trickle) + 1]
                position += 1
                for i, (_, writer) in enumerate(conns):
                    if i not in closed and not writer.is_closing():
                        writer.write(byte)
            await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        answers = sorted({d.split(b"\r\n", 1)[0].decode(errors="replace") for d in closed.values() if d})
        answered = sum(1 for data in closed.values() if data)
        run.outcome["summary"] = (
            f"{len(conns)}/{count} connected; the server closed {len(closed)}"
            f" ({answered} with an answer{': ' + ', '.join(answers) if answers else ''}) within {seconds:g} s"
        )
        run.outcome.update(connected=len(conns), closed=len(closed), answers=answers)
        for task in watchers:
            task.cancel()
        for _, writer in conns:
            writer.close()


async def trickle(run: Run) -> None:
    request = f"GET {CARD_PATH} HTTP/1.1\r\nHost: {HOST}\r\nX-Slow: {'z' * 200}\r\n\r\n".encode()
    await _hold(run, int(run.sizes["trickle_sockets"]), run.sizes["trickle_seconds"], request)


async def idle(run: Run) -> None:
    await _hold(run, int(run.sizes["idle_sockets"]), run.sizes["idle_seconds"], None)


def _create(port: int, text: str, skill: str) -> None:
    status, answer, _ = rpc(
        port, "SendMessage", {"message": message(text, skill), "configuration": {"historyLength": 0}}
    )
    if status != 200 or not isinstance(answer, dict) or "result" not in answer:
        raise RuntimeError(f"creating a task failed: {describe(status, answer)}")


async def list_artifacts(run: Run) -> None:
    count, size = int(run.sizes["list_tasks"]), int(run.sizes["list_artifact_bytes"])
    for _ in range(count):
        await asyncio.to_thread(_create, run.server.port, f"blob {size}", "blob")
    run.outcome["store_mib"] = round(run.server.store_bytes() / MiB, 1)
    await _timed_rpc(run, "ListTasks", {"includeArtifacts": True, "pageSize": 100})


def _slow_stream(port: int, chunks: int, chunk_bytes: int, limit: float) -> tuple[socket.socket, str]:
    """Start a stream from a client with a tiny receive buffer that reads only its first bytes; returns
    the socket (left unread) and the task id."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(limit)
    sock.connect((HOST, port))
    params = {"message": message(f"{chunks} {chunk_bytes}", "stream")}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params})
    head = f"POST / HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
    sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n{body}".encode())
    seen = b""
    while b'"id":"' not in seen and len(seen) < 65536:
        data = sock.recv(4096)
        if not data:
            break
        seen += data
    found = re.search(rb'"id":"([0-9a-fA-F-]{8,})"', seen)
    return sock, found.group(1).decode() if found else ""


def _drain(sock: socket.socket, limit: float) -> int:
    total = 0
    sock.settimeout(limit)
    with contextlib.suppress(OSError):
        while data := sock.recv(MiB):
            total += len(data)
    return total


def _wait_done(port: int, task_id: str, limit: float) -> str:
    deadline = time.monotonic() + limit
    state = ""
    while time.monotonic() < deadline:
        _, answer, _ = rpc(port, "GetTask", {"id": task_id, "historyLength": 0}, timeout=limit)
        state = ((answer or {}).get("result") or {}).get("status", {}).get("state", "")
        if state in {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}:
            break
        time.sleep(0.1)
    return state.removeprefix("TASK_STATE_") or "unknown"


async def slow_sse(run: Run) -> None:
    chunks, size = int(run.sizes["sse_chunks"]), int(run.sizes["sse_chunk_bytes"])
    async with run.window.measure():
        sock, task_id = await asyncio.to_thread(_slow_stream, run.server.port, chunks, size, 30.0)
        with sock:
            if not task_id:
                run.outcome["summary"] = "no task id in the stream's first bytes"
                return
            state = await asyncio.to_thread(_wait_done, run.server.port, task_id, 120.0)
            await asyncio.sleep(1.0)  # let the server push what it will into its buffers
            rss = status_kib(run.server.pid, "VmRSS") / 1024
            received = await asyncio.to_thread(_drain, sock, 10.0)
    run.outcome["rss_growth_mib"] = round(rss - run.window.rss_before_mib, 1)
    run.outcome["summary"] = (
        f"task {state}; {chunks * size / MiB:.0f} MiB streamed, RSS +{rss - run.window.rss_before_mib:.0f} MiB"
        f" while unread; client then drained {received / MiB:.1f} MiB"
    )


def _grpc_send(port: int, size: int) -> str:
    import grpc  # type: ignore[import-untyped]
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.protobuf import struct_pb2  # type: ignore[import-untyped]

    metadata = struct_pb2.Struct()
    metadata.update({"skillId": "echo"})
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id="grpc-6mb",
            role=a2a_pb2.ROLE_USER,
            parts=[a2a_pb2.Part(text="g" * size)],
            metadata=metadata,
        )
    )
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(f"{HOST}:{port}", options=options) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            reply = stub.SendMessage(request, metadata=(("a2a-version", "1.0"),), timeout=60)
        except grpc.RpcError as exc:
            return f"{exc.code().name}: {(exc.details() or '')[:120]}"
    return f"OK, {reply.ByteSize()} bytes, task {a2a_pb2.TaskState.Name(reply.task.status.state)}"


async def grpc_6mb(run: Run) -> None:
    assert run.server.grpc_port is not None
    async with run.window.measure():
        started = time.monotonic()
        size = int(run.sizes["grpc_mib"] * MiB)
        answer = await asyncio.to_thread(_grpc_send, run.server.grpc_port, size)
        run.outcome["request_s"] = round(time.monotonic() - started, 3)
    _, listed, _ = await asyncio.to_thread(rpc, run.server.port, "ListTasks", {"historyLength": 0})
    tasks = ((listed or {}).get("result") or {}).get("tasks", [])
    stored = ", ".join(t["status"]["state"].removeprefix("TASK_STATE_") for t in tasks) or "none"
    run.outcome["summary"] = f"{answer}; tasks stored: {stored}"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: ScenarioFn
    what: str
    grpc: bool = False

    def describe(self, sizes: Sizes) -> str:
        return self.what.format(**sizes)


SCENARIOS = [
    Scenario("quiet", quiet, "no hostile request, for {quiet_seconds:g} s: the baseline"),
    Scenario("regex", regex, "SendMessage to a skill with pattern ^(a+)+$, {regex_length:g} characters"),
    Scenario("fanout", fanout, "SendMessage to a skill whose schema is a 2**20 anyOf/$ref fan-out"),
    Scenario("header", header, "one GET with a {header_mib:g} MiB header value, sent as fast as possible"),
    Scenario(
        "trickle",
        trickle,
        "{trickle_sockets:g} sockets trickling headers, a byte a second, {trickle_seconds:g} s",
    ),
    Scenario("idle", idle, "{idle_sockets:g} sockets that connect and send nothing, for {idle_seconds:g} s"),
    Scenario("tiny-arrays", tiny_arrays, "a {tiny_mib:g} MiB SendMessage whose metadata is [[],[],...]"),
    Scenario(
        "list-artifacts",
        list_artifacts,
        "one ListTasks with includeArtifacts over {list_tasks:g} tasks of {list_artifact_bytes:,.0f} bytes",
    ),
    Scenario(
        "slow-sse",
        slow_sse,
        "an SSE stream of {sse_chunks:g} x {sse_chunk_bytes:,.0f} bytes to a client that stops reading",
    ),
    Scenario("grpc-6mb", grpc_6mb, "a {grpc_mib:g} MiB gRPC SendMessage to the echo skill", grpc=True),
]


# ------------------------------------------------------------------------------------------- the runner


@dataclass(frozen=True)
class Settings:
    serve: str
    python: str
    nofile: int
    grpc_port: int | None
    repeat: int
    only: list[str]
    sizes: Sizes
    interval: float
    probe_timeout: float
    keepalive: bool
    json: Path | None


async def run_scenario(scenario: Scenario, settings: Settings) -> dict[str, Any]:
    """One scenario on a fresh server and store: the card latency in its window and what it cost."""
    grpc_port = settings.grpc_port if scenario.grpc else None
    server = Server(settings.serve, settings.python, nofile=settings.nofile, grpc_port=grpc_port)
    result: dict[str, Any] = {"scenario": scenario.name}
    try:
        server.start()
        try:
            await asyncio.to_thread(server.wait_ready)
        except RuntimeError as exc:
            return {**result, "outcome": {"summary": f"the server did not start: {exc}"}}
        window = Window(server, settings.sizes["min_window"])
        run = Run(server, settings.sizes, window)
        prober = Prober(
            server.port,
            interval=settings.interval,
            timeout=settings.probe_timeout,
            keepalive=settings.keepalive,
        )
        with prober:
            try:
                await asyncio.wait_for(scenario.run(run), 900)
            except Exception as exc:
                run.outcome["summary"] = f"the scenario failed: {type(exc).__name__}: {exc}"
        result["card"] = prober.stats(window.begin, window.end or time.monotonic())
        result.update(
            outcome=run.outcome,
            window_s=round(window.end - window.begin, 3),
            cpu_s=round(window.cpu_s, 2),
            rss_before_mib=round(window.rss_before_mib, 1),
            rss_peak_mib=round(window.rss_peak_mib, 1),
            rss_after_mib=round(window.rss_after_mib, 1),
            peak_note=window.peak_note,
        )
        assert server.process is not None
        if server.process.poll() is not None:
            result["outcome"]["summary"] += f"; the server died (exit {server.process.returncode})"
    finally:
        server.cleanup()
    return result


def _median(values: Sequence[Any]) -> Any:
    numbers = [v for v in values if isinstance(v, int | float)]
    if not numbers:
        return None
    middle = statistics.median(numbers)
    return round(middle, 3 if abs(middle) < 10 else 1)


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over the runs of one scenario (and every distinct outcome)."""
    cards = [r.get("card", {}) for r in runs]
    outcomes = list(dict.fromkeys(r.get("outcome", {}).get("summary", "?") for r in runs))
    return {
        "scenario": name,
        "runs": len(runs),
        **{key: _median([c.get(key) for c in cards]) for key in ("p50_ms", "p99_ms", "max_ms")},
        "failed": _median([c.get("failed") for c in cards]),
        "probes": _median([c.get("probes") for c in cards]),
        "errors": sorted({e for c in cards for e in c.get("errors", [])}),
        "cpu_s": _median([r.get("cpu_s") for r in runs]),
        "rss_before_mib": _median([r.get("rss_before_mib") for r in runs]),
        "rss_peak_mib": _median([r.get("rss_peak_mib") for r in runs]),
        "request_s": _median([r.get("outcome", {}).get("request_s") for r in runs]),
        "outcome": " / ".join(outcomes),
    }


def report(settings: Settings, rows: list[dict[str, Any]], argv: list[str], load: str) -> str:
    lines = [
        "# Stall benchmark: agent card GET latency while one hostile request runs",
        "",
        f"- server: `{' '.join(argv)}` (a fresh server and store per run; RLIMIT_NOFILE "
        f"{settings.nofile or 'inherited'})",
        f"- prober: GET {CARD_PATH} every {settings.interval * 1000:g} ms on "
        + ("one kept-alive connection" if settings.keepalive else "a fresh connection each")
        + f", {settings.probe_timeout:g} s timeout, latency corrected for coordinated omission",
        f"- each figure is the median of {settings.repeat} run(s); the machine is shared, so expect noise",
        load,
        "",
        "| scenario | card p50 ms | card p99 ms | card max ms | failed / probes | request s "
        "| server CPU s | RSS before → peak MiB | the hostile request got |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        errors = f" ({', '.join(row['errors'])})" if row["errors"] else ""
        lines.append(
            f"| {row['scenario']} | {_cell(row['p50_ms'])} | {_cell(row['p99_ms'])} | {_cell(row['max_ms'])} "
            f"| {_cell(row['failed'])} / {_cell(row['probes'])}{errors} | {_cell(row['request_s'])} "
            f"| {_cell(row['cpu_s'])} | {_cell(row['rss_before_mib'])} → {_cell(row['rss_peak_mib'])} "
            f"| {row['outcome']} |"
        )
    lines.append("")
    lines += [
        f"- {s.name}: {s.describe(settings.sizes)}"
        for s in SCENARIOS
        if s.name in {r["scenario"] for r in rows}
    ]
    return "\n".join(lines)


def raise_own_fd_limit() -> None:
    """The harness holds over a thousand sockets at once (the idle scenario)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


async def run_all(settings: Settings) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    raw: dict[str, list[dict[str, Any]]] = {}
    for scenario in SCENARIOS:
        if settings.only and scenario.name not in settings.only:
            continue
        if scenario.grpc and settings.grpc_port is None:
            log(f"{scenario.name}: skipped (no --grpc-port)")
            continue
        runs = []
        for i in range(settings.repeat):
            log(f"{scenario.name}: run {i + 1}/{settings.repeat}: {scenario.describe(settings.sizes)}")
            runs.append(await run_scenario(scenario, settings))
            log(f"{scenario.name}: {json.dumps(runs[-1])}")
        raw[scenario.name] = runs
        rows.append(summarize(scenario.name, runs))
    if settings.json is not None:
        settings.json.write_text(json.dumps({"summary": rows, "runs": raw}, indent=2))
    return rows


def sizes_help(sizes: dict[str, tuple[float, float, str]]) -> str:
    rows = [
        f"  {name:<20} {full:>10.10g} {quick:>8.10g}  {what}" for name, (full, quick, what) in sizes.items()
    ]
    return "sizes (--set NAME=VALUE):\n  NAME                       full    quick\n" + "\n".join(rows)


def parse_sizes(overrides: Sequence[str], quick: bool, table: dict[str, Any] | None = None) -> Sizes:
    """The sizes of ``table`` (this tool's by default), full or quick, with ``--set NAME=VALUE`` applied."""
    table = SIZES if table is None else table
    values = {name: quick_value if quick else full for name, (full, quick_value, _) in table.items()}
    for item in overrides:
        name, _, raw = item.partition("=")
        if name not in table or not raw:
            raise SystemExit(f"--set wants NAME=VALUE with NAME one of: {', '.join(table)}")
        values[name] = float(raw)
    return values


def server_parser(doc: str | None, table: dict[str, Any], default_serve: str) -> argparse.ArgumentParser:
    """The options every bench tool that serves a target has: the server, its interpreter and file limit,
    sizes (``--quick``, ``--set``) and ``--json``."""
    parser = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0],
        epilog=sizes_help(table),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--serve", default=default_serve, help="server command; {port} {tmp} {agent} {python}"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter (venv) of the server")
    parser.add_argument("--server-nofile", type=int, default=1024, help="server's RLIMIT_NOFILE (0: inherit)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a size")
    parser.add_argument("--json", type=Path, default=None, help="also write every raw figure as JSON")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, argparse.Namespace]:
    parser = server_parser(__doc__, SIZES, DEFAULT_SERVE)
    parser.add_argument(
        "--grpc-port",
        type=int,
        nargs="?",
        const=0,
        default=None,
        help="also serve gRPC (on this port; none or 0: a free one) and run grpc-6mb",
    )
    parser.add_argument(
        "--only", default="", help="comma-separated scenarios: " + ",".join(s.name for s in SCENARIOS)
    )
    parser.add_argument("--repeat", type=int, default=None, help="runs per scenario (default 3, --quick 1)")
    parser.add_argument("--quick", action="store_true", help="small sizes and one run: a smoke run")
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--probe-timeout", type=float, default=2.0)
    parser.add_argument("--probe-keepalive", action="store_true", help="probe over one kept-alive connection")
    args = parser.parse_args(argv)
    only = [n for n in args.only.split(",") if n]
    unknown = set(only) - {s.name for s in SCENARIOS}
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    settings = Settings(
        serve=args.serve,
        python=args.python,
        nofile=args.server_nofile,
        grpc_port=args.grpc_port,
        repeat=args.repeat or (1 if args.quick else 3),
        only=only,
        sizes=parse_sizes(args.set, args.quick),
        interval=args.interval_ms / 1000,
        probe_timeout=args.probe_timeout,
        keepalive=args.probe_keepalive,
        json=args.json,
    )
    return settings, args


def load_note(before: tuple[float, float, float]) -> str:
    """The machine's load around the run: other work on the cores shows in every figure."""
    after = os.getloadavg()
    return f"- load average (1 min) at the start {before[0]:.1f}, at the end {after[0]:.1f}, on {os.cpu_count()} CPUs"


def main(argv: Sequence[str] | None = None) -> int:
    settings, _ = parse_args(argv)
    raise_own_fd_limit()
    load = os.getloadavg()
    rows = asyncio.run(run_all(settings))
    shown = serve_argv(settings.serve, settings.python, port="{port}", tmp="{tmp}", grpc_port="{grpc_port}")
    print(report(settings, rows, shown, load_note(load)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
