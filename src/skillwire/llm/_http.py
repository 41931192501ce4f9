"""The machinery the HTTP adapters share: where to send, credentials, deadline, retries, size budget.

A vendor's adapter is three hooks over :class:`HTTPAdapter`: the request body, the text of a whole reply,
the text of one line of a streamed reply. Everything else is decided here, once:

* **Where**: ``baseUrl`` from providerConfig (an endpoint, never a credential: no ``user:pass@``), else the
  environment variable ``baseUrlEnv`` names (the vendor's own by default), else the vendor's default; then
  ``endpoint`` (a path) from providerConfig or the vendor's.
* **Credentials** come only from the environment variable ``apiKeyEnv`` names (the vendor's by default),
  sent as ``Authorization: Bearer``. A variable the providerConfig names must be set; the vendor's default
  may be unset (a local server wants no key).
* **Deadline**: ``timeout_seconds`` (else ``default_timeout``) bounds the whole call: connecting, every
  retry and its wait, reading the last byte. A stream's deadline counts from its first request.
* **Retries**: only a 429, at most :data:`RATE_LIMIT_RETRIES` times, after its ``Retry-After`` (seconds or an
  HTTP date; without one 0.5 s, doubling). A wait that would end past the deadline is not started: the call
  raises :class:`ProviderRateLimited` at once. 5xx and broken replies are not retried: a skill's own retry
  policy (``executionHints.retryable``) decides that.
* **Size budget**: at most ``max_reply_bytes`` (4 MiB by default) are read of a reply, stream or not, counted
  as they arrive. The body is asked for uncompressed, and one that comes compressed anyway is refused
  (ProviderBadReply) before a byte of it is decoded: a few KiB of gzip can inflate to gigabytes, which
  httpx would decode a whole network read at a time before the budget could count it.
* **Error text**: the start of an error reply is kept on the error's ``detail`` for the logs, with anything
  that looks like a credential in it replaced (:func:`~skillwire.llm._adapter.redact`): a provider may echo
  the key it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import re
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar, cast
from urllib.parse import parse_qsl, urlsplit

import httpx
import msgspec

from skillwire.llm._adapter import (
    Adapter,
    ChatMessage,
    GenerationParams,
    Tool,
    ToolCall,
    ToolReply,
    chat_messages,
    is_credential_key,
)
from skillwire.llm._errors import (
    ProviderBadReply,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderRefused,
    ProviderReplyTooLarge,
    ProviderTimeout,
    ProviderUnavailable,
    redact,
)

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "DEFAULT_TIMEOUT_SECONDS", "RATE_LIMIT_RETRIES", "HTTPAdapter"]

#: The most bytes an adapter reads of one reply, unless built with another ``max_reply_bytes``.
DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024
#: The bound of a call whose parameters give no ``timeout_seconds``.
DEFAULT_TIMEOUT_SECONDS = 300.0
#: How many times a call is sent again after a 429 (each wait within the deadline).
RATE_LIMIT_RETRIES = 3
#: The most bytes of an error body kept (on the error's ``detail``, for logs).
_ERROR_BODY_LIMIT = 8192
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The failures a hook's parsing raises on a reply of the wrong shape.
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)

T = TypeVar("T")


@dataclass(frozen=True)
class _Call:
    """One call: its request, and when it must be over (the loop's clock) out of how many seconds."""

    request: httpx.Request
    deadline: float
    seconds: float
    #: The credentials it carries, replaced in what the provider answers before that is kept.
    secrets: tuple[str, ...] = ()

    @contextlib.contextmanager
    def naming_errors(self) -> Iterator[None]:
        """A ProviderError raised inside says which URL was tried (``error.url``, for the server's log)."""
        try:
            yield
        except ProviderError as exc:
            if exc.url is None:
                exc.url = str(self.request.url.copy_with(query=None, fragment=None))
            raise


class HTTPAdapter(Adapter):
    """An adapter that speaks a chat API over HTTP with httpx. Subclasses set the class attributes and
    implement :meth:`request_body`, :meth:`reply_text` and :meth:`stream_text`; a hook that meets a reply of
    the wrong shape may simply fail (KeyError, TypeError, ValueError ...): that becomes
    :class:`ProviderBadReply`, its text kept on ``detail`` only.

    ``env`` is where the variables are read (``os.environ`` by default, read at each call)."""

    #: The base URL when neither providerConfig nor the environment gives one.
    default_base_url: ClassVar[str] = ""
    #: The variable holding the base URL unless providerConfig names another (``baseUrlEnv``).
    default_base_url_env: ClassVar[str | None] = None
    #: The variable holding the API key unless providerConfig names another (``apiKeyEnv``).
    default_api_key_env: ClassVar[str | None] = None
    #: The path of the chat endpoint unless providerConfig gives one (``endpoint``).
    default_endpoint: ClassVar[str] = ""

    def __init__(
        self,
        provider_config: Mapping[str, Any],
        *,
        env: Mapping[str, str] | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        default_timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__(provider_config)
        if max_reply_bytes < 1 or default_timeout <= 0:
            raise ValueError("max_reply_bytes and default_timeout must be positive")
        self.env = env
        self.max_reply_bytes = max_reply_bytes
        self.default_timeout = default_timeout
        self.model = self._required("model")
        self.endpoint = self._path()
        self.base_url = self._base_url()
        named_url_env = self._env_name("baseUrlEnv")
        named_key_env = self._env_name("apiKeyEnv")
        self.base_url_env = named_url_env or self.default_base_url_env
        self.api_key_env = named_key_env or self.default_api_key_env
        self._must_be_set = {name for name in (named_url_env, named_key_env) if name}

    # -- the hooks of a vendor -------------------------------------------------------------------------

    @abstractmethod
    def request_body(
        self, messages: list[dict[str, Any]], params: GenerationParams, *, json: bool, stream: bool
    ) -> dict[str, Any]:
        """The JSON body of the request."""

    @abstractmethod
    def reply_text(self, reply: Any) -> str:
        """The text of a whole reply (the decoded JSON body)."""

    @abstractmethod
    def stream_text(self, line: str) -> tuple[str, bool]:
        """The text one line of a streamed reply adds (``""`` for none), and whether the reply ends with it."""

    def resolve_base_url(self, value: str) -> str:
        """The base URL a variable's ``value`` stands for (Ollama's OLLAMA_HOST may omit the scheme)."""
        return value

    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry ``key``."""
        return {"Authorization": f"Bearer {key}"}

    @staticmethod
    def decode_json(data: str | bytes) -> Any:
        """``data`` as a JSON value (a ValueError when it is not one, or nested too deep to decode)."""
        try:
            return msgspec.json.decode(data)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None

    # -- a call ------------------------------------------------------------------------------------------

    async def complete(
        self, messages: Sequence[ChatMessage], params: GenerationParams | None = None, *, json: bool = False
    ) -> str:
        call = self._call(messages, params, json=json, stream=False)
        with call.naming_errors():
            async with self._client() as client:
                response = await self._bounded(self._send(client, call), call)
                try:
                    body = await self._bounded(self._read(response), call)
                finally:
                    await response.aclose()
            return self._parsed(self._whole_reply, body, "the reply")

    async def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams | None = None, *, json: bool = False
    ) -> AsyncIterator[str]:
        call = self._call(messages, params, json=json, stream=True)
        with call.naming_errors():
            async with self._client() as client:
                response = await self._bounded(self._send(client, call), call)
                try:
                    async with contextlib.aclosing(self._lines(response)) as lines:
                        while (line := await self._bounded(anext(lines, None), call)) is not None:
                            text, done = self._parsed(self.stream_text, line, "a streamed line")
                            if text:
                                yield text
                            if done:
                                return
                    raise self._bad("the stream ended before the reply was complete")
                finally:
                    await response.aclose()

    async def complete_tools(
        self, messages: Sequence[ChatMessage], tools: Sequence[Tool], params: GenerationParams | None = None
    ) -> ToolReply:
        call = self._call(messages, params, json=False, stream=False, tools=tools)
        with call.naming_errors():
            async with self._client() as client:
                response = await self._bounded(self._send(client, call), call)
                try:
                    body = await self._bounded(self._read(response), call)
                finally:
                    await response.aclose()
            return self._parsed(lambda data: self.reply_message(self.decode_json(data)), body, "the reply")

    # -- the tool-calling hooks: OpenAI's shapes by default (Ollama's differ a little) --------------------

    def wire_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The checked messages as the API takes them: a tool call turn's ``tool_calls`` and a tool result
        in OpenAI's shapes (``arguments`` a JSON string, ``tool_call_id``)."""
        wired: list[dict[str, Any]] = []
        for message in messages:
            if "tool_calls" in message:
                calls = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": msgspec.json.encode(call.arguments).decode(),
                        },
                    }
                    for call in message["tool_calls"]
                ]
                wired.append(
                    {"role": "assistant", "content": message["content"] or None, "tool_calls": calls}
                )
            elif message["role"] == "tool":
                wired.append(
                    {"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]}
                )
            else:
                wired.append(message)
        return wired

    def tools_body(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The request's ``tools``: function tools, as both OpenAI and Ollama take them."""
        return [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
            }
            for t in tools
        ]

    def reply_message(self, reply: Any) -> ToolReply:
        """The model's turn in a reply that may call tools (OpenAI: ``choices[0].message.tool_calls``)."""
        if "error" in reply:
            raise ValueError(f"an error object: {reply['error']!r}")
        message = reply["choices"][0]["message"]
        calls = tuple(
            ToolCall(
                id=str(call.get("id") or f"call_{n}"),
                name=str(call["function"]["name"]),
                arguments=_arguments(call["function"].get("arguments")),
            )
            for n, call in enumerate(message.get("tool_calls") or ())
        )
        return ToolReply(text=message.get("content") or "", calls=calls)

    def _call(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams | None,
        *,
        json: bool,
        stream: bool,
        tools: Sequence[Tool] = (),
    ) -> _Call:
        params = params or GenerationParams()
        timeout = self.default_timeout if params.timeout_seconds is None else float(params.timeout_seconds)
        if timeout <= 0:
            raise ValueError("timeout_seconds must be positive")
        body = self.request_body(
            self.wire_messages(chat_messages(messages)), params, json=json, stream=stream
        )
        if tools:
            body["tools"] = self.tools_body(tools)
        headers = {"Accept-Encoding": "identity"}
        key = self._variable(self.api_key_env)
        if key:
            headers |= self.auth_headers(key)
        url = self._resolved_base_url().rstrip("/") + self.endpoint
        request = httpx.Request("POST", url, json=body, headers=headers)
        secrets = (key,) if key else ()
        return _Call(request, asyncio.get_running_loop().time() + timeout, timeout, secrets)

    def _client(self) -> httpx.AsyncClient:
        # A client per call: nothing to close between calls; the call's deadline replaces httpx's timeouts.
        return httpx.AsyncClient(timeout=None, follow_redirects=False)

    async def _send(self, client: httpx.AsyncClient, call: _Call) -> httpx.Response:
        """The response (its body still to read) to the first attempt that is not a 429; raises for errors."""
        loop = asyncio.get_running_loop()
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            response = await client.send(call.request, stream=True)
            encoding = response.headers.get("content-encoding", "").strip().lower()
            if encoding not in ("", "identity"):
                await response.aclose()
                raise self._bad(f"the reply is compressed ({encoding[:40]}), which was not asked for")
            if response.is_success:
                return response
            detail = await self._error_body(response, call.secrets)
            if response.status_code != 429:
                raise self._status_error(response.status_code, detail)
            wait = retry_after(response.headers.get("retry-after"))
            pause = 0.5 * 2**attempt if wait is None else wait
            if attempt == RATE_LIMIT_RETRIES or loop.time() + pause >= call.deadline:
                later = "" if wait is None else f" (it asks to retry after {wait:g} seconds)"
                raise ProviderRateLimited(
                    f"The model provider ({self.vendor}) is rate limiting requests{later}.",
                    vendor=self.vendor,
                    retry_after=wait,
                    detail=detail,
                )
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _bounded(self, step: Awaitable[T], call: _Call) -> T:
        """``step`` within the call's deadline, its transport failures as provider errors."""
        try:
            async with asyncio.timeout_at(call.deadline):
                return await step
        except TimeoutError:
            raise ProviderTimeout(
                f"The model provider ({self.vendor}) did not answer within {call.seconds:g} seconds.",
                vendor=self.vendor,
                timeout=call.seconds,
            ) from None
        except httpx.TransportError as exc:
            verb = "could not be reached" if isinstance(exc, httpx.ConnectError) else "broke the connection"
            raise ProviderUnavailable(
                f"The model provider ({self.vendor}) {verb}.", vendor=self.vendor, detail=repr(exc)
            ) from None
        except httpx.RequestError as exc:  # a body that does not decode (its Content-Encoding)
            raise self._bad("the body does not decode", detail=repr(exc)) from None

    async def _read(self, response: httpx.Response) -> bytes:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_reply_bytes:
            raise self._too_large()
        body = bytearray()
        async with _chunks(response) as chunks:
            async for chunk in chunks:
                body += chunk
                if len(body) > self.max_reply_bytes:
                    raise self._too_large()
        return bytes(body)

    async def _lines(self, response: httpx.Response) -> AsyncGenerator[str, None]:
        """The lines of a streamed body (``\\n`` or ``\\r\\n``), the whole stream within the size budget."""
        size, pending = 0, bytearray()
        async with _chunks(response) as chunks:
            async for chunk in chunks:
                size += len(chunk)
                if size > self.max_reply_bytes:
                    raise self._too_large()
                pending += chunk
                if b"\n" not in chunk:  # only a chunk with a newline ends lines: no rescanning a long one
                    continue
                *lines, rest = pending.split(b"\n")
                pending = bytearray(rest)
                for line in lines:
                    yield self._utf8(line.removesuffix(b"\r"))
        if pending:
            yield self._utf8(pending)

    async def _error_body(self, response: httpx.Response, secrets: tuple[str, ...]) -> str:
        """The start of an error response's body (for the error's ``detail``, the call's ``secrets`` and
        whatever looks like a credential replaced); the rest is not read."""
        kept = bytearray()
        with contextlib.suppress(httpx.HTTPError):
            async with _chunks(response) as chunks:
                async for chunk in chunks:
                    kept += chunk
                    if len(kept) >= _ERROR_BODY_LIMIT:
                        break
        await response.aclose()
        return redact(kept[:_ERROR_BODY_LIMIT].decode("utf-8", "replace"), secrets)

    def _whole_reply(self, body: bytes) -> str:
        return self.reply_text(self.decode_json(body))

    def _parsed(self, hook: Callable[[Any], T], data: Any, what: str) -> T:
        try:
            return hook(data)
        except ProviderError:
            raise
        except _SHAPE_ERRORS as exc:
            detail = f"{type(exc).__name__}: {exc}"
            raise self._bad(f"{what} is not a {self.vendor} chat reply", detail=detail) from None

    def _utf8(self, line: bytes | bytearray) -> str:
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            raise self._bad("the stream is not UTF-8 text") from None

    # -- errors ------------------------------------------------------------------------------------------

    def _bad(self, reason: str, *, status: int | None = None, detail: str | None = None) -> ProviderBadReply:
        return ProviderBadReply(
            f"The model provider ({self.vendor}) answered badly: {reason}.",
            vendor=self.vendor,
            status=status,
            detail=detail,
        )

    def _too_large(self) -> ProviderReplyTooLarge:
        return ProviderReplyTooLarge(
            f"The model provider ({self.vendor}) answered badly: the reply is over {self.max_reply_bytes}"
            " bytes.",
            vendor=self.vendor,
        )

    def _status_error(self, status: int, detail: str) -> ProviderError:
        if 400 <= status < 500:
            return ProviderRefused(
                f"The model provider ({self.vendor}) refused the request (HTTP {status}).",
                vendor=self.vendor,
                status=status,
                detail=detail,
            )
        reason = f"it failed (HTTP {status})" if status >= 500 else f"unexpected HTTP {status}"
        return self._bad(reason, status=status, detail=detail)

    # -- providerConfig and the environment -------------------------------------------------------------

    def _config_error(self, key: str, reason: str) -> ProviderConfigError:
        return ProviderConfigError(f"providerConfig.{key}: {reason}", key=key, vendor=self.vendor)

    def _text(self, key: str) -> str | None:
        return None if self.config.get(key) is None else self._required(key)

    def _required(self, key: str) -> str:
        value = self.config.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self._config_error(key, "expected a non-empty string")
        return value

    def _path(self) -> str:
        path = self._text("endpoint") or self.default_endpoint
        if not path.startswith("/") or "://" in path or "?" in path or "#" in path:
            raise self._config_error("endpoint", "expected a path starting with / (put the host in baseUrl)")
        return path

    def _env_name(self, key: str) -> str | None:
        name = self._text(key)
        # The value is not repeated: a key pasted where a variable's name belongs must not reach the logs.
        if name is not None and not _ENV_NAME.fullmatch(name):
            raise self._config_error(key, "expected the name of an environment variable (letters, digits, _)")
        return name

    def _base_url(self) -> str | None:
        url = self._text("baseUrl")
        if url is None:
            return None
        problem = url_problem(url, from_manifest=True)
        if problem:
            raise self._config_error("baseUrl", problem)
        return url

    def _variable(self, name: str | None) -> str | None:
        if name is None:
            return None
        value = (os.environ if self.env is None else self.env).get(name)
        if not value and name in self._must_be_set:
            key = "apiKeyEnv" if name == self.api_key_env else "baseUrlEnv"
            raise self._config_error(key, f"the environment variable {name} is not set")
        return value or None

    def _resolved_base_url(self) -> str:
        if self.base_url is not None:
            return self.base_url
        value = self._variable(self.base_url_env)
        if value is None:
            return self.default_base_url
        url = self.resolve_base_url(value.strip())
        problem = url_problem(url, from_manifest=False)
        if problem:
            raise self._config_error("baseUrlEnv", f"the environment variable {self.base_url_env}: {problem}")
        return url


def _chunks(response: httpx.Response) -> contextlib.aclosing[AsyncGenerator[bytes, None]]:
    """The body's chunks as they came (never decoded: a compressed reply is refused before it is read; an
    async generator, closed when left rather than by the collector)."""
    return contextlib.aclosing(cast(AsyncGenerator[bytes, None], response.aiter_raw()))


def url_problem(url: str, *, from_manifest: bool) -> str | None:
    """What is wrong with ``url`` as a base URL (None: nothing). One from the manifest may not carry a
    credential (``user:pass@``, a query parameter named like a key); the value is never repeated."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # a bad port raises
    except ValueError:
        return "not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http:// or https:// URL with a host"
    if parts.fragment:
        return "a base URL has no #fragment"
    if from_manifest and (
        parts.username is not None or any(is_credential_key(name) for name, _ in parse_qsl(parts.query))
    ):
        return "credentials never come from the manifest; name an environment variable (apiKeyEnv)"
    return None


def retry_after(value: str | None) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait (a number or an HTTP date); None without one.

    >>> retry_after("2"), retry_after(None), retry_after("soon")
    (2.0, None, None)
    """
    if value is None:
        return None
    value = value.strip()
    with contextlib.suppress(ValueError):
        seconds = float(value)
        return max(seconds, 0.0) if seconds == seconds else None  # NaN is no answer
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def _arguments(value: Any) -> Any:
    """A tool call's arguments: OpenAI sends them as a JSON string, Ollama as an object."""
    if isinstance(value, str):
        return msgspec.json.decode(value) if value.strip() else {}
    return {} if value is None else value
