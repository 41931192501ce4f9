"""Where tracing's cost goes: SendMessage through the ASGI app in process, and the SDK's own floor.

    python bench/telemetry_inprocess.py [--requests 20000] [--rounds 3]

No sockets and no HTTP parsing: each request is one ASGI call of `skillwire serve examples/echo`'s app
(memory store, push off), so the figures are the application's own microseconds per request. Each set-up
runs in a fresh process (a provider is process-global), ``--rounds`` times; the median is kept.

- ``off``, ``metrics`` (Prometheus), ``otel-metrics`` (the OpenTelemetry SDK meter, nothing exported);
- ``api``: `--otel` with the API's NoOpTracerProvider (the instrumentation with no SDK);
- ``sdk``: an SDK TracerProvider without any span processor (spans made, recorded and dropped at end);
- ``batch``: the SDK with a BatchSpanProcessor and an exporter that drops what it is given (as
  ``on-noop`` in bench/telemetry.py);
- ``sampled-10``: ``batch`` with one trace in ten sampled (``ParentBased(TraceIdRatioBased(0.1))``, what
  ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` with ``OTEL_TRACES_SAMPLER_ARG=0.1`` gives);
- ``floor``: no server at all: two bare SDK spans (start, end; no attributes, no context), the least any
  instrumentation of a request and its run can pay with the SDK recording.

Nothing here is a test: figures go into docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
MODES = ("off", "metrics", "otel-metrics", "api", "sdk", "batch", "sampled-10", "floor")


def _providers(mode: str) -> None:
    from opentelemetry import metrics, trace

    if mode == "api":
        trace.set_tracer_provider(trace.NoOpTracerProvider())
    elif mode in ("sdk", "batch", "sampled-10"):
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        class Drop(SpanExporter):
            def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        sampled = mode == "sampled-10"
        provider = (
            TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1))) if sampled else TracerProvider()
        )
        if mode in ("batch", "sampled-10"):
            provider.add_span_processor(BatchSpanProcessor(Drop()))
        trace.set_tracer_provider(provider)
    if mode == "otel-metrics":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        trace.set_tracer_provider(trace.NoOpTracerProvider())
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    else:
        metrics.set_meter_provider(metrics.NoOpMeterProvider())


def _floor(requests: int) -> float:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("floor")
    for _ in range(2000):
        tracer.start_span("a").end()
    started = time.perf_counter()
    for _ in range(requests):
        tracer.start_span("request").end()
        tracer.start_span("run").end()
    return (time.perf_counter() - started) / requests * 1e6


class Served(NamedTuple):
    """An app being served in process: ``one()`` sends it a SendMessage and returns the answer's body;
    ``stop()`` runs its lifespan's shutdown."""

    one: Callable[[], Awaitable[bytes]]
    stop: Callable[[], Awaitable[None]]


async def serving(
    mode: str, store: str = "memory://", text: str = "hi", method: str = "SendMessage"
) -> Served:
    """``skillwire serve examples/echo`` (push off, no console) on ``store``, its app started in process, with
    ``mode``'s observability: ``off``, ``metrics`` (Prometheus), any other ``--otel`` (the providers are the
    caller's to set up first). ``one()`` sends ``method`` with ``text`` (``SendStreamingMessage`` and
    ``stream N``: it returns every event's SSE frame)."""
    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse

    argv = ["serve", "examples/echo", "--store", store, "--no-push", "--no-console"]
    argv += {"metrics": ["--metrics"], "off": []}.get(mode, ["--otel"])
    _, app = application(_parse(argv))
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}},
        }
    ).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"a2a-version", b"1.0"),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    never = asyncio.Event()

    async def one() -> bytes:
        sent: list[Any] = []
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Any:
            if pending:
                return pending.pop()
            await never.wait()

        async def send(message: Any) -> None:
            sent.append(message)

        await app(dict(scope), receive, send)
        if method == "SendStreamingMessage":  # every event, not the empty end of the response
            return b"".join(m.get("body", b"") for m in sent)
        return bytes(sent[-1].get("body", b""))

    startup: asyncio.Queue[Any] = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    started_up: asyncio.Queue[Any] = asyncio.Queue()
    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, startup.get, started_up.put)
    )
    assert (await started_up.get())["type"] == "lifespan.startup.complete"

    async def stop() -> None:
        await startup.put({"type": "lifespan.shutdown"})
        await started_up.get()
        await lifespan

    return Served(one, stop)


async def _serve(mode: str, requests: int) -> float:
    one, stop = await serving(mode)
    answer = await one()
    assert b"TASK_STATE_COMPLETED" in answer, answer[:300]
    for _ in range(3000):
        await one()
    started = time.perf_counter()
    for _ in range(requests):
        await one()
    elapsed = (time.perf_counter() - started) / requests * 1e6
    await stop()
    return elapsed


def child(mode: str, requests: int) -> None:
    os.chdir(ROOT)
    if mode == "floor":
        print(json.dumps(_floor(requests)))
        return
    if mode != "off" and mode != "metrics":
        _providers(mode)
    import logging

    logging.disable(logging.WARNING)
    print(json.dumps(asyncio.run(_serve(mode, requests))))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.requests)
        return
    modes = args.modes.split(",")
    figures: dict[str, list[float]] = {mode: [] for mode in modes}
    for round_ in range(args.rounds):
        for mode in modes:
            print(f"round {round_ + 1}: {mode}", file=sys.stderr)
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--requests", str(args.requests)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "OTEL_METRICS_EXPORTER": "none", "OTEL_TRACES_EXPORTER": "none"},
            )
            figures[mode].append(float(out.stdout.strip().splitlines()[-1]))
    off = statistics.median(figures["off"]) if "off" in figures else None
    print("| set-up | µs per request (median) | rounds | vs off |")
    print("|---|---:|---|---:|")
    for mode in modes:
        median = statistics.median(figures[mode])
        rounds = ", ".join(f"{f:.1f}" for f in figures[mode])
        extra = "" if off is None or mode == "floor" else f"+{median - off:.1f}" if mode != "off" else "-"
        print(f"| {mode} | {median:.1f} | {rounds} | {extra} |")


if __name__ == "__main__":
    main()
