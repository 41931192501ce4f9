"""Tool calls per second over MCP: ``skillwire serve --mcp`` beside the MCP SDK's own server (``MCPServer``,
the FastMCP of mcp 1.x) serving the same echo function (bench/mcp_echo/agent.py), one run.

Each target is started as its own process on a free 127.0.0.1 port (skillwire on the memory store, then on
its default SQLite store, where every call is a stored task; the SDK under uvicorn, one worker, loop and
http on ``auto`` as ``skillwire serve`` has them, no access log). For each concurrency level C the official
MCP client opens C sessions (Streamable HTTP), warms each up, then the C sessions call ``echo`` one call
after the other until ``--calls`` calls are made; the report gives calls per second, the latency of one
call (p50, p99), and the CPU time per call of the server (from /proc) and of the client (this process). The
client runs here and shares the cores with the server: when its CPU per call is near the server's, it is
as much the bottleneck as the server, and the server CPU per call is the figure that compares servers.

    python bench/mcp.py                              # skillwire-memory, skillwire-sqlite, mcp-sdk
    python bench/mcp.py --calls 500 --concurrency 1,4 --json /tmp/mcp.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, this file's folder comes first on sys.path, where this file would hide the mcp package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

TARGETS = ("skillwire-memory", "skillwire-sqlite", "mcp-sdk")
WARMUP_CALLS = 20
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def command(target: str, python: str, port: int, workdir: str) -> list[str]:
    if target.startswith("skillwire"):
        store = "memory://" if target == "skillwire-memory" else f"sqlite:///{workdir}/mcp-bench.db"
        serve = ["serve", str(ROOT / "bench" / "mcp_echo"), "--mcp", "--store", store, "--no-console"]
        return [python, "-m", "skillwire", *serve, "--port", str(port), "--log-level", "warning"]
    return [
        python,
        "-m",
        "uvicorn",
        "--factory",
        "--app-dir",
        str(ROOT / "bench" / "mcp_echo"),
        "agent:mcp_app",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]


def wait_until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode})")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the server did not start listening")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Start:
    """Every session warms up, then all of them start measuring at once."""

    def __init__(self, sessions: int) -> None:
        self.waiting = sessions
        self.all_warm = asyncio.Event()
        self.go = asyncio.Event()

    async def warm(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.all_warm.set()
        await self.go.wait()


async def session_calls(url: str, calls: int, latencies: list[float], start: Start) -> None:
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for _ in range(WARMUP_CALLS):
            await session.call_tool("echo", {"text": "warm"})
        await start.warm()
        for i in range(calls):
            began = time.perf_counter()
            result = await session.call_tool("echo", {"text": f"hello {i}"})
            latencies.append(time.perf_counter() - began)
            if result.is_error:
                raise RuntimeError(f"echo failed: {result.content}")


async def level(url: str, pid: int, calls: int, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    start = Start(concurrency)
    each = max(1, calls // concurrency)
    sessions = [asyncio.create_task(session_calls(url, each, latencies, start)) for _ in range(concurrency)]
    warm = asyncio.create_task(start.all_warm.wait())
    await asyncio.wait([warm, *sessions], return_when=asyncio.FIRST_COMPLETED)
    if not start.all_warm.is_set():  # a session failed before it warmed up: say why
        warm.cancel()
        await asyncio.gather(*sessions)
    cpu_before, client_before = cpu_seconds(pid), time.process_time()
    began = time.perf_counter()
    start.go.set()
    await asyncio.gather(*sessions)
    wall = time.perf_counter() - began
    cpu, client_cpu = cpu_seconds(pid) - cpu_before, time.process_time() - client_before
    ordered = sorted(latencies)
    return {
        "load_average": os.getloadavg()[0],  # the machine's, other processes included
        "concurrency": concurrency,
        "calls": len(latencies),
        "calls_per_s": len(latencies) / wall,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "server_cpu_ms_per_call": cpu / len(latencies) * 1000,
        "client_cpu_ms_per_call": client_cpu / len(latencies) * 1000,
    }


def measure(target: str, python: str, calls: int, levels: Sequence[int]) -> list[dict[str, Any]]:
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.Popen(command(target, python, port, workdir), cwd=workdir)
        try:
            wait_until_listening(port, process)
            url = f"http://127.0.0.1:{port}/mcp"
            return [{"target": target, **asyncio.run(level(url, process.pid, calls, c))} for c in levels]
        finally:
            process.terminate()
            process.wait(30)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| target | concurrency | calls | calls/s | p50 (ms) | p99 (ms) | server CPU per call (ms) |"
        " client CPU per call (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['target']} | {r['concurrency']} | {r['calls']} | {r['calls_per_s']:,.0f} | {r['p50_ms']:.2f}"
            f" | {r['p99_ms']:.2f} | {r['server_cpu_ms_per_call']:.2f} | {r['client_cpu_ms_per_call']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--calls", type=int, default=3000, help="calls per concurrency level")
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 40 calls, concurrency 1 and 2")
    args = parser.parse_args(argv)
    calls = 40 if args.quick else args.calls
    levels = [1, 2] if args.quick else [int(c) for c in args.concurrency.split(",")]
    rows: list[dict[str, Any]] = []
    for target in args.targets.split(","):
        rows.extend(measure(target, args.python, calls, levels))
    print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
