"""OpenTelemetry traces: a span per request and one per task run, W3C trace context in and out.

Off unless asked for (``agent.asgi(telemetry=True)``, ``skillwire serve --otel``): an app without it never
imports OpenTelemetry and pays one ``is None`` check per request. With it, on every HTTP binding:

- **a request span** (kind SERVER, named ``A2A {operation}``) whose parent is the trace context of the
  request's ``traceparent``/``tracestate`` headers (W3C, or whatever propagator the process installed), with
  the attributes ``rpc.system`` = ``a2a``, ``rpc.method``, ``a2a.binding``, ``a2a.operation``,
  ``a2a.tenant``, and when known at the end ``a2a.skill.id``, ``a2a.task.id`` and ``a2a.outcome`` (the task's
  state, ``MESSAGE``, ``OK`` or the error's reason; an error also sets the span's status to ERROR). A stream's
  span ends with the stream.
- **a run span** (kind INTERNAL, named ``skill {id}``, or ``task run`` for an executor without skills), a
  child of the request that started the run, from the executor's start to its end, with ``a2a.task.id``,
  ``a2a.context.id``, ``a2a.skill.id`` and ``a2a.task.state`` (the state the run left the task in).

Work a skill does inside its run is in the run span's context, so spans of libraries it calls are its
children, and skillwire's client puts the current trace context on every request it sends
(``skillwire.client``): a skill calling another agent continues the trace there, and a call through three agents
is one trace.

The spans go to the tracer provider given, else the process's global one (set up by the OpenTelemetry SDK,
by ``opentelemetry-instrument``, or by ``skillwire serve --otel``); with only the API installed they are
no-ops.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["Telemetry", "tracer_provider_from_env"]

#: The instrumentation scope of skillwire's spans.
SCOPE = "skillwire"


class Telemetry:
    """Where skillwire's spans go: ``tracer_provider`` (an OpenTelemetry TracerProvider), else the global
    one. Raises ImportError, saying what to install, without ``opentelemetry-api``."""

    def __init__(self, tracer_provider: Any = None) -> None:
        try:
            from opentelemetry import context, propagate, trace
        except ImportError:
            raise ImportError("telemetry needs OpenTelemetry: pip install 'skillwire[otel]'") from None
        self._context = context
        self._propagate = propagate
        self._trace = trace
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self.tracer = provider.get_tracer(SCOPE)
        #: the header names the process's propagator reads (W3C: traceparent, tracestate, baggage): a request
        #: with none of them has no remote parent, and skips the propagator
        self._fields = frozenset(name.lower() for name in propagate.get_global_textmap().fields)
        self._server = trace.SpanKind.SERVER
        self._internal = trace.SpanKind.INTERNAL
        self._error = trace.StatusCode.ERROR

    # -- requests -------------------------------------------------------------------------------------------

    def request(self, binding: str, operation: str, carrier: Mapping[str, str], tenant: str = "") -> Any:
        """Start the span of a request whose headers (lower-cased names) are ``carrier``."""
        parent = self._propagate.extract(carrier) if not self._fields.isdisjoint(carrier) else None
        return self.tracer.start_span(
            f"A2A {operation}",
            context=parent,
            kind=self._server,
            attributes={
                "rpc.system": "a2a",
                "rpc.method": operation,
                "a2a.binding": binding,
                "a2a.operation": operation,
                "a2a.tenant": tenant,
            },
        )

    def end_request(self, span: Any, skill: str, task_id: str, outcome: str, failed: bool) -> None:
        ending = {"a2a.outcome": outcome}
        if skill:
            ending["a2a.skill.id"] = skill
        if task_id:
            ending["a2a.task.id"] = task_id
        span.set_attributes(ending)
        if failed:
            span.set_status(self._error, outcome)
        span.end()

    # -- runs -----------------------------------------------------------------------------------------------

    def run(self, skill: str, task_id: str, context_id: str) -> Any:
        """Start the span of a task run (in the current context: the request's that started it)."""
        return self.tracer.start_span(
            f"skill {skill}" if skill else "task run",
            kind=self._internal,
            attributes={"a2a.task.id": task_id, "a2a.context.id": context_id, "a2a.skill.id": skill},
        )

    def end_run(self, span: Any, state: str, failed: bool) -> None:
        span.set_attribute("a2a.task.state", state)
        if failed:
            span.set_status(self._error, state)
        span.end()

    # -- context --------------------------------------------------------------------------------------------

    def attach(self, span: Any) -> object:
        """Make ``span`` the current one (until :meth:`detach` with what this returns)."""
        return self._context.attach(self._trace.set_span_in_context(span))

    def detach(self, token: object) -> None:
        self._context.detach(token)  # type: ignore[arg-type]


def tracer_provider_from_env(service_name: str) -> Any:
    """The process's global tracer provider; if nothing set one up (no SDK configured, no
    ``opentelemetry-instrument``), an SDK provider made global, exporting as ``OTEL_TRACES_EXPORTER`` says:
    ``otlp`` (the default: OTLP over HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT``, as the exporter reads it),
    ``console`` (one JSON span per line on stdout) or ``none``. ``OTEL_SERVICE_NAME`` (else
    ``service_name``) names the service. Raises ImportError, saying what to install, without the SDK."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if type(provider).__name__ != "ProxyTracerProvider":
        return provider  # set up by the process already (a NoOpTracerProvider too: spans are then no-ops)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        raise ImportError("tracing needs the OpenTelemetry SDK: pip install 'skillwire[otel]'") from None
    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    sdk = TracerProvider(resource=Resource.create({"service.name": name}))
    kind = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    exporter: SpanExporter | None
    if kind == "none":
        exporter = None
    elif kind == "console":
        exporter = ConsoleSpanExporter()
    elif kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ImportError(
                "OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: pip install 'skillwire[otel]'"
            ) from None
        exporter = OTLPSpanExporter()
    else:
        raise ValueError(f"OTEL_TRACES_EXPORTER={kind!r}: expected otlp, console or none")
    if exporter is not None:
        sdk.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(sdk)
    return sdk
