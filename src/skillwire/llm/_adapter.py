"""What every adapter is: :class:`Adapter`, the messages it takes and the parameters of one call."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NotRequired, TypedDict

from skillwire.llm._errors import ProviderConfigError

__all__ = [
    "ROLES",
    "Adapter",
    "ChatMessage",
    "GenerationParams",
    "Tool",
    "ToolCall",
    "ToolReply",
    "check_no_credentials",
]

#: The roles a chat message may have (``tool``: the result of a tool call, in a tool-calling loop).
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model may call: its name (letters, digits, ``_`` and ``-``), what it does, and the JSON
    Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asks for: its id (as the provider gave it, or made up), the tool, the arguments."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ToolReply:
    """The model's answer when it may call tools: the calls it asks for, or (none) its final text."""

    text: str
    calls: tuple[ToolCall, ...] = ()


class ChatMessage(TypedDict):
    """One message of a chat: ``{"role": "user", "content": "Hello"}``. In a tool-calling loop, the model's
    turn that called tools is ``{"role": "assistant", "content": "", "tool_calls": [ToolCall(...)]}`` and
    each result ``{"role": "tool", "content": "...", "tool_call_id": "...", "name": "..."}``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]


@dataclass(frozen=True, kw_only=True)
class GenerationParams:
    """How to generate: a skill's ``executionHints`` (:meth:`from_hints`); None leaves the provider's
    default. ``timeout_seconds`` bounds the whole call, retries after a 429 included."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    timeout_seconds: float | None = None

    @classmethod
    def from_hints(cls, hints: Any) -> GenerationParams:
        """The parameters of ``hints``: a SkillCard's ``execution_hints`` (attributes ``max_tokens`` ...) or
        the ``executionHints`` mapping as written (``maxTokens``, ``temperature``, ``topP``,
        ``timeoutSeconds``); other hints are not generation parameters and are ignored.

        >>> GenerationParams.from_hints({"maxTokens": 256, "temperature": 0.2, "retryable": True})
        GenerationParams(max_tokens=256, temperature=0.2, top_p=None, timeout_seconds=None)
        """
        if hints is None:
            return cls()
        if isinstance(hints, Mapping):
            get = hints.get
            return cls(
                max_tokens=get("maxTokens"),
                temperature=get("temperature"),
                top_p=get("topP"),
                timeout_seconds=get("timeoutSeconds"),
            )
        return cls(
            max_tokens=getattr(hints, "max_tokens", None),
            temperature=getattr(hints, "temperature", None),
            top_p=getattr(hints, "top_p", None),
            timeout_seconds=getattr(hints, "timeout_seconds", None),
        )


class Adapter(ABC):
    """A model provider behind one interface: built from a skill's ``providerConfig`` (opaque to
    skillwire: each adapter reads the keys it knows), it completes a chat.

    Write one by implementing :meth:`complete` (:meth:`stream` then yields the whole reply at once) and
    register it (see :mod:`skillwire.llm`). The constructor refuses a providerConfig holding a credential:
    credentials come from environment variables only.

    Cancelling the task that awaits :meth:`complete` (or iterates :meth:`stream`) must stop the upstream
    request; an iteration left early should be closed (``contextlib.aclosing``) so that it stops at once.
    """

    def __init__(self, provider_config: Mapping[str, Any]) -> None:
        check_no_credentials(provider_config)
        #: The providerConfig as given (read only).
        self.config: Mapping[str, Any] = MappingProxyType(dict(provider_config))
        #: The vendor the providerConfig names, for messages and logs.
        self.vendor = str(provider_config.get("vendor", type(self).__name__))

    @abstractmethod
    async def complete(
        self, messages: Sequence[ChatMessage], params: GenerationParams | None = None, *, json: bool = False
    ) -> str:
        """The model's reply to ``messages``; ``json=True`` asks for a JSON value (the text is not parsed)."""

    async def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams | None = None, *, json: bool = False
    ) -> AsyncIterator[str]:
        """The reply as it is generated, in chunks of text (joined, they are what :meth:`complete` returns)."""
        yield await self.complete(messages, params, json=json)

    async def complete_tools(
        self, messages: Sequence[ChatMessage], tools: Sequence[Tool], params: GenerationParams | None = None
    ) -> ToolReply:
        """The model's next turn when it may call ``tools``: the calls it asks for, or its final text. An
        adapter that cannot call tools raises NotImplementedError (the built-in ones can)."""
        raise NotImplementedError(f"the {self.vendor} adapter does not call tools")


def chat_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """``messages`` as plain mappings, checked: a TypeError or ValueError names the first bad one. A tool
    call turn keeps its ``tool_calls``, a tool result its ``tool_call_id`` and ``name``."""
    checked: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{n}]: role must be one of {', '.join(ROLES)}, got {role!r}")
        if not isinstance(content, str):
            raise TypeError(f"messages[{n}]: content must be a string, got {type(content).__name__}")
        plain: dict[str, Any] = {"role": role, "content": content}
        calls = message.get("tool_calls")
        if calls:
            if role != "assistant" or not all(isinstance(call, ToolCall) for call in calls):
                raise TypeError(f"messages[{n}]: tool_calls are ToolCall objects, on an assistant message")
            plain["tool_calls"] = list(calls)
        if role == "tool":
            plain["tool_call_id"] = str(message.get("tool_call_id", ""))
            plain["name"] = str(message.get("name", ""))
        checked.append(plain)
    return checked


# A key naming a variable (apiKeyEnv) is fine; one that would hold a credential is not.
_SECRET_NAMES = {"key", "token", "accesstoken", "authtoken", "apitoken", "bearertoken", "auth", "bearer"}
_SECRET_PARTS = ("apikey", "secret", "password", "passwd", "credential", "authorization", "privatekey")


def is_credential_key(name: str) -> bool:
    """Whether a providerConfig key looks like it holds a credential (``apiKey``, ``api_key``, ``token``)."""
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    if squashed.endswith("env"):
        return False
    return squashed in _SECRET_NAMES or any(part in squashed for part in _SECRET_PARTS)


def check_no_credentials(config: Mapping[str, Any], path: str = "providerConfig") -> None:
    """Raise :class:`ProviderConfigError` if ``config`` (or a mapping in it) has a credential-like key.

    The message names the key, never its value."""
    vendor = str(config.get("vendor", "")) if path == "providerConfig" else ""
    for key, value in config.items():
        where = f"{path}.{key}"
        if is_credential_key(str(key)):
            raise ProviderConfigError(
                f"{where}: credentials never come from the manifest; put the secret in an environment"
                " variable and name the variable (apiKeyEnv: MY_API_KEY)",
                key=where.removeprefix("providerConfig."),
                vendor=vendor,
            )
        if isinstance(value, Mapping):
            check_no_credentials(value, where)
        elif isinstance(value, list | tuple):
            for n, item in enumerate(value):
                if isinstance(item, Mapping):
                    check_no_credentials(item, f"{where}[{n}]")
