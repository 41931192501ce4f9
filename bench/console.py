"""The web console's weight and time to interactive, in headless Chromium (Debian's, driven by Playwright).

    python bench/console.py [--runs 20] [--json out.json]

Serves examples/greeter with ``skillwire serve`` (the console on, SQLite in a temporary folder), then loads
``/console/`` ``--runs`` times, each in a fresh browser context (an empty cache), and reads the
``console-ready`` mark the page sets once the card is read and the agent page is drawn: milliseconds from the
start of navigation. The ``console-start`` mark, set when the script starts, splits that time: before it
is the browser (a fresh context, the page, the stylesheet and the module fetched and parsed), after it the
script (``config.json`` and the card fetched, the agent page drawn). It prints the shipped bytes of each
file (as is and gzipped: skillwire serves them uncompressed; a proxy in front may compress), the bytes the
browser fetched, and the median, p90 and worst time to interactive. Nothing here is a test: figures go into docs/performance.md.

There is no a2a-sdk column: the official SDK ships no console.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(port: int, folder: str) -> subprocess.Popen[bytes]:
    skillwire = Path(sys.executable).with_name("skillwire")
    proc = subprocess.Popen(
        [
            str(skillwire),
            "serve",
            str(ROOT / "examples" / "greeter"),
            "--port",
            str(port),
            "--store",
            f"sqlite:///{folder}/bench.db",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/console/", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the agent did not start")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from skillwire.console import asset_bytes

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    folder = Path(ROOT / "src" / "skillwire" / "console" / "assets")
    files = {
        name: {"bytes": size, "gzip": len(gzip.compress((folder / name).read_bytes(), 9))}
        for name, size in asset_bytes().items()
    }
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = serve(port, tmp)
        try:
            times: list[float] = []
            script: list[float] = []
            fetched: list[int] = []
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                for _ in range(args.runs):
                    context = browser.new_context()
                    page = context.new_page()
                    page.goto(f"http://127.0.0.1:{port}/console/")
                    page.locator("body[data-ready=true]").wait_for(timeout=15_000)
                    mark: Any = page.evaluate(
                        "() => performance.getEntriesByName('console-ready')[0].startTime"
                    )
                    begun: Any = page.evaluate(
                        "() => performance.getEntriesByName('console-start')[0].startTime"
                    )
                    sizes: Any = page.evaluate(
                        "() => performance.getEntriesByType('resource').concat(performance.getEntriesByType"
                        "('navigation')).reduce((n, e) => n + (e.transferSize || 0), 0)"
                    )
                    times.append(float(mark))
                    script.append(float(mark) - float(begun))
                    fetched.append(int(sizes))
                    context.close()
                version = browser.version
                browser.close()
        finally:
            proc.terminate()
            proc.wait(10)
    times.sort()
    result = {
        "browser": f"Chromium {version} (headless)",
        "runs": args.runs,
        "files": files,
        "total_bytes": sum(f["bytes"] for f in files.values()),
        "total_gzip": sum(f["gzip"] for f in files.values()),
        "fetched_bytes_median": int(statistics.median(fetched)),
        "tti_ms_median": round(statistics.median(times), 1),
        "tti_ms_p90": round(times[int(0.9 * (len(times) - 1))], 1),
        "tti_ms_max": round(times[-1], 1),
        "script_ms_median": round(statistics.median(script), 1),
        "cpus": os.cpu_count(),
    }
    print("| file | bytes | gzip -9 |\n| --- | ---: | ---: |")
    for name, f in files.items():
        print(f"| {name} | {f['bytes']:,} | {f['gzip']:,} |")
    print(f"| all | {result['total_bytes']:,} | {result['total_gzip']:,} |")
    print()
    print(f"{result['browser']}, {args.runs} cold loads of /console/ (greeter, SQLite):")
    print(f"  fetched per load (median, headers included): {result['fetched_bytes_median']:,} bytes")
    print(
        f"  time to interactive: median {result['tti_ms_median']} ms, p90 {result['tti_ms_p90']} ms,"
        f" max {result['tti_ms_max']} ms"
    )
    print(
        f"  of which the script, from its start to ready (config.json, the card, drawing the page):"
        f" median {result['script_ms_median']} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
