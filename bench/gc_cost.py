"""What the cyclic garbage collector costs a server under load, by the young generation's threshold.

    python bench/gc_cost.py --store memory:// --thresholds interpreter,2000,10000 --concurrency 16,64 --rounds 3

Each set-up is ``skillwire serve examples/echo`` (pinned to core 1, wrk on core 0, as ``bench/run.py --pin``)
with a collector callback (``gc.callbacks``) that adds up, per generation, how many collections ran and how
long they took; a thread of the server writes the totals to a file every 0.2 s. The totals are read before
and after the measured wrk run, so a figure is the collection time of that run divided by its requests.
``interpreter`` keeps the interpreter's own threshold (``skillwire serve`` otherwise raises it to
``GC_YOUNG_THRESHOLD``: see ``skillwire.server.serving.serve.tune_gc``); a number is the threshold served with.

Why a callback and not instructions: in process, one request after another, the collector costs under 1% of a
SendMessage whatever its threshold (``bench/instructions.py``); what makes it cost is the requests in
flight, which keep thousands of container objects alive at once. Set-ups are alternated round by round, so
the machine's drift falls on each alike; read the medians. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (
    HARNESS_CPUS,
    SERVER_CPUS,
    WRK_SCRIPT,
    Server,
    TargetSpec,
    run_wrk,
)

#: How long the server's thread waits between two writes of the totals.
WRITE_EVERY = 0.2


def child(threshold: str, stats: str, argv: list[str]) -> None:
    """Run the command line (``argv``) with the callback installed and ``threshold`` applied."""
    from skillwire.cli import main
    from skillwire.server.serving import serve

    if threshold == "interpreter":
        serve.GC_YOUNG_THRESHOLD = 0  # tune_gc raises nothing
    else:
        serve.GC_YOUNG_THRESHOLD = int(threshold)
    totals = [[0, 0.0] for _ in range(3)]
    started = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            entry = totals[info["generation"]]
            entry[0] += 1
            entry[1] += time.perf_counter() - started[0]

    def write() -> None:
        while True:
            time.sleep(WRITE_EVERY)
            Path(stats + ".tmp").write_text(json.dumps({"totals": totals, "threshold": gc.get_threshold()}))
            os.replace(stats + ".tmp", stats)

    gc.callbacks.append(callback)
    threading.Thread(target=write, daemon=True).start()
    sys.exit(main(argv))


def totals(stats: Path) -> tuple[list[list[float]], list[int]]:
    data = json.loads(stats.read_text())
    return data["totals"], data["threshold"]


def measure(args: argparse.Namespace, threshold: str, concurrency: int, scratch: Path) -> dict[str, float]:
    stats = scratch / f"gc-{threshold}-{concurrency}.json"
    store = args.store.replace("{tmp}", str(scratch))
    command = [sys.executable, __file__, "--child", threshold, "--stats", str(stats), "--"]
    spec = TargetSpec(
        f"gc-{threshold}",
        argv=lambda port, _grpc: [
            *command,
            *("serve", "examples/echo", "--host", "127.0.0.1", "--port", str(port), "--store", store),
            *("--log-level", "warning", "--no-console"),
        ],
    )
    server = Server(spec, scratch, cpus=SERVER_CPUS if args.pin else None)
    try:
        server.wait_ready(30.0)
        run_wrk(server.base_url + "/", concurrency, 2, 1, "warm", WRK_SCRIPT)
        time.sleep(2 * WRITE_EVERY)
        before, _ = totals(stats)
        level = run_wrk(server.base_url + "/", concurrency, args.duration, 1, "load", WRK_SCRIPT)
        time.sleep(2 * WRITE_EVERY)
        after, served_with = totals(stats)
    finally:
        server.stop()
        if store.startswith("sqlite:///"):
            for suffix in ("", "-wal", "-shm"):
                Path(store.removeprefix("sqlite:///") + suffix).unlink(missing_ok=True)
    spent = [after[g][1] - before[g][1] for g in range(3)]
    runs = [after[g][0] - before[g][0] for g in range(3)]
    return {
        "rps": level.rps,
        "p99_ms": level.p99_ms,
        "gc_us": sum(spent) / level.requests * 1e6,
        "young_per_1000": runs[0] / level.requests * 1000,
        "older_per_1000": (runs[1] + runs[2]) / level.requests * 1000,
        "threshold": served_with[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", default="memory://", help="a store URL; {tmp} is a scratch directory")
    parser.add_argument("--thresholds", default="interpreter,2000,10000")
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--stats", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        child(args.child, args.stats, rest[1:] if rest[:1] == ["--"] else rest)
        return
    if args.pin:
        os.sched_setaffinity(0, HARNESS_CPUS)
    set_ups = [(t, int(c)) for c in args.concurrency.split(",") for t in args.thresholds.split(",")]
    results: dict[tuple[str, int], list[dict[str, float]]] = {s: [] for s in set_ups}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for threshold, concurrency in set_ups:
                print(f"[gc] round {round_ + 1}: {threshold} at c={concurrency}", file=sys.stderr)
                results[(threshold, concurrency)].append(measure(args, threshold, concurrency, Path(scratch)))
    print(f"Store {args.store}; medians of {args.rounds} rounds (each round's figures in brackets).\n")
    print(
        "| young threshold | c | req/s | p99 ms | collection µs a request | young collections a 1,000 "
        "requests | older ones a 1,000 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (threshold, concurrency), runs in results.items():

        def cell(key: str, digits: int, runs: list[dict[str, float]] = runs) -> str:
            values = [r[key] for r in runs]
            inner = ", ".join(f"{v:,.{digits}f}" for v in values)
            return f"{statistics.median(values):,.{digits}f} [{inner}]"

        name = f"{threshold} ({int(runs[0]['threshold'])})" if threshold == "interpreter" else threshold
        print(
            f"| {name} | {concurrency} | {cell('rps', 0)} | {cell('p99_ms', 2)} | {cell('gc_us', 1)} | "
            f"{cell('young_per_1000', 1)} | {cell('older_per_1000', 2)} |"
        )


if __name__ == "__main__":
    main()
