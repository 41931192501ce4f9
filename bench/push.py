"""Benchmark push notifications: SendMessage with and without a webhook, and how fast deliveries follow.

Starts a webhook receiver (a raw ASGI app under uvicorn, in its own process, on a free 127.0.0.1 port: every
POST is read to its end, counted and answered 204; ``GET /count`` answers the counts as JSON), then each
target in turn, like ``bench/run.py`` (same processes, ports and load generators). On each target, for every
concurrency level: blocking JSON-RPC SendMessage load without a push config, then the same load with one
webhook config per request (inline, ``configuration.taskPushNotificationConfig = {"url": receiver}``), then
waits until every delivery the load caused has reached the receiver. Reported: requests/s and latency with and
without push, deliveries/s over the load window, deliveries still pending when the load stops and the time
to drain them, and the CPU of the server and of the receiver. Progress goes to stderr, the markdown report to
stdout.

    python bench/push.py                                   # a2a-sdk, skillwire-memory, skillwire-sqlite
    python bench/push.py --targets skillwire-sqlite --duration 3 --concurrency 16 --json /tmp/push.json

See bench/README.md ("Push notifications") for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # the harness beside this file

HOST = run.HOST
ALL_TARGETS = ("a2a-sdk", "skillwire-memory", "skillwire-sqlite")
BASELINE = run.BASELINE
COUNT_PATH = "/count"
HOOK_PATH = "/hook"


@dataclass(frozen=True)
class Settings:
    """What to measure and for how long (from the command line)."""

    targets: list[str]
    duration: float
    warmup: float
    settle: float
    concurrency: list[int]
    drain_timeout: float
    drain_stall: float
    start_timeout: float
    loadgen: str
    wrk_threads: int
    skillwire: list[str]
    json: Path | None


# ------------------------------------------------------------------------------------------- receiver


class Receiver:
    """The webhook: counts the POSTs it reads to their end, answers 204; ``GET`` answers the counts."""

    def __init__(self) -> None:
        self.count = 0
        #: deliveries of a COMPLETED status update: one per task whose deliveries all arrived in order
        self.completed = 0
        self.bytes = 0
        #: TCP connections accepted (counted by the protocol, see :func:`counting_protocol`)
        self.connections = 0

    def counts(self) -> dict[str, int]:
        return {
            "count": self.count,
            "completed": self.completed,
            "bytes": self.bytes,
            "connections": self.connections,
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            body = json.dumps(self.counts()).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        size = 0
        completed = False
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            completed = completed or (b'"statusUpdate"' in chunk and b"TASK_STATE_COMPLETED" in chunk)
            more = message.get("more_body", False)
        self.count += 1
        self.bytes += size
        self.completed += completed
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def counting_protocol(receiver: Receiver) -> type:
    """uvicorn's HTTP protocol (httptools if installed, else h11), counting the connections it accepts."""
    base: type[Any]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol

    class Counting(base):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:
            receiver.connections += 1
            super().connection_made(transport)

    return Counting


def serve_receiver(port: int) -> None:
    import uvicorn

    receiver = Receiver()
    uvicorn.run(
        receiver,
        host=HOST,
        port=port,
        loop="auto",
        http=counting_protocol(receiver),
        lifespan="off",
        log_level="warning",
        access_log=False,
    )


RECEIVER_SPEC = run.TargetSpec(
    "receiver",
    argv=lambda port, _grpc_port: [
        sys.executable,
        str(Path(__file__).resolve()),
        "--serve-receiver",
        str(port),
    ],
)


class Counts:
    """Reads the receiver's counts over one keep-alive connection."""

    def __init__(self, receiver: run.Server) -> None:
        self.url = receiver.base_url + COUNT_PATH
        self.hook = receiver.base_url + HOOK_PATH
        self._client = httpx.Client(timeout=5.0)

    def get(self) -> dict[str, int]:
        return dict(self._client.get(self.url).json())

    def close(self) -> None:
        self._client.close()


# --------------------------------------------------------------------------------------------- results


@dataclass
class PushLevel:
    """SendMessage load with one webhook config per request, and the deliveries it caused."""

    load: run.LoadLevel
    #: deliveries the requests answered should make (events per task x requests answered 2xx)
    expected: int
    #: deliveries the receiver counted during the load, and by the end of the drain
    in_window: int
    received: int
    #: COMPLETED status updates the receiver counted (one per task, once all its deliveries arrived)
    completed: int
    #: expected - counted when the load stopped
    pending_at_end: int
    #: seconds from the end of the load until the receiver had them all (None: it never did)
    drain_s: float | None
    #: connections the server opened to the receiver, from the start of the load to the end of the drain
    connections: int
    receiver_cpu_s: float
    #: CPU of the server from the start of the load to the end of the drain
    server_cpu_with_drain_s: float

    @property
    def deliveries_per_s(self) -> float:
        return self.in_window / self.load.seconds

    @property
    def missing(self) -> int:
        return max(0, self.expected - self.received)


