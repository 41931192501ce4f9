"""Benchmark scaling out: one skillwire process on SQLite, one and two on PostgreSQL and Redis, in one run.

Each configuration is started in turn, like the targets of ``bench/run.py`` (same processes, ports, load
generators, echo agent), and measured on JSON-RPC: blocking SendMessage throughput and latency at a few
concurrencies, the events/s of one ``stream N`` request, and the CPU each request costs the skillwire
processes, the PostgreSQL server and the Redis server. The configurations:

* ``sqlite-1``: ``skillwire serve examples/echo --store sqlite:///TMP/bench.db`` (the memory bus);
* ``pg-redis-1``: the same with ``--store postgresql://...?schema=<fresh> --bus redis://...``;
* ``pg-redis-2``: the same with ``--workers 2`` (two forked processes on one listening socket);
* ``a2a-sdk``: the official SDK's echo agent (``bench/a2a_sdk_echo.py``, memory store), for reference.

A configuration whose PostgreSQL or Redis is unreachable is skipped with the reason in the report. Each
PostgreSQL configuration gets a schema of its own, dropped at the end. Progress goes to stderr, the markdown
report to stdout.

    python bench/cluster.py                                # all four (about 2 to 3 minutes)
    python bench/cluster.py --configs pg-redis-1,pg-redis-2 --duration 10 --json /tmp/cluster.json
    python bench/cluster.py --quick                        # tiny loads: a smoke run

See bench/README.md ("Scaling out") for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # the harness beside this file

ALL_CONFIGS = ("sqlite-1", "pg-redis-1", "pg-redis-2", "a2a-sdk")
#: The configurations that need PostgreSQL and Redis, and how many processes each serves with.
SHARED = {"pg-redis-1": 1, "pg-redis-2": 2}
#: The row the others' throughput is compared with: the same store and bus in one process.
SCALE_BASE = "pg-redis-1"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
#: Set on skillwire's PostgreSQL connections, so that their backends can be told from other clients'.
APPLICATION_NAME = "skillwire-bench-cluster"
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Settings:
    """What to measure and for how long (from the command line)."""

    configs: list[str]
    duration: float
    warmup: float
    settle: float
    concurrency: list[int]
    stream_chunks: int
    stream_runs: int
    stream_timeout: float
    start_timeout: float
    loadgen: str
    wrk_threads: int
    skillwire: list[str]
    postgres: str
    redis: str
    json: Path | None


# --------------------------------------------------------------------------------------------- results


@dataclass
class Level:
    """SendMessage load at one concurrency, and the CPU it cost each party."""

    load: run.LoadLevel
    #: PostgreSQL: its server processes and the backends of skillwire's connections (None: not used)
    db_cpu_s: float | None = None
    #: backends that served skillwire's connections during the load
    db_backends: int = 0
    #: backends that were gone at the end: what they used during the load is not counted
    db_backends_lost: int = 0
    redis_cpu_s: float | None = None
    #: CPU of each skillwire process (the supervisor and its workers, or the one server), in pid order
    process_cpu_s: list[float] = field(default_factory=list)
    #: the share of all the machine's CPU time that was busy, and that waited for I/O, during the load (%)
    machine_busy_pct: float | None = None
    machine_iowait_pct: float | None = None

    def total_cpu_s(self) -> float:
        return (self.load.server_cpu_s or 0.0) + (self.db_cpu_s or 0.0) + (self.redis_cpu_s or 0.0)


@dataclass
class ConfigResult:
    name: str
    command: list[str] = field(default_factory=list)
    #: the configuration was not measured because its services are unreachable
    skipped: str | None = None
    error: str | None = None
    #: processes in the server's tree once it answered (a supervisor and its workers with --workers)
    processes: int | None = None
    levels: list[Level] = field(default_factory=list)
    stream_events: list[int] = field(default_factory=list)
    stream_events_per_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def level(self, concurrency: int) -> Level | None:
        return next((x for x in self.levels if x.load.concurrency == concurrency), None)


def log(message: str) -> None:
    print(f"[cluster] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------- services and CPU


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process (all its threads), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * TICK_S


def _named(comm: str) -> list[int]:
    """The pids of the processes whose command name is ``comm`` (postgres, redis-server)."""
    found = []
    for path in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if path.read_text().strip() == comm:
                found.append(int(path.parent.name))
    return found


def machine_ticks() -> tuple[int, int, int]:
    """Ticks the machine's CPUs spent busy, waiting for I/O, and in all, from ``/proc/stat``."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    busy = user + nice + system + irq + softirq + steal
    return busy, iowait, busy + iowait + idle


