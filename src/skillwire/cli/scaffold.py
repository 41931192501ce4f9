"""``skillwire new skill NAME [--dir DIR]``: write a working skill folder to start from.

The folder is ``DIR/NAME`` (DIR defaults to the current directory, made if missing) with a ``SKILL.md`` whose
frontmatter ``skillwire skills check`` accepts and a ``skill.py`` with ``async def run(params, ctx)``, so
``skillwire serve DIR`` serves it at once. The manifest is parsed before anything is written: a NAME that
is not a valid skill id is refused with the manifest's reason, and an existing folder is never overwritten.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from skillwire.errors import ManifestError, SkillwireError

__all__ = ["COMMANDS", "add_parsers", "run", "skill_files"]

COMMANDS = frozenset({"new"})

_MANIFEST = """\
---
id: {id}
name: {name}
description: {description}
tags: [{tag}]
examples: [Ada]
inputModes: [text/plain, application/json]
outputModes: [text/plain]
inputSchema:
  type: object
  properties:
    text: {{type: string, minLength: 1, maxLength: 1000}}
  required: [text]
outputSchema: {{type: string}}
executionHints:
  timeoutSeconds: 30
---
Answer this message: {{{{ text }}}}
"""

_CODE = '''\
"""The {id} skill. Send it text ("Ada") or data ({{"text": "Ada"}}); docs/skills.md has the whole API."""

from __future__ import annotations

from typing import Any

from skillwire import SkillContext, SkillError


async def run(params: dict[str, Any], ctx: SkillContext) -> str:
    """``params`` is the message's first data part, or {{"text": <its text>}}, checked against the
    inputSchema of SKILL.md; the string returned is the task's text artifact."""
    text = params["text"].strip()
    if not text:
        raise SkillError.invalid_request("Send some text.")
    # ctx.prompt() renders the body of SKILL.md with the params: hand it to a model here.
    return f"{{ctx.skill_id}} received: {{text}}"
'''


def skill_files(skill_id: str) -> dict[str, str]:
    """The files of a new skill ``skill_id`` (SKILL.md and skill.py), the manifest already checked; a
    ManifestError if ``skill_id`` is not a valid skill id."""
    from skillwire.skills.loader import CODE, MANIFEST
    from skillwire.skills.manifest import SkillCard

    words = skill_id.replace("-", " ").replace("_", " ").replace(".", " ").split()
    name = " ".join(words).capitalize() or skill_id
    manifest = _MANIFEST.format(
        id=json.dumps(skill_id),
        name=json.dumps(name),
        description=json.dumps(f"What {name} does, in one sentence (edit me)."),
        tag=json.dumps(skill_id.lower()),
    )
    SkillCard.parse(manifest, source=f"{skill_id}/{MANIFEST}")
    return {MANIFEST: manifest, CODE: _CODE.format(id=skill_id)}


def add_parsers(sub: Any) -> None:
    """Add ``new skill`` to the ``skillwire`` subparsers ``sub``."""
    new = sub.add_parser("new", help="write a new skill folder to start from")
    kinds = new.add_subparsers(dest="new_command", required=True)
    skill = kinds.add_parser("skill", help="a skill folder: SKILL.md and skill.py")
    skill.add_argument("name", help="the skill id, also the folder's name (e.g. summarize)")
    skill.add_argument(
        "--dir", default=".", help="the folder of skills to put it in (default: here; made if missing)"
    )


def run(args: argparse.Namespace) -> int:
    """Write the new skill folder; raise SkillwireError (exit 2) if it cannot."""
    folder = Path(args.dir) / args.name
    try:
        files = skill_files(args.name)
    except ManifestError as exc:
        raise SkillwireError(f"cannot make a skill named {args.name!r}: {exc.reason}") from None
    if folder.exists():
        raise SkillwireError(f"{folder} already exists: pick another name, or remove it first")
    try:
        folder.mkdir(parents=True)
        for filename, text in files.items():
            (folder / filename).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SkillwireError(f"cannot write {folder}: {exc}") from None
    from skillwire.skills.loader import CODE, MANIFEST

    print(f"created {folder}/{MANIFEST} and {folder}/{CODE}")
    print(f"  check it: skillwire skills check {args.dir}", file=sys.stderr)
    print(f"  serve it: skillwire serve {args.dir}", file=sys.stderr)
    return 0
