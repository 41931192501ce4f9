"""Soak the default SQLite store with SendMessage at full speed, retention on and off, in one run (issue 32).

Two measurements, each against ``skillwire serve examples/echo`` on its own SQLite file:

1. **Soak**: wrk (32 connections, one thread) sends blocking SendMessage for ``--minutes`` with
   ``--task-retention`` (default 60 s), then for as long with ``--task-retention none``. Every
   ``--sample`` seconds the store's file, its WAL and the server's RSS are sampled; wrk runs in segments of
   ``--segment`` seconds, each giving its throughput, p99 and worst latency.
2. **Prune of a large store** (``--backlog N``, 0 to skip): N finished tasks, older than the retention, are
   written straight into a new file, then the server starts on it with retention on while wrk loads it; the
   pruner removes the backlog in the background. The segments that ran while it pruned are compared with
   those after: what pruning adds to p99 and to the worst request.

Prints a markdown report on stdout (progress on stderr); ``--json PATH`` keeps the raw numbers.

    python bench/retention_soak.py --minutes 5 --retention 60s --backlog 200000 --json /tmp/soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
WRK_SCRIPT = r"""
local counter = 0
local threads = 0
local tag = "soak"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  tag = (args[1] or "soak") .. "-" .. tostring(tid)
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
    'SOAK_RESULT {"requests":%d,"duration_us":%.0f,"p50_us":%.1f,"p99_us":%.1f,"max_us":%.1f,"errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Segment:
    started: float  # seconds since the load began
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    errors: int


@dataclass
class Sample:
    at: float
    db_mb: float
    wal_mb: float
    rss_mb: float
    pruned: int = 0


@dataclass
class Run:
    name: str
    retention: str
    segments: list[Segment] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    #: seconds after the load began when the backlog was pruned (the prune measurement)
    pruned_at: float | None = None

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.segments)

    @property
    def rps(self) -> float:
        seconds = sum(s.requests / s.rps for s in self.segments if s.rps)
        return self.requests / seconds if seconds else 0.0


def _size_mb(path: str) -> float:
    try:
        return os.path.getsize(path) / 1e6
    except OSError:
        return 0.0


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Server:
    def __init__(self, db: str, retention: str, port: int) -> None:
        argv = [
            sys.executable, "-m", "skillwire", "serve", str(ROOT / "examples" / "echo"),
            "--port", str(port), "--store", f"sqlite:///{db}", "--task-retention", retention,
            "--log-level", "warning", "--metrics", "--no-console",
        ]  # fmt: skip
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
        assert self.proc.stderr is not None
        banner = []
        for line in self.proc.stderr:
            banner.append(line)
            if "task store:" in line:
                break
        else:
            raise RuntimeError("the server did not start:\n" + "".join(banner))
        self.banner = "".join(banner)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def pruned(self) -> int:
        try:
            text = httpx.get(f"{self.url}/metrics", timeout=5).text
        except httpx.HTTPError:
            return -1
        found = re.search(r"^skillwire_tasks_pruned_total (\S+)$", text, re.M)
        return int(float(found.group(1))) if found else 0

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wrk_segment(url: str, seconds: int, connections: int, tag: str) -> Segment | None:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    argv = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        script.name,
        url,
        "--",
        tag,
    ]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    finally:
        Path(script.name).unlink()
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SOAK_RESULT ")), None)
    if line is None:
        log(f"wrk gave no result: {out.stdout[-300:]} {out.stderr[-300:]}")
        return None
    data = json.loads(line.removeprefix("SOAK_RESULT "))
    elapsed = data["duration_us"] / 1e6
    return Segment(
        0.0, data["requests"], data["requests"] / elapsed, data["p50_us"] / 1000, data["p99_us"] / 1000,
        data["max_us"] / 1000, data["errors"],
    )  # fmt: skip