def _cpu_of(pids: Sequence[int]) -> dict[int, float]:
    return {pid: cpu for pid in pids if (cpu := _cpu_s(pid)) is not None}


async def _backends(dsn: str) -> tuple[set[int], set[int]]:
    """The client backends serving skillwire's connections, and those serving any other client."""
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        rows = await conn.fetch(
            "SELECT pid, application_name FROM pg_stat_activity WHERE backend_type = 'client backend'"
        )
    finally:
        await conn.close()
    ours = {int(r["pid"]) for r in rows if r["application_name"] == APPLICATION_NAME}
    return ours, {int(r["pid"]) for r in rows} - ours


@dataclass
class Snapshot:
    """CPU seconds so far of the PostgreSQL processes (less other clients' backends) and of Redis."""

    db: dict[int, float]
    ours: set[int]
    others: set[int]
    redis: dict[int, float]


class ServiceCpu:
    """Before/after snapshots of the CPU the PostgreSQL and Redis servers on this machine use.

    PostgreSQL counts every process named ``postgres`` (the postmaster, its background writers, autovacuum,
    and a backend per connection) except the backends of other clients (``pg_stat_activity``): the server
    may serve other work meanwhile. A backend that appears during the load counts from its start; one that
    exits during it is lost (skillwire keeps its connections pooled, so that is rare, and reported). Redis
    counts every ``redis-server`` process: it cannot tell clients apart, so other work on it is counted.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def snapshot(self) -> Snapshot:
        ours, others = asyncio.run(_backends(self.dsn))
        return Snapshot(_cpu_of(_named("postgres")), ours, others, _cpu_of(_named("redis-server")))

    def measure(self, before: Snapshot, level: Level) -> None:
        after = self.snapshot()
        others = before.others | after.others
        level.db_cpu_s = sum(
            cpu - before.db.get(pid, 0.0) for pid, cpu in after.db.items() if pid not in others
        )
        level.db_backends = len(before.ours | after.ours)
        level.db_backends_lost = len(before.ours - set(after.db))
        level.redis_cpu_s = (
            sum(cpu - before.redis.get(pid, 0.0) for pid, cpu in after.redis.items()) if after.redis else None
        )


async def _postgres_reachable(dsn: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=5)
    await conn.close()


def _redis_reachable(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.ping()
    finally:
        client.close()


def unreachable(settings: Settings) -> str | None:
    """Why the PostgreSQL and Redis configurations cannot run, or None when both services answer."""
    reasons = []
    try:
        asyncio.run(_postgres_reachable(settings.postgres))
    except Exception as exc:  # any failure to connect means the same: skip, and say why
        reasons.append(f"PostgreSQL at {settings.postgres} is unreachable ({type(exc).__name__}: {exc})")
    try:
        _redis_reachable(settings.redis)
    except Exception as exc:
        reasons.append(f"Redis at {settings.redis} is unreachable ({type(exc).__name__}: {exc})")
    return "; ".join(reasons) or None


async def _drop_schema(dsn: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


# --------------------------------------------------------------------------------------------- servers


def config_spec(name: str, settings: Settings, workdir: Path, schema: str | None) -> run.TargetSpec:
    """The command line of one configuration: run.py's a2a-sdk target, or `skillwire serve examples/echo`."""
    if name == run.BASELINE:
        return run.target_spec(name, settings.skillwire, workdir)
    if schema is None:
        store, extra = f"sqlite:///{workdir / 'bench.db'}", []
    else:
        joiner = "&" if "?" in settings.postgres else "?"
        store = f"{settings.postgres}{joiner}schema={schema}&application_name={APPLICATION_NAME}"
        extra = ["--bus", settings.redis, *(["--workers", str(SHARED[name])] if SHARED[name] > 1 else [])]

    def argv(port: int, _grpc_port: int | None) -> list[str]:
        return [*run._serve(settings.skillwire, "examples/echo", store, port, None), *extra, "--no-push"]

    return run.TargetSpec(name, argv=argv)


def http_load(settings: Settings, url: str, concurrency: int, seconds: float, tag: str) -> run.LoadLevel:
    if settings.loadgen == "wrk":
        return run.run_wrk(url, concurrency, seconds, settings.wrk_threads, tag)
    return asyncio.run(run.run_httpx(url, concurrency, seconds, tag))


