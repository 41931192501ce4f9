"""Model adapters: a skill's ``providerConfig`` and a chat in, the model's reply out (``skillwire[llm]``).

Nothing in skillwire's core imports this package: it is loaded when a model-backed skill runs. It needs only
httpx; no vendor SDK. Two adapters are built in: ``vendor: openai`` (OpenAI-compatible chat completions:
OpenAI, vLLM, llama.cpp's server, LM Studio, Ollama's ``/v1``) and ``vendor: ollama`` (Ollama's native
``/api/chat``)::

    from skillwire.llm import GenerationParams, adapter_for

    adapter = adapter_for({"vendor": "ollama", "model": "llama3.1", "endpoint": "/api/chat", "format": "json"})
    params = GenerationParams.from_hints({"maxTokens": 256, "temperature": 0.2, "timeoutSeconds": 30})
    reply = await adapter.complete([{"role": "user", "content": "Say hi as JSON."}], params, json=True)
    async for chunk in adapter.stream([{"role": "user", "content": "Tell a story."}], params):
        print(chunk, end="")

Endpoints may be written in providerConfig (``baseUrl``, ``endpoint``); credentials never are: a key named
like one (``apiKey``, ``token``, ``password`` ...) is refused, and keys are read from the environment variable
``apiKeyEnv`` names (``OPENAI_API_KEY`` by default for openai). Failures are a small tree under
:class:`ProviderError` whose messages never carry the provider's text (it is kept on ``detail``, for logs);
see :mod:`skillwire.llm._errors` and, for deadlines, retries and the size budget, :mod:`skillwire.llm._http`.

Your own adapter is a subclass of :class:`Adapter` with a ``complete`` method (``stream`` then yields the
whole reply at once), registered under a vendor name; :class:`HTTPAdapter` does the HTTP part for a chat API
(three hooks: the request body, a reply's text, a streamed line's text):

>>> from skillwire.llm import Adapter, adapter_for, register_adapter, default_registry
>>> class Shout(Adapter):
...     async def complete(self, messages, params=None, *, json=False):
...         return messages[-1]["content"].upper()
>>> register_adapter("shout", Shout)
>>> import asyncio
>>> asyncio.run(adapter_for({"vendor": "shout"}).complete([{"role": "user", "content": "hi"}]))
'HI'
>>> default_registry.unregister("shout")
"""

from skillwire.llm._adapter import ROLES, Adapter, ChatMessage, GenerationParams, Tool, ToolCall, ToolReply
from skillwire.llm._errors import (
    ProviderBadReply,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderRefused,
    ProviderReplyTooLarge,
    ProviderTimeout,
    ProviderUnavailable,
)
from skillwire.llm._http import (
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_TIMEOUT_SECONDS,
    RATE_LIMIT_RETRIES,
    HTTPAdapter,
)
from skillwire.llm._ollama import OllamaAdapter
from skillwire.llm._openai import OpenAIAdapter
from skillwire.llm._registry import (
    AdapterFactory,
    AdapterRegistry,
    adapter_for,
    default_registry,
    register_adapter,
)

__all__ = [
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_TIMEOUT_SECONDS",
    "RATE_LIMIT_RETRIES",
    "ROLES",
    "Adapter",
    "AdapterFactory",
    "AdapterRegistry",
    "ChatMessage",
    "GenerationParams",
    "HTTPAdapter",
    "OllamaAdapter",
    "OpenAIAdapter",
    "ProviderBadReply",
    "ProviderConfigError",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderRefused",
    "ProviderReplyTooLarge",
    "ProviderTimeout",
    "ProviderUnavailable",
    "Tool",
    "ToolCall",
    "ToolReply",
    "adapter_for",
    "default_registry",
    "register_adapter",
]
