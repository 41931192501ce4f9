"""The stall, scale, push, push fairness and cluster benchmarks run end to end in their quick modes and produce their reports.

Only the shape of the reports is checked (every scenario measured, every figure present): timings depend on
the machine and never decide a test.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import postgres_dsn, skip_without_service

ROOT = Path(__file__).resolve().parent.parent
STALL_SCENARIOS = [
    "quiet",
    "regex",
    "fanout",
    "header",
    "trickle",
    "idle",
    "tiny-arrays",
    "list-artifacts",
    "slow-sse",
    "grpc-6mb",
]

pytestmark = pytest.mark.slow


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "bench" / script), "--quick", "--python", sys.executable, *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_stall_quick_measures_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "stall.json"
    done = _run("stall.py", "--grpc-port", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [row["scenario"] for row in data["summary"]] == STALL_SCENARIOS
    for name, runs in data["runs"].items():
        (run,) = runs
        assert run["card"]["probes"] > 0, name
        summary = run["outcome"]["summary"]
        assert not summary.startswith(("the scenario failed", "the server did not start")), summary
        assert "the server died" not in summary, summary
        assert run["rss_peak_mib"] > 0 and run["cpu_s"] >= 0, name
    outcomes = {row["scenario"]: row["outcome"] for row in data["summary"]}
    assert "MiB answer" in outcomes["list-artifacts"]
    assert "tasks stored:" in outcomes["grpc-6mb"]
    for name in STALL_SCENARIOS:
        assert f"| {name} |" in done.stdout


def test_scale_quick_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    done = _run("scale.py", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(out.read_text())["summary"]
    assert list(summary) == ["multiturn", "list-filter", "restart"]
    for figures in summary.values():
        assert "error" not in figures, figures
    assert summary["multiturn"]["turns"] == 6
    for key in ("first turn ms", "median turn ms", "last turn ms", "SQLite files after, MiB"):
        assert key in summary["multiturn"]
    assert {"status=COMPLETED: first page ms", "status=COMPLETED: page 5 ms"} <= set(summary["list-filter"])
    restart = summary["restart"]
    assert restart["WORKING before the kill"] == restart["tasks"]
    assert restart["FAILED after recovery"] == restart["tasks"]
    assert restart["spawn to recovery done s"] is not None
    assert "## restart" in done.stdout


def test_push_fairness_quick_reports_every_row(tmp_path: Path) -> None:
    out = tmp_path / "fair.json"
    done = _run("push_fairness.py", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(r["target"], r["tarpits"]) for r in rows] == [
        (t, k) for t in ("skillwire", "a2a-sdk") for k in (0, 8)
    ]
    assert all(r["not_arrived"] == 0 and r["configs_refused"] == 0 for r in rows), rows
    assert all(r["tarpit_connections"] > 0 for r in rows if r["tarpits"]), rows
    assert done.stdout.count("\n| skillwire |") + done.stdout.count("\n| a2a-sdk |") == 4


def test_push_reports_every_row_and_deliveries(tmp_path: Path) -> None:
    out = tmp_path / "push.json"
    command = [
        sys.executable,
        str(ROOT / "bench" / "push.py"),
        "--duration", "0.5", "--warmup", "0", "--settle", "0.1", "--concurrency", "4",
        # httpx, whatever the machine has: it counts every request it sent, so the deliveries expected are
        # exact (wrk does not count the requests it cut at the end, whose webhooks still arrive)
        "--loadgen", "httpx",
        "--skillwire", f"{sys.executable} -m skillwire",
        "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    targets = json.loads(out.read_text())["targets"]
    assert [t["name"] for t in targets] == ["a2a-sdk", "skillwire-memory", "skillwire-sqlite"]
    for target in targets:
        assert target["error"] is None, target
        assert target["events_per_task"] == 3, target
        (level,) = target["levels"]
        assert level["plain"]["requests"] > 0, target["name"]
        push = level["push"]
        assert push["load"]["requests"] > 0 and push["received"] > 0, target["name"]
        assert push["completed"] > 0 and push["received"] == push["expected"], target["name"]
    for row in ("SendMessage, no push (req/s)", "SendMessage, with push (req/s)", "deliveries/s during the load",
                "deliveries pending when the load stops", "time to drain them (s)"):  # fmt: skip
        assert f"| {row} |" in done.stdout, row


async def test_cluster_quick_reports_every_configuration(tmp_path: Path) -> None:
    dsn = await postgres_dsn()
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=2).close()
    except OSError as exc:
        skip_without_service("Redis", f"127.0.0.1:6379: {exc}")
    out = tmp_path / "cluster.json"
    command = [
        sys.executable, str(ROOT / "bench" / "cluster.py"), "--quick",
        "--skillwire", f"{sys.executable} -m skillwire", "--postgres", dsn, "--json", str(out),
    ]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    configs = {c["name"]: c for c in json.loads(out.read_text())["configs"]}
    assert list(configs) == ["sqlite-1", "pg-redis-1", "pg-redis-2", "a2a-sdk"]
    for config in configs.values():
        assert config["error"] is None and config["skipped"] is None, config
        (level,) = config["levels"]
        assert level["load"]["requests"] > 0 and level["load"]["server_cpu_s"] > 0, config["name"]
        assert config["stream_events"] and min(config["stream_events"]) >= 50, config["name"]
    for name in ("pg-redis-1", "pg-redis-2"):
        (level,) = configs[name]["levels"]
        assert level["db_cpu_s"] > 0 and level["db_backends"] > 0, name
        assert level["redis_cpu_s"] is not None, name
    worker_cpu = configs["pg-redis-2"]["levels"][0]["process_cpu_s"]
    assert len(worker_cpu) == 3, worker_cpu  # the supervisor and both workers
    for name in ("sqlite-1", "pg-redis-1", "pg-redis-2"):
        rows = [line for line in done.stdout.splitlines() if line.startswith(f"| {name} |")]
        assert len(rows) == 2, (name, rows)  # one in each table
        for row in rows:
            assert re.search(r"\| \d+ \|", row), row
    (scaled,) = (
        line for line in done.stdout.splitlines() if line.startswith("| pg-redis-2 | 2 + supervisor |")
    )
    assert "x |" in scaled


def test_mcp_quick_measures_every_target(tmp_path: Path) -> None:
    out = tmp_path / "mcp.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mcp.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(row["target"], row["concurrency"]) for row in rows] == [
        (target, level) for target in ("skillwire-memory", "skillwire-sqlite", "mcp-sdk") for level in (1, 2)
    ]
    for row in rows:
        assert row["calls"] == 40 and row["calls_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0
