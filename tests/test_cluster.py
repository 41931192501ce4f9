"""Several real `skillwire serve` processes on one PostgreSQL schema and one Redis (issue 14).

Each test starts two or three server processes (tests/cluster_agent.py) on a fresh schema and the Redis bus,
and talks to them over HTTP with skillwire's client, as users behind a load balancer would: what one process
started, another reads, lists, subscribes to, continues and cancels; a process killed with SIGKILL has its
tasks taken over; Redis and PostgreSQL lost for a while (a TCP proxy in front of them, cut and restored).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    PROCESS_TIMEOUT,
    Served,
    ServerExited,
    TcpProxy,
    free_port,
    postgres_address,
    postgres_schema,
    skip_without_service,
    start_process,
    user_message,
    via_proxy,
)
from skillwire import Client, TaskState
from skillwire.client.errors import HTTPStatusError
from skillwire.errors import ServiceUnavailableError
from skillwire.protocol.models import (
    SendMessageConfiguration,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
)
from skillwire.server.tasks.run import STORE_UNAVAILABLE
from skillwire.webhooks import WebhookVerifier
from test_push import kinds, receiving, task_of

REPO = Path(__file__).resolve().parent.parent
AGENT = str(REPO / "tests" / "cluster_agent.py")
REDIS = ("127.0.0.1", 6379)
REDIS_URL = "redis://127.0.0.1:6379/0"
#: Short leases, so that a dead process is noticed within seconds (the default is 15 s).
LEASE = "lease_seconds=1.5"
WAIT = 30.0


def _redis_reachable() -> None:
    try:
        socket.create_connection(REDIS, timeout=2).close()
    except OSError as exc:
        skip_without_service("Redis", f"{REDIS[0]}:{REDIS[1]}: {exc}")


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    _redis_reachable()
    async with postgres_schema() as url:
        yield url


@pytest.fixture(params=["redis", "postgres"])
def bus(request: pytest.FixtureRequest, schema: str) -> str:
    """The event bus the test's processes share: Redis, or PostgreSQL alone (the store's own database and
    schema, for deployments without Redis)."""
    return REDIS_URL if request.param == "redis" else schema


@pytest.fixture
def cluster(schema: str, bus: str, processes: list[Served]) -> Callable[..., Served]:
    """``start(*extra, bus=..., store=..., push=False)``: one more server process on the test's schema and bus
    (stopped by conftest's ``processes`` at the end). ``push``: push notifications on, the webhook guard
    opened for receivers on 127.0.0.1."""
    default_bus = bus

    def start(*extra: str, bus: str = default_bus, store: str = schema, push: bool = False) -> Served:
        flags = ("--webhook-allow", "127.0.0.1", "--webhook-allow-http") if push else ("--no-push",)
        served = start_process(
            AGENT, store, REPO, "--bus", bus, "--limit", LEASE, "--log-level", "info", *flags, *extra
        )
        processes.append(served)
        return served

    return start


async def client(served: Served) -> Client:
    return await Client.connect(served.url, timeout=WAIT, retries=0)


def immediately() -> SendMessageConfiguration:
    return SendMessageConfiguration(return_immediately=True)


async def collect(
    events: AsyncIterator[StreamResponse], until: Callable[[StreamResponse], bool]
) -> list[Any]:
    """The events of a stream up to the first one ``until`` accepts (within WAIT seconds)."""
    seen: list[StreamResponse] = []

    async def drain() -> list[StreamResponse]:
        async for event in events:
            seen.append(event)
            if until(event):
                break
        return seen

    return await asyncio.wait_for(drain(), WAIT)


def state_of(event: StreamResponse) -> TaskState | None:
    if event.status_update is not None:
        return event.status_update.status.state
    if event.task is not None:
        return event.task.status.state
    return None


def terminal(event: StreamResponse) -> bool:
    state = state_of(event)
    return state is not None and state.is_terminal


async def working(c: Client, task_id: str) -> Task:
    """The task once it is WORKING (its skill has started), read through ``c``."""
    events = c.subscribe(task_id, resume=False)
    try:
        await collect(events, lambda e: state_of(e) is TaskState.WORKING)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    return await c.get_task(task_id)


# -- one task, several processes ------------------------------------------------------------------------------


async def test_a_task_started_in_one_process_is_read_listed_followed_and_canceled_through_another(
    cluster: Callable[..., Served],
) -> None:
    a, b = cluster(), cluster()
    ca, cb = await client(a), await client(b)
    try:
        task = await ca.send("x", skill="hold", configuration=immediately())
        assert isinstance(task, Task)
        running = await working(cb, task.id)  # subscribed through B while A runs it
        assert running.status.state is TaskState.WORKING
        assert f"running in {a.proc.pid}" in (running.status.message.parts[0].text or "")  # type: ignore[union-attr]
        listed = await cb.list_tasks()
        assert [t.id for t in listed.tasks] == [task.id]

        follower = cb.subscribe(task.id, resume=False)
        first = await collect(follower, lambda e: True)
        assert first[0].task is not None and first[0].task.id == task.id
        canceled = await cb.cancel_task(task.id)  # B stores it; A's run must stop
        assert canceled.status.state is TaskState.CANCELED
        rest = await collect(follower, terminal)
        assert state_of(rest[-1]) is TaskState.CANCELED
        a.wait_for_output(f"task {task.id} was ended by another process")  # A's work stopped
        for c in (ca, cb):
            assert (await c.get_task(task.id)).status.state is TaskState.CANCELED
    finally:
        await ca.aclose()
        await cb.aclose()


async def test_a_blocking_call_whose_task_another_process_cancels_stops_at_once(
    cluster: Callable[..., Served],
) -> None:
    """A new task is watched for an end made elsewhere only from its first commit (before it, no other
    process can know it): a blocking call's task, found by another process in its listing once it works,
    canceled there, stops its work in the first process, and the blocking call answers CANCELED."""
    a, b = cluster(), cluster()
    ca, cb = await client(a), await client(b)
    try:
        blocking = asyncio.create_task(ca.send("x", skill="hold"))
        listed: list[Task] = []
        for _ in range(2000):  # each a round trip to B: waits on the processes, not on a clock
            listed = list((await cb.list_tasks()).tasks)
            if listed and listed[0].status.state is TaskState.WORKING:
                break
        assert listed and listed[0].status.state is TaskState.WORKING, listed
        canceled = await cb.cancel_task(listed[0].id)
        assert canceled.status.state is TaskState.CANCELED
        answered = await asyncio.wait_for(blocking, WAIT)
        assert isinstance(answered, Task) and answered.id == listed[0].id
        assert answered.status.state is TaskState.CANCELED
        a.wait_for_output(f"task {answered.id} was ended by another process")  # A's work stopped
    finally:
        await ca.aclose()
        await cb.aclose()


async def test_a_multi_turn_task_is_continued_through_another_process(cluster: Callable[..., Served]) -> None:
    a, b = cluster(), cluster()
    ca, cb = await client(a), await client(b)
    try:
        asked = await ca.send("x", skill="ask")
        assert isinstance(asked, Task) and asked.status.state is TaskState.INPUT_REQUIRED
        follower = ca.subscribe(asked.id, resume=False)  # through A, while B answers
        await collect(follower, lambda e: True)
        done = await cb.send("Ada", task_id=asked.id, context_id=asked.context_id)
        assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED
        assert done.artifacts[0].parts[0].text == f"hello Ada from {b.proc.pid}"
        seen = await collect(follower, terminal)
        assert state_of(seen[-1]) is TaskState.COMPLETED
        assert (await ca.get_task(asked.id)).status.state is TaskState.COMPLETED
    finally:
        await ca.aclose()
        await cb.aclose()


async def test_two_answers_through_two_processes_at_once_one_wins_nothing_is_lost(
    cluster: Callable[..., Served],
) -> None:
    a, b = cluster(), cluster()
    ca, cb = await client(a), await client(b)
    try:
        for round_ in range(20):
            asked = await ca.send("x", skill="ask")
            assert isinstance(asked, Task)
            outcomes = await asyncio.gather(
                ca.send(f"A{round_}", task_id=asked.id),
                cb.send(f"B{round_}", task_id=asked.id),
                return_exceptions=True,
            )
            won = [o for o in outcomes if isinstance(o, Task)]
            lost = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(won) == 1 and len(lost) == 1, [
                (o.status.state, [m.parts[0].text for m in o.history], o.artifacts)
                if isinstance(o, Task)
                else o
                for o in outcomes
            ]
            assert "working on an earlier message" in str(lost[0]) or "terminal" in str(lost[0]), lost
            stored = await ca.get_task(asked.id)
            answers = [m.parts[0].text for m in stored.history if m.role.value == "ROLE_USER"][1:]
            assert len(answers) == 1 and answers[0] in (f"A{round_}", f"B{round_}"), stored.history
            assert stored.status.state is TaskState.COMPLETED
            assert stored.artifacts[0].parts[0].text is not None
            assert stored.artifacts[0].parts[0].text.startswith(f"hello {answers[0]} from ")
            assert won[0].artifacts[0].parts[0].text == stored.artifacts[0].parts[0].text
    finally:
        await ca.aclose()
        await cb.aclose()


# -- a process dies ------------------------------------------------------------------------------------------


async def test_the_tasks_of_a_killed_process_are_failed_or_run_again_elsewhere(
    cluster: Callable[..., Served],
) -> None:
    a, b = cluster(), cluster()
    ca, cb = await client(a), await client(b)
    try:
        held = await ca.send("x", skill="hold", configuration=immediately())
        again = await ca.send("x", skill="again", configuration=immediately())
        assert isinstance(held, Task) and isinstance(again, Task)
        await working(cb, held.id)
        await working(cb, again.id)
        followers = [cb.subscribe(t.id, resume=False) for t in (held, again)]
        for follower in followers:
            await collect(follower, lambda e: True)
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(PROCESS_TIMEOUT)

        ended = [await collect(f, terminal) for f in followers]  # B sees both outcomes, on its own
        assert state_of(ended[0][-1]) is TaskState.FAILED
        failed = await cb.get_task(held.id)
        assert "stopped" in (failed.status.message.parts[0].text or "")  # type: ignore[union-attr]
        assert state_of(ended[1][-1]) is TaskState.COMPLETED
        rerun = await cb.get_task(again.id)
        assert rerun.artifacts[0].parts[0].text == f"done in {b.proc.pid}"
        assert rerun.metadata == {"skillId": "again", "attempt": 2}
    finally:
        await ca.aclose()
        await cb.aclose()


async def test_delegated_work_of_a_killed_process_is_followed_by_another(
    cluster: Callable[..., Served], tmp_path: Path
) -> None:
    a, b = cluster(), cluster()
    ca, cb = await client(a), await client(b)
    done = tmp_path / "job-done"
    try:
        task = await ca.send(skill="deploy", data={"done": str(done)})
        assert isinstance(task, Task) and task.status.state is TaskState.WORKING  # handed to A's follower
        follower = cb.subscribe(task.id, resume=False)
        await collect(follower, lambda e: True)
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(PROCESS_TIMEOUT)
        b.wait_for_output(f"resumed task {task.id}")  # taken over: followed again, not failed
        done.touch()  # the job ends; B's follower sees it
        ended = await collect(follower, terminal)
        assert state_of(ended[-1]) is TaskState.COMPLETED
        stored = await cb.get_task(task.id)
        assert stored.artifacts[-1].parts[0].text == f"job followed to its end by {b.proc.pid}"
    finally:
        await ca.aclose()
        await cb.aclose()


# -- Redis and PostgreSQL lost for a while --------------------------------------------------------------------


class RedisServer:
    """A Redis server of the test's own (``redis-server`` on a free port, keeping nothing on disk, as the
    machine's), stopped and started again on the same port: a real restart, its streams lost with it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[str] | None = None
        self._drain = threading.Thread()

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            skip_without_service("redis-server", "no redis-server program on PATH")
        self._proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out = self._proc.stdout
        assert out is not None
        for line in out:  # its log, until it serves
            if "Ready to accept connections" in line:
                self._drain = threading.Thread(target=out.read, daemon=True)  # keep the pipe drained
                self._drain.start()
                return
        code = self._proc.wait(PROCESS_TIMEOUT)
        out.close()
        raise AssertionError(f"redis-server exited with {code}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            proc.wait(PROCESS_TIMEOUT)
            self._drain.join(PROCESS_TIMEOUT)  # it reads to the end of the closed pipe
            assert proc.stdout is not None
            proc.stdout.close()


class _Cut:
    """Redis lost behind a proxy: every connection closed, new ones refused, the same server back."""

    def __init__(self) -> None:
        self.proxy = TcpProxy(REDIS)
        self.url = f"redis://127.0.0.1:{self.proxy.port}/0"

    def start(self) -> None:
        self.proxy.start()

    def stop(self) -> None:
        self.proxy.cut()


@pytest.mark.parametrize("bus", [REDIS_URL])
@pytest.mark.parametrize("outage", ["cut", "restart"])
async def test_redis_lost_during_a_stream_ends_it_clearly_and_the_bus_recovers(
    cluster: Callable[..., Served], tmp_path: Path, bus: str, outage: str
) -> None:
    redis = _Cut() if outage == "cut" else RedisServer()
    redis.start()
    a, b = cluster(bus=redis.url), cluster(bus=redis.url)
    ca, cb = await client(a), await client(b)
    gate_file = tmp_path / "gate"
    gate_file.write_text("")
    try:
        task = await ca.send(
            skill="tick", data={"gate": str(gate_file), "count": 3}, configuration=immediately()
        )
        assert isinstance(task, Task)
        follower = cb.subscribe(task.id, resume=False)
        await collect(follower, lambda e: True)
        gate_file.write_text("1\n")
        await collect(follower, lambda e: e.artifact_update is not None)  # chunk 0, through Redis
        redis.stop()
        with pytest.raises(Exception) as ended:
            await collect(follower, lambda e: False)
        assert "dropped" in str(ended.value).lower() or "subscribe" in str(ended.value).lower()
        gate_file.write_text("1\n2\n")  # the task goes on in A meanwhile: its store takes the writes
        redis.start()  # after a restart, empty: the task's stream is gone with what it held
        for served in (a, b):  # each bus reconnects by itself
            served.wait_for_output("Redis is reachable again")
        again = cb.subscribe(task.id, resume=False)  # a new subscription replays from the store
        first = await collect(again, lambda e: True)
        assert first[0].task is not None
        gate_file.write_text("1\n2\n3\n")
        rest = await collect(again, terminal)
        assert state_of(rest[-1]) is TaskState.COMPLETED
        done = await cb.get_task(task.id)
        assert [p.text for p in done.artifacts[0].parts] == ["chunk 0", "chunk 1", "chunk 2"]
    finally:
        redis.stop()
        await ca.aclose()
        await cb.aclose()


async def test_postgresql_lost_for_a_while_gives_clear_errors_and_the_process_recovers_by_itself(
    cluster: Callable[..., Served], schema: str, bus: str, tmp_path: Path
) -> None:
    proxy = TcpProxy(postgres_address(schema))
    proxy.start()
    store = via_proxy(schema, proxy, timeout="3")
    # PostgreSQL alone: its bus goes through the proxy as well, and is lost with the store
    a = cluster(store=store, bus=bus if bus == REDIS_URL else store)
    ca = await client(a)
    gate_file = tmp_path / "gate"
    gate_file.write_text("")
    try:
        asked = await ca.send("x", skill="ask")
        ticking = await ca.send(
            skill="tick", data={"gate": str(gate_file), "count": 2}, configuration=immediately()
        )
        assert isinstance(asked, Task) and isinstance(ticking, Task)
        await working(ca, ticking.id)
        proxy.cut()

        # 503 with Retry-After (the client raises it as it is, for its retry policy: these have retries=0)
        with pytest.raises(HTTPStatusError) as read:
            await ca.get_task(asked.id)
        assert read.value.status_code == 503 and read.value.retry_after == 1
        assert isinstance(read.value.error, ServiceUnavailableError)
        assert str(read.value) == f"HTTP 503: {STORE_UNAVAILABLE} (SERVICE_UNAVAILABLE)"
        with pytest.raises(HTTPStatusError) as sent:  # nothing is answered that was not stored
            await ca.send("y", skill="ask")
        assert sent.value.status_code == 503 and "nothing of this request was stored" in str(sent.value)
        gate_file.write_text("1\n")  # the running task's next write fails: it is stopped
        a.wait_for_output(f"could not store task {ticking.id}")

        proxy.start()
        a.wait_for_output(f"task {ticking.id} is now stored as failed")  # by itself, once it is back
        assert (await ca.get_task(asked.id)).status.state is TaskState.INPUT_REQUIRED
        stopped = await ca.get_task(ticking.id)
        assert stopped.status.state is TaskState.FAILED
        assert "could not store" in (stopped.status.message.parts[0].text or "")  # type: ignore[union-attr]
        listed = await ca.list_tasks()
        assert sorted(t.id for t in listed.tasks) == sorted([asked.id, ticking.id])  # "y" was never stored
        done = await ca.send("Ada", task_id=asked.id)
        assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED
    finally:
        proxy.cut()
        await ca.aclose()


# -- push deliveries of a process that died ---------------------------------------------------------------


async def test_the_push_deliveries_of_a_killed_process_arrive_through_another(
    cluster: Callable[..., Served],
) -> None:
    with receiving() as hook:
        hook.default = 503  # refused while A is alive: its deliveries stay pending
        a, b = cluster(push=True), cluster(push=True)
        ca, cb = await client(a), await client(b)
        try:
            asked = await ca.send(
                "x",
                skill="ask",
                configuration=SendMessageConfiguration(
                    task_push_notification_config=TaskPushNotificationConfig(url=hook.url, id="c")
                ),
            )
            assert isinstance(asked, Task) and asked.status.state is TaskState.INPUT_REQUIRED
            [refused] = hook.wait_for(1, ok_only=False)
            assert kinds([refused]) == ["task"]
            os.kill(a.proc.pid, signal.SIGKILL)
            a.proc.wait(PROCESS_TIMEOUT)
            with hook._cond:
                hook.default = 200
            b.wait_for_output("took over 2 push deliveries of stopped processes")  # A made one attempt
            received = hook.wait_until(lambda ok: kinds(ok)[-1:] == ["TASK_STATE_INPUT_REQUIRED"])
            assert kinds(received) == ["task", "TASK_STATE_INPUT_REQUIRED"]  # in order, none lost
            assert {task_of(r) for r in received} == {asked.id}
            # every process signs with the key the store shares: B's JWKS verifies A's attempt and B's
            async with httpx.AsyncClient() as http:
                jwks = (await http.get(b.url + "/.well-known/webhook-jwks.json")).json()
            verifier = WebhookVerifier(jwks, issuer=a.url.rstrip("/"), audience=hook.url)
            for r in (refused, *received):
                await verifier.verify(r.body, r.headers)
        finally:
            await ca.aclose()
            await cb.aclose()


# -- --workers N ----------------------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


@pytest.mark.parametrize("bus", [REDIS_URL])
async def test_workers_share_one_port_a_dead_worker_is_started_again_and_sigterm_stops_all(
    cluster: Callable[..., Served], bus: str
) -> None:
    served = cluster("--workers", "2")
    workers = _children(served.proc.pid)
    assert len(workers) == 2
    c = await client(served)
    try:
        task = await c.send("x", skill="ask")
        assert isinstance(task, Task) and task.status.state is TaskState.INPUT_REQUIRED
        os.kill(workers[0], signal.SIGKILL)
        served.wait_for_output(f"worker 0 (pid {workers[0]}) exited with status -9: starting it again")
        done = await c.send("Ada", task_id=task.id)  # whichever worker takes it: the task is in the store
        assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED
    finally:
        await c.aclose()
    now = _children(served.proc.pid)
    assert len(now) == 2 and workers[0] not in now and workers[1] in now
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(PROCESS_TIMEOUT) == 0
    for pid in now:  # stopped, and reaped by the supervisor
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize("bus", [REDIS_URL])
def test_workers_each_take_a_share_of_new_connections(cluster: Callable[..., Served], bus: str) -> None:
    served = cluster("--workers", "2")
    workers = set(_children(served.proc.pid))
    served_by = []
    for n in range(32):  # each call a new connection (httpx.post)
        answer = served.call(
            "SendMessage",
            {"message": {**user_message(f"who {n}"), "metadata": {"skillId": "pid"}}},
        )
        served_by.append(int(answer["result"]["task"]["artifacts"][0]["parts"][0]["text"]))
    # one socket per worker (SO_REUSEPORT): the kernel spreads connections by their addresses, so both
    # take some (all 32 on one worker: a chance of one in 2**31)
    assert set(served_by) == workers, served_by


@pytest.mark.parametrize("bus", [REDIS_URL])
def test_workers_refuse_a_port_another_server_listens_on(cluster: Callable[..., Served], bus: str) -> None:
    first = cluster("--workers", "2")  # its sockets have SO_REUSEPORT: a second group must not join them
    with pytest.raises(ServerExited) as exited:
        cluster("--workers", "2", "--port", str(first.port))
    assert exited.value.returncode == 1
    assert f"cannot listen on 127.0.0.1:{first.port}: Address already in use" in exited.value.output
