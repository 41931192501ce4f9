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
from typing import Any, Literal, NamedTuple

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
_IO_BUCKETS = (0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
               0.25, 0.5, 1, 2.5, 10)  # fmt: skip
#: The states ``skillwire_store_tasks`` reports (a state without tasks as 0).
_STATES = tuple(state for state in TaskState if state is not TaskState.UNSPECIFIED)


class _Instrument(NamedTuple):
    """One metric, as both sinks make it.

    ``kind``: a ``counter`` (counted as it happens), a ``histogram`` (durations, recorded as they happen), an
    ``up_down`` level (a count of things open, read from the :class:`Metrics` when collected) or a ``gauge``
    (a reading of the store's statistics, from the same). A counter or histogram is kept in the sink's
    ``attribute``; a gauge is read by ``read``, which returns a number, or with the label ``state`` a dict of
    numbers by task state (Prometheus keeps that one in ``attribute`` and sets it when the statistics
    change)."""

    kind: Literal["counter", "histogram", "up_down", "gauge"]
    prometheus: str
    opentelemetry: str
    unit: str
    description: str
    labels: tuple[str, ...] = ()
    attribute: str = ""
    buckets: tuple[float, ...] = ()
    read: Callable[[Metrics], Any] | None = None


#: Every metric, in the order of the module's table (and of the Prometheus exposition).
_INSTRUMENTS = (
    _Instrument("counter", "skillwire_requests", "skillwire.requests", "{request}", "A2A requests answered",
                ("binding", "operation", "outcome"), attribute="_requests"),
    _Instrument("histogram", "skillwire_request_duration_seconds", "skillwire.request.duration", "s",
                "Time to answer an A2A request (a stream: until it ended)", ("binding", "operation"),
                attribute="_request_seconds", buckets=_REQUEST_BUCKETS),
    _Instrument("counter", "skillwire_rejected", "skillwire.rejected", "{request}",
                "Requests refused by a budget", ("budget",), attribute="_rejected"),
    _Instrument("counter", "skillwire_task_runs", "skillwire.task.runs", "{run}", "Task runs ended",
                ("skill", "state"), attribute="_runs"),
    _Instrument("histogram", "skillwire_task_run_duration_seconds", "skillwire.task.run.duration", "s",
                "Time a task run took, by skill and the state it left the task in", ("skill", "state"),
                attribute="_run_seconds", buckets=_RUN_BUCKETS),
    _Instrument("up_down", "skillwire_tasks_running", "skillwire.tasks.running", "{run}",
                "Task runs in progress", read=lambda owner: owner.running),
    _Instrument("up_down", "skillwire_streams_open", "skillwire.streams.open", "{stream}",
                "SSE and gRPC streams being answered", read=lambda owner: owner.streams),
    _Instrument("up_down", "skillwire_subscribers", "skillwire.subscribers", "{subscription}",
                "Subscriptions to task events held in this process", read=lambda owner: owner.subscribers()),
    _Instrument("histogram", "skillwire_store_operation_duration_seconds", "skillwire.store.operation.duration",
                "s", "Time a task store call took", ("system", "operation", "outcome"),
                attribute="_store_seconds", buckets=_IO_BUCKETS),
    _Instrument("histogram", "skillwire_bus_write_duration_seconds", "skillwire.bus.write.duration", "s",
                "Round trip of a shared event bus's batched write", ("system",), attribute="_write_seconds",
                buckets=_IO_BUCKETS),
    _Instrument("counter", "skillwire_bus_events_written", "skillwire.bus.events.written", "{event}",
                "Events a shared bus wrote", ("system",), attribute="_written"),
    _Instrument("counter", "skillwire_tasks_pruned", "skillwire.tasks.pruned", "{task}",
                "Finished tasks removed by retention", attribute="_pruned"),
    _Instrument("gauge", "skillwire_store_size_bytes", "skillwire.store.size", "By", "Bytes the task store takes",
                read=lambda owner: owner.stats.size_bytes),
    _Instrument("gauge", "skillwire_store_tasks", "skillwire.store.tasks", "{task}", "Tasks in the store",
                ("state",), attribute="_tasks", read=lambda owner: owner.stats.tasks),
)  # fmt: skip


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
        self.running: int = 0
        self.streams: int = 0
        #: how many subscriptions the bus holds (set by the app to its bus's count)
        self.subscribers: Callable[[], int] = lambda: 0
        #: the store's statistics as last read (by the runtime's pruner: skillwire.server.tasks.retention)
        self.stats: StoreStats = StoreStats()

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

    # made from _INSTRUMENTS (their ``attribute``)
    _requests: Any
    _request_seconds: Any
    _rejected: Any
    _runs: Any
    _run_seconds: Any
    _store_seconds: Any
    _write_seconds: Any
    _written: Any
    _pruned: Any
    _tasks: Any

    def __init__(self, owner: Metrics) -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise MissingExtraError("metrics need prometheus-client", "otel") from None
        self._prom = prom
        self.registry = prom.CollectorRegistry(auto_describe=True)
        for row in _INSTRUMENTS:
            self._make(row, owner)
        # Each label set's children are looked up once and kept: ``labels()`` takes a lock and builds keys on
        # every call. The label values come from closed sets (see the module), so these dicts stay small.
        self._request_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._run_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._store_children: dict[tuple[str, str, str], Any] = {}

    def _make(self, row: _Instrument, owner: Metrics) -> None:
        """Registers one metric: a counter or histogram (or a gauge by state, set by ``store_stats``) is kept
        in its attribute; any other gauge reads the owner when it is collected."""
        prom, registry = self._prom, self.registry
        if row.kind == "counter":
            instrument = prom.Counter(row.prometheus, row.description, row.labels, registry=registry)
        elif row.kind == "histogram":
            instrument = prom.Histogram(
                row.prometheus, row.description, row.labels, buckets=row.buckets, registry=registry
            )
        else:
            instrument = prom.Gauge(row.prometheus, row.description, row.labels, registry=registry)
            if not row.labels:
                read = row.read
                assert read is not None
                instrument.set_function(lambda: read(owner))
                return
        setattr(self, row.attribute, instrument)

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

    # made from _INSTRUMENTS (their ``attribute``): the counts, by label values, and the histograms
    _requests: dict[tuple[str, str, str], int]
    _rejected: dict[str, int]
    _runs: dict[tuple[str, str], int]
    _written: dict[str, int]
    _pruned: dict[tuple[str, ...], int]
    _request_seconds: Any
    _run_seconds: Any
    _store_seconds: Any
    _write_seconds: Any

    def __init__(self, provider: Any, owner: Metrics) -> None:
        try:
            from opentelemetry import metrics as otel
        except ImportError:
            raise MissingExtraError("OpenTelemetry metrics need OpenTelemetry", "otel") from None
        meter = (provider if provider is not None else otel.get_meter_provider()).get_meter(SCOPE)
        self._observation = otel.Observation
        for row in _INSTRUMENTS:
            self._make(meter, row, owner)
        # attribute dicts are built once per label set and reused
        self._attributes: dict[tuple[str, ...], dict[str, str]] = {}

    def _make(self, meter: Any, row: _Instrument, owner: Metrics) -> None:
        """Creates one instrument: a histogram, kept in its attribute; an observable counter of a dict of
        counts kept in its attribute; an observable up-down counter or gauge reading the owner."""
        name, unit, description = row.opentelemetry, row.unit, row.description
        if row.kind == "histogram":
            buckets = list(row.buckets)
            histogram = meter.create_histogram(
                name, unit, description, explicit_bucket_boundaries_advisory=buckets
            )
            setattr(self, row.attribute, histogram)
        elif row.kind == "counter":
            table: dict[Any, int] = {}
            setattr(self, row.attribute, table)
            meter.create_observable_counter(name, [self._counts(table, row.labels)], unit, description)
        elif row.kind == "up_down":
            meter.create_observable_up_down_counter(name, [self._reading(row, owner)], unit, description)
        else:
            meter.create_observable_gauge(name, [self._reading(row, owner)], unit, description)

    def _counts(self, table: dict[Any, int], names: tuple[str, ...]) -> Callable[[Any], Any]:
        """The callback of an observable counter: one observation per label set counted in ``table``."""
        observation = self._observation

        def observe(_options: Any) -> Any:
            for key, value in list(table.items()):
                labels = key if isinstance(key, tuple) else (key,)
                yield observation(value, dict(zip(names, labels, strict=True)))

        return observe

    def _reading(self, row: _Instrument, owner: Metrics) -> Callable[[Any], Any]:
        """The callback of an observable gauge: what ``row.read`` reads from the owner (by task state, with
        the label ``state``: every state, one without tasks as 0)."""
        observation, read = self._observation, row.read
        assert read is not None

        def observe(_options: Any) -> Any:
            yield observation(read(owner))

        def observe_states(_options: Any) -> Any:
            counts = read(owner)
            for state in _STATES:
                yield observation(counts.get(state.value, 0), {"state": state.value})

        return observe_states if row.labels == ("state",) else observe

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
