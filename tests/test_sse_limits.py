"""SSE streams bounded (issue 9): a client that stops reading costs the server a bounded buffer for at most
``limits.write_timeout`` seconds, then its stream is dropped while the task goes on.

A real server and a real client socket with a small receive buffer that stops reading in the middle of a
stream of large artifact chunks (JSON-RPC and HTTP+JSON). Without the bounds the server's pump read the
whole stream into memory (~55 MB per client in the issue's run) and kept the stream open for as long as
the client held the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import threading
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, RunningServer, assert_rpc_error, rpc, start_server, user_message
from skillwire import Agent, BaseRequestHandler, CallContext, Limits
from skillwire.errors import ServerBusyError
from skillwire.server.bindings.asgi import PUMP_BYTES
from skillwire.types import StreamResponse
from skillwire.wire.sse import SSEDecoder

WAIT = 15.0
WRITE_TIMEOUT = 1.0
CHUNK = 64 * 1024
CHUNKS = 600  # ~38 MB of stream, far more than any socket buffer holds
#: What a stalled stream may hold in the server (traced Python memory): the pump's bound and the event that
#: crossed it, the transport's write buffer, and the frames being encoded; far below the stream's size.
BOUNDED = 8 * 1024 * 1024


class Drops(logging.Handler):
    """Sets ``dropped`` when the server logs that it dropped a stream."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.dropped = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "skillwire.stream" and "dropped" in record.getMessage():
            self.dropped.set()


class Flood:
    """A skill that publishes CHUNKS chunks of CHUNK bytes (each replacing the last, so the task itself stays
    small), says so, then waits for ``gate`` before it completes."""

    def __init__(self) -> None:
        self.published = threading.Event()
        self.gate = threading.Event()

    async def __call__(self, context: Any, events: Any) -> None:
        await events.working()
        text = "x" * CHUNK
        for _ in range(CHUNKS):
            await events.artifact(text, artifact_id="flood")
        self.published.set()
        await asyncio.to_thread(self.gate.wait, 4 * WAIT)
        await events.complete("done")


@pytest.fixture
def flood() -> Iterator[tuple[RunningServer, Flood, Drops]]:
    skill = Flood()
    agent = Agent("flood", "Floods a stream with artifact chunks.", executor=skill)
    # The bus would shed this subscriber's events (its queue passes stream_buffer_bytes): lift that bound here,
    # so that what is measured is the stream's own buffering and what drops it is the write deadline. The
    # memory store keeps each task's event log in memory, within a budget of its own: keep it small here.
    limits = Limits(
        write_timeout=WRITE_TIMEOUT,
        stream_buffer_bytes=1 << 40,
        stream_buffer_events=1 << 30,
        max_task_log_bytes=1024 * 1024,
    )
    srv = start_server(agent.asgi(store="memory://", limits=limits))
    drops = Drops()
    logger = logging.getLogger("skillwire.stream")
    logger.addHandler(drops)
    try:
        yield srv, skill, drops
    finally:
        skill.gate.set()
        logger.removeHandler(drops)
        srv.stop()


