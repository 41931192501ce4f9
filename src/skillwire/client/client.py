"""The A2A client: discover an agent's card, pick a binding, call the eleven operations.

::

    async with await Client.connect("http://127.0.0.1:8000") as client:
        task = await client.send("hello")                 # Task or Message
        async for event in client.stream("count to 3"):   # StreamResponse events, resumed if the line drops
            ...

Every binding behaves the same: results are the v1.0 Structs of :mod:`skillwire.protocol.models`, protocol
errors are the :mod:`skillwire.errors` classes. A task that ends FAILED, REJECTED or CANCELED is a result,
not an exception, unless ``raise_on_failure=True`` asks for :class:`TaskFailedError`.

Operations that are safe to repeat (reads, cancel, subscribe, push-config get/list/delete, the card) are
retried on connection failures and HTTP 429/503 as the :class:`RetryPolicy` says. Every SendMessage,
SendStreamingMessage and push-config create or delete carries an ``Idempotency-Key`` of its own, the same on
each of its retries; they are retried only with an agent whose card declares the idempotency-keys extension
(the agent then does the work once, and answers a retry with the first call's result): with any other agent
they are never retried. A stream whose connection breaks is resumed through SubscribeToTask without
repeating events (:mod:`skillwire.client.progress`), and with idempotency keys even before its first event.

With an agent whose card declares the generations extension (A2A 1.1 generations for 1.0 clients, as
skillwire's agents do), the client activates it: tasks and events carry their generation
(``task.generation``), a stream resumes after the last generation it yielded and gets exactly what it
missed, duplicates are dropped, a gap is closed by resuming from the cursor, and :meth:`Client.wait`
long-polls (GetTask with ``currentGeneration``) instead of polling.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import mimetypes
import os
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, TypedDict, TypeVar, Unpack

import httpx
import msgspec

from skillwire.client.auth import CardAuth, CredentialsProvider, Secret, as_provider, credential_headers
from skillwire.client.bodies import IDENTITY, read_body
from skillwire.client.card_trust import CardKeys, CardTrust
from skillwire.client.errors import (
    AgentConnectionError,
    HTTPStatusError,
    InvalidResponseError,
    NoCompatibleInterfaceError,
    TaskFailedError,
)
from skillwire.client.lazy_tls import default_http
from skillwire.client.origins import OriginPolicy, agent_url
from skillwire.client.progress import StreamProgress
from skillwire.client.retry import RetryPolicy, parse_retry_after
from skillwire.client.transport import (
    A2A_VERSION,
    IDEMPOTENCY_KEY,
    JsonRpcTransport,
    RestTransport,
    Transport,
)
from skillwire.errors import A2AError, StreamDroppedError, UnsupportedOperationError
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState
from skillwire.wire.generations import GENERATIONS_URI, IDEMPOTENCY_URI

__all__ = [
    "CARD_PATH",
    "DEFAULT_BINDINGS",
    "DEFAULT_TIMEOUT",
    "FAILED_STATES",
    "PROTOCOL_VERSIONS",
    "Answerer",
    "Client",
    "FileInput",
    "select_interface",
]

CARD_PATH = "/.well-known/agent-card.json"
#: Streams get keep-alive comments every 15 s from skillwire agents, well inside the read timeout.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0, read=60.0)
#: End states that ``raise_on_failure`` turns into TaskFailedError.
FAILED_STATES = frozenset({TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELED})

T = TypeVar("T")
_O = Operation

#: What :meth:`Client.converse` asks for each answer: the waiting task in, text or a Message (or None to
#: stop) out, sync or async.
Answerer = Callable[[m.Task], "str | m.Message | Awaitable[str | m.Message | None] | None"]

#: The bindings tried, in order, when the caller names none. gRPC is left out when its extra is missing.
DEFAULT_BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
#: The protocol versions this client speaks, preferred first.
PROTOCOL_VERSIONS = ("1.0", "0.3")


def _major_minor(version: str) -> str:
    major, _, rest = version.strip().partition(".")
    return f"{major}.{rest.partition('.')[0]}"  # Major.Minor; a patch part is ignored


def select_interface(
    card: m.AgentCard, bindings: Sequence[str], versions: Sequence[str] = PROTOCOL_VERSIONS
) -> m.AgentInterface:
    """The interface to use: protocol versions in ``versions`` order (1.0 before 0.3), and within a
    version the first of ``bindings`` the card offers, taking the card's earliest interface for that
    binding (the card lists its preferred ones first)."""
    for version in versions:
        for binding in bindings:
            for interface in card.supported_interfaces:
                if (
                    interface.protocol_binding.upper() == binding.upper()
                    and _major_minor(interface.protocol_version) == version
                ):
                    return interface
    offered = ", ".join(f"{i.protocol_binding} {i.protocol_version}" for i in card.supported_interfaces)
    raise NoCompatibleInterfaceError(
        f"the card offers {offered or 'no interfaces'}; wanted {list(bindings)} at {' or '.join(versions)}"
    )


def _grpc_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("grpc", "a2a", "google.rpc"))


async def _transport(
    interface: m.AgentInterface,
    card: m.AgentCard,
    http: httpx.AsyncClient,
    timeout: httpx.Timeout,  # noqa: ASYNC109 - the transport's per-request timeouts
    headers: dict[str, str],
    credentials: CredentialsProvider | None,
    follow_redirects: bool | None,
    grpc_credentials: Any = None,
) -> Transport:
    """The transport for ``interface``; each binding module is imported only when it is used."""
    binding = interface.protocol_binding.upper()
    version = _major_minor(interface.protocol_version)
    if binding == "GRPC":
        if version != "1.0":
            raise NoCompatibleInterfaceError(
                f"gRPC at protocol {interface.protocol_version} is not supported"
            )
        from skillwire.client.grpc import GrpcTransport

        if credentials is not None:
            headers = {**headers, **await credential_headers(card, credentials)}
        return GrpcTransport(
            interface.url, timeout=timeout.read, headers=headers, credentials=grpc_credentials
        )
    auth = CardAuth(card, credentials) if credentials is not None else None
    http_type = JsonRpcTransport if binding == "JSONRPC" else RestTransport
    return http_type(
        interface.url,
        http,
        version=version,
        timeout=timeout,
        headers=headers,
        auth=auth,
        follow_redirects=follow_redirects,
    )


#: A file for ``send(files=...)``: a path (read, named and typed from its name), or ``(name, bytes,
#: media_type)``.
FileInput = str | os.PathLike[str] | tuple[str, bytes, str]


def _file_part(file: FileInput) -> m.Part:
    if isinstance(file, tuple):
        name, content, media_type = file
        return m.Part(raw=bytes(content), filename=name, media_type=media_type)
    path = Path(file)
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return m.Part(raw=path.read_bytes(), filename=path.name, media_type=media_type)


def _message(
    text_or_message: m.Message | str,
    context_id: str,
    task_id: str,
    *,
    skill: str | None = None,
    extra: Sequence[m.Part] = (),
) -> m.Message:
    """The message to send: ``text_or_message`` with the ``extra`` parts after its own, addressed to
    ``skill`` (``metadata.skillId``, where skillwire's skill router reads it)."""
    if isinstance(text_or_message, m.Message):
        changes: dict[str, Any] = {k: v for k, v in (("context_id", context_id), ("task_id", task_id)) if v}
        if extra:
            changes["parts"] = [*text_or_message.parts, *extra]
        if skill is not None:
            changes["metadata"] = {**(text_or_message.metadata or {}), "skillId": skill}
        return msgspec.structs.replace(text_or_message, **changes) if changes else text_or_message
    parts = [*([m.Part(text=text_or_message)] if text_or_message else []), *extra]
    if not parts:
        raise ValueError("nothing to send: give text, data=, parts= or files=")
    return m.Message(
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        role=m.Role.USER,
        parts=parts,
        metadata={"skillId": skill} if skill is not None else None,
    )


class _Content(NamedTuple):
    """What ``send`` and ``stream`` add to the message: its skill, and data, parts and files."""

    skill: str | None
    data: Any
    parts: Sequence[m.Part]
    files: Sequence[FileInput]


class _CardSource:
    """Fetches the agent card and revalidates it with ``If-None-Match`` (following redirects only when
    ``follow_redirects`` is not False: the caller's headers may carry credentials)."""

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        timeout: httpx.Timeout,
        headers: dict[str, str],
        trust: CardTrust | None = None,
        follow_redirects: bool | None = None,
    ):
        self.url = url
        #: the keys cards must be signed with (``card_keys``), or None
        self.trust = trust
        self._http = http
        self._timeout = timeout
        self._headers = {**headers, "A2A-Version": A2A_VERSION, "Accept": "application/json", **IDENTITY}
        self._follow: Any = follow_redirects if follow_redirects is not None else httpx.USE_CLIENT_DEFAULT
        self.etag: str | None = None
        self.card: m.AgentCard | None = None

    async def fetch(self) -> m.AgentCard:
        headers = dict(self._headers)
        if self.etag is not None and self.card is not None:
            headers["If-None-Match"] = self.etag
        try:
            request = self._http.build_request("GET", self.url, headers=headers, timeout=self._timeout)
            response = await self._http.send(request, stream=True, follow_redirects=self._follow)
            try:
                content = await read_body(response) if response.status_code == 200 else b""
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise AgentConnectionError.of(exc) from exc
        if response.status_code == 304 and self.card is not None:
            return self.card
        if response.status_code != 200:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            raise HTTPStatusError(response.status_code, f"GET {self.url}", retry_after=retry_after)
        if self.trust is not None:
            self.card = await self.trust.verified(content, self.url)
        else:
            self.card = _decode_card(content, self.url)
        self.etag = response.headers.get("etag")
        return self.card


