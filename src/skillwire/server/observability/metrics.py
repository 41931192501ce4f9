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

import collections
import functools
import itertools
import operator
import time
from bisect import bisect_right
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
        self.running: int = 0
        self.streams: int = 0
        #: how many subscriptions the bus holds (set by the app to its bus's count)
        self.subscribers: Callable[[], int] = lambda: 0
        #: the store's statistics as last read (by the runtime's pruner: skillwire.server.tasks.retention)
        self.stats: StoreStats = StoreStats()
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

    def store_timers(
        self, system: str, operation: str
    ) -> tuple[Callable[[float], None], Callable[[float], None]]:
        """What a store's stand-in calls with the seconds one call of ``operation`` took: one for a call that
        returned, one for a call that raised (each made once, so that a call costs no lookup)."""
        return self._timer(system, operation, "ok"), self._timer(system, operation, "error")

    def _timer(self, system: str, operation: str, outcome: str) -> Callable[[float], None]:
        timers = [
            sink.store_timer(system, operation, outcome)
            if isinstance(sink, _Prometheus)
            else functools.partial(sink.store, system, operation, outcome)
            for sink in self._sinks
        ]
        if len(timers) == 1:
            return timers[0]

        def every(seconds: float) -> None:
            for timer in timers:
                timer(seconds)

        return every

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
    """The metrics as plain numbers, turned into Prometheus's text format only when ``/metrics`` is scraped.

    Why not prometheus-client's own ``Counter`` and ``Histogram``: each ``inc`` takes a lock, and each
    ``observe`` scans its buckets and increments three values, each behind its own lock; a SendMessage made
    eight of those lock round trips (bench/telemetry_inprocess.py, docs/performance.md). Here a histogram's
    series is a :class:`_Series`: a duration is appended to a list as it comes, and the list is folded into
    buckets (a sort, then one bisect per bound, in C) when it is full or scraped. A counter whose labels are
    a histogram's (task runs) is that histogram's count; the request counter's extra label, the outcome, is
    appended beside the duration. So recording a request is one dict lookup and two appends, and a store
    call, whose series its stand-in holds, two appends (bench/instructions.py). prometheus-client still owns
    the format: a collector in a registry of the app's own yields its metric families when scraped, and
    ``generate_latest`` writes them.

    No lock: every report comes from the event loop's thread (the bindings, the task runtime, the store's
    stand-in, a bus's writer task), and the scrape is answered on it too. Counters carry no ``_created``
    series."""

    def __init__(self, owner: Metrics) -> None:
        try:
            import prometheus_client as prom
            from prometheus_client import core, utils
        except ImportError:
            raise MissingExtraError("metrics need prometheus-client", "otel") from None
        self._prom, self._core, self._owner = prom, core, owner
        go_string: Callable[[float], str] = utils.floatToGoString  # how prometheus-client writes a bound
        #: counts by label values (the counters that are not a histogram's count)
        self._counts: dict[str, dict[tuple[str, ...], float]] = {
            row.attribute: {} if row.labels else {(): 0.0}
            for row in _INSTRUMENTS
            if row.kind == "counter" and row.attribute not in _COUNTED_BY
        }
        #: each histogram's series by label values
        self._series: dict[str, dict[tuple[str, ...], _Series]] = {
            row.attribute: {} for row in _INSTRUMENTS if row.kind == "histogram"
        }
        self._buckets = {row.attribute: row.buckets for row in _INSTRUMENTS if row.kind == "histogram"}
        self._requests = self._series["_request_seconds"]
        self._runs = self._series["_run_seconds"]
        self._bounds = {row.attribute: [go_string(b) for b in (*row.buckets, float("inf"))]
                        for row in _INSTRUMENTS if row.kind == "histogram"}  # fmt: skip
        self.registry = prom.CollectorRegistry(auto_describe=True)
        self.registry.register(self)

    def series(self, attribute: str, key: tuple[str, ...]) -> _Series:
        """The series of histogram ``attribute`` with these label values, made on first use."""
        table = self._series[attribute]
        found = table.get(key)
        if found is None:
            found = table[key] = _Series(self._buckets[attribute])
        return found

    def request(self, binding: str, operation: str, outcome: str, seconds: float) -> None:
        series = self._requests.get((binding, operation))
        if series is None:
            series = self.series("_request_seconds", (binding, operation))
        series.add(seconds, outcome)

    def rejected(self, budget: str) -> None:
        _add(self._counts["_rejected"], (budget,), 1)

    def run(self, skill: str, state: str, seconds: float) -> None:
        series = self._runs.get((skill, state))
        if series is None:
            series = self.series("_run_seconds", (skill, state))
        series.add(seconds)

    def store_timer(self, system: str, operation: str, outcome: str) -> Callable[[float], None]:
        return self.series("_store_seconds", (system, operation, outcome)).add

    def bus_write(self, system: str, seconds: float, events: int) -> None:
        self.series("_write_seconds", (system,)).add(seconds)
        _add(self._counts["_written"], (system,), events)

    def pruned(self, count: int) -> None:
        _add(self._counts["_pruned"], (), count)

    def store_stats(self, stats: StoreStats) -> None:
        """(read from the Metrics that owns this sink when scraped)"""

    # -- the scrape ---------------------------------------------------------------------------------------

    def collect(self) -> Any:
        """Every metric as a prometheus-client metric family, in the order of the module's table."""
        core, owner = self._core, self._owner
        for table in self._series.values():
            for series in table.values():
                series.fold()
        for row in _INSTRUMENTS:
            labels = list(row.labels)
            if row.kind == "counter":
                family: Any = core.CounterMetricFamily(row.prometheus, row.description, labels=labels)
                for key, count in self._counted(row.attribute).items():
                    family.add_metric(key, count)
            elif row.kind == "histogram":
                family = core.HistogramMetricFamily(row.prometheus, row.description, labels=labels)
                bounds = self._bounds[row.attribute]
                for key, series in list(self._series[row.attribute].items()):
                    if series.count:  # (a store call's error series is made before its first error)
                        buckets = list(zip(bounds, itertools.accumulate(series.buckets), strict=True))
                        family.add_metric(key, buckets, series.total)
            else:
                assert row.read is not None
                family = core.GaugeMetricFamily(row.prometheus, row.description, labels=labels)
                reading = row.read(owner)
                if row.labels == ("state",):
                    for state in _STATES:
                        family.add_metric([state.value], reading.get(state.value, 0))
                else:
                    family.add_metric([], reading)
            yield family

    def _counted(self, attribute: str) -> dict[tuple[str, ...], float]:
        """A counter's values by label values: kept as such, or read from the histogram that counts it."""
        if attribute == "_requests":
            return {(*key, outcome): count for key, series in list(self._requests.items())
                    for outcome, count in series.labelled.items()}  # fmt: skip
        if attribute == "_runs":
            return {key: series.count for key, series in list(self._runs.items()) if series.count}
        return dict(self._counts[attribute])

    def exposition(self) -> tuple[bytes, bytes]:
        body: bytes = self._prom.generate_latest(self.registry)
        content_type: Any = self._prom.CONTENT_TYPE_LATEST
        return body, str(content_type).encode()


