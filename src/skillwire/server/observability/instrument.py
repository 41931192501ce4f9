"""The task store and the event bus, observed: each call timed into the metrics and, when asked, a span.

:func:`observe_store` and :func:`observe_bus` put a stand-in in front of a store or a bus that does what it
does and reports each call: a store's coroutine methods (``commit``, ``get``, ``list_tasks``, the push and
lease methods of stores that have them, ...) into ``skillwire_store_operation_duration_seconds`` and, with
``Telemetry(store_spans=True)``, a ``store {method}`` span; with store spans, a bus's ``publish`` as a ``bus
publish`` span. A publish is not timed into the metrics: it only hands the event over (to the process's
subscribers, or to a shared bus's writer), which costs microseconds. What takes time on a shared bus (Redis,
PostgreSQL) is its batched write, whose round trip it reports through its ``on_write`` hook into
``skillwire_bus_write_duration_seconds``.

The stand-in is a class made for the object it stands for, with every public attribute of that object as a
class attribute (a timed method, a forwarding method, or a forwarding property). So ``isinstance`` with the
store protocols (``PushStore``, ``SharedStore``) answers as it does for the object itself, on Python 3.12 and
later too, where those checks no longer go through ``__getattr__``. It works for a store or bus of your own
the same way. With metrics and store spans off, the app uses the store and the bus as they are.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, TypeVar, cast

from skillwire.server.buses.base import EventBus
from skillwire.server.observability.metrics import Metrics
from skillwire.server.observability.telemetry import Telemetry
from skillwire.stores.base import TaskStore

__all__ = ["observe_bus", "observe_store", "system_of"]

T = TypeVar("T")

_SYSTEMS = {
    "MemoryTaskStore": "memory",
    "SQLiteTaskStore": "sqlite",
    "PostgresTaskStore": "postgresql",
    "InProcessEventBus": "memory",
    "RedisEventBus": "redis",
    "PostgresEventBus": "postgresql",
}


def system_of(thing: object) -> str:
    """The ``system`` label of a store or bus: ``memory``, ``sqlite``, ``postgresql``, ``redis``, else its
    class's name in lower case."""
    name = type(thing).__name__
    return _SYSTEMS.get(name) or name.lower()


class _Observed:
    __slots__ = ("_inner", "_system", "_telemetry")

    def __init__(self, inner: object, system: str, telemetry: Telemetry | None) -> None:
        self._inner = inner
        self._system = system
        #: None unless store spans are on
        self._telemetry = telemetry

    def __repr__(self) -> str:
        return f"observed({self._inner!r})"


def observe_store(store: TaskStore, telemetry: Telemetry | None, metrics: Metrics | None) -> TaskStore:
    """``store``, reporting its calls (as it is when there is nothing to report to)."""
    if metrics is None and (telemetry is None or not telemetry.store_spans):
        return store
    return _stand_in(store, telemetry, metrics, store=True)


def observe_bus(bus: EventBus, telemetry: Telemetry | None, metrics: Metrics | None) -> EventBus:
    """``bus``, with a span per publish when store spans are on, and its writes and subscriptions counted
    in ``metrics``."""
    observed = bus
    if telemetry is not None and telemetry.store_spans:
        observed = _stand_in(bus, telemetry, None, store=False)
    if metrics is not None:
        system = system_of(bus)
        count = getattr(bus, "subscriptions", None)
        if callable(count):
            metrics.subscribers = count
        if hasattr(bus, "on_write"):
            bus.on_write = lambda seconds, events: metrics.bus_wrote(system, seconds, events)
    return observed


def _stand_in(inner: T, telemetry: Telemetry | None, metrics: Metrics | None, *, store: bool) -> T:
    """A stand-in for ``inner``: a store's coroutine methods timed (``store``), else a bus's ``publish``
    in a span; every other public attribute forwarded."""
    namespace: dict[str, Any] = {"__slots__": ()}
    system = system_of(inner)
    spans = telemetry if telemetry is not None and telemetry.store_spans else None
    for name in dir(inner):
        if name.startswith("_"):
            continue
        value = getattr(inner, name)
        if store and inspect.iscoroutinefunction(value):
            namespace[name] = _store_call(name, system, spans, metrics)
        elif not store and name == "publish":
            namespace[name] = _publish
        elif inspect.ismethod(value):
            namespace[name] = _forward_method(name)
        else:
            namespace[name] = _forward_property(name)
    kind = type(f"Observed{type(inner).__name__}", (_Observed,), namespace)
    return cast(T, kind(inner, system, spans))


def _store_call(name: str, system: str, telemetry: Telemetry | None, metrics: Metrics | None) -> Any:
    """A store's coroutine method ``name``, timed into ``metrics`` and in a span of ``telemetry``."""
    ok, failed = metrics.store_timers(system, name) if metrics is not None else (None, None)
    clock = time.perf_counter

    async def call(self: _Observed, *args: Any, **kwargs: Any) -> Any:
        span = telemetry.store_call(system, name) if telemetry is not None else None
        started = clock()
        try:
            result = await getattr(self._inner, name)(*args, **kwargs)
        except BaseException as exc:
            if failed is not None:
                failed(clock() - started)
            if span is not None:
                assert telemetry is not None
                telemetry.end_call(span, exc)
            raise
        if ok is not None:
            ok(clock() - started)
        if span is not None:
            assert telemetry is not None
            telemetry.end_call(span, None)
        return result

    call.__name__ = call.__qualname__ = name
    return call


def _publish(
    self: _Observed, key: tuple[str, str], version: int, event: Any, data: bytes | None = None
) -> bool | None:
    telemetry = self._telemetry
    assert telemetry is not None
    span = telemetry.bus_publish(self._system, key[1])
    if span is None:  # it would not be recorded
        return self._inner.publish(key, version, event, data)  # type: ignore[attr-defined,no-any-return]
    error: BaseException | None = None
    try:
        return self._inner.publish(key, version, event, data)  # type: ignore[attr-defined,no-any-return]
    except BaseException as exc:
        error = exc
        raise
    finally:
        telemetry.end_call(span, error)


def _forward_method(name: str) -> Any:
    def call(self: _Observed, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._inner, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _forward_property(name: str) -> property:
    def get(self: _Observed) -> Any:
        return getattr(self._inner, name)

    def set_(self: _Observed, value: Any) -> None:
        setattr(self._inner, name, value)

    return property(get, set_)