def _decode_card(content: bytes, url: str) -> m.AgentCard:
    """The agent card in ``content``. A card with v0.3 members (a v0.3 agent's, or one that serves both
    versions) goes through the v0.3 codec, which lists its v0.3 endpoints as protocol 0.3 interfaces after
    any v1.0 ones; a plain v1.0 card is decoded as is."""
    try:
        raw = msgspec.json.decode(content)
    except msgspec.DecodeError as exc:
        raise InvalidResponseError(f"{url} is not JSON: {exc}") from None
    from skillwire.wire import v03

    try:
        if isinstance(raw, dict) and v03.is_v03_card(raw):
            return v03.card_from_v03(raw)
        return msgspec.json.decode(content, type=m.AgentCard)
    except (msgspec.ValidationError, A2AError) as exc:
        raise InvalidResponseError(f"{url} is not a valid agent card: {exc}") from None


class ConnectOptions(TypedDict, total=False):
    """The keyword options of :meth:`Client.connect`, each documented there."""

    bindings: Sequence[str] | None
    versions: Sequence[str]
    http: httpx.AsyncClient | None
    #: per-request HTTP timeouts
    timeout: httpx.Timeout | float
    retries: int | RetryPolicy
    headers: dict[str, str] | None
    credentials: CredentialsProvider | Mapping[str, Secret] | None
    extensions: Sequence[str]
    grpc_credentials: Any
    card_keys: CardKeys | None
    allowed_origins: Sequence[str]