#: The counters read from a histogram of the same calls (Prometheus): requests (by outcome too), task runs.
_COUNTED_BY = frozenset({"_requests", "_runs"})
#: Durations a series holds before it folds them into its buckets (at most 8 KiB of them, and a sort of 256
#: floats in C is far cheaper than 256 bisects in Python).
_FOLD_AT = 256


class _Series:
    """One histogram series: its bucket counts (each bucket's own; the last one is +Inf), its sum and count,
    and the durations (with their labels, for a counter with one more label) not folded in yet."""

    __slots__ = ("bounds", "buckets", "count", "labelled", "labels", "seconds", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0
        self.seconds: list[float] = []
        self.labels: list[str] = []
        #: counts by the extra label
        self.labelled: dict[str, int] = {}

    def add(self, seconds: float, label: str = "") -> None:
        """One duration (and, for a counter with one more label, that label's value)."""
        self.seconds.append(seconds)
        if label:
            self.labels.append(label)
        if len(self.seconds) >= _FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """The durations not counted yet, into the buckets: a duration counts in the first bucket whose
        bound it does not exceed. The sum adds them in the order they came, as a running sum would."""
        seconds = self.seconds
        if not seconds:
            return
        self.total = functools.reduce(operator.add, seconds, self.total)
        self.count += len(seconds)
        seconds.sort()
        below = 0
        for index, bound in enumerate(self.bounds):
            upto = bisect_right(seconds, bound)
            self.buckets[index] += upto - below
            below = upto
        self.buckets[-1] += len(seconds) - below
        seconds.clear()
        for label, count in collections.Counter(self.labels).items():
            self.labelled[label] = self.labelled.get(label, 0) + count
        self.labels.clear()


def _add(counts: dict[tuple[str, ...], float], key: tuple[str, ...], amount: float) -> None:
    counts[key] = counts.get(key, 0) + amount


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
