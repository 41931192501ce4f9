"""The stall, scale, push, push fairness and cluster benchmarks run end to end in their quick modes and produce their reports.

Only the shape of the reports is checked (every scenario measured, every figure present): timings depend on
the machine and never decide a test. bench/run.py's peers (fasta2a, a2a-js) are checked without being
installed: the request each target is sent, the answers accepted, the report's cells and ratios, and a run
that goes on past a peer that is not installed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

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


# ------------------------------------------------------------------------------- bench/run.py's peers


@pytest.fixture(scope="module")
def bench_run() -> ModuleType:
    """bench/run.py, imported as a module (it is a script beside the other benchmarks, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


#: target: JSON-RPC send and stream methods, the user's role, the A2A-Version header it is sent (or None)
EXPECTED_REQUESTS = {
    "a2a-sdk": ("SendMessage", "SendStreamingMessage", "ROLE_USER", "1.0"),
    "fasta2a": ("message/send", "message/stream", "user", None),
    "a2a-js": ("SendMessage", "SendStreamingMessage", "ROLE_USER", "1.0"),
    "skillwire-memory": ("SendMessage", "SendStreamingMessage", "ROLE_USER", "1.0"),
    "skillwire-apikey": ("SendMessage", "SendStreamingMessage", "ROLE_USER", "1.0"),
}


def _wrk_body(script: str, counter: int, tag: str) -> bytes:
    """What the script's ``request()`` posts for this counter and tag: its Lua body expression evaluated."""
    (line,) = [ln for ln in script.splitlines() if ln.strip().startswith("local body = ")]
    expr = line.split("local body = ", 1)[1]
    expr = expr.replace('" .. counter .. "', str(counter)).replace('" .. tag .. "', tag)
    assert expr.startswith('"') and expr.endswith('"') and '" ..' not in expr, expr
    return re.sub(r"\\(.)", r"\1", expr[1:-1]).encode()


def _wrk_headers(script: str) -> dict[str, str]:
    return dict(re.findall(r'^wrk\.headers\["([^"]+)"\] = "([^"]*)"$', script, re.MULTILINE))


def test_each_target_is_sent_its_own_requests(bench_run: ModuleType, tmp_path: Path) -> None:
    for name, (send, stream, role, version) in EXPECTED_REQUESTS.items():
        shape = bench_run.target_spec(name, ["skillwire"], tmp_path).shape
        script = bench_run.wrk_send_script(shape)
        posted = _wrk_body(script, 7, "bench-0")
        # wrk and the httpx load generator post the same bytes
        assert posted == shape.send_body("bench-0-7", 7), name
        params = {"message": {"messageId": "bench-0-7", "role": role, "parts": [{"text": "hello"}]}}
        assert json.loads(posted) == {"jsonrpc": "2.0", "id": 7, "method": send, "params": params}, name
        assert json.loads(shape.body(shape.stream, "stream 5", "s-1"))["method"] == stream, name
        headers = _wrk_headers(script)
        assert headers == dict(shape.headers), name
        assert headers["Content-Type"] == "application/json"
        assert headers.get("A2A-Version") == version, name
    # The HTTP+JSON load: a bare SendMessageRequest, as before.
    rest = _wrk_body(bench_run.WRK_REST_SCRIPT, 3, "t")
    assert rest == b'{"message":{"messageId":"t-3","role":"ROLE_USER","parts":[{"text":"hello"}]}}'


def test_peers_offer_their_bindings(bench_run: ModuleType, tmp_path: Path) -> None:
    fasta2a = bench_run.target_spec("fasta2a", ["skillwire"], tmp_path)
    a2a_js = bench_run.target_spec("a2a-js", ["skillwire"], tmp_path)
    assert fasta2a.bindings == ("jsonrpc",)
    assert a2a_js.bindings == bench_run.ALL_BINDINGS
    settings = bench_run.parse_args(["--bindings", "rest,grpc", "--loadgen", "httpx"])
    # installed or not (CI does not install the peers), a target offering none of the bindings is skipped so
    installed = dataclasses.replace(fasta2a, missing=None)
    assert bench_run.skip_reason(installed, settings) == "offers none of the bindings asked for (REST, gRPC)"
    absent = dataclasses.replace(fasta2a, missing=bench_run.NOT_INSTALLED)
    assert bench_run.skip_reason(absent, settings) == bench_run.NOT_INSTALLED
    assert list(bench_run.ALL_TARGETS[:4]) == ["ceiling", "a2a-sdk", "fasta2a", "a2a-js"]
    ceiling = bench_run.target_spec("ceiling", ["skillwire"], tmp_path)
    assert ceiling.bindings == ("jsonrpc",) and ceiling.missing is None


def test_peer_versions_are_pinned() -> None:
    peers = ROOT / "bench" / "peers"
    manifest = json.loads((peers / "a2a_js_echo" / "package.json").read_text())
    lock = json.loads((peers / "a2a_js_echo" / "package-lock.json").read_text())["packages"]
    assert manifest["dependencies"]["@a2a-js/sdk"] == "1.3.0"
    assert lock[""]["dependencies"] == manifest["dependencies"]  # npm ci refuses a lock out of step
    for package, wanted in manifest["dependencies"].items():
        assert lock[f"node_modules/{package}"]["version"] == wanted, package
    assert '"fasta2a==2.1.1"' in (peers / "install.sh").read_text()


def test_answer_checks_follow_the_target(bench_run: ModuleType) -> None:
    v1, fasta2a = bench_run.V1_SHAPE, bench_run.FASTA2A_SHAPE
    echoed = {"artifacts": [{"parts": [{"text": "hello"}]}]}
    assert bench_run._check_task({"status": {"state": "TASK_STATE_COMPLETED"}, **echoed}, "", v1) == (
        "TASK_STATE_COMPLETED"
    )
    assert bench_run._check_task({"status": {"state": "completed"}, **echoed}, "", fasta2a) == "completed"
    # fasta2a answers before its worker ran: a submitted task, no artifact yet, is accepted from it alone
    assert bench_run._check_task({"status": {"state": "submitted"}}, "", fasta2a) == "submitted"
    refused = [
        ({"status": {"state": "TASK_STATE_SUBMITTED"}}, v1),
        ({"status": {"state": "failed"}, **echoed}, fasta2a),
        ({"status": {"state": "completed"}, "artifacts": [{"parts": [{"text": "bye"}]}]}, fasta2a),
        ({"status": {"state": "completed"}, **echoed}, v1),
    ]
    for task, shape in refused:
        with pytest.raises(bench_run.TargetFailed):
            bench_run._check_task(task, "", shape)


def test_a_stream_ends_on_the_state_each_target_writes(bench_run: ModuleType) -> None:
    done = {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}
    assert bench_run.final_state("data: " + json.dumps({"jsonrpc": "2.0", "id": 1, "result": done})) == (
        "TASK_STATE_COMPLETED"
    )
    assert bench_run.final_state("data: " + json.dumps(done)) == "TASK_STATE_COMPLETED"  # HTTP+JSON
    lower = {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": {"status": {"state": "completed"}}}}
    assert bench_run.final_state("data: " + json.dumps(lower)) == "completed"
    chunk = {"result": {"artifactUpdate": {"artifact": {"parts": [{"text": "TASK_STATE_COMPLETED"}]}}}}
    assert bench_run.final_state("data: " + json.dumps(chunk)) is None
    assert bench_run.final_state("data: not json") is None


def _answer_once(head: bytes, body: bytes) -> tuple[str, socket.socket]:
    """A loopback server that answers one request with ``head`` and ``body`` (chunked), then closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
            conn.sendall(b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/", listener


def test_a_stream_is_read_by_curl_and_judged_whole(bench_run: ModuleType) -> None:
    # curl reads it (a reader in Python was slower than the servers it measured); every data: line counts,
    # and the stream must end on its target's COMPLETED state with at least N events.
    chunk = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"artifactUpdate": {"artifact": {"parts": [{"text": "c"}]}}},
    }
    done = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}},
    }
    events = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in [chunk] * 3 + [done])
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    url, listener = _answer_once(ok, events)
    with listener:
        got, seconds = bench_run.stream_once(url, 3, 10.0)
    assert got == 4 and seconds > 0
    url, listener = _answer_once(ok, events)
    with listener, pytest.raises(bench_run.TargetFailed, match="after 4 events"):
        bench_run.stream_once(url, 5, 10.0)  # fewer events than asked for
    url, listener = _answer_once(ok, events.rsplit(b"data:", 1)[0])
    with listener, pytest.raises(bench_run.TargetFailed, match="after 3 events"):
        bench_run.stream_once(url, 3, 10.0)  # no COMPLETED at the end
    url, listener = _answer_once(b"HTTP/1.1 503 Service Unavailable\r\n", b"")
    with listener, pytest.raises(bench_run.TargetFailed, match="HTTP 503"):
        bench_run.stream_once(url, 3, 10.0)


def _measured(bench_run: ModuleType, name: str, rps: dict[str, float]) -> object:
    result = bench_run.TargetResult(name)
    for binding, value in rps.items():
        level = bench_run.LoadLevel(16, int(value), 1.0, value, 1.0, 2.0, 0)
        result.bindings[binding] = bench_run.BindingResult(binding, load=[level])
    return result


def _row(markdown: str, metric: str) -> list[str]:
    (line,) = [ln for ln in markdown.splitlines() if ln.startswith(f"| {metric} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_report_divides_skillwire_by_the_fastest_peer(bench_run: ModuleType) -> None:
    targets = "a2a-sdk,fasta2a,a2a-js,skillwire-memory"
    argv = ["--targets", targets, "--bindings", "jsonrpc,rest", "--concurrency", "16", "--loadgen", "httpx"]
    settings = bench_run.parse_args(argv)
    fasta2a = _measured(bench_run, "fasta2a", {"jsonrpc": 2000})
    fasta2a.bindings["rest"] = bench_run.BindingResult("rest", skipped=bench_run.NOT_OFFERED)
    results = [
        _measured(bench_run, "a2a-sdk", {"jsonrpc": 500, "rest": 400}),
        fasta2a,
        _measured(bench_run, "a2a-js", {"jsonrpc": 1500, "rest": 2500}),
        _measured(bench_run, "skillwire-memory", {"jsonrpc": 3000, "rest": 5000}),
    ]
    markdown = bench_run.render_markdown(results, {"nproc": "2"}, settings)
    header = _row(markdown, "metric")
    assert header[-2:] == ["skillwire-memory / a2a-sdk", "skillwire-memory / fastest peer"]
    assert _row(markdown, "SendMessage c=16 (req/s)")[2:] == (
        ["500", "2000", "1500", "3000", "4.00x", "3.00x", "6.00x", "1.50x (fasta2a)"]
    )
    # Over REST, fasta2a offers nothing: the fastest peer is a2a-js.
    assert _row(markdown, "REST SendMessage c=16 (req/s)")[2:] == (
        ["400", "not offered", "2500", "5000", "-", "6.25x", "12.50x", "2.00x (a2a-js)"]
    )
    assert _row(markdown, "SendMessage c=16 p50 (ms)")[-1] == "-"
    assert "| fasta2a | REST | not offered |" in markdown
    assert "  - REST: not offered by this target" in markdown


def test_uninstalled_peer_is_reported_and_the_run_goes_on(
    bench_run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "not-installed"
    monkeypatch.setattr(bench_run, "FASTA2A_PYTHON", absent / "python")
    monkeypatch.setattr(bench_run, "A2A_JS_DIR", absent)
    for name in ("fasta2a", "a2a-js"):
        peer = bench_run.PEERS[name]
        monkeypatch.setitem(bench_run.PEERS, name, dataclasses.replace(peer, installed=(absent / "x",)))
    out = tmp_path / "bench.json"
    argv = [
        "--targets", "fasta2a,a2a-sdk,a2a-js", "--bindings", "jsonrpc", "--loadgen", "httpx",
        "--duration", "0.3", "--warmup", "0", "--settle", "0", "--concurrency", "1",
        "--cold-starts", "1", "--stream-runs", "1", "--stream-chunks", "5", "--json", str(out),
    ]  # fmt: skip
    assert bench_run.main(argv) == 0
    targets = {t["name"]: t for t in json.loads(out.read_text())["targets"]}
    assert list(targets) == ["fasta2a", "a2a-sdk", "a2a-js"]
    for name in ("fasta2a", "a2a-js"):
        assert targets[name]["skipped"] == "not installed: run bench/peers/install.sh", name
        assert targets[name]["command"] == [] and targets[name]["error"] is None, name
    sdk = targets["a2a-sdk"]
    assert sdk["error"] is None and sdk["skipped"] is None
    jsonrpc = sdk["bindings"]["jsonrpc"]
    assert jsonrpc["error"] is None and jsonrpc["load"][0]["requests"] > 0
    assert min(jsonrpc["stream_events"]) >= 5
    report = capsys.readouterr().out
    assert report.count("  - **skipped**: not installed: run bench/peers/install.sh") == 2
    cells = _row(report, "SendMessage c=1 (req/s)")
    assert cells[2] == cells[4] == "skipped" and float(cells[3]) > 0
    assert "fastest peer" not in report  # no peer was measured
