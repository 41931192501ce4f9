"""A stand-in for an external release pipeline: writes one log line per step, then ``done: ...``.

It stops, without writing ``done``, when the file ``<log>.stop`` appears (the agent asks it to: the task was
cancelled or ran out of time, maybe in an agent process that did not start this job).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

STEP_SECONDS = 0.3


def main() -> None:
    log, release, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    stop = log.with_name(log.name + ".stop")
    for i in range(1, steps + 1):
        time.sleep(STEP_SECONDS)
        if stop.exists():
            return
        with log.open("a") as out:
            out.write(f"step {i}/{steps}: deploying {release}.\n")
    with log.open("a") as out:
        out.write(f"done: release {release} is live.\n")


if __name__ == "__main__":
    main()
