"""Prometheus metrics over real HTTP and gRPC: a scripted set of requests, then ``/metrics`` scraped and parsed
with prometheus-client's own parser, value by value."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    PROCESS_TIMEOUT,
    RunningServer,
    Served,
    example_agent,
    gated_agent,
    rpc,
    secure_agent,
    skip_without_service,
    start_process,
    start_server,
    user_message,
)

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

V1 = {"A2A-Version": "1.0"}


def scrape(url: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(url + "/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def greeter() -> Iterator[RunningServer]:
    server = start_server(example_agent("greeter").asgi(store="memory://", metrics=True))
    yield server
    server.stop()


def test_requests_and_runs_are_counted(greeter: RunningServer) -> None:
    for name in ("Ada", "Grace", "Linus"):
        httpx.post(greeter.url + "/", json=rpc("SendMessage", {"message": user_message(name)}), headers=V1)
    httpx.post(greeter.url + "/", json=rpc("GetTask", {"id": "missing"}), headers=V1)
    rest = httpx.post(greeter.url + "/message:send", json={"message": user_message("Barbara")}, headers=V1)
    assert rest.status_code == 200
    samples = scrape(greeter.url)
    ok = {"binding": "JSONRPC", "operation": "SendMessage", "outcome": "COMPLETED"}
    assert value(samples, "skillwire_requests_total", **ok) == 3
    missing = {"binding": "JSONRPC", "operation": "GetTask", "outcome": "TASK_NOT_FOUND"}
    assert value(samples, "skillwire_requests_total", **missing) == 1
    over_rest = {"binding": "HTTP+JSON", "operation": "SendMessage", "outcome": "COMPLETED"}
    assert value(samples, "skillwire_requests_total", **over_rest) == 1
    durations = {"binding": "JSONRPC", "operation": "SendMessage"}
    assert value(samples, "skillwire_request_duration_seconds_count", **durations) == 3
    assert value(samples, "skillwire_request_duration_seconds_sum", **durations) > 0
    assert value(samples, "skillwire_task_runs_total", skill="greet", state="COMPLETED") == 4
    assert value(samples, "skillwire_task_run_duration_seconds_count", skill="greet", state="COMPLETED") == 4
    assert value(samples, "skillwire_tasks_running") == 0
    assert value(samples, "skillwire_streams_open") == 0


def test_running_tasks_and_open_streams_are_gauges(gate: threading.Event) -> None:
    server = start_server(gated_agent(gate).asgi(store="memory://", metrics=True))
    try:
        body = rpc("SendStreamingMessage", {"message": user_message("go")})
        with httpx.stream("POST", server.url + "/", json=body, headers=V1) as answer:
            lines = answer.iter_lines()
            next(line for line in lines if '"a1"' in line)  # the task waits for the gate now
            during = scrape(server.url)
            gate.set()
            list(lines)
        after = scrape(server.url)
    finally:
        server.stop()
    assert value(during, "skillwire_tasks_running") == 1
    assert value(during, "skillwire_streams_open") == 1
    assert value(after, "skillwire_streams_open") == 0
    stream = {"binding": "JSONRPC", "operation": "SendStreamingMessage", "outcome": "COMPLETED"}
    assert value(after, "skillwire_requests_total", **stream) == 1
    assert value(after, "skillwire_task_runs_total", skill="", state="COMPLETED") == 1


def test_grpc_requests_are_counted() -> None:
    pytest.importorskip("grpc")
    import asyncio

    from skillwire.client import Client

    server = start_server(example_agent("greeter").asgi(store="memory://", metrics=True, grpc_port=0))

    async def call() -> None:
        async with await Client.connect(server.url, bindings=("GRPC",), timeout=15) as client:
            await client.send("Ada")

    try:
        asyncio.run(call())
        samples = scrape(server.url)
    finally:
        server.stop()
    grpc_ok = {"binding": "GRPC", "operation": "SendMessage", "outcome": "COMPLETED"}
    assert value(samples, "skillwire_requests_total", **grpc_ok) == 1


def test_metrics_are_behind_the_security_schemes() -> None:
    agent = secure_agent({"scraper": "k-1"})
    server = start_server(agent.asgi(store="memory://", metrics=True))
    try:
        refused = httpx.get(server.url + "/metrics")
        assert refused.status_code == 401
        assert "skillwire_requests_total" not in refused.text
        assert value(scrape(server.url, **{"X-API-Key": "k-1"}), "skillwire_tasks_running") == 0
        assert httpx.post(server.url + "/metrics").status_code == 405
    finally:
        server.stop()


def test_off_by_default() -> None:
    server = start_server(example_agent("greeter").asgi(store="memory://"))
    try:
        assert httpx.get(server.url + "/metrics").status_code == 404
    finally:
        server.stop()


def test_serve_metrics(tmp_path: Path, processes: list[Served]) -> None:
    root = Path(__file__).parents[1]
    served = start_process("examples/greeter", "memory://", root, "--metrics")
    processes.append(served)
    assert f"  metrics: {served.url}/metrics" in "".join(served.lines)
    served.call("SendMessage", {"message": user_message("Ada")})
    samples = scrape(served.url)
    ok = {"binding": "JSONRPC", "operation": "SendMessage", "outcome": "COMPLETED"}
    assert value(samples, "skillwire_requests_total", **ok) == 1
    plain = start_process("examples/greeter", "memory://", root)
    processes.append(plain)
    assert httpx.get(plain.url + "/metrics").status_code == 404


# -- the store, the bus, budgets ----------------------------------------------------------------------------


def test_store_calls_are_timed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    server = start_server(example_agent("greeter").asgi(store=store, metrics=True))
    try:
        task = send_rpc(server.url, "SendMessage", {"message": user_message("Ada")})["task"]
        send_rpc(server.url, "GetTask", {"id": task["id"]})
        samples = scrape(server.url)
    finally:
        server.stop()
    commit = {"system": "sqlite", "operation": "commit", "outcome": "ok"}
    assert value(samples, "skillwire_store_operation_duration_seconds_count", **commit) >= 1
    assert value(samples, "skillwire_store_operation_duration_seconds_sum", **commit) > 0
    read = {"system": "sqlite", "operation": "get", "outcome": "ok"}
    assert value(samples, "skillwire_store_operation_duration_seconds_count", **read) >= 1
    # a series is exposed once it has a duration: no call failed, so there is no error series at all
    outcomes = {
        dict(labels).get("outcome") for name, labels in samples if name.startswith("skillwire_store_op")
    }
    assert outcomes == {"ok"}


def test_a_failing_store_call_is_counted_as_an_error(tmp_path: Path) -> None:
    server = start_server(example_agent("greeter").asgi(store="memory://", metrics=True))
    try:
        # a page token the store cannot read: ListTasks fails inside the store
        answer = httpx.post(
            server.url + "/", json=rpc("ListTasks", {"pageToken": "not-a-cursor"}), headers=V1
        )
        assert "error" in answer.json()
        samples = scrape(server.url)
    finally:
        server.stop()
    failed = {"system": "memory", "operation": "list_tasks", "outcome": "error"}
    assert value(samples, "skillwire_store_operation_duration_seconds_count", **failed) == 1


def test_subscribers_are_a_gauge(gate: threading.Event) -> None:
    server = start_server(gated_agent(gate).asgi(store="memory://", metrics=True))
    try:
        body = rpc("SendStreamingMessage", {"message": user_message("go")})
        with httpx.stream("POST", server.url + "/", json=body, headers=V1) as answer:
            lines = answer.iter_lines()
            task_id = json.loads(next(line for line in lines if '"a1"' in line).removeprefix("data: "))
            task_id = task_id["result"]["artifactUpdate"]["taskId"]
            follow = rpc("SubscribeToTask", {"id": task_id})
            with httpx.stream("POST", server.url + "/", json=follow, headers=V1) as second:
                following = second.iter_lines()
                next(following)  # subscribed: the task's snapshot came
                during = scrape(server.url)
                gate.set()
                list(following)
            list(lines)
        after = scrape(server.url)
    finally:
        server.stop()
    assert value(during, "skillwire_subscribers") >= 2  # the two streams (and the runtime's own, if any)
    assert value(during, "skillwire_streams_open") == 2
    assert value(after, "skillwire_subscribers") == 0


def test_budget_refusals_are_counted(gate: threading.Event) -> None:
    from skillwire.protocol.limits import Limits

    limits = Limits(max_running_tasks=1, max_body_bytes=4096, max_header_bytes=8192)
    server = start_server(gated_agent(gate).asgi(store="memory://", metrics=True, limits=limits))
    try:
        body = rpc("SendStreamingMessage", {"message": user_message("go")})
        with httpx.stream("POST", server.url + "/", json=body, headers=V1) as answer:
            lines = answer.iter_lines()
            next(line for line in lines if '"a1"' in line)  # one task runs: the budget is spent
            busy = httpx.post(
                server.url + "/", json=rpc("SendMessage", {"message": user_message("x")}), headers=V1
            )
            assert busy.json()["error"]["code"] == -32603
            gate.set()
            list(lines)
        large = httpx.post(
            server.url + "/",
            json=rpc("SendMessage", {"message": user_message("x" * 5000)}),
            headers=V1,
        )
        assert large.status_code == 413
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: " + b"a" * 9000 + b"\r\n\r\n")
            assert raw.recv(4096).startswith(b"HTTP/1.1 431")
        samples = scrape(server.url)
    finally:
        server.stop()
    assert value(samples, "skillwire_rejected_total", budget="max_running_tasks") == 1
    assert value(samples, "skillwire_rejected_total", budget="max_body_bytes") == 1
    assert value(samples, "skillwire_rejected_total", budget="max_header_bytes") == 1
    busy_line = {"binding": "JSONRPC", "operation": "SendMessage", "outcome": "SERVER_BUSY"}
    assert value(samples, "skillwire_requests_total", **busy_line) == 1
    # refused before its body was read: the operation is not known yet
    unread = {"binding": "JSONRPC", "operation": "", "outcome": "INVALID_REQUEST"}
    assert value(samples, "skillwire_requests_total", **unread) == 1


def test_refused_credentials_are_counted() -> None:
    agent = secure_agent({"scraper": "k-1"})
    server = start_server(agent.asgi(store="memory://", metrics=True))
    try:
        assert httpx.post(server.url + "/", json=rpc("GetTask", {"id": "t"}), headers=V1).status_code == 401
        assert httpx.get(server.url + "/tasks/t", headers=V1).status_code == 401
        samples = scrape(server.url, **{"X-API-Key": "k-1"})
    finally:
        server.stop()
    rpc_refused = {"binding": "JSONRPC", "operation": "", "outcome": "UNAUTHENTICATED"}
    assert value(samples, "skillwire_requests_total", **rpc_refused) == 1
    rest_refused = {"binding": "HTTP+JSON", "operation": "GetTask", "outcome": "UNAUTHENTICATED"}
    assert value(samples, "skillwire_requests_total", **rest_refused) == 1


def test_a_redis_bus_reports_its_writes() -> None:
    import asyncio

    redis = pytest.importorskip("redis.asyncio")

    async def reachable() -> str:
        client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        try:
            await asyncio.wait_for(client.ping(), 2.0)
            return ""
        except (OSError, redis.RedisError, TimeoutError) as exc:
            return str(exc)
        finally:
            await client.aclose()

    problem = asyncio.run(reachable())
    if problem:
        skip_without_service("Redis", f"none answers at 127.0.0.1:6379: {problem}")
    from skillwire.server.buses.schemes import open_bus

    bus = open_bus("redis://127.0.0.1:6379/0")
    server = start_server(example_agent("greeter").asgi(store="memory://", bus=bus, metrics=True))
    try:
        for name in (
            "Ada",
            "Grace",
        ):  # streamed: a task made and ended at once has no subscriber to publish to
            body = rpc("SendStreamingMessage", {"message": user_message(name)})
            with httpx.stream("POST", server.url + "/", json=body, headers=V1) as answer:
                assert [line for line in answer.iter_lines() if line.startswith("data:")]
        samples = wait_for_samples(
            server.url, lambda s: value(s, "skillwire_bus_events_written_total", system="redis") >= 2
        )
    finally:
        server.stop()
    assert value(samples, "skillwire_bus_write_duration_seconds_count", system="redis") >= 1


# -- OpenTelemetry ------------------------------------------------------------------------------------------


def otel_points(reader: Any) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Every data point the reader collects, by instrument name, with its attributes."""
    data = reader.get_metrics_data()
    points: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    points.setdefault(metric.name, []).append((dict(point.attributes), point))
    return points


