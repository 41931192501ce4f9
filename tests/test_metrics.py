"""Prometheus metrics over real HTTP and gRPC: a scripted set of requests, then ``/metrics`` scraped and parsed
with prometheus-client's own parser, value by value."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    RunningServer,
    Served,
    example_agent,
    gated_agent,
    rpc,
    start_process,
    start_server,
    user_message,
)

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from skillwire import Agent, SkillContext
from skillwire.security import APIKey, Security

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
    agent = Agent("Secure", "Knows its callers", security=Security(APIKey("apiKey", keys={"scraper": "k-1"})))

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who called."""
        return ctx.principal.subject

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
