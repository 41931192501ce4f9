"""Running an A2AApplication under uvicorn, with a shutdown that ends streams before waiting on them, and the
connection budgets of ``app.limits`` (header size, header and body deadlines, keep-alive, open connections:
see :mod:`skillwire.server.serving.http`)."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import platform
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import uvicorn

from skillwire.errors import MissingExtraError, SkillwireError
from skillwire.protocol.limits import Limits, describe_duration
from skillwire.server.app import A2AApplication
from skillwire.server.bindings.descriptors import connection_ceiling, raise_fd_limit
from skillwire.server.bindings.hosts import is_loopback
from skillwire.server.observability.logs import configure_logging
from skillwire.server.options import Serving
from skillwire.server.serving.uvicorn_tls import uvicorn_config
from skillwire.stores.retention import RetentionStore

__all__ = [
    "build_server",
    "configure_logging",
    "print_banner",
    "serve",
    "serve_reloading",
    "serve_workers",
    "warn_unnamed",
]

log = logging.getLogger("skillwire.http")


@dataclass(frozen=True)
class _Banner:
    """Where a reloaded server says it serves (picklable: it goes to each process ``--reload`` starts)."""

    host: str
    port: int
    public_url: str | None


#: The young generation's threshold of a serving process (see tune_gc).
GC_YOUNG_THRESHOLD = 10_000


def tune_gc() -> None:
    """Set the cyclic garbage collector up for serving, once the server has started.

    Everything made so far (modules, the agent, its skills) lives as long as the process: frozen, out of the
    collector's generations, it no longer makes every full collection long.

    The young generation's threshold goes from the interpreter's 700 (2,000 from Python 3.13) to
    GC_YOUNG_THRESHOLD. The threshold counts live container objects made since the last collection, and the
    requests in flight keep that many alive at once (their coroutines, frames, futures, events): at 16 to 64
    concurrent SendMessages one request in 16 to 20 started a young collection, which found almost nothing
    to free (649 objects in 2,014 collections) and pushed what it traversed into the older generations,
    whose collections then cost more. Measured under wrk with a collector callback: 8-9 µs of collection a
    request at c=16 and 13-20 µs at c=64 with 700 (2,000: 0-2 and 10-17), 0-1.7 µs with 10,000
    (bench/gc_cost.py). Cycles are
    still found: a collection comes every 10,000 objects instead of every 700. A threshold the process
    already raised (or 0, collection off) is left as it is."""
    gc.freeze()
    young, *older = gc.get_threshold()
    if 0 < young < GC_YOUNG_THRESHOLD:
        gc.set_threshold(GC_YOUNG_THRESHOLD, *older)


class _Server(uvicorn.Server):
    """uvicorn's server, which ends streams before waiting on them; ``app`` None: the application the config
    loads (a factory's, under ``--reload``), whose banner ``banner`` prints once it serves."""

    def __init__(
        self,
        config: uvicorn.Config,
        app: A2AApplication | None,
        on_ready: Callable[[], None] | None,
        banner: _Banner | None = None,
    ) -> None:
        super().__init__(config)
        self._a2a = app
        self._on_ready = on_ready
        self._banner = banner

    async def startup(self, sockets: Any = None) -> None:
        if self._a2a is None:
            self._a2a = _unwrap(self.config.loaded_app)
        if self._a2a is not None and not await _started(self._a2a):
            self.should_exit = True  # before anything listens; the caller reports app.startup_error, once
            return
        await super().startup(sockets)
        if self.started:
            tune_gc()
        if self.started and self._banner is not None and self._a2a is not None:
            banner = self._banner
            print_banner(
                self._a2a,
                self._a2a.card.name,
                host=banner.host,
                port=banner.port,
                public_url=banner.public_url,
            )
        if self.started and self._on_ready is not None:
            self._on_ready()

    async def shutdown(self, sockets: Any = None) -> None:
        # Stop accepting connections, then let the runtime settle tasks and end open streams, so that
        # uvicorn's wait for in-flight responses does not wait on streams that would never end.
        for server in self.servers:
            server.close()
        try:
            if self._a2a is not None:
                await self._a2a.shutdown()
        finally:
            await super().shutdown(sockets)


async def _started(app: A2AApplication) -> bool:
    """Start ``app`` (its store, its bus, its security, gRPC) before uvicorn listens, so that a server that
    cannot start says so once and exits at once: False when it failed (``app.startup_error`` says why; a
    failure that is not a known condition is logged with its traceback here)."""
    try:
        await app.startup()
    except Exception as exc:
        if not isinstance(exc, SkillwireError):
            log.exception("start-up failed", exc_info=exc)
        return False
    return True


def print_banner(
    app: A2AApplication, name: str, *, host: str, port: int, public_url: str | None = None
) -> None:
    """Print, on stderr, exactly what ``app`` serves for the agent ``name``: its URL (``https://`` when
    ``app.tls`` is set), its card's URL, gRPC, the console, Prometheus metrics (only when ``/metrics``
    answers), where traces go, the event bus and the task store (what ``skillwire serve`` and ``Agent.run()``
    print once the server accepts connections). Stdout is left to what the process is asked to write there
    (spans, with ``OTEL_TRACES_EXPORTER=console``)."""
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    scheme = "http" if app.tls is None else "https"
    base = public_url.rstrip("/") if public_url else f"{scheme}://{shown_host}:{port}"
    lines = [f"skillwire: serving {name!r} at {base}/", f"  agent card: {base}/.well-known/agent-card.json"]
    if app.card_endpoint.signers:
        kids = ", ".join(signer.kid for signer in app.card_endpoint.signers)
        lines.append(f"  card signed by {kids}; keys: {base}/.well-known/jwks.json")
    if app.grpc_url:
        lines.append(f"  gRPC: {app.grpc_url}")
    if app.console is not None:
        lines.append(f"  console: {base}/console/")
    if app.metrics is not None and app.metrics.serves_endpoint:
        lines.append(f"  metrics: {base}/metrics")
    for mount in app.mounts:
        lines.append(f"  {mount.label}: {base}{mount.path}")
    if app.telemetry is not None:
        lines.append(f"  traces: {app.telemetry.destination}")
    if app.runtime is not None:
        lines.append(f"  event bus: {bus_description(app.runtime.bus)}")
    if app.store is not None and isinstance(app.store, RetentionStore):
        lines.append(
            f"  finished tasks kept: {describe_duration(app.limits.task_retention)} (--task-retention)"
        )
    if app.store is not None:
        lines.append(f"  task store: {without_secret(app.store.url)}")
    print("\n".join(lines), file=sys.stderr, flush=True)


def bus_description(bus: Any) -> str:
    """The event bus in words: its URL without a password, or that it is this process's own."""
    url = getattr(bus, "url", None)
    if not isinstance(url, str) or not url:
        return "memory:// (this process only)"
    return without_secret(url)


def without_secret(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***`` (a banner is not the place for it)."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.partition("@")
    if not sep or not at or ":" not in userinfo or "/" in userinfo:
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"


def _log_options(json_logs: bool) -> dict[str, Any]:
    """With JSON logs, uvicorn configures no logging of its own: its records go to the JSON handler too."""
    return {"log_config": None} if json_logs else {}


def _uvicorn_level(level: str) -> str:
    # uvicorn's info lines (its process id, "Uvicorn running on ...") repeat what the banner says.
    return "warning" if level.lower() == "info" else level


#: The uvicorn settings every skillwire server shares: the access log is skillwire's own (one line per
#: request, ``skillwire.access``), the lifespan runs, no Server header, no WebSockets.
_COMMON: dict[str, Any] = {
    "access_log": False,
    "lifespan": "on",
    "timeout_graceful_shutdown": 10,
    "server_header": False,
    "ws": "none",
}


def build_server(
    app: A2AApplication,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    on_ready: Callable[[], None] | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app`` (``.run()`` blocks; set ``.should_exit`` to stop it), with the HTTP
    connection budgets of ``app.limits``, over TLS when ``app.tls`` is set (:mod:`skillwire.server.bindings.tls`)."""
    config = uvicorn_config(
        app.tls,
        app,
        **_COMMON,
        **_log_options(app.options.observability.json_logs),
        host=host,
        port=port,
        log_level=_uvicorn_level(log_level),
        **_protocol_options(
            app.limits,
            grpc=app.grpc_port is not None,
            rejected=app.metrics.rejected if app.metrics is not None else None,
        ),
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


def _unwrap(app: Any) -> A2AApplication | None:
    """The A2AApplication under uvicorn's middleware (each holds the next as ``.app``)."""
    for _ in range(10):
        if isinstance(app, A2AApplication) or app is None:
            return app
        app = getattr(app, "app", None)
    return None


def _protocol_options(
    limits: Limits, *, grpc: bool, rejected: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """uvicorn options that bound connections: the bounded httptools protocol, or h11 where httptools is
    not installed."""
    ceiling = connection_ceiling(limits.max_connections, listeners=2 if grpc else 1)
    try:
        from skillwire.server.serving.http import protocol_for
    except ImportError:  # no httptools: it is a dependency on CPython only
        log.warning(
            "httptools is not installed: the HTTP header and body deadlines are not enforced (h11 bounds "
            "the headers it buffers, the keep-alive time and the connection count only)"
        )
        return _h11_options(limits, grpc=grpc)
    return {"http": protocol_for(limits, ceiling, rejected)}


def _h11_options(limits: Limits, *, grpc: bool) -> dict[str, Any]:
    return {
        "http": "h11",
        "h11_max_incomplete_event_size": limits.max_header_bytes,
        "timeout_keep_alive": max(1, round(limits.keepalive_timeout)),
        "limit_concurrency": connection_ceiling(limits.max_connections, listeners=2 if grpc else 1),
    }


def serve(
    app: A2AApplication,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` until interrupted, then shut down gracefully; log records from ``log_level`` on go to
    stderr (:func:`configure_logging`).

    This owns the process, so it shortens the interpreter's thread switch interval (5 ms by default) to
    1 ms: the SQLite writer thread then gets the GIL back promptly between statements, which raises
    throughput with the default store by about 15% here and costs the event loop nothing measurable. It
    also lifts the soft limit on open files to the hard one, so that ``max_connections`` need not be
    lowered to fit the descriptors (:mod:`skillwire.server.bindings.descriptors`).
    """
    configure_logging(log_level)
    warn_unnamed(app, host)
    sys.setswitchinterval(0.001)
    raise_fd_limit()
    _return_large_buffers()
    build_server(app, host=host, port=port, log_level=log_level, on_ready=on_ready).run()


def warn_unnamed(app: A2AApplication, host: str) -> None:
    """Warn when a server reachable from other machines has neither a public URL nor allowed hosts: its card
    then names the address each connection reached (the Host header is never trusted)."""
    if is_loopback(host) or app.card_endpoint.public_url or app.allowed_hosts is not None:
        return
    log.warning(
        "serving on %s with neither a public URL nor allowed hosts: the agent card names the address each"
        " connection reached, whatever Host it sent; set --public-url URL or --allowed-host HOST[:PORT]"
        " (SKILLWIRE_PUBLIC_URL, SKILLWIRE_ALLOWED_HOSTS)",
        host,
    )


def serve_reloading(
    factory: str,
    *,
    folder: str,
    includes: Sequence[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    options: Serving | None = None,
) -> None:
    """Serve the application ``factory`` (``"module:function"``, called in each server process) and start a
    fresh process whenever a file matching ``includes`` changes under ``folder``: uvicorn's reloader over
    watchfiles, which alone honours ``reload_includes`` (uvicorn's fallback watches ``*.py`` only). For
    development: HTTP is served by h11, without the header and body deadlines of :func:`serve`; over
    ``options.network.tls`` when it is set (the factory's app holds it too, for gRPC and the banner), with the
    budgets of ``options.limits`` and uvicorn's own logging off for JSON logs."""
    options = options or Serving()
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        raise MissingExtraError("--reload needs watchfiles", "reload") from None
    configure_logging(log_level)
    config = uvicorn_config(
        options.network.tls,
        factory,
        **_COMMON,
        **_log_options(options.observability.json_logs),
        factory=True,
        host=host,
        port=port,
        log_level=_uvicorn_level(log_level),
        reload=True,
        reload_dirs=[folder],
        reload_includes=list(includes),
        # h11: the bounded httptools protocol is a class made for the limits, which cannot be handed to the
        # processes the reloader starts; a development server goes without its header and body deadlines.
        **_h11_options(options.limits, grpc=options.grpc.port is not None),
    )
    server = _Server(config, None, None, _Banner(host, port, options.network.public_url))
    _reloader(config, server.run, [config.bind_socket()]).run()


def _reloader(config: uvicorn.Config, target: Callable[..., None], sockets: list[socket.socket]) -> Any:
    """uvicorn's watchfiles reloader, watching from the moment it starts the first server process.

    Why not uvicorn's as it is: it starts watching at its first check, which waits ``reload_delay`` (0.25 s)
    after it started the process, and a server that announced itself in less time (a start-up of about
    0.2 s) did not see an edit saved meanwhile, ever. Between later checks the watcher keeps what changed, so
    only the first wait is skipped."""
    from uvicorn.supervisors.watchfilesreload import WatchFilesReload

    class Reload(WatchFilesReload):
        watching = False

        def pause(self) -> None:
            if self.watching:
                super().pause()
            self.watching = True

    return Reload(config, target=target, sockets=sockets)


# -- several worker processes on one port ---------------------------------------------------------------------

#: A worker that exits this soon after it started, this many times in a row, stops the supervisor: it would
#: only fail again (a database that refuses it, a port taken).
_QUICK_EXIT = 5.0
_QUICK_EXITS = 5


def serve_workers(
    build: Callable[[], A2AApplication],
    workers: int,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    on_ready: Callable[[], None] | None = None,
) -> int:
    """Serve ``workers`` processes on one listening socket (``skillwire serve --workers N``), each with the
    application ``build()`` makes in it; returns the exit status.

    This process binds the socket, then forks the workers, which inherit it: the kernel hands each new
    connection to one of them. The application is built in each worker after the fork, so no thread, event
    loop or database connection is shared between processes. The workers must share their tasks and events
    through the store and the bus (PostgreSQL, Redis), which the caller checks. A worker that dies is
    started again (unless it keeps dying at once); SIGTERM or SIGINT stops every worker gracefully (each
    settles its tasks and ends its streams as a single server does) and then this process."""
    configure_logging(log_level)
    sockets = _worker_sockets(host, port, workers)
    supervisor = _Supervisor(build, sockets, host=host, port=port, log_level=log_level, on_ready=on_ready)
    previous = {s: signal.signal(s, supervisor.stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return supervisor.supervise(workers)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for sock in sockets:
            sock.close()


class _Supervisor:
    """The process that forks the workers of :func:`serve_workers`, starts again each that dies and stops
    them all on a signal."""

    def __init__(
        self,
        build: Callable[[], A2AApplication],
        sockets: list[socket.socket],
        *,
        host: str,
        port: int,
        log_level: str,
        on_ready: Callable[[], None] | None,
    ) -> None:
        self._build = build
        self._sockets = sockets
        self._host = host
        self._port = port
        self._log_level = log_level
        self._on_ready = on_ready
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (worker number, start time)
        self.stopping = False

    def supervise(self, workers: int) -> int:
        """Starts the workers and waits on them, starting again each that exits (until they keep exiting at
        once, or a signal stops them); returns the exit status."""
        quick = 0
        status = 0
        for number in range(workers):
            self.start(number)
        log.info("serving with %d worker processes on %s:%d", workers, self._host, self._port)
        while self.children:
            try:
                pid, code = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries os.wait
                continue
            number, started = self.children.pop(pid, (-1, 0.0))
            if number < 0 or self.stopping:
                continue
            exit_code = os.waitstatus_to_exitcode(code)
            quick = quick + 1 if time.monotonic() - started < _QUICK_EXIT else 0
            if quick >= _QUICK_EXITS:
                log.error("worker processes keep exiting at once (last status %d): stopping", exit_code)
                status = 1
                self.stop(signal.SIGTERM, None)
                continue
            log.warning("worker %d (pid %d) exited with status %d: starting it again", number, pid, exit_code)
            self.start(number)
        return status

    def start(self, number: int) -> None:
        """Forks worker ``number``."""
        pid = os.fork()
        if pid == 0:
            self._work(number)
        self.children[pid] = (number, time.monotonic())

    def stop(self, signum: int, frame: Any) -> None:
        """(the handler of SIGTERM and SIGINT) Stops every worker gracefully."""
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)

    def _work(self, number: int) -> NoReturn:
        """(in the forked worker) Builds the application and serves it on the worker's socket, then exits:
        0, 3 when the server did not start, 1 when it failed."""
        code = 0
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            app = self._build()
            warn_unnamed(app, self._host)
            sys.setswitchinterval(0.001)
            raise_fd_limit()
            _return_large_buffers()
            ready = self._on_ready if number == 0 else None
            own = self._sockets[number % len(self._sockets)]
            for other in self._sockets:
                if other is not own:
                    other.close()  # the supervisor keeps it for the worker it belongs to
            server = build_server(
                app, host=self._host, port=self._port, log_level=self._log_level, on_ready=ready
            )
            server.run(sockets=[own])
            code = 0 if server.started else 3
        except BaseException:  # a worker reports and exits; the supervisor goes on
            log.exception("worker %d failed", number)
            code = 1
        finally:
            os._exit(code)


def _worker_sockets(host: str, port: int, workers: int) -> list[socket.socket]:
    """The listening sockets of ``workers`` processes on ``host:port``: one each, bound with SO_REUSEPORT,
    so that the kernel spreads new connections evenly over the workers (on one shared socket, the worker
    that is least busy at each wake-up takes it, and with keep-alive connections one worker can end up with
    all of them). Where SO_REUSEPORT is missing, one socket all the workers share. The supervisor binds them
    all before any fork, so a port in use fails at once, and keeps each open for the worker started again."""
    reuse_port = getattr(socket, "SO_REUSEPORT", None)
    if reuse_port is None or workers < 2:  # pragma: no cover - every Linux has it
        config = uvicorn.Config(app="skillwire:Agent", host=host, port=port)  # binds as uvicorn would
        return [config.bind_socket()]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        # First a socket without SO_REUSEPORT: it fails if anything listens there, another server with
        # SO_REUSEPORT included (whose group the sockets below would otherwise join, sharing its port).
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
            port = probe.getsockname()[1]  # port 0: the one the system chose
        for _ in range(workers):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, reuse_port, 1)
            sock.bind((host, port))
            sock.listen(2048)
            sock.set_inheritable(True)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise SystemExit(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sockets
