"""Bounded retries with exponential backoff and full jitter, honouring ``Retry-After``.

Only calls that are safe to repeat go through :meth:`RetryPolicy.call` (the client decides which); a retry
happens on a connection failure, an HTTP 429/503, or a gRPC UNAVAILABLE that says the server is busy (a
:class:`~skillwire.errors.ServerBusyError`, its ``retryAfter`` as Retry-After). The n-th retry waits a random time in
``[0, min(cap, base * 2**n)]`` ("full jitter"), or exactly ``Retry-After`` seconds when the agent sent it.
An agent asking to wait longer than ``cap`` gets no retry: the error is raised at once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from skillwire.client.errors import AgentConnectionError, HTTPStatusError
from skillwire.errors import ServerBusyError, StreamDroppedError

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "parse_retry_after"]

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({429, 503})


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` in seconds from now: delay-seconds or an HTTP-date (RFC 9110 §10.2.3); None when
    absent or unreadable. A date in the past means "now" (0.0)::

        parse_retry_after("2")                                  # 2.0
        parse_retry_after("Wed, 21 Oct 2026 07:28:00 GMT")      # seconds until then
    """
    if value is None:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" dates parse naive; HTTP-dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``retries`` extra attempts at most; delays in seconds."""

    retries: int = 3
    base: float = 0.2
    cap: float = 5.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.base < 0 or self.cap < 0:
            raise ValueError("retries, base and cap must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry number ``attempt`` (0-based), or None to give up."""
        if attempt >= self.retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.cap else None
        return random.uniform(0.0, min(self.cap, self.base * 2**attempt))

    def wait_for(self, error: Exception, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``error``, or None if it is not retried."""
        if isinstance(error, AgentConnectionError):
            return self.delay(attempt)
        if isinstance(error, HTTPStatusError) and error.status_code in RETRYABLE_STATUSES:
            return self.delay(attempt, error.retry_after)
        if isinstance(error, ServerBusyError) and not isinstance(error, StreamDroppedError):
            return self.delay(attempt, error.retry_after)  # the agent's 503 over gRPC (UNAVAILABLE)
        return None

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """``await fn()``, retried as this policy says."""
        attempt = 0
        while True:
            try:
                return await fn()
            except (AgentConnectionError, HTTPStatusError, ServerBusyError) as exc:
                wait = self.wait_for(exc, attempt)
                if wait is None:
                    raise
            attempt += 1
            await asyncio.sleep(wait)
