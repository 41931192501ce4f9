"""Benchmark skillwire against a2a-sdk and the fastest other A2A servers, side by side, in one run.

Each target is started as its own process (uvicorn with one worker, loop/http ``auto``, log level warning, no
access log, for the Python servers; ``node`` for a2a-js) on a free 127.0.0.1 port, with its gRPC server on a
second one, and measured in turn: cold start, then for each binding it offers (JSON-RPC, HTTP+JSON/REST, gRPC)
blocking SendMessage throughput and latency at several concurrencies and the events/s of one ``stream N``
request, and RSS. Each target is sent the requests it understands (:class:`RequestShape`: method names, the
user's role, headers). The peers (fasta2a, a2a-js) live in bench/peers and are installed by
bench/peers/install.sh; one that is not installed, a binding a target does not offer, and a target or binding
that fails to start or answers wrongly are reported, and the run goes on with the next one. Progress goes to
stderr, the markdown report to stdout.

    python bench/run.py                      # every target and binding, defaults (about 2 min per target)
    python bench/run.py --targets a2a-sdk --bindings jsonrpc,grpc --duration 3 --json /tmp/bench.json
    python bench/run.py --targets a2a-sdk,fasta2a,a2a-js,skillwire-memory --bindings jsonrpc

See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import secrets
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
HOST = "127.0.0.1"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
CARD_PATH = "/.well-known/agent-card.json"
RPC_HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
# The settings `skillwire serve` gives uvicorn; the a2a-sdk app is started with the same ones.
UVICORN_FLAGS = ("--loop", "auto", "--http", "auto", "--log-level", "warning", "--no-access-log")
REST_HEADERS = RPC_HEADERS
GRPC_METADATA = (("a2a-version", "1.0"),)
ECHO_TEXT = "hello"
#: The other A2A servers run beside skillwire (bench/peers, installed by bench/peers/install.sh).
PEERS_DIR = BENCH_DIR / "peers"
FASTA2A_PYTHON = PEERS_DIR / ".venv-fasta2a" / "bin" / "python"
A2A_JS_DIR = PEERS_DIR / "a2a_js_echo"
NOT_INSTALLED = "not installed: run bench/peers/install.sh"
NOT_OFFERED = "not offered by this target"
PEER_TARGETS = ("fasta2a", "a2a-js")
#: Bare uvicorn answering with prepared bytes (bench/ceiling_echo.py): what no server under uvicorn can beat.
CEILING = "ceiling"
ALL_TARGETS = (
    CEILING,
    "a2a-sdk",
    *PEER_TARGETS,
    "skillwire-memory",
    "skillwire-sqlite",
    "skillwire-skill",
)
#: The echo agent of skillwire-memory behind authentication (bench/secure_echo.py): not run by default.
AUTH_TARGETS = ("skillwire-apikey", "skillwire-jwt")
KNOWN_TARGETS = ALL_TARGETS + AUTH_TARGETS
BASELINE = "a2a-sdk"
#: The claims of the bench's JWT; bench/secure_echo.py checks the same issuer and audience.
JWT_ISSUER = "https://bench.example"
JWT_AUDIENCE = "bench"
JWT_LIFETIME_S = 3600
ALL_BINDINGS = ("jsonrpc", "rest", "grpc")
#: How each binding is named in the report and in the card's ``supportedInterfaces[].protocolBinding``.
BINDING_LABELS = {"jsonrpc": "JSON-RPC", "rest": "REST", "grpc": "gRPC"}
CARD_BINDINGS = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}
LOADGEN_NOTES = {
    "wrk": "wrk (C, keep-alive connections, Lua script for unique messageIds)",
    "httpx": "asyncio httpx client inside the harness, one keep-alive connection per worker; "
    "it shares the cores with the server and may be the bottleneck",
}
GRPC_LOADGEN_NOTE = (
    "grpc.aio client inside the harness: N concurrent callers on one channel (one HTTP/2 connection), "
    "latency per call; it shares the cores with the server and may be the bottleneck (see the "
    "load generator CPU column)"
)


@dataclass(frozen=True)
class RequestShape:
    """What one target's JSON-RPC requests look like (method names, the user's role, headers), and what
    its answers say: the task state of a finished echo, and the states accepted from a server that answers
    a blocking send before the work is done."""

    summary: str
    send: str = "SendMessage"
    stream: str = "SendStreamingMessage"
    role: str = "ROLE_USER"
    headers: Mapping[str, str] = field(default_factory=lambda: dict(RPC_HEADERS))
    completed: str = "TASK_STATE_COMPLETED"
    unfinished: tuple[str, ...] = ()

    def message(self, text: str, message_id: str) -> dict[str, Any]:
        return {"messageId": message_id, "role": self.role, "parts": [{"text": text}]}

    def body(self, method: str, text: str, message_id: str, request_id: int | str = 1) -> bytes:
        params = {"message": self.message(text, message_id)}
        request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return json.dumps(request, separators=(",", ":")).encode()

    def send_body(self, message_id: str, request_id: int | str) -> bytes:
        """A blocking send of the echo text: what the load generators post."""
        return self.body(self.send, ECHO_TEXT, message_id, request_id)


#: A2A 1.0 JSON-RPC: skillwire, a2a-sdk and a2a-js (a2a-js refuses a request without ``A2A-Version: 1.0``).
V1_SHAPE = RequestShape(
    "A2A 1.0: `SendMessage` / `SendStreamingMessage`, role `ROLE_USER`, header `A2A-Version: 1.0`"
)
#: fasta2a 2.1.1's own method names: A2A 1.0 objects (camelCase, no ``kind``) under the pre-1.0 names, with
#: lower-case roles and states, and no version header (it reads none). It also takes the 1.0 names, through
#: a layer that translates each request and answer (about a quarter fewer requests/s here), so the bench
#: gives it its own names, its fastest path.
FASTA2A_SHAPE = RequestShape(
    "fasta2a's own names: `message/send` / `message/stream`, role `user`, A2A 1.0 objects, no `A2A-Version`",
    send="message/send",
    stream="message/stream",
    role="user",
    headers={"Content-Type": "application/json"},
    completed="completed",
    unfinished=("submitted", "working"),
)

#: Stand-ins in a request body for what wrk makes unique per request: the JSON-RPC id (a number) and the
#: messageId (``tag-N``).
REQUEST_ID_MARK = "@bench-request-id@"
MESSAGE_ID_MARK = "@bench-message-id@"

WRK_TEMPLATE = r"""
local tag = "bench"
local counter = 0
local threads = 0
wrk.method = "POST"
-- BENCH_HEADERS
-- BENCH_AUTH_HEADERS

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  tag = (args[1] or "bench") .. "-" .. tostring(tid)
end

