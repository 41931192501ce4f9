"""The client commands of ``skillwire``: call a running agent from the shell.

* ``skillwire card URL``: the agent card (``--json``: the card's JSON on one line).
* ``skillwire send URL [TEXT] [--skill ID] [--data JSON|@FILE] [--context ID] [--task ID] [--stream]``:
  send a message and print the task's final state, status message and artifacts (``--stream``: each event
  as it arrives).
* ``skillwire tasks list|get|cancel|watch URL ...``: ListTasks, GetTask, CancelTask, SubscribeToTask.

Every command takes ``--header K=V`` (repeatable), ``--binding``, ``--retries``, ``--json`` (one ProtoJSON
object per line: each response or stream event) and ``--debug``.

Exit codes: 0 success (a completed task, a direct Message reply, a task waiting for input or still working,
a card, a listing, a task read or canceled); 1 the task ended FAILED, REJECTED or CANCELED (``send`` and
``tasks watch``); 2 usage errors; 3 connection and protocol errors, reported as one line on stderr
(``--debug`` adds the traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

if TYPE_CHECKING:
    from skillwire.client import Client
from skillwire.errors import A2AError, UnsupportedOperationError
from skillwire.protocol import models as m
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState

__all__ = ["COMMANDS", "EXIT_ERROR", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "add_parsers", "run"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ERROR = 3

#: The top-level commands this module handles.
COMMANDS = frozenset({"card", "send", "tasks"})

_FAILED = frozenset({TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELED})


# -- argument parsing ----------------------------------------------------------------------------------


def _header(value: str) -> tuple[str, str]:
    name, sep, content = value.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected K=V, got {value!r}")
    return name.strip(), content


def _data(value: str) -> Any:
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {value[1:]}: {exc.strerror or exc}") from None
    else:
        text = value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("url", help="the agent's base URL (or the URL of its agent card)")
    common.add_argument(
        "--header",
        "-H",
        action="append",
        type=_header,
        default=[],
        metavar="K=V",
        help="an HTTP header to send with every request (repeatable)",
    )
    common.add_argument(
        "--binding",
        choices=["JSONRPC", "HTTP+JSON"],
        default=None,
        help="the protocol binding to use (default: the first of JSONRPC, HTTP+JSON the card offers)",
    )
    common.add_argument(
        "--retries", type=int, default=3, help="retries of safe calls on connection failures (default 3)"
    )
    common.add_argument("--json", action="store_true", help="print ProtoJSON, one object per line")
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return common


def add_parsers(sub: Any) -> None:
    """Add ``card``, ``send`` and ``tasks`` to the ``skillwire`` subparsers ``sub``."""
    common = _common()
    sub.add_parser("card", parents=[common], help="show an agent's card")

    send = sub.add_parser("send", parents=[common], help="send a message to an agent")
    send.add_argument("text", nargs="?", default=None, help="the message text")
    send.add_argument(
        "--skill", default=None, metavar="ID", help="the skill to call (message.metadata.skillId)"
    )
    send.add_argument(
        "--data", type=_data, default=None, metavar="JSON|@FILE", help="add a data part: JSON text or @file"
    )
    send.add_argument("--context", default="", metavar="ID", help="the context to continue")
    send.add_argument("--task", default="", metavar="ID", help="the task to continue (answer a question)")
    send.add_argument("--stream", action="store_true", help="stream the task's events as they happen")
    send.set_defaults(usage_error=send.error)

    tasks = sub.add_parser("tasks", help="list, read, cancel and watch tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    listing = tasks_sub.add_parser("list", parents=[common], help="list tasks (ListTasks)")
    listing.add_argument("--context", default="", metavar="ID", help="only the tasks of this context")
    listing.add_argument(
        "--status",
        choices=[s.name.lower().replace("_", "-") for s in TaskState if s is not TaskState.UNSPECIFIED],
        default=None,
        help="only the tasks in this state",
    )
    listing.add_argument("--page-size", type=int, default=None, metavar="N")
    listing.add_argument("--page-token", default="", metavar="TOKEN")
    get = tasks_sub.add_parser("get", parents=[common], help="show a task (GetTask)")
    get.add_argument("id", help="the task id")
    get.add_argument(
        "--history", type=int, default=None, metavar="N", help="include up to N history messages"
    )
    cancel = tasks_sub.add_parser("cancel", parents=[common], help="cancel a task (CancelTask)")
    cancel.add_argument("id", help="the task id")
    watch = tasks_sub.add_parser(
        "watch", parents=[common], help="follow a task's events until it ends or waits for input"
    )
    watch.add_argument("id", help="the task id")


# -- running -------------------------------------------------------------------------------------------


class _Call:
    """What is being done, for the error line."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.url: str = args.url
        self.operation = f"reading the agent card at {self.url}"

    async def connect(self) -> Client:
        from skillwire.client import Client

        bindings = (self.args.binding,) if self.args.binding else ("JSONRPC", "HTTP+JSON")
        return await Client.connect(
            self.url, bindings=bindings, headers=dict(self.args.header), retries=max(self.args.retries, 0)
        )


