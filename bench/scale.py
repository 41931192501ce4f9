"""Costs that grow with the data: long conversations, filtered listings of a big store, restarts.

Each benchmark starts a fresh server (``--serve``, as in bench/stall.py: by default ``skillwire serve
bench/hostile_agent`` on a new SQLite file, with the interpreter given by ``--python``), fills it through the
public A2A API only (JSON-RPC over HTTP), so that the same tool measures older and newer checkouts, and times:

* ``multiturn``: one task carried through 51 turns of 1 MB each (the task asks for input after every turn):
  ms per turn (first, median, last) and the size of the SQLite files afterwards;
* ``list-filter``: 100,000 tasks (99% completed, 1% waiting for input), then ListTasks with a ``status``
  filter: ms for the first page, for a later page (reached through ``nextPageToken``), and for a filter that
  matches a few tasks or none;
* ``restart``: 100,000 tasks left WORKING for real (the ``hang`` skill never finishes; created with
  ``returnImmediately``), the server killed with SIGKILL, then a new server on the same file: seconds from
  its spawn to its first agent card, and to the end of recovery (no task left WORKING or SUBMITTED, as
  ListTasks with a status filter sees it).

    python bench/scale.py                                  # all three, full sizes (2 to 3 minutes)
    python bench/scale.py --only restart --python /work/other/.venv/bin/python
    python bench/scale.py --quick                          # small sizes: a smoke run

The stores are filled by a small pipelining HTTP/1.1 client (a few keep-alive connections, each with a batch
of requests in flight): a general-purpose client such as httpx spends more CPU per request than the server
does, and would make filling 100,000 tasks take minutes on two cores.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stall import (
    DEFAULT_SERVE,
    HOST,
    MiB,
    Server,
    describe,
    load_note,
    log,
    message,
    parse_sizes,
    raise_own_fd_limit,
    rpc,
    serve_argv,
    server_parser,
    status_kib,
)

TERMINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")

# ----------------------------------------------------------------------------- filling a store, fast


class FillError(Exception):
    """The server refused a request while the store was being filled."""


def _request(body: bytes) -> bytes:
    return (
        f"POST / HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        (int(line.split(":", 1)[1]) for line in lines[1:] if line.lower().startswith("content-length:")), 0
    )
    return status, await reader.readexactly(length)


async def fill(port: int, bodies: Iterator[bytes], *, connections: int = 8, depth: int = 32) -> int:
    """Send every JSON-RPC body, ``depth`` at a time on each of ``connections`` keep-alive connections;
    each answer must be HTTP 200 with a ``result``. Returns how many were sent."""
    sent = 0

    async def connection() -> None:
        nonlocal sent
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            while batch := list(itertools.islice(bodies, depth)):
                writer.write(b"".join(_request(b) for b in batch))
                for _ in batch:
                    status, data = await asyncio.wait_for(_answer(reader), 120)
                    if status != 200 or b'"result"' not in data[:200]:
                        raise FillError(f"after {sent} requests: HTTP {status} {data[:300]!r}")
                    sent += 1
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(connections)))
    return sent


def send_bodies(count: int, skill: str, text: str, *, immediate: bool = False) -> Iterator[bytes]:
    config = {"historyLength": 0, "returnImmediately": immediate}
    for i in range(count):
        params = {"message": message(text, skill), "configuration": config}
        yield json.dumps({"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": params}).encode()


def list_tasks(port: int, **params: Any) -> tuple[float, dict[str, Any]]:
    """One ListTasks call: (ms, result)."""
    started = time.perf_counter()
    status, answer, _ = rpc(port, "ListTasks", params, timeout=600)
    took = (time.perf_counter() - started) * 1000
    if not isinstance(answer, dict) or "result" not in answer:
        raise RuntimeError(f"ListTasks {params}: {describe(status, answer)}")
    return took, answer["result"]


def count(port: int, state: str) -> int:
    """Tasks in ``state``: the page's totalSize when the server gives one, else by walking the pages."""
    _, result = list_tasks(port, status=state, pageSize=1, historyLength=0)
    if isinstance(result.get("totalSize"), int):
        return int(result["totalSize"])
    total, token = 0, ""
    while True:
        _, result = list_tasks(port, status=state, pageSize=100, historyLength=0, pageToken=token)
        total += len(result.get("tasks", []))
        token = result.get("nextPageToken", "")
        if not token:
            return total


# ----------------------------------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class Settings:
    serve: str
    python: str
    nofile: int
    only: list[str]
    repeat: int
    sizes: dict[str, float]
    json: Path | None


Figures = dict[str, float | int | str | None]


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 1)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _turn(port: int, text: str, task_id: str = "") -> tuple[float, str, str]:
    """One turn of the conversation: (ms, task id, state)."""
    started = time.perf_counter()
    params = {"message": message(text, "turns", task_id=task_id), "configuration": {"historyLength": 0}}
    status, answer, _ = rpc(port, "SendMessage", params, timeout=600)
    took = _ms(started)
    task = ((answer or {}).get("result") or {}).get("task") or {}
    state = task.get("status", {}).get("state", "")
    if state != "TASK_STATE_INPUT_REQUIRED":
        raise RuntimeError(f"turn on task {task_id or '(new)'}: {describe(status, answer)}")
    return took, task["id"], state


