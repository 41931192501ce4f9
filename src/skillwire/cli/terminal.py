"""The terminal under the client commands: :func:`safe_text`, which takes out of an agent's text whatever
the terminal would act on, :func:`is_terminal`, the live :class:`StatusLine` drawn while a task works, and
:func:`read_line`, which reads an answer from stdin without blocking the event loop."""

from __future__ import annotations

import os
import re
import shutil
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # asyncio loads with the client, when a command calls an agent: not for --version
    import asyncio

__all__ = ["StatusLine", "is_terminal", "read_line", "safe_text"]

#: What a terminal acts on instead of showing it, the longest forms first:
#: * a control string (OSC such as the window title ``ESC ] 0 ; ... BEL`` or the clipboard ``ESC ] 52``,
#:   DCS, SOS, PM, APC), 7-bit or 8-bit, up to its BEL or ST; its body holds no control, so a string left
#:   open loses only its introducer (below) and each attempt stops at the next control: linear time;
#: * a CSI sequence (``ESC [`` or 8-bit CSI, parameters, intermediates, final byte), then any other ESC
#:   sequence (``ESC c``, ``ESC ( 0``, ``ESC 7`` ...);
#: * a lone control: C0 but newline and tab (so ESC, BEL, backspace, carriage return), DEL, C1;
#: * the bidi embeddings, overrides and isolates, which reorder what is shown (CVE-2021-42574).
_UNSAFE = re.compile(
    r"""
      (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]) [^\x00-\x1f\x7f-\x9f]* (?:\x07|\x1b\\|\x9c)
    | (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]
    | \x1b [ -/]* [0-~]
    | [\x00-\x08\x0b-\x1f\x7f-\x9f]
    | [\u202a-\u202e\u2066-\u2069]
    """,
    re.VERBOSE,
)


def safe_text(text: str) -> str:
    """``text`` as a terminal should show it: every control sequence and control character taken out (see
    ``_UNSAFE``), newlines and tabs kept. Everything an agent says goes through it before it is printed::

        safe_text("done\x1b]0;pwned\x07\x1b[2J!")  # "done!"
    """
    return _UNSAFE.sub("", text)


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is an interactive terminal.

    The live status line (stdout) and the answer prompt (stdin and stdout) depend on it; a test forces
    either answer with ``monkeypatch.setattr(skillwire.cli.terminal, "is_terminal", lambda stream: True)``.
    """
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _printable(text: str) -> str:
    """``text`` on one line, without anything an agent could use to redraw the terminal."""
    return " ".join(safe_text(text).split())


class StatusLine:
    """One line redrawn in place (``\\r`` and clear-to-end) while a task works: a spinner, the state and the
    latest status or progress text. Cleared before anything else is printed; never drawn when disabled."""

    TICK_SECONDS = 0.1

    def __init__(self, stream: IO[str], *, enabled: bool) -> None:
        self.enabled = enabled
        self._stream = stream
        encoding = (getattr(stream, "encoding", "") or "").lower().replace("-", "")
        self._frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if encoding == "utf8" else "|/-\\"
        self._frame = 0
        self._text = ""
        self._shown = False
        self._ticker: asyncio.Task[None] | None = None

    def show(self, state: str, note: str = "") -> None:
        if not self.enabled:
            return
        self._text = f"{state}: {note}" if note else state
        self._draw()
        if self._ticker is None:
            import asyncio

            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        self.clear()

    def _draw(self) -> None:
        width = max(shutil.get_terminal_size().columns - 1, 10)  # the last column would wrap the line
        line = _printable(f"{self._frames[self._frame % len(self._frames)]} {self._text}")
        self._stream.write("\r" + line[:width] + "\x1b[K")
        self._stream.flush()
        self._shown = True

    async def _tick(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(self.TICK_SECONDS)
            self._frame += 1
            if self._shown:
                self._draw()


async def read_line(stream: IO[str]) -> str | None:
    """One line from a terminal, read without blocking the event loop (Ctrl-C still interrupts); None at
    the end of input. The terminal's line discipline does the editing, so a read returns a whole line."""
    fd = stream.fileno()
    received = bytearray()
    while b"\n" not in received:
        try:
            await _readable(fd)
        except NotImplementedError:  # pragma: no cover - an event loop without readers (Windows)
            return stream.readline() or None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        received += chunk
    if not received:
        return None
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return received.decode(encoding, errors="replace").partition("\n")[0]


async def _readable(fd: int) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