def load(
    server: Server, db: str, run: Run, seconds: float, segment: int, every: float, connections: int
) -> None:
    """wrk in segments for ``seconds`` while a thread samples the file, the WAL, RSS and the pruned count."""
    began = time.monotonic()
    stop = threading.Event()
    backlog = run.pruned_at  # set by the caller to the backlog size for the prune measurement
    run.pruned_at = None

    def sample() -> None:
        while True:
            at = time.monotonic() - began
            pruned = server.pruned()
            run.samples.append(
                Sample(at, _size_mb(db), _size_mb(db + "-wal"), _rss_mb(server.proc.pid), pruned)
            )
            if backlog is not None and run.pruned_at is None and pruned >= backlog:
                run.pruned_at = at
                log(f"{run.name}: backlog of {int(backlog)} pruned after {at:.1f} s")
            if stop.wait(every):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    while (elapsed := time.monotonic() - began) < seconds - 0.5:
        length = max(1, min(segment, round(seconds - elapsed)))
        found = wrk_segment(server.url, length, connections, f"{run.name}-{uuid.uuid4().hex[:6]}")
        if found is not None:
            found.started = elapsed
            run.segments.append(found)
            log(f"{run.name}: t={elapsed:5.0f} s {found.rps:7.0f} req/s p99 {found.p99_ms:6.1f} ms max {found.max_ms:7.1f} ms"
                f" db {_size_mb(db):7.1f} MB wal {_size_mb(db + '-wal'):6.1f} MB")  # fmt: skip
    stop.set()
    sampler.join()


async def write_backlog(db: str, count: int, age: float) -> None:
    """``count`` completed tasks, echo-sized, last changed ``age`` seconds ago, written straight to ``db``."""
    sys.path.insert(0, str(ROOT / "src"))
    from skillwire.protocol.models import Artifact, Message, Part, Role, Task, TaskStatus
    from skillwire.protocol.states import TaskState
    from skillwire.stores import SQLiteTaskStore
    from skillwire.stores.base import write_task

    store = SQLiteTaskStore(db)
    await store.open()
    at = datetime.now(UTC) - timedelta(seconds=age)
    try:
        for first in range(0, count, 2000):
            writes = []
            for i in range(first, min(first + 2000, count)):
                tid, ctx = str(uuid.uuid4()), str(uuid.uuid4())
                msg = Message(
                    message_id=f"m{i}",
                    context_id=ctx,
                    task_id=tid,
                    role=Role.USER,
                    parts=[Part(text="hello")],
                )
                task = Task(
                    id=tid, context_id=ctx, status=TaskStatus(state=TaskState.COMPLETED, timestamp=at),
                    history=[msg], artifacts=[Artifact(artifact_id="a", parts=[Part(text="Echo: hello")])],
                )  # fmt: skip
                writes.append(write_task(task, version=2))
            await asyncio.gather(*(store.commit(w) for w in writes))
            if first % 50_000 == 0:
                log(f"backlog: {first + len(writes)} of {count} written")
    finally:
        await store.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def soak(ns: argparse.Namespace, folder: Path) -> list[Run]:
    runs = []
    for name, retention in (("retention on", ns.retention), ("retention off", "none")):
        db = str(folder / f"{name.replace(' ', '-')}.db")
        server = Server(db, retention, free_port())
        log(f"{name}: serving on {server.url} ({db})")
        run = Run(name, retention)
        try:
            load(server, db, run, ns.minutes * 60, ns.segment, ns.sample, ns.connections)
        finally:
            server.stop()
        runs.append(run)
    return runs


def prune_backlog(ns: argparse.Namespace, folder: Path) -> Run:
    db = str(folder / "backlog.db")
    log(f"backlog: writing {ns.backlog} finished tasks to {db}")
    asyncio.run(write_backlog(db, ns.backlog, age=3600))
    log(
        f"backlog: {_size_mb(db):.0f} MB, WAL {_size_mb(db + '-wal'):.0f} MB; serving with retention {ns.retention}"
    )
    server = Server(db, ns.retention, free_port())
    run = Run("backlog", ns.retention, pruned_at=float(ns.backlog))
    try:
        load(server, db, run, ns.backlog_seconds, ns.backlog_segment, 1.0, ns.connections)
    finally:
        server.stop()
    return run


