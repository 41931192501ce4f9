"""What a command's TARGET names: an agent to load (a folder of skills, a folder with ``agent.py``, a ``.py``
file, ``module:attribute``) or a running agent (its URL). Used by ``serve``, ``skills`` and ``mcp``."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from skillwire.errors import SkillwireError

if TYPE_CHECKING:
    from skillwire.agent import Agent

__all__ = ["Unreachable", "is_agent_url", "load_agent", "module_attribute"]


class Unreachable(SkillwireError):
    """A running agent the command could not read (exit 3, as for the client commands)."""


def is_agent_url(target: str) -> bool:
    """Whether ``target`` names a running agent: ``http(s)://...``, ``host:port`` or ``:port``."""
    from skillwire.client.origins import is_short_url

    return target.startswith(("http://", "https://")) or is_short_url(target)


def load_agent(target: str, *, read_only: bool = False, plugins: bool = False) -> Agent:
    """The Agent named by ``target``: a folder of skills, a folder with ``agent.py``, a ``.py`` file, or
    ``module:attribute``. What stops it from loading is a SkillwireError of one line: a manifest's key and
    line, or where the agent's own code failed (file, line, exception)."""
    try:
        return _load_agent(target, read_only=read_only, plugins=plugins)
    except SkillwireError:
        raise
    except Exception as exc:  # the agent's own code failed as it was imported
        raise SkillwireError(f"{target}: cannot load the agent: {_where_it_failed(exc)}") from exc


def _where_it_failed(exc: Exception) -> str:
    """``exc`` in one line, at the line of the user's code that raised it (not skillwire's or importlib's)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    ours = str(Path(__file__).resolve().parent.parent)
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith((ours, "<frozen")) and "importlib" not in frame.filename
    ]
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    return f"{where}{type(exc).__name__}: {exc}"


def _load_agent(target: str, *, read_only: bool, plugins: bool) -> Agent:
    from skillwire.skills.loader import is_skills_folder

    if is_agent_url(target):
        raise SkillwireError(
            f"{target} is the address of a running agent; this takes a folder, a .py file or"
            f" module:attribute (to call it: `skillwire send {target} TEXT`)"
        )
    path = Path(target)
    if path.is_dir() and not (path / "agent.py").is_file() and (is_skills_folder(path) or _names_mcp(path)):
        from skillwire.agent import Agent

        return Agent.from_folder(path, read_only=read_only, plugins=plugins)
    agent = _load_code_agent(target)
    agent.read_only = agent.read_only or read_only
    if plugins:
        from skillwire.skills.loader import plugin_skills

        for skill in plugin_skills():
            agent.add_skill(skill)
    return agent


def _names_mcp(folder: Path) -> bool:
    """Whether ``folder`` has an agent.yaml naming MCP servers (its skills may all be their tools)."""
    from skillwire.skills.loader import load_agent_config

    return (folder / "agent.yaml").is_file() and bool(load_agent_config(folder).mcp_servers)


def _load_code_agent(target: str) -> Agent:
    path = Path(target)
    attribute = "agent"
    if path.is_dir() or path.suffix == ".py":
        file = path / "agent.py" if path.is_dir() else path
        if not file.is_file():
            raise SkillwireError(f"{target}: no agent.py and no skill folders found (expected {file})")
        folder = str(file.parent.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        from skillwire.skills.loader import import_file

        module = import_file(file, f"skillwire_target_{file.parent.resolve().name}")
    elif ":" in target:
        module_name, attribute = module_attribute(target)
        if os.getcwd() not in sys.path and "" not in sys.path:  # as uvicorn does: ./agent.py is `agent`
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise SkillwireError(f"{target}: cannot import {module_name}: {exc}") from exc
    else:
        raise SkillwireError(f"{target}: not a folder, a .py file or module:attribute")
    agent = getattr(module, attribute, None)
    from skillwire.agent import Agent

    if not isinstance(agent, Agent):
        raise SkillwireError(
            f"{target}: `{attribute}` must be a skillwire.Agent, found {type(agent).__name__}"
        )
    return agent


def module_attribute(target: str) -> tuple[str, str]:
    """``module:attribute`` split, each a dotted Python name (SkillwireError otherwise)."""
    module, _, attribute = target.partition(":")
    names = [*module.split("."), *attribute.split(".")]
    if not all(name.isidentifier() for name in names):
        raise SkillwireError(f"{target}: not a folder, a .py file or module:attribute")
    return module, attribute