@dataclass
class LevelResult:
    concurrency: int
    plain: run.LoadLevel | None = None
    push: PushLevel | None = None


@dataclass
class TargetResult:
    name: str
    command: list[str] = field(default_factory=list)
    error: str | None = None
    #: deliveries one SendMessage with a webhook makes (counted on the check)
    events_per_task: int | None = None
    levels: list[LevelResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- servers


def target_spec(name: str, skillwire: list[str], workdir: Path) -> run.TargetSpec:
    """run.py's target with push notifications on and a webhook on http://127.0.0.1 allowed."""
    spec = run.target_spec(name, skillwire, workdir)
    if name == BASELINE:
        base_env = spec.env
        return dataclasses.replace(spec, env=lambda p, g: {**base_env(p, g), "BENCH_PUSH": "1"})
    base_argv = spec.argv
    return dataclasses.replace(
        spec, argv=lambda p, g: [*base_argv(p, g), "--webhook-allow", HOST, "--webhook-allow-http"]
    )


def push_body(hook: str) -> Callable[[str, int | str], bytes]:
    def make(message_id: str, n: int | str) -> bytes:
        params = {
            "configuration": {"taskPushNotificationConfig": {"url": hook}},
            "message": run.V1_SHAPE.message(run.ECHO_TEXT, message_id),
        }
        request = {"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": params}
        return json.dumps(request, separators=(",", ":")).encode()

    return make


def wrk_push_script(hook: str) -> str:
    """run.py's wrk script, each SendMessage carrying the webhook config (:func:`push_body`)."""
    return run.wrk_script(push_body(hook)(run.MESSAGE_ID_MARK, run.REQUEST_ID_MARK), run.RPC_HEADERS)


def http_load(
    settings: Settings, url: str, concurrency: int, seconds: float, tag: str, hook: str | None
) -> run.LoadLevel:
    if settings.loadgen == "wrk":
        script = run.WRK_SCRIPT if hook is None else wrk_push_script(hook)
        return run.run_wrk(url, concurrency, seconds, settings.wrk_threads, tag, script)
    make = run._rpc_send_body if hook is None else push_body(hook)
    return asyncio.run(run.run_httpx(url, concurrency, seconds, tag, make))


def wait_for(counts: Counts, expected: int, settings: Settings) -> tuple[dict[str, int], float | None]:
    """Poll the receiver until it counted ``expected`` deliveries, or stopped counting for
    ``--drain-stall`` seconds, or ``--drain-timeout`` passed. Return its counts and the seconds it took
    (None if it never got there)."""
    started = time.perf_counter()
    last = counts.get()
    progressed = started
    while last["count"] < expected:
        now = time.perf_counter()
        if now - started > settings.drain_timeout or now - progressed > settings.drain_stall:
            return last, None
        time.sleep(0.01)
        current = counts.get()
        if current["count"] != last["count"]:
            progressed = time.perf_counter()
        last = current
    return last, time.perf_counter() - started


def check_push(url: str, counts: Counts, settings: Settings) -> int:
    """One SendMessage with a webhook: a completed echo, and its deliveries at the receiver; return how
    many one task makes."""
    before = counts.get()
    reply = httpx.post(url, content=push_body(counts.hook)("bench-check-push", 1), headers=run.RPC_HEADERS)
    try:
        task = reply.json()["result"]["task"]
    except (ValueError, KeyError, TypeError) as exc:
        raise run.TargetFailed(
            f"bad SendMessage reply with a webhook (HTTP {reply.status_code}): {reply.text[:300]}"
        ) from exc
    run._check_task(task, reply.text)
    deadline = time.perf_counter() + settings.drain_timeout
    while True:
        now = counts.get()
        if now["completed"] > before["completed"]:
            break
        if time.perf_counter() > deadline:
            raise run.TargetFailed(f"no COMPLETED delivery within {settings.drain_timeout:g} s: {now}")
        time.sleep(0.01)
    time.sleep(0.3)  # any delivery after the COMPLETED one would be out of order, but count it
    events = counts.get()["count"] - before["count"]
    if events < 1:
        raise run.TargetFailed("the webhook got no deliveries")
    return events


def measure_target(
    spec: run.TargetSpec, settings: Settings, workdir: Path, receiver: run.Server, counts: Counts
) -> TargetResult:
    result = TargetResult(spec.name)
    server: run.Server | None = None
    try:
        server = run.Server(spec, workdir)
        result.command = server.argv
        server.wait_ready(settings.start_timeout)
        card = httpx.get(server.base_url + run.CARD_PATH, timeout=5.0).json()
        if not card.get("capabilities", {}).get("pushNotifications"):
            result.notes.append("the card does not say pushNotifications: true")
        url = run.jsonrpc_url(server, result.notes)
        run.check_echo(url)
        events = result.events_per_task = check_push(url, counts, settings)
        log(f"{spec.name}: one task makes {events} deliveries")

        def measured(c: int, seconds: float, tag: str, hook: str | None) -> run.LoadLevel:
            server_before = server.cpu_s()
            client_before = run.own_cpu_s()
            level = http_load(settings, url, c, seconds, tag, hook)
            level.server_cpu_s = server.cpu_s() - server_before
            level.client_cpu_s = run.own_cpu_s() - client_before
            return level

        def push_level(c: int, seconds: float, tag: str) -> PushLevel:
            start = counts.get()
            receiver_before, server_before = receiver.cpu_s(), server.cpu_s()
            load = measured(c, seconds, tag, counts.hook)
            at_end = counts.get()
            # httpx counts every request it sent. wrk does not count the ones in flight when it stops (at
            # most one per connection), whose tasks still run and deliver: with wrk this is a lower bound,
            # and up to events x concurrency deliveries more may arrive (received > expected).
            expected = events * (
                load.requests if settings.loadgen == "httpx" else load.requests - load.errors
            )
            final, drain_s = wait_for(counts, start["count"] + expected, settings)
            return PushLevel(
                load=load,
                expected=expected,
                in_window=at_end["count"] - start["count"],
                received=final["count"] - start["count"],
                completed=final["completed"] - start["completed"],
                pending_at_end=max(0, start["count"] + expected - at_end["count"]),
                drain_s=drain_s,
                connections=final["connections"] - start["connections"],
                receiver_cpu_s=receiver.cpu_s() - receiver_before,
                server_cpu_with_drain_s=server.cpu_s() - server_before,
            )

        if settings.warmup > 0:
            top = max(settings.concurrency)
            measured(top, settings.warmup, "warmup", None)
            time.sleep(settings.settle)
            push_level(top, settings.warmup, "warmup-push")
            time.sleep(settings.settle)
        for c in settings.concurrency:
            level = LevelResult(c)
            result.levels.append(level)
            level.plain = measured(c, settings.duration, f"c{c}", None)
            log(
                f"{spec.name}: c={c} without push: {level.plain.rps:.0f} req/s, p99 {level.plain.p99_ms:.1f} ms"
            )
            time.sleep(settings.settle)
            level.push = p = push_level(c, settings.duration, f"c{c}-push")
            drained = f"drained in {p.drain_s:.2f} s" if p.drain_s is not None else f"{p.missing} never came"
            log(
                f"{spec.name}: c={c} with push: {p.load.rps:.0f} req/s, p99 {p.load.p99_ms:.1f} ms; "
                f"{p.deliveries_per_s:.0f} deliveries/s, {p.pending_at_end} pending at the end, {drained}"
            )
            time.sleep(settings.settle)
    except run.TargetFailed as exc:
        result.error = str(exc)
        log(f"{spec.name}: failed: {exc}")
    finally:
        if server is not None:
            server.stop()
    return result


# --------------------------------------------------------------------------------------------- report


def log(message: str) -> None:
    print(f"[push] {message}", file=sys.stderr, flush=True)


def _level(r: TargetResult, c: int) -> LevelResult | None:
    return next((level for level in r.levels if level.concurrency == c), None)


Pick = Callable[[LevelResult], float | None]


def _plain(attr: str) -> Pick:
    return lambda level: getattr(level.plain, attr) if level.plain else None


def _push_load(attr: str) -> Pick:
    return lambda level: getattr(level.push.load, attr) if level.push else None


def _push(attr: str) -> Pick:
    return lambda level: getattr(level.push, attr) if level.push else None


def _ratio(level: LevelResult) -> float | None:
    if level.plain is None or level.push is None or not level.plain.rps:
        return None
    return level.push.load.rps / level.plain.rps


def _cpu_us(load_of: Callable[[LevelResult], run.LoadLevel | None]) -> Pick:
    def value(level: LevelResult) -> float | None:
        load = load_of(level)
        if load is None or load.server_cpu_s is None or not load.requests:
            return None
        return load.server_cpu_s / load.requests * 1e6

    return value


def _cpu_per_delivery(level: LevelResult) -> float | None:
    """Server CPU from the start of the push load to the end of the drain, less what the same requests
    cost without push (the no-push level's CPU per request), per delivery received."""
    plain, push = level.plain, level.push
    if plain is None or push is None or plain.server_cpu_s is None or not plain.requests or not push.received:
        return None
    extra = push.server_cpu_with_drain_s - plain.server_cpu_s / plain.requests * push.load.requests
    return extra / push.received * 1e6


def _receiver_pct(level: LevelResult) -> float | None:
    return level.push.receiver_cpu_s / level.push.load.seconds * 100 if level.push else None


_DRAIN = _push("drain_s")

ROWS: list[tuple[str, str, Pick, str]] = [
    ("SendMessage, no push (req/s)", "higher", _plain("rps"), "{:.0f}"),
    ("SendMessage, with push (req/s)", "higher", _push_load("rps"), "{:.0f}"),
    ("with push / no push", "higher", _ratio, "{:.2f}x"),
    ("p50 no push (ms)", "lower", _plain("p50_ms"), "{:.2f}"),
    ("p99 no push (ms)", "lower", _plain("p99_ms"), "{:.2f}"),
    ("p50 with push (ms)", "lower", _push_load("p50_ms"), "{:.2f}"),
    ("p99 with push (ms)", "lower", _push_load("p99_ms"), "{:.2f}"),
    ("deliveries/s during the load", "higher", _push("deliveries_per_s"), "{:.0f}"),
    ("deliveries pending when the load stops", "lower", _push("pending_at_end"), "{:.0f}"),
    ("time to drain them (s)", "lower", _DRAIN, "{:.2f}"),
    ("deliveries expected / never received", "lower", _push("missing"), "{:.0f}"),
    ("server CPU per request, no push (µs)", "lower", _cpu_us(lambda lv: lv.plain), "{:.0f}"),
    (
        "server CPU per request, with push (µs)",
        "lower",
        _cpu_us(lambda lv: lv.push.load if lv.push else None),
        "{:.0f}",
    ),
    (
        "server CPU per delivery, load and drain, less the no-push cost (µs)",
        "lower",
        _cpu_per_delivery,
        "{:.0f}",
    ),
    ("receiver CPU during the load (% of one core)", "", _receiver_pct, "{:.0f}"),
    ("connections opened to the receiver, load and drain", "lower", _push("connections"), "{:.0f}"),
    ("errors, with push / no push", "lower", lambda lv: None, ""),
]


def _cell(fmt: str, pick: Pick, r: TargetResult, c: int) -> str:
    level = _level(r, c)
    if level is None:
        return "failed" if r.error else "n/a"
    if not fmt:  # the errors row
        push = level.push.load.errors if level.push else "n/a"
        plain = level.plain.errors if level.plain else "n/a"
        return f"{push} / {plain}"
    value = pick(level)
    if value is None:
        return "never" if pick is _DRAIN and level.push is not None else "n/a"
    return fmt.format(value)


def render_markdown(results: list[TargetResult], info: dict[str, str], settings: Settings) -> str:
    baseline = next((r for r in results if r.name == BASELINE), None)
    compared = [r for r in results if baseline is not None and r is not baseline]
    header = ["metric", "better", *(r.name for r in results), *(f"{r.name} / {BASELINE}" for r in compared)]
    lines = [
        "# Push notifications benchmark",
        "",
        *(f"- **{key}**: {value}" for key, value in info.items()),
        f"- **settings**: JSON-RPC SendMessage; per target {settings.warmup:g} s warm-up without and with push, "
        f"then per concurrency level ({', '.join(map(str, settings.concurrency))}) {settings.duration:g} s "
        f"without push and {settings.duration:g} s with one webhook config per request, each followed by "
        f"{settings.settle:g} s idle; after each push level the harness waits until the receiver has every "
        f"delivery (giving up after {settings.drain_stall:g} s without progress)",
        f"- load generator, receiver and server share the same {info['nproc']} cores: compare columns, "
        "do not read the figures as absolute capacity",
        "",
    ]
    for c in settings.concurrency:
        lines += [
            f"## c={c}",
            "",
            "| " + " | ".join(header) + " |",
            "|---|---|" + "---:|" * (len(header) - 2),
        ]
        for metric, better, pick, fmt in ROWS:
            cells = [metric, better or "-", *(_cell(fmt, pick, r, c) for r in results)]
            base_level = _level(baseline, c) if baseline is not None else None
            for r in compared:
                level = _level(r, c)
                value = pick(level) if level is not None and fmt else None
                base = pick(base_level) if base_level is not None and fmt else None
                cells.append(f"{value / base:.2f}x" if value is not None and base else "-")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    for r in results:
        lines.append(f"- `{r.name}`: " + (f"`{shlex.join(r.command)}`" if r.command else "not started"))
        if r.error:
            lines.append(f"  - **failed**: {' '.join(r.error.split())}")
        if r.events_per_task is not None:
            lines.append(f"  - deliveries per task (counted on the check): {r.events_per_task}")
        lines += [f"  - note: {note}" for note in r.notes]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--targets", default=",".join(ALL_TARGETS), help=f"comma-separated, from: {', '.join(ALL_TARGETS)}")
    add("--duration", type=float, default=5.0, help="seconds of load per level and mode (default 5)")
    add(
        "--warmup", type=float, default=2.0, help="seconds of warm-up load, without and with push (default 2)"
    )
    add("--settle", type=float, default=1.0, help="idle seconds after each load run (default 1)")
    add("--concurrency", default="16,64", help="comma-separated concurrency levels (default 16,64)")
    add("--drain-timeout", type=float, default=120.0, help="give up waiting for deliveries after this (s)")
    add("--drain-stall", type=float, default=5.0, help="... or after this long without a new one (s)")
    add("--start-timeout", type=float, default=30.0, help="give up on a start after this (s)")
    add("--loadgen", choices=("auto", "wrk", "httpx"), default="auto", help="auto: wrk if installed")
    add("--wrk-threads", type=int, default=1, help="wrk threads (default 1)")
    add("--skillwire", default=None, help="skillwire command (default: the script beside this python)")
    add("--json", type=Path, default=None, help="also write the results as JSON to this file")
    add("--serve-receiver", type=int, default=None, metavar="PORT", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.serve_receiver is not None:
        serve_receiver(ns.serve_receiver)
        sys.exit(0)
    targets = [t.strip() for t in ns.targets.split(",") if t.strip()]
    if unknown := sorted(set(targets) - set(ALL_TARGETS)):
        parser.error(f"unknown targets: {', '.join(unknown)}")
    concurrency = [int(c) for c in ns.concurrency.split(",")]
    if min(concurrency, default=0) < 1 or ns.wrk_threads < 1:
        parser.error("concurrency levels and --wrk-threads must be >= 1")
    if ns.duration <= 0 or min(ns.warmup, ns.settle) < 0 or min(ns.drain_timeout, ns.drain_stall) <= 0:
        parser.error("--duration, --drain-timeout and --drain-stall must be > 0; --warmup and --settle >= 0")
    loadgen = run.chosen_loadgen(ns.loadgen)
    return Settings(
        targets=targets,
        duration=ns.duration,
        warmup=ns.warmup,
        settle=ns.settle,
        concurrency=concurrency,
        drain_timeout=ns.drain_timeout,
        drain_stall=ns.drain_stall,
        start_timeout=ns.start_timeout,
        loadgen=loadgen,
        wrk_threads=ns.wrk_threads,
        skillwire=run.skillwire_command(ns.skillwire),
        json=ns.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    info = run.machine_info(settings.loadgen, ["jsonrpc"])
    info["receiver"] = (
        "raw ASGI app under uvicorn (loop and http auto) in its own process, 204 to every POST, "
        "counts at GET /count"
    )
    results: list[TargetResult] = []
    with run.sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="skillwire-push-bench-") as tmp:
        receiver = run.Server(RECEIVER_SPEC, Path(tmp))
        counts: Counts | None = None
        try:
            receiver.wait_ready(settings.start_timeout)
            counts = Counts(receiver)
            log(f"receiver at {counts.hook}")
            for name in settings.targets:
                workdir = Path(tmp) / name
                workdir.mkdir()
                log(f"{name}: starting")
                results.append(
                    measure_target(
                        target_spec(name, settings.skillwire, workdir), settings, workdir, receiver, counts
                    )
                )
        finally:
            if counts is not None:
                counts.close()
            receiver.stop()

    print(render_markdown(results, info, settings), end="")
    if settings.json is not None:
        payload: dict[str, Any] = {
            "machine": info,
            "settings": {k: v for k, v in asdict(settings).items() if k != "json"},
            "targets": [asdict(r) for r in results],
        }
        settings.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        log(f"wrote {settings.json}")
    return 1 if all(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
