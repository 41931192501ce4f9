"""SKILL.md manifests are untrusted input: every way to get one wrong is refused with its key path and line,
and parsing never reads a file, opens a socket, imports a module or runs code."""

from __future__ import annotations

import builtins
import importlib
import io
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_proto
from skillwire import SkillCard
from skillwire.errors import ManifestError
from skillwire.protocol.models import SecurityRequirement, StringList
from skillwire.skills import _yaml
from skillwire.skills.manifest import MAX_FILE_BYTES, ExecutionHints
from skillwire.types import AgentSkill

FIXTURES = Path(__file__).parent / "fixtures" / "manifests"
MINIMAL = "---\nid: greet\nname: Greet\ndescription: Says hello.\ntags: [demo]\n---\nHello!\n"


class Bad(NamedTuple):
    path: str
    line: int | None
    reason: str


DEEP_PATH = "providerConfig" + "[0]" * 63  # the 65th level: the top mapping, then 64 lists

# One fixture per kind of invalid manifest: the key path, line and (part of) the reason of its ManifestError.
INVALID: dict[str, Bad] = {
    # the file's shape
    "no_frontmatter.md": Bad("", 1, "must start with a '---' line"),
    "unclosed_frontmatter.md": Bad("", 1, "not closed by a '---' line"),
    "empty_frontmatter.md": Bad("", 1, "must be a mapping of keys, got an empty frontmatter"),
    "frontmatter_not_mapping.md": Bad("", 2, "must be a mapping of keys, got list"),
    "yaml_syntax_error.md": Bad("", 4, "invalid YAML: mapping values are not allowed"),
    # keys
    "unknown_key.md": Bad("author", 6, "unknown key 'author' (expected one of: id, name,"),
    "snake_case_key.md": Bad("input_modes", 6, "unknown key 'input_modes' (did you mean 'inputModes'?)"),
    "missing_id.md": Bad("id", 2, "required key 'id' is missing"),
    "missing_name.md": Bad("name", 2, "required key 'name' is missing"),
    "missing_description.md": Bad("description", 2, "required key 'description' is missing"),
    "missing_tags.md": Bad("tags", 2, "required key 'tags' is missing"),
    # wrong types, one per kind of field
    "wrong_type_id.md": Bad("id", 2, "expected a non-empty string, got integer"),
    "wrong_type_name.md": Bad("name", 3, "expected a non-empty string, got list"),
    "wrong_type_description.md": Bad("description", 4, "expected a non-empty string, got null"),
    "empty_name.md": Bad("name", 3, "expected a non-empty string, got an empty one"),
    "wrong_type_tags.md": Bad("tags", 5, "expected a list of non-empty strings, got string"),
    "wrong_type_tag_item.md": Bad("tags[1]", 7, "expected a non-empty string, got integer"),
    "empty_tags.md": Bad("tags", 5, "expected a list of one or more non-empty strings, got an empty list"),
    "wrong_type_examples.md": Bad("examples", 6, "expected a list of strings, got mapping"),
    "wrong_type_example_item.md": Bad("examples[1]", 8, "expected a string, got null"),
    "wrong_type_read_only.md": Bad("readOnly", 6, "expected true or false, got string"),
    "wrong_type_input_modes.md": Bad("inputModes", 6, "expected a list of strings, got string"),
    # values
    "bad_id.md": Bad("id", 2, "'../../etc/passwd' is not a valid skill id"),
    "bad_id_too_long.md": Bad("id", 2, "use at most 64 ASCII letters"),
    "bad_media_type.md": Bad("outputModes[1]", 8, "'json' is not a media type (expected type/subtype"),
    "bad_security_requirements_type.md": Bad(
        "securityRequirements", 6, "expected a list of security requirements, got string"
    ),
    "bad_security_requirement_entry.md": Bad(
        "securityRequirements[1]", 8, "expected a scheme name or a mapping of scheme names to lists of scopes"
    ),
    "bad_security_requirement_scopes.md": Bad(
        "securityRequirements[0].oauth", 7, "expected a list of non-empty strings, got string"
    ),
    "hints_not_mapping.md": Bad("executionHints", 6, "expected a mapping of execution hints, got string"),
    "hints_unknown.md": Bad(
        "executionHints.max_tokens", 7, "unknown execution hint 'max_tokens' (did you mean 'maxTokens'?)"
    ),
    "hints_temperature_out_of_range.md": Bad(
        "executionHints.temperature", 7, "expected a number from 0 to 2, got 3"
    ),
    "hints_top_p_out_of_range.md": Bad("executionHints.topP", 7, "expected a number from 0 to 1, got -0.5"),
    "hints_max_tokens_zero.md": Bad("executionHints.maxTokens", 7, "expected a positive integer, got 0"),
    "hints_max_tokens_not_integer.md": Bad(
        "executionHints.maxTokens", 7, "expected a positive integer, got number"
    ),
    "hints_timeout_not_positive.md": Bad(
        "executionHints.timeoutSeconds", 7, "expected a positive number, got 0"
    ),
    "hints_retryable_not_bool.md": Bad("executionHints.retryable", 7, "expected true or false, got string"),
    "provider_config_not_mapping.md": Bad("providerConfig", 6, "expected a mapping, got list"),
    # YAML that could do more than describe data
    "anchor_alias.md": Bad("tags", 5, "anchors are not allowed (found &tags)"),
    "alias_bomb.md": Bad("providerConfig.a", 7, "anchors are not allowed (found &a)"),
    "python_object_tag.md": Bad(
        "providerConfig",
        6,
        "explicit tags are not allowed (found tag:yaml.org,2002:python/object/apply:os.system)",
    ),
    "include_tag.md": Bad("description", 4, "explicit tags are not allowed (found !include)"),
    "str_tag.md": Bad("id", 2, "explicit tags are not allowed (found tag:yaml.org,2002:str)"),
    "duplicate_key.md": Bad("name", 6, "duplicate key 'name' (first on line 3)"),
    "multiple_documents.md": Bad("", 6, "only one YAML document is allowed"),
    "merge_key.md": Bad('executionHints["<<"]', 7, "merge keys (<<) are not allowed"),
    "nonstring_key.md": Bad("providerConfig", 7, "mapping keys must be strings, got integer '1'"),
    "inf.md": Bad("executionHints.temperature", 7, ".inf is not a JSON number"),
    "nan.md": Bad("providerConfig.threshold", 7, ".nan is not a JSON number"),
    "too_deep.md": Bad(DEEP_PATH, 6, "nesting is deeper than 64 levels"),
    # schemas and template
    "output_schema_wrong_type.md": Bad(
        "outputSchema", 6, "expected a mapping (a JSON Schema object), got list"
    ),
    "input_schema_unsupported_keyword.md": Bad(
        "inputSchema.unevaluatedProperties",
        10,
        "invalid JSON Schema: unsupported keyword 'unevaluatedProperties'",
    ),
    "input_schema_remote_ref.md": Bad(
        "inputSchema.properties.address.$ref",
        10,
        "invalid JSON Schema: $ref 'https://example.com/schemas/address.json' is not supported",
    ),
    "template_syntax_error.md": Bad("", 9, "invalid template at column 12: 'a + b' is not a variable"),
    "template_unclosed.md": Bad("", 7, "invalid template at column 8: '{{' is never closed by '}}'"),
    "output_schema_bad_type_keyword.md": Bad(
        "outputSchema.properties.pair.prefixItems[1].type", 13, "invalid JSON Schema: type must be one of"
    ),
}

