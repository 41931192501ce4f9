"""Loading skills from folders and from installed packages.

A skills folder holds one sub-folder per skill, each with a ``SKILL.md`` manifest and a ``skill.py`` that
defines ``async def run(params, ctx)`` (a ``def run`` runs in a worker thread) (and, for a skill that delegates, ``async def follow(ref, ctx)``).
A manifest with a ``providerConfig`` and no ``skill.py`` is a model-backed skill, run by a model adapter
(``skills/model.py``; its providerConfig is checked when it loads). An optional ``agent.yaml`` at the root
names the agent::

    name: Greeter
    description: Greets people.
    version: 1.2.0
    provider: {organization: Example Inc., url: https://example.com}
    documentationUrl: https://example.com/docs
    security: {schemes: {apiKey: {type: apiKey, keysFromEnv: AGENT_KEYS}}}   # see skills/security_config.py

Installed packages contribute skills through the ``skillwire.skills`` entry-point group: each entry point
loads to a skills folder path (``str`` or ``pathlib.Path``) or to a callable returning one. Their skills are
marked with the distribution they came from.

The manifest is only data (see ``manifest.py``); ``skill.py`` is code the operator chose to serve, imported
as a module. Files are read with their size checked first: a ``SKILL.md`` of at most ``MAX_FILE_BYTES``
(1 MiB), an ``agent.yaml`` of at most ``MAX_AGENT_FILE_BYTES`` (256 KiB); either larger, or not UTF-8, is a
ManifestError naming the file.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillwire.errors import ManifestError, SkillwireError
from skillwire.protocol.models import AgentProvider
from skillwire.skills import _yaml
from skillwire.skills._yaml import LineMap
from skillwire.skills.manifest import ManifestWarning, SkillCard, lint_manifest, read_manifest_text
from skillwire.skills.model import check_provider_config, model_skill
from skillwire.skills.registry import Skill, collecting_code_skills, skill_from_manifest
from skillwire.skills.schema_card import skill_schemas_extension
from skillwire.skills.schema_cost import cost_warnings
from skillwire.skills.security_config import SecuritySpec, parse_security

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_AGENT_FILE_BYTES",
    "AgentConfig",
    "FolderCheck",
    "check_code_agent",
    "check_code_module",
    "check_skills_folder",
    "import_file",
    "is_skills_folder",
    "load_agent_config",
    "load_skills_folder",
    "plugin_skills",
]

ENTRY_POINT_GROUP = "skillwire.skills"
MANIFEST = "SKILL.md"
CODE = "skill.py"
AGENT_FILE = "agent.yaml"
CODE_AGENT = "agent.py"
#: The largest agent.yaml accepted, in bytes (checked before it is read): the frontmatter limit of a SKILL.md.
MAX_AGENT_FILE_BYTES = _yaml.MAX_FRONTMATTER_BYTES
_AGENT_KEYS = {
    "name",
    "description",
    "version",
    "provider",
    "documentationUrl",
    "iconUrl",
    "security",
    "mcpServers",
}
#: The keys of one ``mcpServers`` entry (skillwire.McpServer's fields, in agent.yaml's spelling).
_MCP_SERVER_KEYS = {"name", "command", "url", "env", "headers", "timeout"}


@dataclass(frozen=True, slots=True)
class AgentConfig:
    name: str
    description: str = ""
    version: str = "1.0.0"
    provider: AgentProvider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The ``security:`` section, checked (its secrets are read from the environment when it is built).
    security: SecuritySpec | None = None
    #: The ``mcpServers:`` entries, checked: keyword arguments of skillwire.McpServer, one dict each.
    mcp_servers: tuple[dict[str, Any], ...] = ()


def is_skills_folder(path: Path) -> bool:
    return path.is_dir() and any((sub / MANIFEST).is_file() for sub in path.iterdir() if sub.is_dir())


def _skill_dirs(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise SkillwireError(f"{folder}: not a folder")
    return sorted(sub for sub in folder.iterdir() if sub.is_dir() and (sub / MANIFEST).is_file())


def _read_card(skill_dir: Path) -> tuple[SkillCard, LineMap]:
    manifest = skill_dir / MANIFEST
    return SkillCard._parse(read_manifest_text(manifest), str(manifest))


def import_file(file: Path, prefix: str) -> Any:
    """Import the Python file ``file`` as a module of its own (named after ``prefix`` and its path)."""
    name = f"{prefix}_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise SkillwireError(f"{file}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import_code(skill_dir: Path, skill_id: str) -> Any:
    code = skill_dir / CODE
    if not code.is_file():
        raise SkillwireError(f"{skill_dir}: no {CODE} next to {MANIFEST}")
    return import_file(code, f"skillwire_skill_{skill_id.replace('-', '_').replace('.', '_')}")


def load_skills_folder(folder: Path | str, *, source: str | None = None) -> list[Skill]:
    """Every skill in ``folder``; a broken manifest or a missing ``run`` raises with its location."""
    folder = Path(folder)
    skills = []
    for skill_dir in _skill_dirs(folder):
        card, lines = _read_card(skill_dir)
        where = source or f"folder:{skill_dir}"
        if card.provider_config is not None and not (skill_dir / CODE).is_file():
            skills.append(model_skill(card, source=where, lines=lines))  # run by a model: no code
            continue
        module = _import_code(skill_dir, card.id)
        run = getattr(module, "run", None)
        if not callable(run):
            raise SkillwireError(
                f"{skill_dir / CODE}: must define `async def run(params, ctx)` (or `def run`)"
            )
        follow = getattr(module, "follow", None)
        if follow is not None and not inspect.iscoroutinefunction(follow):
            raise SkillwireError(f"{skill_dir / CODE}: `follow` must be `async def follow(ref, ctx)`")
        skills.append(skill_from_manifest(card, run, follow=follow, source=where))
    return skills


@dataclass(frozen=True, slots=True)
class FolderCheck:
    """What ``check_skills_folder`` found: the manifests seen, their problems, their warnings, and notes on
    what it did not check."""

    count: int
    problems: list[ManifestError]
    warnings: list[ManifestWarning]
    notes: list[str]


def check_skills_folder(folder: Path | str) -> FolderCheck:
    """Parse every manifest in ``folder`` (and its agent.yaml) without importing any code; with an
    ``agent.py`` in it, also check its code skills (which imports it: see :func:`check_code_agent`)."""
    folder = Path(folder)
    problems: list[ManifestError] = []
    warnings: list[ManifestWarning] = []
    dirs = _skill_dirs(folder)
    # agent.py first, as serving the folder would: the model adapters it registers are the vendors the
    # manifests' providerConfig may name
    code = check_code_agent(folder / CODE_AGENT) if (folder / CODE_AGENT).is_file() else None
    declared: frozenset[str] = frozenset()
    if (folder / AGENT_FILE).is_file():
        try:
            config = load_agent_config(folder)
        except ManifestError as exc:
            problems.append(exc)
        else:
            declared = config.security.names if config.security is not None else frozenset()
    seen: dict[str, Path] = {}
    for skill_dir in dirs:
        manifest = skill_dir / MANIFEST
        try:
            text = read_manifest_text(manifest)
            card, found = lint_manifest(text, source=str(manifest))
        except ManifestError as exc:
            problems.append(exc)
            continue
        warnings.extend(found)
        for requirement in card.security_requirements:  # they must name what agent.yaml declares
            for name in requirement:
                if name not in declared:
                    known = ", ".join(sorted(declared)) or "none: agent.yaml declares no security"
                    problems.append(
                        ManifestError(
                            f"names security scheme {name!r}, which agent.yaml does not declare (declared: {known})",
                            path="securityRequirements",
                            source=card.source,
                        )
                    )
        if card.id in seen:
            problems.append(
                ManifestError(f"duplicate skill id (also in {seen[card.id]})", path="id", source=card.source)
            )
        seen[card.id] = skill_dir
        if (skill_dir / CODE).is_file():
            continue
        if card.provider_config is None:
            problems.append(
                ManifestError(f"no {CODE} next to the manifest, and no providerConfig", source=card.source)
            )
        else:  # a model-backed skill: its providerConfig must suit an adapter (no code imported, no network)
            try:
                check_provider_config(card, SkillCard._parse(text, str(manifest))[1])
            except ManifestError as exc:
                problems.append(exc)
    if code is None:
        return FolderCheck(len(dirs), problems, warnings, [])
    return FolderCheck(
        len(dirs) + code.count, [*code.problems, *problems], [*code.warnings, *warnings], code.notes
    )


def check_code_agent(file: Path | str, *, attribute: str = "agent") -> FolderCheck:
    """Import the Python file ``file`` (running its module code, unlike a manifest check) and check every
    code skill it defines with ``@agent.skill``: the problems that would stop it from being served, and
    the same warnings as for a manifest's schemas (exponential constructs, a schema the card leaves out)."""
    file = Path(file)
    folder = str(file.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return _check_imported(lambda: import_file(file, "skillwire_check"), str(file), attribute)


def check_code_module(module: str, attribute: str = "agent") -> FolderCheck:
    """:func:`check_code_agent` for the module named ``module`` (``skillwire skills check module:attribute``;
    the working directory is importable, as for ``skillwire serve``); SkillwireError when there is no such
    module."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise SkillwireError(f"{module}:{attribute}: cannot import {module}: {exc}") from None
    if spec is None:
        raise SkillwireError(f"{module}:{attribute}: no module named {module!r}")
    return _check_imported(lambda: importlib.import_module(module), spec.origin or module, attribute)


def _check_imported(load: Callable[[], Any], source: str, attribute: str) -> FolderCheck:
    problems: list[ManifestError] = []
    with collecting_code_skills() as found:
        try:
            module = load()
        except (Exception, SystemExit) as exc:  # the module itself fails: the one problem we can report
            problems.append(ManifestError(f"cannot import: {type(exc).__name__}: {exc}", source=source))
        else:
            # what start-up would refuse: skills' securityRequirements naming undeclared schemes, ...
            check = getattr(getattr(module, attribute, None), "check_security", None)
            if callable(check):
                try:
                    check()
                except SkillwireError as exc:
                    problems.append(ManifestError(str(exc), source=source))
    problems += [ManifestError(reason, source=file, line=line) for reason, (file, line) in found.problems]
    warnings = [w for skill, where in found.skills for w in _code_skill_warnings(skill, *where)]
    return FolderCheck(len(found.skills) + len(found.problems), problems, warnings, [])


def _code_skill_warnings(skill: Skill, source: str, line: int | None) -> list[ManifestWarning]:
    out = []
    for key, schema in (("inputSchema", skill.input_schema), ("outputSchema", skill.output_schema)):
        if schema is None:
            continue
        for cost in cost_warnings(schema):
            reason = f"skill {skill.id!r}: {cost.reason}"
            out.append(ManifestWarning(reason, path=f"{key}{cost.schema_path}", line=line, source=source))
    extension = skill_schemas_extension([skill])
    params = extension.params if extension is not None and extension.params else {}
    for key, reason in params.get(skill.id, {}).get("omitted", {}).items():
        out.append(
            ManifestWarning(
                f"skill {skill.id!r}: {key} schema not published on the card: {reason}",
                line=line,
                source=source,
            )
        )
    return out


def load_agent_config(folder: Path | str) -> AgentConfig:
    """The folder's ``agent.yaml`` (restricted YAML, like manifests), or defaults named after the folder."""
    folder = Path(folder)
    file = folder / AGENT_FILE
    if not file.is_file():
        return AgentConfig(name=folder.resolve().name)
    source = str(file)
    value, lines = _yaml.load(read_manifest_text(file, limit=MAX_AGENT_FILE_BYTES), source=source)
    if not isinstance(value, dict):
        raise ManifestError("agent.yaml must be a mapping", source=source, line=1)

    def text(key: str, default: str | None = None) -> str | None:
        item = value.get(key, default)
        if item is not None and not isinstance(item, str):
            raise ManifestError("expected a string", path=key, line=lines.get((key,)), source=source)
        return item

    for key in value:
        if key not in _AGENT_KEYS:
            raise ManifestError(
                f"unknown key {key!r}; allowed: {', '.join(sorted(_AGENT_KEYS))}",
                path=str(key),
                line=lines.get((key,)),
                source=source,
            )
    provider = value.get("provider")
    agent_provider = None
    if provider is not None:
        if not isinstance(provider, dict) or not all(
            isinstance(provider.get(k), str) for k in ("organization", "url")
        ):
            raise ManifestError(
                "provider needs `organization` and `url` strings",
                path="provider",
                line=lines.get(("provider",)),
                source=source,
            )
        agent_provider = AgentProvider(organization=provider["organization"], url=provider["url"])
    security = parse_security(value["security"], source=source, lines=lines) if "security" in value else None
    return AgentConfig(
        security=security,
        mcp_servers=_mcp_servers(value.get("mcpServers"), source, lines),
        name=text("name", folder.resolve().name) or folder.resolve().name,
        description=text("description", "") or "",
        version=text("version", "1.0.0") or "1.0.0",
        provider=agent_provider,
        documentation_url=text("documentationUrl"),
        icon_url=text("iconUrl"),
    )


def _mcp_servers(value: Any, source: str, lines: LineMap) -> tuple[dict[str, Any], ...]:
    """agent.yaml's ``mcpServers:``: a list of mappings, each with ``command`` (a list of strings) or
    ``url``, and optionally ``name``, ``env`` (variable names), ``headers`` and ``timeout``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ManifestError(
            "expected a list", path="mcpServers", line=lines.get(("mcpServers",)), source=source
        )
    servers = []
    for i, entry in enumerate(value):
        where = f"mcpServers[{i}]"
        line = lines.get(("mcpServers", i)) or lines.get(("mcpServers",))

        def bad(why: str, where: str = where, line: int | None = line) -> ManifestError:
            return ManifestError(why, path=where, line=line, source=source)

        if not isinstance(entry, dict):
            raise bad("expected a mapping with command or url")
        unknown = sorted(str(key) for key in entry if key not in _MCP_SERVER_KEYS)
        if unknown:
            raise bad(f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(_MCP_SERVER_KEYS))}")
        if ("command" in entry) == ("url" in entry):
            raise bad("needs one of command (a list: the program and its arguments) or url")
        for key in ("command", "env"):
            if key in entry and not (
                isinstance(entry[key], list) and all(isinstance(item, str) for item in entry[key])
            ):
                raise bad(f"{key} must be a list of strings")
        for key in ("name", "url"):
            if key in entry and not isinstance(entry[key], str):
                raise bad(f"{key} must be a string")
        headers = entry.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise bad("headers must map names to strings (${VARIABLE} reads one from the environment)")
        if "timeout" in entry and not (isinstance(entry["timeout"], int | float) and entry["timeout"] > 0):
            raise bad("timeout must be a number of seconds above 0")
        servers.append(dict(entry))
    return tuple(servers)


def plugin_skills() -> list[Skill]:
    """Skills contributed by installed packages through the ``skillwire.skills`` entry points."""
    skills: list[Skill] = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        target = entry.load()
        folder = target() if callable(target) else target
        if not isinstance(folder, str | Path):
            raise SkillwireError(
                f"entry point {entry.name!r} ({entry.value}) must give a skills folder path, got {type(folder).__name__}"
            )
        distribution = entry.dist.name if entry.dist is not None else entry.value.split(":")[0]
        skills += load_skills_folder(folder, source=f"plugin:{distribution}")
    return skills
