"""The spans a test's tracer provider ended, awaited by name or kind (never by sleeping). Needs the
OpenTelemetry SDK: import it after ``pytest.importorskip("opentelemetry.sdk")``."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanKind

#: Seconds a test waits for spans to end.
WAIT = 20.0


class Spans(SpanProcessor):
    """Every span that ended, in order; :meth:`wait` until enough of them did. A task run's span can end
    just after the request that started it has been answered, and a delivery's later still."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []
        self._changed = threading.Condition()

    def on_end(self, span: ReadableSpan) -> None:
        with self._changed:
            self.ended.append(span)
            self._changed.notify_all()

    def wait(self, name: str | SpanKind, count: int = 1) -> list[ReadableSpan]:
        """The spans named ``name`` (or of that kind), once ``count`` of them ended (AssertionError after
        WAIT seconds)."""
        with self._changed:
            found = self._changed.wait_for(lambda: len(self.named(name)) >= count, WAIT)
            assert found, f"{count} span(s) {name!r} did not end; ended: {[s.name for s in self.ended]}"
            return self.named(name)

    def named(self, name: str | SpanKind) -> list[ReadableSpan]:
        return [s for s in self.ended if (s.kind if isinstance(name, SpanKind) else s.name) == name]
