"""skillwire: build, serve and call A2A agents made of skills.

The front door: what authors and callers use is importable from here, and adding a name to ``__all__`` is
an API decision (``tests/test_exported_members.py`` holds it to the intended set)::

    from skillwire import Agent

    agent = Agent("Adder", "Adds numbers.")

    @agent.skill(tags=["math"])
    def add(a: int, b: int = 1) -> int:
        \"\"\"Adds two numbers.\"\"\"
        return a + b

Here: the agent and its decorator (:class:`Agent`), what a skill sees and raises (:class:`SkillContext`,
:class:`Answer`, :class:`SkillError`, :class:`Outcome`), the clients (:class:`Client`,
:class:`SyncClient`, :class:`RetryPolicy`), what a caller reads (:class:`Task`, :class:`Message`,
:class:`TaskState`), the security schemes and policy (:class:`Security`, :class:`APIKey`,
:class:`HTTPBasic`, :class:`Bearer`, :class:`OAuth2`, :class:`OpenIDConnect`, :class:`MutualTLS`,
:class:`Principal`), the errors users catch (:class:`SkillwireError`, :class:`A2AError`,
:class:`InvalidParamsError`, :class:`TaskNotFoundError`, :class:`ClientError`, :class:`TaskFailedError`,
:class:`CardSignatureError`), and the pieces for going further: your own executor or request handler
(:class:`Executor`, :class:`RequestContext`, :class:`TaskEvents`, :class:`BaseRequestHandler`,
:class:`CallContext`), limits and push settings (:class:`Limits`, :class:`PushSettings`,
:class:`WebhookPolicy`), card signing (:class:`CardSigner`, :func:`verify_card`), manifests and schemas
(:class:`SkillCard`, :func:`compile_schema`, :func:`validate_json`), MCP servers whose tools become skills
(:class:`McpServer`; docs/mcp.md).

Public modules, for what is advanced or numerous:

* :mod:`skillwire.types`: the protocol's wire types, every A2A message as a Struct (``Part``,
  ``AgentCard``, ``SendMessageConfiguration``, ``GetTaskRequest``, ...), the states, roles and operations.
* :mod:`skillwire.errors`: the one error tree, every class with its JSON-RPC code, HTTP status and gRPC
  status (``except skillwire.errors.UnsupportedOperationError``).
* :mod:`skillwire.client`: the client's own failures (``AgentConnectionError``, ``HTTPStatusError``, ...,
  under :class:`ClientError`) and credentials (``Credentials``, ``CredentialsProvider``, ``Secret``).
* :mod:`skillwire.security`: every scheme, ``keys_from_env``, ``hash_password`` (docs/security.md).
* :mod:`skillwire.testing`: the test kit (``MockAgent``, ``StreamingASGITransport``;
  ``skillwire.testing.store_contract``, which needs pytest).
* :mod:`skillwire.webhooks`: signed push-notification deliveries (``WebhookSigner``, ``WebhookVerifier``).
* :mod:`skillwire.stores`: the task stores (``MemoryTaskStore``, ``SQLiteTaskStore``,
  ``PostgresTaskStore``, ``open_store``).
* :mod:`skillwire.server`: running the server yourself (``TaskRuntime``, the event buses, ``TLSConfig``,
  ``Telemetry``, ``Metrics``).
* :mod:`skillwire.llm`: the model adapters of model-backed skills.

Everything else (the modules of ``skillwire.protocol``, ``.wire``, ``.stores``, ``.server``, ``.skills``,
``.cli``, ``.agent`` and of the public subpackages) is internal: it may change in any release. The wire
types that this module carried before (``skillwire.AgentCard``, ``skillwire.Part``, ...) still resolve, with a
DeprecationWarning naming their module.
"""

import typing as _typing

if _typing.TYPE_CHECKING:
    from skillwire.agent import Agent
    from skillwire.client import Client, ClientError, RetryPolicy, SyncClient, TaskFailedError
    from skillwire.errors import (
        A2AError,
        CardSignatureError,
        InvalidParamsError,
        SkillError,
        SkillwireError,
        TaskNotFoundError,
    )
    from skillwire.mcp.config import McpServer
    from skillwire.protocol.limits import Limits
    from skillwire.protocol.models import Message, Task
    from skillwire.protocol.states import TaskState
    from skillwire.security import (
        APIKey,
        Bearer,
        HTTPBasic,
        MutualTLS,
        OAuth2,
        OpenIDConnect,
        Principal,
        Security,
    )
    from skillwire.server.context import CallContext
    from skillwire.server.handler import BaseRequestHandler
    from skillwire.server.notifications.outbound import WebhookPolicy
    from skillwire.server.notifications.push import PushSettings
    from skillwire.server.tasks.executor import Executor, RequestContext, TaskEvents
    from skillwire.skills.context import Answer, SkillContext
    from skillwire.skills.executor import Outcome
    from skillwire.skills.manifest import SkillCard
    from skillwire.skills.schema import compile_schema, validate_json
    from skillwire.wire.card_signing import CardSigner, verify_card

