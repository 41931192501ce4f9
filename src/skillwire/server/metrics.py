"""Prometheus metrics: what the agent is doing, at ``/metrics`` (``skillwire serve --metrics``, off by default).

With ``agent.asgi(metrics=True)`` (or a :class:`Metrics` of your own) the app counts, on every binding:

=======================================  =========  ==============================================================
``skillwire_requests_total``             counter    requests by ``binding``, ``operation`` and ``outcome`` (the
                                                    task's state, ``MESSAGE``, ``OK``, or the error's reason:
                                                    ``SERVER_BUSY`` is a request refused by a budget)
``skillwire_request_duration_seconds``   histogram  by ``binding`` and ``operation`` (a stream: until it ended)
``skillwire_task_runs_total``            counter    task runs by ``skill`` and the ``state`` they left the task in
``skillwire_task_run_duration_seconds``  histogram  by ``skill`` and ``state``
``skillwire_tasks_running``              gauge      task runs in progress in this process
``skillwire_streams_open``               gauge      SSE and gRPC streams being answered
=======================================  =========  ==============================================================

The metrics live in a registry of the app's own (``Metrics.registry``), so two apps in one process do not mix
theirs; ``GET /metrics`` answers the Prometheus text format, behind the agent's security schemes when it has
any (a scraper presents credentials like any caller). Each process counts its own: with ``--workers N``,
scrape each worker, or read the OpenTelemetry side instead. ``prometheus-client`` (extra ``skillwire[otel]``,
or installed on its own) is imported only when metrics are on.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["METRICS_PATH", "Metrics"]

METRICS_PATH = "/metrics"

#: Request durations: from a fraction of a millisecond (GetTask on memory) to a minute (a long stream).
_REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Task runs: a millisecond to an hour.
_RUN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    """The app's Prometheus metrics (ImportError, saying what to install, without prometheus-client)."""

    def __init__(self) -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise ImportError("metrics need prometheus-client: pip install 'skillwire[otel]'") from None
        self._prom = prom
        self.registry = registry = prom.CollectorRegistry(auto_describe=True)
        self.requests = prom.Counter(
            "skillwire_requests",
            "A2A requests answered",
            ["binding", "operation", "outcome"],
            registry=registry,
        )
        self.request_seconds = prom.Histogram(
            "skillwire_request_duration_seconds",
            "Time to answer an A2A request (a stream: until it ended)",
            ["binding", "operation"],
            buckets=_REQUEST_BUCKETS,
            registry=registry,
        )
        self.runs = prom.Counter(
            "skillwire_task_runs", "Task runs ended", ["skill", "state"], registry=registry
        )
        self.run_seconds = prom.Histogram(
            "skillwire_task_run_duration_seconds",
            "Time a task run took, by skill and the state it left the task in",
            ["skill", "state"],
            buckets=_RUN_BUCKETS,
            registry=registry,
        )
        self.running = prom.Gauge("skillwire_tasks_running", "Task runs in progress", registry=registry)
        self.streams = prom.Gauge(
            "skillwire_streams_open", "SSE and gRPC streams being answered", registry=registry
        )
        self._requests: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._runs: dict[tuple[str, str], tuple[Any, Any]] = {}

    # -- what the bindings and the runtime report -------------------------------------------------------

    # Each label set's children are looked up once and kept: ``labels()`` takes a lock and builds keys on
    # every call. Every label's values come from closed sets (bindings, operations, outcomes, task states,
    # the agent's own skills), never from what a caller sends, so these dicts stay small.

    def request(self, binding: str, operation: str, outcome: str, started: float) -> None:
        key = (binding, operation, outcome)
        children = self._requests.get(key)
        if children is None:
            children = self._requests[key] = (
                self.requests.labels(binding, operation, outcome),
                self.request_seconds.labels(binding, operation),
            )
        children[0].inc()
        children[1].observe(time.perf_counter() - started)

    def run_started(self) -> float:
        self.running.inc()
        return time.perf_counter()

    def run_ended(self, skill: str, state: str, started: float) -> None:
        self.running.dec()
        key = (skill, state)
        children = self._runs.get(key)
        if children is None:
            children = self._runs[key] = (
                self.runs.labels(skill, state),
                self.run_seconds.labels(skill, state),
            )
        children[0].inc()
        children[1].observe(time.perf_counter() - started)

    # -- the endpoint -------------------------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, bytes]:
        """The Prometheus text format of every metric, and its content type."""
        body: bytes = self._prom.generate_latest(self.registry)
        content_type: Any = self._prom.CONTENT_TYPE_LATEST
        return body, str(content_type).encode()
