"""`skillwire serve ... --otel` with a tracer provider of the benchmark's choosing (bench/telemetry.py).

    python bench/telemetry_agent.py api|noop|memory serve examples/echo --otel ...

``api``: the OpenTelemetry API's NoOpTracerProvider (the API alone, no SDK: every span is a no-op);
``noop``: an SDK TracerProvider whose BatchSpanProcessor exports to an exporter that drops every span;
``memory``: the SDK's SimpleSpanProcessor with its InMemorySpanExporter. The provider is made global, so
`--otel` finds it set up and uses it; then the rest of the command line goes to skillwire's CLI as is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Drop(SpanExporter):
    """Takes every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def main() -> int:
    mode, rest = sys.argv[1], sys.argv[2:]
    provider: trace.TracerProvider = TracerProvider()
    if mode == "api":
        provider = trace.NoOpTracerProvider()
    elif mode == "noop":
        provider.add_span_processor(BatchSpanProcessor(Drop()))
    elif mode == "memory":
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    else:
        raise SystemExit(f"{mode!r}: expected api, noop or memory")
    trace.set_tracer_provider(provider)
    from skillwire.cli.main import main as skillwire

    return skillwire(rest)


if __name__ == "__main__":
    sys.exit(main())