def measured(
    server: run.Server,
    settings: Settings,
    services: ServiceCpu | None,
    url: str,
    c: int,
    seconds: float,
    tag: str,
) -> Level:
    """One load run with the CPU of every party meanwhile, then ``--settle`` seconds idle."""
    pids = run._tree(server.proc.pid)
    before = services.snapshot() if services is not None else None
    procs_before, client_before, ticks_before = _cpu_of(pids), run.own_cpu_s(), machine_ticks()
    load = http_load(settings, url, c, seconds, tag)
    procs_after, client_after, ticks_after = _cpu_of(pids), run.own_cpu_s(), machine_ticks()
    level = Level(load)
    busy, iowait, total = (after - before for after, before in zip(ticks_after, ticks_before, strict=True))
    if total > 0:
        level.machine_busy_pct, level.machine_iowait_pct = busy / total * 100, iowait / total * 100
    if services is not None and before is not None:
        services.measure(before, level)
    level.process_cpu_s = [procs_after[p] - procs_before.get(p, 0.0) for p in sorted(procs_after)]
    load.server_cpu_s = sum(level.process_cpu_s)
    load.client_cpu_s = client_after - client_before
    time.sleep(settings.settle)
    return level


def measure_config(name: str, settings: Settings, workdir: Path, schema: str | None) -> ConfigResult:
    result = ConfigResult(name)
    services = ServiceCpu(settings.postgres) if schema is not None else None
    server: run.Server | None = None
    try:
        server = run.Server(config_spec(name, settings, workdir, schema), workdir)
        result.command = server.argv
        server.wait_ready(settings.start_timeout)
        url = run.jsonrpc_url(server, result.notes)
        run.check_echo(url)
        if SHARED.get(name, 1) > 1:
            _wait_for_workers(server, SHARED[name], settings.start_timeout)
        result.processes = len(run._tree(server.proc.pid))
        top = max(settings.concurrency)
        if settings.warmup > 0:
            measured(server, settings, None, url, top, settings.warmup, "warmup")
        for c in settings.concurrency:
            level = measured(server, settings, services, url, c, settings.duration, f"c{c}")
            result.levels.append(level)
            log(
                f"{name}: c={c}: {level.load.rps:.0f} req/s, p99 {level.load.p99_ms:.1f} ms, "
                f"CPU per request {_us(level.total_cpu_s(), level)} µs in all"
            )
        for _ in range(settings.stream_runs):
            events, seconds = run.stream_once(url, settings.stream_chunks, settings.stream_timeout)
            result.stream_events.append(events)
            result.stream_events_per_s.append(events / seconds)
        log(f"{name}: stream {settings.stream_chunks}: best {max(result.stream_events_per_s):.0f} events/s")
        _add_notes(result, top)
    except (run.TargetFailed, OSError, ValueError) as exc:  # ValueError: a JSON answer that does not parse
        result.error = str(exc)
        log(f"{name}: failed: {exc}")
    finally:
        if server is not None:
            server.stop()
    return result


def _wait_for_workers(server: run.Server, workers: int, timeout: float) -> None:
    """``--workers N`` answers once its first worker serves; wait until all N are in the process tree."""
    deadline = time.perf_counter() + timeout
    while len(run._tree(server.proc.pid)) < workers + 1:
        if time.perf_counter() > deadline:
            raise run.TargetFailed(f"fewer than {workers} worker processes after {timeout:g} s")
        time.sleep(0.05)


def _add_notes(result: ConfigResult, top: int) -> None:
    level = result.level(top)
    if level is None:
        return
    if len(level.process_cpu_s) > 1:
        split = " / ".join(f"{cpu:.1f}" for cpu in level.process_cpu_s)
        result.notes.append(f"CPU s of each process during c={top} (supervisor first, in pid order): {split}")
    if level.db_cpu_s is not None:
        result.notes.append(
            f"PostgreSQL backends serving skillwire during c={top}: {level.db_backends}"
            + (
                f", {level.db_backends_lost} gone by its end (their CPU is lost)"
                if level.db_backends_lost
                else ""
            )
        )
    if level.load.errors:
        result.notes.append(f"{level.load.errors} SendMessage errors at c={top}")


# --------------------------------------------------------------------------------------------- report


def _us(cpu_s: float | None, level: Level) -> str:
    return f"{cpu_s / level.load.requests * 1e6:.0f}" if cpu_s is not None and level.load.requests else "n/a"


def _pct(cpu_s: float | None, level: Level) -> str:
    return f"{cpu_s / level.load.seconds * 100:.0f}" if cpu_s is not None and level.load.seconds else "-"


def _state(r: ConfigResult) -> str:
    return "skipped" if r.skipped else "failed" if r.error else "n/a"


