"""Shared fixtures: a real uvicorn server on 127.0.0.1, strict protobuf checks, example agents."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import random
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
import pytest

import serving
from serving import Running
from skillwire import Agent, Executor, RequestContext, TaskEvents
from skillwire.cli.targets import load_agent
from skillwire.server.app import A2AApplication
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
A2A_V1 = {"A2A-Version": "1.0"}


#: The slowest files, slowest first (seconds in a one-process run: 74, 42, 39, 29, 29, 22, 22, 18). They are
#: handed to the workers first, so that none is left running one of them alone at the end of the run.
SLOW_FIRST = (
    "test_bench_smoke.py",
    "test_cluster.py",
    "test_console_browser.py",
    "test_interop_a2a_sdk.py",
    "test_retention.py",
    "test_protobuf_convert.py",
    "test_client_v03.py",
    "test_llm_adapters.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    # a stable sort: each file keeps its tests' order
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))


#: Ports handed out by :func:`free_port` in this process, so that no two servers of a run are given the same.
_GIVEN: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _worker_ports() -> tuple[int, int]:
    """The ports this process may hand out: below the kernel's ephemeral range, and a slice of their own for
    each pytest-xdist worker, so that two workers never offer the same port to two servers at once."""
    low, _ = _ephemeral_range()
    first = 20000 if low > 21000 else 1024
    last = low - 1 if low > 21000 else 65535
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    share = (last - first + 1) // workers
    return first + worker * share, first + (worker + 1) * share - 1


def free_port() -> int:
    """A port nothing listens on, for a server a test starts by port number (a subprocess).

    It comes from below the kernel's ephemeral range: a port the kernel hands out (``bind(0)``) is also the
    source port of any outgoing connection, so between this answer and the server's bind, a client connection
    of the same run could take it (seen in CI as "address already in use")."""
    first, last = _worker_ports()
    for _ in range(200):
        port = random.randint(first, last)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    raise RuntimeError("no free port found")


#: A server of this process in a thread (tests/serving.py); ``start_server(app)`` starts one.
RunningServer = Running


def start_server(app: A2AApplication, timeout: float = serving.WAIT) -> RunningServer:
    """Run ``app`` under uvicorn in a thread and wait until it accepts connections."""
    return serving.start(app, timeout=timeout)


def serve_asgi(app: Any) -> tuple[str, Callable[[], None]]:
    """Serve any ASGI app under uvicorn in a thread, lifespan on: its URL and a function that stops it."""
    server = serving.start(app, lifespan="on")
    return server.url, server.stop


async def _no_outside_dns(host: str, port: int) -> list[Any]:
    """The webhook resolver while tests run: ``localhost`` is this machine, any other name does not resolve,
    so no push delivery a test causes (a config naming https://example.com/...) asks real DNS or leaves the
    machine. Literal addresses (127.0.0.1: the receivers tests start) are not resolved at all."""
    import ipaddress

    if host.rstrip(".").lower() == "localhost":
        return [ipaddress.ip_address("127.0.0.1")]
    raise socket.gaierror(socket.EAI_NONAME, f"tests resolve no outside name ({host})")


@pytest.fixture(autouse=True, scope="session")
def _webhooks_stay_on_this_machine() -> Iterator[None]:
    import skillwire.server.notifications.outbound as outbound

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outbound, "resolve", _no_outside_dns)
        yield


@pytest.fixture
def serve() -> Iterator[Callable[[A2AApplication], RunningServer]]:
    """``serve(app)`` starts a real server; every server started is stopped after the test."""
    running: list[RunningServer] = []

    def _serve(app: A2AApplication) -> RunningServer:
        srv = start_server(app)
        running.append(srv)
        return srv

    yield _serve
    for srv in running:
        if srv.thread.is_alive():
            srv.stop()


def example_agent(name: str) -> Agent:
    return load_agent(str(EXAMPLES / name))


@pytest.fixture
def echo_agent() -> Agent:
    return example_agent("echo")


def secure_agent(keys: dict[str, str]) -> Agent:
    """An agent behind an API key (``X-API-Key``; ``keys`` maps each subject to its key) whose one skill,
    ``whoami``, answers its caller's subject."""
    from skillwire import SkillContext
    from skillwire.security import APIKey, Security

    agent = Agent("Secure", "Knows its callers", security=Security(APIKey("apiKey", keys=keys)))

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who called."""
        return ctx.principal.subject

    return agent


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def user_message(text: str, **extra: Any) -> dict[str, Any]:
    import uuid

    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **extra}


# -- strict protobuf conformance -----------------------------------------------------------------------


def assert_proto(obj: Any, message_name: str) -> Any:
    """Parse ``obj`` (JSON text, bytes or value) strictly into ``lf.a2a.v1.<message_name>``."""
    from a2a.types import a2a_pb2
    from google.protobuf import json_format

    text = obj if isinstance(obj, str) else obj.decode() if isinstance(obj, bytes) else json.dumps(obj)
    message = getattr(a2a_pb2, message_name)()
    json_format.Parse(text, message, ignore_unknown_fields=False)
    return message


RESULT_TYPES = {
    "SendMessage": "SendMessageResponse",
    "GetTask": "Task",
    "CancelTask": "Task",
    "ListTasks": "ListTasksResponse",
    "SendStreamingMessage": "StreamResponse",
    "SubscribeToTask": "StreamResponse",
    "GetExtendedAgentCard": "AgentCard",
}


def assert_rpc_result(response: dict[str, Any], method: str) -> dict[str, Any]:
    """Check a JSON-RPC success response and that its result is strict ProtoJSON; return the result."""
    assert response.get("jsonrpc") == "2.0", response
    assert "error" not in response, response
    result = response["result"]
    assert_proto(result, RESULT_TYPES[method])
    return result  # type: ignore[no-any-return]


def assert_rpc_error(response: dict[str, Any], code: int) -> dict[str, Any]:
    assert response.get("jsonrpc") == "2.0", response
    assert "result" not in response, response
    error = response["error"]
    assert error["code"] == code, response
    assert isinstance(error["message"], str) and error["message"]
    data = error.get("data")
    assert isinstance(data, list) and data, response
    info = data[0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["domain"] == "a2a-protocol.org"
    assert all(isinstance(v, str) for v in info.get("metadata", {}).values())
    # The detail objects are google.rpc types; check ErrorInfo's shape with protobuf too.
    from google.protobuf import json_format
    from google.rpc import error_details_pb2

    body = {k: v for k, v in info.items() if k != "@type"}
    json_format.ParseDict(body, error_details_pb2.ErrorInfo())
    return error  # type: ignore[no-any-return]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    """An open store, empty: the memory store, a SQLite file, a fresh PostgreSQL schema (runtime semantics
    on each)."""
    if request.param == "postgres":
        from skillwire.stores.postgres import PostgresTaskStore

        async with postgres_schema() as url:
            pg = PostgresTaskStore(url)
            await pg.open()
            yield pg
            await pg.close()
        return
    s: TaskStore = MemoryTaskStore() if request.param == "memory" else SQLiteTaskStore(tmp_path / "t.db")
    await s.open()
    yield s
    await s.close()


# -- PostgreSQL ----------------------------------------------------------------------------------------------

#: The database the PostgreSQL tests use (trust auth); each test gets a fresh schema in it.
POSTGRES_DSN = os.environ.get("SKILLWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_postgres_dsn: list[str] = []


async def postgres_dsn() -> str:
    """A DSN that connects: POSTGRES_DSN, else the same without its user (the current user); skips (or
    fails under SKILLWIRE_REQUIRE_SERVICES=1) when PostgreSQL is unreachable."""
    if _postgres_dsn:
        return _postgres_dsn[0]
    from urllib.parse import urlsplit, urlunsplit

    import asyncpg

    parts = urlsplit(POSTGRES_DSN)
    userless = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    errors = []
    for dsn in dict.fromkeys((POSTGRES_DSN, userless)):
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            errors.append(f"{dsn}: {exc}")
            continue
        await conn.close()
        _postgres_dsn.append(dsn)
        return dsn
    skip_without_service("PostgreSQL", "; ".join(errors))
    raise AssertionError("unreachable")  # skip_without_service raises


@contextlib.asynccontextmanager
async def postgres_schema() -> AsyncIterator[str]:
    """The URL of a fresh schema (``?schema=sw_test_...``), dropped with everything in it afterwards."""
    import uuid

    import asyncpg

    dsn = await postgres_dsn()
    schema = f"sw_test_{uuid.uuid4().hex[:16]}"
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    finally:
        conn = await asyncpg.connect(dsn, timeout=5)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


# -- `skillwire serve` in a subprocess ---------------------------------------------------------------------

PROCESS_TIMEOUT = 20.0


class ServerExited(AssertionError):
    """The server process ended before it served; ``returncode`` and ``output`` say how."""

    def __init__(self, returncode: int, output: str) -> None:
        super().__init__(f"server exited with {returncode}:\n{output}")
        self.returncode = returncode
        self.output = output


class Served:
    def __init__(self, proc: subprocess.Popen[str], port: int, lines: list[str]) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        #: Everything the process printed so far (the reader thread keeps adding to it).
        self.lines = lines
        self.printed = threading.Condition()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(self.url, json=rpc(method, params), headers=A2A_V1, timeout=PROCESS_TIMEOUT)
        return response.json()  # type: ignore[no-any-return]

    def wait_for_output(self, text: str, timeout: float = PROCESS_TIMEOUT) -> str:
        """The first line the process printed that holds ``text``, waiting for it (AssertionError if it does
        not come within ``timeout``)."""
        with self.printed:
            found = self.printed.wait_for(lambda: next((x for x in self.lines if text in x), None), timeout)
        assert found is not None, f"the server never printed {text!r}:\n{''.join(self.lines)}"
        return found


def start_process(
    target: str,
    store: str,
    cwd: Path,
    *extra: str,
    launcher: tuple[str, ...] = ("-m", "skillwire"),
    port: int | None = None,
    **popen: Any,
) -> Served:
    """``skillwire serve TARGET --store STORE`` in a subprocess, once it printed where it serves.
    ``launcher`` is what python runs (``("-c", code)`` for a script that ends by calling the CLI); ``port``
    the one to serve on (default: a free one)."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, *launcher, "serve", target, "--port", str(port), "--store", store, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        **popen,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    served = Served(proc, port, seen)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with served.printed:
                seen.append(line)
                served.printed.notify_all()
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        line = lines.get(timeout=PROCESS_TIMEOUT)
        if line is None:
            returncode = proc.wait(PROCESS_TIMEOUT)
            assert proc.stdout is not None
            proc.stdout.close()
            raise ServerExited(returncode, "".join(seen))
        if "task store:" in line:
            return served


@pytest.fixture
def processes() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        if served.proc.poll() is None:
            served.proc.terminate()
            served.proc.wait(PROCESS_TIMEOUT)
        if served.proc.stdout is not None:
            served.proc.stdout.close()


# -- external services --------------------------------------------------------------------------------------

SERVICE_SKIP_PREFIX = "service unavailable:"


def skip_without_service(name: str, detail: str) -> None:
    """Skip a test that needs ``name`` (PostgreSQL, Redis); with SKILLWIRE_REQUIRE_SERVICES=1, fail it."""
    import os

    message = f"{SERVICE_SKIP_PREFIX} {name} ({detail})"
    if os.environ.get("SKILLWIRE_REQUIRE_SERVICES") == "1":
        pytest.fail(message + "; SKILLWIRE_REQUIRE_SERVICES=1 forbids skipping", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def sdk03_python() -> Path:
    """The python of a venv holding a2a-sdk 0.3, client and server (see tests/sdk03.py)."""
    import sdk03

    return sdk03.python()


# -- helpers of the client tests ---------------------------------------------------------------------------

#: The cap on a client test's wait for a stream, in seconds.
STREAM_WAIT = 10.0


async def collect(events: Any, wait: float = STREAM_WAIT) -> list[Any]:
    """Every event of a client stream, within ``wait`` seconds."""
    async with asyncio.timeout(wait):
        return [event async for event in events]


def state_of(event: Any) -> Any:
    """The task state a StreamResponse event carries (None for messages and artifact updates)."""
    if event.task is not None:
        return event.task.status.state
    if event.status_update is not None:
        return event.status_update.status.state
    return None


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event the test sets to let :func:`gated_agent` finish; set at teardown so no task is left waiting."""
    event = threading.Event()
    yield event
    event.set()


def gated_agent(gate: threading.Event, wait: float = STREAM_WAIT) -> Agent:
    """Streams artifact a1, waits for ``gate`` (the test opens it once it has seen a1), then a2 and completes."""

    async def run(context: Any, events: Any) -> None:
        await events.working()
        await events.artifact("one", artifact_id="a1")
        await asyncio.to_thread(gate.wait, wait)
        await events.artifact("two", artifact_id="a2")
        await events.complete("done")

    return Agent("gated", "Waits for the test between two artifacts.", executor=run)


class RecordingHandler:
    """Wraps a request handler (``asgi(wrap=RecordingHandler)``) and records each call's headers."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.headers: list[dict[str, str]] = []

    async def handle(self, operation: Any, params: Any, context: Any) -> Any:
        self.headers.append(dict(context.headers))
        return await self.inner.handle(operation, params, context)


# -- a long task, for the buses' replay tests ------------------------------------------------------------


class LongTask(Executor):
    """Produces ``count`` artifacts of ``size`` characters, waits for ``release``, adds one more, completes."""

    def __init__(self, count: int, size: int) -> None:
        self.count, self.size = count, size
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        for n in range(self.count):
            await events.artifact(f"{n:04d}" + "x" * self.size, name=f"chunk {n}")
        self.started.set()
        await self.release.wait()
        await events.artifact("tail", name="tail")


# -- outages: a TCP proxy the test cuts --------------------------------------------------------------------


class TcpProxy:
    """A TCP proxy to ``target`` (threads and sockets, so that server processes, servers in threads and the
    test's loop can all use it) that the test cuts, closing every connection and refusing new ones, and
    brings back on the same port: an outage of PostgreSQL or Redis as their clients see it."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown() first: it wakes the thread blocked in accept(), which holds the port
            _close(listener)
        with self._lock:
            for conn in self._open:
                _close(conn)
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def via_proxy(url: str, proxy: TcpProxy, **options: str) -> str:
    """``url`` (a PostgreSQL URL) with its host and port replaced by the proxy's, and ``options`` added."""
    parts = urlsplit(url)
    netloc = f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
    query = "&".join([q for q in [parts.query, urlencode(options)] if q])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def postgres_address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432
