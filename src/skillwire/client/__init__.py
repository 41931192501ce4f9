"""The A2A client: :class:`Client` over a small :class:`Transport` (JSON-RPC, HTTP+JSON or gRPC; v1.0 or
v0.3), and :class:`SyncClient`, its blocking facade.

A public subpackage: ``Client``, ``SyncClient``, ``RetryPolicy``, ``ClientError`` and ``TaskFailedError`` are
also in the front door (``from skillwire import Client``); the client's other failures and the credential
types are here. Its modules (``skillwire.client.client``, ``.transport``, ...) are internal.

Never imports :mod:`skillwire.server`: ``client -> wire -> protocol -> errors``.
"""

from skillwire.client.auth import Credentials, CredentialsProvider, Secret
from skillwire.client.client import Client
from skillwire.client.errors import (
    AgentConnectionError,
    ClientError,
    HTTPStatusError,
    InsecureDowngradeError,
    InvalidResponseError,
    NoCompatibleInterfaceError,
    TaskFailedError,
    UntrustedOriginError,
)
from skillwire.client.retry import RetryPolicy
from skillwire.client.sync import SyncClient
from skillwire.client.transport import JsonRpcTransport, RestTransport, Transport

__all__ = [
    "AgentConnectionError",
    "Client",
    "ClientError",
    "Credentials",
    "CredentialsProvider",
    "HTTPStatusError",
    "InsecureDowngradeError",
    "InvalidResponseError",
    "JsonRpcTransport",
    "NoCompatibleInterfaceError",
    "RestTransport",
    "RetryPolicy",
    "Secret",
    "SyncClient",
    "TaskFailedError",
    "Transport",
    "UntrustedOriginError",
]