VALID = ("valid_minimal.md", "valid_full.md")


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def parse_error(text: str, source: str = "SKILL.md") -> ManifestError:
    with pytest.raises(ManifestError) as info:
        SkillCard.parse(text, source=source)
    return info.value


def test_every_fixture_is_checked() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.md")) == sorted([*INVALID, *VALID])


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_manifest_is_refused_with_path_line_and_reason(name: str) -> None:
    expected = INVALID[name]
    error = parse_error(read(name), source=f"skills/{name}")
    assert (error.path, error.line) == (expected.path, expected.line), error
    assert expected.reason in error.reason
    assert error.source == f"skills/{name}"
    assert str(error).startswith(f"skills/{name}:{expected.line}")


@pytest.mark.parametrize("name", sorted(INVALID))
def test_the_pure_python_parser_refuses_the_same_way(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml, "_LOADER", yaml.SafeLoader)
    expected = INVALID[name]
    error = parse_error(read(name))
    assert (error.path, error.line) == (expected.path, expected.line), error
    assert expected.reason in error.reason


# -- valid manifests ----------------------------------------------------------------------------------------


def test_minimal_manifest_has_defaults() -> None:
    card = SkillCard.parse(read("valid_minimal.md"), source="valid_minimal.md")
    assert (card.id, card.name, card.description, card.tags) == ("greet", "Greet", "Says hello.", ("demo",))
    assert card.examples == card.input_modes == card.output_modes == ()
    assert card.security_requirements == ()
    assert card.read_only is False
    assert card.input_schema is None and card.output_schema is None
    assert card.input_validator is None and card.output_validator is None
    assert card.execution_hints == ExecutionHints()
    assert card.provider_config is None
    assert card.template == "Hello!\n"
    assert card.source == "valid_minimal.md"