def run(args: argparse.Namespace) -> int:
    """Run the client command in ``args``; return the exit code."""
    # Imported here, not at the top: `skillwire serve` builds this parser too and should not load the client.
    import httpx

    from skillwire.client.errors import ClientError

    call = _Call(args)
    handlers: dict[str, Callable[[_Call, Client], Coroutine[Any, Any, int]]] = {
        "card": _card,
        "send": _send,
        "list": _list,
        "get": _get,
        "cancel": _cancel,
        "watch": _watch,
    }
    name = args.tasks_command if args.command == "tasks" else args.command
    if args.command == "send" and args.text is None and args.data is None:
        _usage(args, "send needs TEXT or --data")
    try:
        return asyncio.run(_with_client(call, handlers[name]))
    except (A2AError, ClientError, httpx.HTTPError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"skillwire: {call.operation} failed: {_describe(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("skillwire: interrupted", file=sys.stderr)
        return 130


def _usage(args: argparse.Namespace, message: str) -> NoReturn:
    error: Callable[[str], NoReturn] = args.usage_error
    error(message)


async def _with_client(call: _Call, handler: Callable[[_Call, Client], Coroutine[Any, Any, int]]) -> int:
    async with await call.connect() as client:
        return await handler(call, client)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, A2AError):
        return f"{exc.message} ({exc.reason})"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())  # one line


# -- output helpers ------------------------------------------------------------------------------------


def _out(text: str = "") -> None:
    print(text, flush=True)


def _json_line(obj: Any) -> None:
    sys.stdout.write(msgspec.json.encode(obj).decode() + "\n")
    sys.stdout.flush()


def _state(state: TaskState) -> str:
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


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


def _parts_text(parts: list[m.Part]) -> str:
    return "\n".join(_part_text(p) for p in parts)


def _print_task(task: m.Task, *, history: bool = False) -> None:
    context = f" (context {task.context_id})" if task.context_id else ""
    _out(f"Task {task.id}: {_state(task.status.state)}{context}")
    if task.status.message is not None:
        _out(f"Status: {_parts_text(task.status.message.parts)}")
    for artifact in task.artifacts:
        _out(f"Artifact {artifact.name or artifact.artifact_id}:")
        _out(_parts_text(artifact.parts))
    if history and task.history:
        _out("History:")
        for message in task.history:
            role = "agent" if message.role == m.Role.AGENT else "user"
            _out(f"  {role}: {_parts_text(message.parts)}")


def _hint(call: _Call, task_id: str, state: TaskState) -> None:
    if call.args.json:
        return
    if state in INTERRUPTED_STATES:
        _out(f"The task is waiting: answer with `skillwire send {call.url} TEXT --task {task_id}`")
    elif state not in TERMINAL_STATES:
        _out(f"The task is still running: follow it with `skillwire tasks watch {call.url} {task_id}`")


def _exit_for(state: TaskState) -> int:
    return EXIT_FAILED if state in _FAILED else EXIT_OK


# -- the commands --------------------------------------------------------------------------------------


async def _card(call: _Call, client: Client) -> int:
    card = client.card
    if call.args.json:
        _json_line(card)
        return EXIT_OK
    _out(f"{card.name} {card.version}")
    if card.description:
        _out(card.description)
    if card.provider is not None:
        _out(f"Provider: {card.provider.organization} ({card.provider.url})")
    _out("Interfaces:")
    for interface in card.supported_interfaces:
        tenant = f" tenant={interface.tenant}" if interface.tenant else ""
        _out(f"  {interface.protocol_binding} {interface.protocol_version}  {interface.url}{tenant}")
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
    _out(f"Capabilities: {', '.join(offered) or 'none'}")
    _out("Skills:")
    for skill in card.skills:
        _out(f"  {skill.id}: {skill.name}")
        if skill.description:
            _out(f"      {skill.description}")
        if skill.examples:
            _out(f"      examples: {' | '.join(skill.examples)}")
    return EXIT_OK


def _message(call: _Call) -> m.Message:
    args = call.args
    parts: list[m.Part] = []
    if args.text is not None:
        parts.append(m.Part(text=args.text))
    if args.data is not None:
        parts.append(m.Part(data=args.data))
    return m.Message(
        message_id=str(uuid.uuid4()),
        context_id=args.context,
        task_id=args.task,
        role=m.Role.USER,
        parts=parts,
        metadata={"skillId": args.skill} if args.skill else None,
    )


