"""The TaskStore protocol and what every store shares.

A store keeps each task, keyed by ``(tenant, id)``, with a version number that grows with every write.

Writes are incremental. A task is kept in pieces: a *head* (the task without its history and artifacts), one
piece per history message, and per artifact one piece for the artifact as first written plus one per chunk
appended to it. A :class:`TaskWrite` carries only the pieces that changed since the version it was made from
(``base``), so a long conversation or a long stream costs each write what it adds, not the whole task again.

``commit(write)`` applies a write atomically if, and only if, the stored version is ``write.base`` (0: the
task must not exist yet); otherwise it raises :class:`~skillwire.errors.ConcurrentUpdateError`, and nothing
changes. A write the store cannot make durable (disk full, I/O error, read-only file, database locked past
its timeout) raises :class:`~skillwire.errors.StoreError`, and nothing of it is stored. Callers show a state
to anyone only after ``commit`` returned (docs/durability.md).

Every task keeps its *event log*: the events it produced (its creation, each status change, each artifact
update), each tagged with the task's generation after it (A2A 1.1: 1 at creation, one more per event). A
write carries the events it covers, in rows of at most :data:`LOG_ROW_EVENTS` events
(:class:`LogRow`), stored in the same transaction as the task; ``events(task_id, after=N)`` reads them back
from generation N+1 on. A stream that fell behind, or a client that resumes from the last generation it saw,
is caught up from here exactly. A log may not hold a task's first events (a task stored before logs
existed): a reader that finds its next generation missing gets the task's snapshot instead.

``list_tasks`` pages newest first by status timestamp with an opaque cursor, within a byte budget.
``unfinished`` pages through the SUBMITTED and WORKING tasks, which recovery at start-up reads in batches:
such a task was left by a process that stopped, and is either resumed (work delegated elsewhere can be
followed again) or failed with a reason. Tasks waiting for input stay as they are: the client can still
answer them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import stat
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

from skillwire.errors import InvalidParamsError
from skillwire.protocol.models import Artifact, Message, Part, StreamResponse, Task, generation_of
from skillwire.protocol.states import TaskState
from skillwire.stores.idempotency import Claim
from skillwire.stores.push import Outgoing, PushConfigRecord

__all__ = [
    "LOG_ROW_BYTES",
    "LOG_ROW_EVENTS",
    "ArtifactPiece",
    "Layout",
    "LogRow",
    "StoredTask",
    "TaskPage",
    "TaskQuery",
    "TaskStore",
    "TaskWrite",
    "log_size",
    "make_folder",
    "private_file",
    "private_folder",
    "sqlite_path",
    "task_row",
    "task_size",
    "write_task",
]

UNFINISHED_STATES = (TaskState.SUBMITTED, TaskState.WORKING)


class Layout(msgspec.Struct, frozen=True):
    """What a store holds of one task, piece by piece: enough to write only what changes next."""

    #: How many history messages are stored, and their encoded size.
    messages: int = 0
    message_bytes: int = 0
    #: Per artifact (by index): how many parts are stored, and their encoded size.
    parts: tuple[int, ...] = ()
    artifact_bytes: tuple[int, ...] = ()
    head_bytes: int = 0

    @property
    def size(self) -> int:
        """The task's encoded size in bytes, as stored."""
        return self.head_bytes + self.message_bytes + sum(self.artifact_bytes)


class StoredTask(msgspec.Struct, frozen=True):
    task: Task
    version: int
    #: The stored pieces, when the whole task was read (a read limited by historyLength has none).
    layout: Layout | None = None


class ArtifactPiece(msgspec.Struct, frozen=True):
    """Artifact ``index`` from its part ``offset`` on. At offset 0 ``body`` is the whole artifact, which
    replaces any stored one; further on it is the JSON array of the parts appended from there."""

    index: int
    offset: int
    body: bytes


_encode = msgspec.json.Encoder().encode

#: Events in one row of a task's event log at most, and their encoded size (unless one event is larger), so
#: that a reader catching up decodes a bounded page.
LOG_ROW_EVENTS = 256
LOG_ROW_BYTES = 1024 * 1024


class LogRow(msgspec.Struct, frozen=True, gc=False):
    """Consecutive events of a task's log, generations ``first`` to ``last``: ``body`` is their JSON array."""

    first: int
    last: int
    body: bytes


