"""The one way a test runs a server in a thread: :func:`start` (and :func:`running`, its context manager) serves
an ASGI app under uvicorn on 127.0.0.1, returns once the server accepts connections, and :meth:`Running.stop`
stops it within a bound, failing loudly when its thread does not end.

What is served:

- an :class:`~skillwire.server.app.A2AApplication`: as ``skillwire serve`` serves it (skillwire's own uvicorn
  server: the HTTP budgets of ``app.limits``, TLS from ``app.tls``, its shutdown that ends streams);
- a ``uvicorn.Config``: as configured (a test of the uvicorn settings themselves, such as TLS);
- any other ASGI app: under plain uvicorn, ``options`` being ``uvicorn.Config``'s keyword arguments
  (``tls=(cert, key)`` for HTTPS).

The server listens on a socket bound before it starts (``sock``, ``port`` or a free port), so no other
server of the run can take its port in between. Nothing else in tests/ makes a ``uvicorn.Server``
(tests/test_serving.py holds the folder to it)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from skillwire.server.app import A2AApplication
from skillwire.server.serving.serve import build_server

HOST = "127.0.0.1"
#: The cap on a start and on a stop, in seconds.
WAIT = 15.0
#: How long a server of any ASGI app waits, once asked to stop, for the connections still open.
GRACE = 5.0


def bound_socket(port: int = 0) -> socket.socket:
    """A socket bound on 127.0.0.1 (``port``, or one the kernel picks) for a server of this process to listen
    on: no window between choosing the port and binding it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    return sock


@dataclass(eq=False)
class Running:
    """A server running in a thread of this process."""

    #: What is served (the A2AApplication, the ASGI app, or the app of the ``uvicorn.Config``).
    app: Any
    port: int
    thread: threading.Thread
    server: uvicorn.Server
    scheme: str = "http"
    #: The event loop the server runs on (to run a coroutine on it from the test).
    loop: asyncio.AbstractEventLoop = field(default=None)  # type: ignore[assignment]
    host: str = HOST

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def rpc_url(self) -> str:
        return self.url + "/"

    @property
    def started(self) -> bool:
        """Whether the server's start-up worked (False when the app's start-up failed: ``must_start=False``)."""
        return bool(self.server.started)

    def stop(self, timeout: float = WAIT) -> None:
        """Stop the server and wait, at most ``timeout`` seconds, for its thread to end (AssertionError if not,
        saying where the server's thread and each of its loop's tasks are waiting)."""
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"the server at {self.url} did not stop within {timeout} s\n{self._where()}")

    def _where(self) -> str:
        """The stack of the server's thread and of each task on its loop (read from this thread: a snapshot
        for a failure message, which may catch a task between two steps)."""
        frame = sys._current_frames().get(self.thread.ident or 0)
        lines = ["thread:", *traceback.format_stack(frame)] if frame is not None else ["thread: gone"]
        with contextlib.suppress(RuntimeError):  # the set of tasks changed while it was read
            for task in list(asyncio.all_tasks(self.loop)):
                lines.append(f"task {task.get_name()}: {task.get_coro()!r}")
                for stack in task.get_stack():
                    lines.extend(traceback.format_stack(stack))
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class _Server(uvicorn.Server):
    """uvicorn's server, which says when its start-up is over (whether it worked: ``started``) and runs
    ``on_shutdown`` on its loop after its own shutdown."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_startup: Callable[[], None],
        on_shutdown: Callable[[], Awaitable[None]] | None,
    ) -> None:
        super().__init__(config)
        self._on_startup = on_startup
        self._on_shutdown = on_shutdown

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        except SystemExit:  # uvicorn exits the process when the lifespan's start-up fails: not in a test
            self.should_exit = True
        finally:
            self._on_startup()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            if self._on_shutdown is not None:
                await self._on_shutdown()


def _config(app: Any, tls: tuple[Path, Path] | None, options: dict[str, Any]) -> uvicorn.Config:
    if isinstance(app, uvicorn.Config):
        if tls is not None or options:
            raise TypeError("a uvicorn.Config is served as configured: no tls or options beside it")
        return app
    ssl = {} if tls is None else {"ssl_certfile": str(tls[0]), "ssl_keyfile": str(tls[1])}
    # A connection a client keeps open (a browser's stream) would hold uvicorn's shutdown forever: it gets
    # GRACE seconds, as skillwire's own server gives its streams a bounded wait.
    defaults = {"log_level": "warning", "timeout_graceful_shutdown": GRACE}
    return uvicorn.Config(app, host=HOST, **{**defaults, **ssl, **options})


def start(
    app: Any,
    *,
    sock: socket.socket | None = None,
    port: int = 0,
    tls: tuple[Path, Path] | None = None,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    must_start: bool = True,
    name: str = "uvicorn",
    timeout: float = WAIT,
    **options: Any,
) -> Running:
    """Serve ``app`` in a thread (see the module's docstring for what it may be) and return once it accepts
    connections; ``sock``: the bound socket to listen on (the server closes it when it ends), else one bound
    on ``port`` (0: a free one). ``on_shutdown``: a coroutine function run on the server's loop once it has
    shut down (not for an A2AApplication, which shuts itself down). A server whose start-up fails raises
    RuntimeError, unless ``must_start`` is False (then ``started`` is False)."""
    listening = sock or bound_socket(port)
    bound = int(listening.getsockname()[1])
    settled = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    def on_startup() -> None:
        loops.append(asyncio.get_running_loop())
        settled.set()

    server: uvicorn.Server
    if isinstance(app, A2AApplication):
        if tls is not None or on_shutdown is not None or options:
            raise TypeError("an A2AApplication is served with its own settings (tls: app.tls)")
        server, served, secure = build_server(app, host=HOST, port=bound, on_ready=on_startup), app, app.tls
    else:
        config = _config(app, tls, options)
        server, served = _Server(config, on_startup, on_shutdown), config.app
        secure = config.is_ssl

    def run() -> None:
        try:
            with listening:
                server.run(sockets=[listening])
        finally:
            settled.set()  # a start-up that failed ends the thread without calling on_startup

    thread = threading.Thread(target=run, name=f"{name}-{bound}", daemon=True)
    thread.start()
    running = Running(served, bound, thread, server, "https" if secure else "http")
    if not settled.wait(timeout):
        running.stop()
        raise RuntimeError(f"the test server {running.url} did not start within {timeout} s")
    if loops:
        running.loop = loops[0]
    if must_start and not server.started:
        running.stop()
        reason = getattr(served, "startup_error", None)
        raise RuntimeError(f"the test server {running.url} did not start" + (f": {reason}" if reason else ""))
    return running


@contextlib.contextmanager
def running(app: Any, **options: Any) -> Iterator[Running]:
    """:func:`start` for the block: the server is stopped (within its bound) when the block ends."""
    server = start(app, **options)
    try:
        yield server
    finally:
        server.stop()


__all__ = ["GRACE", "HOST", "WAIT", "Running", "bound_socket", "running", "start"]
