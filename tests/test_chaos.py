"""Exactly once, in order, across processes (issue 29): a chaos test that can fail.

Two `skillwire serve` processes share a PostgreSQL schema and Redis, behind a load balancer (a TCP proxy
that sends each new connection to a live process at random). Clients (skillwire's own, with their
idempotency keys, retries and cursors) send blocking messages and streaming ones, while the balancer cuts
connections at random and one process is killed with SIGKILL halfway through. Then:

- every send the client was answered for ran its skill exactly once (each run records its tag as it
  begins), and no send ran twice. The one exception is a send whose process was killed between its claim
  (made before any work) and its skill's first line: whether the skill began cannot be known there, so the
  send is answered with its task failed, saying it was not run again, and the test checks that it was not;
- every stream saw its task's generations once each and in order (an update the client rebuilt from a
  snapshot that superseded missed events carries none, and may stand where generations jump);
- the last state each client saw of a task is the task as the store holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import socket
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import Served, postgres_schema, skip_without_service, start_process
from skillwire import Client
from skillwire.client.retry import RetryPolicy
from skillwire.protocol import models as m
from skillwire.protocol.states import TaskState

REPO = Path(__file__).resolve().parent.parent
AGENT = str(REPO / "tests" / "cluster_agent.py")
REDIS = ("127.0.0.1", 6379)
WAIT = 60.0
WORKERS, ROUNDS = 6, 6


class Balancer:
    """A TCP load balancer: each new connection goes to a live backend at random; ``cut_one()`` closes a
    connection under way (both sides), as a flaky network does."""

    def __init__(self) -> None:
        self.backends: list[int] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = None
            for port in random.sample(self.backends, len(self.backends)):
                try:
                    upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
                    break
                except OSError:
                    continue
            if upstream is None:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._pairs.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def cut_one(self) -> None:
        with self._lock:
            self._pairs = [p for p in self._pairs if p[0].fileno() != -1]
            if not self._pairs:
                return
            pair = self._pairs.pop(random.randrange(len(self._pairs)))
            self.cuts += 1
        for conn in pair:
            _close(conn)

    def close(self) -> None:
        _close(self._listener)
        with self._lock:
            for pair in self._pairs:
                for conn in pair:
                    _close(conn)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
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


class Seen:
    """What the clients saw: the tasks they were answered with, the events of each stream."""

    def __init__(self) -> None:
        self.answered: dict[str, str] = {}  # tag -> task id
        self.last: dict[str, tuple[TaskState, int]] = {}  # task id -> last state and generation seen
        self.streams: list[list[m.StreamResponse]] = []


async def _round(client: Client, runs: Path, seen: Seen, rng: random.Random) -> None:
    tag = uuid.uuid4().hex
    data = {"tag": tag, "runs": str(runs), "count": rng.randint(3, 8)}
    if rng.random() < 0.5:
        task = await client.send(skill="work", data=data)
        assert isinstance(task, m.Task)
        seen.answered[tag] = task.id
        seen.last[task.id] = (task.status.state, task.generation)
        return
    events: list[m.StreamResponse] = []
    async for event in client.stream(skill="work", data=data):
        events.append(event)
    seen.streams.append(events)
    first = events[0].task
    assert first is not None
    seen.answered[tag] = first.id
    states = [
        e.status_update.status.state if e.status_update is not None else e.task.status.state
        for e in events
        if e.status_update is not None or e.task is not None
    ]
    state = states[-1]  # a stream sent again may be only the task, ended already
    generation = max(m.generation_of(e) for e in events)
    seen.last[first.id] = (state, generation)


async def _worker(url: str, runs: Path, seen: Seen, seed: int, done: list[int], third: asyncio.Event) -> None:
    rng = random.Random(seed)
    policy = RetryPolicy(retries=40, base=0.05, cap=0.5)
    async with await Client.connect(url, retries=policy, timeout=WAIT) as client:
        assert client.generations and client.idempotency_keys
        for _ in range(ROUNDS):
            await _round(client, runs, seen, rng)
            done.append(1)
            if len(done) >= WORKERS * ROUNDS // 3:
                third.set()


async def _chaos(balancer: Balancer, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await asyncio.sleep(0.15)  # the network's pace, not a wait for the test's sake
        balancer.cut_one()


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    try:
        socket.create_connection(REDIS, timeout=2).close()
    except OSError as exc:
        skip_without_service("Redis", f"{REDIS[0]}:{REDIS[1]}: {exc}")
    async with postgres_schema() as url:
        yield url


@pytest.mark.slow
async def test_every_answered_send_ran_once_and_every_stream_saw_each_generation_once_in_order(
    schema: str, tmp_path: Path, processes: list[Served]
) -> None:
    runs = tmp_path / "runs.txt"
    runs.touch()
    flags = ("--bus", "redis://127.0.0.1:6379/0", "--limit", "lease_seconds=1.5", "--no-push")
    a = start_process(AGENT, schema, REPO, *flags)
    b = start_process(AGENT, schema, REPO, *flags)
    processes.extend([a, b])
    balancer = Balancer()
    balancer.backends = [a.port, b.port]
    seen, done, third = Seen(), [], asyncio.Event()
    stop = asyncio.Event()
    chaos = asyncio.ensure_future(_chaos(balancer, stop))
    url = f"http://127.0.0.1:{balancer.port}"
    try:
        workers = [
            asyncio.ensure_future(_worker(url, runs, seen, seed, done, third)) for seed in range(WORKERS)
        ]
        async with asyncio.timeout(WAIT):
            await third.wait()  # a third of the work done: one process dies
            balancer.backends = [b.port]
            os.kill(a.proc.pid, signal.SIGKILL)
            await asyncio.gather(*workers)
    finally:
        stop.set()
        await chaos
        balancer.close()
    assert balancer.cuts > 0
    # every answered send ran its skill exactly once, or (its process killed between its claim and its work)
    # was answered as failed without running again; none ran twice
    began, unbegun = runs.read_text().split(), []
    for tag, task_id in seen.answered.items():
        state, generation = seen.last[task_id]
        if began.count(tag) == 0:
            # killed between its claim and its work: the retry was answered with the task failed, saying so
            assert (state, generation) == (TaskState.FAILED, 1), (tag, state, generation)
            unbegun.append(task_id)
        else:
            assert began.count(tag) == 1, (tag, began.count(tag))
    assert len(began) == len(set(began))
    # every stream saw each generation once, in order (a rebuilt update, generation 0, may stand for a gap)
    for events in seen.streams:
        generations = [m.generation_of(e) for e in events]
        assert events[0].task is not None  # the task (as created, or as it was when a retried stream opened)
        numbered = [g for g in generations if g]
        assert numbered == sorted(set(numbered)), generations
        for (previous, current), rebuilt in zip(
            itertools.pairwise(numbered), _rebuilt_between(generations), strict=True
        ):
            assert current == previous + 1 or rebuilt, generations
    # the last state each client saw is the task as the store holds it
    from skillwire.stores.postgres import PostgresTaskStore

    store = PostgresTaskStore(schema)
    await store.open()
    try:
        for task_id, (state, generation) in seen.last.items():
            stored = await store.get(task_id)
            assert stored is not None
            assert (stored.task.status.state, stored.task.generation) == (state, generation), task_id
            if task_id in unbegun:
                message = stored.task.status.message
                assert message is not None and "not run again" in message.text()
    finally:
        await store.close()
    killed = [s for s, _ in seen.last.values() if s is TaskState.FAILED]
    completed = [s for s, _ in seen.last.values() if s is TaskState.COMPLETED]
    assert completed and len(killed) + len(completed) == len(seen.last)


def _rebuilt_between(generations: list[int]) -> list[bool]:
    """For each pair of consecutive numbered generations: whether a rebuilt update (0) lies between them."""
    out, gap = [], False
    started = False
    for g in generations:
        if g == 0:
            gap = started
            continue
        if started:
            out.append(gap)
        started, gap = True, False
    return out
