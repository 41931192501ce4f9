"""Metrics: what the agent is doing, as Prometheus text at ``/metrics`` and/or through OpenTelemetry.

With ``agent.asgi(metrics=True)`` (or a :class:`Metrics` of your own) the app counts, on every binding:

=============================================  =========  ========================================================
``skillwire_requests_total``                   counter    requests by ``binding``, ``operation`` and ``outcome``
                                                          (the task's state, ``MESSAGE``, ``OK``, or the
                                                          error's reason)
``skillwire_request_duration_seconds``         histogram  by ``binding`` and ``operation`` (a stream: until it
                                                          ended)
``skillwire_rejected_total``                   counter    requests refused by a budget, by ``budget`` (the
                                                          :class:`~skillwire.protocol.limits.Limits` field:
                                                          ``max_running_tasks``, ``max_body_bytes``, ...)
``skillwire_task_runs_total``                  counter    task runs by ``skill`` and the ``state`` they left
                                                          the task in
``skillwire_task_run_duration_seconds``        histogram  by ``skill`` and ``state``
``skillwire_tasks_running``                    gauge      task runs in progress in this process
``skillwire_streams_open``                     gauge      SSE and gRPC streams being answered
``skillwire_subscribers``                      gauge      subscriptions to task events held in this process
                                                          (streams and the runtime's own followers)
``skillwire_store_operation_duration_seconds`` histogram  task store calls by ``system`` (memory, sqlite,
                                                          postgresql), ``operation`` (its method: ``commit``,
                                                          ``get``, ...) and ``outcome`` (``ok``, ``error``)
``skillwire_bus_write_duration_seconds``       histogram  a shared bus's batched writes to Redis or
                                                          PostgreSQL, by ``system``: its round trip
``skillwire_bus_events_written_total``         counter    events those writes carried, by ``system``
``skillwire_tasks_pruned_total``               counter    finished tasks removed by retention in this process
                                                          (docs/retention.md)
``skillwire_store_size_bytes``                 gauge      bytes the task store takes (the SQLite file and its
                                                          WAL, the PostgreSQL tables), read every 15 s
``skillwire_store_tasks``                      gauge      tasks in the store by ``state``, read every 15 s
=============================================  =========  ========================================================

Two places to send them, either or both:

- **Prometheus** (``Metrics()``, ``agent.asgi(metrics=True)``, ``skillwire serve --metrics``): a registry of
  the app's own (``Metrics.registry``), so two apps in one process do not mix theirs; ``GET /metrics``
  answers the Prometheus text format, behind the agent's security schemes when it has any. Needs
  ``prometheus-client``.
- **OpenTelemetry** (``Metrics(prometheus=False, meter_provider=...)``, or on with ``skillwire serve
  --otel``): the same instruments through an OpenTelemetry meter (scope ``skillwire``), named the
  OpenTelemetry way: ``skillwire.requests``, ``skillwire.request.duration`` (unit ``s``),
  ``skillwire.rejected``, ``skillwire.task.runs``, ``skillwire.task.run.duration``,
  ``skillwire.tasks.running``, ``skillwire.streams.open``, ``skillwire.subscribers``,
  ``skillwire.store.operation.duration``,
  ``skillwire.bus.write.duration``, ``skillwire.bus.events.written``, ``skillwire.tasks.pruned``,
``skillwire.store.size`` (unit ``By``), ``skillwire.store.tasks``, with the same attributes. Exported
  as the meter provider's readers say (OTLP, or OpenTelemetry's own Prometheus exporter).

Each process counts its own: with ``--workers N``, scrape each worker, or read the OpenTelemetry side.
Nothing is imported unless metrics are on. Every label's values come from closed sets (bindings,
operations, outcomes, task states, budgets, the agent's own skills, store methods), never from what a
caller sends, so the number of series stays small.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skillwire.errors import MissingExtraError
from skillwire.protocol.states import TaskState
from skillwire.stores.retention import StoreStats

__all__ = ["METRICS_PATH", "Metrics"]

METRICS_PATH = "/metrics"

#: The instrumentation scope of the OpenTelemetry instruments.
SCOPE = "skillwire"

#: Request durations: from a fraction of a millisecond (GetTask on memory) to a minute (a long stream).
_REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Task runs: a millisecond to an hour.
_RUN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)
#: Store and bus calls: ten microseconds (memory) to ten seconds (a store that is failing over).
#: The states ``skillwire_store_tasks`` reports (a state without tasks as 0).
_STATES = tuple(state for state in TaskState if state is not TaskState.UNSPECIFIED)
_IO_BUCKETS = (0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
               0.25, 0.5, 1, 2.5, 10)  # fmt: skip


class Metrics:
    """The app's metrics: Prometheus (``prometheus``, the default) and/or OpenTelemetry (``meter_provider``:
    an OpenTelemetry MeterProvider, or ``True`` for the process's global one). ImportError, saying what to
    install, without prometheus-client or opentelemetry-api."""

    def __init__(self, *, prometheus: bool = True, meter_provider: Any = None) -> None:
        self.registry: Any = None
        sinks: list[_Prometheus | _OpenTelemetry] = []
        if prometheus:
            sink = _Prometheus(self)
            self.registry = sink.registry
            sinks.append(sink)
        if meter_provider is not None and meter_provider is not False:
            sinks.append(_OpenTelemetry(None if meter_provider is True else meter_provider, self))
        if not sinks:
            raise ValueError("Metrics needs prometheus=True or a meter_provider")
        self._sinks = tuple(sinks)
        self._prometheus = sinks[0] if isinstance(sinks[0], _Prometheus) else None
        self.running = 0
        self.streams = 0
        #: how many subscriptions the bus holds (set by the app to its bus's count)
        self.subscribers: Callable[[], int] = lambda: 0
        #: the store's statistics as last read (by the runtime's pruner: skillwire.server.tasks.retention)
        self.stats = StoreStats()

    @property
    def serves_endpoint(self) -> bool:
        """Whether ``/metrics`` answers (Prometheus is on)."""
        return self._prometheus is not None

    # -- what the bindings, the runtime, the store and the bus report -------------------------------------

    def request(self, binding: str, operation: str, outcome: str, started: float) -> None:
        seconds = time.perf_counter() - started
        for sink in self._sinks:
            sink.request(binding, operation, outcome, seconds)

    def rejected(self, budget: str) -> None:
        for sink in self._sinks:
            sink.rejected(budget)

    # the gauges (running tasks, open streams, subscribers) are read from here when they are collected

    def stream_opened(self) -> None:
        self.streams += 1

    def stream_closed(self) -> None:
        self.streams -= 1

    def run_started(self) -> float:
        self.running += 1
        return time.perf_counter()

    def run_ended(self, skill: str, state: str, started: float) -> None:
        self.running -= 1
        seconds = time.perf_counter() - started
        for sink in self._sinks:
            sink.run(skill, state, seconds)

    def store_call(self, system: str, operation: str, ok: bool, seconds: float) -> None:
        outcome = "ok" if ok else "error"
        for sink in self._sinks:
            sink.store(system, operation, outcome, seconds)

    def bus_wrote(self, system: str, seconds: float, events: int) -> None:
        for sink in self._sinks:
            sink.bus_write(system, seconds, events)

    def tasks_pruned(self, count: int) -> None:
        for sink in self._sinks:
            sink.pruned(count)

    def store_stats(self, stats: StoreStats) -> None:
        self.stats = stats
        for sink in self._sinks:
            sink.store_stats(stats)

    # -- the endpoint -------------------------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, bytes]:
        """The Prometheus text format of every metric, and its content type."""
        if self._prometheus is None:
            raise RuntimeError("these metrics go to OpenTelemetry only: there is no Prometheus exposition")
        return self._prometheus.exposition()


class _Prometheus:
    """The metrics as prometheus-client instruments in a registry of their own."""

    def __init__(self, owner: Metrics) -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise MissingExtraError("metrics need prometheus-client", "otel") from None
        self._prom = prom
        self.registry = registry = prom.CollectorRegistry(auto_describe=True)
        self._requests = prom.Counter(
            "skillwire_requests",
            "A2A requests answered",
            ["binding", "operation", "outcome"],
            registry=registry,
        )
        self._request_seconds = prom.Histogram(
            "skillwire_request_duration_seconds",
            "Time to answer an A2A request (a stream: until it ended)",
            ["binding", "operation"],
            buckets=_REQUEST_BUCKETS,
            registry=registry,
        )
        self._rejected = prom.Counter(
            "skillwire_rejected", "Requests refused by a budget", ["budget"], registry=registry
        )
        self._runs = prom.Counter(
            "skillwire_task_runs", "Task runs ended", ["skill", "state"], registry=registry
        )
        self._run_seconds = prom.Histogram(
            "skillwire_task_run_duration_seconds",
            "Time a task run took, by skill and the state it left the task in",
            ["skill", "state"],
            buckets=_RUN_BUCKETS,
            registry=registry,
        )
        running = prom.Gauge("skillwire_tasks_running", "Task runs in progress", registry=registry)
        running.set_function(lambda: owner.running)
        streams = prom.Gauge(
            "skillwire_streams_open", "SSE and gRPC streams being answered", registry=registry
        )
        streams.set_function(lambda: owner.streams)
        subscribers = prom.Gauge(
            "skillwire_subscribers", "Subscriptions to task events held in this process", registry=registry
        )
        subscribers.set_function(lambda: owner.subscribers())
        self._store_seconds = prom.Histogram(
            "skillwire_store_operation_duration_seconds",
            "Time a task store call took",
            ["system", "operation", "outcome"],
            buckets=_IO_BUCKETS,
            registry=registry,
        )
        self._write_seconds = prom.Histogram(
            "skillwire_bus_write_duration_seconds",
            "Round trip of a shared event bus's batched write",
            ["system"],
            buckets=_IO_BUCKETS,
            registry=registry,
        )
        self._written = prom.Counter(
            "skillwire_bus_events_written", "Events a shared bus wrote", ["system"], registry=registry
        )
        self._pruned = prom.Counter(
            "skillwire_tasks_pruned", "Finished tasks removed by retention", registry=registry
        )
        size = prom.Gauge("skillwire_store_size_bytes", "Bytes the task store takes", registry=registry)
        size.set_function(lambda: owner.stats.size_bytes)
        self._tasks = prom.Gauge("skillwire_store_tasks", "Tasks in the store", ["state"], registry=registry)
        # Each label set's children are looked up once and kept: ``labels()`` takes a lock and builds keys on
        # every call. The label values come from closed sets (see the module), so these dicts stay small.
        self._request_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._run_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._store_children: dict[tuple[str, str, str], Any] = {}

    def request(self, binding: str, operation: str, outcome: str, seconds: float) -> None:
        key = (binding, operation, outcome)
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (
                self._requests.labels(binding, operation, outcome),
                self._request_seconds.labels(binding, operation),
            )
        children[0].inc()
        children[1].observe(seconds)

    def rejected(self, budget: str) -> None:
        self._rejected.labels(budget).inc()

    def run(self, skill: str, state: str, seconds: float) -> None:
        key = (skill, state)
        children = self._run_children.get(key)
        if children is None:
            children = self._run_children[key] = (
                self._runs.labels(skill, state),
                self._run_seconds.labels(skill, state),
            )
        children[0].inc()
        children[1].observe(seconds)

    def store(self, system: str, operation: str, outcome: str, seconds: float) -> None:
        key = (system, operation, outcome)
        child = self._store_children.get(key)
        if child is None:
            child = self._store_children[key] = self._store_seconds.labels(system, operation, outcome)
        child.observe(seconds)

    def bus_write(self, system: str, seconds: float, events: int) -> None:
        self._write_seconds.labels(system).observe(seconds)
        self._written.labels(system).inc(events)

    def pruned(self, count: int) -> None:
        self._pruned.inc(count)

    def store_stats(self, stats: StoreStats) -> None:
        for state in _STATES:
            self._tasks.labels(state.value).set(stats.tasks.get(state.value, 0))

    def exposition(self) -> tuple[bytes, bytes]:
        body: bytes = self._prom.generate_latest(self.registry)
        content_type: Any = self._prom.CONTENT_TYPE_LATEST
        return body, str(content_type).encode()


class _OpenTelemetry:
    """The metrics as OpenTelemetry instruments of a meter provider (the global one when None).

    The SDK's ``add``/``record`` cost about 5 µs each (measured: bench/telemetry_inprocess.py), so only
    durations are recorded as they happen (histograms have no observable form). Counts are kept here, in a
    dict per instrument, and handed to the SDK by observable counters when it collects; the gauges are read
    from the :class:`Metrics` that owns this sink."""

    def __init__(self, provider: Any, owner: Metrics) -> None:
        try:
            from opentelemetry import metrics as otel
        except ImportError:
            raise MissingExtraError("OpenTelemetry metrics need OpenTelemetry", "otel") from None
        meter = (provider if provider is not None else otel.get_meter_provider()).get_meter(SCOPE)
        observation = otel.Observation
        self._requests: dict[tuple[str, str, str], int] = {}
        self._rejected: dict[str, int] = {}
        self._runs: dict[tuple[str, str], int] = {}
        self._written: dict[str, int] = {}
        self._pruned: dict[tuple[str, ...], int] = {}

        def counts(table: dict[Any, int], names: tuple[str, ...]) -> Any:
            def observe(_options: Any) -> Any:
                for key, value in list(table.items()):
                    labels = key if isinstance(key, tuple) else (key,)
                    yield observation(value, dict(zip(names, labels, strict=True)))

            return [observe]

        def gauge(read: Callable[[], int]) -> Any:
            def observe(_options: Any) -> Any:
                yield observation(read())

            return [observe]

        meter.create_observable_counter(
            "skillwire.requests",
            counts(self._requests, ("binding", "operation", "outcome")),
            "{request}",
            "A2A requests answered",
        )
        meter.create_observable_counter(
            "skillwire.rejected",
            counts(self._rejected, ("budget",)),
            "{request}",
            "Requests refused by a budget",
        )
        meter.create_observable_counter(
            "skillwire.task.runs", counts(self._runs, ("skill", "state")), "{run}", "Task runs ended"
        )
        meter.create_observable_counter(
            "skillwire.bus.events.written",
            counts(self._written, ("system",)),
            "{event}",
            "Events a shared bus wrote",
        )
        meter.create_observable_counter(
            "skillwire.tasks.pruned",
            counts(self._pruned, ()),
            "{task}",
            "Finished tasks removed by retention",
        )

        def store_size(_options: Any) -> Any:
            yield observation(owner.stats.size_bytes)

        def store_tasks(_options: Any) -> Any:
            for state in _STATES:
                yield observation(owner.stats.tasks.get(state.value, 0), {"state": state.value})

        meter.create_observable_gauge(
            "skillwire.store.size", [store_size], "By", "Bytes the task store takes"
        )
        meter.create_observable_gauge("skillwire.store.tasks", [store_tasks], "{task}", "Tasks in the store")
        meter.create_observable_up_down_counter(
            "skillwire.tasks.running", gauge(lambda: owner.running), "{run}", "Task runs in progress"
        )
        meter.create_observable_up_down_counter(
            "skillwire.streams.open",
            gauge(lambda: owner.streams),
            "{stream}",
            "SSE and gRPC streams being answered",
        )
        meter.create_observable_up_down_counter(
            "skillwire.subscribers",
            gauge(lambda: owner.subscribers()),
            "{subscription}",
            "Subscriptions to task events held in this process",
        )
        self._request_seconds = meter.create_histogram(
            "skillwire.request.duration",
            "s",
            "Time to answer an A2A request (a stream: until it ended)",
            explicit_bucket_boundaries_advisory=list(_REQUEST_BUCKETS),
        )
        self._run_seconds = meter.create_histogram(
            "skillwire.task.run.duration",
            "s",
            "Time a task run took, by skill and the state it left the task in",
            explicit_bucket_boundaries_advisory=list(_RUN_BUCKETS),
        )
        self._store_seconds = meter.create_histogram(
            "skillwire.store.operation.duration",
            "s",
            "Time a task store call took",
            explicit_bucket_boundaries_advisory=list(_IO_BUCKETS),
        )
        self._write_seconds = meter.create_histogram(
            "skillwire.bus.write.duration",
            "s",
            "Round trip of a shared event bus's batched write",
            explicit_bucket_boundaries_advisory=list(_IO_BUCKETS),
        )
        # attribute dicts are built once per label set and reused
        self._attributes: dict[tuple[str, ...], dict[str, str]] = {}

    def _attrs(self, *pairs: str) -> dict[str, str]:
        attributes = self._attributes.get(pairs)
        if attributes is None:
            attributes = self._attributes[pairs] = dict(zip(pairs[::2], pairs[1::2], strict=True))
        return attributes

    def request(self, binding: str, operation: str, outcome: str, seconds: float) -> None:
        key = (binding, operation, outcome)
        self._requests[key] = self._requests.get(key, 0) + 1
        self._request_seconds.record(seconds, self._attrs("binding", binding, "operation", operation))

    def rejected(self, budget: str) -> None:
        self._rejected[budget] = self._rejected.get(budget, 0) + 1

    def run(self, skill: str, state: str, seconds: float) -> None:
        key = (skill, state)
        self._runs[key] = self._runs.get(key, 0) + 1
        self._run_seconds.record(seconds, self._attrs("skill", skill, "state", state))

    def store(self, system: str, operation: str, outcome: str, seconds: float) -> None:
        self._store_seconds.record(
            seconds, self._attrs("system", system, "operation", operation, "outcome", outcome)
        )

    def pruned(self, count: int) -> None:
        self._pruned[()] = self._pruned.get((), 0) + count

    def store_stats(self, stats: StoreStats) -> None:
        """(read from the Metrics that owns this sink when the SDK collects)"""

    def bus_write(self, system: str, seconds: float, events: int) -> None:
        self._written[system] = self._written.get(system, 0) + events
        self._write_seconds.record(seconds, self._attrs("system", system))
