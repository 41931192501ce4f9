"""Errors raised by the client that are not protocol errors.

Protocol errors arrive as the :mod:`skillwire.errors` classes (``TaskNotFoundError`` ...), the same on every
binding. The failures below belong to the client side of the conversation::

    SkillwireError
    +-- ClientError
        +-- TaskFailedError            a task ended FAILED, REJECTED or CANCELED (``raise_on_failure=True``)
        +-- AgentConnectionError       the agent could not be reached, or a connection broke
        +-- HTTPStatusError            an HTTP failure that carries no protocol error (429, 503, a proxy's 502)
        +-- NoCompatibleInterfaceError the card offers no interface this client can speak
        +-- InvalidResponseError       the agent answered with something that is not A2A v1.0
        +-- UntrustedOriginError       the card names an interface on an origin this client may not send its
            |                          credentials to (see :mod:`skillwire.client.origins`)
            +-- InsecureDowngradeError an https URL whose card names an interface without TLS
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillwire.errors import A2AError, SkillwireError

if TYPE_CHECKING:
    from skillwire.protocol.models import Task

__all__ = [
    "AgentConnectionError",
    "ClientError",
    "HTTPStatusError",
    "InsecureDowngradeError",
    "InvalidResponseError",
    "NoCompatibleInterfaceError",
    "TaskFailedError",
    "UntrustedOriginError",
]


class ClientError(SkillwireError):
    """Base of the client's own errors."""


class TaskFailedError(ClientError):
    """A task ended FAILED, REJECTED or CANCELED; ``task`` is its final snapshot."""

    def __init__(self, task: Task) -> None:
        self.task = task
        state = task.status.state
        note = task.status.message.text() if task.status.message is not None else ""
        super().__init__(f"task {task.id} ended {state.value}" + (f": {note}" if note else ""))


class AgentConnectionError(ClientError):
    """The agent could not be reached or the connection broke (the httpx error is the ``__cause__``)."""

    @classmethod
    def of(cls, exc: Exception) -> AgentConnectionError:
        """The error for an httpx transport error; a timeout says how long was waited."""
        text = str(exc)
        request = getattr(exc, "request", None) if _has_request(exc) else None
        timeouts = request.extensions.get("timeout") if request is not None else None
        if not text and isinstance(timeouts, dict):
            waited = timeouts.get(_PHASES.get(type(exc).__name__, "read"))
            if isinstance(waited, int | float):
                text = f"no answer within {waited:g} s"
        return cls(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


#: httpx's timeout errors -> the phase of ``Timeout`` each is about.
_PHASES = {"ConnectTimeout": "connect", "ReadTimeout": "read", "WriteTimeout": "write", "PoolTimeout": "pool"}


class HTTPStatusError(ClientError):
    """An HTTP error response without an A2A error in it, or a 429/503 (raised as such for the retry policy,
    whatever it holds). ``retry_after`` is the ``Retry-After`` header in seconds, when the agent sent one;
    ``error`` the A2A error the body holds, if any (a ServerBusyError: busy, the task store unavailable)."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        retry_after: float | None = None,
        error: A2AError | None = None,
    ) -> None:
        self.status_code = status_code
        self.retry_after = retry_after
        self.error = error
        super().__init__(f"HTTP {status_code}: {message}" if message else f"HTTP {status_code}")


class NoCompatibleInterfaceError(ClientError):
    """The agent card lists no interface with an accepted binding and protocol version 1.0."""


class InvalidResponseError(ClientError):
    """The agent's answer does not decode as the A2A v1.0 message expected."""


class UntrustedOriginError(ClientError):
    """The agent card names an interface on an origin the client will not use as configured: it has
    credentials and the origin is neither the one named nor an allowed one. Nothing was sent there.

    ``explanation`` says what was refused and why (the message adds how to allow it), ``card_url`` is the
    card's URL, ``interface_url`` the URL it names, ``origin`` that URL's origin and ``named_origin`` the
    one of the URL the client was given; ``allowed_origins=[origin]`` allows it."""

    def __init__(
        self, explanation: str, *, card_url: str, interface_url: str, origin: str, named_origin: str
    ) -> None:
        self.explanation = explanation
        self.card_url = card_url
        self.interface_url = interface_url
        self.origin = origin
        self.named_origin = named_origin
        super().__init__(f"{explanation}. If you trust it, allow it explicitly: allowed_origins=[{origin!r}]")


class InsecureDowngradeError(UntrustedOriginError):
    """The client was given an https URL and the card names an interface without TLS (``http://``, a
    plaintext gRPC target): refused, credentials or not, unless that origin is allowed."""


def _has_request(exc: Exception) -> bool:
    """Whether an httpx error knows its request (reading ``.request`` of one that does not raises)."""
    try:
        return getattr(exc, "request", None) is not None
    except RuntimeError:
        return False