def log_rows(events: Sequence[StreamResponse], max_bytes: int | None = None) -> tuple[LogRow, ...]:
    """The log rows of ``events`` (in order, each with its generation): LOG_ROW_EVENTS events at most per
    row, and no more than LOG_ROW_BYTES of them (but one, however large). With ``max_bytes`` (the store's
    budget for one task's log), only the newest events that fit in it are encoded at all: the store would
    drop the others, and a burst of large events costs no more memory than the budget."""
    return _rows(_encoded(events, max_bytes))


def _rows(encoded: list[tuple[StreamResponse, bytes]]) -> tuple[LogRow, ...]:
    """Encoded events (oldest first) cut into log rows."""
    rows: list[LogRow] = []
    chunk: list[bytes] = []
    size = first = last = 0
    for event, body in encoded:
        generation = generation_of(event)
        if chunk and (len(chunk) >= LOG_ROW_EVENTS or size + len(body) > LOG_ROW_BYTES):
            rows.append(LogRow(first, last, b"[" + b",".join(chunk) + b"]"))
            chunk, size = [], 0
        if not chunk:
            first = generation
        chunk.append(body)
        size += len(body)
        last = generation
    if chunk:
        rows.append(LogRow(first, last, b"[" + b",".join(chunk) + b"]"))
    return tuple(rows)


def log_keeps(sizes: Sequence[int], max_bytes: int) -> int:
    """How many of a log's newest rows to keep, given its rows' sizes oldest first, once it passed
    ``max_bytes``: as many as fit in three quarters of it (so a trim is not needed again at once), and the
    newest one however large."""
    budget, kept = max_bytes * 3 // 4, 0
    for size in reversed(sizes):
        if kept and budget < size:
            break
        budget -= size
        kept += 1
    return kept


def trim_log(rows: list[LogRow], max_bytes: int) -> list[LogRow]:
    """The newest of ``rows`` (oldest first) that a log of at most ``max_bytes`` keeps (see log_keeps)."""
    kept = log_keeps([len(r.body) for r in rows], max_bytes)
    return rows[len(rows) - kept :]


def _encoded(events: Sequence[StreamResponse], max_bytes: int | None) -> list[tuple[StreamResponse, bytes]]:
    """``events`` with their encodings, oldest first: all of them, or the newest that fit in ``max_bytes``
    (and the newest one, however large)."""
    if max_bytes is None:
        return [(event, _encode(event)) for event in events]
    out: list[tuple[StreamResponse, bytes]] = []
    spent = 0
    for event in reversed(events):
        body = _encode(event)
        if out and spent + len(body) > max_bytes:
            break
        spent += len(body)
        out.append((event, body))
    out.reverse()
    return out


_decode_log = msgspec.json.Decoder(list[StreamResponse]).decode


def read_log(bodies: Iterable[bytes], after: int, limit: int) -> list[StreamResponse]:
    """The events after generation ``after`` in these log rows (oldest first): ``limit`` at most, and no
    more rows than LOG_ROW_BYTES of them once one has been read (so a page stays small)."""
    out: list[StreamResponse] = []
    spent = 0
    for body in bodies:
        if out and spent + len(body) > LOG_ROW_BYTES:
            break
        spent += len(body)
        for event in _decode_log(body):
            if generation_of(event) > after:
                out.append(event)
                if len(out) >= limit:
                    return out
    return out


class TaskWrite(msgspec.Struct, frozen=True, kw_only=True):
    """One atomic change to a task, already encoded: build it with :func:`write_task`."""

    tenant: str
    #: The task as this write leaves it. It may be the writer's live object, which goes on changing: a store
    #: reads only the fields below, fixed when the write was made.
    task: Task
    task_id: str
    context_id: str
    state: TaskState
    updated_us: int
    artifact_count: int
    #: The version this write gives the task, and the stored version it was made from (0: a new task).
    version: int
    base: int
    head: bytes
    #: ``task.history[first_message:]``, encoded: the messages this write adds.
    first_message: int
    messages: tuple[bytes, ...]
    artifacts: tuple[ArtifactPiece, ...]
    #: The stored pieces once this write is committed.
    layout: Layout
    #: Whether everything stored for the task is replaced (a whole-task write over an existing task).
    rewrite: bool = False
    #: Push-notification deliveries of the events this write covers, stored with it in one transaction (a
    #: store without push support refuses a write that has any: see :mod:`skillwire.stores.push`).
    deliveries: tuple[Outgoing, ...] = ()
    #: Push configs set with this write (a config given inline in the SendMessage that creates the task),
    #: stored in the same transaction, before its deliveries.
    configs: tuple[PushConfigRecord, ...] = ()
    #: The events this write covers, for the task's event log (generations in order, none skipped).
    log: tuple[LogRow, ...] = ()
    #: The JSON of each event the log keeps, oldest first: the newest of the write's events (all of them
    #: unless the log's budget dropped the oldest), when asked for. The writer publishes them as they are.
    logged: tuple[bytes, ...] = ()
    #: An idempotency claim made with this write (see :mod:`skillwire.stores.idempotency`): the write
    #: fails with KeyClaimedError, storing nothing, when its key is claimed already.
    claim: Claim | None = None