function request()
  counter = counter + 1
  local body = BENCH_BODY
  return wrk.format(nil, nil, nil, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%.0f,"p50_us":%.1f,"p99_us":%.1f,"errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def _lua_string(value: str) -> str:
    if not all(" " <= c <= "~" for c in value):
        raise ValueError(f"not a printable ASCII header name or value: {value[:40]!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lua_headers(headers: Mapping[str, str]) -> str:
    return "\n".join(f"wrk.headers[{_lua_string(k)}] = {_lua_string(v)}" for k, v in headers.items())


def lua_body(body: bytes) -> str:
    """A Lua expression for ``body`` in which :data:`REQUEST_ID_MARK` (with its quotes) is the request
    counter and :data:`MESSAGE_ID_MARK` is ``tag-counter``."""
    literal = _lua_string(body.decode())
    expr = literal.replace(f'\\"{REQUEST_ID_MARK}\\"', '" .. counter .. "')
    return expr.replace(MESSAGE_ID_MARK, '" .. tag .. "-" .. counter .. "')


def wrk_script(body: bytes, headers: Mapping[str, str]) -> str:
    """The wrk script posting ``body`` (with the marks made unique per request) with ``headers``."""
    if MESSAGE_ID_MARK not in body.decode():
        raise ValueError("the body has no messageId mark")
    script = WRK_TEMPLATE.replace("-- BENCH_HEADERS", _lua_headers(headers))
    return script.replace("BENCH_BODY", lua_body(body))


def wrk_script_with(script: str, headers: Mapping[str, str]) -> str:
    """``script`` also sending ``headers`` (the credentials of a secured target) with every request."""
    return script.replace("-- BENCH_AUTH_HEADERS", _lua_headers(headers) or "-- no credentials")


def grpc_metadata(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata of every call: ``a2a-version`` and the credentials (lower-cased names)."""
    return GRPC_METADATA + tuple((name.lower(), value) for name, value in headers.items())


@dataclass(frozen=True)
class Settings:
    """What to measure and for how long (from the command line)."""

    targets: list[str]
    bindings: list[str]
    duration: float
    warmup: float
    settle: float
    concurrency: list[int]
    cold_starts: int
    stream_chunks: int
    stream_runs: int
    stream_timeout: float
    tasks: int
    start_timeout: float
    loadgen: str
    wrk_threads: int
    skillwire: list[str]
    json: Path | None
    #: ``--pin``: the server on one core, the harness and its load generator on the other (Linux only).
    pin: bool = False


#: With ``--pin``: the cores of the server under test, and of the harness with its load generator.
SERVER_CPUS, HARNESS_CPUS = {1}, {0}


# --------------------------------------------------------------------------------------------- results


@dataclass
class LoadLevel:
    """Blocking SendMessage load at one concurrency."""

    concurrency: int
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    #: CPU seconds used meanwhile by the server (process tree) and by the load generator (wrk, or the
    #: harness itself for the in-process generators).
    server_cpu_s: float | None = None
    client_cpu_s: float | None = None


@dataclass
class BindingResult:
    """SendMessage load and ``stream N`` runs over one binding of one target."""

    binding: str
    endpoint: str = ""
    error: str | None = None
    #: why the binding was not measured (not offered by the target), or None
    skipped: str | None = None
    load: list[LoadLevel] = field(default_factory=list)
    stream_events: list[int] = field(default_factory=list)
    stream_events_per_s: list[float] = field(default_factory=list)


@dataclass
class TargetResult:
    """Everything measured for one server under test."""

    name: str
    command: list[str] = field(default_factory=list)
    error: str | None = None
    #: why the target was not started (a peer not installed), or None
    skipped: str | None = None
    cold_start_ms: list[float] = field(default_factory=list)
    rss_start_mib: float | None = None
    #: the spawn measured when gRPC is among the bindings: the same server with its gRPC port on
    cold_start_grpc_ms: float | None = None
    rss_start_grpc_mib: float | None = None
    rss_after_load_mib: float | None = None
    bindings: dict[str, BindingResult] = field(default_factory=dict)
    tasks_during_load: int | None = None
    tasks_rss_mib: list[tuple[int, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class TargetFailed(Exception):
    """The server under test did not start or did not answer as expected."""


# --------------------------------------------------------------------------------------------- helpers


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def chosen_loadgen(choice: str) -> str:
    """The load generator ``--loadgen`` names: ``auto`` is wrk where it is installed, else httpx."""
    return choice if choice != "auto" else ("wrk" if shutil.which("wrk") else "httpx")


def skillwire_command(given: str | None) -> list[str]:
    """The command that runs skillwire: ``--skillwire`` as given, else the one beside this interpreter."""
    if given is None:
        beside = Path(sys.executable).parent / "skillwire"
        given = str(beside) if beside.exists() else "skillwire"
    return shlex.split(given)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (``q`` in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def rpc_body(method: str, text: str, message_id: str, request_id: int | str = 1) -> bytes:
    """An A2A 1.0 JSON-RPC request (another target's: :meth:`RequestShape.body`)."""
    return V1_SHAPE.body(method, text, message_id, request_id)


def rest_body(text: str, message_id: str) -> bytes:
    """A SendMessageRequest as the HTTP+JSON binding takes it (``/message:send``, ``/message:stream``)."""
    return json.dumps({"message": V1_SHAPE.message(text, message_id)}, separators=(",", ":")).encode()


def wrk_send_script(shape: RequestShape) -> str:
    """The wrk script of a target's JSON-RPC load: blocking sends as ``shape`` writes them."""
    return wrk_script(shape.send_body(MESSAGE_ID_MARK, REQUEST_ID_MARK), shape.headers)


#: The A2A 1.0 load: JSON-RPC SendMessage, and the same over HTTP+JSON (``POST {rest}/message:send`` with a
#: bare SendMessageRequest).
WRK_SCRIPT = wrk_send_script(V1_SHAPE)
WRK_REST_SCRIPT = wrk_script(rest_body(ECHO_TEXT, MESSAGE_ID_MARK), REST_HEADERS)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The fields after the ")" that closes the command name are: state, ppid, ...
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (in case a CLI forks its server)."""
    found = []
    pending = [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(_children(current))
    return found


def tree_rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` and all its descendants, in MiB."""
    total_kib = 0
    for current in _tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` and all its descendants."""
    ticks = 0
    for current in _tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # After the ")" that closes the command name: state is field 3, utime and stime 14 and 15.
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of the harness (all its threads) and of its finished children (wrk)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# --------------------------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class TargetSpec:
    """How to start one server under test on a given port."""

    name: str
    #: The command line and extra environment for an HTTP port and an optional gRPC port.
    argv: Callable[[int, int | None], list[str]]
    env: Callable[[int, int | None], dict[str, str]] = lambda _port, _grpc_port: {}
    #: Credentials sent with every request of every binding (HTTP headers; gRPC metadata, lower-cased).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The JSON-RPC requests it understands, and the bindings it offers (the others are reported as such).
    shape: RequestShape = V1_SHAPE
    bindings: tuple[str, ...] = ALL_BINDINGS
    #: Why it cannot run on this machine (a peer not installed), or None.
    missing: str | None = None
    #: What the report should say about it.
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Peer:
    """Another A2A server run beside skillwire, from bench/peers."""

    argv: Callable[[int, int | None], list[str]]
    #: What bench/peers/install.sh leaves behind, and the programs it needs on PATH.
    installed: tuple[Path, ...]
    programs: tuple[str, ...] = ()
    shape: RequestShape = V1_SHAPE
    bindings: tuple[str, ...] = ALL_BINDINGS
    notes: tuple[str, ...] = ()


def _bench_env(port: int, grpc_port: int | None) -> dict[str, str]:
    """The URLs the bench's own echo apps put on their cards (they cannot see uvicorn's options)."""
    env = {"BENCH_HOST": HOST, "BENCH_PORT": str(port)}
    return env | ({"BENCH_GRPC_PORT": str(grpc_port)} if grpc_port is not None else {})


PEERS: dict[str, Peer] = {
    # bench/peers/fasta2a_echo.py in its own virtualenv, under uvicorn as a2a-sdk's app is.
    "fasta2a": Peer(
        argv=lambda port, _grpc_port: [
            str(FASTA2A_PYTHON),
            *("-m", "uvicorn", "fasta2a_echo:app", "--app-dir", str(PEERS_DIR)),
            *_listen(port),
            *UVICORN_FLAGS,
        ],
        installed=(FASTA2A_PYTHON,),
        shape=FASTA2A_SHAPE,
        bindings=("jsonrpc",),
        notes=(
            "fasta2a answers a blocking `message/send` once the task is stored and handed to its worker, "
            "before the work is done (a `submitted` task, accepted as a correct answer): its SendMessage "
            "figures do not include the work the other targets finish before answering",
        ),
    ),
    # bench/peers/a2a_js_echo/server.mjs: express, JSON-RPC and HTTP+JSON; gRPC with --grpc-port.
    "a2a-js": Peer(
        argv=lambda port, grpc_port: [
            "node",
            str(A2A_JS_DIR / "server.mjs"),
            *_listen(port),
            *(("--grpc-port", str(grpc_port)) if grpc_port is not None else ()),
        ],
        installed=(A2A_JS_DIR / "node_modules" / "@a2a-js" / "sdk" / "package.json",),
        programs=("node",),
    ),
}


def peer_spec(name: str) -> TargetSpec:
    """A peer's command line, or why it cannot run here."""
    peer = PEERS[name]
    missing = next((NOT_INSTALLED for path in peer.installed if not path.exists()), None)
    if missing is None and (absent := [p for p in peer.programs if shutil.which(p) is None]):
        missing = f"`{absent[0]}` not found on PATH"
    notes = (f"requests: {peer.shape.summary}", *peer.notes) if peer.shape is not V1_SHAPE else peer.notes
    return TargetSpec(
        name,
        argv=peer.argv,
        env=_bench_env,
        shape=peer.shape,
        bindings=peer.bindings,
        missing=missing,
        notes=notes,
    )


def target_spec(name: str, skillwire: list[str], workdir: Path) -> TargetSpec:
    """The command line of each target; skillwire's stores are chosen with ``--store``."""
    if name in PEERS:
        return peer_spec(name)
    if name == CEILING:
        return TargetSpec(
            name,
            argv=lambda port, _grpc_port: [
                sys.executable,
                *("-m", "uvicorn", "ceiling_echo:app", "--app-dir", str(BENCH_DIR)),
                *_listen(port),
                *UVICORN_FLAGS,
            ],
            env=_bench_env,
            bindings=("jsonrpc",),
            notes=(
                "ceiling: bare uvicorn answering with prepared bytes (bench/ceiling_echo.py), no A2A work",
            ),
        )
    if name == "a2a-sdk":
        app = ("a2a_sdk_echo:app", "--app-dir", str(BENCH_DIR))

        def sdk_env(port: int, grpc_port: int | None) -> dict[str, str]:
            # a2a-sdk traces every request through OpenTelemetry unless told not to; with tracing on it is
            # about 30% slower, which would flatter the ratios. skillwire has no tracing on this path.
            return _bench_env(port, grpc_port) | {"OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}

        return TargetSpec(
            name,
            argv=lambda port, _grpc_port: [
                sys.executable,
                "-m",
                "uvicorn",
                *app,
                *_listen(port),
                *UVICORN_FLAGS,
            ],
            env=sdk_env,
        )
    if name in AUTH_TARGETS:
        return secure_spec(name, skillwire)
    store = {
        "skillwire-memory": "memory://",
        "skillwire-sqlite": f"sqlite:///{workdir / 'tasks.db'}",
        "skillwire-skill": "memory://",
    }[name]
    # skillwire-skill: the same echo agent written as a SKILL.md skill (routing, input schema, result
    # conversion), against skillwire-memory's bare executor: the cost of the skill layer.
    example = "examples/echo_skill" if name == "skillwire-skill" else "examples/echo"
    return TargetSpec(name, argv=lambda port, grpc_port: _serve(skillwire, example, store, port, grpc_port))


def _serve(skillwire: list[str], agent: str, store: str, port: int, grpc_port: int | None) -> list[str]:
    return [
        *skillwire,
        "serve",
        agent,
        *_listen(port),
        "--store",
        store,
        *("--log-level", "warning"),  # no access log, as for the other targets
        *(("--grpc-port", str(grpc_port)) if grpc_port is not None else ()),
    ]


def jwt_material(lifetime: float = JWT_LIFETIME_S) -> tuple[dict[str, Any], str]:
    """A fresh RS256 key pair: its public JWK, and one token signed with it (``iss``, ``aud``, ``sub``,
    ``iat``, ``exp`` in ``lifetime`` seconds) that every request of the run then carries."""
    from joserfc import jwt
    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": "bench-rs256", "alg": "RS256", "use": "sig"})
    now = int(time.time())
    claims = {"iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "sub": "bench", "iat": now, "exp": now + int(lifetime)}
    token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)
    return key.as_dict(private=False), token


def secure_spec(name: str, skillwire: list[str]) -> TargetSpec:
    """skillwire-memory's echo agent behind an API key or a bearer JWT (bench/secure_echo.py), memory store;
    the key material is made here, for this run, and reaches the server through its environment."""
    if name == "skillwire-apikey":
        key = secrets.token_urlsafe(32)
        env = {"BENCH_AUTH": "apikey", "BENCH_API_KEY": key}
        headers = {"X-API-Key": key}
    else:
        public_jwk, token = jwt_material()
        env = {
            "BENCH_AUTH": "jwt",
            "BENCH_JWK": json.dumps(public_jwk),
            "BENCH_JWT_ISSUER": JWT_ISSUER,
            "BENCH_JWT_AUDIENCE": JWT_AUDIENCE,
        }
        headers = {"Authorization": f"Bearer {token}"}
    return TargetSpec(
        name,
        argv=lambda port, grpc_port: _serve(skillwire, "bench/secure_echo.py", "memory://", port, grpc_port),
        env=lambda _port, _grpc_port: env,
        headers=headers,
    )


def _listen(port: int) -> list[str]:
    return ["--host", HOST, "--port", str(port)]


class Server:
    """One spawned server process, in its own process group, with its output in a log file.

    With ``grpc`` the server is also told to serve gRPC, on a second free port (``grpc_port``).
    """

    def __init__(
        self, spec: TargetSpec, log_dir: Path, grpc: bool = False, cpus: set[int] | None = None
    ) -> None:
        self.port = free_port()
        self.grpc_port = free_port() if grpc else None
        self.base_url = f"http://{HOST}:{self.port}"
        self.spec = spec
        self.argv = spec.argv(self.port, self.grpc_port)
        if cpus:  # taskset sets the affinity before the server starts, so every thread it makes has it
            self.argv = ["taskset", "-c", ",".join(map(str, sorted(cpus))), *self.argv]
        self.headers = dict(spec.headers)
        self._log_path = log_dir / f"{spec.name}-{self.port}.log"
        self._log = self._log_path.open("wb")
        self.spawned_at = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=REPO_ROOT,
                env={**os.environ, **spec.env(self.port, self.grpc_port)},
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._log.close()
            raise TargetFailed(f"cannot run {shlex.join(self.argv)}: {exc.strerror}") from exc

    def wait_ready(self, timeout: float, poll: float = 0.005) -> float:
        """Poll the agent card until it answers 200; return the seconds since spawn."""
        deadline = self.spawned_at + timeout
        with httpx.Client(timeout=1.0) as client:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    raise TargetFailed(f"exited with code {self.proc.returncode}: {self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.base_url + CARD_PATH).status_code == 200:
                        return time.perf_counter() - self.spawned_at
                time.sleep(poll)
        raise TargetFailed(f"no 200 from {CARD_PATH} within {timeout:g} s: {self.log_tail()}")

    def rss_mib(self) -> float:
        return tree_rss_mib(self.proc.pid)

    def cpu_s(self) -> float:
        return tree_cpu_s(self.proc.pid)

    def log_tail(self, lines: int = 8) -> str:
        self._log.flush()
        text = self._log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or "(no output)"

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(grace)
        self._log.close()


def card_urls(server: Server) -> dict[str, list[str]]:
    """The URLs of the card's ``supportedInterfaces``, by ``protocolBinding``."""
    reply = httpx.get(server.base_url + CARD_PATH, timeout=5.0)
    urls: dict[str, list[str]] = {}
    try:
        for iface in reply.json().get("supportedInterfaces", []):
            urls.setdefault(str(iface.get("protocolBinding")), []).append(str(iface.get("url", "")))
    except (ValueError, AttributeError, TypeError) as exc:
        raise TargetFailed(f"unreadable agent card: {reply.text[:300]}") from exc
    return urls


def http_url(server: Server, urls: dict[str, list[str]], binding: str, notes: list[str]) -> str:
    """The URL the card advertises for an HTTP binding, always sent to this server's loopback port."""
    advertised = urls.get(CARD_BINDINGS[binding], [])
    if not advertised:
        notes.append(f"the card advertises no {CARD_BINDINGS[binding]} interface; using /")
        return server.base_url + "/"
    parts = urlsplit(advertised[0])
    if parts.hostname not in LOOPBACK_HOSTS or parts.port != server.port:
        notes.append(f"the card advertises {advertised[0]}, not port {server.port}; using its path there")
    return f"{server.base_url}{parts.path or '/'}"


def jsonrpc_url(server: Server, notes: list[str]) -> str:
    """The JSON-RPC URL the card advertises, always sent to this server's loopback port."""
    return http_url(server, card_urls(server), "jsonrpc", notes)


def grpc_target(server: Server, urls: dict[str, list[str]], notes: list[str]) -> str:
    """``host:port`` of the gRPC server this harness asked for; the card should list the same port."""
    if server.grpc_port is None:
        raise TargetFailed("the server was started without gRPC")
    advertised = urls.get(CARD_BINDINGS["grpc"], [])
    if not advertised:
        notes.append(f"the card advertises no GRPC interface; calling port {server.grpc_port} anyway")
    elif not advertised[0].endswith(f":{server.grpc_port}"):
        notes.append(f"the card advertises gRPC at {advertised[0]}, not port {server.grpc_port}")
    return f"{HOST}:{server.grpc_port}"


def _check_task(task: Any, detail: str, shape: RequestShape = V1_SHAPE) -> str:
    """A completed task echoing the text, or one of the states ``shape`` accepts from a server that answers
    before the work is done (its artifacts not there yet); return its state."""
    try:
        state = task["status"]["state"]
        if state in shape.unfinished:
            return str(state)
        text = task["artifacts"][0]["parts"][0]["text"]
    except (KeyError, IndexError, TypeError) as exc:
        raise TargetFailed(f"bad SendMessage reply: {detail[:300]}") from exc
    if state != shape.completed or text != ECHO_TEXT:
        raise TargetFailed(f"echo check failed: state={state} text={text!r}")
    return str(state)


def check_echo(url: str, headers: Mapping[str, str] | None = None, shape: RequestShape = V1_SHAPE) -> str:
    """One JSON-RPC SendMessage (as ``shape`` writes it) must come back as a completed task echoing the
    text, or as a task ``shape`` accepts unfinished; return the task's state."""
    body = shape.send_body("bench-check", 1)
    reply = httpx.post(url, content=body, headers={**shape.headers, **(headers or {})})
    try:
        task = reply.json()["result"]["task"]
    except (ValueError, KeyError, TypeError) as exc:
        raise TargetFailed(f"bad {shape.send} reply (HTTP {reply.status_code}): {reply.text[:300]}") from exc
    return _check_task(task, f"(HTTP {reply.status_code}) {reply.text}", shape)


def check_rest_echo(url: str, headers: Mapping[str, str] | None = None) -> None:
    """The same over HTTP+JSON: ``POST {url}`` (``…/message:send``) must answer ``{"task": …}``."""
    body = rest_body(ECHO_TEXT, "bench-check-rest")
    reply = httpx.post(url, content=body, headers={**REST_HEADERS, **(headers or {})})
    try:
        task = reply.json()["task"]
    except (ValueError, KeyError, TypeError) as exc:
        raise TargetFailed(
            f"bad REST SendMessage reply (HTTP {reply.status_code}): {reply.text[:300]}"
        ) from exc
    _check_task(task, f"(HTTP {reply.status_code}) {reply.text}")


def check_refused(url: str, body: bytes) -> None:
    """For a secured target: the same request without credentials must get 401, or nothing is measured."""
    reply = httpx.post(url, content=body, headers=RPC_HEADERS)
    if reply.status_code != 401:
        raise TargetFailed(f"a request without credentials got HTTP {reply.status_code}, not 401")


# ------------------------------------------------------------------------------------- load generators


def run_wrk(
    url: str,
    concurrency: int,
    seconds: float,
    threads: int,
    tag: str,
    script_text: str = WRK_SCRIPT,
    headers: Mapping[str, str] | None = None,
) -> LoadLevel:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(wrk_script_with(script_text, headers or {}))
    argv = [
        "wrk", f"-t{min(threads, concurrency)}", f"-c{concurrency}", f"-d{max(1, round(seconds))}s",
        "--timeout", "10s", "-s", script.name, url, "--", tag,
    ]  # fmt: skip
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=False)
    finally:
        Path(script.name).unlink()
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("BENCH_RESULT ")), None)
    if line is None:
        raise TargetFailed(f"wrk gave no result: {out.stdout[-300:]} {out.stderr[-300:]}")
    data = json.loads(line.removeprefix("BENCH_RESULT "))
    elapsed = data["duration_us"] / 1e6
    return LoadLevel(
        concurrency=concurrency,
        requests=data["requests"],
        seconds=elapsed,
        rps=data["requests"] / elapsed,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        errors=data["errors"],
    )


def _rpc_send_body(message_id: str, n: int) -> bytes:
    return rpc_body("SendMessage", ECHO_TEXT, message_id, n)


def _rest_send_body(message_id: str, _n: int) -> bytes:
    return rest_body(ECHO_TEXT, message_id)


async def run_httpx(
    url: str,
    concurrency: int,
    seconds: float,
    tag: str,
    make_body: Callable[[str, int], bytes] = _rpc_send_body,
    headers: Mapping[str, str] | None = None,
    base_headers: Mapping[str, str] = RPC_HEADERS,
) -> LoadLevel:
    send_headers = {**base_headers, **(headers or {})}
    latencies: list[float] = []
    errors = 0
    started = time.perf_counter()
    deadline = started + seconds

    async def worker(wid: int) -> None:
        nonlocal errors
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:
            n = 0
            while time.perf_counter() < deadline:
                n += 1
                body = make_body(f"{tag}-{wid}-{n}", n)
                sent = time.perf_counter()
                try:
                    reply = await client.post(url, content=body, headers=send_headers)
                except httpx.HTTPError:
                    errors += 1
                    continue
                if reply.status_code == 200:
                    latencies.append(time.perf_counter() - sent)
                else:
                    errors += 1

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return LoadLevel(
        concurrency=concurrency,
        requests=len(latencies),
        seconds=elapsed,
        rps=len(latencies) / elapsed,
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        errors=errors,
    )


def run_load(settings: Settings, url: str, concurrency: int, seconds: float, tag: str) -> LoadLevel:
    """JSON-RPC SendMessage load (kept for bench/skills.py; the run goes through :class:`BindingDriver`)."""
    level = _http_load(settings, url, concurrency, seconds, tag, WRK_SCRIPT, _rpc_send_body)
    time.sleep(settings.settle)
    return level


def _http_load(
    settings: Settings,
    url: str,
    concurrency: int,
    seconds: float,
    tag: str,
    script: str,
    make_body: Callable[[str, int], bytes],
    headers: Mapping[str, str] | None = None,
    base_headers: Mapping[str, str] = RPC_HEADERS,
) -> LoadLevel:
    """``script`` already carries ``base_headers``; ``headers`` (credentials) go on top of them."""
    if settings.loadgen == "wrk":
        return run_wrk(url, concurrency, seconds, settings.wrk_threads, tag, script, headers)
    return asyncio.run(run_httpx(url, concurrency, seconds, tag, make_body, headers, base_headers))


def final_state(event: str) -> str | None:
    """The task state an SSE ``data:`` line ends on: its status update's or task's (JSON-RPC's ``result``,
    or a bare StreamResponse over HTTP+JSON)."""
    try:
        payload = json.loads(event.removeprefix("data:"))
        result = payload.get("result", payload)
        update = result.get("statusUpdate") or result.get("task") or {}
        state = update["status"]["state"]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    return state if isinstance(state, str) else None


def stream_once(
    url: str,
    chunks: int,
    timeout: float,
    rest: bool = False,
    headers: Mapping[str, str] | None = None,
    shape: RequestShape = V1_SHAPE,
) -> tuple[int, float]:
    """Send ``stream N`` (JSON-RPC as ``shape`` writes it, or HTTP+JSON to ``…/message:stream`` with
    ``rest``); count ``data:`` events until the stream closes. Return (events, seconds).

    Read by curl, as the issue's figures were: a reader in Python (httpx's ``iter_lines``) takes about
    50 µs an event on this machine, so it, not the server, set the pace (measured: bare uvicorn's own
    ``stream 1000`` at 10,500-14,300 events/s read by httpx, 90,000-150,000 read by curl). httpx reads it
    only where there is no curl."""
    text, message_id = f"stream {chunks}", f"bench-stream-{time.time_ns()}"
    body = rest_body(text, message_id) if rest else shape.body(shape.stream, text, message_id)
    send_headers = {**shape.headers, "Accept": "text/event-stream", **(headers or {})}
    read = _curl_stream if shutil.which("curl") else _httpx_stream
    events, last, elapsed = read(url, body, send_headers, timeout)
    if events < chunks or final_state(last) != shape.completed:
        raise TargetFailed(f"stream ended after {events} events, last: {last[:200]}")
    return events, elapsed


def _curl_stream(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> tuple[int, str, float]:
    """(events, the last ``data:`` line, seconds by curl's own clock: ``time_total``, from the connect to the
    last byte, so the start of the curl process is not counted)."""
    args = ["curl", "-sN", "--max-time", f"{timeout:g}", "-w", "%{stderr}%{http_code} %{time_total}"]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    done = subprocess.run([*args, "--data-binary", "@-", url], input=body, capture_output=True)
    status, _, seconds = done.stderr.decode(errors="replace").strip().rpartition("\n")[2].partition(" ")
    if status != "200":
        raise TargetFailed(
            f"SendStreamingMessage answered HTTP {status or '(none)'} (curl exit {done.returncode})"
        )
    if done.returncode != 0:
        raise TargetFailed(f"stream still open after {timeout:g} s (curl exit {done.returncode})")
    out = done.stdout
    events = out.count(b"\ndata:") + out.startswith(b"data:")
    start = out.rfind(b"data:")
    last = out[start:].split(b"\n", 1)[0].decode(errors="replace") if start >= 0 else ""
    return events, last, float(seconds)


def _httpx_stream(
    url: str, body: bytes, headers: Mapping[str, str], timeout: float
) -> tuple[int, str, float]:
    events = 0
    last = ""
    started = time.perf_counter()
    with httpx.stream("POST", url, content=body, headers=headers, timeout=timeout) as reply:
        if reply.status_code != 200:
            raise TargetFailed(f"SendStreamingMessage answered HTTP {reply.status_code}")
        for line in reply.iter_lines():
            if line.startswith("data:"):
                events += 1
                last = line
            if time.perf_counter() - started > timeout:
                raise TargetFailed(f"stream still open after {timeout:g} s")
    return events, last, time.perf_counter() - started


async def send_many(
    url: str,
    count: int,
    concurrency: int,
    tag: str,
    headers: Mapping[str, str] | None = None,
    shape: RequestShape = V1_SHAPE,
) -> int:
    """Send ``count`` SendMessage requests over ``concurrency`` connections; return the failures."""
    send_headers = {**shape.headers, **(headers or {})}
    numbers = iter(range(count))
    failures = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal failures
        for n in numbers:
            body = shape.send_body(f"{tag}-{n}", n)
            try:
                reply = await client.post(url, content=body, headers=send_headers)
                failures += int(reply.status_code != 200)
            except httpx.HTTPError:
                failures += 1

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency), timeout=10.0) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return failures


# ------------------------------------------------------------------------------------------------ gRPC


@dataclass(frozen=True)
class GrpcModules:
    """grpc and a2a-sdk's generated modules, imported only when the gRPC binding is measured."""

    grpc: Any
    pb: Any
    pb_grpc: Any
    json_format: Any


def grpc_modules() -> GrpcModules:
    try:
        import grpc  # type: ignore[import-untyped]
        import grpc.aio  # type: ignore[import-untyped]
        from a2a.types import a2a_pb2, a2a_pb2_grpc
        from google.protobuf import json_format  # type: ignore[import-untyped]
    except ImportError as exc:
        raise TargetFailed(f"the gRPC client needs grpcio and a2a-sdk[grpc]: {exc}") from exc
    return GrpcModules(grpc, a2a_pb2, a2a_pb2_grpc, json_format)


def _grpc_request(m: GrpcModules, text: str, message_id: str) -> Any:
    message = m.pb.Message(message_id=message_id, role=m.pb.ROLE_USER, parts=[m.pb.Part(text=text)])
    return m.pb.SendMessageRequest(message=message)


@contextlib.asynccontextmanager
async def grpc_stub(m: GrpcModules, target: str, limit: float = 10.0) -> AsyncIterator[Any]:
    """An ``A2AService`` stub on a fresh channel to ``target``, once the channel is connected."""
    async with m.grpc.aio.insecure_channel(target) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), limit)
        except TimeoutError as exc:
            raise TargetFailed(f"no gRPC connection to {target} within {limit:g} s") from exc
        yield m.pb_grpc.A2AServiceStub(channel)


def _rpc_error(m: GrpcModules, exc: Exception) -> str:
    if isinstance(exc, m.grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc)


async def grpc_check(
    target: str, limit: float = 10.0, metadata: tuple[tuple[str, str], ...] = GRPC_METADATA
) -> None:
    """One gRPC SendMessage must come back as a completed task echoing the text; for a secured target
    (``metadata`` beyond GRPC_METADATA) the same call without credentials must end UNAUTHENTICATED."""
    m = grpc_modules()
    async with grpc_stub(m, target, limit) as stub:
        request = _grpc_request(m, ECHO_TEXT, "bench-check-grpc")
        try:
            reply = await stub.SendMessage(request, metadata=metadata, timeout=limit)
        except m.grpc.RpcError as exc:
            raise TargetFailed(f"gRPC SendMessage failed: {_rpc_error(m, exc)}") from exc
        if metadata != GRPC_METADATA:
            try:
                await stub.SendMessage(request, metadata=GRPC_METADATA, timeout=limit)
            except m.grpc.aio.AioRpcError as exc:
                if exc.code() != m.grpc.StatusCode.UNAUTHENTICATED:
                    raise TargetFailed(f"a call without credentials ended {_rpc_error(m, exc)}") from exc
            else:
                raise TargetFailed("a gRPC call without credentials was answered")
    # ProtoJSON: camelCase names and enum names, as on the HTTP bindings.
    _check_task(m.json_format.MessageToDict(reply).get("task"), str(reply))


async def run_grpc(
    target: str,
    concurrency: int,
    seconds: float,
    tag: str,
    metadata: tuple[tuple[str, str], ...] = GRPC_METADATA,
) -> LoadLevel:
    """``concurrency`` callers, each awaiting one SendMessage after the other, on one shared channel."""
    m = grpc_modules()
    latencies: list[float] = []
    errors = 0
    async with grpc_stub(m, target) as stub:
        send = stub.SendMessage
        started = time.perf_counter()
        deadline = started + seconds

        async def caller(cid: int) -> None:
            nonlocal errors
            n = 0
            while time.perf_counter() < deadline:
                n += 1
                request = _grpc_request(m, ECHO_TEXT, f"{tag}-{cid}-{n}")
                sent = time.perf_counter()
                try:
                    await send(request, metadata=metadata, timeout=10.0)
                except m.grpc.RpcError:
                    errors += 1
                    continue
                latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(caller(i) for i in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return LoadLevel(
        concurrency=concurrency,
        requests=len(latencies),
        seconds=elapsed,
        rps=len(latencies) / elapsed,
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        errors=errors,
    )


async def grpc_stream_once(
    target: str, chunks: int, limit: float, metadata: tuple[tuple[str, str], ...] = GRPC_METADATA
) -> tuple[int, float]:
    """SendStreamingMessage ``stream N``; count the StreamResponses until the stream ends."""
    m = grpc_modules()
    async with grpc_stub(m, target) as stub:
        request = _grpc_request(m, f"stream {chunks}", f"bench-stream-{time.time_ns()}")
        events = 0
        last = None
        started = time.perf_counter()
        try:
            async for event in stub.SendStreamingMessage(request, metadata=metadata, timeout=limit):
                events += 1
                last = event
        except m.grpc.RpcError as exc:
            if isinstance(exc, m.grpc.aio.AioRpcError) and exc.code() == m.grpc.StatusCode.DEADLINE_EXCEEDED:
                raise TargetFailed(f"stream still open after {limit:g} s") from exc
            raise TargetFailed(f"gRPC stream failed after {events} events: {_rpc_error(m, exc)}") from exc
        elapsed = time.perf_counter() - started
    completed = (
        last is not None
        and last.WhichOneof("payload") == "status_update"
        and last.status_update.status.state == m.pb.TASK_STATE_COMPLETED
    )
    if events < chunks or not completed:
        raise TargetFailed(f"stream ended after {events} events, last: {str(last)[:200]!r}")
    return events, elapsed


# --------------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class BindingDriver:
    """How to check, load and stream over one binding of a running server."""

    endpoint: str
    check: Callable[[], None]
    #: (concurrency, seconds, tag) -> one load level, without the CPU figures and the settle time
    load: Callable[[int, float, str], LoadLevel]
    #: (chunks, timeout) -> (events, seconds) of one ``stream N``
    stream: Callable[[int, float], tuple[int, float]]


def binding_driver(
    binding: str, server: Server, urls: dict[str, list[str]], settings: Settings, notes: list[str]
) -> BindingDriver:
    # A secured target's credentials go with every request: checks, load and streams.
    auth = server.headers
    if binding == "jsonrpc":
        url = http_url(server, urls, "jsonrpc", notes)
        # The target's own JSON-RPC dialect: method names, role and headers (A2A 1.0 but for fasta2a).
        shape = server.spec.shape
        script = wrk_send_script(shape)

        def check_jsonrpc() -> None:
            state = check_echo(url, auth, shape)
            if state != shape.completed:
                notes.append(f"the JSON-RPC check's `{shape.send}` was answered with a `{state}` task")
            if auth:
                check_refused(url, shape.body(shape.send, ECHO_TEXT, "bench-check-anonymous"))

        return BindingDriver(
            url,
            check=check_jsonrpc,
            load=lambda c, s, tag: _http_load(
                settings, url, c, s, tag, script, shape.send_body, auth, shape.headers
            ),
            stream=lambda chunks, timeout: stream_once(url, chunks, timeout, headers=auth, shape=shape),
        )
    if binding == "rest":
        base = http_url(server, urls, "rest", notes).rstrip("/")
        send_url, stream_url = f"{base}/message:send", f"{base}/message:stream"

        def check_rest() -> None:
            check_rest_echo(send_url, auth)
            if auth:
                check_refused(send_url, rest_body(ECHO_TEXT, "bench-check-rest-anonymous"))

        return BindingDriver(
            send_url,
            check=check_rest,
            load=lambda c, s, tag: _http_load(
                settings, send_url, c, s, tag, WRK_REST_SCRIPT, _rest_send_body, auth
            ),
            stream=lambda chunks, timeout: stream_once(stream_url, chunks, timeout, rest=True, headers=auth),
        )
    target = grpc_target(server, urls, notes)
    metadata = grpc_metadata(auth)
    return BindingDriver(
        target,
        check=lambda: asyncio.run(grpc_check(target, metadata=metadata)),
        load=lambda c, s, tag: asyncio.run(run_grpc(target, c, s, tag, metadata)),
        stream=lambda chunks, timeout: asyncio.run(grpc_stream_once(target, chunks, timeout, metadata)),
    )


def start_server(spec: TargetSpec, settings: Settings, log_dir: Path, result: TargetResult) -> Server:
    """Spawn the target ``cold_starts`` times, timing each; keep the last one running.

    These spawns serve HTTP only, as before gRPC was measured, so that cold start and RSS after start keep
    their meaning. With gRPC among the bindings, the last one is then replaced by a spawn that also serves
    gRPC (timed and sampled on rows of its own); that is the server measured.
    """
    server: Server | None = None
    for attempt in range(1, settings.cold_starts + 1):
        if server is not None:
            server.stop()
        server = Server(spec, log_dir, cpus=SERVER_CPUS if settings.pin else None)
        result.command = server.argv
        try:
            result.cold_start_ms.append(server.wait_ready(settings.start_timeout) * 1000)
        except BaseException:
            server.stop()
            raise
        log(f"{spec.name}: cold start {attempt}: {result.cold_start_ms[-1]:.0f} ms")
    assert server is not None
    result.rss_start_mib = server.rss_mib()
    if "grpc" not in offered_bindings(spec, settings):
        return server
    server.stop()
    server = Server(spec, log_dir, grpc=True, cpus=SERVER_CPUS if settings.pin else None)
    result.command = server.argv
    try:
        result.cold_start_grpc_ms = server.wait_ready(settings.start_timeout) * 1000
    except BaseException:
        server.stop()
        raise
    result.rss_start_grpc_mib = server.rss_mib()
    log(f"{spec.name}: cold start with gRPC: {result.cold_start_grpc_ms:.0f} ms")
    return server


def measured_load(
    server: Server, driver: BindingDriver, settings: Settings, concurrency: int, seconds: float, tag: str
) -> LoadLevel:
    """One load run with the CPU used meanwhile by the server and the load generator, then ``--settle``."""
    server_before, client_before = server.cpu_s(), own_cpu_s()
    level = driver.load(concurrency, seconds, tag)
    level.server_cpu_s = server.cpu_s() - server_before
    level.client_cpu_s = own_cpu_s() - client_before
    # wrk stops with requests still in flight; let the server finish them before the next measurement.
    time.sleep(settings.settle)
    return level


def measure_binding(
    server: Server, driver: BindingDriver, settings: Settings, outcome: BindingResult, name: str
) -> None:
    outcome.endpoint = driver.endpoint
    driver.check()
    if settings.warmup > 0:
        measured_load(server, driver, settings, max(settings.concurrency), settings.warmup, "warmup")
    for concurrency in settings.concurrency:
        level = measured_load(server, driver, settings, concurrency, settings.duration, f"c{concurrency}")
        outcome.load.append(level)
        log(
            f"{name}: c={concurrency}: {level.rps:.0f} req/s, "
            f"p50 {level.p50_ms:.2f} ms, p99 {level.p99_ms:.2f} ms, {level.errors} errors, "
            f"CPU server {level.server_cpu_s or 0:.1f} s / load generator {level.client_cpu_s or 0:.1f} s"
        )
    for _ in range(settings.stream_runs):
        events, seconds = driver.stream(settings.stream_chunks, settings.stream_timeout)
        outcome.stream_events.append(events)
        outcome.stream_events_per_s.append(events / seconds)
    log(f"{name}: stream {max(outcome.stream_events_per_s):.0f} events/s at best")


def offered_bindings(spec: TargetSpec, settings: Settings) -> list[str]:
    """The bindings asked for that the target offers, in the order they are measured."""
    return [binding for binding in settings.bindings if binding in spec.bindings]


def measure_running(server: Server, settings: Settings, result: TargetResult) -> None:
    urls = card_urls(server)
    for binding in settings.bindings:
        label = f"{result.name} {BINDING_LABELS[binding]}"
        outcome = result.bindings[binding] = BindingResult(binding)
        if binding not in server.spec.bindings:
            outcome.skipped = NOT_OFFERED
            log(f"{label}: {NOT_OFFERED}")
            continue
        try:
            driver = binding_driver(binding, server, urls, settings, result.notes)
            measure_binding(server, driver, settings, outcome, label)
        except (TargetFailed, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
            outcome.error = f"{type(exc).__name__}: {exc}"
            log(f"{label}: FAILED: {outcome.error}")
        if server.proc.poll() is not None:
            raise TargetFailed(f"exited with code {server.proc.returncode}: {server.log_tail()}")
    if all(outcome.error for outcome in result.bindings.values() if not outcome.skipped):
        raise TargetFailed("every binding failed")
    result.rss_after_load_mib = server.rss_mib()

    if settings.tasks <= 0:
        return
    url = http_url(server, urls, "jsonrpc", [])
    shape = server.spec.shape
    check_echo(url, server.headers, shape)
    step = max(1, settings.tasks // 10)
    sent = 0
    while sent < settings.tasks:
        batch = min(step, settings.tasks - sent)
        failed = asyncio.run(send_many(url, batch, 16, f"tasks{sent}", server.headers, shape))
        if failed:
            result.notes.append(f"{failed} failed requests in --tasks batch {sent}..{sent + batch}")
        sent += batch
        result.tasks_rss_mib.append((sent, server.rss_mib()))
        log(f"{result.name}: RSS after {sent} more tasks: {result.tasks_rss_mib[-1][1]:.1f} MiB")


def skip_reason(spec: TargetSpec, settings: Settings) -> str | None:
    """Why the target is not started: not installed, or none of the bindings asked for is offered."""
    if spec.missing:
        return spec.missing
    if not offered_bindings(spec, settings):
        asked = ", ".join(BINDING_LABELS[b] for b in settings.bindings)
        return f"offers none of the bindings asked for ({asked})"
    return None


def measure_target(spec: TargetSpec, settings: Settings, log_dir: Path) -> TargetResult:
    result = TargetResult(spec.name, notes=list(spec.notes))
    if (reason := skip_reason(spec, settings)) is not None:
        result.skipped = reason
        log(f"{spec.name}: skipped: {reason}")
        return result
    if spec.headers:
        result.notes.append(
            f"every request of every binding carries {', '.join(f'`{h}`' for h in spec.headers)} "
            "(gRPC: as metadata); one request without it was refused first (401 / UNAUTHENTICATED)"
        )
    try:
        server = start_server(spec, settings, log_dir, result)
    except (TargetFailed, OSError, httpx.HTTPError) as exc:
        result.error = str(exc)
        log(f"{spec.name}: FAILED: {result.error}")
        return result
    try:
        measure_running(server, settings, result)
    except (TargetFailed, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        log(f"{spec.name}: FAILED: {result.error}")
    finally:
        server.stop()
    measured = [b for b in result.bindings.values() if b.load]
    if measured:
        result.tasks_during_load = sum(
            sum(level.requests for level in b.load) + len(b.stream_events) for b in measured
        )
    return result


# ---------------------------------------------------------------------------------------------- report


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _fasta2a_versions() -> str:
    """The versions in bench/peers/.venv-fasta2a, where fasta2a runs (not this interpreter's)."""
    script = (
        "import importlib.metadata as m, platform\n"
        "print(f'Python {platform.python_version()}', *(f'{d} {m.version(d)}' for d in "
        "('fasta2a', 'uvicorn', 'uvloop', 'httptools', 'starlette', 'pydantic')), sep=', ')"
    )
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([FASTA2A_PYTHON, "-c", script], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            return out.stdout.strip()
    return NOT_INSTALLED


def _a2a_js_versions() -> str:
    """Node's version and those of the packages bench/peers/a2a_js_echo runs on (its node_modules)."""
    parts = []
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30)
        parts.append(f"node {node.stdout.strip()}")
    for package in ("@a2a-js/sdk", "express", "@grpc/grpc-js"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            manifest = A2A_JS_DIR / "node_modules" / package / "package.json"
            parts.append(f"{package} {json.loads(manifest.read_text())['version']}")
    return ", ".join(parts) if len(parts) > 1 else NOT_INSTALLED


#: What the report says about each peer's software, when the peer is among the targets.
PEER_VERSIONS: dict[str, Callable[[], str]] = {"fasta2a": _fasta2a_versions, "a2a-js": _a2a_js_versions}


def machine_info(
    loadgen: str, bindings: Sequence[str] = ALL_BINDINGS, targets: Sequence[str] = ()
) -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        models = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")]
        cpu = models[0].split(":", 1)[1].strip() if models else cpu
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    info = {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "uvicorn loop/http (auto)": f"{loop}/{http}",
        "load generator": LOADGEN_NOTES[loadgen] + (" (JSON-RPC and REST)" if "rest" in bindings else ""),
    }
    if "grpc" in bindings:
        info["gRPC load generator"] = GRPC_LOADGEN_NOTE
    info["stream clients"] = ", ".join(
        {
            "jsonrpc": "JSON-RPC SSE: httpx (sync, a new connection per stream)",
            "rest": "REST SSE: httpx (the same)",
            "grpc": "gRPC: grpc.aio streaming stub (a new channel per stream)",
        }[b]
        for b in bindings
    )
    if loadgen == "wrk":
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
        info["wrk"] = (out.stdout or out.stderr).split("Copyright")[0].strip()
    dists = ["a2a-sdk", "skillwire", "uvicorn", "uvloop", "httptools", "starlette", "httpx", "msgspec"]
    if "rest" in bindings:
        dists.append("sse-starlette")
    if "grpc" in bindings:
        dists += ["grpcio", "protobuf"]
    for dist in dists:
        info[dist] = _version(dist)
    for name in targets:
        if name in PEER_VERSIONS:
            info[f"{name} (peer)"] = PEER_VERSIONS[name]()
    return info


@dataclass(frozen=True)
class Row:
    """One line of the table: a metric, which way is better, how to read and print it."""

    metric: str
    better: str
    value: Callable[[TargetResult], float | None]
    fmt: str
    #: the binding the row measures: its cells say ``failed`` when that binding failed
    binding: str | None = None
    #: a requests/s row: skillwire's targets are also divided by the fastest peer's figure
    vs_peers: bool = False


def _levels(r: TargetResult, binding: str, concurrency: int) -> LoadLevel | None:
    outcome = r.bindings.get(binding)
    hits = [level for level in outcome.load if level.concurrency == concurrency] if outcome else []
    return hits[0] if hits else None


def _level(binding: str, concurrency: int, attr: str) -> Callable[[TargetResult], float | None]:
    def value(r: TargetResult) -> float | None:
        level = _levels(r, binding, concurrency)
        return float(getattr(level, attr)) if level is not None else None

    return value


def _server_cpu_us(binding: str, concurrency: int) -> Callable[[TargetResult], float | None]:
    """Server CPU time per completed request, in µs: what a request costs, whoever is the bottleneck."""

    def value(r: TargetResult) -> float | None:
        level = _levels(r, binding, concurrency)
        if level is None or level.server_cpu_s is None or not level.requests:
            return None
        return level.server_cpu_s / level.requests * 1e6

    return value


def _errors(binding: str) -> Callable[[TargetResult], float | None]:
    def value(r: TargetResult) -> float | None:
        outcome = r.bindings.get(binding)
        return sum(level.errors for level in outcome.load) if outcome and outcome.load else None

    return value


def _rss_after_tasks(count: int) -> Callable[[TargetResult], float | None]:
    return lambda r: dict(r.tasks_rss_mib).get(count)


def _stat(pick: Callable[[list[float]], float], attr: str) -> Callable[[TargetResult], float | None]:
    def value(r: TargetResult) -> float | None:
        values: list[float] = getattr(r, attr)
        return pick(values) if values else None

    return value


def _stream_stat(
    binding: str, pick: Callable[[list[float]], float]
) -> Callable[[TargetResult], float | None]:
    def value(r: TargetResult) -> float | None:
        outcome = r.bindings.get(binding)
        return pick(outcome.stream_events_per_s) if outcome and outcome.stream_events_per_s else None

    return value


def stream_label(binding: str, chunks: int) -> str:
    return {
        "jsonrpc": f"SSE `stream {chunks}`",
        "rest": f"REST SSE `stream {chunks}`",
        "grpc": f"gRPC `stream {chunks}`",
    }[binding]


def binding_rows(binding: str, settings: Settings) -> list[Row]:
    """The SendMessage and stream rows of one binding; JSON-RPC's keep their names without a prefix."""
    prefix = "" if binding == "jsonrpc" else f"{BINDING_LABELS[binding]} "
    stream = stream_label(binding, settings.stream_chunks)
    rows = []
    for c in settings.concurrency:
        rows += [
            Row(
                f"{prefix}SendMessage c={c} (req/s)",
                "higher",
                _level(binding, c, "rps"),
                "{:.0f}",
                binding,
                vs_peers=True,
            ),
            Row(
                f"{prefix}SendMessage c={c} p50 (ms)",
                "lower",
                _level(binding, c, "p50_ms"),
                "{:.2f}",
                binding,
            ),
            Row(
                f"{prefix}SendMessage c={c} p99 (ms)",
                "lower",
                _level(binding, c, "p99_ms"),
                "{:.2f}",
                binding,
            ),
        ]
    top = max(settings.concurrency)
    rows += [
        Row(f"{prefix}SendMessage errors, all levels", "lower", _errors(binding), "{:.0f}", binding),
        Row(
            f"{prefix}SendMessage c={top} server CPU per request (µs)",
            "lower",
            _server_cpu_us(binding, top),
            "{:.0f}",
            binding,
        ),
        Row(f"{stream}, best (events/s)", "higher", _stream_stat(binding, max), "{:.0f}", binding),
        Row(
            f"{stream}, median (events/s)",
            "higher",
            _stream_stat(binding, statistics.median),
            "{:.0f}",
            binding,
        ),
    ]
    return rows


def report_rows(settings: Settings) -> list[Row]:
    rows = [
        Row("cold start, median (ms)", "lower", _stat(statistics.median, "cold_start_ms"), "{:.0f}"),
        Row("cold start, min (ms)", "lower", _stat(min, "cold_start_ms"), "{:.0f}"),
    ]
    if "grpc" in settings.bindings:
        rows.append(Row("cold start with gRPC, once (ms)", "lower", lambda r: r.cold_start_grpc_ms, "{:.0f}"))
    for binding in settings.bindings:
        rows += binding_rows(binding, settings)
    rows += [
        Row("RSS after start (MiB)", "lower", lambda r: r.rss_start_mib, "{:.1f}"),
        *(
            [Row("RSS after start with gRPC (MiB)", "lower", lambda r: r.rss_start_grpc_mib, "{:.1f}")]
            if "grpc" in settings.bindings
            else []
        ),
        Row("tasks created by the load", "", lambda r: r.tasks_during_load, "{:.0f}"),
        Row("RSS after load (MiB)", "lower", lambda r: r.rss_after_load_mib, "{:.1f}"),
    ]
    step = max(1, settings.tasks // 10)
    for count in sorted({min(settings.tasks, step * k) for k in range(1, 11)} - {0}):
        rows.append(Row(f"RSS after {count} more tasks (MiB)", "lower", _rss_after_tasks(count), "{:.1f}"))
    return rows


def _state(r: TargetResult, binding: str | None) -> str:
    """What a cell without a figure says: skipped, not offered, failed, or n/a."""
    outcome = r.bindings.get(binding) if binding else None
    if r.skipped:
        return "skipped"
    if outcome is not None and outcome.skipped:
        return "not offered"
    return "failed" if r.error or (outcome is not None and outcome.error) else "n/a"


def _cell(row: Row, r: TargetResult) -> str:
    value = row.value(r)
    return row.fmt.format(value) if value is not None else _state(r, row.binding)


def is_skillwire(name: str) -> bool:
    return name.startswith("skillwire-")


def fastest_peer(row: Row, results: list[TargetResult]) -> tuple[float, str] | None:
    """The highest figure of the peers on a requests/s row, and whose it is."""
    figures = [(value, r.name) for r in results if r.name in PEERS and (value := row.value(r)) is not None]
    return max(figures) if figures else None


def ratio_columns(results: list[TargetResult]) -> list[tuple[str, Callable[[Row], str]]]:
    """The ratio columns: every target but the baseline over a2a-sdk, and each skillwire target over the
    fastest peer on the requests/s rows, beside its a2a-sdk column (when the run has peers)."""
    baseline = next((r for r in results if r.name == BASELINE), None)
    peers = any(r.name in PEERS and not r.skipped for r in results)

    def over_baseline(r: TargetResult) -> Callable[[Row], str]:
        def cell(row: Row) -> str:
            value, base = row.value(r), row.value(baseline) if baseline is not None else None
            return f"{value / base:.2f}x" if value is not None and base else "-"

        return cell

    def over_peers(r: TargetResult) -> Callable[[Row], str]:
        def cell(row: Row) -> str:
            value, best = row.value(r), fastest_peer(row, results) if row.vs_peers else None
            return f"{value / best[0]:.2f}x ({best[1]})" if value is not None and best and best[0] else "-"

        return cell

    columns = []
    for r in [r for r in results if not r.skipped]:
        if baseline is not None and r is not baseline:
            columns.append((f"{r.name} / {BASELINE}", over_baseline(r)))
        if peers and is_skillwire(r.name):
            columns.append((f"{r.name} / fastest peer", over_peers(r)))
    return columns


def bindings_table(results: list[TargetResult], settings: Settings) -> list[str]:
    """The second table: one line per target and binding, so the bindings of a target sit side by side."""
    top = max(settings.concurrency)
    header = ["target", "binding"]
    for c in settings.concurrency:
        header += [f"c={c} req/s", f"c={c} p50 / p99 (ms)"]
    header += [
        f"c={top} vs JSON-RPC",
        f"`stream {settings.stream_chunks}` best (events/s)",
        "stream vs JSON-RPC",
        f"c={top} server CPU per request (µs)",
        f"c={top} CPU server / load generator (% of one core)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for r in results:
        for binding in settings.bindings:
            outcome = r.bindings.get(binding)
            cells = [r.name, BINDING_LABELS[binding]]
            if outcome is None or outcome.error or not outcome.load:
                lines.append("| " + " | ".join(cells + [_state(r, binding)] * (len(header) - 2)) + " |")
                continue
            for c in settings.concurrency:
                level = _levels(r, binding, c)
                cells += (
                    [f"{level.rps:.0f}", f"{level.p50_ms:.2f} / {level.p99_ms:.2f}"]
                    if level is not None
                    else ["n/a", "n/a"]
                )
            rps, base_rps = _level(binding, top, "rps")(r), _level("jsonrpc", top, "rps")(r)
            best, base_best = _stream_stat(binding, max)(r), _stream_stat("jsonrpc", max)(r)
            cells.append(f"{rps / base_rps:.2f}x" if rps is not None and base_rps else "-")
            cells.append(f"{best:.0f}" if best is not None else "n/a")
            cells.append(f"{best / base_best:.2f}x" if best is not None and base_best else "-")
            cpu_us = _server_cpu_us(binding, top)(r)
            cells.append(f"{cpu_us:.0f}" if cpu_us is not None else "n/a")
            level = _levels(r, binding, top)
            if level is not None and level.server_cpu_s is not None and level.client_cpu_s is not None:
                cells.append(
                    f"{level.server_cpu_s / level.seconds * 100:.0f} / {level.client_cpu_s / level.seconds * 100:.0f}"
                )
            else:
                cells.append("n/a")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(results: list[TargetResult], info: dict[str, str], settings: Settings) -> str:
    ratios = ratio_columns(results)
    header = ["metric", "better", *(r.name for r in results), *(name for name, _ in ratios)]
    labels = ", ".join(BINDING_LABELS[b] for b in settings.bindings)
    others = [name for name in settings.targets if not is_skillwire(name)]
    lines = [
        f"# skillwire vs {', '.join(others) or BASELINE} benchmark",
        "",
        *(f"- **{key}**: {value}" for key, value in info.items()),
        f"- **settings**: bindings {labels}, measured one after the other on the same server; per binding "
        f"{settings.warmup:g} s warm-up, then {settings.duration:g} s per concurrency level "
        f"({', '.join(map(str, settings.concurrency))}), {settings.settle:g} s idle after each, "
        f"{settings.stream_runs} stream runs; {settings.cold_starts} cold starts"
        + (
            "; the measured servers also serve gRPC on a second port (the cold starts do not: see the "
            "rows with gRPC)"
            if "grpc" in settings.bindings
            else ""
        ),
        f"- load generators and servers share the same {info['nproc']} cores: compare columns, "
        "do not read the figures as absolute capacity",
        "- rows without a binding prefix are JSON-RPC; `REST` is HTTP+JSON (`POST /message:send`, "
        "SSE on `/message:stream`), `gRPC` is `lf.a2a.v1.A2AService`",
        *(
            [
                f"- `… / fastest peer`: requests/s of a skillwire target over the higher of "
                f"{' and '.join(PEER_TARGETS)} on the same row (named in the cell)"
            ]
            if any("fastest peer" in name for name, _ in ratios)
            else []
        ),
        "",
        "| " + " | ".join(header) + " |",
        "|---|---|" + "---:|" * (len(header) - 2),
    ]
    for row in report_rows(settings):
        cells = [row.metric, row.better or "-", *(_cell(row, r) for r in results)]
        cells += [ratio(row) for _, ratio in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## By binding", "", *bindings_table(results, settings), ""]
    for r in results:
        lines.append(f"- `{r.name}`: " + (f"`{shlex.join(r.command)}`" if r.command else "not started"))
        if r.skipped:
            lines.append(f"  - **skipped**: {r.skipped}")
        if r.error:
            lines.append(f"  - **failed**: {' '.join(r.error.split())}")
        for binding, outcome in r.bindings.items():
            if outcome.skipped:
                lines.append(f"  - {BINDING_LABELS[binding]}: {outcome.skipped}")
            elif outcome.error:
                lines.append(f"  - **{BINDING_LABELS[binding]} failed**: {' '.join(outcome.error.split())}")
            elif outcome.endpoint:
                lines.append(f"  - {BINDING_LABELS[binding]}: `{outcome.endpoint}`")
        lines += [f"  - note: {note}" for note in r.notes]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add(
        "--targets",
        default=",".join(ALL_TARGETS),
        help=f"comma-separated, from: {', '.join(KNOWN_TARGETS)} (default: all but the last {len(AUTH_TARGETS)})",
    )
    add(
        "--bindings",
        default=",".join(ALL_BINDINGS),
        help=f"comma-separated, from: {', '.join(ALL_BINDINGS)} (default all; JSON-RPC rows keep their names)",
    )
    add("--duration", type=float, default=5.0, help="seconds of load per concurrency level (default 5)")
    add("--warmup", type=float, default=2.0, help="seconds of warm-up load first (default 2; 0 for none)")
    add("--settle", type=float, default=1.0, help="idle seconds after each load run (default 1)")
    add("--concurrency", default="1,16,64", help="comma-separated concurrency levels (default 1,16,64)")
    add("--cold-starts", type=int, default=3, help="spawns to time; the last is then measured (default 3)")
    add("--stream-chunks", type=int, default=1000, help="N of the `stream N` SSE request (default 1000)")
    add("--stream-runs", type=int, default=5, help="SSE requests to time (default 5)")
    add("--stream-timeout", type=float, default=60.0, help="give up on one SSE request after this (s)")
    add("--tasks", type=int, default=0, help="then send N more SendMessage, sampling RSS every N/10")
    add("--start-timeout", type=float, default=30.0, help="give up on a start after this (s)")
    add("--loadgen", choices=("auto", "wrk", "httpx"), default="auto", help="auto: wrk if installed")
    add("--wrk-threads", type=int, default=1, help="wrk threads (default 1, leaving a core to the server)")
    add("--skillwire", default=None, help="skillwire command (default: the script beside this python)")
    add("--json", type=Path, default=None, help="also write the results as JSON to this file")
    add(
        "--pin",
        action="store_true",
        help="the server on core 1, the harness and wrk on core 0 (Linux; as issue 31's figures are measured)",
    )
    ns = parser.parse_args(argv)

    targets = [t.strip() for t in ns.targets.split(",") if t.strip()]
    if unknown := sorted(set(targets) - set(KNOWN_TARGETS)):
        parser.error(f"unknown targets: {', '.join(unknown)}")
    bindings = [b.strip() for b in ns.bindings.split(",") if b.strip()]
    if unknown := sorted(set(bindings) - set(ALL_BINDINGS)):
        parser.error(f"unknown bindings: {', '.join(unknown)}")
    if not bindings:
        parser.error("--bindings needs at least one binding")
    bindings = [b for b in ALL_BINDINGS if b in bindings]
    concurrency = [int(c) for c in ns.concurrency.split(",")]
    if min(concurrency, default=0) < 1 or min(ns.cold_starts, ns.stream_runs, ns.wrk_threads) < 1:
        parser.error("concurrency levels, --cold-starts, --stream-runs and --wrk-threads must be >= 1")
    if min(ns.duration, ns.stream_chunks) <= 0 or min(ns.warmup, ns.settle, ns.tasks) < 0:
        parser.error("--duration and --stream-chunks must be > 0; --warmup, --settle and --tasks >= 0")
    loadgen = chosen_loadgen(ns.loadgen)
    return Settings(
        targets=targets,
        bindings=bindings,
        duration=ns.duration,
        warmup=ns.warmup,
        settle=ns.settle,
        concurrency=concurrency,
        cold_starts=ns.cold_starts,
        stream_chunks=ns.stream_chunks,
        stream_runs=ns.stream_runs,
        stream_timeout=ns.stream_timeout,
        tasks=ns.tasks,
        start_timeout=ns.start_timeout,
        loadgen=loadgen,
        wrk_threads=ns.wrk_threads,
        skillwire=skillwire_command(ns.skillwire),
        json=ns.json,
        pin=ns.pin,
    )


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit, so that `finally` blocks stop the servers."""

    def handler(_signum: int, _frame: object) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    if settings.pin:
        os.sched_setaffinity(0, HARNESS_CPUS)  # inherited by wrk and every other child but the servers
    info = machine_info(settings.loadgen, settings.bindings, settings.targets)
    info["pinned"] = "server on core 1, harness and load generator on core 0" if settings.pin else "no"
    runs = len(settings.concurrency) + (settings.warmup > 0)
    per_binding = settings.warmup + len(settings.concurrency) * settings.duration + runs * settings.settle
    estimate = settings.cold_starts + len(settings.bindings) * (per_binding + settings.stream_runs)
    log(f"{len(settings.targets)} target(s), roughly {estimate:.0f} s each")

    results: list[TargetResult] = []
    with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="skillwire-bench-") as tmp:
        for name in settings.targets:
            workdir = Path(tmp) / name
            workdir.mkdir()
            log(f"{name}: starting")
            results.append(measure_target(target_spec(name, settings.skillwire, workdir), settings, workdir))

    print(render_markdown(results, info, settings), end="")
    if settings.json is not None:
        payload: dict[str, Any] = {
            "machine": info,
            "settings": {k: v for k, v in asdict(settings).items() if k != "json"},
            "targets": [asdict(r) for r in results],
        }
        settings.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        log(f"wrote {settings.json}")
    return 1 if all(r.error or r.skipped for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
