"""README and docs import only from documented paths: the front door and the public modules it lists,
and only names those modules export (``__all__``). Examples, which users copy, are held to the same rule."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from test_exported_members import PUBLIC_MODULES

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.py"))
DOCUMENTED = {"skillwire", *(m for m in PUBLIC_MODULES if m != "skillwire.models")}
_BLOCK = re.compile(r"```(?:python|py)\n(.*?)```", re.DOTALL)


def imports(source: str) -> list[tuple[str, str | None]]:
    """(module, name) of each skillwire import in ``source`` (name None for ``import module``)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "skillwire":
            found.extend((str(node.module), alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(
                (alias.name, None) for alias in node.names if alias.name.split(".")[0] == "skillwire"
            )
    return found


def page_imports(page: Path) -> list[tuple[str, str | None]]:
    found = []
    for block in _BLOCK.findall(page.read_text()):
        lines = [
            line for line in block.splitlines() if line.startswith(("from skillwire", "import skillwire"))
        ]
        found.extend(imports("\n".join(lines)))  # a block may be a fragment: its import lines parse alone
    return found


def undocumented(found: list[tuple[str, str | None]]) -> list[str]:
    wrong = []
    for module, name in found:
        if module not in DOCUMENTED:
            wrong.append(f"{module} is not a documented module")
        elif name is not None and name not in importlib.import_module(module).__all__:
            wrong.append(f"{module} does not export {name}")
    return wrong


def test_the_pages_import_something() -> None:
    assert sum(len(page_imports(page)) for page in PAGES) > 30  # the check below reads real imports


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_imports_only_documented_names(page: Path) -> None:
    assert undocumented(page_imports(page)) == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_an_example_imports_only_documented_names(example: Path) -> None:
    assert undocumented(imports(example.read_text())) == []


def test_an_internal_import_is_caught() -> None:
    assert undocumented(imports("from skillwire.server.tasks.runtime import TaskRuntime")) == [
        "skillwire.server.tasks.runtime is not a documented module"
    ]
    assert undocumented(imports("from skillwire import AgentCard")) == ["skillwire does not export AgentCard"]
