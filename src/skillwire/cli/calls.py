"""The client commands of ``skillwire``: call a running agent from the shell.

* ``skillwire card URL``: the agent card (``--json``: the card's JSON on one line).
* ``skillwire send URL [TEXT] [--skill ID] [--data JSON|@FILE]... [--file PATH]... [--context ID] [--task ID]
  [--stream] [--out DIR]``: send a message and print the task's final state, status message and artifacts
  (``--stream``: each event as it arrives). ``--file`` attaches a file (raw bytes, its name, a media type
  guessed from the name); ``--out`` saves the file parts of the artifacts into a folder.
* ``skillwire tasks list|get|cancel|watch URL ...``: ListTasks, GetTask, CancelTask, SubscribeToTask
  (``get`` and ``watch`` take ``--out`` too).

Every command takes ``--header K=V`` and ``--credential SCHEME=SECRET`` (repeatable; a secret goes where the
card's security scheme of that name says), ``--card-keys FILE_OR_URL`` (trust only a card signed with one of
the keys of that JWKS), ``--allow-origin ORIGIN`` (repeatable: an origin other than the URL's that the card
may lead the command to with credentials, or from https to plaintext; see :mod:`skillwire.client.origins`),
``--binding`` (JSONRPC, HTTP+JSON or GRPC), ``--retries``,
``--timeout SECONDS`` (each request's), ``--json`` (one ProtoJSON object per line: each response or stream
event) and ``--debug``. URL may be ``host:port`` or ``:port`` (``http://127.0.0.1:port``).

On a terminal (stdout a TTY, no ``--json``) a live status line shows what the task is doing while the
command waits; ``send`` then streams under the hood when the card offers streaming, and prints the same
final output. When the task asks a question (INPUT_REQUIRED) and stdin is a terminal too, the question is
answered at a ``> `` prompt and the task followed on; an empty answer or Ctrl-D stops. Whether a stream is a
terminal is :func:`skillwire.cli.terminal.is_terminal`'s answer (tests replace it there).

What is printed lives in :mod:`skillwire.cli.output`, the terminal's details in :mod:`skillwire.cli.terminal`,
the files attached and saved in :mod:`skillwire.cli.files`.

Exit codes (:data:`EXIT_OK` ...), each reported as one line on stderr (``--debug`` adds the traceback):

== ==========================================================================================================
0  success: a completed task, a direct Message reply, a task waiting for input or still working, a card, a
   listing, a task read or canceled
1  the task ended FAILED, REJECTED or CANCELED (``send`` and ``tasks watch``)
2  usage: bad arguments, a missing or too large ``--file``
3  the agent could not be called: connection failures, an answer that is not A2A, an HTTP error with no A2A
   error in it, a card refused (signature, origin), a file that cannot be saved
4  the agent refused the request with a protocol error (invalid input, task not found, not cancelable,
   unauthenticated, unsupported ...): the error's reason ends the line
== ==========================================================================================================
"""

from __future__ import annotations

import argparse
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import msgspec

if TYPE_CHECKING:
    from skillwire.client import Client
    from skillwire.client.retry import RetryPolicy
from skillwire.cli.files import LocalError, check_out_dir, file_part
from skillwire.cli.output import Screen, json_line, parts_text, say_error, say_traceback
from skillwire.cli.terminal import is_terminal
from skillwire.errors import A2AError, CardSignatureError, UnsupportedOperationError
from skillwire.protocol import models as m
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState

