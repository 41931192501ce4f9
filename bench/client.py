"""Benchmark the calling side: skillwire's Client against the official a2a-sdk client, in one run.

Both clients call the same server (``skillwire serve examples/echo``, memory store, its own process) over the
same binding, one after the other, in alternating rounds so that drift on a shared machine hits both. For
each binding and client it reports:

* blocking SendMessage at concurrency 1 and 16: requests/s, p50 latency, and the **client's CPU time per
  request** (``time.process_time`` of this process, which runs only the client: the figure that says what
  the client itself costs, whatever the server does);
* one ``stream N`` request: events/s and client CPU per event.

::

    python bench/client.py                                  # JSON-RPC, REST and gRPC, 3 rounds
    python bench/client.py --bindings jsonrpc --rounds 5 --duration 3 --json /tmp/client.json

The server is the same for both clients, so a difference in requests/s at concurrency 16 mostly shows the
clients' CPU use (client and server share the machine's cores).
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
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BINDINGS = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}
CLIENTS = ("a2a-sdk", "skillwire")


@dataclass
class Figure:
    client: str
    binding: str
    measure: str
    value: float
    cpu_us: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port, grpc_port = free_port(), free_port()
    command = [
        sys.executable, "-m", "skillwire", "serve", str(REPO_ROOT / "examples" / "echo"),
        "--host", HOST, "--port", str(port), "--grpc-port", str(grpc_port), "--store", "memory://",
        "--log-level", "warning",  # no access log on the unread stderr pipe
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/.well-known/agent-card.json", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(
        f"the echo server did not start: {process.stderr.read().decode() if process.stderr else ''}"
    )


# -- the two clients, behind one small interface ----------------------------------------------------------


class Caller:
    """``send(text)`` and ``stream(text) -> events`` for one client library over one binding."""

    async def send(self, text: str) -> None: ...

    async def stream(self, text: str) -> int: ...

    async def close(self) -> None: ...


class SkillwireCaller(Caller):
    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    async def open(cls, url: str, binding: str) -> SkillwireCaller:
        from skillwire import Client

        return cls(await Client.connect(url, bindings=(binding,), timeout=60))

    async def send(self, text: str) -> None:
        task = await self.client.send(text)
        assert task.status.state.name == "COMPLETED", task

    async def stream(self, text: str) -> int:
        return sum([1 async for _ in self.client.stream(text)])

    async def close(self) -> None:
        await self.client.aclose()


class SdkCaller(Caller):
    def __init__(self, blocking: Any, streaming: Any, http: httpx.AsyncClient) -> None:
        self.blocking, self.streaming, self.http = blocking, streaming, http

    @classmethod
    async def open(cls, url: str, binding: str) -> SdkCaller:
        import grpc.aio  # type: ignore[import-untyped]
        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        http = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64))
        card = await A2ACardResolver(http, url).get_agent_card()

        def config(streaming: bool) -> Any:
            return ClientConfig(
                httpx_client=http,
                streaming=streaming,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )

        return cls(ClientFactory(config(False)).create(card), ClientFactory(config(True)).create(card), http)

    @staticmethod
    def _request(text: str) -> Any:
        from a2a.types import a2a_pb2 as pb

        message = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)])
        return pb.SendMessageRequest(message=message)

    async def send(self, text: str) -> None:
        async for response in self.blocking.send_message(self._request(text)):
            assert response.task.status.state == 3, response  # TASK_STATE_COMPLETED

    async def stream(self, text: str) -> int:
        return sum([1 async for _ in self.streaming.send_message(self._request(text))])

    async def close(self) -> None:
        await self.blocking.close()
        await self.streaming.close()
        await self.http.aclose()


OPENERS: dict[str, Callable[[str, str], Awaitable[Caller]]] = {
    "a2a-sdk": SdkCaller.open,
    "skillwire": SkillwireCaller.open,
}


# -- measurements -------------------------------------------------------------------------------------------


async def throughput(caller: Caller, concurrency: int, duration: float) -> tuple[float, float, float]:
    """(requests/s, p50 latency ms, client CPU µs per request) of blocking sends for ``duration`` s."""
    latencies: list[float] = []
    stop = time.perf_counter() + duration

    async def worker() -> None:
        while time.perf_counter() < stop:
            began = time.perf_counter()
            await caller.send("hello")
            latencies.append(time.perf_counter() - began)

    for _ in range(20):  # warm up connections and caches
        await caller.send("hello")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    n = len(latencies)
    return n / wall, statistics.median(latencies) * 1000, cpu / n * 1e6


async def streaming(caller: Caller, events: int) -> tuple[float, float]:
    """(events/s, client CPU µs per event) of one ``stream N`` request."""
    await caller.stream("stream 10")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    got = await caller.stream(f"stream {events}")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if got < events:
        raise RuntimeError(f"the stream ended after {got} of {events} events")
    return got / wall, cpu / got * 1e6


async def round_for(url: str, client: str, binding: str, args: argparse.Namespace) -> list[Figure]:
    caller = await OPENERS[client](url, BINDINGS[binding])
    try:
        figures = []
        for concurrency in (1, 16):
            rate, p50, cpu = await throughput(caller, concurrency, args.duration)
            figures.append(Figure(client, binding, f"send c={concurrency} req/s", rate, cpu))
            figures.append(Figure(client, binding, f"send c={concurrency} p50 ms", p50, cpu))
        rate, cpu = await streaming(caller, args.events)
        figures.append(Figure(client, binding, f"stream {args.events} events/s", rate, cpu))
        return figures
    finally:
        await caller.close()


def report(figures: list[Figure], rounds: int) -> str:
    by_key: dict[tuple[str, str, str], list[Figure]] = {}
    for f in figures:
        by_key.setdefault((f.binding, f.measure, f.client), []).append(f)
    lines = [
        f"Median of {rounds} alternating rounds; CPU is this process's (the client's) time per request or event.",
        "",
        "| binding | measure | a2a-sdk | skillwire | ratio | client CPU a2a-sdk | client CPU skillwire |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    seen: list[tuple[str, str]] = []
    for binding, measure, _ in by_key:
        if (binding, measure) not in seen:
            seen.append((binding, measure))
    for binding, measure in seen:
        sdk = by_key.get((binding, measure, "a2a-sdk"), [])
        ours = by_key.get((binding, measure, "skillwire"), [])
        if not sdk or not ours:
            continue
        a, b = statistics.median(f.value for f in sdk), statistics.median(f.value for f in ours)
        ca, cb = statistics.median(f.cpu_us for f in sdk), statistics.median(f.cpu_us for f in ours)
        ratio = a / b if measure.endswith("ms") else b / a
        lines.append(
            f"| {binding} | {measure} | {a:,.1f} | {b:,.1f} | {ratio:.1f}x | {ca:,.0f} µs | {cb:,.0f} µs |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[Figure]:
    process, url = start_server()
    figures: list[Figure] = []
    try:
        for index in range(args.rounds):
            order = CLIENTS if index % 2 == 0 else CLIENTS[::-1]
            for binding in args.bindings:
                for client in order:
                    print(f"round {index + 1}: {client} over {binding}", file=sys.stderr, flush=True)
                    figures.extend(await round_for(url, client, binding, args))
    finally:
        process.terminate()
        process.wait(timeout=15)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bindings", default="jsonrpc,rest,grpc", help="comma-separated: jsonrpc,rest,grpc")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per throughput measure")
    parser.add_argument("--events", type=int, default=1000, help="events in the stream measure")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = parser.parse_args()
    args.bindings = [b for b in args.bindings.split(",") if b]
    for binding in args.bindings:
        if binding not in BINDINGS:
            parser.error(f"unknown binding {binding!r}")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    figures = asyncio.run(main_async(args))
    print(report(figures, args.rounds))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(f) for f in figures], indent=2))


if __name__ == "__main__":
    main()
