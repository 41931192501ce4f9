"""``skillwire skills check TARGET`` and ``skillwire skills list TARGET``: an agent's skills, validated from
its source, or listed with their schemas as its card publishes them (of a folder, or of a running agent)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillwire.cli import calls
from skillwire.cli.output import json_text, say
from skillwire.cli.targets import Unreachable, is_agent_url, load_agent, module_attribute
from skillwire.errors import SkillwireError

if TYPE_CHECKING:
    from skillwire.protocol.models import AgentCard

__all__ = ["COMMANDS", "add_parsers", "check_skills", "run"]

COMMANDS = frozenset({"skills"})


def add_parsers(sub: Any) -> None:
    skills = sub.add_parser("skills", help="work with skill folders")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True)
    check = skills_sub.add_parser(
        "check",
        help="validate every SKILL.md (and agent.yaml) in a folder of skills without running code, and the"
        " code skills of its agent.py (or of a .py file), which it imports",
    )
    check.add_argument(
        "folder", help="a folder of skills, a folder with agent.py, a .py file, or module:attribute"
    )
    check.add_argument(
        "--strict", action="store_true", help="fail (exit 1) on warnings too, such as exponential schemas"
    )
    listing = skills_sub.add_parser(
        "list", help="list an agent's skills with their input and output schemas (a folder, or an agent URL)"
    )
    listing.add_argument(
        "target", help="a folder (skills or agent.py), a .py file, module:attribute, or a URL"
    )
    listing.add_argument("--json", action="store_true", help="print the skills and their schemas as JSON")
    listing.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN", help=calls.ALLOW_ORIGIN_HELP
    )


def run(args: argparse.Namespace) -> int:
    if args.skills_command == "list":
        return _list(args.target, as_json=args.json, allowed_origins=args.allow_origin)
    return check_skills(args.folder, strict=args.strict)


def check_skills(folder: str, *, strict: bool = False) -> int:
    """Exit 1 on problems (or on warnings too when ``strict``), else 0; warnings and notes go to stderr.
    ``folder`` is a folder (of skills, or with an agent.py), a .py file or ``module:attribute``."""
    from skillwire.skills.loader import check_code_agent, check_code_module, check_skills_folder

    if is_agent_url(folder):
        raise SkillwireError(
            f"{folder} is the address of a running agent; skills check reads an agent's source (a folder, a"
            f" .py file or module:attribute): to see a running agent's skills, `skillwire skills list {folder}`"
        )
    path = Path(folder)
    if path.suffix == ".py" and path.is_file():
        found = check_code_agent(path)
    elif ":" in folder and not path.exists():
        found = check_code_module(*module_attribute(folder))
    elif path.is_dir():
        found = check_skills_folder(path)
    else:
        raise SkillwireError(f"{folder}: not a folder, a .py file or module:attribute")
    for line in (*found.problems, *found.warnings, *found.notes):
        print(line, file=sys.stderr)
    if found.count == 0:
        print(
            f"{folder}: no skills found (expected sub-folders holding SKILL.md, or an agent.py)",
            file=sys.stderr,
        )
        return 1
    warned = f", {len(found.warnings)} warning(s)" if found.warnings else ""
    if found.problems or (strict and found.warnings):
        problems = f"{len(found.problems)} problem(s){warned}"
        print(f"{problems} in {found.count} skill(s){' (--strict)' if strict else ''}", file=sys.stderr)
        return 1
    print(f"{found.count} skill(s) valid{warned}")
    return 0


def _list(target: str, *, as_json: bool = False, allowed_origins: Sequence[str] = ()) -> int:
    """Print each skill of ``target`` with its schemas, as the card publishes them (skill-schemas extension)."""
    import asyncio
    import json

    from skillwire.skills.schema_card import read_skill_schemas

    if is_agent_url(target):
        card = asyncio.run(_remote_card(calls.agent_url(target), allowed_origins))
    else:
        agent = load_agent(target)
        agent.load_mcp_tools()  # the tools of its MCP servers are skills too (servers down: none, logged)
        card = agent.card()
    schemas = read_skill_schemas(card)
    # A remote agent's card says what it likes: printed through output.say, which strips control sequences.
    if as_json:
        rows = [{"id": s.id, "name": s.name, **schemas.get(s.id, {})} for s in card.skills]
        say(json_text(json.dumps(rows, indent=2)))
        return 0
    for skill in card.skills:
        entry = schemas.get(skill.id, {})
        say(f"{skill.id}: {skill.description} [{', '.join(skill.tags)}]")
        for key in ("input", "output"):
            shown = json.dumps(entry[key], separators=(",", ":")) if key in entry else None
            reason = entry.get("omitted", {}).get(key)
            say(f"  {key}: {shown or (f'(not published: {reason})' if reason else '(no schema)')}")
    if not card.skills:
        print(f"{target}: no skills", file=sys.stderr)
    return 0


async def _remote_card(url: str, allowed_origins: Sequence[str]) -> AgentCard:
    from skillwire.client import Client, UntrustedOriginError

    try:
        async with await Client.connect(url, retries=0, allowed_origins=allowed_origins) as client:
            return client.card
    except UntrustedOriginError as exc:
        raise SkillwireError(f"{exc.explanation}. If you trust it: --allow-origin {exc.origin}") from None
    except Exception as exc:  # connection refused, not a card, ...: one line, no traceback
        raise Unreachable(f"cannot read the agent card at {url}: {exc}") from None
