"""`skillwire serve ... --otel` with a tracer provider of the benchmark's choosing (bench/telemetry.py).

    python bench/telemetry_agent.py api|noop|sampled-10|memory|otel-metrics serve examples/echo --otel ...

``api``: the OpenTelemetry API's NoOpTracerProvider (the API alone, no SDK: every span is a no-op);
``noop``: an SDK TracerProvider whose BatchSpanProcessor exports to an exporter that drops every span;
``sampled-10``: the same with ``ParentBased(TraceIdRatioBased(0.1))``, one trace in ten recorded;
``memory``: the SDK's SimpleSpanProcessor with its InMemorySpanExporter; ``otel-metrics``: no spans (the
API's NoOpTracerProvider) and an SDK MeterProvider with a reader that collects every minute and drops
what it gets. The providers are made global, so `--otel` finds them set up and uses them; then the rest of
the command line goes to skillwire's CLI as is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased


class Drop(SpanExporter):
    """Takes every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def main() -> int:
    mode, rest = sys.argv[1], sys.argv[2:]
    provider: trace.TracerProvider = TracerProvider()
    if mode == "api":
        provider = trace.NoOpTracerProvider()
    elif mode == "otel-metrics":
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            MetricExporter,
            MetricExportResult,
            PeriodicExportingMetricReader,
        )

        class DropMetrics(MetricExporter):
            def export(
                self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
            ) -> MetricExportResult:
                return MetricExportResult.SUCCESS

            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                return True

            def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
                return None

        reader = PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=60_000)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        provider = trace.NoOpTracerProvider()
    elif mode in ("noop", "sampled-10"):
        if mode == "sampled-10":
            provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)))
        provider.add_span_processor(BatchSpanProcessor(Drop()))
    elif mode == "memory":
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    else:
        raise SystemExit(f"{mode!r}: expected api, noop, sampled-10, memory or otel-metrics")
    trace.set_tracer_provider(provider)
    from skillwire.cli.main import main as skillwire

    return skillwire(rest)


if __name__ == "__main__":
    sys.exit(main())
