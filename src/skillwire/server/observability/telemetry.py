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

import logging
import os
import socket
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from skillwire.errors import MissingExtraError

__all__ = [
    "METRIC_EXPORTERS",
    "SPAN_EXPORTERS",
    "Telemetry",
    "meter_provider_from_env",
    "tracer_provider_from_env",
]

log = logging.getLogger("skillwire.telemetry")

#: The instrumentation scope of skillwire's spans.
SCOPE = "skillwire"


class Telemetry:
    """Where skillwire's spans go: ``tracer_provider`` (an OpenTelemetry TracerProvider), else the global
    one. ``store_spans``: the task store's and the event bus's calls as child spans too (``store {method}``,
    ``bus publish``). Raises ImportError, saying what to install, without ``opentelemetry-api``."""

    def __init__(self, tracer_provider: Any = None, *, store_spans: bool = False) -> None:
        try:
            from opentelemetry import context, propagate, trace
        except ImportError:
            raise MissingExtraError("telemetry needs OpenTelemetry", "otel") from None
        self._context = context
        self._propagate = propagate
        self._trace = trace
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self.tracer = provider.get_tracer(SCOPE)
        #: where the spans go, for the start-up banner
        self.destination = traces_destination(provider)
        #: the header names the process's propagator reads (W3C: traceparent, tracestate, baggage): a request
        #: with none of them has no remote parent, and skips the propagator
        self._fields = frozenset(name.lower() for name in propagate.get_global_textmap().fields)
        self.store_spans = store_spans
        self._server = trace.SpanKind.SERVER
        self._client = trace.SpanKind.CLIENT
        self._internal = trace.SpanKind.INTERNAL
        self._error = trace.StatusCode.ERROR
        #: whether a child of a span that is not recorded would be dropped anyway, so that it need not be
        #: started (:meth:`skips_children`)
        self._drops_unrecorded_children = _drops_unrecorded_children(provider, trace)

    # -- requests -------------------------------------------------------------------------------------------

    def request(
        self, binding: str, operation: str, carrier: Mapping[str, str], tenant: str = "", request_id: str = ""
    ) -> Any:
        """Start the span of a request whose headers (lower-cased names) are ``carrier``."""
        return self.tracer.start_span(
            f"A2A {operation}",
            context=self._parent(carrier),
            kind=self._server,
            attributes={
                "rpc.system": "a2a",
                "rpc.method": operation,
                "a2a.binding": binding,
                "a2a.operation": operation,
                "a2a.tenant": tenant,
                "a2a.request_id": request_id,
            },
        )

    def refused(
        self, binding: str, operation: str, carrier: Mapping[str, str], reason: str, started: float
    ) -> None:
        """The span of a request refused before its body was read (``started``: its ``perf_counter()``)."""
        now = time.time_ns()
        attributes = {"rpc.system": "a2a", "a2a.binding": binding, "a2a.outcome": reason}
        if operation:
            attributes["rpc.method"] = attributes["a2a.operation"] = operation
        span = self.tracer.start_span(
            f"A2A {operation}" if operation else "A2A request",
            context=self._parent(carrier),
            kind=self._server,
            attributes=attributes,
            start_time=now - int((time.perf_counter() - started) * 1e9),
        )
        span.set_status(self._error, reason)
        span.end(end_time=now)

    def _parent(self, carrier: Mapping[str, str]) -> Any:
        """The remote parent in a request's headers; None (skipping the propagator) when it has none of the
        propagator's headers."""
        return None if self._fields.isdisjoint(carrier) else self._propagate.extract(carrier)

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

    def skips_children(self) -> bool:
        """Whether a span started now, in the current context, would certainly be dropped: its parent is not
        recorded, and the provider's sampler drops the children of a local parent it did not sample (the
        default ``ParentBased`` samplers, every ``OTEL_TRACES_SAMPLER`` starting ``parentbased_``), or the
        provider is the API's no-op one. Then the run's and the store's spans are not started at all: the
        SDK's ``start_span`` costs about 6 µs even for a span it drops, and the trace context (its trace id,
        unsampled) stays the request's, so what a skill calls downstream still knows it is not sampled."""
        return self._drops_unrecorded_children and not self._trace.get_current_span().is_recording()

    def run(self, skill: str, task_id: str, context_id: str) -> Any:
        """Start the span of a task run (in the current context: the request's that started it); None when
        it would be dropped (:meth:`skips_children`)."""
        if self.skips_children():
            return None
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

    # -- the store and the bus (store_spans) ----------------------------------------------------------------

    def store_call(self, system: str, operation: str) -> Any:
        """Start the span of a task store call (in the current context); None when it would be dropped."""
        if self.skips_children():
            return None
        return self.tracer.start_span(
            f"store {operation}",
            kind=self._internal if system == "memory" else self._client,
            attributes={"db.system.name": system, "db.operation.name": operation},
        )

    def bus_publish(self, system: str, task_id: str) -> Any:
        """Start the span of an event handed to the event bus (in the current context); None when it would
        be dropped."""
        if self.skips_children():
            return None
        return self.tracer.start_span(
            "bus publish",
            kind=self._internal if system == "memory" else self._client,
            attributes={
                "messaging.system": system,
                "messaging.operation.type": "send",
                "a2a.task.id": task_id,
            },
        )

    def end_call(self, span: Any, error: BaseException | None) -> None:
        if error is not None:
            span.set_status(self._error, type(error).__name__)
        span.end()

    # -- context --------------------------------------------------------------------------------------------

    def attach(self, span: Any) -> object:
        """Make ``span`` the current one (until :meth:`detach` with what this returns)."""
        return self._context.attach(self._trace.set_span_in_context(span))

    def detach(self, token: object) -> None:
        self._context.detach(token)  # type: ignore[arg-type]

    # -- push deliveries ------------------------------------------------------------------------------------

    def carrier(self) -> dict[str, str]:
        """The current trace context as the process's propagator writes it in headers (W3C: ``traceparent``,
        ``tracestate``); empty when nothing is being traced. A push delivery keeps it with its event."""
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier)
        return carrier

    def delivery(self, parent: Mapping[str, str], attributes: Mapping[str, str | int]) -> Any:
        """Start the span (kind CLIENT, named ``A2A push``) of one attempt at a push delivery, a child of the
        trace context ``parent`` (the headers :meth:`carrier` gave when the event was produced)."""
        return self.tracer.start_span(
            "A2A push",
            context=self._propagate.extract(parent),
            kind=self._client,
            attributes=attributes,
        )

    def delivery_headers(self, span: Any) -> dict[str, str]:
        """The trace context of ``span`` as headers, for the request it is the span of."""
        headers: dict[str, str] = {}
        self._propagate.inject(headers, context=self._trace.set_span_in_context(span))
        return headers

    def end_delivery(self, span: Any, status: int, error: str, error_type: str = "") -> None:
        """End an attempt's span: ``status``, the webhook's answer (0: none); ``error``, why it failed
        ("": delivered), which sets the span's status to ERROR, and ``error_type`` (default: the status)."""
        if status:
            span.set_attribute("http.response.status_code", status)
        if error:
            span.set_attribute("error.type", error_type or str(status))
            span.set_status(self._error, error)
        span.end()