def otel_value(points: dict[str, Any], name: str, **attributes: str) -> Any:
    found = [point for attrs, point in points.get(name, []) if attrs == attributes]
    assert len(found) == 1, f"{name} {attributes}: {points.get(name)}"
    return found[0]


def test_the_same_metrics_through_opentelemetry(gate: threading.Event) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from skillwire.server.observability.metrics import Metrics

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = Metrics(prometheus=False, meter_provider=provider)
    server = start_server(example_agent("greeter").asgi(store="memory://", metrics=metrics))
    try:
        for name in ("Ada", "Grace", "Linus"):
            send_rpc(server.url, "SendMessage", {"message": user_message(name)})
        httpx.post(server.url + "/", json=rpc("GetTask", {"id": "missing"}), headers=V1)
        assert httpx.get(server.url + "/metrics").status_code == 404  # no Prometheus endpoint asked for
        points = otel_points(reader)
    finally:
        server.stop()
        provider.shutdown()
    ok = {"binding": "JSONRPC", "operation": "SendMessage", "outcome": "COMPLETED"}
    assert otel_value(points, "skillwire.requests", **ok).value == 3
    missing = {"binding": "JSONRPC", "operation": "GetTask", "outcome": "TASK_NOT_FOUND"}
    assert otel_value(points, "skillwire.requests", **missing).value == 1
    duration = otel_value(points, "skillwire.request.duration", binding="JSONRPC", operation="SendMessage")
    assert duration.count == 3 and duration.sum > 0
    assert otel_value(points, "skillwire.task.runs", skill="greet", state="COMPLETED").value == 3
    assert otel_value(points, "skillwire.task.run.duration", skill="greet", state="COMPLETED").count == 3
    assert otel_value(points, "skillwire.tasks.running").value == 0
    assert otel_value(points, "skillwire.subscribers").value == 0
    commit = otel_value(
        points, "skillwire.store.operation.duration", system="memory", operation="commit", outcome="ok"
    )
    assert commit.count >= 3


