"""Ollama's native chat API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from skillwire.llm._adapter import GenerationParams, ToolCall, ToolReply
from skillwire.llm._http import HTTPAdapter

__all__ = ["OllamaAdapter", "ollama_host"]


class OllamaAdapter(HTTPAdapter):
    """``POST {OLLAMA_HOST}/api/chat``; a streamed reply is JSON lines, the last with ``"done": true``.

    providerConfig: ``model`` (required); ``endpoint`` (default ``/api/chat``); ``baseUrl`` or ``baseUrlEnv``
    (default: the variable ``OLLAMA_HOST``, Ollama's own: ``127.0.0.1:11434`` without a scheme works, else
    ``http://127.0.0.1:11434``); ``apiKeyEnv`` for an Ollama behind a proxy that wants a key (none by
    default); ``format`` (``json``, or a JSON Schema: Ollama's structured output); ``options``, passed on
    (``num_ctx`` ...), under the ones ``executionHints`` set. The seed crate's manifest runs as written::

        {vendor: ollama, model: "llama3.1", endpoint: "/api/chat", format: json}
    """

    default_base_url: ClassVar[str] = "http://127.0.0.1:11434"
    default_base_url_env: ClassVar[str | None] = "OLLAMA_HOST"
    default_endpoint: ClassVar[str] = "/api/chat"

    def __init__(self, provider_config: Mapping[str, Any], **options: Any) -> None:
        super().__init__(provider_config, **options)
        fmt = self.config.get("format")
        if fmt is not None and not (isinstance(fmt, Mapping) or (isinstance(fmt, str) and fmt)):
            raise self._config_error("format", 'expected "json" or a JSON Schema')
        extra = self.config.get("options", {})
        if not isinstance(extra, Mapping):
            raise self._config_error("options", "expected a mapping of Ollama options")
        self.format: str | Mapping[str, Any] | None = fmt
        self.options: Mapping[str, Any] = extra

    def resolve_base_url(self, value: str) -> str:
        return ollama_host(value)

    def request_body(
        self, messages: list[dict[str, Any]], params: GenerationParams, *, json: bool, stream: bool
    ) -> dict[str, Any]:
        options = dict(self.options)
        for name, value in (
            ("num_predict", params.max_tokens),
            ("temperature", params.temperature),
            ("top_p", params.top_p),
        ):
            if value is not None:
                options[name] = value
        # Ollama streams unless told not to, so "stream" is always sent
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": stream}
        if options:
            body["options"] = options
        if self.format is not None:
            body["format"] = self.format
        elif json:
            body["format"] = "json"
        return body

    def wire_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Ollama's shapes: a tool call's ``arguments`` an object, a tool result named by ``tool_name``."""
        wired: list[dict[str, Any]] = []
        for message in messages:
            if "tool_calls" in message:
                calls = [
                    {"function": {"name": call.name, "arguments": call.arguments}}
                    for call in message["tool_calls"]
                ]
                wired.append({"role": "assistant", "content": message["content"], "tool_calls": calls})
            elif message["role"] == "tool":
                wired.append({"role": "tool", "content": message["content"], "tool_name": message["name"]})
            else:
                wired.append(message)
        return wired

    def reply_message(self, reply: Any) -> ToolReply:
        if "error" in reply:
            raise ValueError(f"an error: {reply['error']!r}")
        message = reply["message"]
        calls = tuple(
            ToolCall(
                id=f"call_{n}",
                name=str(call["function"]["name"]),
                arguments=call["function"].get("arguments") or {},
            )
            for n, call in enumerate(message.get("tool_calls") or ())
        )
        return ToolReply(text=message.get("content") or "", calls=calls)

    def reply_text(self, reply: Any) -> str:
        if "error" in reply:
            raise ValueError(f"an error: {reply['error']!r}")
        content = reply["message"]["content"]
        if not isinstance(content, str):
            raise TypeError(f"message.content is {type(content).__name__}, not a string")
        return content

    def stream_text(self, line: str) -> tuple[str, bool]:
        if not line.strip():
            return "", False
        chunk = self.decode_json(line)
        if "error" in chunk:
            raise ValueError(f"an error: {chunk['error']!r}")
        done = chunk.get("done") is True
        message = chunk.get("message")
        content = "" if message is None and done else message["content"]
        if not isinstance(content, str):
            raise TypeError(f"message.content is {type(content).__name__}, not a string")
        return content, done


def ollama_host(value: str) -> str:
    """The URL an ``OLLAMA_HOST`` value stands for, as Ollama reads it: the scheme defaults to http, the host
    to 127.0.0.1, the port to 11434 (80 or 443 after an explicit scheme).

    >>> ollama_host("127.0.0.1:11434"), ollama_host("0.0.0.0"), ollama_host("https://ollama.example")
    ('http://127.0.0.1:11434', 'http://0.0.0.0:11434', 'https://ollama.example:443')
    """
    scheme, sep, rest = value.strip().partition("://")
    if not sep:
        scheme, rest, port = "http", scheme, "11434"
    else:
        port = {"http": "80", "https": "443"}.get(scheme, "11434")
    hostport, _, path = rest.partition("/")
    host = hostport
    if hostport.startswith("["):  # [::1]:11434
        host, _, tail = hostport.partition("]")
        host += "]"
        if tail.startswith(":"):
            port = tail[1:]
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    return f"{scheme}://{host or '127.0.0.1'}:{port}" + (f"/{path}" if path else "")