async def multiturn(server: Server, sizes: dict[str, float]) -> Figures:
    turns, size = int(sizes["turns"]), int(sizes["turn_bytes"])
    times: list[float] = []
    task_id = ""
    for i in range(turns):
        took, task_id, _ = await asyncio.to_thread(_turn, server.port, chr(ord("a") + i % 26) * size, task_id)
        times.append(took)
    return {
        "turns": turns,
        "bytes per turn": size,
        "first turn ms": round(times[0], 1),
        "median turn ms": _median(times),
        "last turn ms": round(times[-1], 1),
        "SQLite files after, MiB": round(server.store_bytes() / MiB, 1),
        "server RSS after, MiB": round(status_kib(server.pid, "VmRSS") / 1024, 1),
    }


def _time_page(port: int, reps: int, **params: Any) -> tuple[float, dict[str, Any]]:
    runs = [list_tasks(port, **params) for _ in range(reps)]
    return _median([ms for ms, _ in runs]), runs[-1][1]


def _walk(port: int, pages: int, **params: Any) -> tuple[list[float], str]:
    """Follow nextPageToken for ``pages`` pages: the ms of each, and the token of the page after."""
    token, times = "", []
    for _ in range(pages):
        ms, result = list_tasks(port, pageToken=token, **params)
        times.append(ms)
        token = result.get("nextPageToken", "")
        if not token:
            break
    return times, token


def _listings(port: int, sizes: dict[str, float]) -> Figures:
    reps, later = int(sizes["page_reps"]), int(sizes["later_page"])
    page = {"pageSize": 50}
    figures: Figures = {}
    for label, state in (("no filter", ""), ("status=COMPLETED", "TASK_STATE_COMPLETED")):
        ms, result = _time_page(port, reps, **page, **({"status": state} if state else {}))
        figures[f"{label}: first page ms"] = ms
        figures[f"{label}: totalSize"] = result.get("totalSize")
    walked, token = _walk(port, later - 1, status="TASK_STATE_COMPLETED", **page)
    figures[f"status=COMPLETED: median of pages 1-{len(walked)} ms"] = _median(walked)
    if token:
        ms, _ = _time_page(port, reps, status="TASK_STATE_COMPLETED", pageToken=token, **page)
        figures[f"status=COMPLETED: page {later} ms"] = ms
    for label, state in (
        ("status=INPUT_REQUIRED (1%)", "INPUT_REQUIRED"),
        ("status=CANCELED (none)", "CANCELED"),
    ):
        ms, result = _time_page(port, reps, status=f"TASK_STATE_{state}", **page)
        figures[f"{label}: first page ms"] = ms
        figures[f"{label}: tasks on it"] = len(result.get("tasks", []))
    return figures


