"""Reading the ``console`` blocks of a document as commands and the lines each prints, and matching what a
command printed against them (tests/test_readme_cli.py, tests/test_docs_first_hour.py).

Placeholders: ``<name>`` (lowercase letters, digits and ``-``) in an output line stands for one run of
characters without spaces, quotes, commas or parentheses (an id, a timestamp). Its first occurrence binds the
name to what was printed there; every later occurrence, in an output line or in a command, means that same
text. A line that is ``...`` alone stands for any number of lines. Each ``replace`` pair is applied to
commands and output lines first (the document's port for the test server's)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]*)>")
TOKEN = r"[^\s\"'(),]+"
ANY_LINES = "..."


@dataclass
class Command:
    line: str
    expected: list[str] = field(default_factory=list)


def commands_of(body: str) -> list[Command]:
    """The ``$ `` commands of one console block's ``body``, each with the lines printed after it."""
    lines = body.splitlines()
    assert lines and lines[0].startswith("$ "), f"a console block must start with a command: {body!r}"
    commands: list[Command] = []
    for line in lines:
        if line.startswith("$ "):
            commands.append(Command(line[2:]))
        else:
            commands[-1].expected.append(line)
    return commands


class Bindings:
    """What each placeholder stood for the first time it was matched."""

    def __init__(self, replace: dict[str, str]) -> None:
        self.replace = replace
        self.values: dict[str, str] = {}

    def replaced(self, text: str) -> str:
        for old, new in self.replace.items():
            text = text.replace(old, new)
        return text

    def command(self, line: str) -> str:
        def value(match: re.Match[str]) -> str:
            assert match[1] in self.values, f"<{match[1]}> is used before any output showed it"
            return self.values[match[1]]

        return PLACEHOLDER.sub(value, self.replaced(line))

    def match(self, expected: list[str], printed: list[str], command: str) -> None:
        """``printed`` is what ``expected`` shows (``...`` lines: anything, as few lines as will do)."""
        shown = "\n".join(printed)
        assert self._match(expected, printed), (
            f"$ {command}\nexpected:\n" + "\n".join(expected) + (f"\nprinted:\n{shown}")
        )

    def _match(self, expected: list[str], printed: list[str]) -> bool:
        if not expected:
            return not printed
        want, *rest = expected
        if want == ANY_LINES:
            return any(self._match(rest, printed[skip:]) for skip in range(len(printed) + 1))
        if not printed:
            return False
        bound = self._line(want, printed[0])
        if bound is None:
            return False
        before = dict(self.values)
        self.values.update(bound)
        if self._match(rest, printed[1:]):
            return True
        self.values = before
        return False

    def _line(self, want: str, got: str) -> dict[str, str] | None:
        """The placeholders ``got`` binds if it is the line ``want`` shows, else None."""
        want = self.replaced(want)
        pattern, names, pos = "", [], 0
        for match in PLACEHOLDER.finditer(want):
            pattern += re.escape(want[pos : match.start()])
            name = match[1]
            if name in self.values:
                pattern += re.escape(self.values[name])
            elif name in names:  # twice on one line, bound on neither before
                pattern += f"(?P={name.replace('-', '_')})"
            else:
                names.append(name)
                pattern += f"(?P<{name.replace('-', '_')}>{TOKEN})"
            pos = match.end()
        pattern += re.escape(want[pos:])
        found = re.fullmatch(pattern, got)
        if found is None:
            return None
        return {name: found[name.replace("-", "_")] for name in names}