def test_full_manifest_exposes_every_field() -> None:
    card = SkillCard.parse(read("valid_full.md"))
    assert card.id == "text.summarize-v2"
    assert card.tags == ("text", "summary")
    assert card.examples == ("Summarize this article", "TL;DR: ...")
    assert card.input_modes == ("text/plain", "application/json")
    assert card.output_modes == ("text/markdown; charset=utf-8",)
    assert card.security_requirements == ({"apiKey": ()}, {"oauth2": ("read", "write"), "mtls": ()})
    assert card.read_only is True
    assert card.execution_hints == ExecutionHints(
        max_tokens=512, temperature=0.2, top_p=1.0, timeout_seconds=30.0, retryable=True
    )
    assert msgspec.to_builtins(card.execution_hints) == {
        "maxTokens": 512,
        "temperature": 0.2,
        "topP": 1.0,
        "timeoutSeconds": 30.0,
        "retryable": True,
    }
    assert card.input_schema is not None and card.input_schema["required"] == ["text"]
    assert card.input_validator is not None and card.output_validator is not None
    # providerConfig is opaque: any keys (snake_case, odd characters), any JSON values, kept as written
    assert card.provider_config == {
        "model": "gpt-x",
        "max_output_tokens": 100,
        "weird key!": [1, 2.5, True, None, {"nested": "yes"}],
        "stop": ["\n\n"],
    }


def test_full_manifest_is_an_official_agent_skill() -> None:
    skill = SkillCard.parse(read("valid_full.md")).to_agent_skill()
    assert isinstance(skill, AgentSkill)
    assert skill.security_requirements == [
        SecurityRequirement(schemes={"apiKey": StringList(list=[])}),
        SecurityRequirement(
            schemes={"oauth2": StringList(list=["read", "write"]), "mtls": StringList(list=[])}
        ),
    ]
    proto = assert_proto(msgspec.json.encode(skill), "AgentSkill")
    assert proto.id == "text.summarize-v2"
    assert list(proto.tags) == ["text", "summary"]
    assert list(proto.input_modes) == ["text/plain", "application/json"]
    assert list(proto.security_requirements[1].schemes["oauth2"].list) == ["read", "write"]


def test_minimal_manifest_is_an_official_agent_skill() -> None:
    skill = SkillCard.parse(MINIMAL).to_agent_skill()
    assert msgspec.to_builtins(skill) == {
        "id": "greet",
        "name": "Greet",
        "description": "Says hello.",
        "tags": ["demo"],
    }
    assert_proto(msgspec.json.encode(skill), "AgentSkill")


