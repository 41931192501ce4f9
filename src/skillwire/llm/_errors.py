"""The errors of a model call. Each message is safe to show a caller; the provider's own words never are::

    SkillwireError
    +-- ProviderError                 a model call that failed; ``vendor``, ``status``, ``detail``, ``url``
        +-- ProviderConfigError       a providerConfig the adapter cannot use (``key``: which key): an unknown
        |                             vendor, no model, a credential written in the manifest, an unset variable
        +-- ProviderUnavailable       the provider cannot be reached (connection refused, reset, DNS)
        +-- ProviderTimeout           no complete reply within ``timeoutSeconds`` (retries included)
        +-- ProviderRateLimited       429, and its Retry-After does not fit in what is left of the timeout
        +-- ProviderRefused           any other 4xx: a bad key, an unknown model, parameters it does not take
        +-- ProviderBadReply          5xx, or a reply that is not what the wire format promises
            +-- ProviderReplyTooLarge a reply over the adapter's ``max_reply_bytes``

``detail`` holds what the provider said (its error body, the text that did not parse), cut to
:data:`DETAIL_LIMIT` characters, for the server's logs only: ``str(error)`` never contains it, so a task's
status message made from ``str(error)`` tells a caller what failed without relaying the provider's text.
Before it is kept, what looks like a credential in it is replaced (:func:`redact`), and the adapter also
replaces the very key it sent: a provider that echoes the request's key would otherwise put it in the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillwire.errors import SkillwireError

__all__ = [
    "DETAIL_LIMIT",
    "ProviderBadReply",
    "ProviderConfigError",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderRefused",
    "ProviderReplyTooLarge",
    "ProviderTimeout",
    "ProviderUnavailable",
    "redact",
]

#: The most characters of the provider's own text an error keeps (on ``detail``).
DETAIL_LIMIT = 4096

REDACTED = "[redacted]"
#: Credentials by their look: a bearer token, a named key or secret with its value, a vendor's key prefix.
_CREDENTIALS = re.compile(
    r"(?i)(\bbearer\s+)[^\s\"',;]{6,}"
    r"|(\b(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|authorization)"
    r"[\"']?\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+)?)[^\s\"',;&]{4,}"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (4 characters or more) and anything that looks like a credential
    replaced by ``[redacted]``.

    >>> redact('{"error": "invalid key sk-abcdef123456", "auth": "Bearer abc.def.ghi"}')
    '{"error": "invalid key [redacted]", "auth": "Bearer [redacted]"}'
    """
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return _CREDENTIALS.sub(lambda m: (m.group(1) or m.group(2) or "") + REDACTED, text)


class ProviderError(SkillwireError):
    """A model call that failed. ``str(error)`` is safe to show a caller; ``detail`` (the provider's text,
    for logs) is not."""

    def __init__(
        self, message: str, *, vendor: str = "", status: int | None = None, detail: str | None = None
    ) -> None:
        super().__init__(message)
        self.vendor = vendor
        #: The HTTP status the provider answered, when it answered one.
        self.status = status
        #: What the provider said, for the server's logs (what looks like a credential replaced); never part
        #: of the message.
        self.detail = None if detail is None else redact(detail[:DETAIL_LIMIT])
        #: The URL the call went to (without its query), for the server's logs; None before any request.
        self.url: str | None = None


class ProviderConfigError(ProviderError):
    """A providerConfig the adapter cannot use; ``key`` is the key at fault (``"vendor"``, ``"apiKey"``)."""

    def __init__(self, message: str, *, key: str, vendor: str = "") -> None:
        super().__init__(message, vendor=vendor)
        self.key = key


class ProviderUnavailable(ProviderError):
    """The provider cannot be reached: nothing listens, the connection was reset, the name does not resolve."""


class ProviderTimeout(ProviderError):
    """The provider gave no complete reply within the call's timeout (``timeout`` seconds, retries included)."""

    def __init__(self, message: str, *, vendor: str = "", timeout: float) -> None:
        super().__init__(message, vendor=vendor)
        self.timeout = timeout


class ProviderRateLimited(ProviderError):
    """The provider answered 429 and waiting as it asked (``retry_after`` seconds, None when it did not
    say) would not fit in the call's timeout, or it kept answering 429."""

    def __init__(
        self, message: str, *, vendor: str = "", retry_after: float | None, detail: str | None = None
    ) -> None:
        super().__init__(message, vendor=vendor, status=429, detail=detail)
        self.retry_after = retry_after


class ProviderRefused(ProviderError):
    """The provider refused the request (a 4xx other than 429): a bad key, an unknown model, bad parameters."""


class ProviderBadReply(ProviderError):
    """The provider failed (5xx) or answered something the wire format does not allow (not JSON, fields
    missing or of the wrong type, a stream that ends early)."""


class ProviderReplyTooLarge(ProviderBadReply):
    """The reply grew past the adapter's ``max_reply_bytes``; the rest was not read."""
