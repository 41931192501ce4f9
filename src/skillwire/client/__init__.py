"""The A2A client: :class:`Client` over a small :class:`Transport` (JSON-RPC, HTTP+JSON or gRPC; v1.0 or
v0.3), and :class:`SyncClient`, its blocking facade.

Never imports :mod:`skillwire.server`: ``client -> wire -> protocol -> errors``.
"""

from skillwire.client.auth import Credentials, CredentialsProvider, Secret
from skillwire.client.client import (
    CARD_PATH,
    DEFAULT_BINDINGS,
    DEFAULT_TIMEOUT,
    FAILED_STATES,
    PROTOCOL_VERSIONS,
    Answerer,
    Client,
    select_interface,
)
from skillwire.client.errors import (
    AgentConnectionError,
    ClientError,
    HTTPStatusError,
    InvalidResponseError,
    NoCompatibleInterfaceError,
    TaskFailedError,
)
from skillwire.client.progress import StreamProgress
from skillwire.client.retry import RetryPolicy, parse_retry_after
from skillwire.client.sync import SyncClient
from skillwire.client.transport import RESPONSE_TYPES, JsonRpcTransport, RestTransport, Transport

__all__ = [
    "CARD_PATH",
    "DEFAULT_BINDINGS",
    "DEFAULT_TIMEOUT",
    "FAILED_STATES",
    "PROTOCOL_VERSIONS",
    "RESPONSE_TYPES",
    "AgentConnectionError",
    "Answerer",
    "Client",
    "ClientError",
    "Credentials",
    "CredentialsProvider",
    "HTTPStatusError",
    "InvalidResponseError",
    "JsonRpcTransport",
    "NoCompatibleInterfaceError",
    "RestTransport",
    "RetryPolicy",
    "Secret",
    "StreamProgress",
    "SyncClient",
    "TaskFailedError",
    "Transport",
    "parse_retry_after",
    "select_interface",
]