def test_body_is_kept_verbatim_after_the_closing_line() -> None:
    body = "\n  # Title\n\nkeep   spacing\t\n---\nmore\n\n"
    assert SkillCard.parse(MINIMAL.replace("Hello!\n", body)).template == body
    assert SkillCard.parse(MINIMAL.removesuffix("\nHello!\n")).template == ""  # closing line at the end
    crlf = MINIMAL.replace("\n", "\r\n")
    card = SkillCard.parse(crlf)
    assert (card.id, card.template) == ("greet", "Hello!\r\n")
    spaced = MINIMAL.replace("---\n", "---  \n")
    assert SkillCard.parse(spaced).template == "Hello!\n"


def test_card_cannot_be_built_or_changed_directly() -> None:
    with pytest.raises(TypeError, match=r"SkillCard\.parse"):
        SkillCard()
    card = SkillCard.parse(MINIMAL)
    with pytest.raises(AttributeError, match="immutable"):
        card.id = "other"
    with pytest.raises(AttributeError, match="immutable"):
        del card.name
    assert repr(card) == "<SkillCard id='greet'>"


def test_render_fills_the_template() -> None:
    card = SkillCard.parse(read("valid_full.md"))
    assert card.render({"sentences": 2, "text": "A {{ b }}"}) == (
        "Summarize the following text in 2 sentences.\n\nA {{ b }}\n"
    )
    assert card.compiled_template.variables == {"sentences", "text"}


def test_byte_order_mark_is_ignored() -> None:
    assert SkillCard.parse("\ufeff" + MINIMAL).id == "greet"


def with_keys(extra: str) -> str:
    return MINIMAL.replace("tags: [demo]\n", f"tags: [demo]\n{extra}")


@pytest.mark.parametrize(
    ("written", "known"),
    [
        ("input_schema", "inputSchema"),
        ("output_schema", "outputSchema"),
        ("input_modes", "inputModes"),
        ("output_modes", "outputModes"),
        ("security_requirements", "securityRequirements"),
        ("read_only", "readOnly"),
        ("execution_hints", "executionHints"),
        ("provider_config", "providerConfig"),
        ("ReadOnly", "readOnly"),
        ("input-modes", "inputModes"),
    ],
)
def test_misspelled_keys_suggest_the_camel_case_name(written: str, known: str) -> None:
    error = parse_error(with_keys(f"{written}: x\n"))
    assert (error.path, error.line) == (written, 6)
    assert error.reason == f"unknown key {written!r} (did you mean {known!r}?)"


@pytest.mark.parametrize("skill_id", ["a", "A.b_c-9", "9lives", "x" * 64])
def test_good_ids(skill_id: str) -> None:
    assert SkillCard.parse(MINIMAL.replace("id: greet", f"id: {skill_id}")).id == skill_id


@pytest.mark.parametrize("skill_id", ["'.hidden'", "_x", "a b", "grüß", "a/b", "'-x'", "x" * 65, "''"])
def test_bad_ids(skill_id: str) -> None:
    error = parse_error(MINIMAL.replace("id: greet", f"id: {skill_id}"))
    assert (error.path, error.line) == ("id", 2)


@pytest.mark.parametrize(
    "media_type",
    [
        "text/plain",
        "application/vnd.api+json",
        "text/plain; charset=utf-8",
        'multipart/form-data; boundary="a b"',
    ],
)
def test_good_media_types(media_type: str) -> None:
    card = SkillCard.parse(with_keys(f"inputModes: [{json.dumps(media_type)}]\n"))
    assert card.input_modes == (media_type,)


@pytest.mark.parametrize(
    "media_type", ["text", "text/", "/plain", "text/*", "*/*", "text plain", "text/plain;", "a/b/c"]
)
def test_bad_media_types(media_type: str) -> None:
    error = parse_error(with_keys(f"inputModes: [{json.dumps(media_type)}]\n"))
    assert (error.path, error.line) == ("inputModes[0]", 6)
    assert "is not a media type" in error.reason


