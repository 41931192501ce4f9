"""Media types of parts, and whether a list of modes accepts them.

A part's media type is its ``mediaType`` when it has one; otherwise a text part is ``text/plain``, a data
part ``application/json`` and a file part (``raw`` or ``url``) ``application/octet-stream``. A mode accepts a
media type when they are the same type (case-insensitive, parameters such as ``; charset=utf-8`` ignored), or
the mode is ``*/*``, or the mode is ``type/*`` and the media type is of that type. An empty list of modes
accepts everything (no modes declared, or a client that did not say).

::

    >>> accepts(["image/*"], "image/png"), accepts(["text/plain"], media_type_of(Part(data={})))
    (True, False)
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET

from skillwire.protocol.models import Part

__all__ = ["accepts", "media_type_of", "refused_part"]


def media_type_of(part: Part) -> str:
    """The media type ``part`` carries, or the one its kind implies."""
    if part.media_type:
        return part.media_type
    if part.text is not UNSET:
        return "text/plain"
    if part.data is not UNSET:
        return "application/json"
    return "application/octet-stream"


def _essence(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


def accepts(modes: Sequence[str], media_type: str) -> bool:
    """Whether ``modes`` accept ``media_type`` (an empty ``modes`` accepts everything)."""
    if not modes or media_type in modes:  # the common case, spelled as declared
        return True
    wanted = _essence(media_type)
    kind = wanted.split("/", 1)[0]
    for mode in modes:
        mode = _essence(mode)
        if mode in ("*/*", "*", wanted) or (mode.endswith("/*") and mode[:-2] == kind):
            return True
    return False


def refused_part(parts: Sequence[Part], modes: Sequence[str]) -> tuple[int, str] | None:
    """The index and media type of the first of ``parts`` that ``modes`` do not accept, or None."""
    if not modes:
        return None
    for index, part in enumerate(parts):
        media_type = media_type_of(part)
        if not accepts(modes, media_type):
            return index, media_type
    return None