__all__ = [
    "ALLOW_ORIGIN_HELP",
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "MAX_FILE_BYTES",
    "add_connection_options",
    "add_parsers",
    "agent_url",
    "is_terminal",
    "run",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ERROR = 3
EXIT_REFUSED = 4

#: The top-level commands this module handles.
COMMANDS = frozenset({"card", "send", "tasks"})

#: The largest file ``send --file`` attaches unless ``--max-file-size`` says otherwise. A skillwire server
#: takes request bodies up to 10 MiB, and base64 makes a file a third larger on the wire.
MAX_FILE_BYTES = 10 * 1024 * 1024

_FAILED = frozenset({TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELED})

#: The help of ``--allow-origin`` (every command that calls an agent has it).
ALLOW_ORIGIN_HELP = (
    "another origin (scheme://host[:port]; host:port for plaintext gRPC) the agent card may send this command"
    " to with your credentials, or from https to plaintext (repeatable); credentials otherwise go only to"
    " the URL's own origin"
)


# -- argument parsing ----------------------------------------------------------------------------------


def _header(value: str) -> tuple[str, str]:
    name, sep, content = value.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected K=V, got {value!r}")
    return name.strip(), content


def agent_url(value: str) -> str:
    """An agent's URL as typed (:func:`skillwire.client.origins.agent_url`): ``host:port`` is
    ``http://host:port``, ``:port`` is ``http://127.0.0.1:port``."""
    from skillwire.client.origins import agent_url as expanded

    return expanded(value)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return seconds


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


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def _size(value: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", value, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a size like 2000000, 512K or 20M, got {value!r}")
    return int(match[1]) * _SIZE_UNITS[match[2].upper()]


def _credential(value: str) -> tuple[str, str]:
    name, sep, secret = value.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError("expected SCHEME=SECRET or SCHEME=@FILE")
    if secret.startswith("@"):
        try:
            secret = Path(secret[1:]).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {secret[1:]}: {exc.strerror or exc}") from None
    return name.strip(), secret


def _card_keys(text: str) -> Any:
    """``--card-keys``: a JWKS URL as it is, or the JWKS a file holds."""
    if text.startswith(("http://", "https://")):
        return text
    try:
        jwks = json.loads(Path(text).read_text(encoding="utf-8"))
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text} is not JSON: {exc}") from None
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise argparse.ArgumentTypeError(f'{text} is not a JWKS ({{"keys": [...]}})')
    return jwks


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The options saying how to reach an agent, which every command that calls one takes (``skillwire mcp
    URL`` too): ``--header``, ``--credential``, ``--allow-origin``, ``--binding``, ``--timeout``,
    ``--card-keys``."""
    parser.add_argument(
        "--header",
        "-H",
        action="append",
        type=_header,
        default=[],
        metavar="K=V",
        help="an HTTP header to send with every request (repeatable)",
    )
    parser.add_argument(
        "--credential",
        action="append",
        type=_credential,
        default=[],
        metavar="SCHEME=SECRET",
        help="a secret for one of the card's security schemes, e.g. apiKey=s3cret or oidc=@token.txt"
        " (@FILE reads it from a file; repeatable); the card says where it goes",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help=ALLOW_ORIGIN_HELP,
    )
    parser.add_argument(
        "--binding",
        choices=["JSONRPC", "HTTP+JSON", "GRPC"],
        default=None,
        help="the protocol binding to use (default: the first of JSONRPC, HTTP+JSON, GRPC the card offers)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long each request may take (default: 10 s to connect, 60 s to read, 30 s otherwise)",
    )
    parser.add_argument(
        "--card-keys",
        type=_card_keys,
        default=None,
        metavar="FILE_OR_URL",
        help="trust only an agent card signed with one of these keys: a JWKS file, or its http(s) URL"
        " (an unsigned or badly signed card is refused)",
    )


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "url",
        type=agent_url,
        help="the agent's base URL (or the URL of its agent card); host:port and :port mean http://",
    )
    add_connection_options(common)
    common.add_argument(
        "--retries",
        type=int,
        default=None,
        help="retries of safe calls on connection failures (default 3; `tasks watch`: 12, so that it outlasts"
        " a restart of the agent)",
    )
    common.add_argument("--json", action="store_true", help="print ProtoJSON, one object per line")
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return common


def _saving() -> argparse.ArgumentParser:
    saving = argparse.ArgumentParser(add_help=False)
    saving.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="save the artifacts' file parts into DIR (created if missing; existing files are kept)",
    )
    return saving


def add_parsers(sub: Any) -> None:
    """Add ``card``, ``send`` and ``tasks`` to the ``skillwire`` subparsers ``sub``."""
    common, saving = _common(), _saving()
    sub.add_parser("card", parents=[common], help="show an agent's card")

    send = sub.add_parser("send", parents=[common, saving], help="send a message to an agent")
    send.add_argument("text", nargs="?", default=None, help="the message text")
    send.add_argument(
        "--skill", default=None, metavar="ID", help="the skill to call (message.metadata.skillId)"
    )
    send.add_argument(
        "--data",
        type=_data,
        action="append",
        default=[],
        metavar="JSON|@FILE",
        help="add a data part: JSON text or @file (repeatable: one part each)",
    )
    send.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH",
        help="attach a file as a part (repeatable)",
    )
    send.add_argument(
        "--max-file-size",
        type=_size,
        default=MAX_FILE_BYTES,
        metavar="SIZE",
        help="refuse a --file larger than this (bytes, or with K, M, G; default 10M)",
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
    get = tasks_sub.add_parser("get", parents=[common, saving], help="show a task (GetTask)")
    get.add_argument("id", help="the task id")
    get.add_argument(
        "--history", type=int, default=None, metavar="N", help="include up to N history messages"
    )
    cancel = tasks_sub.add_parser("cancel", parents=[common], help="cancel a task (CancelTask)")
    cancel.add_argument("id", help="the task id")
    watch = tasks_sub.add_parser(
        "watch", parents=[common, saving], help="follow a task's events until it ends or waits for input"
    )
    watch.add_argument("id", help="the task id")


# -- running -------------------------------------------------------------------------------------------


class _Call:
    """What is being done, for the error line, and where its output goes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.url: str = args.url
        self.operation = f"reading the agent card at {self.url}"
        self.screen = Screen(args)
        self.files: list[m.Part] = []
        #: The task being followed, and its last state seen (for the line printed on Ctrl-C).
        self.task_id = ""
        self.state: TaskState | None = None

    def _retries(self) -> int | RetryPolicy:
        from skillwire.client.retry import RetryPolicy

        given: int | None = self.args.retries
        if given is not None:
            return max(given, 0)
        if getattr(self.args, "tasks_command", None) == "watch":
            return RetryPolicy(retries=12, base=0.25, cap=2.0)  # about 15 s of an agent that restarts
        return 3

    async def connect(self) -> Client:
        from skillwire.client import Client

        return await Client.connect(
            self.url,
            bindings=(self.args.binding,) if self.args.binding else None,
            headers=dict(self.args.header),
            credentials=dict(self.args.credential) or None,
            allowed_origins=self.args.allow_origin,
            retries=self._retries(),
            card_keys=self.args.card_keys,
            **({} if self.args.timeout is None else {"timeout": self.args.timeout}),
        )