@pytest.mark.parametrize(
    ("entry", "path", "reason"),
    [
        ("{}", "securityRequirements[0]", "expected at least one scheme name, got an empty mapping"),
        ('{"": []}', "securityRequirements[0]", "a scheme name must not be empty"),
        ('""', "securityRequirements[0]", "expected a non-empty string, got an empty one"),
        (
            "{oauth: [read, 1]}",
            "securityRequirements[0].oauth[1]",
            "expected a non-empty string, got integer",
        ),
        ("{oauth: null}", "securityRequirements[0].oauth", "got null"),
    ],
)
def test_bad_security_requirements(entry: str, path: str, reason: str) -> None:
    error = parse_error(with_keys(f"securityRequirements: [{entry}]\n"))
    assert (error.path, error.line) == (path, 6)
    assert reason in error.reason


@pytest.mark.parametrize("hint", ["maxTokens", "temperature", "topP", "timeoutSeconds", "retryable"])
def test_null_hints_are_refused(hint: str) -> None:
    error = parse_error(with_keys(f"executionHints:\n  {hint}:\n"))
    assert (error.path, error.line) == (f"executionHints.{hint}", 7)
    assert error.reason.endswith("got null")


def test_schema_error_without_a_line_of_its_own_takes_the_nearest_key() -> None:
    text = with_keys("inputSchema:\n  properties: {a: {type: [string, strng]}}\n")
    error = parse_error(text)
    assert (error.path, error.line) == ("inputSchema.properties.a.type", 7)
    error = parse_error(with_keys('inputSchema: {$schema: "http://json-schema.org/draft-07/schema#"}\n'))
    assert (error.path, error.line) == ("inputSchema.$schema", 6)


def test_json_pointers_become_key_paths() -> None:
    from skillwire.skills.manifest import _pointer_path

    schema: dict[str, Any] = {"allOf": [{"properties": {"a/b": {}, "c~d": {}, "0": {}}}]}
    assert _pointer_path(schema, "") == ()
    assert _pointer_path(schema, "/allOf/0/properties/a~1b") == ("allOf", 0, "properties", "a/b")
    assert _pointer_path(schema, "#/allOf/0/properties/c~0d") == ("allOf", 0, "properties", "c~d")
    assert _pointer_path(schema, "/allOf/0/properties/0") == ("allOf", 0, "properties", "0")


# -- limits ---------------------------------------------------------------------------------------------------


def test_too_large_file_is_refused() -> None:
    text = MINIMAL + "x" * MAX_FILE_BYTES
    error = parse_error(text)
    assert (error.path, error.line) == ("", 1)
    assert f"more than the limit of {MAX_FILE_BYTES}" in error.reason


def test_size_limit_counts_utf8_bytes() -> None:
    text = MINIMAL + "é" * (MAX_FILE_BYTES // 2)  # fewer characters than the limit, more bytes
    assert len(text) < MAX_FILE_BYTES
    assert "more than the limit" in parse_error(text).reason


def test_too_large_frontmatter_is_refused() -> None:
    filler = "providerConfig:\n" + "".join(f"  k{i}: {'v' * 60}\n" for i in range(5000))
    text = MINIMAL.replace("tags: [demo]\n", "tags: [demo]\n" + filler)
    assert len(text) < MAX_FILE_BYTES
    error = parse_error(text)
    assert (error.path, error.line) == ("", 2)
    assert f"more than the limit of {_yaml.MAX_FRONTMATTER_BYTES}" in error.reason


def test_nesting_up_to_the_limit_is_accepted() -> None:
    nested = "[" * (_yaml.MAX_DEPTH - 1) + "]" * (_yaml.MAX_DEPTH - 1)
    card = SkillCard.parse(
        MINIMAL.replace("tags: [demo]\n", f"tags: [demo]\nproviderConfig: {{a: {nested[1:-1]}}}\n")
    )
    assert card.provider_config is not None


# -- characters and scalars --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("description: a\rb\n", 4, "carriage return without a line feed"),
        ("description: a\u2028b\n", 4, "U+2028 (LINE SEPARATOR) is a line break to YAML 1.1"),
        ("description: a\x85b\n", 4, "U+0085 (NEXT LINE)"),
        ("description: a\ud800b\n", 4, "lone surrogate (U+D800)"),
        ('description: "a\\ud800b"\n', 4, "invalid Unicode"),
        ("description: a\x01b\n", 4, "invalid YAML: character #x0001"),
    ],
)
def test_ambiguous_or_invalid_characters_are_refused(text: str, line: int, reason: str) -> None:
    error = parse_error(MINIMAL.replace("description: Says hello.\n", text))
    assert error.line == line
    assert reason in error.reason