def write_task(
    task: Task,
    *,
    version: int,
    base: int = 0,
    tenant: str = "",
    stored: Layout | None = None,
    replaced: Collection[int] = (),
    events: Sequence[StreamResponse] = (),
    max_log_bytes: int | None = None,
    keep_logged: bool = True,
) -> TaskWrite:
    """The write that turns what is stored (``stored``, at version ``base``) into ``task`` at ``version``.

    ``replaced`` names the artifacts (by index) that were replaced whole since then rather than appended to.
    ``events`` are the events the write covers, for the task's event log (the newest that fit in
    ``max_log_bytes``, the store's budget for it, when given); with ``keep_logged`` their JSON is kept in
    ``logged`` too, for a publisher whose events someone reads.
    Without ``stored`` the whole task is written. Raises ``TypeError``/``msgspec.EncodeError`` if the task
    holds a value that is not JSON: nothing reaches the store then.
    """
    if version <= base:
        raise ValueError(f"a write must raise the version (base {base}, version {version})")
    rewrite = stored is None and base > 0
    old = stored or Layout()
    head = _encode(msgspec.structs.replace(task, history=[], artifacts=[]))
    history = task.history
    first = old.messages if old.messages <= len(history) else 0
    messages = tuple(_encode(m) for m in history[first:])
    message_bytes = (old.message_bytes if first else 0) + sum(len(m) for m in messages)
    pieces: list[ArtifactPiece] = []
    parts: list[int] = []
    sizes: list[int] = []
    for i, artifact in enumerate(task.artifacts):
        kept = old.parts[i] if i < len(old.parts) and i not in replaced else 0
        if 0 < kept <= len(artifact.parts):
            size = old.artifact_bytes[i]
            if kept < len(artifact.parts):
                body = _encode(artifact.parts[kept:])
                pieces.append(ArtifactPiece(i, kept, body))
                size += len(body)
        else:
            body = _encode(artifact)
            pieces.append(ArtifactPiece(i, 0, body))
            size = len(body)
        parts.append(len(artifact.parts))
        sizes.append(size)
    layout = Layout(len(history), message_bytes, tuple(parts), tuple(sizes), len(head))
    encoded = _encoded(events, max_log_bytes) if events else []
    return TaskWrite(
        tenant=tenant,
        task=task,
        task_id=task.id,
        context_id=task.context_id,
        state=task.status.state,
        updated_us=timestamp_us(task),
        artifact_count=len(task.artifacts),
        version=version,
        base=base,
        head=head,
        first_message=first,
        messages=messages,
        artifacts=tuple(pieces),
        layout=layout,
        rewrite=rewrite,
        log=_rows(encoded),
        logged=tuple([body for _, body in encoded]) if keep_logged else (),
    )


def task_row(w: TaskWrite) -> tuple[str, str, str, str, int, int, bytes, int, int]:
    """What every store's task row holds of a write, in its column order: tenant, id, context, state,
    updated_us, version, head, message count, size."""
    layout = w.layout
    return (
        w.tenant,
        w.task_id,
        w.context_id,
        w.state.value,
        w.updated_us,
        w.version,
        w.head,
        layout.messages,
        layout.size,
    )


def task_size(w: TaskWrite) -> int:
    """The bytes of task data a write stores: its head, messages and artifact pieces (its log apart)."""
    return len(w.head) + sum(len(m) for m in w.messages) + sum(len(p.body) for p in w.artifacts)


def log_size(w: TaskWrite) -> int:
    """The bytes of the event-log rows a write adds."""
    return sum(len(r.body) for r in w.log)


# -- reading pieces back ------------------------------------------------------------------------------------

