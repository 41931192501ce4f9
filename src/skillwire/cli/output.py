"""What the client commands print: ProtoJSON lines, and the :class:`Screen` of one command (cards, task
listings, tasks, stream events and artifacts as text, the live status line, the answer prompt, the artifact
files saved with ``--out``).

Everything an agent says reaches the terminal through the doors here, which make it harmless (issue 12):
:func:`say` (a line of text on stdout; what :meth:`Screen.line` prints), :func:`say_error` (a
``skillwire: ...`` line on stderr) and :func:`say_traceback` (``--debug``) take out every control sequence with
:func:`~skillwire.cli.terminal.safe_text`; :func:`json_line` and :func:`json_text` keep JSON lossless and
valid, escaping the controls the JSON encoder writes as they are (DEL, C1, bidi controls).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import msgspec

from skillwire.cli import terminal
from skillwire.cli.files import save_file
from skillwire.protocol import models as m
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState
from skillwire.wire.generations import without_generations

__all__ = ["Screen", "json_line", "json_text", "one_line", "parts_text", "say", "say_error", "say_traceback"]

#: What JSON encoders write as is though a terminal acts on it (DEL, C1 controls, the 8-bit CSI among them)
#: or reorders text by it (bidi controls); C0 controls they escape already.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _state(state: TaskState) -> str:
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def say(text: str = "") -> None:
    """Print ``text`` (lines of it) on stdout, without anything in it a terminal would act on."""
    print(terminal.safe_text(text), flush=True)


def say_error(text: str) -> None:
    """Print ``skillwire: text`` on one line of stderr, without anything in it a terminal would act on."""
    print(f"skillwire: {one_line(text)}", file=sys.stderr, flush=True)


def say_traceback() -> None:
    """Print the traceback of the exception being handled on stderr (``--debug``), made safe: its message
    may quote the agent."""
    sys.stderr.write(terminal.safe_text(traceback.format_exc()))
    sys.stderr.flush()


def one_line(text: str) -> str:
    """``text`` made safe (:func:`~skillwire.cli.terminal.safe_text`), its runs of white space made one space."""
    return " ".join(terminal.safe_text(text).split())


def json_text(encoded: str) -> str:
    """JSON text with the characters in ``_JSON_UNSAFE`` written as ``\\uXXXX`` escapes: the same JSON (they
    can only be inside strings, which read the escapes back as the same characters), safe on a terminal."""
    return _JSON_UNSAFE.sub(lambda found: f"\\u{ord(found[0]):04x}", encoded)


def json_line(obj: Any) -> None:
    """Print ``obj`` as v1.0 ProtoJSON on one line of stdout (see :func:`json_text`): without the A2A 1.1
    generation fields the client reads, so that what scripts get does not depend on the agent."""
    sys.stdout.write(json_text(msgspec.json.encode(without_generations(obj)).decode()) + "\n")
    sys.stdout.flush()


def _is_file(part: m.Part) -> bool:
    return isinstance(part.raw, bytes)


def _part_text(part: m.Part) -> str:
    if isinstance(part.text, str):
        return part.text
    if part.data is not msgspec.UNSET:
        return json.dumps(part.data, indent=2, ensure_ascii=False)
    kind = part.media_type or "file"
    label = f" {part.filename}" if part.filename else ""
    if isinstance(part.url, str):
        return f"[{kind}{label}] {part.url}"
    size = len(part.raw) if isinstance(part.raw, bytes) else 0
    return f"[{kind}{label}, {size} bytes]"


def parts_text(parts: list[m.Part]) -> str:
    """``parts`` as text, one part after the other (a file part as its kind, name and size or URL)."""
    return "\n".join(_part_text(p) for p in parts)


def _note(message: m.Message | None) -> str:
    return parts_text(message.parts) if message is not None else ""


class Screen:
    """The output of one command: lines on stdout, the live status line, the artifact files saved.

    Artifacts are shown once: a task snapshot that repeats artifacts already shown (the next turn of a
    conversation, a stream's first event) shows only their new parts, so ``--out`` saves each file once.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.json: bool = args.json
        # looked up at call time, so that a test can replace terminal.is_terminal
        on_terminal = not self.json and terminal.is_terminal(sys.stdout)
        #: Draw the status line: stdout is a terminal that understands ``ESC [ K``.
        self.live = on_terminal and os.environ.get("TERM") != "dumb"
        #: Answer the agent's questions at a prompt: stdin and stdout are terminals.
        self.interactive = on_terminal and terminal.is_terminal(sys.stdin)
        self.status = terminal.StatusLine(sys.stdout, enabled=self.live)
        self.can_save = hasattr(args, "out")
        out = getattr(args, "out", None)
        self.out_dir = Path(out) if out is not None else None
        #: A ``> `` prompt waits for an answer (Ctrl-C then needs a new line).
        self.prompting = False
        self._shown_parts: dict[str, int] = {}
        self._hinted_out = False

    def line(self, text: str = "") -> None:
        """Print ``text`` (:func:`say`), clearing the status line first."""
        self.status.clear()
        say(text)

    def interrupted(self) -> None:
        if self.prompting:
            self.prompting = False
            print(flush=True)

    async def prompt(self) -> str:
        """Read an answer at a ``> `` prompt; "" for an empty line or end of input (Ctrl-D)."""
        self.status.clear()
        sys.stdout.write("> ")
        sys.stdout.flush()
        self.prompting = True
        line = await terminal.read_line(sys.stdin)
        self.prompting = False
        if line is None:
            sys.stdout.write("\n")  # Ctrl-D leaves the cursor after the prompt
            sys.stdout.flush()
        return (line or "").strip()

    def card(self, card: m.AgentCard) -> None:
        """Print an agent card: name, version, provider, interfaces, capabilities and skills."""
        out = self.line
        out(f"{card.name} {card.version}")
        if card.description:
            out(card.description)
        if card.provider is not None:
            out(f"Provider: {card.provider.organization} ({card.provider.url})")
        out("Interfaces:")
        for interface in card.supported_interfaces:
            tenant = f" tenant={interface.tenant}" if interface.tenant else ""
            out(f"  {interface.protocol_binding} {interface.protocol_version}  {interface.url}{tenant}")
        caps = card.capabilities
        offered = [
            name
            for name, flag in (
                ("streaming", caps.streaming),
                ("push notifications", caps.push_notifications),
                ("extended card", caps.extended_agent_card),
            )
            if flag
        ]
        out(f"Capabilities: {', '.join(offered) or 'none'}")
        out("Skills:")
        for skill in card.skills:
            out(f"  {skill.id}: {skill.name}")
            if skill.description:
                out(f"      {skill.description}")
            if skill.examples:
                out(f"      examples: {' | '.join(skill.examples)}")

    def page(self, page: m.ListTasksResponse) -> None:
        """Print a page of ListTasks: one row per task, the count, the token of the next page."""
        out = self.line
        if not page.tasks:
            out("No tasks.")
        for task in page.tasks:
            note = task.status.message
            text = one_line(parts_text(note.parts)) if note is not None else ""
            when = task.status.timestamp.isoformat() if task.status.timestamp is not None else ""
            row = [task.id, _state(task.status.state), task.context_id, when, text]
            out("  ".join(cell for cell in row if cell))
        if page.tasks:
            out(f"{len(page.tasks)} of {page.total_size} task(s)")
        if page.next_page_token:
            out(f"Next page: --page-token {page.next_page_token}")

    def task(self, task: m.Task, *, history: bool = False) -> None:
        """Print a task (with ``--json``: only save its files)."""
        if not self.json:
            context = f" (context {task.context_id})" if task.context_id else ""
            self.line(f"Task {task.id}: {_state(task.status.state)}{context}")
            if task.status.message is not None:
                self.line(f"Status: {parts_text(task.status.message.parts)}")
        for artifact in task.artifacts:
            self.artifact(artifact, snapshot=True)
        if history and task.history and not self.json:
            self.line("History:")
            for message in task.history:
                role = "agent" if message.role == m.Role.AGENT else "user"
                self.line(f"  {role}: {parts_text(message.parts)}")

    def event(self, event: m.StreamResponse) -> None:
        """Print a stream event other than a Message: a task, a status update, an artifact update."""
        if event.task is not None:
            self.task(event.task)
        elif event.status_update is not None:
            status = event.status_update.status
            if not self.json:
                note = _note(status.message)
                self.line(f"[{_state(status.state)}]" + (f" {note}" if note else ""))
        elif event.artifact_update is not None:
            update = event.artifact_update
            self.artifact(update.artifact, append=update.append)

    def progress(self, event: m.StreamResponse, task: m.Task | None) -> None:
        """Show on the status line what ``task`` (as merged up to ``event``) is doing, while it works."""
        if task is None or task.status.state in TERMINAL_STATES or task.status.state in INTERRUPTED_STATES:
            return
        note = _note(task.status.message)
        if event.artifact_update is not None:
            artifact = event.artifact_update.artifact
            note = f"{artifact.name or artifact.artifact_id}: {_part_text(artifact.parts[-1])}"
        self.status.show(_state(task.status.state), note)

    def artifact(self, artifact: m.Artifact, *, append: bool = False, snapshot: bool = False) -> None:
        """Show and save the parts of ``artifact`` not shown yet: all of a new or replaced artifact, the
        chunk of an ``append`` update, the parts a ``snapshot`` has beyond those already shown."""
        seen = self._shown_parts.get(artifact.artifact_id, 0)
        if append:
            parts, total = artifact.parts, seen + len(artifact.parts)
        elif snapshot and seen <= len(artifact.parts):
            parts, total = artifact.parts[seen:], len(artifact.parts)
        else:
            parts, total = artifact.parts, len(artifact.parts)
        self._shown_parts[artifact.artifact_id] = total
        if not parts:
            return
        if not append and not self.json:
            self.line(f"Artifact {artifact.name or artifact.artifact_id}:")
        unsaved = False
        for part in parts:
            if _is_file(part) and self.out_dir is not None:
                path, size = save_file(self.out_dir, part, artifact.artifact_id)
                if not self.json:
                    self.line(f"saved {path} ({size} bytes)")
            elif not self.json:
                self.line(_part_text(part))
                unsaved = unsaved or _is_file(part)
        if unsaved and self.can_save and not self._hinted_out:
            self._hinted_out = True
            self.line("(add --out DIR to save the files)")