def test_lone_surrogate_in_body_is_refused() -> None:
    error = parse_error(MINIMAL + "line 8\nbad \ud800\n")
    assert (error.line, error.reason) == (9, "a lone surrogate is not valid Unicode")


def test_scalars_resolve_like_yaml_1_2_json() -> None:
    text = (
        "nulls: [~, null, Null, NULL]\n"
        "bools: [true, True, TRUE, false, False, FALSE]\n"
        "ints: [0, -3, +7, 012, 0o17, 0x1F, 123456789012345678901234567890]\n"
        "floats: [1.5, -2e3, .5, 6., 1E+2]\n"
        "strings: [yes, no, on, off, y, 1_000, 0b101, 2024-01-01, 12:30:00, 'true', \"1\", .Inf1, nulls]\n"
        "block: |\n  42\n"
        "empty:\n"
    )
    value, _ = _yaml.load(text)
    assert value == {
        "nulls": [None, None, None, None],
        "bools": [True, True, True, False, False, False],
        "ints": [0, -3, 7, 12, 15, 31, 123456789012345678901234567890],
        "floats": [1.5, -2000.0, 0.5, 6.0, 100.0],
        "strings": [
            "yes",
            "no",
            "on",
            "off",
            "y",
            "1_000",
            "0b101",
            "2024-01-01",
            "12:30:00",
            "true",
            "1",
            ".Inf1",
            "nulls",
        ],
        "block": "42\n",
        "empty": None,
    }
    assert [type(v) for v in value["ints"]] == [int] * 7
    assert [type(v) for v in value["floats"]] == [float] * 5


@pytest.mark.parametrize("text", ["-.inf", "+.INF", ".Inf", ".NaN", ".NAN", "1e400", "-1e400"])
def test_non_finite_numbers_are_refused(text: str) -> None:
    with pytest.raises(ManifestError, match=r"JSON number|too large") as info:
        _yaml.load(f"a:\n  b: {text}\n", first_line=10)
    assert (info.value.path, info.value.line) == ("a.b", 11)


@pytest.mark.parametrize(
    ("text", "path", "reason"),
    [
        ("? [a]\n: b\n", "", "mapping keys must be strings, got a list"),
        ("{a: 1}: b\n", "", "mapping keys must be strings, got a mapping"),
        ("true: b\n", "", "got boolean 'true'"),
        ("~: b\n", "", "got null '~'"),
        ("? \n: b\n", "", "got null ''"),
        ("a: [1, *x]\n", "a[1]", "aliases are not allowed (found *x)"),
        ("a: ! x\n", "a", "explicit tags are not allowed (found !)"),
        ("a: !!binary aGVsbG8=\n", "a", "explicit tags are not allowed"),
        ("a: !!set {x, y}\n", "a", "explicit tags are not allowed"),
        ("a: !!timestamp 2024-01-01\n", "a", "explicit tags are not allowed"),
        ("%TAG !e! tag:example.com,2000:\n---\na: 1\n", "", "YAML directives"),
        ("a: 1\n...\n---\nb: 2\n", "", "only one YAML document"),
        ("a: " + "9" * 5000 + "\n", "a", "is too large"),
    ],
)
def test_loader_refusals(text: str, path: str, reason: str) -> None:
    with pytest.raises(ManifestError) as info:
        _yaml.load(text)
    assert info.value.path == path
    assert reason in info.value.reason


def test_quoted_merge_key_is_only_a_string() -> None:
    assert _yaml.load('"<<": 1\n')[0] == {"<<": 1}