#: What a sampler's description says when it drops the children of a local parent it did not sample
#: (``ParentBased``'s, with its default delegate for that case)
_DROPS_UNSAMPLED_LOCAL_CHILDREN = "localParentNotSampled:AlwaysOffSampler"


def _drops_unrecorded_children(provider: Any, trace: Any) -> bool:
    """Whether ``provider`` never records a child of a local span it did not record: the API's no-op
    provider, or an SDK provider whose sampler says so in its (public) description. A provider of any other
    kind, or a sampler of one's own, is asked for every span, as the SDK would."""
    if isinstance(provider, trace.NoOpTracerProvider):
        return True
    sampler = getattr(provider, "sampler", None)
    describe = getattr(sampler, "get_description", None)
    if not callable(describe):
        return False
    try:
        description = describe()
    except Exception:  # a sampler of one's own that cannot describe itself: ask it for every span
        return False
    return isinstance(description, str) and _DROPS_UNSAMPLED_LOCAL_CHILDREN in description


def tracer_provider_from_env(service_name: str) -> Any:
    """The process's global tracer provider; if nothing set one up (no SDK configured, no
    ``opentelemetry-instrument``), an SDK provider made global, exporting as ``OTEL_TRACES_EXPORTER`` says:
    ``otlp`` (the default: OTLP over HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT``, as the exporter reads it),
    ``console`` (one JSON span per line on stdout) or ``none``. ``OTEL_SERVICE_NAME`` (else
    ``service_name``) names the service. Raises ImportError, saying what to install, without the SDK."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise MissingExtraError("tracing needs OpenTelemetry", "otel") from None
    provider = trace.get_tracer_provider()
    if type(provider).__name__ != "ProxyTracerProvider":
        return provider  # set up by the process already (a NoOpTracerProvider too: spans are then no-ops)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise MissingExtraError("tracing needs the OpenTelemetry SDK", "otel") from None
    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    sdk = TracerProvider(resource=Resource.create({"service.name": name}))
    kind = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    make = SPAN_EXPORTERS.get(kind)
    if make is None:
        raise ValueError(f"OTEL_TRACES_EXPORTER={kind!r}: expected {_choices(list(SPAN_EXPORTERS))}")
    exporter, _DESTINATIONS[sdk] = make()
    if exporter is not None:
        sdk.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(sdk)
    return sdk


#: Where the tracer providers made here send their spans (a made provider -> its words for the banner).
_DESTINATIONS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def traces_destination(provider: Any) -> str:
    """Where ``provider`` sends spans, in words: the exporter of one :func:`tracer_provider_from_env` made,
    else the process's own set-up."""
    try:
        return _DESTINATIONS.get(provider) or "the tracer provider this process set up"
    except TypeError:  # a provider that cannot be weakly referenced
        return "the tracer provider this process set up"


