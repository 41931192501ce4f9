"""The HTTP connection budgets (``Limits``: header bytes and deadline, body deadline, keep-alive, open
connections) against a real uvicorn server, over raw sockets, so that what reaches the server is exactly
what each test sends.

Timers are set small through ``Limits``; tests wait on socket reads with timeouts and assert what the server
answered and when it closed, never how long it took.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    EXAMPLES,
    RunningServer,
    Served,
    example_agent,
    gated_agent,
    rpc,
    start_process,
    user_message,
)
from skillwire import Limits
from skillwire.server.app import A2AApplication

#: The cap on any one wait of a test, in seconds.
WAIT = 10.0
#: A timer that fires soon, so that a test waiting on it is short.
SHORT = 0.3

CARD_GET = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\n\r\n"
CARD_GET_CLOSE = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"

Serve = Callable[[A2AApplication], RunningServer]


def echo(**limits: Any) -> A2AApplication:
    return example_agent("echo").asgi(store="memory://", limits=Limits(**limits))


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.settimeout(WAIT)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset after its answer counts as closed)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def header_of(answer: bytes, name: bytes) -> bytes | None:
    head = answer.partition(b"\r\n\r\n")[0]
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def error_of(answer: bytes) -> dict[str, object]:
    """The AIP-193 error of a refused request (the body the REST binding answers with)."""
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    error = body["error"]
    assert error["code"] == status_of(answer)
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    return error  # type: ignore[no-any-return]


def card_is_served(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(CARD_GET_CLOSE)
        answer = read_until_closed(sock)
    assert status_of(answer) == 200, answer[:200]
    assert b'"name":"Echo"' in answer


def rpc_request(method: str, params: dict[str, object]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    head = (
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def read_until(sock: socket.socket, marker: bytes, data: bytes = b"") -> bytes:
    while marker not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before {marker!r}: {data[-300:]!r}"
        data += chunk
    return data


# -- headers -----------------------------------------------------------------------------------------------


def test_headers_over_the_limit_get_431_and_the_server_stays_responsive(serve: Serve) -> None:
    srv = serve(echo(max_header_bytes=4096))
    with connect(srv.port) as sock:
        sock.sendall(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 3000)
        card_is_served(srv.port)  # meanwhile
        sock.sendall(b"a" * 2000 + b"\r\n\r\n")
        answer = read_until_closed(sock)
    assert status_of(answer) == 431
    assert header_of(answer, b"connection") == b"close"
    error = error_of(answer)
    assert "4096" in str(error["message"])
    card_is_served(srv.port)


def test_headers_just_under_the_limit_are_served(serve: Serve) -> None:
    srv = serve(echo(max_header_bytes=4096))
    head = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Pad: "
    request = head + b"a" * (4096 - len(head) - 4) + b"\r\n\r\n"
    assert len(request) == 4096
    with connect(srv.port) as sock:
        for i in range(0, len(request), 100):  # in many reads, as a slow network delivers it
            sock.sendall(request[i : i + 100])
        assert status_of(read_until_closed(sock)) == 200


def test_pipelined_requests_count_their_own_headers_only(serve: Serve) -> None:
    # 40 requests in one write: together far over the header limit, each well under it.
    srv = serve(echo(max_header_bytes=1024))
    burst = CARD_GET * 39 + CARD_GET_CLOSE
    assert len(burst) > 2 * 1024
    with connect(srv.port) as sock:
        sock.sendall(burst)
        answers = read_until_closed(sock)
    assert answers.count(b"HTTP/1.1 200 OK") == 40
    assert b"HTTP/1.1 431" not in answers


def test_one_huge_header_is_cut_at_the_limit_while_it_is_being_sent(serve: Serve) -> None:
    srv = serve(echo())  # the default limit, 32 KiB
    total = 50 * 1024 * 1024
    chunk = b"a" * 65536
    sent = 0
    with connect(srv.port) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Huge: ")
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            while sent < total:
                sock.sendall(chunk)
                sent += len(chunk)
        answer = read_until_closed(sock)
    assert sent < total  # the server closed long before the header ended
    assert status_of(answer) == 431
    card_is_served(srv.port)


def test_headers_trickled_byte_by_byte_are_cut_at_the_header_timeout(serve: Serve) -> None:
    srv = serve(echo(header_timeout=SHORT, keepalive_timeout=WAIT * 3))
    trickle = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 10_000
    answer = b""
    with connect(srv.port) as sock:
        sock.settimeout(SHORT / 6)  # the pace of the trickle: one byte per wait for an answer
        for byte in trickle[: int(WAIT / (SHORT / 6))]:
            try:
                sock.sendall(bytes([byte]))
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            break  # the server answered
        sock.settimeout(WAIT)
        answer += read_until_closed(sock)
    assert answer, "the trickling client was never cut"
    assert status_of(answer) == 408
    assert "headers" in str(error_of(answer)["message"])
    card_is_served(srv.port)


# -- bodies ------------------------------------------------------------------------------------------------


def test_a_body_that_stalls_is_cut_at_the_body_timeout(serve: Serve) -> None:
    srv = serve(echo(body_timeout=SHORT, keepalive_timeout=WAIT * 3))
    with connect(srv.port) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"jsonrpc": "2.0",'
        )
        answer = read_until_closed(sock)
    assert status_of(answer) == 408
    assert "body" in str(error_of(answer)["message"])
    card_is_served(srv.port)


def test_an_answer_sent_before_the_body_ended_closes_at_the_body_deadline(serve: Serve) -> None:
    # The app answers 413 once the body passes its limit; the rest of the body is not read for ever.
    srv = serve(echo(max_body_bytes=1000, body_timeout=SHORT, keepalive_timeout=WAIT * 3))
    with connect(srv.port) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
            b"Content-Length: 100000\r\n\r\n" + b" " * 5000
        )
        answer = read_until_closed(sock)
    assert status_of(answer) == 413
    card_is_served(srv.port)


# -- idle connections --------------------------------------------------------------------------------------


def test_a_new_connection_that_sends_nothing_is_closed_after_the_keepalive_timeout(serve: Serve) -> None:
    srv = serve(echo(keepalive_timeout=SHORT))
    with connect(srv.port) as sock:
        assert read_until_closed(sock) == b""
    card_is_served(srv.port)


def test_an_open_stream_is_not_idle(serve: Serve, gate: threading.Event) -> None:
    timers = Limits(keepalive_timeout=SHORT, header_timeout=SHORT, body_timeout=SHORT)
    srv = serve(gated_agent(gate).asgi(store="memory://", limits=timers))
    request = rpc_request("SendStreamingMessage", {"message": user_message("go")})
    with connect(srv.port) as stream:
        stream.sendall(request)
        seen = read_until(stream, b'"a1"')
        # Another connection, idle from the start, is closed: a keep-alive period has passed.
        with connect(srv.port) as idle:
            assert read_until_closed(idle) == b""
        gate.set()
        seen = read_until(stream, b"0\r\n\r\n", seen)  # the last chunk of the stream
    assert b'"a2"' in seen and b"TASK_STATE_COMPLETED" in seen


def test_a_pipelined_request_over_a_budget_does_not_cut_the_stream_before_it(
    serve: Serve, gate: threading.Event
) -> None:
    srv = serve(gated_agent(gate).asgi(store="memory://", limits=Limits(max_header_bytes=2048)))
    request = rpc_request("SendStreamingMessage", {"message": user_message("go")})
    with connect(srv.port) as sock:
        sock.sendall(request)
        seen = read_until(sock, b'"a1"')
        sock.sendall(b"GET /.well-known/agent-card.json HTTP/1.1\r\nX-Big: " + b"a" * 4096)
        gate.set()
        seen += read_until_closed(sock)  # the stream ends, then the connection is closed
    assert seen.endswith(b"0\r\n\r\n"), seen[-200:]
    assert b'"a2"' in seen and b"TASK_STATE_COMPLETED" in seen
    assert b"HTTP/1.1 431" not in seen


# -- open connections --------------------------------------------------------------------------------------


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def hold(port: int, count: int, sockets: list[socket.socket]) -> list[socket.socket]:
    """``count`` keep-alive connections, each with one answered request, so the server holds them all."""
    held = []
    for _ in range(count):
        sock = connect(port)
        sockets.append(sock)
        sock.sendall(CARD_GET)
        read_until(sock, b'"name":"Echo"')
        held.append(sock)
    return held


def release(held: list[socket.socket]) -> None:
    """Close held connections from the server's side (``Connection: close``), so that it has let go of them
    once the client reads the end."""
    for sock in held:
        sock.sendall(CARD_GET_CLOSE)
        read_until_closed(sock)


def test_connections_beyond_the_limit_get_503_and_later_ones_are_served(
    serve: Serve, sockets: list[socket.socket]
) -> None:
    srv = serve(echo(max_connections=20, keepalive_timeout=WAIT * 3, retry_after=7))
    held = hold(srv.port, 20, sockets)

    with connect(srv.port) as extra:  # sends nothing: the answer comes at once
        answer = read_until_closed(extra)
    assert status_of(answer) == 503
    assert header_of(answer, b"retry-after") == b"7"
    error = error_of(answer)
    assert error["status"] == "UNAVAILABLE"
    assert error["details"][0]["reason"] == "SERVER_BUSY"  # type: ignore[index]

    with connect(srv.port) as eager:  # a client that sends its request before reading still reads 503
        eager.sendall(CARD_GET)
        assert status_of(read_until_closed(eager)) == 503

    release(held[:1])
    card_is_served(srv.port)
    release(held[1:])
    for _ in range(3):
        card_is_served(srv.port)


# -- a real `skillwire serve`: the open-file limit, and a Python without httptools --------------------------

LOW_FD_LIMIT = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (100, 128))
os.execv(sys.executable, [sys.executable, "-m", "skillwire", *sys.argv[1:]])
"""

