"""The push stall benchmark: how long another caller's first delivery waits behind one caller's tarpits.

One caller (mallory) sends K tasks whose webhook is a tarpit (a TCP server on 127.0.0.1 that accepts every
connection, reads, and never answers); then another caller (ada) sends a task whose webhook is a receiver
that answers 204 at once, five times in a row. Reported, for each K: ada's first-delivery delay (from the
send of her request to the receiver reading her first delivery) for her first request, the median and
max of the five, and how many of her push configs were refused. Each K gets a fresh server process.

Targets: ``skillwire`` (``skillwire serve`` of a small agent with two API keys, so the two callers are two
owners; ``--python`` picks the interpreter, so an older checkout can be measured with
``--python /path/to/.venv/bin/python`` or ``--pythonpath /path/to/src``), and ``a2a-sdk`` (``bench/a2a_sdk_echo.py`` with
``BENCH_PUSH=1``: no authentication, so the two callers are two clients; its push sender awaits each POST
inside the request, with one shared ``httpx.AsyncClient``).

    python bench/push_fairness.py                      # K = 0, 40, 100 on both targets
    python bench/push_fairness.py --targets skillwire --tarpits 0,40 --json /tmp/fair.json
    python bench/push_fairness.py --quick                # a smoke run: 0 and 8 tarpit tasks

The delay is wall time on a shared machine: read it as an order of magnitude.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
HOST = "127.0.0.1"
AGENT = """
from skillwire import Agent
from skillwire.security import APIKey, Security

agent = Agent("Fair", "Answers at once", security=Security(APIKey(keys={"mallory": "k-mallory", "ada": "k-ada"})))


@agent.skill(tags=["bench"])
async def echo(params, ctx) -> str:
    \"\"\"Answers at once.\"\"\"
    return "ok"
"""
MALLORY = {"X-API-Key": "k-mallory"}
ADA = {"X-API-Key": "k-ada"}
#: How long ada's first delivery is waited for before it counts as not arrived.
CAP = 40.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Tarpit:
    """Accepts, reads, never answers."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        server = await asyncio.start_server(self._hold, HOST, 0)
        self.url = f"http://{HOST}:{server.sockets[0].getsockname()[1]}/hook"
        self._server = server

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        with contextlib.suppress(Exception):  # its end, when the bench stops, is no news
            while await reader.read(65536):
                pass

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        self._server.close()


class Receiver:
    """Answers 204 to every POST and notes when each body naming a marker arrived."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.url = ""
        self._waiting: set[str] = set()

    async def start(self) -> None:
        server = await asyncio.start_server(self._serve, HOST, 0)
        self.url = f"http://{HOST}:{server.sockets[0].getsockname()[1]}/hook"
        self._server = server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                now = time.perf_counter()
                for marker in list(self._waiting):
                    if marker.encode() in body:
                        self.arrived.setdefault(marker, now)
                        self._waiting.discard(marker)
                writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except Exception:  # the sender went, or the bench stops
            writer.close()

    def expect(self, marker: str) -> None:
        self._waiting.add(marker)

    async def stop(self) -> None:
        self._server.close()


def start_target(
    target: str, python: str, pythonpath: str | None, port: int, workdir: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if target == "skillwire":
        (workdir / "agent.py").write_text(AGENT)
        command = [
            python,
            "-m",
            "skillwire",
            "serve",
            str(workdir / "agent.py"),
            "--port",
            str(port),
            "--store",
            "memory://",
            "--webhook-allow",
            HOST,
            "--webhook-allow-http",
            "--log-level",
            "warning",
        ]
    else:
        env.update(BENCH_PUSH="1", BENCH_HOST=HOST, BENCH_PORT=str(port))
        command = [
            python,
            "-m",
            "uvicorn",
            "a2a_sdk_echo:app",
            "--host",
            HOST,
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--app-dir",
            str(BENCH),
        ]
    proc = subprocess.Popen(
        command, env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://{HOST}:{port}/.well-known/agent-card.json", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{target} did not start")


def send_body(url: str, text: str) -> dict[str, Any]:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skillId": "echo"},
    }
    params = {"message": message, "configuration": {"taskPushNotificationConfig": {"url": url}}}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


async def settled(tarpit: Tarpit, tarpits: int) -> None:
    """Wait until the tarpit has taken what it will (its connection count still for 0.5 s; 10 s at most)."""
    if not tarpits:
        return
    seen, still, deadline = -1, 0.0, time.monotonic() + 10
    while time.monotonic() < deadline and (still < 0.5 or seen == 0):
        await asyncio.sleep(0.05)
        still = still + 0.05 if tarpit.connections == seen else 0.0
        seen = tarpit.connections


async def measure(base: str, tarpits: int, runs: int) -> dict[str, Any]:
    tarpit, receiver = Tarpit(), Receiver()
    await tarpit.start()
    await receiver.start()
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    pending: list[asyncio.Task[Any]] = []
    async with httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None)) as http:
        for n in range(tarpits):  # a2a-sdk answers only once its POSTs end: none waits on another
            body = send_body(tarpit.url, f"tarpit {n}")
            pending.append(asyncio.create_task(http.post(base, json=body, headers={**headers, **MALLORY})))
        await settled(tarpit, tarpits)
        delays: list[float] = []
        refused = 0
        for n in range(runs):
            marker = f"ada-{n}-{uuid.uuid4()}"
            receiver.expect(marker)
            started = time.perf_counter()
            answer = asyncio.create_task(
                http.post(base, json=send_body(receiver.url, marker), headers={**headers, **ADA})
            )
            while marker not in receiver.arrived and time.perf_counter() - started < CAP:
                if answer.done() and "error" in answer.result().json():
                    refused += 1
                    break
                await asyncio.sleep(0.002)
            delays.append(receiver.arrived.get(marker, started + CAP) - started)
            pending.append(answer)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    await tarpit.stop()
    await receiver.stop()
    return {
        "tarpits": tarpits,
        "tarpit_connections": tarpit.connections,
        "first_delivery_ms_first": round(delays[0] * 1000, 1),
        "first_delivery_ms_median": round(statistics.median(delays) * 1000, 1),
        "first_delivery_ms_max": round(max(delays) * 1000, 1),
        "not_arrived": sum(1 for d in delays if d >= CAP),
        "configs_refused": refused,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="skillwire,a2a-sdk")
    parser.add_argument("--tarpits", default="0,40,100")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--pythonpath", default=None, help="PYTHONPATH for the skillwire server (another checkout's src)"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 0 and 8 tarpit tasks, 2 requests")
    args = parser.parse_args(argv)
    if args.quick:
        args.tarpits, args.runs = "0,8", 2
    results = []
    for target in args.targets.split(","):
        for count in (int(k) for k in args.tarpits.split(",")):
            port = free_port()
            with tempfile.TemporaryDirectory() as folder:
                proc = start_target(target, args.python, args.pythonpath, port, Path(folder))
                try:
                    row = asyncio.run(measure(f"http://{HOST}:{port}/", count, args.runs))
                finally:
                    proc.terminate()
                    proc.wait(30)
            row["target"] = target
            results.append(row)
            print(f"[bench] {row}", file=sys.stderr, flush=True)
    print(
        "| target | tarpit tasks | tarpit connections | another caller's first delivery: first request (ms)"
        " | median / max of the requests (ms) | not arrived in 40 s | its configs refused |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['target']} | {r['tarpits']} | {r['tarpit_connections']} | {r['first_delivery_ms_first']:,} |"
            f" {r['first_delivery_ms_median']:,} / {r['first_delivery_ms_max']:,} | {r['not_arrived']} |"
            f" {r['configs_refused']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
