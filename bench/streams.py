"""Streams and idempotency keys (issue 29), side by side with the official a2a-sdk, in one run.

Each target is the echo agent of bench/run.py (``stream N`` streams N chunks), started as its own process:

- **events/s to a fast reader**: one ``stream N`` request read by curl as fast as it can
  (``run.stream_once``), for N in ``--chunks``, ``--runs`` times each; the median and the range;
- **peak RSS with slow readers**: ``--slow`` readers of one ``stream N`` task (its stream, and
  SubscribeToTask after generation 0 for the others: a generations-extension request), each read at one event a millisecond, the
  server's RSS sampled every 50 ms; the peak, and how many readers got to the task's end;
- **the cost of an Idempotency-Key**: blocking JSON-RPC SendMessage with wrk at ``--concurrency``, with and
  without a fresh key on every request, alternated ``--runs`` times on skillwire's SQLite default.

    python bench/streams.py                              # everything (about 5 minutes)
    python bench/streams.py --chunks 1000,10000 --targets skillwire-sqlite,a2a-sdk --skip-rss

a2a-sdk runs with its tracing off (``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``), as in bench/run.py.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (
    WRK_SCRIPT,
    Server,
    TargetFailed,
    jsonrpc_url,
    rpc_body,
    run_wrk,
    skillwire_command,
    stream_once,
    target_spec,
)

#: The same SendMessage with a fresh Idempotency-Key on every request (wrk.format takes the headers whole).
WRK_KEYED_SCRIPT = WRK_SCRIPT.replace(
    "return wrk.format(nil, nil, nil, body)",
    'return wrk.format(nil, nil, {["Content-Type"] = "application/json", ["A2A-Version"] = "1.0",'
    ' ["Idempotency-Key"] = tag .. "-" .. counter}, body)',
)


def slow_reader(
    port: int, body: bytes, got: list[int], index: int, task_ids: list[str] | None = None
) -> None:
    """One JSON-RPC stream read at one event a millisecond (4 KiB at a time, pausing until as many
    milliseconds as events have passed since it began), over HTTP/1.0 (no chunked framing to split events);
    its events in ``got``, the task id it opened with in ``task_ids``.

    The socket keeps the kernel's own buffer sizes: a 4 KiB receive buffer over loopback, where the MSS is
    64 KiB, puts TCP into window probing and holds a reader to about 40 KB/s (150 events a second), far
    slower than the issue's reader."""
    head = (
        "POST / HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    events = 0
    tail = b""
    completed = False
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(head + body)
        began = time.perf_counter()
        while chunk := sock.recv(4096):
            data = tail + chunk
            events += data.count(b"data:") - tail.count(b"data:")
            if task_ids is not None and not task_ids and b'"task":{"id":"' in data:
                start = data.index(b'"task":{"id":"') + 14
                task_ids.append(data[start : data.index(b'"', start)].decode())
            completed = completed or b"TASK_STATE_COMPLETED" in data
            tail = data[-32:]
            time.sleep(max(0.0, began + events / 1000 - time.perf_counter()))
    got[index] = events if completed else -events  # negative: the stream ended before the task did


def peak_rss(server: Server, readers: int, chunks: int, timeout: float) -> tuple[float, list[int]]:
    """The server's peak RSS (MiB) while ``readers`` slow readers follow one ``stream N`` task: its own
    stream, and SubscribeToTask after generation 0 for the others (every event, from the task's log: the
    task has long ended by the time a slow reader asks)."""
    got = [0] * readers
    task_ids: list[str] = []
    body = rpc_body("SendStreamingMessage", f"stream {chunks}", f"slow-{time.time_ns()}")
    threads = [threading.Thread(target=slow_reader, args=(server.port, body, got, 0, task_ids), daemon=True)]
    threads[0].start()
    peak, deadline = server.rss_mib(), time.perf_counter() + timeout
    while not task_ids and threads[0].is_alive() and time.perf_counter() < deadline:
        time.sleep(0.001)
    for i in range(1, readers):
        subscribe = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "SubscribeToTask",
                "params": {"id": task_ids[0], "afterGeneration": 0},
            }
        ).encode()
        thread = threading.Thread(target=slow_reader, args=(server.port, subscribe, got, i), daemon=True)
        thread.start()
        threads.append(thread)
    while any(t.is_alive() for t in threads) and time.perf_counter() < deadline:
        peak = max(peak, server.rss_mib())
        time.sleep(0.05)
    return peak, got


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--targets", default="a2a-sdk,skillwire-memory,skillwire-sqlite")
    parser.add_argument("--chunks", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slow", type=int, default=10, help="slow readers at once (RSS)")
    parser.add_argument("--slow-chunks", type=int, default=100_000)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    skillwire = skillwire_command(None)
    chunk_sizes = [int(c) for c in args.chunks.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    print("| target | chunks | events/s (median) | range | seconds (median) |")
    print("|---|---:|---:|---:|---:|")
    rss_rows = []
    for name in args.targets.split(","):
        spec = target_spec(name, skillwire, work)
        server = Server(spec, work)
        try:
            server.wait_ready(60)
            url = jsonrpc_url(server, [])
            for chunks in chunk_sizes:
                rates, times = [], []
                for _ in range(args.runs):
                    events, seconds = stream_once(url, chunks, args.timeout, shape=spec.shape)
                    rates.append(events / seconds)
                    times.append(seconds)
                print(
                    f"| {name} | {chunks:,} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f}"
                    f" | {statistics.median(times):.2f} |",
                    flush=True,
                )
            if not args.skip_rss:
                before = server.rss_mib()
                peak, got = peak_rss(server, args.slow, args.slow_chunks, args.timeout)
                whole = sum(g >= args.slow_chunks for g in got)
                rss_rows.append((name, before, peak, whole))
        except TargetFailed as exc:
            print(f"| {name} | failed: {exc} | | | |")
        finally:
            server.stop()
    if rss_rows:
        print(
            f"\n| target | RSS before (MiB) | peak RSS, {args.slow} slow readers of {args.slow_chunks:,} chunks | readers"
            " that got every event |"
        )
        print("|---|---:|---:|---:|")
        for name, before, peak, whole in rss_rows:
            print(f"| {name} | {before:.0f} | {peak:.0f} | {whole} of {args.slow} |")
    server = Server(target_spec("skillwire-sqlite", skillwire, work), work)
    try:
        server.wait_ready(60)
        url = jsonrpc_url(server, [])
        plain, keyed = [], []
        for run in range(args.runs):
            plain.append(run_wrk(url, args.concurrency, args.duration, 1, f"plain{run}").rps)
            keyed.append(
                run_wrk(url, args.concurrency, args.duration, 1, f"keyed{run}", WRK_KEYED_SCRIPT).rps
            )
        print(f"\n| SendMessage, SQLite, c={args.concurrency} | req/s (median) | range |")
        print("|---|---:|---:|")
        print(f"| without a key | {statistics.median(plain):,.0f} | {min(plain):,.0f}-{max(plain):,.0f} |")
        print(
            f"| a fresh Idempotency-Key each | {statistics.median(keyed):,.0f} | {min(keyed):,.0f}-{max(keyed):,.0f} |"
        )
        print(f"\nkeyed / plain: {statistics.median(keyed) / statistics.median(plain):.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
