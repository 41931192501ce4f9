"""The A2A client: :class:`Client` over a small :class:`Transport` (JSON-RPC or HTTP+JSON).

Never imports :mod:`skillwire.server`: ``client -> wire -> protocol -> errors``.
"""

from skillwire.client.client import CARD_PATH, DEFAULT_TIMEOUT, FAILED_STATES, Client, select_interface
from skillwire.client.errors import (
    AgentConnectionError,
    ClientError,
    HTTPStatusError,
    InvalidResponseError,
    NoCompatibleInterfaceError,
    TaskFailedError,
)
from skillwire.client.progress import StreamProgress
from skillwire.client.retry import RetryPolicy
from skillwire.client.transport import RESPONSE_TYPES, JsonRpcTransport, RestTransport, Transport

__all__ = [
    "CARD_PATH",
    "DEFAULT_TIMEOUT",
    "FAILED_STATES",
    "RESPONSE_TYPES",
    "AgentConnectionError",
    "Client",
    "ClientError",
    "HTTPStatusError",
    "InvalidResponseError",
    "JsonRpcTransport",
    "NoCompatibleInterfaceError",
    "RestTransport",
    "RetryPolicy",
    "StreamProgress",
    "TaskFailedError",
    "Transport",
    "select_interface",
]
