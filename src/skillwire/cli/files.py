"""Files on this machine for the client commands: a ``--file`` to attach as a part, the ``--out`` folder
checked, and the file parts of artifacts saved into it under safe, fresh names."""

from __future__ import annotations

import argparse
import itertools
import mimetypes
import os
import re
from pathlib import Path

from skillwire.protocol import models as m

__all__ = ["LocalError", "check_out_dir", "file_part", "save_file"]


class LocalError(Exception):
    """A problem on this machine (a file to attach or a folder to save into), reported as one line."""


_UNSAFE_CHARS = re.compile(r'[<>:"/\\|?*]')
_RESERVED_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
)


def _safe_filename(name: str) -> str:
    """The last path segment of ``name``, harmless as a file name in any folder ("" if nothing is left):
    no separators, drive letters, control characters, ``.`` or ``..``, nor a name Windows reserves."""
    base = re.split(r"[/\\]", name)[-1]
    base = _UNSAFE_CHARS.sub("_", "".join(ch for ch in base if ch.isprintable())).strip()
    if base.strip(".") == "":
        return ""
    stem, suffix = os.path.splitext(base)
    if stem.upper() in _RESERVED_NAMES:
        stem = "_" + stem
    return stem[: 200 - len(suffix[:50])] + suffix[:50]


def file_part(path: str, limit: int) -> m.Part:
    """The file at ``path`` as a part: its bytes, its name, a media type guessed from the name."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > limit:
            raise LocalError(
                f"--file {path} is {size} bytes, above the limit of {limit} bytes (see --max-file-size)"
            )
        data = file.read_bytes()
    except OSError as exc:
        raise LocalError(f"cannot read --file {path}: {exc.strerror or exc}") from None
    media_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return m.Part(raw=data, filename=file.name, media_type=media_type)


def check_out_dir(args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that exists and is not a folder (before anything is sent)."""
    out = getattr(args, "out", None)
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise LocalError(f"--out {out} is not a folder")


def save_file(out_dir: Path, part: m.Part, artifact_id: str) -> tuple[Path, int]:
    """Write a file part into ``out_dir`` under a fresh name; never overwrites or leaves the folder."""
    assert isinstance(part.raw, bytes)
    name = _safe_filename(part.filename)
    if not name:
        extension = mimetypes.guess_extension(part.media_type.partition(";")[0].strip().lower())
        name = (_safe_filename(artifact_id) or "artifact") + (extension or ".bin")
    if Path(name).name != name or name in (".", ".."):  # the last guard against path traversal
        raise LocalError(f"refusing to save {part.filename!r} outside {out_dir}")
    stem, suffix = os.path.splitext(name)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for n in itertools.count():
            path = out_dir / (name if n == 0 else f"{stem}-{n}{suffix}")
            try:
                with path.open("xb") as file:  # exclusive: an existing file (or symlink) is kept
                    file.write(part.raw)
            except FileExistsError:
                continue
            return path, len(part.raw)
    except OSError as exc:
        raise LocalError(f"cannot save into {out_dir}: {exc.strerror or exc}") from None
    raise AssertionError("unreachable")  # pragma: no cover