# Every name is imported on its first use: a caller (the client, the command line) should not pay for the
# server, the security schemes or the schema compiler it does not use, and start-up time matters
# (tests/test_import_cost.py holds the light paths light).
_LAZY = {
    "__version__": "skillwire._version",
    "Agent": "skillwire.agent",
    **dict.fromkeys(
        ("Client", "ClientError", "RetryPolicy", "SyncClient", "TaskFailedError"), "skillwire.client"
    ),
    **dict.fromkeys(
        (
            "A2AError",
            "CardSignatureError",
            "InvalidParamsError",
            "SkillError",
            "SkillwireError",
            "TaskNotFoundError",
        ),
        "skillwire.errors",
    ),
    "Limits": "skillwire.protocol.limits",
    "Message": "skillwire.protocol.models",
    "Task": "skillwire.protocol.models",
    "TaskState": "skillwire.protocol.states",
    **dict.fromkeys(
        ("APIKey", "Bearer", "HTTPBasic", "MutualTLS", "OAuth2", "OpenIDConnect", "Principal", "Security"),
        "skillwire.security",
    ),
    "CallContext": "skillwire.server.context",
    **dict.fromkeys(("Executor", "RequestContext", "TaskEvents"), "skillwire.server.tasks.executor"),
    "BaseRequestHandler": "skillwire.server.handler",
    "WebhookPolicy": "skillwire.server.notifications.outbound",
    "PushSettings": "skillwire.server.notifications.push",
    "Answer": "skillwire.skills.context",
    "SkillContext": "skillwire.skills.context",
    "Outcome": "skillwire.skills.executor",
    "McpServer": "skillwire.mcp.config",
    "SkillCard": "skillwire.skills.manifest",
    "compile_schema": "skillwire.skills.schema",
    "validate_json": "skillwire.skills.schema",
    "CardSigner": "skillwire.wire.card_signing",
    "verify_card": "skillwire.wire.card_signing",
}
# Names this module carried before they moved to their own public modules: they still resolve, with a
# DeprecationWarning (and are not cached here, so each use says so).
_MOVED = {
    **dict.fromkeys(
        (
            "AgentCapabilities",
            "AgentCard",
            "AgentExtension",
            "AgentProvider",
            "AgentSkill",
            "Artifact",
            "Operation",
            "Part",
            "Role",
            "SendMessageConfiguration",
            "StreamResponse",
            "TaskArtifactUpdateEvent",
            "TaskStatus",
            "TaskStatusUpdateEvent",
        ),
        "skillwire.types",
    ),
    **dict.fromkeys(("MemoryTaskStore", "SQLiteTaskStore", "TaskStore", "open_store"), "skillwire.stores"),
}
# The public subpackages, reachable as attributes (``skillwire.testing.MockAgent``) without an import.
_PUBLIC_MODULES = (
    "client",
    "errors",
    "llm",
    "models",
    "security",
    "server",
    "stores",
    "testing",
    "types",
    "webhooks",
)


def __getattr__(name: str) -> _typing.Any:
    import importlib

    if name in _PUBLIC_MODULES:
        return importlib.import_module(f"skillwire.{name}")
    moved = _MOVED.get(name)
    if moved is not None:
        import warnings

        warnings.warn(
            f"skillwire.{name} moved: import it from {moved} (from {moved} import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moved), name)
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
    "APIKey",
    "Agent",
    "Answer",
    "BaseRequestHandler",
    "Bearer",
    "CallContext",
    "CardSignatureError",
    "CardSigner",
    "Client",
    "ClientError",
    "Executor",
    "HTTPBasic",
    "InvalidParamsError",
    "Limits",
    "McpServer",
    "Message",
    "MutualTLS",
    "OAuth2",
    "OpenIDConnect",
    "Outcome",
    "Principal",
    "PushSettings",
    "RequestContext",
    "RetryPolicy",
    "Security",
    "SkillCard",
    "SkillContext",
    "SkillError",
    "SkillwireError",
    "SyncClient",
    "Task",
    "TaskEvents",
    "TaskFailedError",
    "TaskNotFoundError",
    "TaskState",
    "WebhookPolicy",
    "__version__",
    "compile_schema",
    "validate_json",
    "verify_card",
]