def run(args: argparse.Namespace) -> int:
    """Run the client command in ``args``; return the exit code."""
    # Imported here, not at the top: `skillwire serve` builds this parser too and should not load the client.
    import httpx

    from skillwire.client.errors import ClientError, UntrustedOriginError

    handlers: dict[str, Callable[[_Call, Client], Coroutine[Any, Any, int]]] = {
        "card": _card,
        "send": _send,
        "list": _list,
        "get": _get,
        "cancel": _cancel,
        "watch": _watch,
    }
    name = args.tasks_command if args.command == "tasks" else args.command
    if args.command == "send" and args.text is None and not args.data and not args.file:
        _usage(args, "send needs TEXT, --data or --file")
    call = _Call(args)
    try:
        check_out_dir(args)
        if args.command == "send":
            call.files = [file_part(path, args.max_file_size) for path in args.file]
    except LocalError as exc:
        say_error(str(exc))
        return EXIT_USAGE
    import asyncio

    try:
        return asyncio.run(_with_client(call, handlers[name]))
    except UntrustedOriginError as exc:
        if args.debug:
            say_traceback()
        say_error(f"{exc.explanation}. If you trust it: --allow-origin {exc.origin}")
        return EXIT_ERROR
    except (A2AError, ClientError, CardSignatureError, httpx.HTTPError, LocalError) as exc:
        if args.debug:
            say_traceback()
        what = "" if isinstance(exc, LocalError) else f"{call.operation} failed: "
        say_error(f"{what}{_describe(exc)}")
        return EXIT_REFUSED if isinstance(exc, A2AError) else EXIT_ERROR
    except KeyboardInterrupt:
        call.screen.interrupted()
        going_on = ""
        if call.task_id and call.state not in TERMINAL_STATES:
            going_on = f"; the task goes on: `skillwire tasks watch {call.url} {call.task_id}`"
        say_error(f"interrupted{going_on}")
        return 130