def _percentile_table(run: Run) -> list[str]:
    done = run.pruned_at
    during = [s for s in run.segments if done is None or s.started + 0.5 < done]
    after = [s for s in run.segments if done is not None and s.started >= done]
    lines = [
        "| segments | requests | req/s | worst p99 (ms) | worst max (ms) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, group in (("while pruning", during), ("after", after)):
        if group:
            seconds = sum(s.requests / s.rps for s in group)
            lines.append(
                f"| {label} ({len(group)}) | {sum(s.requests for s in group)} | {sum(s.requests for s in group) / seconds:.0f}"
                f" | {max(s.p99_ms for s in group):.1f} | {max(s.max_ms for s in group):.1f} |"
            )
    return lines


def report(runs: list[Run], backlog: Run | None, ns: argparse.Namespace) -> str:
    out = _soak_report(runs, ns) if runs else []
    if backlog is not None:
        out += ["", f"## Pruning a backlog of {ns.backlog} finished tasks under load", ""]
        pruned = (
            f"{backlog.pruned_at:.1f} s"
            if backlog.pruned_at is not None
            else f"not within {ns.backlog_seconds} s"
        )
        first = backlog.samples[0] if backlog.samples else None
        last = backlog.samples[-1] if backlog.samples else None
        out.append(
            f"Backlog pruned after {pruned}; db {first.db_mb if first else 0:.0f} MB at start, {last.db_mb if last else 0:.0f} MB at the end."
        )
        out += ["", *_percentile_table(backlog)]
    return "\n".join(out)


def _soak_report(runs: list[Run], ns: argparse.Namespace) -> list[str]:
    out = [
        f"## Retention soak ({ns.minutes:g} min per mode, retention {ns.retention}, wrk -t1 -c{ns.connections})",
        "",
    ]
    out += ["| mode | requests | req/s | p50 (ms, median of segments) | p99 (ms, worst segment) | max (ms) | final db (MB) | final WAL (MB) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for run in runs:
        p50 = sorted(s.p50_ms for s in run.segments)[len(run.segments) // 2] if run.segments else 0
        last = run.samples[-1] if run.samples else Sample(0, 0, 0, 0)
        out.append(
            f"| {run.name} | {run.requests} | {run.rps:.0f} | {p50:.1f} | {max((s.p99_ms for s in run.segments), default=0):.1f}"
            f" | {max((s.max_ms for s in run.segments), default=0):.1f} | {last.db_mb:.1f} | {last.wal_mb:.1f} |"
        )
    out += ["", "Size over time (MB: file + WAL, and the server's RSS):", ""]
    header = "| t (s) | " + " | ".join(f"{r.name}: db | WAL | RSS" for r in runs) + " |"
    out += [header, "| ---: |" + " ---: | ---: | ---: |" * len(runs)]
    step = max(1, round(30 / ns.sample))  # a row every 30 s
    for i in range(0, max(len(r.samples) for r in runs), step):
        cells = []
        for r in runs:
            s = r.samples[i] if i < len(r.samples) else None
            cells.append(f"{s.db_mb:.1f} | {s.wal_mb:.1f} | {s.rss_mb:.0f}" if s else " | | ")
        at = next((r.samples[i].at for r in runs if i < len(r.samples)), 0.0)
        out.append(f"| {at:.0f} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="minutes of load per mode (default 5)")
    parser.add_argument("--retention", default="60s", help="--task-retention of the 'on' mode (default 60s)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--segment", type=int, default=30, help="seconds per wrk segment (default 30)")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between size samples")
    parser.add_argument(
        "--backlog", type=int, default=200_000, help="finished tasks to prune under load (0: skip)"
    )
    parser.add_argument("--backlog-seconds", type=float, default=90.0, help="seconds of load on the backlog")
    parser.add_argument("--backlog-segment", type=int, default=5)
    parser.add_argument("--skip-soak", action="store_true")
    parser.add_argument("--json", help="also write the raw numbers here")
    parser.add_argument("--quick", action="store_true", help="a smoke run: seconds, not minutes")
    ns = parser.parse_args()
    if ns.quick:
        ns.minutes, ns.segment, ns.sample, ns.backlog_segment = 0.1, 3, 1.0, 2
        ns.backlog, ns.backlog_seconds = min(ns.backlog, 3000), 6.0
    with tempfile.TemporaryDirectory(prefix="skillwire-soak-") as tmp:
        folder = Path(tmp)
        runs = [] if ns.skip_soak else soak(ns, folder)
        backlog = prune_backlog(ns, folder) if ns.backlog else None
    print(report(runs, backlog, ns))
    if ns.json:
        Path(ns.json).write_text(
            json.dumps(
                {"runs": [asdict(r) for r in runs], "backlog": asdict(backlog) if backlog else None}, indent=1
            )
        )


if __name__ == "__main__":
    main()
