"""What one validation may cost (issue 9): patterns run in linear time (RE2), constructs RE2 cannot run are
refused by name, $ref results are memoized (exponential constructs validate in linear time, with the same
verdict and first violation), and a step budget ends any validation that would take more."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from skillwire import compile_schema, validate_json
from skillwire.errors import SchemaError, ValidationError
from skillwire.skills.schema import DEFAULT_MAX_STEPS

T = TypeVar("T")
CAP = 30.0  # seconds; a backtracking engine would not finish any of these in a lifetime


def within_cap(work: Callable[[], T]) -> T:
    """``work()`` run on a thread joined with a generous cap: the test fails instead of hanging."""
    results: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(work())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(CAP)
    assert not thread.is_alive(), f"did not finish within {CAP} s"
    if errors:
        raise errors[0]
    return results[0]


def reason(schema: object, instance: object, **kw: Any) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        compile_schema(schema, **kw).validate(instance)
    return caught.value


# -- patterns: linear time ---------------------------------------------------------------------------------

EVIL = "^(a+)+$"


def test_the_issue_pattern_on_a_25_character_input_is_answered() -> None:
    validator = compile_schema({"pattern": EVIL})
    assert within_cap(lambda: validator.is_valid("a" * 25 + "!")) is False
    assert within_cap(lambda: validator.is_valid("a" * 25)) is True


@pytest.mark.parametrize(
    "schema",
    [
        {"pattern": EVIL},
        {"patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False},
        {"propertyNames": {"pattern": EVIL}},
    ],
    ids=["pattern", "patternProperties", "propertyNames"],
)
def test_a_backtracking_pattern_on_10000_characters_is_answered(schema: dict[str, Any]) -> None:
    validator = compile_schema(schema)
    text = "a" * 10_000 + "!"
    value: object = text if "pattern" in schema else {text: 1}
    assert within_cap(lambda: validator.is_valid(value)) is False
    error = within_cap(lambda: reason(schema, value))
    assert error.schema_path in ("/pattern", "/additionalProperties", "/propertyNames/pattern")


def test_patterns_are_searched_not_anchored_in_re2_syntax() -> None:
    assert compile_schema({"pattern": "b"}).is_valid("abc")
    assert not compile_schema({"pattern": "^b"}).is_valid("abc")
    assert compile_schema({"pattern": r"^\p{L}+$"}).is_valid("Ådà")  # RE2's Unicode classes
    assert compile_schema({"pattern": "^.$"}).is_valid("\U0001f600")  # one code point, not bytes
    assert not compile_schema({"pattern": r"^\d$"}).is_valid("٣")  # \d is ASCII, as in ECMA-262
    assert not compile_schema({"pattern": "^a$"}).is_valid("a\n")  # $ is the end of the text
    assert compile_schema({"pattern": r"\x{41}"}).is_valid("A")


def test_a_lone_surrogate_in_the_value_is_matched_not_a_crash() -> None:
    validator = compile_schema({"pattern": "^a"})
    assert validator.is_valid("a\ud800") is True
    assert validator.is_valid("\ud800") is False


def test_pattern_properties_apply_every_matching_pattern_in_schema_order() -> None:
    schema = {"patternProperties": {"^x": {"type": "string"}, "y$": {"minLength": 3}}}
    assert compile_schema(schema).is_valid({"xy": "abc", "z": 1})
    error = reason(schema, {"xy": "ab"})
    assert (error.instance_path, error.schema_path) == ("/xy", "/patternProperties/y$/minLength")


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(a)\1", r"a backreference \1"),
        ("(?P<n>a)(?P=n)", "a named backreference (?P=name)"),
        (r"(?<n>a)\k<n>", r"a named backreference \k<name>"),
        ("a(?=b)", "a lookahead (?=...)"),
        ("a(?!b)", "a negative lookahead (?!...)"),
        ("(?<=a)b", "a lookbehind (?<=...)"),
        ("(?<!a)b", "a negative lookbehind (?<!...)"),
        ("(?>a+)", "an atomic group (?>...)"),
        ("a++", "a possessive quantifier ++"),
    ],
)
def test_constructs_re2_cannot_run_are_refused_by_name(pattern: str, construct: str) -> None:
    for schema, where in (
        ({"pattern": pattern}, "/pattern"),
        ({"properties": {"p": {"pattern": pattern}}}, "/properties/p/pattern"),
        ({"patternProperties": {pattern: {}}}, "/patternProperties/" + pattern.replace("/", "~1")),
        ({"propertyNames": {"pattern": pattern}}, "/propertyNames/pattern"),
    ):
        with pytest.raises(SchemaError) as caught:
            compile_schema(schema)
        assert caught.value.schema_path == where
        assert f"{construct} cannot be matched in linear time" in caught.value.reason
        assert "RE2 syntax" in caught.value.reason


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [(r"a\Z", r"\Z is written \z"), (r"\u00e9", r"\uXXXX is written \x{XXXX}"), ("a{1001}", "at most 1000")],
)
def test_other_spellings_are_refused_with_the_re2_way_to_write_them(pattern: str, hint: str) -> None:
    with pytest.raises(SchemaError, match="RE2 syntax") as caught:
        compile_schema({"pattern": pattern})
    assert hint in caught.value.reason


def test_a_pattern_too_large_for_re2_memory_is_refused() -> None:
    with pytest.raises(SchemaError, match="pattern too large") as caught:
        compile_schema({"pattern": r"\p{L}{1,1000}"})
    assert caught.value.schema_path == "/pattern"


# -- $ref fan-out: memoized ----------------------------------------------------------------------------------


def doubling_chain(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """The issue's anyOf/$ref fan-out: each level offers two branches that both lead to the next."""
    defs = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"a{levels}"] = leaf
    return {"$defs": defs, "$ref": "#/$defs/a0"}