async def _send(call: _Call, client: Client) -> int:
    message = _message(call)
    if call.args.stream:
        return await _follow(call, client.stream(message), "SendStreamingMessage")
    call.operation = "SendMessage"
    result = await client.send(message)
    if isinstance(result, m.Message):
        if call.args.json:
            _json_line(m.SendMessageResponse(message=result))
        else:
            _out(_parts_text(result.parts))
        return EXIT_OK
    if call.args.json:
        _json_line(m.SendMessageResponse(task=result))
    else:
        _print_task(result)
        _hint(call, result.id, result.status.state)
    return _exit_for(result.status.state)


async def _follow(call: _Call, events: AsyncIterator[m.StreamResponse], operation: str) -> int:
    """Print the events of a stream; the exit code follows the last state seen."""
    call.operation = operation
    state: TaskState | None = None
    task_id = ""
    replied = False
    async for event in events:
        if call.args.json:
            _json_line(event)
        if event.task is not None:
            state, task_id = event.task.status.state, event.task.id
            if not call.args.json:
                _print_task(event.task)
        elif event.status_update is not None:
            update = event.status_update
            state, task_id = update.status.state, update.task_id
            if not call.args.json:
                note = update.status.message
                _out(f"[{_state(state)}]" + (f" {_parts_text(note.parts)}" if note is not None else ""))
        elif event.artifact_update is not None:
            update_a = event.artifact_update
            task_id = update_a.task_id
            if not call.args.json:
                artifact = update_a.artifact
                if not update_a.append:
                    _out(f"Artifact {artifact.name or artifact.artifact_id}:")
                _out(_parts_text(artifact.parts))
        elif event.message is not None:
            replied = True
            if not call.args.json:
                _out(_parts_text(event.message.parts))
    if state is None:
        if not replied:
            print(f"skillwire: {operation} ended without any event", file=sys.stderr)
        return EXIT_OK if replied else EXIT_ERROR
    _hint(call, task_id, state)
    return _exit_for(state)


async def _list(call: _Call, client: Client) -> int:
    call.operation = "ListTasks"
    args = call.args
    status = TaskState[args.status.upper().replace("-", "_")] if args.status else None
    page = await client.list_tasks(
        context_id=args.context, status=status, page_size=args.page_size, page_token=args.page_token
    )
    if args.json:
        _json_line(page)
        return EXIT_OK
    if not page.tasks:
        _out("No tasks.")
    for task in page.tasks:
        note = task.status.message
        text = " ".join(_parts_text(note.parts).split()) if note is not None else ""
        when = task.status.timestamp.isoformat() if task.status.timestamp is not None else ""
        row = [task.id, _state(task.status.state), task.context_id, when, text]
        _out("  ".join(cell for cell in row if cell))
    if page.tasks:
        _out(f"{len(page.tasks)} of {page.total_size} task(s)")
    if page.next_page_token:
        _out(f"Next page: --page-token {page.next_page_token}")
    return EXIT_OK


async def _get(call: _Call, client: Client) -> int:
    call.operation = "GetTask"
    task = await client.get_task(call.args.id, history_length=call.args.history)
    if call.args.json:
        _json_line(task)
    else:
        _print_task(task, history=True)
    return EXIT_OK


async def _cancel(call: _Call, client: Client) -> int:
    call.operation = "CancelTask"
    task = await client.cancel_task(call.args.id)
    if call.args.json:
        _json_line(task)
    else:
        _print_task(task)
    return EXIT_OK


async def _watch(call: _Call, client: Client) -> int:
    try:
        return await _follow(call, _until_settled(client.subscribe(call.args.id)), "SubscribeToTask")
    except UnsupportedOperationError:
        # SubscribeToTask refuses a task that has already ended: show its final state instead.
        call.operation = "GetTask"
        task = await client.get_task(call.args.id)
        if task.status.state not in TERMINAL_STATES:
            raise
        if call.args.json:
            _json_line(m.StreamResponse(task=task))
        else:
            _print_task(task)
        return _exit_for(task.status.state)


async def _until_settled(events: AsyncIterator[m.StreamResponse]) -> AsyncIterator[m.StreamResponse]:
    """The events of a subscription, ending when the task is terminal or waits for the client."""
    try:
        async for event in events:
            yield event
            status = (
                event.task.status
                if event.task is not None
                else event.status_update.status
                if event.status_update is not None
                else None
            )
            if status is not None and (status.state in TERMINAL_STATES or status.state in INTERRUPTED_STATES):
                return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
