"""The ``skillwire`` console script (and ``python -m skillwire``): ``skillwire --version`` is answered here,
before the command line's modules load; every other command goes to :func:`skillwire.cli.main.main`.

Why a module of its own: building the command line's parser imports every command family (the client's
types, msgspec, the serve options), which is most of what ``--version`` cost (124-162 ms on a slow machine,
against 31-35 ms for the interpreter and ``import skillwire``). The answer is the same as the parser's
(``skillwire X.Y.Z``, exit 0); any other use of ``--version`` (beside other arguments) is the parser's."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from skillwire._version import version_line

        print(version_line())
        return 0
    from skillwire.cli.main import main as run

    return run(argv)