def _span_line(span: Any) -> str:
    """A span as one line of JSON (the SDK's console exporter indents it over many lines by default)."""
    text: str = span.to_json(indent=None)
    return text + os.linesep


def otlp_endpoint(signal: str) -> str:
    """The URL the OTLP/HTTP exporter of ``signal`` (``traces``, ``metrics``) sends to, as it reads the
    standard variables: ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` with
    ``/v1/<signal>``, else ``http://localhost:4318/v1/<signal>``."""
    own = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    if own:
        return own
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return f"{base.rstrip('/')}/v1/{signal}"


#: The loggers of the OTLP/HTTP exporters: each failed try of an export logs there (a logger's filters see
#: only its own records, so each is named).
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
)


class _OnceOnly(logging.Filter):
    """Lets the exporters' first failure through (said once, in skillwire's words if the collector was
    already found unreachable at start-up) and no other: without a collector, the OTLP exporters log every
    try of every batch, several lines a second."""

    def __init__(self) -> None:
        super().__init__()
        self.told = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or self.told:
            return record.levelno < logging.WARNING
        self.told = True
        record.msg = f"{record.getMessage()} (further OpenTelemetry export failures are not logged)"
        record.args = None
        return True


_ONCE = _OnceOnly()


def warn_once_unreachable(endpoint: str) -> None:
    """Log one warning now if nothing listens at the collector ``endpoint``, and keep the exporters' own
    failure messages to one in all (:class:`_OnceOnly`)."""
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _ONCE not in logger.filters:
            logger.addFilter(_ONCE)
    if _ONCE.told:
        return
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "localhost", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError as exc:
        _ONCE.told = True
        log.warning(
            "no OpenTelemetry collector answers at %s (%s): spans and metrics are dropped until one does;"
            " export failures are not logged (set OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_TRACES_EXPORTER=console)",
            endpoint,
            exc.strerror or exc,
        )


