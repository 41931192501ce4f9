"""A blocking facade over :class:`~skillwire.client.Client`, for scripts, notebooks and REPLs.

::

    from skillwire import SyncClient

    with SyncClient.connect("http://127.0.0.1:8000") as client:
        task = client.send("hello")
        for event in client.stream("count to 3"):
            print(event)

Every method and property is the async client's (``close`` is its ``aclose``), with the same arguments and
results, run to completion on a private event loop in a background thread (so it also works where a loop
is already running, as in Jupyter).
Streams become plain iterators; leaving the ``for`` loop early closes the stream. The async client is at
``.aclient`` for anything this facade does not cover.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from skillwire.client.client import Client
from skillwire.client.retry import RetryPolicy
from skillwire.client.transport import Transport
from skillwire.protocol import models as m

__all__ = ["SyncClient"]

P = ParamSpec("P")
R = TypeVar("R")
E = TypeVar("E")


class _LoopThread:
    """An event loop running forever in a daemon thread; coroutines are submitted to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="skillwire-sync", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            # Ctrl-C (or any exit) while waiting: stop the call too, and wait for it to unwind.
            if not future.done():
                future.cancel()
                with contextlib.suppress(BaseException):
                    future.result(timeout=5.0)
            raise

    def iterate(self, events: AsyncIterator[E]) -> Iterator[E]:
        async def next_event() -> tuple[bool, E | None]:
            try:
                return True, await anext(events)
            except StopAsyncIteration:
                return False, None

        async def close() -> None:
            aclose: Callable[[], Awaitable[None]] | None = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

        try:
            while True:
                more, event = self.run(next_event())
                if not more:
                    return
                yield event  # type: ignore[misc]  # not None whenever ``more``
        finally:
            if not self.loop.is_closed():
                self.run(close())

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _blocking(
    method: Callable[Concatenate[Client, P], Awaitable[R]],
) -> Callable[Concatenate[SyncClient, P], R]:
    def call(self: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        async def run() -> R:
            return await method(self.aclient, *args, **kwargs)

        return self._loop.run(run())

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


def _iterating(
    method: Callable[Concatenate[Client, P], AsyncIterator[E]],
) -> Callable[Concatenate[SyncClient, P], Iterator[E]]:
    def call(self: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[E]:
        return self._loop.iterate(method(self.aclient, *args, **kwargs))

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class SyncClient:
    """The blocking twin of :class:`Client`. Make one with :meth:`connect`; close it (or use ``with``)."""

    def __init__(self, aclient: Client, loop: _LoopThread) -> None:
        self.aclient = aclient
        self._loop = loop

    @classmethod
    def connect(cls, base_url: str, **options: Any) -> SyncClient:
        """:meth:`Client.connect` with the same options (bindings, credentials, retries, timeout ...)."""
        loop = _LoopThread()
        try:
            aclient = loop.run(Client.connect(base_url, **options))
        except BaseException:
            loop.close()
            raise
        return cls(aclient, loop)

    def close(self) -> None:
        if self._loop.loop.is_closed():
            return
        try:
            self._loop.run(self.aclient.aclose())
        finally:
            self._loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def card(self) -> m.AgentCard:
        """The public card, as last fetched."""
        return self.aclient.card

    @property
    def interface(self) -> m.AgentInterface | None:
        """The card's interface in use (its URL, binding and protocol version)."""
        return self.aclient.interface

    @property
    def generations(self) -> bool:
        """Whether the agent keeps A2A 1.1 generations and this client asked for them."""
        return self.aclient.generations

    @property
    def idempotency_keys(self) -> bool:
        """Whether the agent honours idempotency keys (messages and push-config calls are then retried)."""
        return self.aclient.idempotency_keys

    @property
    def transport(self) -> Transport:
        """The async client's transport (it runs on this client's own event loop)."""
        return self.aclient.transport

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of calls that are safe to repeat."""
        return self.aclient.retry

    @retry.setter
    def retry(self, policy: RetryPolicy) -> None:
        self.aclient.retry = policy

    refresh_card = _blocking(Client.refresh_card)
    get_extended_card = _blocking(Client.get_extended_card)
    send = _blocking(Client.send)
    stream = _iterating(Client.stream)
    get_task = _blocking(Client.get_task)
    list_tasks = _blocking(Client.list_tasks)
    cancel_task = _blocking(Client.cancel_task)
    subscribe = _iterating(Client.subscribe)
    wait = _blocking(Client.wait)
    converse = _blocking(Client.converse)
    create_push_config = _blocking(Client.create_push_config)
    get_push_config = _blocking(Client.get_push_config)
    list_push_configs = _blocking(Client.list_push_configs)
    delete_push_config = _blocking(Client.delete_push_config)
