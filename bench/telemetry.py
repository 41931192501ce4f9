"""What tracing and metrics cost: blocking JSON-RPC SendMessage with OpenTelemetry off and on, in one run.

    python bench/telemetry.py [--duration 5] [--concurrency 16,64] [--rounds 2] [--json out.json]

Targets, each a fresh server process on a free 127.0.0.1 port (the echo agent, `examples/echo`, memory store,
push off, log level warning, as `bench/run.py` runs it):

- ``off``: `skillwire serve` without `--otel` (OpenTelemetry is never imported);
- ``metrics``: `--metrics` (Prometheus counters, histograms and gauges per request and run; no tracing);
- ``otel-metrics``: `--otel` with the API's NoOpTracerProvider and an SDK MeterProvider whose reader
  collects every minute (the OpenTelemetry side of the metrics, no spans);
- ``on-api``: `--otel` with the OpenTelemetry API's NoOpTracerProvider (the API without an SDK: what a
  process that installed skillwire[otel]-instrumented code but exports nothing pays);
- ``on-noop``: `--otel` with an SDK tracer provider whose BatchSpanProcessor hands the spans to an exporter
  that drops them (every span is made, recorded, ended and queued; nothing leaves the process);
- ``on-sampled-10``: ``on-noop`` with the sampler ``ParentBased(TraceIdRatioBased(0.1))``: one request in
  ten (with no ``traceparent``) is recorded, the others' spans are made and dropped at once;
- ``on-memory``: `--otel` with the SDK's SimpleSpanProcessor and InMemorySpanExporter (each span exported as
  it ends, kept in memory);
- ``a2a-sdk`` and ``a2a-sdk-traced``: the a2a-sdk 1.3 echo agent (`bench/a2a_sdk_echo.py`) with its
  tracing off (``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, the reference of every skillwire benchmark)
  and on (its default), for the figure the issue quotes.

The skillwire providers are set up by `bench/telemetry_agent.py` before it hands over to skillwire's own
CLI; the tracing targets run with ``OTEL_METRICS_EXPORTER=none`` (their figure is the spans' cost). The targets run in turn, ``--rounds`` times (interleaved, so a drift of the machine spreads over all),
and the best round of each is kept. wrk drives the load when it is installed (apt-get install wrk), else
bench/run.py's httpx load generator. Nothing here is a test: figures go into docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as harness

BENCH = Path(__file__).resolve().parent
MODES = (
    "off", "metrics", "otel-metrics", "on-api", "on-noop", "on-sampled-10", "on-memory", "a2a-sdk",
    "a2a-sdk-traced",
)  # fmt: skip


def spec(mode: str, skillwire: list[str]) -> harness.TargetSpec:
    if mode.startswith("a2a-sdk"):
        base = harness.target_spec("a2a-sdk", skillwire, Path(tempfile.gettempdir()))
        if mode == "a2a-sdk":
            return base
        traced = base.env

        def env(port: int, grpc_port: int | None) -> dict[str, str]:
            return {**traced(port, grpc_port), "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "true"}

        return harness.TargetSpec(mode, argv=base.argv, env=env)
    serve = ["serve", "examples/echo", "--store", "memory://", "--no-push", "--log-level", "warning"]
    if mode == "off":
        return harness.TargetSpec(mode, argv=lambda port, _g: [*skillwire, *serve, *harness._listen(port)])
    if mode == "metrics":
        return harness.TargetSpec(
            mode, argv=lambda port, _g: [*skillwire, *serve, "--metrics", *harness._listen(port)]
        )
    launcher = [sys.executable, str(BENCH / "telemetry_agent.py"), mode.removeprefix("on-")]
    quiet = {} if mode == "otel-metrics" else {"OTEL_METRICS_EXPORTER": "none"}
    return harness.TargetSpec(
        mode,
        argv=lambda port, _g: [*launcher, *serve, "--otel", *harness._listen(port)],
        env=lambda _port, _grpc: quiet,
    )


def measure(mode: str, skillwire: list[str], args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    server = harness.Server(spec(mode, skillwire), logs)
    try:
        server.wait_ready(30)
        url = server.base_url + "/"
        harness.check_echo(url)
        level = lambda c, s: (  # noqa: E731
            harness.run_wrk(url, c, s, 2, f"t{c}")
            if args.loadgen == "wrk"
            else harness.asyncio.run(harness.run_httpx(url, c, s, f"t{c}", harness._rpc_send_body))
        )
        level(max(args.concurrency), args.warmup)
        rows = {}
        for c in args.concurrency:
            cpu = server.cpu_s()
            result = level(c, args.duration)
            used = server.cpu_s() - cpu
            rows[c] = {
                "rps": result.rps,
                "p50_ms": result.p50_ms,
                "p99_ms": result.p99_ms,
                "errors": result.errors,
                "cpu_us_per_req": used / max(1, result.requests) * 1e6,
            }
        rows_out: dict[str, Any] = {"levels": rows, "rss_mib": server.rss_mib()}
        return rows_out
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json")
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.loadgen = "wrk" if shutil.which("wrk") else "httpx"
    modes = args.modes.split(",")
    skillwire = harness.skillwire_command(None)
    best: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for mode in modes:
                harness.log(f"round {round_ + 1}: {mode}")
                got = measure(mode, skillwire, args, Path(tmp))
                top = max(args.concurrency)
                if mode not in best or got["levels"][top]["rps"] > best[mode]["levels"][top]["rps"]:
                    best[mode] = got
    off = best.get("off")
    header = "| target | " + " | ".join(
        f"c={c} req/s | c={c} p50/p99 ms | c={c} µs CPU/req" for c in args.concurrency
    )
    print(header + f" | vs off (c={max(args.concurrency)}) |")
    print("|---|" + "---:|---:|---:|" * len(args.concurrency) + "---:|")
    for mode in modes:
        levels = best[mode]["levels"]
        cells = []
        for c in args.concurrency:
            row = levels[c]
            cells.append(
                f"{row['rps']:,.0f} | {row['p50_ms']:.2f} / {row['p99_ms']:.2f} | {row['cpu_us_per_req']:.0f}"
            )
        top = max(args.concurrency)
        ratio = levels[top]["rps"] / off["levels"][top]["rps"] if off else float("nan")
        print(f"| {mode} | " + " | ".join(cells) + f" | {ratio:.3f}x |")
    print(f"\nload generator: {args.loadgen}; best of {args.rounds} rounds; {args.duration:g} s per level")
    if args.json:
        Path(args.json).write_text(json.dumps({"loadgen": args.loadgen, "best": best}, indent=2) + "\n")


if __name__ == "__main__":
    main()