_decode_head = msgspec.json.Decoder(Task).decode
_decode_message = msgspec.json.Decoder(Message).decode
_decode_artifact = msgspec.json.Decoder(Artifact).decode
_decode_parts = msgspec.json.Decoder(list[Part]).decode


def assemble(
    head: bytes,
    messages: Sequence[bytes],
    artifacts: Sequence[Sequence[bytes]] | None,
) -> Task:
    """A task from its pieces: the head, the messages (oldest first) and, per artifact, its pieces in offset
    order (``None``: the artifacts were not read)."""
    task = _decode_head(head)
    task.history = [_decode_message(m) for m in messages]
    if artifacts is not None:
        out = []
        for chunks in artifacts:
            artifact = _decode_artifact(chunks[0])
            for chunk in chunks[1:]:
                artifact.parts.extend(_decode_parts(chunk))
            out.append(artifact)
        task.artifacts = out
    return task


def layout_of(
    task: Task, head: bytes, messages: Sequence[bytes], artifacts: Sequence[Sequence[bytes]]
) -> Layout:
    """The layout of ``task``, read whole from these pieces."""
    return Layout(
        len(messages),
        sum(len(m) for m in messages),
        tuple(len(a.parts) for a in task.artifacts),
        tuple(sum(len(c) for c in chunks) for chunks in artifacts),
        len(head),
    )


def history_start(count: int, history_length: int | None) -> int:
    """The index of the first message a view of ``history_length`` messages shows."""
    if history_length is None or history_length >= count:
        return 0
    return count - max(history_length, 0)


class TaskQuery(msgspec.Struct, frozen=True):
    tenant: str = ""
    context_id: str = ""
    state: TaskState | None = None
    #: Only tasks whose status timestamp is at or after this instant.
    updated_after: datetime | None = None
    page_size: int = 50
    page_token: str = ""
    #: The last N messages of each task's history (``None``: all of it).
    history_length: int | None = None
    include_artifacts: bool = False
    #: Bytes of task pieces one page may hold; a page ends early (with a token) rather than pass it. A page
    #: always holds at least one task, so a task larger than the budget is still listed, alone.
    max_bytes: int = 4 * 1024 * 1024


class TaskPage(msgspec.Struct, frozen=True):
    tasks: list[Task] = msgspec.field(default_factory=list)
    total_size: int = 0
    next_page_token: str = ""


@runtime_checkable
class TaskStore(Protocol):
    """Where tasks are kept. Implementations must be safe to call from one event loop concurrently, and must
    not block it (reads and writes of a file or a database run elsewhere)."""

    url: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def commit(self, write: TaskWrite) -> None:
        """Apply ``write`` if the stored version is ``write.base``; ConcurrentUpdateError if it is not,
        StoreError if it cannot be made durable. Either way, on error nothing of it is stored."""
        ...

    async def get(
        self, task_id: str, *, tenant: str = "", history_length: int | None = None
    ) -> StoredTask | None:
        """The task, with its last ``history_length`` messages (``None``: all, and its layout)."""
        ...

    async def list_tasks(self, query: TaskQuery) -> TaskPage: ...

    async def unfinished(
        self, cursor: str = "", limit: int = 500
    ) -> tuple[list[tuple[str, StoredTask]], str]:
        """A batch of SUBMITTED or WORKING tasks (whole, with their tenant) and the cursor of the next
        batch (``""`` after the last)."""
        ...

    async def events(
        self, task_id: str, *, tenant: str = "", after: int = 0, limit: int = LOG_ROW_EVENTS
    ) -> list[StreamResponse] | None:
        """The task's logged events after generation ``after``, oldest first: ``limit`` at most, and fewer
        when they are large (see :func:`read_log`). None: no such task."""
        ...


# -- helpers shared by the implementations ---------------------------------------------------------------


def timestamp_us(task: Task) -> int:
    ts = task.status.timestamp
    if ts is None:
        return 0
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return int(ts.timestamp() * 1_000_000)


def instant_us(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1_000_000)


def encode_cursor(updated_us: int, tie: str, total: int) -> str:
    """A page token: where the next page starts, and the total counted on the first page (so later pages
    need not count again)."""
    return base64.urlsafe_b64encode(f"{updated_us}:{tie}:{total}".encode()).decode().rstrip("=")


_INT64_MAX = 2**63 - 1


