"""File descriptors: what the process may open, and how many client connections that leaves room for.

Every connection is a descriptor. When they run out, ``accept()`` fails and the listener stops for a while,
so that even a request the server could answer fails. :func:`raise_fd_limit` lifts the soft
``RLIMIT_NOFILE`` to the hard limit (``skillwire serve`` does it at start); :func:`connection_ceiling` keeps
a listener's ``max_connections`` below what is left once a margin is kept for the store, logs, the event
loop and worker threads, so that one connection over the budget can still be accepted and refused::

    from skillwire.server.bindings.descriptors import connection_ceiling, raise_fd_limit

    raise_fd_limit()
    max_connections = connection_ceiling(limits.max_connections, listeners=2)  # HTTP and gRPC
"""

from __future__ import annotations

import logging
import sys

__all__ = ["connection_ceiling", "fd_limit", "raise_fd_limit"]

log = logging.getLogger("skillwire.http")

#: Descriptors kept for everything but client connections: an eighth of the limit, and at least this many.
FD_RESERVE_MIN = 64
FD_RESERVE_FRACTION = 8


def fd_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE`` (``None`` where there is none, or it is unlimited)."""
    if sys.platform == "win32":
        return None
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def raise_fd_limit() -> int | None:
    """Lift the soft ``RLIMIT_NOFILE`` to the hard limit where the system allows it; the soft limit after."""
    if sys.platform == "win32":
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # macOS refuses an unlimited soft limit; keep what there is
            log.debug("could not raise RLIMIT_NOFILE from %s to %s", soft, hard)
    return fd_limit()


def connection_ceiling(wanted: int, *, listeners: int = 1, what: str = "HTTP") -> int:
    """``wanted`` connections, or fewer if the process may not open that many files (with a margin);
    ``listeners`` servers (HTTP, gRPC) share the descriptors. A lowered value is logged."""
    limit = fd_limit()
    if limit is None:
        return wanted
    reserve = max(FD_RESERVE_MIN, limit // FD_RESERVE_FRACTION)
    ceiling = max(1, (limit - reserve) // listeners)
    if wanted <= ceiling:
        return wanted
    log.warning(
        "%s max_connections lowered from %d to %d: the process may open %d files (RLIMIT_NOFILE), and "
        "%d are kept for other uses; raise the limit (ulimit -n) to allow more",
        what,
        wanted,
        ceiling,
        limit,
        reserve,
    )
    return ceiling