def test_serve_otel_exports_metrics(processes: list[Served]) -> None:
    pytest.importorskip("opentelemetry.sdk")
    root = Path(__file__).parents[1]
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "console",
        "OTEL_METRIC_EXPORT_INTERVAL": "100",  # milliseconds
    }
    served = start_process("examples/greeter", "memory://", root, "--otel", env=env)
    processes.append(served)
    served.call("SendMessage", {"message": user_message("Ada")})
    line = served.wait_for_output('"name": "skillwire.task.runs"', timeout=PROCESS_TIMEOUT)
    assert "skillwire.task.runs" in line
    assert httpx.get(served.url + "/metrics").status_code == 404  # OpenTelemetry only: no --metrics


# -- helpers ------------------------------------------------------------------------------------------------


def send_rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(url + "/", json=rpc(method, params), headers=V1)
    result: dict[str, Any] = answer.json()["result"]
    return result


def wait_for_samples(url: str, ready: Any, attempts: int = 200) -> dict[Any, float]:
    """Scrape until ``ready(samples)``: a shared bus writes in the background. Each scrape is a round trip,
    so this waits on the server, not on a clock."""
    samples = scrape(url)
    for _ in range(attempts):
        if ready(samples):
            return samples
        samples = scrape(url)
    raise AssertionError("the metrics never got there")


