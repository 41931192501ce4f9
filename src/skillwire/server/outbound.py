"""Moved to :mod:`skillwire.server.notifications.outbound`; this old path warns, and goes in the release after next."""

from typing import Any

from skillwire.server._moved import forward


def __getattr__(name: str) -> Any:
    return forward(__name__, name)