def stalled_client(port: int, path: str, body: bytes, before: bytes = b"") -> socket.socket:
    """A connection with a 4 KiB receive buffer that sends ``body`` (after the requests in ``before``, in the
    same write: pipelined) and then reads only the response head and the first event (the task), leaving the
    rest unread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(WAIT)
    sock.connect(("127.0.0.1", port))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(before + head + body)
    return sock


def read_task_id(sock: socket.socket) -> tuple[str, bytes]:
    seen = b""
    while (found := re.search(rb'"task":\{"id":"([^"]+)"', seen)) is None:
        chunk = sock.recv(4096)
        assert chunk, seen[:500]
        seen += chunk
    return found.group(1).decode(), seen


def read_to_the_end(sock: socket.socket) -> bytes:
    """Everything left, until the server closes (FIN, or RST when it aborts)."""
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except ConnectionResetError:
        pass
    return data


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_client_that_stops_reading_is_dropped_and_the_task_goes_on(
    flood: tuple[RunningServer, Flood, Drops], binding: str
) -> None:
    srv, skill, drops = flood
    params = {"message": user_message("flood")}
    if binding == "JSONRPC":
        path, body = "/", json.dumps(rpc("SendStreamingMessage", params)).encode()
    else:
        path, body = "/message:stream", json.dumps(params).encode()

    tracemalloc.start()
    try:
        sock = stalled_client(srv.port, path, body)
        with sock:
            task_id, seen = read_task_id(sock)
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            assert skill.published.wait(WAIT), "the skill did not publish its chunks"
            # The server still answers others while the stalled stream waits (here: the card).
            card = httpx.get(srv.url + "/.well-known/agent-card.json", timeout=WAIT)
            assert card.status_code == 200
            assert drops.dropped.wait(WRITE_TIMEOUT + WAIT), "the stalled stream was not dropped"
            peak = tracemalloc.get_traced_memory()[1] - before
            tracemalloc.stop()
            assert peak < BOUNDED, (
                f"the stalled stream held {peak} bytes (bound {BOUNDED}, pump {PUMP_BYTES})"
            )

            # The task goes on: it is still working, and a new subscription follows it to the end.
            with httpx.Client(timeout=WAIT, headers=A2A_V1) as http:
                got = http.post(srv.rpc_url, json=rpc("GetTask", {"id": task_id, "historyLength": 0})).json()
                assert got["result"]["status"]["state"] == "TASK_STATE_WORKING", got
                subscribe = rpc("SubscribeToTask", {"id": task_id})
                with http.stream("POST", srv.rpc_url, json=subscribe) as response:
                    decoder = SSEDecoder()
                    states = []
                    for raw in response.iter_bytes():
                        for data in decoder.feed(raw):
                            event = json.loads(data)["result"]
                            if "task" in event:
                                states.append(event["task"]["status"]["state"])
                                skill.gate.set()  # the snapshot came: let the task finish
                            elif "statusUpdate" in event:
                                states.append(event["statusUpdate"]["status"]["state"])
            assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED", states

            # The dropped stream ended without its last events: what it had not sent is gone with it.
            rest = seen + read_to_the_end(sock)
            assert b"TASK_STATE_COMPLETED" not in rest
            assert len(rest) < CHUNKS * CHUNK // 4
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()


@pytest.mark.parametrize("pipelined", [False, True], ids=["alone", "pipelined"])
def test_a_dropped_stream_gives_back_its_connection_at_once(
    caplog: pytest.LogCaptureFixture, pipelined: bool
) -> None:
    """The connection of a stream dropped at its write deadline is aborted, not left to flush to a client
    that does not read: with two connections allowed, two more are served while the stalled client still
    holds its socket. uvicorn does not report the incomplete answer as an error. Pipelined: the stream is
    the second request of its write, which uvicorn starts only once the first is answered."""
    skill = Flood()
    agent = Agent("flood", "Floods a stream with artifact chunks.", executor=skill)
    limits = Limits(
        write_timeout=WRITE_TIMEOUT,
        stream_buffer_bytes=1 << 40,
        stream_buffer_events=1 << 30,
        max_connections=2,
    )
    srv = start_server(agent.asgi(store="memory://", limits=limits))
    drops = Drops()
    logging.getLogger("skillwire.stream").addHandler(drops)
    body = json.dumps(rpc("SendStreamingMessage", {"message": user_message("flood")})).encode()
    try:
        before = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" if pipelined else b""
        with stalled_client(srv.port, "/", body, before) as sock:
            read_task_id(sock)
            assert drops.dropped.wait(WRITE_TIMEOUT + WAIT), "the stalled stream was not dropped"
            with httpx.Client(timeout=WAIT) as first, httpx.Client(timeout=WAIT) as second:
                # keep-alive clients: both connections stay open at once
                answers = [c.get(srv.url + "/.well-known/agent-card.json") for c in (first, second)]
                answers += [c.get(srv.url + "/.well-known/agent-card.json") for c in (first, second)]
            assert [a.status_code for a in answers] == [200, 200, 200, 200]
    finally:
        logging.getLogger("skillwire.stream").removeHandler(drops)
        skill.gate.set()
        srv.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("uvicorn")]


# -- a stream far behind its task is not dropped: it catches up from the store ----------------------------------


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_stalled_stream_far_behind_its_task_gets_everything_once_it_reads_again(binding: str) -> None:
    """A stalled reader's bus queue passes stream_buffer_bytes many times over (38 MB of chunks): it sheds,
    and is not dropped; when the client reads again it gets every chunk, in order, from the store's event
    log (whose budget here holds them all), then the end."""
    skill = Flood()
    agent = Agent("flood", "Floods a stream with artifact chunks.", executor=skill)
    srv = start_server(agent.asgi(store="memory://", limits=Limits(max_task_log_bytes=64 * 1024 * 1024)))
    params = {"message": user_message("flood")}
    if binding == "JSONRPC":
        path, body = "/", json.dumps(rpc("SendStreamingMessage", params)).encode()
    else:
        path, body = "/message:stream", json.dumps(params).encode()
    try:
        with stalled_client(srv.port, path, body) as sock:
            _, seen = read_task_id(sock)
            assert skill.published.wait(WAIT)
            skill.gate.set()
            rest = bytearray(seen)
            while not rest.endswith(b"0\r\n\r\n"):  # the chunked response's end
                chunk = sock.recv(1 << 20)
                assert chunk, "the server closed the stream before its end"
                rest += chunk
        assert b"STREAM_DROPPED" not in rest
        assert rest.count(b'"artifactUpdate"') == CHUNKS and b"TASK_STATE_COMPLETED" in rest
    finally:
        skill.gate.set()
        srv.stop()


# -- an error in the middle of a stream (a subscriber that fell behind) -----------------------------------


class FallsBehind(BaseRequestHandler):
    """A stream that sends one event and then fails the way a dropped bus subscriber does."""

    async def on_send_streaming_message(self, request: Any, call: CallContext) -> Any:
        from skillwire import Message
        from skillwire.types import Part, Role

        async def events() -> AsyncIterator[StreamResponse]:
            hello = Message(message_id="r", context_id="c", role=Role.AGENT, parts=[Part(text="hi")])
            yield StreamResponse(message=hello)
            raise ServerBusyError("this subscriber fell behind: resubscribe to go on", retry_after=2)

        return events()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_subscriber_that_fell_behind_gets_the_busy_error_as_its_last_event(binding: str) -> None:
    agent = Agent("behind", "Falls behind.", executor=lambda context, events: None)
    srv = start_server(agent.asgi(store="memory://", handler=FallsBehind()))
    try:
        params = {"message": user_message("hi", messageId=str(uuid.uuid4()))}
        with httpx.Client(timeout=WAIT, headers=A2A_V1) as http:
            if binding == "JSONRPC":
                request = http.build_request("POST", srv.rpc_url, json=rpc("SendStreamingMessage", params, 9))
            else:
                request = http.build_request("POST", srv.url + "/message:stream", json=params)
            response = http.send(request)
        assert response.status_code == 200
        events = [json.loads(data) for data in SSEDecoder().feed(response.content)]
    finally:
        srv.stop()
    assert len(events) == 2
    last = events[-1]
    if binding == "JSONRPC":
        error = assert_rpc_error(last, -32603)
        assert last["id"] == 9
        assert error["data"][0]["reason"] == "SERVER_BUSY"
        assert error["data"][0]["metadata"] == {"retryAfter": "2"}
    else:
        error = last["error"]
        assert (error["code"], error["status"]) == (503, "UNAVAILABLE")
        assert error["details"][0]["reason"] == "SERVER_BUSY"
    assert "fell behind" in error["message"]


# -- a slow reader that reads is never dropped --------------------------------------------------------------


def test_a_client_that_reads_slowly_is_not_taken_for_one_that_stopped() -> None:
    """One event of 16 MB, read by a client that takes 4 KiB a millisecond (at most 4 MB/s): the one write
    that carries it waits seconds for the client, longer than the write deadline (here 2 s), while the
    client reads all along. The deadline counts what the client takes, not how long one write waits
    (Linux's send buffer alone grows to 4 MiB, and the kernel wakes a blocked writer only once a large part
    of it has drained: a client reading 40 KB/s was dropped in the middle of a stream at the default 30 s).
    The client gets the whole stream; before, it was dropped inside the big write."""
    big = 16 * 1024 * 1024

    async def steady(context: Any, events: Any) -> None:
        await events.artifact("a" + "y" * big, artifact_id="big")
        await events.artifact("tail", artifact_id="end")
        await events.complete("done")

    agent = Agent("steady", "Streams one event of 16 MB.", executor=steady)
    limits = Limits(write_timeout=2.0, stream_buffer_bytes=64 * 1024 * 1024)
    srv = start_server(agent.asgi(store="memory://", limits=limits))
    drops = Drops()
    logger = logging.getLogger("skillwire.stream")
    logger.addHandler(drops)
    data = bytearray()
    try:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendStreamingMessage",
                "params": {"message": user_message("go")},
            }
        ).encode()
        head = (
            "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT) as sock:
            sock.sendall(head + body)
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(4096):
                    data += chunk
                    time.sleep(0.001)  # the reader's pace, not a wait for the test's sake
    finally:
        logger.removeHandler(drops)
        srv.stop()
    assert not drops.dropped.is_set(), len(data)
    assert data.count(b"y" * 1024) >= big // 1024 - 1, len(data)
    assert b'"text":"tail"' in data and b"TASK_STATE_COMPLETED" in data