def _usage(args: argparse.Namespace, message: str) -> NoReturn:
    error: Callable[[str], NoReturn] = args.usage_error
    error(message)


async def _with_client(call: _Call, handler: Callable[[_Call, Client], Coroutine[Any, Any, int]]) -> int:
    try:
        async with await call.connect() as client:
            return await handler(call, client)
    finally:
        call.screen.status.stop()


def _describe(exc: BaseException) -> str:
    """What went wrong, for :func:`say_error` (which puts it on one line)."""
    return f"{exc.message} ({exc.reason})" if isinstance(exc, A2AError) else str(exc) or type(exc).__name__


def _hint(call: _Call, task_id: str, state: TaskState) -> None:
    if call.args.json:
        return
    if state in INTERRUPTED_STATES:
        call.screen.line(
            f"The task is waiting: answer with `skillwire send {call.url} TEXT --task {task_id}`"
        )
    elif state not in TERMINAL_STATES:
        call.screen.line(
            f"The task is still running: follow it with `skillwire tasks watch {call.url} {task_id}`"
        )


def _exit_for(state: TaskState) -> int:
    return EXIT_FAILED if state in _FAILED else EXIT_OK


# -- the commands --------------------------------------------------------------------------------------


async def _card(call: _Call, client: Client) -> int:
    if call.args.json:
        json_line(client.card)
    else:
        call.screen.card(client.card)
    return EXIT_OK


def _message(call: _Call) -> m.Message:
    args = call.args
    parts: list[m.Part] = []
    if args.text is not None:
        parts.append(m.Part(text=args.text))
    parts.extend(m.Part(data=data) for data in args.data)
    parts.extend(call.files)
    return m.Message(
        message_id=str(uuid.uuid4()),
        context_id=args.context,
        task_id=args.task,
        role=m.Role.USER,
        parts=parts,
        metadata={"skillId": args.skill} if args.skill else None,
    )


#: How a message is delivered and shown: ``events`` streams and prints every event (``--stream``); ``quiet``
#: streams to drive the status line and prints the final task, as ``blocking`` (plain SendMessage) does.
_Mode = Literal["events", "quiet", "blocking"]


async def _send(call: _Call, client: Client) -> int:
    if call.args.stream:
        mode: _Mode = "events"
    elif call.screen.live and client.card.capabilities.streaming:
        mode = "quiet"
    else:
        mode = "blocking"
    result = await _deliver(call, client, _message(call), mode)
    return await _conclude(call, client, result, mode)


async def _deliver(
    call: _Call, client: Client, message: m.Message, mode: _Mode, *, answer: bool = False
) -> m.Task | m.Message | None:
    """Send ``message``, print what the mode shows, and return the task as it stands at the end (or the
    agent's Message; None when a stream ended without any event). An ``answer`` typed at the prompt does not
    show again the task it answers, which the stream opens with."""
    if mode != "blocking":
        events = client.stream(message)
        return await _follow(call, events, "SendStreamingMessage", quiet=mode == "quiet", opened=answer)
    call.operation = "SendMessage"
    call.screen.status.show("sending")
    result = await client.send(message)
    call.screen.status.clear()
    if call.args.json:
        message_result = result if isinstance(result, m.Message) else None
        task_result = result if isinstance(result, m.Task) else None
        json_line(m.SendMessageResponse(task=task_result, message=message_result))
    if isinstance(result, m.Message):
        if not call.args.json:
            call.screen.line(parts_text(result.parts))
        return result
    call.task_id, call.state = result.id, result.status.state
    call.screen.task(result)
    return result


async def _conclude(call: _Call, client: Client, result: m.Task | m.Message | None, mode: _Mode) -> int:
    """The exit code for ``result``; on a terminal, the agent's questions are answered at a prompt first
    (each answer sent and shown as ``mode`` says)."""
    while True:
        if result is None:
            say_error(f"{call.operation} ended without any event")
            return EXIT_ERROR
        if isinstance(result, m.Message):
            return EXIT_OK
        state = result.status.state
        if state is TaskState.INPUT_REQUIRED and call.screen.interactive:
            answer = await call.screen.prompt()
            if answer:
                message = m.Message(
                    message_id=str(uuid.uuid4()),
                    context_id=result.context_id,
                    task_id=result.id,
                    role=m.Role.USER,
                    parts=[m.Part(text=answer)],
                )
                result = await _deliver(call, client, message, mode, answer=True)
                continue
        _hint(call, result.id, state)
        return _exit_for(state)