class Client:
    """An A2A v1.0 client over one of the agent's HTTP interfaces. Make one with :meth:`connect`."""

    def __init__(
        self,
        transport: Transport,
        *,
        card: m.AgentCard | None = None,
        interface: m.AgentInterface | None = None,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
        owns_http: bool = False,
        card_source: _CardSource | None = None,
    ) -> None:
        """A client over ``transport`` as is (no discovery): for tests, or transports of your own."""
        self.transport = transport
        self.interface = interface
        self.retry = retry if retry is not None else RetryPolicy()
        self._card = card
        self._tenant = interface.tenant if interface is not None else ""
        self._http = http
        self._owns_http = owns_http
        self._card_source = card_source
        #: Whether the agent keeps A2A 1.1 generations and this client asked for them (see the module).
        self.generations = False
        #: Whether the agent honours idempotency keys: messages and push-config calls are then retried.
        self.idempotency_keys = False

    @classmethod
    async def connect(cls, base_url: str, **options: Unpack[ConnectOptions]) -> Client:
        """Read the agent card at ``base_url`` (``http(s)://...``; ``host:port`` and ``:port`` mean plain
        ``http://``, ``:port`` on 127.0.0.1) and connect through the interface it offers that suits
        best: protocol ``versions`` in order (v1.0 first, then v0.3), and within a version the first of
        ``bindings`` (default :data:`DEFAULT_BINDINGS`: JSON-RPC, HTTP+JSON, then gRPC if installed).

        ``http`` is an httpx.AsyncClient to share (it is not closed by the client); ``headers`` are sent
        with every request; ``credentials`` maps the card's security scheme names to secrets (see
        :mod:`skillwire.client.auth`); ``extensions`` are the extension URIs to request (the
        ``A2A-Extensions`` header); ``retries`` is a retry count or a RetryPolicy; ``timeout`` is the
        per-request timeout (a stream's ``read`` timeout bounds the wait between two events).
        ``grpc_credentials`` (``grpc.ChannelCredentials``) open the channel when a gRPC interface is chosen:
        a private CA, a client certificate for mutual TLS (over HTTP, pass an ``http`` client whose
        ``verify=`` SSL context holds them).

        ``card_keys`` (a JWKS dict, a joserfc KeySet, or a JWKS URL) makes the client trust only cards signed
        with one of those keys: the public card, refreshed or not, and the extended card; any other raises
        CardSignatureError (:mod:`skillwire.client.card_trust`)::

            client = await Client.connect(url, card_keys="https://agent.example/.well-known/jwks.json")

        The card cannot send the client elsewhere (:mod:`skillwire.client.origins`): with credentials
        (``credentials``, or ``headers`` such as ``Authorization``), an interface on another origin than
        ``base_url``'s raises :class:`UntrustedOriginError` and nothing is sent there; without, the client
        goes where the card says. An ``https`` ``base_url`` whose card names an interface without TLS raises
        :class:`InsecureDowngradeError` either way. ``allowed_origins`` lists the other origins allowed for
        both, as ``scheme://host[:port]`` (``grpc://host:port`` or ``host:port`` for plaintext gRPC)::

            client = await Client.connect(
                "https://agents.example.com", credentials={"apiKey": key},
                allowed_origins=["https://api.example.com"],
            )
        """
        unknown = sorted(options.keys() - ConnectOptions.__optional_keys__)
        if unknown:  # what a signature of named parameters would refuse
            raise TypeError(f"connect() got an unexpected keyword argument {unknown[0]!r}")
        base_url = agent_url(base_url)  # host:port and :port, as the command line takes them
        bindings, versions = options.get("bindings"), options.get("versions", PROTOCOL_VERSIONS)
        http, headers, extensions = options.get("http"), options.get("headers"), options.get("extensions", ())
        credentials, card_keys = options.get("credentials"), options.get("card_keys")
        grpc_credentials, allowed_origins = (
            options.get("grpc_credentials"),
            options.get("allowed_origins", ()),
        )
        timeout = options.get("timeout", DEFAULT_TIMEOUT)
        timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        retries = options.get("retries", 3)
        retry = retries if isinstance(retries, RetryPolicy) else RetryPolicy(retries=retries)
        if bindings is None:
            bindings = DEFAULT_BINDINGS if _grpc_available() else DEFAULT_BINDINGS[:2]
        sent = dict(headers or {})
        if extensions:
            sent["A2A-Extensions"] = ", ".join(extensions)
        requested = list(extensions)
        policy = OriginPolicy.for_connect(
            base_url, allowed_origins, credentials=credentials, headers=sent, http=http
        )
        provider = as_provider(credentials) if credentials is not None else None
        owns = http is None
        client_http = http if http is not None else default_http(timeout)
        try:
            url = base_url if base_url.endswith(".json") else base_url.rstrip("/") + CARD_PATH
            trust = CardTrust(card_keys, client_http, timeout) if card_keys is not None else None
            source = _CardSource(url, client_http, timeout, headers or {}, trust, policy.follow_redirects)
            card = await retry.call(source.fetch)
            interface = select_interface(card, bindings, versions)
            policy.check(interface, url)
            generations = _keeps_generations(card, interface)
            if generations and GENERATIONS_URI not in requested:
                sent["A2A-Extensions"] = ", ".join([*requested, GENERATIONS_URI])
            follow = policy.follow_redirects
            transport = await _transport(
                interface, card, client_http, timeout, sent, provider, follow, grpc_credentials
            )
        except BaseException:
            if owns:
                await client_http.aclose()
            raise
        client = cls(
            transport,
            card=card,
            interface=interface,
            retry=retry,
            http=client_http,
            owns_http=owns,
            card_source=source,
        )
        client.generations = generations
        client.idempotency_keys = any(e.uri == IDEMPOTENCY_URI for e in card.capabilities.extensions)
        return client

    # -- lifetime ----------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the transport (a gRPC channel) and the HTTP client, if this client made it."""
        close: Callable[[], Awaitable[None]] | None = getattr(self.transport, "aclose", None)
        try:
            if close is not None:
                await close()
        finally:
            if self._owns_http and self._http is not None:
                await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the card ----------------------------------------------------------------------------------------

    @property
    def card(self) -> m.AgentCard:
        """The public card, as last fetched."""
        if self._card is None:
            raise RuntimeError("this client was made without a card")
        return self._card

    async def refresh_card(self) -> m.AgentCard:
        """Revalidate the cached card (``If-None-Match``; a 304 keeps it) and return the current one.
        The interface in use does not change, whatever the new card names: a card cannot move a connected
        client to another origin."""
        if self._card_source is None:
            raise RuntimeError("this client was made without card discovery")
        self._card = await self.retry.call(self._card_source.fetch)
        return self._card

    async def get_extended_card(self) -> m.AgentCard:
        """The authenticated extended card (GetExtendedAgentCard), asked for over the interface in use;
        the interfaces it names are not followed."""
        request = m.GetExtendedAgentCardRequest(tenant=self._tenant)
        card: m.AgentCard = await self._idempotent(_O.GET_EXTENDED_AGENT_CARD, request)
        trust = self._card_source.trust if self._card_source is not None else None
        return await trust.check(card) if trust is not None else card

    # -- messages ----------------------------------------------------------------------------------------

    def _send_request(
        self,
        message: m.Message | str,
        context_id: str,
        task_id: str,
        configuration: m.SendMessageConfiguration | None,
        metadata: dict[str, Any] | None,
        content: _Content,
    ) -> m.SendMessageRequest:
        extra = [
            *([m.Part(data=content.data, media_type="application/json")] if content.data is not None else []),
            *content.parts,
            *(_file_part(file) for file in content.files),
        ]
        message = _message(message, context_id, task_id, skill=content.skill, extra=extra)
        return m.SendMessageRequest(
            tenant=self._tenant, message=message, configuration=configuration, metadata=metadata
        )

    async def send(
        self,
        message: m.Message | str = "",
        *,
        skill: str | None = None,
        data: Any = None,
        parts: Sequence[m.Part] = (),
        files: Sequence[FileInput] = (),
        context_id: str = "",
        task_id: str = "",
        configuration: m.SendMessageConfiguration | None = None,
        metadata: dict[str, Any] | None = None,
        raise_on_failure: bool = False,
    ) -> m.Task | m.Message:
        """Send a message and return the Task or the agent's Message. Never retried: a message is not
        idempotent. ``context_id``/``task_id`` continue a conversation.

        Text becomes a user message with one text part; ``data`` (any JSON value but None) adds a data part,
        which a skill takes as its input; ``parts`` and ``files`` (paths, or ``(name, bytes, media_type)``)
        add parts after it; ``skill`` names the skill (``message.metadata.skillId``)::

            task = await client.send(skill="greet", data={"name": "Ada", "style": "formal"})
            task = await client.send("summarize this", files=["report.pdf"])

        ``metadata`` is the request's metadata, which skill routing does not read.
        """
        content = _Content(skill, data, parts, files)
        request = self._send_request(message, context_id, task_id, configuration, metadata, content)
        response: m.SendMessageResponse = await self._keyed(_O.SEND_MESSAGE, request)
        result = response.task if response.task is not None else response.message
        if result is None:
            raise InvalidResponseError("SendMessage returned neither a task nor a message")
        if raise_on_failure and isinstance(result, m.Task) and result.status.state in FAILED_STATES:
            raise TaskFailedError(result)
        return result

    async def stream(
        self,
        message: m.Message | str = "",
        *,
        skill: str | None = None,
        data: Any = None,
        parts: Sequence[m.Part] = (),
        files: Sequence[FileInput] = (),
        context_id: str = "",
        task_id: str = "",
        configuration: m.SendMessageConfiguration | None = None,
        metadata: dict[str, Any] | None = None,
        resume: bool = True,
    ) -> AsyncIterator[m.StreamResponse]:
        """Send a message and yield the stream's events until the task is terminal or interrupted.

        If the connection breaks after the task is known, the stream is resumed with SubscribeToTask
        (``resume=False`` turns this off): events already yielded are not repeated, missed ones are
        rebuilt from the task snapshot. ``skill``, ``data``, ``parts`` and ``files`` are :meth:`send`'s.

        Against an agent whose card says it does not stream, the message is sent with SendMessage and the
        task waited for (:meth:`wait`), and the events are the ones a stream would end with: the task as it
        opened (SUBMITTED, no artifacts yet), then each artifact, then its last status (a direct reply: the
        Message alone). What happened in between is not seen, as when polling.
        """
        content = _Content(skill, data, parts, files)
        request = self._send_request(message, context_id, task_id, configuration, metadata, content)
        if not self._offers_streaming():
            async for event in _sent_and_waited(self, request):
                yield event
            return
        progress = StreamProgress(end_on_interrupt=True)
        key = str(uuid.uuid4())
        opener = lambda: _with_key(key, self.transport.stream(_O.SEND_STREAMING_MESSAGE, request))  # noqa: E731
        # with idempotency keys a stream that broke before its first event is opened again: the same request
        reopen = self.idempotency_keys
        async for event in self._resumable(opener, progress, resume=resume, reopen=reopen):
            yield event

    # -- tasks -------------------------------------------------------------------------------------------

    async def get_task(
        self, id: str, history_length: int | None = None, *, current_generation: int | None = None
    ) -> m.Task:
        """The task. With ``current_generation`` (an agent that keeps generations), a long-poll: the agent
        answers once the task's generation is past it, or at its own time limit with the task as it is."""
        request = m.GetTaskRequest(
            tenant=self._tenant, id=id, history_length=history_length, current_generation=current_generation
        )
        task: m.Task = await self._idempotent(_O.GET_TASK, request)
        return task

    async def list_tasks(
        self,
        *,
        context_id: str = "",
        status: TaskState | None = None,
        page_size: int | None = None,
        page_token: str = "",
        history_length: int | None = None,
        status_timestamp_after: datetime | None = None,
        include_artifacts: bool | None = None,
    ) -> m.ListTasksResponse:
        request = m.ListTasksRequest(
            tenant=self._tenant,
            context_id=context_id,
            status=status if status is not None else TaskState.UNSPECIFIED,
            page_size=page_size,
            page_token=page_token,
            history_length=history_length,
            status_timestamp_after=status_timestamp_after,
            include_artifacts=include_artifacts,
        )
        response: m.ListTasksResponse = await self._idempotent(_O.LIST_TASKS, request)
        return response

    async def cancel_task(self, id: str, *, metadata: dict[str, Any] | None = None) -> m.Task:
        """Cancel a task; returns it. A task already terminal raises TaskNotCancelableError."""
        request = m.CancelTaskRequest(tenant=self._tenant, id=id, metadata=metadata)
        task: m.Task = await self._idempotent(_O.CANCEL_TASK, request)
        return task

    async def subscribe(self, id: str, *, resume: bool = True) -> AsyncIterator[m.StreamResponse]:
        """Yield a task's events: first its snapshot, then updates until it is terminal (an interrupted
        task keeps the stream open). Resumed after a broken connection, like :meth:`stream`.

        Against an agent whose card says it does not stream, the task is read (GetTask) and waited for until
        it is terminal: the snapshot, then the artifacts added and the last status, as :meth:`stream` does."""
        if not self._offers_streaming():
            async for event in _read_and_waited(self, id):
                yield event
            return
        request = m.SubscribeToTaskRequest(tenant=self._tenant, id=id)
        progress = StreamProgress(id, end_on_interrupt=False)
        opener = lambda: self.transport.stream(_O.SUBSCRIBE_TO_TASK, request)  # noqa: E731
        async for event in self._resumable(opener, progress, resume=resume, reopen=True):
            yield event

    # -- waiting and conversing --------------------------------------------------------------------------

    async def wait(
        self,
        task_id: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the whole wait, not one request
        interval: float = 0.2,
        max_interval: float = 5.0,
        backoff: float = 2.0,
        stop_on_interrupt: bool = True,
        history_length: int | None = None,
    ) -> m.Task:
        """Wait until the task is terminal, or interrupted (waiting for input or auth) unless
        ``stop_on_interrupt=False``; for agents without streaming. ``timeout`` bounds the whole wait
        (TimeoutError)::

            task = await client.send(message, configuration=m.SendMessageConfiguration(return_immediately=True))
            task = await client.wait(task.id, timeout=60)

        With an agent that keeps generations it long-polls: each GetTask asks for the task once its
        generation is past the last one seen, and the agent holds it until then (or its own time limit, 30 s
        for skillwire): one request per change, none while nothing happens. Otherwise it polls, the wait
        between polls starting at ``interval`` and growing by ``backoff`` up to ``max_interval``, each one
        jittered down by at most half so that many clients do not poll in step.
        """
        if interval <= 0 or max_interval < interval or backoff < 1:
            raise ValueError("need 0 < interval <= max_interval and backoff >= 1")
        delay = interval
        seen: int | None = None
        async with asyncio.timeout(timeout):
            while True:
                task = await self.get_task(task_id, history_length=history_length, current_generation=seen)
                state = task.status.state
                if state in TERMINAL_STATES or (stop_on_interrupt and state in INTERRUPTED_STATES):
                    return task
                if self.generations and task.generation:
                    seen = task.generation  # the agent holds the next GetTask until the task moves on
                    continue
                await asyncio.sleep(delay / 2 + random.uniform(0.0, delay / 2))
                delay = min(delay * backoff, max_interval)

    async def converse(
        self,
        message: m.Message | str,
        answer: Answerer,
        *,
        context_id: str = "",
        task_id: str = "",
        configuration: m.SendMessageConfiguration | None = None,
        metadata: dict[str, Any] | None = None,
        max_turns: int = 20,
        timeout: float | None = None,  # noqa: ASYNC109 - each wait for a task that keeps working
        raise_on_failure: bool = False,
    ) -> m.Task | m.Message:
        """Send ``message`` and drive the conversation to its end: whenever the task stops at
        INPUT_REQUIRED, ``answer(task)`` (sync or async) gives the reply, text or a Message, which is sent
        on the same task and context. A task the agent leaves working is followed with :meth:`wait`.

        Returns the agent's direct Message, or the task once it is terminal or waits for auth; also the
        waiting task when ``answer`` returns None or after ``max_turns`` answers::

            def ask_user(task: m.Task) -> str | None:
                question = task.status.message.text() if task.status.message else "?"
                return input(question + " ") or None

            task = await client.converse("book a table", ask_user)
        """
        result = await self.send(
            message,
            context_id=context_id,
            task_id=task_id,
            configuration=configuration,
            metadata=metadata,
            raise_on_failure=raise_on_failure,
        )
        turns = 0
        while isinstance(result, m.Task):
            task = result
            if task.status.state not in TERMINAL_STATES and task.status.state not in INTERRUPTED_STATES:
                task = await self.wait(task.id, timeout=timeout)
            if raise_on_failure and task.status.state in FAILED_STATES:
                raise TaskFailedError(task)
            if task.status.state is not TaskState.INPUT_REQUIRED or turns >= max_turns:
                return task
            reply = answer(task)
            if inspect.isawaitable(reply):
                reply = await reply
            if reply is None:
                return task
            turns += 1
            result = await self.send(
                reply,
                context_id=task.context_id,
                task_id=task.id,
                configuration=configuration,
                raise_on_failure=raise_on_failure,
            )
        return result

    # -- push notification configs -----------------------------------------------------------------------

    async def create_push_config(
        self,
        task_id: str,
        url: str,
        *,
        id: str = "",
        token: str = "",
        authentication: m.AuthenticationInfo | None = None,
    ) -> m.TaskPushNotificationConfig:
        config = m.TaskPushNotificationConfig(
            tenant=self._tenant, id=id, task_id=task_id, url=url, token=token, authentication=authentication
        )
        created: m.TaskPushNotificationConfig = await self._keyed(_O.CREATE_PUSH_CONFIG, config)
        return created

    async def get_push_config(self, task_id: str, id: str) -> m.TaskPushNotificationConfig:
        request = m.GetTaskPushNotificationConfigRequest(tenant=self._tenant, task_id=task_id, id=id)
        config: m.TaskPushNotificationConfig = await self._idempotent(_O.GET_PUSH_CONFIG, request)
        return config

    async def list_push_configs(
        self, task_id: str, *, page_size: int = 0, page_token: str = ""
    ) -> m.ListTaskPushNotificationConfigsResponse:
        request = m.ListTaskPushNotificationConfigsRequest(
            tenant=self._tenant, task_id=task_id, page_size=page_size, page_token=page_token
        )
        response: m.ListTaskPushNotificationConfigsResponse = await self._idempotent(
            _O.LIST_PUSH_CONFIGS, request
        )
        return response

    async def delete_push_config(self, task_id: str, id: str) -> None:
        request = m.DeleteTaskPushNotificationConfigRequest(tenant=self._tenant, task_id=task_id, id=id)
        await self._keyed(_O.DELETE_PUSH_CONFIG, request)

    # -- plumbing ----------------------------------------------------------------------------------------

    def _offers_streaming(self) -> bool:
        """Whether the card offers streaming (a client made without a card assumes it does)."""
        return self._card is None or bool(self._card.capabilities.streaming)

    async def _idempotent(self, operation: Operation, request: msgspec.Struct) -> Any:
        return await self.retry.call(lambda: self.transport.send(operation, request))

    async def _keyed(self, operation: Operation, request: msgspec.Struct) -> Any:
        """``operation`` with an Idempotency-Key of its own, the same on each retry; retried only when the agent
        honours keys (a delete is retried anyway: deleting twice is harmless)."""
        token = IDEMPOTENCY_KEY.set(str(uuid.uuid4()))
        try:
            if self.idempotency_keys or operation is _O.DELETE_PUSH_CONFIG:
                return await self._idempotent(operation, request)
            return await self.transport.send(operation, request)
        finally:
            IDEMPOTENCY_KEY.reset(token)

    async def _resumable(
        self,
        opener: Callable[[], AsyncIterator[m.StreamResponse]],
        progress: StreamProgress,
        *,
        resume: bool,
        reopen: bool,
    ) -> AsyncIterator[m.StreamResponse]:
        """The events of ``opener()``, deduplicated by ``progress``; a broken connection is resumed with
        SubscribeToTask once the task is known (or, when ``reopen``, by calling ``opener`` again)."""
        source = opener()
        attempt = 0
        if not resume:
            progress.detect_gaps = False
        while True:
            wait = 0.0
            try:
                async for event in source:
                    if progress.supersedes(event):  # the agent's log did not hold what this stream missed
                        assert event.task is not None
                        for missed in progress.caught_up(event.task):
                            yield missed
                    elif progress.observe(event):
                        attempt = 0
                        yield event
                    elif progress.gap:
                        break  # some events never came: resume after the last one seen
                    if progress.finished:
                        return
                else:
                    if not (resume and progress.started and progress.task_id is not None):
                        return
                    # the stream ended but the task has not: the agent let it go (it is stopping, say)
                    delay = self.retry.delay(attempt)
                    if delay is None:
                        return
                    wait = delay
            except (AgentConnectionError, HTTPStatusError, StreamDroppedError) as exc:
                can_resume = progress.started and progress.task_id is not None
                delay = self._retry_wait(exc, attempt) if resume and (can_resume or reopen) else None
                if delay is None:
                    raise
                wait = delay
            finally:
                await _aclose(source)
            progress.gap = False
            attempt += 1
            await asyncio.sleep(wait)
            source = self._resumed(progress) if progress.started else opener()

    def _retry_wait(self, error: Exception, attempt: int) -> float | None:
        if isinstance(error, StreamDroppedError):  # the agent let the stream go: subscribe again
            return self.retry.delay(attempt, error.retry_after)
        return self.retry.wait_for(error, attempt)

    async def _resumed(self, progress: StreamProgress) -> AsyncIterator[m.StreamResponse]:
        """SubscribeToTask for a stream already under way: after the last generation seen, where the agent
        keeps them (exactly what was missed follows); else its snapshot becomes the missed events only."""
        assert progress.task_id is not None
        if self.generations and progress.generation:
            async for event in self._resumed_after(progress):
                yield event
            return
        request = m.SubscribeToTaskRequest(tenant=self._tenant, id=progress.task_id)
        stream = self.transport.stream(_O.SUBSCRIBE_TO_TASK, request)
        try:
            first = True
            async for event in stream:
                if first and event.task is not None:
                    first = False
                    for missed in progress.missed(event.task):
                        yield missed  # observed by the caller before this generator goes on
                    if progress.finished or event.task.status.state in TERMINAL_STATES:
                        return
                    continue
                first = False
                yield event
        except UnsupportedOperationError:
            # SubscribeToTask refuses a task that ended while the line was down: read its final state.
            task = await self.get_task(progress.task_id)
            if task.status.state not in TERMINAL_STATES:
                raise
            for missed in progress.missed(task):
                yield missed
        finally:
            await _aclose(stream)

    async def _resumed_after(self, progress: StreamProgress) -> AsyncIterator[m.StreamResponse]:
        assert progress.task_id is not None
        request = m.SubscribeToTaskRequest(
            tenant=self._tenant, id=progress.task_id, after_generation=progress.generation
        )
        stream = self.transport.stream(_O.SUBSCRIBE_TO_TASK, request)
        try:
            async for event in stream:
                yield event
        except UnsupportedOperationError:
            # the task ended with the last event seen (nothing left to subscribe to): read its final state
            task = await self.get_task(progress.task_id)
            if task.status.state not in TERMINAL_STATES:
                raise
            for missed in progress.caught_up(task):
                yield missed
        finally:
            await _aclose(stream)


