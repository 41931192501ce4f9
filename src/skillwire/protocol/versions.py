"""Protocol versions and the ``A2A-Version`` service parameter.

Versions are ``Major.Minor``; a patch part is ignored. A missing or empty value means 0.3 (specification
section 7.1). This server speaks 1.0 only for now; 0.3 arrives with its codec.
"""

from __future__ import annotations

from skillwire.errors import VersionNotSupportedError

__all__ = ["DEFAULT_VERSION_WHEN_ABSENT", "SUPPORTED_VERSIONS", "negotiate_version"]

SUPPORTED_VERSIONS: tuple[str, ...] = ("1.0",)
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


def negotiate_version(header: str | None) -> str:
    """The protocol version to speak for a request carrying ``header``, or VersionNotSupportedError."""
    supported = ", ".join(SUPPORTED_VERSIONS)
    if header is None or not header.strip():
        raise VersionNotSupportedError(
            f"No A2A-Version was sent, which means protocol {DEFAULT_VERSION_WHEN_ABSENT}; this server"
            f" does not serve {DEFAULT_VERSION_WHEN_ABSENT} yet. Supported versions: {supported}."
            " Send 'A2A-Version: 1.0'.",
            metadata={"requestedVersion": DEFAULT_VERSION_WHEN_ABSENT, "supportedVersions": supported},
        )
    version = _major_minor(header)
    if version is None or version not in SUPPORTED_VERSIONS:
        raise VersionNotSupportedError(
            f"A2A-Version {header.strip()!r} is not supported. Supported versions: {supported}.",
            metadata={"requestedVersion": header.strip()[:64], "supportedVersions": supported},
        )
    return version