def test_line_map_names_the_line_of_every_key_and_item() -> None:
    text = "a: 1\nb:\n  - x\n  -\n    c: 2\nd: {e: [f]}\n"
    value, lines = _yaml.load(text, first_line=5)
    assert value == {"a": 1, "b": ["x", {"c": 2}], "d": {"e": ["f"]}}
    assert lines == {
        (): 5,
        ("a",): 5,
        ("b",): 6,
        ("b", 0): 7,
        ("b", 1): 9,
        ("b", 1, "c"): 9,
        ("d",): 10,
        ("d", "e"): 10,
        ("d", "e", 0): 10,
    }
    assert len(lines) == 9
    assert lines.get(("b", 2)) is None and lines.get(("a", "x")) is None
    assert _yaml.load("")[1] == {}


def test_format_path() -> None:
    assert _yaml.format_path(()) == ""
    assert _yaml.format_path(("inputSchema", "properties", "name")) == "inputSchema.properties.name"
    assert _yaml.format_path(("tags", 1)) == "tags[1]"
    assert _yaml.format_path(("a", "b.c", "$ref", "x y")) == 'a["b.c"].$ref["x y"]'


# Text YAML can carry: no control characters, surrogates, YAML 1.1 line breaks, BOM or non-characters.
YAML_TEXT = st.text(
    st.characters(
        blacklist_categories=("Cs", "Cc"), blacklist_characters="\x85\u2028\u2029\ufeff\ufffe\uffff"
    )
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | YAML_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(YAML_TEXT, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_json_text_loads_as_the_same_value(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert _yaml.load(text)[0] == value


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_card_or_a_manifest_error(text: str) -> None:
    for candidate in (
        text,
        f"---\n{text}\n---\nbody\n",
        MINIMAL.replace("tags: [demo]\n", f"tags: [demo]\n{text}\n"),
    ):
        try:
            SkillCard.parse(candidate)
        except ManifestError as exc:
            assert exc.reason


# -- nothing but the text --------------------------------------------------------------------------------------


class Touched(Exception):
    """Raised by anything that parsing must never call."""


def test_parsing_reads_nothing_but_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {p.name: p.read_text(encoding="utf-8") for p in FIXTURES.glob("*.md")}
    calls: list[str] = []

    def forbidden(name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise Touched(name)

        return refuse

    for target, name in [
        (builtins, "open"),
        (io, "open"),
        (os, "open"),
        (os, "system"),
        (os, "popen"),
        (os, "listdir"),
        (os, "scandir"),
        (os, "stat"),
        (socket, "socket"),
        (socket, "create_connection"),
        (socket, "getaddrinfo"),
        (subprocess, "Popen"),
        (importlib, "import_module"),
        (builtins, "eval"),
        (builtins, "exec"),
        (builtins, "compile"),
        (builtins, "__import__"),  # last: monkeypatch.setattr itself imports
    ]:
        monkeypatch.setattr(target, name, forbidden(f"{target.__name__}.{name}"))
    outcomes = {}
    try:
        for name, text in texts.items():
            try:
                SkillCard.parse(text, source=name)
                outcomes[name] = "ok"
            except ManifestError:
                outcomes[name] = "refused"
            except BaseException as exc:  # reported below, once the patches are gone
                outcomes[name] = f"{type(exc).__name__}: {exc}"
    finally:
        monkeypatch.undo()
    assert calls == []
    assert outcomes == {name: "ok" if name in VALID else "refused" for name in texts}


def test_python_tag_runs_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: ran.append(a))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: ran.append(a))
    for payload in (
        '!!python/object/apply:os.system ["echo pwned"]',
        "!!python/object/new:subprocess.Popen [[echo, pwned]]",
        "!!python/name:os.system",
        "!!python/module:os",
        "!!python/object:__main__.X {a: 1}",
    ):
        text = MINIMAL.replace("tags: [demo]\n", f"tags: [demo]\nproviderConfig: {payload}\n")
        error = parse_error(text)
        assert (error.path, error.line) == ("providerConfig", 6)
        assert "explicit tags are not allowed" in error.reason
    assert ran == []