def _keeps_generations(card: m.AgentCard, interface: m.AgentInterface) -> bool:
    """Whether the agent declares the generations extension, on a 1.0 interface (the one it serves on)."""
    if _major_minor(interface.protocol_version) != "1.0":
        return False
    return any(e.uri == GENERATIONS_URI for e in card.capabilities.extensions)


async def _with_key(key: str, stream: AsyncIterator[m.StreamResponse]) -> AsyncIterator[m.StreamResponse]:
    """``stream``, read with ``key`` as the Idempotency-Key of the call (set only while it is read from, so
    that the consumer's own calls between two events do not carry it)."""
    try:
        while True:
            token = IDEMPOTENCY_KEY.set(key)
            try:
                event = await anext(stream)
            except StopAsyncIteration:
                return
            finally:
                IDEMPOTENCY_KEY.reset(token)
            yield event
    finally:
        await _aclose(stream)


# -- streams of agents that do not stream ------------------------------------------------------------------


async def _sent_and_waited(client: Client, request: m.SendMessageRequest) -> AsyncIterator[m.StreamResponse]:
    """:meth:`Client.stream` without streaming: SendMessage, then GetTask until the task settles; the events
    a stream would end with."""
    response: m.SendMessageResponse = await client.transport.send(_O.SEND_MESSAGE, request)
    if response.message is not None:
        yield m.StreamResponse(message=response.message)
        return
    task = response.task
    if task is None:
        raise InvalidResponseError("SendMessage returned neither a task nor a message")
    opening = msgspec.structs.replace(task, artifacts=[], status=m.TaskStatus(state=TaskState.SUBMITTED))
    progress = StreamProgress(end_on_interrupt=True)
    progress.observe(m.StreamResponse(task=opening))
    yield m.StreamResponse(task=opening)
    if task.status.state not in TERMINAL_STATES and task.status.state not in INTERRUPTED_STATES:
        task = await client.wait(task.id)
    for event in progress.missed(task):
        yield event


async def _read_and_waited(client: Client, task_id: str) -> AsyncIterator[m.StreamResponse]:
    """:meth:`Client.subscribe` without streaming: GetTask, then GetTask until the task is terminal."""
    task = await client.get_task(task_id)
    progress = StreamProgress(task_id, end_on_interrupt=False)
    progress.observe(m.StreamResponse(task=task))
    yield m.StreamResponse(task=task)
    if task.status.state in TERMINAL_STATES:
        return
    for event in progress.missed(await client.wait(task_id, stop_on_interrupt=False)):
        yield event


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose: Callable[[], Awaitable[None]] | None = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
