"""`skillwire skills check` reports schema constructs that are exponential for validators without
memoization (issue 9), with the file, the line, the schema location and why; warnings do not fail the check
unless --strict. An agent.py is imported and its code skills checked (tests/test_skills_paved.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import EXAMPLES
from skillwire.cli.main import main
from skillwire.cli.skills import check_skills
from skillwire.skills.loader import check_skills_folder
from skillwire.skills.schema_cost import FANOUT_LIMIT, cost_warnings


def chain(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"a{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


RECURSIVE_TWO_BRANCHES = {
    "$defs": {
        "node": {
            "anyOf": [
                {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["a"]},
                {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["b"]},
            ]
        }
    },
    "$ref": "#/$defs/node",
}


# -- the analysis ----------------------------------------------------------------------------------------------


def test_a_ref_cycle_through_a_two_branch_combinator_is_reported() -> None:
    (warning,) = cost_warnings(RECURSIVE_TWO_BRANCHES)
    assert warning.schema_path == "/$defs/node"
    assert warning.reason.startswith("2 paths lead from this subschema back to itself")
    assert "(/anyOf/0/properties/next)" not in warning.reason  # the steps into the value, not the branch
    assert "(/properties/next)" in warning.reason and "2**d" in warning.reason


def test_an_expression_tree_with_oneof_is_reported() -> None:
    expression = {
        "$defs": {
            "e": {
                "oneOf": [
                    {"type": "number"},
                    {"type": "object", "properties": {"op": {"const": "+"}, "args": {"items": {"$ref": "#/$defs/e"}}}},
                    {"type": "object", "properties": {"op": {"const": "*"}, "args": {"items": {"$ref": "#/$defs/e"}}}},
                    {"type": "object", "properties": {"op": {"const": "-"}, "args": {"items": {"$ref": "#/$defs/e"}}}},
                ]
            }
        },
        "$ref": "#/$defs/e",
    }  # fmt: skip
    (warning,) = cost_warnings(expression)
    assert warning.schema_path == "/$defs/e"
    assert warning.reason.startswith("3 paths") and "(/properties/args/items)" in warning.reason


def test_in_place_fan_out_whose_path_count_explodes_is_reported() -> None:
    assert cost_warnings(chain(9)) == []  # 2**9 = 512 applications: below the limit
    (warning,) = cost_warnings(chain(20))
    assert FANOUT_LIMIT <= 2**20
    assert warning.schema_path == "/$defs/a20"
    assert warning.reason.startswith("applied 1,048,576 times to the same part of the value (/)")


def test_fan_out_through_the_same_property_is_reported() -> None:
    defs: dict[str, Any] = {
        f"b{i}": {
            "allOf": [
                {"properties": {"x": {"$ref": f"#/$defs/b{i + 1}"}}},
                {"properties": {"x": {"$ref": f"#/$defs/b{i + 1}"}}},
            ]
        }
        for i in range(12)
    }
    defs["b12"] = {"type": "string"}
    (warning,) = cost_warnings({"$defs": defs, "$ref": "#/$defs/b0"})
    assert warning.schema_path == "/$defs/b12"
    assert "applied 4,096 times" in warning.reason


@pytest.mark.parametrize(
    "schema",
    [
        # a binary tree: two recursions, but into different properties
        {
            "$defs": {"t": {"properties": {"left": {"$ref": "#/$defs/t"}, "right": {"$ref": "#/$defs/t"}}}},
            "$ref": "#/$defs/t",
        },
        # alternatives that recurse into different properties
        {
            "$defs": {
                "t": {
                    "anyOf": [
                        {"properties": {"left": {"$ref": "#/$defs/t"}}},
                        {"properties": {"right": {"$ref": "#/$defs/t"}}},
                    ]
                }
            },
            "$ref": "#/$defs/t",
        },
        # one recursion and a base case
        {"$defs": {"list": {"anyOf": [{"type": "null"}, {"prefixItems": [{}, {"$ref": "#/$defs/list"}]}]}}, "$ref": "#/$defs/list"},
        # one definition used for many properties: many parts of the value, each checked once
        {"$defs": {"a": {"type": "string"}}, "properties": {f"p{i}": {"$ref": "#/$defs/a"} for i in range(2000)}},
    ],
    ids=["tree", "alternatives", "list", "shared-definition"],
)  # fmt: skip
def test_linear_schemas_are_not_reported(schema: dict[str, Any]) -> None:
    assert cost_warnings(schema) == []


def test_every_shipped_example_schema_is_clean() -> None:
    found = check_skills_folder(EXAMPLES / "workshop")
    assert (found.problems, found.warnings) == ([], [])
    for folder in ("greeter", "echo_skill"):
        assert check_skills_folder(EXAMPLES / folder).warnings == []


def test_the_analysis_of_a_huge_schema_is_bounded() -> None:
    defs: dict[str, Any] = {
        f"c{i}": {"properties": {"x": {"$ref": f"#/$defs/c{i + 1}"}, "y": {"$ref": f"#/$defs/c{i + 1}"}}}
        for i in range(30)
    }
    defs["c30"] = {}
    (warning,) = cost_warnings({"$defs": defs, "$ref": "#/$defs/c0"})  # 2**30 distinct parts
    assert "too large to analyse" in warning.reason


# -- skills check --------------------------------------------------------------------------------------------------


def write_skill(root: Path, skill_id: str, input_schema: dict[str, Any] | None = None) -> Path:
    folder = root / skill_id
    folder.mkdir(parents=True)
    front: dict[str, Any] = {"id": skill_id, "name": skill_id.title(), "description": "d", "tags": ["t"]}
    if input_schema is not None:
        front["inputSchema"] = input_schema
    text = "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\nBody.\n"
    (folder / "SKILL.md").write_text(text)
    (folder / "skill.py").write_text("async def run(params, ctx):\n    return 'ok'\n")
    return folder / "SKILL.md"


def line_of(file: Path, text: str) -> int:
    return next(i for i, line in enumerate(file.read_text().splitlines(), 1) if text in line)


def test_skills_check_prints_warnings_with_file_line_and_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(tmp_path, "fine", {"type": "object"})
    slow = write_skill(tmp_path, "slow", RECURSIVE_TWO_BRANCHES)
    assert main(["skills", "check", str(tmp_path)]) == 0  # warnings alone do not fail the check
    captured = capsys.readouterr()
    assert "2 skill(s) valid, 1 warning(s)" in captured.out
    (line,) = captured.err.splitlines()
    where = (
        f"{slow}:{line_of(slow, 'node:')} inputSchema.$defs.node: warning: 2 paths lead from this subschema"
    )
    assert line.startswith(where), line


def test_strict_turns_warnings_into_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_skill(tmp_path, "slow", chain(12))
    assert check_skills(str(tmp_path), strict=True) == 1
    err = capsys.readouterr().err
    assert "warning: applied 4,096 times" in err
    assert "0 problem(s), 1 warning(s) in 1 skill(s) (--strict)" in err
    assert check_skills(str(tmp_path)) == 0


def test_output_schemas_are_checked_too(tmp_path: Path) -> None:
    manifest = write_skill(tmp_path, "out")
    text = manifest.read_text().replace("---\nBody.", "outputSchema:\n  $ref: '#/$defs/x'\n---\nBody.")
    defs = yaml.safe_dump({"$defs": chain(15)["$defs"]}, default_flow_style=True, width=10**6).strip()
    text = text.replace("  $ref: '#/$defs/x'", f"  $ref: '#/$defs/a0'\n  {defs[1:-1]}")
    manifest.write_text(text)
    (warning,) = check_skills_folder(tmp_path).warnings
    assert warning.path == "outputSchema.$defs.a15" and warning.source == str(manifest)


def test_an_agent_py_that_fails_to_import_is_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(tmp_path, "fine")
    (tmp_path / "agent.py").write_text("raise SystemExit('imported!')\n")
    assert main(["skills", "check", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'agent.py'}: cannot import: SystemExit: imported!" in err


def test_a_broken_agent_yaml_is_a_problem_of_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(tmp_path, "fine")
    (tmp_path / "agent.yaml").write_text("name: X\ncolour: blue\n")
    assert main(["skills", "check", str(tmp_path)]) == 1
    assert f"{tmp_path / 'agent.yaml'}:2 colour: unknown key 'colour'" in capsys.readouterr().err
