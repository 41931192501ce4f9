"""What the skill layer costs: the echo agent as a bare executor and as a SKILL.md skill, in one run.

    python bench/skills.py            # needs wrk (apt-get install -y wrk)

Both servers run at once (memory store, the same uvicorn settings as bench/run.py); the harness then
alternates short SendMessage loads between them (c=16), so that drift on a shared machine hits both
alike, and reports the median requests/s of each and the median of the per-round ratios. It also prints
the JSON Schema validation microbenchmark of bench/validate.py. The figure to read is the overhead:
1 - skill / bare (the target is at most 15%).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # the harness beside this file
import validate


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9, help="alternating load rounds (default 9)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds of load per round and target")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    skillwire = [str(Path(sys.executable).with_name("skillwire"))]
    targets = ("skillwire-memory", "skillwire-skill")
    with tempfile.TemporaryDirectory(prefix="skillwire-bench-") as tmp:
        workdir = Path(tmp)
        servers = {}
        try:
            for name in targets:
                server = run.Server(run.target_spec(name, skillwire, workdir), workdir)
                servers[name] = server
                server.wait_ready(30)
                run.check_echo(server.base_url + "/")
            for name, server in servers.items():  # warm-up
                run.run_wrk(server.base_url + "/", args.concurrency, 2, 1, f"warm-{name}")
            rates: dict[str, list[float]] = {name: [] for name in targets}
            for round_ in range(args.rounds):
                order = targets if round_ % 2 == 0 else tuple(reversed(targets))
                for name in order:
                    level = run.run_wrk(
                        servers[name].base_url + "/", args.concurrency, args.seconds, 1, f"r{round_}"
                    )
                    rates[name].append(level.rps)
                    run.log(f"round {round_ + 1}: {name} {level.rps:.0f} req/s")
        finally:
            for server in servers.values():
                server.stop()
    bare, skill = (statistics.median(rates[name]) for name in targets)
    ratios = [s / b for s, b in zip(rates["skillwire-skill"], rates["skillwire-memory"], strict=True)]
    print(
        f"| SendMessage c={args.concurrency}, {args.rounds} alternating rounds of {args.seconds:g} s | req/s |"
    )
    print("|---|---:|")
    print(f"| bare executor (examples/echo), median | {bare:.0f} |")
    print(f"| skill (examples/echo_skill), median | {skill:.0f} |")
    print(
        f"| skill layer overhead, median of per-round ratios | {(1 - statistics.median(ratios)) * 100:.1f}% |"
    )
    print()
    validate.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
