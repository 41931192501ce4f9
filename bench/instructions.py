"""Instructions per SendMessage, counted by callgrind: the in-process cost of a set-up, repeatable on a noisy VM.

    python bench/instructions.py [--modes off,metrics,sampled-10] [--store memory://] [--requests 1000]

Wall-clock figures on a shared VM move by 10-20% between runs (docs/performance.md says so for every
table); ``valgrind --tool=callgrind`` counts the instructions the process executes, which moves by a few
tenths of a percent from run to run, whatever else the machine is doing. Each set-up serves
``examples/echo`` (push off, no console) through its ASGI app in process, as bench/telemetry_inprocess.py
does (its modes: ``off``, ``metrics``, ``api``, ``sdk``, ``batch``, ``sampled-10``; and ``never``, the SDK
with ``ParentBased(ALWAYS_OFF)``). A child process serves 300 requests to warm up, then ``N`` more, and
exits; it runs twice, with ``N = 200`` and ``N = 200 + requests``, so start-up and warm-up cancel out of
the difference, which is divided by ``requests``. Instructions are not time (cache misses, branch
mispredictions and system calls weigh differently), so read them beside the timed benchmarks, not instead.

``--stream`` counts a streamed chunk instead: four ``stream 1000`` against four ``stream 4000``
(SendStreamingMessage, every event framed as SSE), the difference divided by 12,000.

    python bench/instructions.py --stream --store memory://

``--load C`` counts a SendMessage as served under load instead: ``skillwire serve examples/echo`` (uvicorn,
uvloop, httptools: the whole server) runs under callgrind, wrk keeps ``C`` requests in flight, and the
counters are zeroed after a warm-up and read after the measured run (``callgrind_control``), divided by the
requests wrk saw answered. Concurrency changes the count: requests in flight share loop turns, batches and
store commits, which one request at a time never shows. Under valgrind the server is some 50 times slower,
so wrk always finds it busy; read the figure as "instructions a request, the server saturated".

    python bench/instructions.py --load 16 --store memory://

Needs valgrind (Debian's package; wrk too for ``--load``). Nothing here is a test: figures go into
docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # telemetry_inprocess, beside this file
TRACING = ("api", "sdk", "batch", "sampled-10", "never")
WARM_UP = 300
STREAMS = 4  # streams of N chunks in a ``--stream`` count
BASE = 200


def _providers(mode: str) -> None:
    import telemetry_inprocess

    if mode != "never":
        telemetry_inprocess._providers(mode)
        return
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    trace.set_tracer_provider(TracerProvider(sampler=ParentBased(ALWAYS_OFF)))
    metrics.set_meter_provider(metrics.NoOpMeterProvider())


async def _serve(mode: str, store: str, requests: int) -> None:
    import telemetry_inprocess

    one, _ = await telemetry_inprocess.serving(mode, store)
    for _ in range(WARM_UP + requests):
        await one()
    os._exit(0)  # no shutdown: the same for every N, so nothing of it is left in the difference


async def _stream(mode: str, store: str, chunks: int) -> None:
    import telemetry_inprocess

    streamed = await telemetry_inprocess.serving(mode, store, f"stream {chunks}", "SendStreamingMessage")
    for _ in range(STREAMS):  # the first ones warm the path up; the difference cancels start-up either way
        body = await streamed.one()
        assert body.count(b"data:") >= chunks, body[-300:]
    os._exit(0)


def _count(mode: str, store: str, requests: int, stream: bool = False) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        store = store.replace("{tmp}", scratch)
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
             "--child", mode, "--store", store, "--requests", str(requests), *(["--stream"] if stream else [])],
            capture_output=True, text=True, cwd=ROOT,
            env={**os.environ, "OTEL_METRICS_EXPORTER": "none", "OTEL_TRACES_EXPORTER": "none"},
        )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"{mode}: callgrind failed\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _under_load(store: str, concurrency: int, seconds: float) -> int:
    """Instructions a SendMessage of ``skillwire serve`` under callgrind at ``concurrency`` (see --load)."""
    from run import SERVER_CPUS, WRK_SCRIPT, Server, TargetSpec, run_wrk

    if shutil.which("wrk") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--load needs wrk and valgrind: apt-get install -y wrk valgrind")
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        url = store.replace("{tmp}", scratch)
        spec = TargetSpec(
            "callgrind",
            argv=lambda port, _grpc: [
                "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                sys.executable, "-m", "skillwire", "serve", "examples/echo", "--host", "127.0.0.1",
                "--port", str(port), "--store", url, "--log-level", "warning", "--no-console",
            ],
        )  # fmt: skip
        server = Server(spec, Path(scratch), cpus=SERVER_CPUS)
        try:
            server.wait_ready(300.0)
            pid = str(server.proc.pid)  # valgrind runs the program in its own process
            run_wrk(server.base_url + "/", concurrency, 3, 1, "warm", WRK_SCRIPT)
            subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=True)
            level = run_wrk(server.base_url + "/", concurrency, seconds, 1, "load", WRK_SCRIPT)
            subprocess.run(["callgrind_control", "-d", pid], capture_output=True, check=True)
            dumped = Path(f"{out}.1")
            for _ in range(100):  # the dump is written by the served process, a moment later
                if dumped.exists() and "summary:" in dumped.read_text(errors="replace"):
                    break
                time.sleep(0.1)
            found = re.search(r"^summary:\s+(\d+)", dumped.read_text(errors="replace"), re.M)
        finally:
            server.stop()
    if found is None or not level.requests:
        raise SystemExit("callgrind wrote no summary, or wrk saw no answer")
    return int(found.group(1)) // level.requests


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="off,metrics,api,never,sampled-10,batch")
    parser.add_argument("--store", default="memory://", help="a store URL; {tmp} is a fresh directory")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--stream", action="store_true", help="count a streamed chunk instead")
    parser.add_argument("--load", type=int, default=0, help="count a SendMessage served at this concurrency")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load measured (--load)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.chdir(ROOT)
        if args.child in TRACING:
            _providers(args.child)
        import logging

        logging.disable(logging.WARNING)
        serve = _stream if args.stream else _serve
        asyncio.run(serve(args.child, args.store, args.requests))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind: apt-get install -y valgrind")
    if args.load:
        per_request = _under_load(args.store, args.load, args.duration)
        print(f"| served, c={args.load} ({args.store}) | {per_request:,} instructions a SendMessage |")
        return
    if args.stream:
        for mode in args.modes.split(","):
            more = _count(mode, args.store, 4000, True) - _count(mode, args.store, 1000, True)
            chunk = more // (STREAMS * 3000)
            print(f"| {mode} ({args.store}) | {chunk:,} instructions a streamed chunk |")
        return
    modes = args.modes.split(",")
    per: dict[str, int] = {}
    for mode in modes:
        print(f"{mode}: counting", file=sys.stderr)
        per[mode] = (
            _count(mode, args.store, BASE + args.requests) - _count(mode, args.store, BASE)
        ) // args.requests
    off = per.get("off")
    print(f"| set-up ({args.store}) | instructions per SendMessage | vs off |")
    print("|---|---:|---:|")
    for mode in modes:
        versus = (
            ""
            if off is None or mode == "off"
            else f"+{per[mode] - off:,} (+{(per[mode] / off - 1) * 100:.1f}%)"
        )
        print(f"| {mode} | {per[mode]:,} | {versus} |")


if __name__ == "__main__":
    main()