def test_an_exponential_anyof_ref_chain_validates_promptly() -> None:
    validator = compile_schema(doubling_chain(60, {"type": "string"}))  # 2**60 paths
    assert within_cap(lambda: validator.is_valid("ok")) is True
    assert within_cap(lambda: validator.is_valid(1)) is False
    error = within_cap(lambda: reason(doubling_chain(60, {"type": "string"}), 1))
    assert (error.reason, error.schema_path) == (
        "1 matches none of the 2 schemas in anyOf",
        "/$defs/a0/anyOf",
    )


TWO_BRANCHES = {
    "$defs": {
        "node": {
            "oneOf": [
                {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["leaf"]},
                {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]},
            ]
        }
    },
    "$ref": "#/$defs/node",
}


def nested(depth: int, bottom: Any) -> Any:
    value = bottom
    for _ in range(depth):
        value = {"next": value}
    return value


def test_a_recursive_two_branch_schema_on_a_deep_value_validates_promptly() -> None:
    validator = compile_schema(TWO_BRANCHES)
    assert within_cap(lambda: validator.is_valid(nested(150, {"leaf": 1}))) is True
    assert within_cap(lambda: validator.is_valid(nested(150, {"leaf": 1, "next": 5}))) is False
    error = within_cap(lambda: reason(TWO_BRANCHES, nested(150, {"leaf": 1, "next": 5})))
    assert (error.instance_path, error.schema_path) == ("", "/$defs/node/oneOf")
    assert error.reason.endswith("matches none of the 2 schemas in oneOf")


def test_a_memoized_failure_is_reported_at_its_own_place() -> None:
    # `not` applies the definition to the first item (and it fails there, so `not` passes), then
    # prefixItems applies it to the second, which is the same object: the memo's answer must carry the
    # second item's path.
    schema = {
        "$defs": {"n": {"properties": {"value": {"type": "integer"}}}},
        "not": {"prefixItems": [{"$ref": "#/$defs/n"}]},
        "prefixItems": [True, {"$ref": "#/$defs/n"}],
    }
    shared = {"value": "x"}
    error = reason(schema, [shared, shared])
    fresh = reason(schema, [shared, copy.deepcopy(shared)])
    assert (error.instance_path, error.schema_path) == ("/1/value", "/$defs/n/properties/value/type")
    assert (fresh.instance_path, fresh.reason) == (error.instance_path, error.reason)


# -- the step budget -----------------------------------------------------------------------------------------

TREE = {
    "$defs": {"node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#/$defs/node"}}}}},
    "$ref": "#/$defs/node",
}


def tree(width: int) -> dict[str, Any]:
    return {"kids": [{"kids": [{} for _ in range(width)]} for _ in range(width)]}


def test_a_validation_over_the_step_budget_is_a_clear_validation_error() -> None:
    value = tree(10)  # 111 nodes: 111 $ref applications
    error = reason(TREE, value, max_steps=50)
    assert error.reason == (
        "validating this value takes more than 50 schema steps ($ref applications), the limit for one validation"
    )
    assert error.schema_path == "/$defs/node/properties/kids/items/$ref"
    assert compile_schema(TREE, max_steps=111).is_valid(value)
    assert not compile_schema(TREE, max_steps=110).is_valid(value)


def test_the_budget_can_be_given_per_validation() -> None:
    validator = compile_schema(TREE)
    assert validator.max_steps == DEFAULT_MAX_STEPS
    validator.validate(tree(10))
    with pytest.raises(ValidationError, match="more than 5 schema steps"):
        validator.validate(tree(10), max_steps=5)
    assert validator.is_valid(tree(10), max_steps=5) is False
    with pytest.raises(ValidationError, match="more than 5 schema steps"):
        validate_json(TREE, tree(10), max_steps=5)


def test_memo_hits_are_free_so_the_fan_out_fits_a_small_budget() -> None:
    validator = compile_schema(doubling_chain(60, {"type": "string"}), max_steps=61)
    assert validator.is_valid("ok")
    assert not compile_schema(doubling_chain(60, {"type": "string"}), max_steps=60).is_valid("ok")


def test_schemas_without_ref_are_not_counted() -> None:
    schema = {"items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}
    assert compile_schema(schema, max_steps=0).is_valid(list(range(1000)))


def test_validators_are_safe_to_share_between_threads() -> None:
    validator = compile_schema(TREE, max_steps=200)
    verdicts: list[bool] = []

    def work() -> None:
        for _ in range(50):
            verdicts.append(validator.is_valid(tree(10)))  # 111 steps each: fits only if counted alone

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CAP)
    assert verdicts == [True] * 200
