"""A stand-in for an external release pipeline: writes one log line per step, then ``done: ...``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

STEP_SECONDS = 0.3


def main() -> None:
    log, release, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(1, steps + 1):
        time.sleep(STEP_SECONDS)
        with log.open("a") as out:
            out.write(f"step {i}/{steps}: deploying {release}.\n")
    with log.open("a") as out:
        out.write(f"done: release {release} is live.\n")


if __name__ == "__main__":
    main()