WITHOUT_HTTPTOOLS = """
import sys
sys.modules["httptools"] = None  # importing it fails, as where it is not installed
from skillwire.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[str], Served]]:
    """``spawn(code)`` runs ``python -c code serve examples/echo ...`` and waits until it serves."""
    started: list[Served] = []

    def _spawn(code: str) -> Served:
        served = start_process(
            str(EXAMPLES / "echo"),
            "memory://",
            tmp_path,
            launcher=("-c", code),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        started.append(served)
        return served

    yield _spawn
    for served in started:
        served.proc.terminate()
        served.proc.wait(WAIT)
        if served.proc.stdout is not None:
            served.proc.stdout.close()


def soft_fd_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc")


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/PID/limits (Linux)")
def test_serve_lifts_the_open_file_limit_and_keeps_max_connections_below_it(
    spawn: Callable[[str], Served], sockets: list[socket.socket]
) -> None:
    served = spawn(LOW_FD_LIMIT)  # soft limit 100, hard 128
    assert soft_fd_limit(served.proc.pid) == 128  # lifted to the hard limit
    # 128 files less the 64 kept for the store, logs and the loop
    assert any("max_connections lowered from 1000 to 64" in line for line in served.lines), served.lines

    held = hold(served.port, 64, sockets)
    for _ in range(30):  # more than the descriptors left: each is told 503, none fails to connect
        with connect(served.port) as extra:
            assert status_of(read_until_closed(extra)) == 503
    release(held)
    card_is_served(served.port)


def test_without_httptools_serve_falls_back_to_h11_with_its_header_limit(
    spawn: Callable[[str], Served],
) -> None:
    served = spawn(WITHOUT_HTTPTOOLS)
    assert any("httptools is not installed" in line for line in served.lines), served.lines
    card_is_served(served.port)
    with connect(served.port) as sock:
        # h11 bounds what it buffers of an incomplete request: headers that have not ended
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 40_000)
        answer = read_until_closed(sock)
    assert status_of(answer) == 400  # what uvicorn's h11 protocol answers at h11's size limit
    card_is_served(served.port)


# -- one write an answer ---------------------------------------------------------------------------------------


class _Writes:
    """A connection's real transport, noting each write that reaches it (everything else passes through)."""

    def __init__(self, transport: Any, writes: list[bytes]) -> None:
        self._transport = transport
        self._writes = writes

    def write(self, data: bytes) -> None:
        self._writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _request(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    if body:
        head += f"Content-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def test_a_unary_answer_is_one_write_a_head_or_a_stream_is_not_held() -> None:
    """uvicorn writes an answer's head as soon as it starts, then its body: the bounded protocol holds a head
    that promises a body (Content-Length) and sends both in one write. A HEAD answer, which has no body, and
    a stream's head (chunked: its events may come much later) go out at once, each event after it."""
    import uvicorn

    import serving
    from skillwire.server.serving.http import protocol_for

    writes: list[bytes] = []

    class Noting(protocol_for(Limits())):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(_Writes(transport, writes))

    send = json.dumps(rpc("SendMessage", {"message": user_message("hello")})).encode()
    stream = json.dumps(rpc("SendStreamingMessage", {"message": user_message("stream 3")})).encode()
    config = uvicorn.Config(echo(), host="127.0.0.1", http=Noting, lifespan="on", log_level="warning")
    with serving.running(config) as server:
        answers = []
        for request in (_request("POST", "/", send), _request("HEAD", "/.well-known/agent-card.json")):
            writes.clear()
            with connect(server.port) as sock:
                sock.sendall(request)
                answers.append(read_until_closed(sock))
            assert b"".join(writes) == answers[-1]
            assert len(writes) == 1, writes
        assert status_of(answers[0]) == 200 and b'"TASK_STATE_COMPLETED"' in answers[0]
        assert status_of(answers[1]) == 200 and answers[1].endswith(b"\r\n\r\n")

        writes.clear()
        with connect(server.port) as sock:
            sock.sendall(_request("POST", "/", stream))
            streamed = read_until_closed(sock)
        assert b"".join(writes) == streamed
        assert writes[0].startswith(b"HTTP/1.1 200") and writes[0].endswith(b"\r\n\r\n")  # the head alone
        assert b"TASK_STATE_COMPLETED" in streamed and len(writes) > 2