def bad_cursor() -> InvalidParamsError:
    return InvalidParamsError(
        "Invalid pageToken: pass back a nextPageToken from an earlier ListTasks response",
        field_violations=[("params.pageToken", "not a token issued by this server")],
    )


def cursor_int(text: str) -> int:
    """A non-negative int64 written in ASCII digits, or the invalid-token error."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) > _INT64_MAX:
        raise bad_cursor()
    return int(text)


def decode_cursor(token: str) -> tuple[int, str, int]:
    """(status timestamp in microseconds, the store's tie-breaker, the total) from a page token."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad_cursor() from None
    us, sep, rest = raw.partition(":")
    tie, sep2, total = rest.rpartition(":")
    if not sep or not sep2:
        raise bad_cursor()
    return cursor_int(us), tie, cursor_int(total)


#: The folder of the default stores (``sqlite:///.skillwire/{agent}.db``) and of their keys.
PRIVATE_FOLDER = ".skillwire"
_GITIGNORE = "# made by skillwire: task stores and private keys, not for version control\n*\n"


def make_folder(folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` (and its parents) for a store's file or a key. A ``.skillwire`` folder (where the
    default stores and the push signing key live) gets a ``.gitignore`` of its own that ignores everything
    in it, so that a private key never shows in ``git status``."""
    path = Path(folder)
    private_folder(str(path))  # made 0700 if missing; skillwire's own folder made private
    if path.name == PRIVATE_FOLDER and not (path / ".gitignore").exists():
        with contextlib.suppress(OSError):  # a read-only folder: the store fails there on its own terms
            (path / ".gitignore").write_text(_GITIGNORE, encoding="utf-8")


def sqlite_path(url: str) -> tuple[str, str]:
    """The file path and the query of a ``sqlite://`` URL (``sqlite:///rel.db`` -> ``rel.db``,
    ``sqlite:////abs.db`` -> ``/abs.db``)."""
    path, _, query = url[len("sqlite://") :].partition("?")
    return path[1:] if path.startswith("/") else path, query


#: The folder skillwire keeps its files in by default (the SQLite store, its key): made private when found.
OWN_FOLDER = PRIVATE_FOLDER


def private_folder(folder: str) -> None:
    """Make ``folder`` if it is missing, readable by its owner only (0700); skillwire's own folder
    (:data:`OWN_FOLDER`) is made private if it was not. Another existing folder is left as it is."""
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return
    if os.path.basename(os.path.normpath(folder)) == OWN_FOLDER:
        _only_owner(folder)


def private_file(path: str) -> None:
    """Make ``path`` an empty file readable by its owner only (0600) if it is missing, else take away what
    others may do with it. A SQLite database's ``-wal`` and ``-shm`` files are made with the mode of the
    database, so a database made this way keeps them private too."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        _only_owner(path)


def _only_owner(path: str) -> None:
    """Take the group's and the others' permissions away from ``path``."""
    current = stat.S_IMODE(os.stat(path).st_mode)
    if current & 0o077:
        with contextlib.suppress(PermissionError):  # not ours to change: it stays as it is
            os.chmod(path, current & 0o700)


#: The default task store: a SQLite file named after the agent, in ``.skillwire/`` under the working
#: directory (``{agent}`` is the agent's slug: ``Agent("Greeter")`` keeps its tasks in
#: ``.skillwire/greeter.db``), so two agents started in one folder never share their tasks. Passing this
#: very string as ``store=`` means that default; :func:`default_store` spells it out for one agent.
DEFAULT_STORE = "sqlite:///.skillwire/{agent}.db"


def default_store(name: str) -> str:
    """The default store URL of the agent called ``name``: ``default_store("Greeter")`` is
    ``"sqlite:///.skillwire/greeter.db"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"
    return DEFAULT_STORE.format(agent=slug)


def __getattr__(name: str) -> object:
    # open_store moved to skillwire.stores.schemes (its table names the stores, so this protocol module
    # imports none); the old path works, with a DeprecationWarning, for one release.
    if name == "open_store":
        import importlib
        import warnings

        schemes = importlib.import_module(
            "skillwire.stores.schemes"
        )  # by name: the table's module imports this one
        warnings.warn(
            "skillwire.stores.base.open_store moved: import open_store from skillwire.stores.schemes"
            " (or skillwire.stores; the old path goes in the release after next)",
            DeprecationWarning,
            stacklevel=2,
        )
        return schemes.open_store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
