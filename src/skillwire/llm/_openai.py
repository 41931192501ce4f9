"""OpenAI-compatible chat completions: OpenAI, and the servers that speak its API (vLLM, llama.cpp's
server, LM Studio, Ollama's ``/v1``)."""

from __future__ import annotations

from typing import Any, ClassVar

from skillwire.llm._adapter import GenerationParams
from skillwire.llm._http import HTTPAdapter

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter(HTTPAdapter):
    """``POST {base}/chat/completions``; a streamed reply is server-sent events ending with ``data: [DONE]``.

    providerConfig: ``model`` (required); ``baseUrl`` or ``baseUrlEnv`` (default: the variable
    ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``); ``apiKeyEnv`` (default ``OPENAI_API_KEY``, which
    may be unset for a local server); ``endpoint`` (default ``/chat/completions``). JSON output is asked for
    with ``response_format: {"type": "json_object"}``::

        {vendor: openai, model: gpt-4o-mini, apiKeyEnv: MY_OPENAI_KEY}
    """

    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    default_base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    default_api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"
    default_endpoint: ClassVar[str] = "/chat/completions"

    def request_body(
        self, messages: list[dict[str, Any]], params: GenerationParams, *, json: bool, stream: bool
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for name, value in (
            ("max_tokens", params.max_tokens),
            ("temperature", params.temperature),
            ("top_p", params.top_p),
        ):
            if value is not None:
                body[name] = value
        if json:
            body["response_format"] = {"type": "json_object"}
        if stream:
            body["stream"] = True
        return body

    def reply_text(self, reply: Any) -> str:
        if "error" in reply:
            raise ValueError(f"an error object: {reply['error']!r}")
        content = reply["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError(f"message.content is {type(content).__name__}, not a string")
        return content

    def stream_text(self, line: str) -> tuple[str, bool]:
        # Only data fields carry anything; each event's data is one JSON chunk (comments, event: and id:
        # lines and the blank line ending each event are skipped).
        if not line.startswith("data:"):
            return "", False
        data = line.removeprefix("data:").removeprefix(" ")
        if data.strip() == "[DONE]":
            return "", True
        chunk = self.decode_json(data)
        if "error" in chunk:
            raise ValueError(f"an error object: {chunk['error']!r}")
        if not chunk["choices"]:  # a usage chunk
            return "", False
        choice = chunk["choices"][0]
        content = (choice.get("delta") or {}).get("content") or ""
        if not isinstance(content, str):
            raise TypeError(f"delta.content is {type(content).__name__}, not a string")
        # the chunk with a finish_reason is the last one that matters: no need to wait for [DONE]
        return content, choice.get("finish_reason") is not None
