"""skillwire: build, serve and call A2A agents made of skills.

The front door: what the README and the docs teach is importable from here, and adding a name to
``__all__`` is an API decision (``tests/test_exported_members.py`` holds it to the intended set)::

    from skillwire import Agent, SkillContext

    agent = Agent("Echo", "Says it back.")

    @agent.skill(tags=["echo"])
    async def echo(params: dict, ctx: SkillContext) -> str:
        \"\"\"Says the text back.\"\"\"
        return params["text"]

Public modules: this one, and six documented subpackages for what is advanced or numerous:

* :mod:`skillwire.errors`: the one error tree, every class with its JSON-RPC code, HTTP status and gRPC
  status (``except skillwire.errors.TaskNotFoundError``). The front door carries its roots,
  :class:`SkillwireError` and :class:`A2AError`, :class:`SkillError`, which skills raise, and
  :class:`CardSignatureError`, for a card whose signatures do not verify (:class:`CardSigner` signs cards,
  :func:`verify_card` checks them; docs/security.md).
* :mod:`skillwire.client`: the client's own failures (``AgentConnectionError``, ``HTTPStatusError``, ...,
  under :class:`ClientError`) and credentials (``Credentials``, ``CredentialsProvider``, ``Secret``).
* :mod:`skillwire.security`: who may call an agent: the schemes (``APIKey``, ``HTTPBasic``, ``Bearer``,
  ``OAuth2``, ``OpenIDConnect``, ``MutualTLS``), the ``Security`` policy given to ``Agent(security=...)``,
  and the ``Principal`` a skill sees as ``ctx.principal`` (docs/security.md).
* :mod:`skillwire.models`: every A2A message as a Struct, the request and response messages a
  :class:`BaseRequestHandler` receives and returns among them (``GetTaskRequest``, ``ListTasksResponse``).
* :mod:`skillwire.testing`: the test kit (``MockAgent``, ``StreamingASGITransport``;
  ``skillwire.testing.store_contract``, which needs pytest).
* ``PushSettings`` (``Agent(push=...)``: push notifications, on by default) and ``WebhookPolicy`` (the SSRF
  guard of the webhook URLs callers name: ``agent.asgi(webhook_policy=...)``).
* :mod:`skillwire.webhooks`: signed push-notification deliveries: ``WebhookSigner`` (and ``WebhookKeys``,
  for rotation) signs each delivery with a JWT, ``WebhookVerifier`` checks it on the receiving side
  (docs/push.md).

Everything else (``skillwire.protocol``, ``.wire``, ``.stores``, ``.server``, ``.skills``, ``.cli``,
``.agent`` and the modules of the public subpackages) is internal: it may change in any release; import
from here.
"""

import typing as _typing

from skillwire.agent import Agent
from skillwire.errors import A2AError, CardSignatureError, SkillError, SkillwireError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentProvider,
    AgentSkill,
    Artifact,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import TaskState
from skillwire.server.context import CallContext
from skillwire.server.executor import Executor, RequestContext, TaskEvents
from skillwire.server.handler import BaseRequestHandler
from skillwire.server.outbound import WebhookPolicy
from skillwire.server.push import PushSettings
from skillwire.skills.context import Answer, SkillContext
from skillwire.skills.executor import Outcome
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore, open_store

if _typing.TYPE_CHECKING:
    from skillwire.client import Client, ClientError, RetryPolicy, SyncClient, TaskFailedError
    from skillwire.skills.manifest import SkillCard
    from skillwire.skills.schema import compile_schema, validate_json
    from skillwire.wire.card_signing import CardSigner, verify_card

__version__ = "0.1.0"

# Imported on first use: the client (httpx), manifests (YAML) and the schema compiler are not needed to
# serve an agent, and start-up time matters.
_LAZY = {
    "Client": "skillwire.client",
    "ClientError": "skillwire.client",
    "RetryPolicy": "skillwire.client",
    "SyncClient": "skillwire.client",
    "TaskFailedError": "skillwire.client",
    "SkillCard": "skillwire.skills.manifest",
    "compile_schema": "skillwire.skills.schema",
    "validate_json": "skillwire.skills.schema",
    "CardSigner": "skillwire.wire.card_signing",
    "verify_card": "skillwire.wire.card_signing",
}
# The public subpackages, reachable as attributes (``skillwire.testing.MockAgent``) without an import.
_PUBLIC_MODULES = ("client", "errors", "models", "security", "testing", "webhooks")


def __getattr__(name: str) -> _typing.Any:
    import importlib

    if name in _PUBLIC_MODULES:
        return importlib.import_module(f"skillwire.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'skillwire' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The front door and the public subpackages, not the internal modules imported along the way."""
    return sorted([*__all__, *_PUBLIC_MODULES])


__all__ = [
    "A2AError",
    "Agent",
    "AgentCapabilities",
    "AgentCard",
    "AgentExtension",
    "AgentProvider",
    "AgentSkill",
    "Answer",
    "Artifact",
    "BaseRequestHandler",
    "CallContext",
    "CardSignatureError",
    "CardSigner",
    "Client",
    "ClientError",
    "Executor",
    "Limits",
    "MemoryTaskStore",
    "Message",
    "Operation",
    "Outcome",
    "Part",
    "PushSettings",
    "RequestContext",
    "RetryPolicy",
    "Role",
    "SQLiteTaskStore",
    "SendMessageConfiguration",
    "SkillCard",
    "SkillContext",
    "SkillError",
    "SkillwireError",
    "StreamResponse",
    "SyncClient",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskEvents",
    "TaskFailedError",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "TaskStore",
    "WebhookPolicy",
    "__version__",
    "compile_schema",
    "open_store",
    "validate_json",
    "verify_card",
]
