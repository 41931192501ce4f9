"""What one request reports about itself, the same on every binding: its access line, its trace span, its
metrics and its log ids (:mod:`skillwire.server.observability.access`, :mod:`~skillwire.server.observability.telemetry`,
:mod:`~skillwire.server.observability.metrics`, :mod:`~skillwire.server.observability.logs`).

A binding makes a :class:`Watch` when it starts serving a request and calls :meth:`Watch.end` once, when the
request is answered (a stream: when it ended). The Watch reads the request's id (the caller's
``X-Request-Id``, or one made up) and binds it for the lines logged meanwhile; with the access log, tracing
and metrics off, that and one log-level check are all it costs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skillwire.errors import A2AError
from skillwire.protocol.operations import Operation
from skillwire.server.observability import access, logs
from skillwire.server.observability.metrics import Metrics
from skillwire.server.observability.telemetry import Telemetry

__all__ = ["Observability", "Watch", "budget_of", "refused"]


@dataclass(frozen=True, kw_only=True)
class Observability:
    """What is traced, counted and logged (docs/observability.md): one of the serving options
    (:mod:`skillwire.server.options`), handed to the bindings, the task runtime and the serve glue."""

    #: OpenTelemetry spans of requests, task runs and deliveries (None: none, and nothing imported).
    telemetry: Telemetry | None = None
    #: Prometheus and/or OpenTelemetry metrics, Prometheus served at ``/metrics`` (None: not counted).
    metrics: Metrics | None = None
    #: Log records carry their fields (binding, operation, task, ...) for JSON logs (``--log-format json``,
    #: :func:`~skillwire.server.observability.logs.use_json`), and a task run's records name their task.
    json_logs: bool = False


class Watch:
    """One request being observed: started by the binding, :meth:`end`-ed once."""

    __slots__ = ("_bound", "_metrics", "_span", "_telemetry", "_token", "binding", "json_logs", "logged",
                 "operation", "request_id", "started", "streaming", "tenant")  # fmt: skip

    def __init__(
        self,
        binding: str,
        operation: Operation,
        headers: Mapping[str, str],
        *,
        streaming: bool,
        telemetry: Telemetry | None,
        metrics: Metrics | None,
        tenant: str = "",
        json_logs: bool = False,
    ) -> None:
        self.binding = binding
        self.operation = operation
        self.streaming = streaming
        self.tenant = tenant
        self.json_logs = json_logs
        self.logged = access.log.isEnabledFor(logging.INFO)  # once per request: a disabled access log is free
        self.started = time.perf_counter() if self.logged or metrics is not None else 0.0
        self._metrics = metrics
        if metrics is not None and streaming:
            metrics.stream_opened()
        #: the caller's X-Request-Id, or one made up: on the call's context, its log lines and its span
        self.request_id = logs.request_id_of(headers)
        self._bound = logs.bind_request(self.request_id)
        self._telemetry = telemetry
        if telemetry is not None:
            self._span = telemetry.request(binding, operation.value, headers, tenant, self.request_id)
            self._token = telemetry.attach(self._span)

    @property
    def tracks(self) -> bool:
        """Whether a stream's last task and state must be remembered (:class:`~access.Tracked`)."""
        return self.logged or self._telemetry is not None or self._metrics is not None

    def end(self, params: Any, outcome: Any, caller: str = "", *, line: bool = True) -> None:
        """The request is answered with ``outcome`` (its result, the A2AError, or a Tracked stream):
        write its access line (unless ``line`` is False: the request was abandoned), still inside its span
        and ids; then end the span, count it, and unbind its ids."""
        if self.logged and line:
            access.line(
                self.binding,
                self.operation,
                params,
                outcome,
                self.started,
                caller,
                json_fields=self.json_logs,
            )
        telemetry, metrics = self._telemetry, self._metrics
        if telemetry is not None:
            telemetry.detach(self._token)
            if not self._span.is_recording():  # not sampled: nothing it is told is kept, and it ends itself
                telemetry = None
        if telemetry is not None or metrics is not None:
            task_id, state = access.ending(params, outcome)
            if telemetry is not None:
                tenant = getattr(params, "tenant", None)
                if isinstance(tenant, str) and tenant and not self.tenant:  # known only once decoded (gRPC)
                    self._span.set_attribute("a2a.tenant", tenant)
                telemetry.end_request(
                    self._span, access.skill_of(params), task_id, state, isinstance(outcome, A2AError)
                )
            if metrics is not None:
                if self.streaming:
                    metrics.stream_closed()
                _count(metrics, self.binding, self.operation.value, state, outcome, self.started)
        logs.unbind_request(self._bound)


def budget_of(outcome: Any) -> str:
    """The budget (a :class:`~skillwire.protocol.limits.Limits` field) that refused a request answered with
    ``outcome``, else ``""``."""
    if isinstance(outcome, A2AError):
        return outcome.metadata.get("budget", "")
    return ""


def refused(
    binding: str,
    error: A2AError,
    started: float,
    headers: Mapping[str, str],
    *,
    telemetry: Telemetry | None,
    metrics: Metrics | None,
    operation: Operation | None = None,
) -> None:
    """Report a request answered before it became a call (no or wrong credentials, a body past its budget,
    a body that is not a valid request): its access line, a span (``A2A {operation}``, or ``A2A request``
    when the operation is not known, status ERROR), and its count (``operation`` empty when not known)."""
    name = operation.value if operation is not None else ""
    if access.log.isEnabledFor(logging.INFO):
        access.refused(binding, error, started, name)
    if telemetry is not None:
        telemetry.refused(binding, name, headers, error.reason, started)
    if metrics is not None:
        _count(metrics, binding, name, error.reason, error, started)


def _count(metrics: Metrics, binding: str, operation: str, state: str, outcome: Any, started: float) -> None:
    """Count a request answered with ``outcome`` (``state``: its outcome label), and the budget that
    refused it, if one did."""
    metrics.request(binding, operation, state, started)
    budget = budget_of(outcome)
    if budget:
        metrics.rejected(budget)
