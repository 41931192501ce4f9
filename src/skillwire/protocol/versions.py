"""Protocol versions and the ``A2A-Version`` service parameter.

Versions are ``Major.Minor``; a patch part is ignored. A missing or empty value means 0.3 (specification
section 7.1). The HTTP bindings serve 1.0, 1.1 as drafted (1.0 with generations, docs/streaming.md) and,
through the v0.3 codec, 0.3; gRPC serves 1.0 and 1.1 (the v0.3 gRPC service had another package name).
"""

from __future__ import annotations

from skillwire.errors import VersionNotSupportedError

__all__ = ["DEFAULT_VERSION_WHEN_ABSENT", "SUPPORTED_VERSIONS", "V1_ONLY", "negotiate_version"]

SUPPORTED_VERSIONS: tuple[str, ...] = ("1.0", "1.1", "0.3")
V1_ONLY: tuple[str, ...] = ("1.0", "1.1")
DEFAULT_VERSION_WHEN_ABSENT = "0.3"


def _major_minor(value: str) -> str | None:
    parts = value.strip().split(".")
    if (
        len(parts) < 2
        or len(parts) > 3
        or not all(p.isascii() and p.isdigit() and len(p) < 10 for p in parts)
    ):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def negotiate_version(header: str | None, supported: tuple[str, ...] = SUPPORTED_VERSIONS) -> str:
    """The protocol version to speak for a request carrying ``header``, or VersionNotSupportedError."""
    if header is not None and header in supported:  # as written here ("1.0"): the common case
        return header
    listed = ", ".join(supported)
    if header is None or not header.strip():
        if DEFAULT_VERSION_WHEN_ABSENT in supported:
            return DEFAULT_VERSION_WHEN_ABSENT
        raise VersionNotSupportedError(
            f"No A2A-Version was sent, which means protocol {DEFAULT_VERSION_WHEN_ABSENT}; it is not served"
            f" here. Supported versions: {listed}. Send 'A2A-Version: 1.0'.",
            metadata={"requestedVersion": DEFAULT_VERSION_WHEN_ABSENT, "supportedVersions": listed},
        )
    version = _major_minor(header)
    if version is None or version not in supported:
        raise VersionNotSupportedError(
            f"A2A-Version {header.strip()!r} is not supported. Supported versions: {listed}.",
            metadata={"requestedVersion": header.strip()[:64], "supportedVersions": listed},
        )
    return version