class _Tracker:
    """The task as a stream has shown it so far, merged the way the server merges it."""

    def __init__(self) -> None:
        self.task: m.Task | None = None
        self.message: m.Message | None = None

    def apply(self, event: m.StreamResponse) -> None:
        replace = msgspec.structs.replace
        if event.task is not None:
            self.task = replace(event.task, artifacts=list(event.task.artifacts))
        elif event.message is not None:
            self.message = event.message
        elif event.status_update is not None:
            update = event.status_update
            if self.task is None:
                self.task = m.Task(id=update.task_id, context_id=update.context_id, status=update.status)
            else:
                self.task = replace(self.task, status=update.status)
        elif event.artifact_update is not None:
            chunk = event.artifact_update
            if self.task is None:
                working = m.TaskStatus(state=TaskState.WORKING)
                self.task = m.Task(id=chunk.task_id, context_id=chunk.context_id, status=working)
            artifacts = self.task.artifacts
            for i, existing in enumerate(artifacts):
                if existing.artifact_id == chunk.artifact.artifact_id:
                    parts = [*existing.parts, *chunk.artifact.parts] if chunk.append else chunk.artifact.parts
                    artifacts[i] = replace(chunk.artifact, parts=parts)
                    break
            else:
                artifacts.append(chunk.artifact)


async def _follow(
    call: _Call,
    events: AsyncIterator[m.StreamResponse],
    operation: str,
    *,
    quiet: bool = False,
    opened: bool = False,
) -> m.Task | m.Message | None:
    """Follow a stream: print each event (``quiet``: only the final task; ``opened``: not the Task the stream
    opens with, already on screen), keep the status line up to date, and return the task as the stream left
    it (or the agent's Message)."""
    call.operation = operation
    screen, tracker = call.screen, _Tracker()
    screen.status.show("waiting for the agent")
    async for event in events:
        tracker.apply(event)
        if call.args.json:
            json_line(event)
        if tracker.task is not None:
            call.task_id, call.state = tracker.task.id, tracker.task.status.state
        if event.message is not None:
            if not call.args.json:
                screen.line(parts_text(event.message.parts))
            continue
        if not quiet and not (opened and event.task is not None):
            screen.event(event)
        screen.progress(event, tracker.task)
    screen.status.clear()
    if tracker.task is None:
        return tracker.message
    if quiet:
        screen.task(tracker.task)
    return tracker.task


async def _list(call: _Call, client: Client) -> int:
    call.operation = "ListTasks"
    args = call.args
    status = TaskState[args.status.upper().replace("-", "_")] if args.status else None
    page = await client.list_tasks(
        context_id=args.context, status=status, page_size=args.page_size, page_token=args.page_token
    )
    if args.json:
        json_line(page)
    else:
        call.screen.page(page)
    return EXIT_OK


async def _get(call: _Call, client: Client) -> int:
    call.operation = "GetTask"
    task = await client.get_task(call.args.id, history_length=call.args.history)
    if call.args.json:
        json_line(task)
    call.screen.task(task, history=True)
    return EXIT_OK


async def _cancel(call: _Call, client: Client) -> int:
    call.operation = "CancelTask"
    task = await client.cancel_task(call.args.id)
    if call.args.json:
        json_line(task)
    else:
        call.screen.task(task)
    return EXIT_OK


async def _watch(call: _Call, client: Client) -> int:
    call.task_id = call.args.id
    try:
        events = _until_settled(client.subscribe(call.args.id))
        result = await _follow(call, events, "SubscribeToTask")
    except UnsupportedOperationError:
        # SubscribeToTask refuses a task that has already ended: show its final state instead.
        call.operation = "GetTask"
        task = await client.get_task(call.args.id)
        if task.status.state not in TERMINAL_STATES:
            raise
        if call.args.json:
            json_line(m.StreamResponse(task=task))
        call.screen.task(task)
        return _exit_for(task.status.state)
    return await _conclude(call, client, result, "events")


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
