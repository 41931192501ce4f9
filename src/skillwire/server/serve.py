"""Running an A2AApplication under uvicorn, with a shutdown that ends streams before waiting on them, and the
connection budgets of ``app.limits`` (header size, header and body deadlines, keep-alive, open connections:
see :mod:`skillwire.server.http`)."""

from __future__ import annotations

import ctypes
import gc
import logging
import platform
import sys
from collections.abc import Callable
from typing import Any

import uvicorn

from skillwire.server.app import A2AApplication
from skillwire.server.descriptors import connection_ceiling, raise_fd_limit

__all__ = ["build_server", "serve"]

log = logging.getLogger("skillwire.http")


class _Server(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, app: A2AApplication, on_ready: Callable[[], None] | None
    ) -> None:
        super().__init__(config)
        self._a2a = app
        self._on_ready = on_ready

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            # Everything made so far (modules, the agent, its skills) lives as long as the process: moved out
            # of the collector's generations, it no longer makes every full collection long.
            gc.freeze()
        if self.started and self._on_ready is not None:
            self._on_ready()

    async def shutdown(self, sockets: Any = None) -> None:
        # Stop accepting connections, then let the runtime settle tasks and end open streams, so that
        # uvicorn's wait for in-flight responses does not wait on streams that would never end.
        for server in self.servers:
            server.close()
        try:
            await self._a2a.shutdown()
        finally:
            await super().shutdown(sockets)


def build_server(
    app: A2AApplication,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    on_ready: Callable[[], None] | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app`` (``.run()`` blocks; set ``.should_exit`` to stop it), with the HTTP
    connection budgets of ``app.limits``."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        server_header=False,
        ws="none",
        **_protocol_options(app),
    )
    # The one answer skillwire leaves incomplete on purpose is a stream dropped at its write deadline (the
    # stream logs it; the bounded protocol aborts the connection): uvicorn need not report it as an error.
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DroppedStreams) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_DroppedStreams())
    return _Server(config, app, on_ready)


#: Allocations from this size on are mapped and unmapped on their own, so their memory goes back to the system
#: when they are freed.
_MMAP_THRESHOLD = 256 * 1024


def _return_large_buffers() -> None:
    """Make glibc give large freed buffers back to the system at once.

    glibc raises its mmap threshold each time a mapped block is freed, so after a few large requests or
    answers (a 10 MiB body, a 25 MiB artifact) buffers of that size come from the heap and stay in the
    process after they are freed: measured here, a 25 MiB stream left the server 129 MiB larger, all of it
    free memory, and 29 MiB with a fixed threshold. Without glibc (musl, macOS) nothing is done."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, _MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
        # A fixed mmap threshold also fixes the trim threshold at 128 KiB, and glibc would then shrink its
        # heap after most requests: trim only once 16 MiB at its top are free.
        libc.mallopt(-1, 16 * 1024 * 1024)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # pragma: no cover - a libc without mallopt
        log.debug("mallopt is not available: large buffers stay in the process once freed")


class _DroppedStreams(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "ASGI callable returned without completing response."


def _protocol_options(app: A2AApplication) -> dict[str, Any]:
    """uvicorn options that bound connections: the bounded httptools protocol, or h11 where httptools is
    not installed."""
    limits = app.limits
    ceiling = connection_ceiling(limits.max_connections, listeners=1 if app.grpc_port is None else 2)
    try:
        from skillwire.server.http import protocol_for
    except ImportError:  # no httptools: it is a dependency on CPython only
        log.warning(
            "httptools is not installed: the HTTP header and body deadlines are not enforced (h11 bounds "
            "the headers it buffers, the keep-alive time and the connection count only)"
        )
        return {
            "http": "h11",
            "h11_max_incomplete_event_size": limits.max_header_bytes,
            "timeout_keep_alive": max(1, round(limits.keepalive_timeout)),
            "limit_concurrency": ceiling,
        }
    return {"http": protocol_for(limits, ceiling)}


def serve(
    app: A2AApplication,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` until interrupted, then shut down gracefully.

    This owns the process, so it shortens the interpreter's thread switch interval (5 ms by default) to
    1 ms: the SQLite writer thread then gets the GIL back promptly between statements, which raises
    throughput with the default store by about 15% here and costs the event loop nothing measurable. It
    also lifts the soft limit on open files to the hard one, so that ``max_connections`` need not be
    lowered to fit the descriptors (:mod:`skillwire.server.descriptors`).
    """
    sys.setswitchinterval(0.001)
    raise_fd_limit()
    _return_large_buffers()
    build_server(app, host=host, port=port, log_level=log_level, on_ready=on_ready).run()