def throughput_table(results: list[ConfigResult], settings: Settings) -> list[str]:
    top = max(settings.concurrency)
    header = ["configuration", "serving processes"]
    for c in settings.concurrency:
        header += [f"c={c} req/s", f"c={c} p50 / p99 (ms)"]
    header += [
        f"c={top} vs {SCALE_BASE}",
        "errors",
        f"`stream {settings.stream_chunks}` best / median (events/s)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    base = next((r.level(top) for r in results if r.name == SCALE_BASE), None)
    for r in results:
        if not r.levels:
            lines.append("| " + " | ".join([r.name] + [_state(r)] * (len(header) - 1)) + " |")
            continue
        workers = SHARED.get(r.name, 1)
        cells = [r.name, f"{workers} + supervisor" if workers > 1 else str(r.processes)]
        for c in settings.concurrency:
            level = r.level(c)
            cells += (
                [f"{level.load.rps:.0f}", f"{level.load.p50_ms:.2f} / {level.load.p99_ms:.2f}"]
                if level is not None
                else ["n/a", "n/a"]
            )
        level = r.level(top)
        cells.append(f"{level.load.rps / base.load.rps:.2f}x" if level and base and base.load.rps else "-")
        cells.append(str(sum(x.load.errors for x in r.levels)))
        events = r.stream_events_per_s
        cells.append(f"{max(events):.0f} / {statistics.median(events):.0f}" if events else _state(r))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_table(results: list[ConfigResult]) -> list[str]:
    header = [
        "configuration",
        "c",
        "server µs/req",
        "PostgreSQL µs/req",
        "Redis µs/req",
        "total µs/req",
        "CPU server / PostgreSQL / Redis / load generator (% of one core)",
        "machine busy / I/O wait (% of all cores)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for r in results:
        if not r.levels:
            lines.append("| " + " | ".join([r.name] + [_state(r)] * (len(header) - 1)) + " |")
            continue
        for level in r.levels:
            cpu = (level.load.server_cpu_s, level.db_cpu_s, level.redis_cpu_s, level.load.client_cpu_s)
            cells = [
                r.name,
                str(level.load.concurrency),
                _us(level.load.server_cpu_s, level),
                _us(level.db_cpu_s, level) if level.db_cpu_s is not None else "-",
                _us(level.redis_cpu_s, level) if level.redis_cpu_s is not None else "-",
                _us(level.total_cpu_s(), level),
                " / ".join(_pct(x, level) for x in cpu),
                f"{level.machine_busy_pct:.0f} / {level.machine_iowait_pct:.0f}"
                if level.machine_busy_pct is not None and level.machine_iowait_pct is not None
                else "n/a",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(results: list[ConfigResult], info: dict[str, str], settings: Settings) -> str:
    nproc = info["nproc"]
    lines = [
        "# skillwire scale-out benchmark",
        "",
        *(f"- **{key}**: {value}" for key, value in info.items()),
        f"- **settings**: JSON-RPC, echo agent (`examples/echo`, `--no-push`, log level warning; a2a-sdk: "
        f"`bench/a2a_sdk_echo.py`); per configuration {settings.warmup:g} s warm-up, then {settings.duration:g} s "
        f"per concurrency level ({', '.join(map(str, settings.concurrency))}), {settings.settle:g} s idle after "
        f"each, {settings.stream_runs} stream runs of `stream {settings.stream_chunks}`",
        f"- the {nproc} cores are shared by the load generator, every skillwire process, PostgreSQL and Redis: "
        f"{'two processes on two cores' if nproc == '2' else 'more processes'} with the database and the bus on "
        "the same cores cannot scale linearly, so compare the CPU each request costs (second table) as well as "
        "requests/s",
        "- PostgreSQL CPU: every `postgres` process (postmaster, background processes, autovacuum, the "
        "backends of skillwire's pooled connections) except other clients' backends; Redis CPU: the "
        "`redis-server` process, which may also serve other clients meanwhile",
        "",
        "## SendMessage and streaming",
        "",
        *throughput_table(results, settings),
        "",
        "## CPU per SendMessage",
        "",
        *cpu_table(results),
        "",
    ]
    for r in results:
        lines.append(f"- `{r.name}`: " + (f"`{shlex.join(r.command)}`" if r.command else "not started"))
        if r.skipped:
            lines.append(f"  - **skipped**: {r.skipped}")
        if r.error:
            lines.append(f"  - **failed**: {' '.join(r.error.split())}")
        lines += [f"  - note: {note}" for note in r.notes]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--configs", default=",".join(ALL_CONFIGS), help=f"comma-separated, from: {', '.join(ALL_CONFIGS)}")
    add("--quick", action="store_true", help="a smoke run: 1 s loads at c=4, one `stream 50`, no warm-up")
    add("--duration", type=float, default=None, help="seconds of load per concurrency level (default 8)")
    add("--warmup", type=float, default=None, help="seconds of warm-up load first (default 2; 0 for none)")
    add("--settle", type=float, default=None, help="idle seconds after each load run (default 1)")
    add("--concurrency", default=None, help="comma-separated concurrency levels (default 16,64)")
    add("--stream-chunks", type=int, default=None, help="N of the `stream N` request (default 1000)")
    add("--stream-runs", type=int, default=None, help="stream requests to time (default 3)")
    add("--stream-timeout", type=float, default=60.0, help="give up on one stream after this (s)")
    add("--start-timeout", type=float, default=30.0, help="give up on a start after this (s)")
    add("--loadgen", choices=("auto", "wrk", "httpx"), default="auto", help="auto: wrk if installed")
    add("--wrk-threads", type=int, default=1, help="wrk threads (default 1)")
    add("--skillwire", default=None, help="skillwire command (default: the script beside this python)")
    add("--postgres", default=POSTGRES, help=f"the PostgreSQL database (default {POSTGRES})")
    add("--redis", default=REDIS, help=f"the Redis bus (default {REDIS})")
    add("--json", type=Path, default=None, help="also write the results as JSON to this file")
    ns = parser.parse_args(argv)

    quick = {
        "duration": 1.0,
        "warmup": 0.0,
        "settle": 0.1,
        "concurrency": "4",
        "stream_chunks": 50,
        "stream_runs": 1,
    }
    full = {
        "duration": 8.0,
        "warmup": 2.0,
        "settle": 1.0,
        "concurrency": "16,64",
        "stream_chunks": 1000,
        "stream_runs": 3,
    }
    for key, value in (quick if ns.quick else full).items():
        if getattr(ns, key) is None:
            setattr(ns, key, value)
    configs = [c.strip() for c in ns.configs.split(",") if c.strip()]
    if unknown := sorted(set(configs) - set(ALL_CONFIGS)):
        parser.error(f"unknown configurations: {', '.join(unknown)}")
    if not configs:
        parser.error("--configs needs at least one configuration")
    concurrency = [int(c) for c in ns.concurrency.split(",")]
    if min(concurrency, default=0) < 1 or min(ns.stream_runs, ns.wrk_threads) < 1:
        parser.error("concurrency levels, --stream-runs and --wrk-threads must be >= 1")
    if min(ns.duration, ns.stream_chunks) <= 0 or min(ns.warmup, ns.settle) < 0:
        parser.error("--duration and --stream-chunks must be > 0; --warmup and --settle >= 0")
    loadgen = run.chosen_loadgen(ns.loadgen)
    return Settings(
        configs=configs,
        duration=ns.duration,
        warmup=ns.warmup,
        settle=ns.settle,
        concurrency=concurrency,
        stream_chunks=ns.stream_chunks,
        stream_runs=ns.stream_runs,
        stream_timeout=ns.stream_timeout,
        start_timeout=ns.start_timeout,
        loadgen=loadgen,
        wrk_threads=ns.wrk_threads,
        skillwire=run.skillwire_command(ns.skillwire),
        postgres=ns.postgres,
        redis=ns.redis,
        json=ns.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    info = run.machine_info(settings.loadgen, ["jsonrpc"])
    info["redis"] = run._version("redis")
    info["asyncpg"] = run._version("asyncpg")
    skip = unreachable(settings) if any(c in SHARED for c in settings.configs) else None
    if skip:
        log(f"skipping {', '.join(c for c in settings.configs if c in SHARED)}: {skip}")
    results: list[ConfigResult] = []
    schemas: list[str] = []
    with run.sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="skillwire-cluster-bench-") as tmp:
        try:
            for name in settings.configs:
                if name in SHARED and skip:
                    results.append(ConfigResult(name, skipped=skip))
                    continue
                schema = f"sw_bench_{uuid.uuid4().hex[:16]}" if name in SHARED else None
                if schema is not None:
                    schemas.append(schema)
                workdir = Path(tmp) / name
                workdir.mkdir()
                log(f"{name}: starting")
                results.append(measure_config(name, settings, workdir, schema))
        finally:
            for schema in schemas:
                try:
                    asyncio.run(_drop_schema(settings.postgres, schema))
                except Exception as exc:  # report it; the figures are measured already
                    log(f"could not drop schema {schema}: {exc}")

    print(render_markdown(results, info, settings), end="")
    if settings.json is not None:
        payload: dict[str, Any] = {
            "machine": info,
            "settings": {k: v for k, v in asdict(settings).items() if k != "json"},
            "configs": [asdict(r) for r in results],
        }
        settings.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        log(f"wrote {settings.json}")
    return 1 if all(r.error or r.skipped for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