def meter_provider_from_env(service_name: str) -> Any:
    """The process's global meter provider (None if it is the API's NoOpMeterProvider); if nothing set one
    up, an SDK provider made global, exporting as ``OTEL_METRICS_EXPORTER`` says: ``otlp`` (the default:
    OTLP over HTTP every ``OTEL_METRIC_EXPORT_INTERVAL`` milliseconds, as the exporter and reader read
    them), ``console`` or ``none`` (None is returned: no OpenTelemetry metrics). Raises ImportError, saying
    what to install, without the SDK."""
    try:
        from opentelemetry import metrics
    except ImportError:
        raise MissingExtraError("metrics need OpenTelemetry", "otel") from None
    provider = metrics.get_meter_provider()
    if type(provider).__name__ == "NoOpMeterProvider":
        return None  # the process said: no metrics (counting into no-op instruments would still cost)
    if type(provider).__name__ != "_ProxyMeterProvider":
        return provider
    kind = (os.environ.get("OTEL_METRICS_EXPORTER") or "otlp").strip().lower()
    if kind == "none":
        return None
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        raise MissingExtraError("metrics need the OpenTelemetry SDK", "otel") from None
    make = METRIC_EXPORTERS.get(kind)
    if make is None:
        raise ValueError(f"OTEL_METRICS_EXPORTER={kind!r}: expected {_choices([*METRIC_EXPORTERS, 'none'])}")
    exporter = make()
    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    sdk = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(exporter)],
        resource=Resource.create({"service.name": name}),
    )
    metrics.set_meter_provider(sdk)
    return sdk


def _metrics_line(data: Any) -> str:
    """Metrics as one line of JSON, as spans are (:func:`_span_line`)."""
    text: str = data.to_json(indent=None)
    return text + os.linesep


# -- exporters: one function and one table line each ---------------------------------------------------------
# Each is imported when chosen, so the SDK's exporters cost nothing to a process that exports elsewhere.


def _no_spans() -> tuple[Any, str]:
    return None, "none (OTEL_TRACES_EXPORTER=none)"


def _console_spans() -> tuple[Any, str]:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter(
        formatter=_span_line
    ), "stdout, one JSON span per line (OTEL_TRACES_EXPORTER=console)"


def _otlp_spans() -> tuple[Any, str]:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise MissingExtraError("OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter", "otel") from None
    exporter = OTLPSpanExporter()
    endpoint = otlp_endpoint("traces")
    warn_once_unreachable(endpoint)
    return exporter, f"OTLP over HTTP to {endpoint}"


#: ``OTEL_TRACES_EXPORTER`` -> what makes its span exporter (None: spans are made and not exported) and says
#: where they go, for the banner.
SPAN_EXPORTERS: dict[str, Callable[[], tuple[Any, str]]] = {
    "otlp": _otlp_spans,
    "console": _console_spans,
    "none": _no_spans,
}


def _console_metrics() -> Any:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

    return ConsoleMetricExporter(formatter=_metrics_line)


def _otlp_metrics() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    except ImportError:
        raise MissingExtraError("OTEL_METRICS_EXPORTER=otlp needs the OTLP exporter", "otel") from None
    exporter = OTLPMetricExporter()
    warn_once_unreachable(otlp_endpoint("metrics"))
    return exporter


#: ``OTEL_METRICS_EXPORTER`` -> what makes its metric exporter (``none``, no OpenTelemetry metrics at all, is
#: answered before the SDK is imported).
METRIC_EXPORTERS: dict[str, Callable[[], Any]] = {
    "otlp": _otlp_metrics,
    "console": _console_metrics,
}


def _choices(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