def test_requests_that_never_became_calls_are_counted() -> None:
    from skillwire.protocol.limits import Limits

    limits = Limits(max_json_nodes=50)
    server = start_server(example_agent("greeter").asgi(store="memory://", metrics=True, limits=limits))
    try:
        garbled = httpx.post(
            server.url + "/", content=b"{not json", headers={**V1, "Content-Type": "application/json"}
        )
        assert "error" in garbled.json()
        many = {"message": {**user_message("x"), "metadata": {f"k{i}": i for i in range(60)}}}
        wide = httpx.post(server.url + "/", json=rpc("SendMessage", many), headers=V1)
        assert wide.json()["error"]["data"][0]["metadata"]["budget"] == "max_json_nodes"
        samples = scrape(server.url)
    finally:
        server.stop()
    reasons = {
        labels: count
        for (name, labels), count in samples.items()
        if name == "skillwire_requests_total" and ("operation", "") in labels
    }
    assert sum(reasons.values()) == 2, reasons
    assert value(samples, "skillwire_rejected_total", budget="max_json_nodes") == 1


def test_the_exposition_is_what_prometheus_client_would_write() -> None:
    """The app keeps its counts and durations as plain numbers, folded into buckets in batches; scraped,
    they must read exactly as prometheus-client's own Counter and Histogram fed the same events would (the
    oracle here), bucket by bucket and sum by sum: durations on a bucket's bound and past the last one, more
    of them than a series holds before it folds, and a scrape halfway included."""
    import random

    import prometheus_client as prom

    from skillwire.server.observability import metrics as module
    from skillwire.stores.retention import StoreStats

    ours = module.Metrics()
    registry = prom.CollectorRegistry()
    requests = prom.Counter("skillwire_requests", "", ("binding", "operation", "outcome"), registry=registry)
    durations = prom.Histogram("skillwire_request_duration_seconds", "", ("binding", "operation"),
                               buckets=module._REQUEST_BUCKETS, registry=registry)  # fmt: skip
    runs = prom.Counter("skillwire_task_runs", "", ("skill", "state"), registry=registry)
    run_durations = prom.Histogram("skillwire_task_run_duration_seconds", "", ("skill", "state"),
                                   buckets=module._RUN_BUCKETS, registry=registry)  # fmt: skip
    stores = prom.Histogram("skillwire_store_operation_duration_seconds", "", ("system", "operation", "outcome"),
                            buckets=module._IO_BUCKETS, registry=registry)  # fmt: skip
    pruned = prom.Counter("skillwire_tasks_pruned", "", registry=registry)
    ok, failed = ours.store_timers("sqlite", "commit")
    edges = [0.0, 0.0005, 0.0004999, 0.0005001, 0.003, 1, 60, 61.5, 1e6, *module._IO_BUCKETS,
             *module._REQUEST_BUCKETS, *module._RUN_BUCKETS]  # fmt: skip
    draw = random.Random(31)
    seconds = edges + [draw.choice(edges) * draw.choice((1, 0.5, 1.5)) for _ in range(3 * module._FOLD_AT)]

    def samples(text: str, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name.startswith(prefix) and not sample.name.endswith("_created")
        }

    prefixes = ("skillwire_requests_total", "skillwire_request_duration", "skillwire_task_run",
                "skillwire_store_operation", "skillwire_tasks_pruned")  # fmt: skip

    def same_as_the_oracle() -> None:
        exposed = ours.exposition()[0].decode()
        oracle = prom.generate_latest(registry).decode()
        for prefix in prefixes:
            expected = samples(oracle, prefix)
            assert expected, prefix
            assert samples(exposed, prefix) == expected, prefix

    for index, duration in enumerate(seconds):
        outcome = ("COMPLETED", "FAILED", "TASK_NOT_FOUND")[index % 3]
        binding = ("JSONRPC", "GRPC")[index % 2]
        ours._sinks[0].request(binding, "SendMessage", outcome, duration)
        requests.labels(binding, "SendMessage", outcome).inc()
        durations.labels(binding, "SendMessage").observe(duration)
        ours._sinks[0].run("echo", outcome, duration)
        runs.labels("echo", outcome).inc()
        run_durations.labels("echo", outcome).observe(duration)
        (ok if index % 4 else failed)(duration)
        stores.labels("sqlite", "commit", "ok" if index % 4 else "error").observe(duration)
        if index == len(seconds) // 2:
            ours.tasks_pruned(7)
            pruned.inc(7)
            same_as_the_oracle()
    same_as_the_oracle()
    ours.store_stats(StoreStats(tasks={"TASK_STATE_COMPLETED": 3}, size_bytes=4096))
    exposed = ours.exposition()[0].decode()
    stored = samples(exposed, "skillwire_store_tasks")
    assert stored[("skillwire_store_tasks", (("state", "TASK_STATE_COMPLETED"),))] == 3
    assert stored[("skillwire_store_tasks", (("state", "TASK_STATE_FAILED"),))] == 0
    assert samples(exposed, "skillwire_store_size_bytes") == {("skillwire_store_size_bytes", ()): 4096}