async def list_filter(server: Server, sizes: dict[str, float]) -> Figures:
    total = int(sizes["tasks"])
    waiting = max(1, total // 100)
    started = time.perf_counter()
    await fill(server.port, send_bodies(total - waiting, "echo", "hello"))
    await fill(server.port, send_bodies(waiting, "turns", "hello"))
    figures: Figures = {"tasks": total, "fill s": round(_ms(started) / 1000, 1)}
    figures.update(await asyncio.to_thread(_listings, server.port, sizes))
    figures["SQLite files, MiB"] = round(server.store_bytes() / MiB, 1)
    return figures


def _wait_for(check: Callable[[], bool], limit: float, every: float = 0.2) -> float | None:
    """Poll ``check`` until it holds: the monotonic time the successful check started, or None."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        started = time.monotonic()
        if check():
            return started
        time.sleep(every)
    return None


def _unfinished(port: int) -> int:
    return count(port, "TASK_STATE_WORKING") + count(port, "TASK_STATE_SUBMITTED")


def _recover(server: Server, total: int, spawned: float, limit: float) -> Figures:
    """From the new server's spawn: its first card, then the end of recovery as ListTasks sees it."""
    ready = server.wait_ready(timeout=limit)
    figures: Figures = {"spawn to first agent card s": round(ready - spawned, 2)}
    left = _unfinished(server.port)
    figures["unfinished at first card"] = left
    # Recovery done before the port opened counts from the first card; otherwise from the first listing
    # that found no unfinished task (started at most one poll interval plus one listing after the fact).
    done = ready if left == 0 else _wait_for(lambda: _unfinished(server.port) == 0, limit)
    figures["spawn to recovery done s"] = round(done - spawned, 2) if done is not None else None
    figures["FAILED after recovery"] = count(server.port, "TASK_STATE_FAILED")
    figures["expected FAILED"] = total
    return figures


async def restart(server: Server, sizes: dict[str, float]) -> Figures:
    total = int(sizes["tasks"])
    started = time.perf_counter()
    await fill(server.port, send_bodies(total, "hang", "hold", immediate=True))
    figures: Figures = {"tasks": total, "fill s": round(_ms(started) / 1000, 1)}
    # The hang skill reports WORKING just after it is created; wait until the store holds that for all.
    settled = await asyncio.to_thread(
        _wait_for, lambda: count(server.port, "TASK_STATE_WORKING") >= total, 120.0, 0.5
    )
    figures["WORKING before the kill"] = await asyncio.to_thread(count, server.port, "TASK_STATE_WORKING")
    if settled is None:
        log(f"restart: only {figures['WORKING before the kill']} of {total} tasks reached WORKING")
    figures["server RSS before the kill, MiB"] = round(status_kib(server.pid, "VmRSS") / 1024, 1)
    server.kill()
    successor = Server(server.template, server.python, nofile=server.nofile, workdir=server.workdir)
    try:
        spawned = successor.start()
        figures.update(await asyncio.to_thread(_recover, successor, total, spawned, 900.0))
    finally:
        successor.stop()
    return figures


Benchmark = Callable[[Server, dict[str, float]], Coroutine[Any, Any, Figures]]
BENCHMARKS: dict[str, Benchmark] = {"multiturn": multiturn, "list-filter": list_filter, "restart": restart}

#: name: (full run, --quick run, what it is)
SIZES: dict[str, tuple[float, float, str]] = {
    "turns": (51, 6, "turns of the multiturn conversation"),
    "turn_bytes": (1_000_000, 100_000, "bytes of text per turn"),
    "tasks": (100_000, 500, "tasks in the store for list-filter and restart"),
    "later_page": (100, 5, "which page of the status=COMPLETED listing is timed as a later page"),
    "page_reps": (5, 2, "times each timed ListTasks call is repeated (median reported)"),
}


async def run_one(name: str, settings: Settings) -> Figures:
    server = Server(settings.serve, settings.python, nofile=settings.nofile)
    try:
        server.start()
        await asyncio.to_thread(server.wait_ready)
        return await BENCHMARKS[name](server, settings.sizes)
    except (FillError, RuntimeError, OSError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        server.cleanup()


def combine(runs: list[Figures]) -> Figures:
    """The median of each figure over the runs (the first run's value for text)."""
    keys = list(dict.fromkeys(k for r in runs for k in r))
    combined: Figures = {}
    for key in keys:
        values = [r[key] for r in runs if key in r]
        numbers = [v for v in values if isinstance(v, int | float)]
        if numbers and len(numbers) == len(values):
            middle = statistics.median(numbers)
            combined[key] = int(middle) if all(isinstance(v, int) for v in numbers) else round(middle, 2)
        else:
            combined[key] = " / ".join(dict.fromkeys(str(v) for v in values))
    return combined


def report(settings: Settings, results: dict[str, Figures], load: str) -> str:
    shown = serve_argv(settings.serve, settings.python, port="{port}", tmp="{tmp}", grpc_port="")
    lines = [
        "# Scale benchmark: costs that grow with the data",
        "",
        f"- server: `{' '.join(shown)}` (a fresh server and store per benchmark)",
        f"- each figure is the median of {settings.repeat} run(s); the machine is shared, so expect noise",
        load,
    ]
    for name, figures in results.items():
        lines += ["", f"## {name}", "", "| figure | value |", "| --- | ---: |"]
        lines += [f"| {key} | {'-' if value is None else value} |" for key, value in figures.items()]
    return "\n".join(lines)


async def run_all(settings: Settings) -> dict[str, Figures]:
    results: dict[str, Figures] = {}
    raw: dict[str, list[Figures]] = {}
    for name in BENCHMARKS:
        if settings.only and name not in settings.only:
            continue
        runs = []
        for i in range(settings.repeat):
            log(f"{name}: run {i + 1}/{settings.repeat}")
            runs.append(await run_one(name, settings))
            log(f"{name}: {json.dumps(runs[-1])}")
        raw[name] = runs
        results[name] = combine(runs)
    if settings.json is not None:
        settings.json.write_text(json.dumps({"summary": results, "runs": raw}, indent=2))
    return results


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = server_parser(__doc__, SIZES, DEFAULT_SERVE)
    parser.add_argument("--only", default="", help="comma-separated benchmarks: " + ",".join(BENCHMARKS))
    parser.add_argument("--repeat", type=int, default=1, help="runs per benchmark (median reported)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args(argv)
    only = [n for n in args.only.split(",") if n]
    if set(only) - set(BENCHMARKS):
        parser.error(f"unknown benchmark(s): {', '.join(sorted(set(only) - set(BENCHMARKS)))}")
    sizes = parse_sizes(args.set, args.quick, SIZES)
    return Settings(
        serve=args.serve,
        python=args.python,
        nofile=args.server_nofile,
        only=only,
        repeat=args.repeat,
        sizes=sizes,
        json=args.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    raise_own_fd_limit()
    load = os.getloadavg()
    results = asyncio.run(run_all(settings))
    print(report(settings, results, load_note(load)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
