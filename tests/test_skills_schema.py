"""The JSON Schema subset: every keyword by table (verdict, reason, instance and schema pointers), every refusal
at compile time, recursion through $ref, the validate_json cache, JSON equality, and agreement with the
reference implementation (jsonschema, when it happens to be installed) on random schemas."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillwire import compile_schema, validate_json
from skillwire.errors import SchemaError, ValidationError
from skillwire.skills import schema as schema_module
from skillwire.skills.schema import DIALECT, SUPPORTED_KEYWORDS, Validator

GREETER = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}, "style": {"enum": ["casual", "formal"]}},
    "required": ["name"],
    "additionalProperties": False,
}


def failure(schema: object, instance: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        compile_schema(schema).validate(instance)
    return caught.value


# -- the greeter, end to end ------------------------------------------------------------------------------


def test_greeter_accepts_a_valid_input() -> None:
    validator = compile_schema(GREETER)
    validator.validate({"name": "Ada", "style": "formal"})
    assert validator.is_valid({"name": "Ada"})


@pytest.mark.parametrize(
    ("instance", "reason", "instance_path", "schema_path"),
    [
        ({"name": "Ada", "style": "casual2"}, "'casual2' is not one of ['casual', 'formal']", "/style", "/properties/style/enum"),
        ({"style": "casual"}, "missing required property 'name'", "", "/required"),
        ({"name": ""}, "length 0 is less than minLength 1", "/name", "/properties/name/minLength"),
        ({"name": 7}, "expected string, got integer", "/name", "/properties/name/type"),
        ({"name": "Ada", "x": 1}, "additional property 'x' is not allowed", "", "/additionalProperties"),
        (["Ada"], "expected object, got array", "", "/type"),
    ],
)  # fmt: skip
def test_greeter_reports_the_violation(
    instance: object, reason: str, instance_path: str, schema_path: str
) -> None:
    error = failure(GREETER, instance)
    assert (error.reason, error.instance_path, error.schema_path) == (reason, instance_path, schema_path)
    assert not compile_schema(GREETER).is_valid(instance)


def test_error_message_names_both_locations() -> None:
    error = failure(GREETER, {"name": ""})
    assert str(error) == "/name: length 0 is less than minLength 1 (schema /properties/name/minLength)"


# -- every keyword: valid instances -----------------------------------------------------------------------

VALID: list[tuple[object, object]] = [
    (True, {"anything": [1]}),
    ({}, None),
    ({"type": "string"}, "a"),
    ({"type": "integer"}, 3),
    ({"type": "integer"}, 3.0),
    ({"type": "integer"}, -(2**70)),
    ({"type": "number"}, 3),
    ({"type": "number"}, 2.5),
    ({"type": "null"}, None),
    ({"type": "boolean"}, False),
    ({"type": "object"}, {}),
    ({"type": "array"}, []),
    ({"type": ["string", "null"]}, None),
    ({"type": ["integer", "boolean"]}, True),
    ({"enum": [1, "a", None]}, 1.0),
    ({"enum": [1, "a", None]}, None),
    ({"enum": [{"a": 1, "b": [2]}]}, {"b": [2.0], "a": 1}),
    ({"enum": [[1, 2]]}, [1.0, 2]),
    ({"const": 1}, 1.0),
    ({"const": {"a": [1, 2]}}, {"a": [1, 2.0]}),
    ({"const": None}, None),
    ({"properties": {"a": {"type": "string"}}}, {"a": "x", "b": 1}),
    ({"properties": {"a": {"type": "string"}}}, "not an object"),
    ({"required": ["a"]}, {"a": None}),
    ({"required": ["a"]}, ["a"]),
    ({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1}),
    ({"patternProperties": {"^x-": {}}, "additionalProperties": False}, {"x-trace": 1}),
    ({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}, {"a": "s", "b": 2}),
    ({"patternProperties": {"^n_": {"type": "number"}}}, {"n_a": 1, "m": "x"}),
    ({"patternProperties": {"b": {"type": "number"}}}, {"abc": 1}),
    ({"propertyNames": {"maxLength": 3}}, {"abc": 1}),
    ({"propertyNames": False}, {}),
    ({"minProperties": 1}, {"a": 1}),
    ({"maxProperties": 1}, {"a": 1}),
    ({"dependentRequired": {"card": ["billing"]}}, {"card": 1, "billing": 2}),
    ({"dependentRequired": {"card": ["billing"]}}, {"billing": 2}),
    ({"prefixItems": [{"type": "string"}, {"type": "integer"}]}, ["a"]),
    ({"prefixItems": [{"type": "string"}, {"type": "integer"}]}, ["a", 1, "extra"]),
    ({"items": {"type": "integer"}}, [1, 2.0]),
    ({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, ["a", 1, 2]),
    ({"prefixItems": [{}], "items": False}, ["a"]),
    ({"items": False}, []),
    ({"contains": {"type": "integer"}}, ["a", 1]),
    ({"contains": {"type": "integer"}, "minContains": 0}, []),
    ({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}, [1, "a", 2, 3]),
    ({"minContains": 5, "maxContains": 0}, [1, 2]),
    ({"minItems": 1}, [None]),
    ({"maxItems": 1}, [None]),
    ({"uniqueItems": True}, [1, True, "1", [1], [True], {"a": 1}, {"a": True}]),
    ({"uniqueItems": False}, [1, 1]),
    ({"minLength": 2}, "ab"),
    ({"maxLength": 1}, "\U0001f600"),  # one code point, two UTF-16 units
    ({"minLength": 2}, 5),
    ({"pattern": "^a+$"}, "aaa"),
    ({"pattern": "b"}, "abc"),  # searched, not anchored
    ({"pattern": "^a"}, 5),
    ({"format": "email"}, "not an email"),
    ({"format": "date-time"}, 17),
    ({"minimum": 5}, 5),
    ({"minimum": 5}, True),  # a boolean is not a number
    ({"maximum": 5}, 5.0),
    ({"exclusiveMinimum": 5}, 5.5),
    ({"exclusiveMaximum": 5}, 4),
    ({"multipleOf": 3}, 9),
    ({"multipleOf": 3}, 9.0),
    ({"multipleOf": 0.1}, 0.3),
    ({"multipleOf": 0.5}, 2),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "ab"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1.5),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -1),
    ({"not": {"type": "string"}}, 1),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, "ab"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, 2),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, 1.5),
    ({"then": False, "else": False}, 1),  # without "if" they do nothing
    ({"$defs": {"pos": {"minimum": 0}}, "properties": {"n": {"$ref": "#/$defs/pos"}}}, {"n": 0}),
    ({"definitions": {"pos": {"minimum": 0}}, "items": {"$ref": "#/definitions/pos"}}, [0, 1]),
    ({"$schema": DIALECT, "type": "string"}, "a"),
    ({"$schema": DIALECT + "#", "type": "string"}, "a"),
    ({"$id": "https://example.com/greeter", "type": "string"}, "a"),
    (
        {
            "$comment": "c",
            "title": "t",
            "description": "d",
            "default": {"any": "thing"},
            "examples": ["e"],
            "deprecated": True,
            "readOnly": False,
            "writeOnly": False,
            "contentEncoding": "base64",
            "contentMediaType": "image/png",
        },
        "anything",
    ),
    # msgspec and pydantic write OpenAPI's discriminator beside the oneOf/anyOf that does the checking
    ({"oneOf": [{"const": 1}, {"const": 2}], "discriminator": {"propertyName": "kind"}}, 2),
]


@pytest.mark.parametrize(("schema", "instance"), VALID)
def test_valid_instances_pass(schema: object, instance: object) -> None:
    validator = compile_schema(schema)
    validator.validate(instance)
    assert validator.is_valid(instance)


def test_every_supported_keyword_has_a_valid_case() -> None:
    used: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            used.update(key for key in node if key in SUPPORTED_KEYWORDS)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk([schema for schema, _ in VALID])
    assert used == SUPPORTED_KEYWORDS


# -- every keyword: the first violation, where it is, and why ----------------------------------------------

INVALID: list[tuple[object, object, str, str, str]] = [
    (False, 1, "no value is allowed here (the schema is false)", "", ""),
    ({"type": "integer"}, True, "expected integer, got boolean", "", "/type"),
    ({"type": "number"}, False, "expected number, got boolean", "", "/type"),
    ({"type": "integer"}, 2.5, "expected integer, got number", "", "/type"),
    ({"type": "boolean"}, 0, "expected boolean, got integer", "", "/type"),
    ({"type": "string"}, None, "expected string, got null", "", "/type"),
    ({"type": ["string", "null"]}, 1, "expected string or null, got integer", "", "/type"),
    ({"type": "array"}, (1, 2), "expected array, got tuple", "", "/type"),
    ({"enum": [1]}, True, "true is not one of [1]", "", "/enum"),
    ({"enum": [False]}, 0, "0 is not one of [false]", "", "/enum"),
    ({"enum": [[1]]}, [True], "[true] is not one of [[1]]", "", "/enum"),
    ({"enum": [{"a": 1}]}, {"a": 1, "b": 2}, "{'a': 1, 'b': 2} is not one of [{'a': 1}]", "", "/enum"),
    ({"const": "x"}, "y", "expected 'x', got 'y'", "", "/const"),
    ({"const": True}, 1, "expected true, got 1", "", "/const"),
    ({"const": None}, False, "expected null, got false", "", "/const"),
    ({"properties": {"a": {"type": "string"}}}, {"a": 1}, "expected string, got integer", "/a", "/properties/a/type"),
    ({"properties": {"a/b~c": {"type": "string"}}}, {"a/b~c": 1}, "expected string, got integer", "/a~1b~0c", "/properties/a~1b~0c/type"),
    ({"properties": {"a": False}}, {"a": 1}, "no value is allowed here (the schema is false)", "/a", "/properties/a"),
    ({"required": ["a", "b"]}, {"b": 1}, "missing required property 'a'", "", "/required"),
    ({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1, "x": 2}, "additional property 'x' is not allowed", "", "/additionalProperties"),
    ({"patternProperties": {"^x-": {}}, "additionalProperties": False}, {"x-a": 1, "y": 1}, "additional property 'y' is not allowed", "", "/additionalProperties"),
    ({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}, {"a": "s", "b": "t"}, "expected integer, got string", "/b", "/additionalProperties/type"),
    ({"patternProperties": {"^n_": {"type": "number"}}}, {"n_a": "x"}, "expected number, got string", "/n_a", "/patternProperties/^n_/type"),
    ({"propertyNames": {"maxLength": 3}}, {"abcd": 1}, "property name 'abcd': length 4 is greater than maxLength 3", "", "/propertyNames/maxLength"),
    ({"propertyNames": False}, {"a": 1}, "property name 'a': no value is allowed here (the schema is false)", "", "/propertyNames"),
    ({"minProperties": 2}, {"a": 1}, "has 1 property, fewer than minProperties 2", "", "/minProperties"),
    ({"maxProperties": 1}, {"a": 1, "b": 2}, "has 2 properties, more than maxProperties 1", "", "/maxProperties"),
    ({"dependentRequired": {"card": ["billing"]}}, {"card": 1}, "property 'billing' is required when 'card' is present", "", "/dependentRequired/card"),
    ({"prefixItems": [{"type": "string"}, {"type": "integer"}]}, ["a", "b"], "expected integer, got string", "/1", "/prefixItems/1/type"),
    ({"items": {"type": "integer"}}, [1, "x"], "expected integer, got string", "/1", "/items/type"),
    ({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, ["a", "b"], "expected integer, got string", "/1", "/items/type"),
    ({"prefixItems": [{}], "items": False}, ["a", "b"], "has 2 items, but only the 1 in prefixItems are allowed", "", "/items"),
    ({"items": False}, [1], "has 1 item, but items is false", "", "/items"),
    ({"contains": {"type": "integer"}}, ["a"], "no item matches contains", "", "/contains"),
    ({"contains": {"type": "integer"}}, [], "no item matches contains", "", "/contains"),
    ({"contains": {"type": "integer"}, "minContains": 2}, ["a", 1], "1 item matches contains, fewer than minContains 2", "", "/minContains"),
    ({"contains": {"type": "integer"}, "maxContains": 1}, [1, 2], "2 items match contains, more than maxContains 1", "", "/maxContains"),
    ({"minItems": 1}, [], "has 0 items, fewer than minItems 1", "", "/minItems"),
    ({"maxItems": 1}, [1, 2], "has 2 items, more than maxItems 1", "", "/maxItems"),
    ({"uniqueItems": True}, [1, 2, 1.0], "items 0 and 2 are equal, but uniqueItems is true", "", "/uniqueItems"),
    ({"uniqueItems": True}, [{"a": 1, "b": 2}, {"b": 2, "a": 1}], "items 0 and 1 are equal, but uniqueItems is true", "", "/uniqueItems"),
    ({"minLength": 2}, "\U0001f600", "length 1 is less than minLength 2", "", "/minLength"),
    ({"maxLength": 2}, "abc", "length 3 is greater than maxLength 2", "", "/maxLength"),
    ({"pattern": "^a+$"}, "ab", "'ab' does not match pattern '^a+$'", "", "/pattern"),
    ({"minimum": 5}, 4, "4 is less than minimum 5", "", "/minimum"),
    ({"maximum": 5}, 5.5, "5.5 is greater than maximum 5", "", "/maximum"),
    ({"exclusiveMinimum": 5}, 5, "5 is not greater than exclusiveMinimum 5", "", "/exclusiveMinimum"),
    ({"exclusiveMaximum": 5}, 5.0, "5.0 is not less than exclusiveMaximum 5", "", "/exclusiveMaximum"),
    ({"multipleOf": 3}, 7, "7 is not a multiple of 3", "", "/multipleOf"),
    ({"multipleOf": 0.1}, 0.35, "0.35 is not a multiple of 0.1", "", "/multipleOf"),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "a", "length 1 is less than minLength 2", "", "/allOf/1/minLength"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, "1.5 matches none of the 2 schemas in anyOf", "", "/anyOf"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1, "matches more than one schema in oneOf (0 and 1)", "", "/oneOf"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -1.5, "-1.5 matches none of the 2 schemas in oneOf", "", "/oneOf"),
    ({"not": {"type": "string"}}, "x", "'x' must not match the schema in not", "", "/not"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, "a", "length 1 is less than minLength 2", "", "/then/minLength"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, 1.5, "expected integer, got number", "", "/else/type"),
    ({"$defs": {"pos": {"minimum": 0}}, "properties": {"n": {"$ref": "#/$defs/pos"}}}, {"n": -1}, "-1 is less than minimum 0", "/n", "/$defs/pos/minimum"),
    ({"properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}}, {"b": 1}, "expected string, got integer", "/b", "/properties/a/type"),
    ({"prefixItems": [{"type": "string"}], "items": {"$ref": "#/prefixItems/0"}}, ["a", 2], "expected string, got integer", "/1", "/prefixItems/0/type"),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "minLength": 2}, "a", "length 1 is less than minLength 2", "", "/minLength"),
    ({"$defs": {"a b": {"type": "string"}}, "$ref": "#/$defs/a%20b"}, 1, "expected string, got integer", "", "/$defs/a b/type"),
    ({"$defs": {"x/y": {"type": "integer"}}, "$ref": "#/$defs/x~1y"}, "1", "expected integer, got string", "", "/$defs/x~1y/type"),
    ({"items": {"properties": {"a": {"items": {"type": "null"}}}}}, [{}, {"a": [None, 0]}], "expected null, got integer", "/1/a/1", "/items/properties/a/items/type"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "instance", "reason", "instance_path", "schema_path"), INVALID)
def test_invalid_instances_report_the_first_violation(
    schema: object, instance: object, reason: str, instance_path: str, schema_path: str
) -> None:
    error = failure(schema, instance)
    assert (error.reason, error.instance_path, error.schema_path) == (reason, instance_path, schema_path)
    assert not compile_schema(schema).is_valid(instance)


def test_keywords_are_checked_in_schema_order() -> None:
    instance = {"b": 1}
    assert failure({"required": ["a"], "maxProperties": 0}, instance).schema_path == "/required"
    assert failure({"maxProperties": 0, "required": ["a"]}, instance).schema_path == "/maxProperties"


def test_object_members_are_checked_in_instance_key_order() -> None:
    schema = {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert failure(schema, {"b": 1, "a": 1}).instance_path == "/b"
    assert failure(schema, {"a": 1, "b": 1}).instance_path == "/a"


def test_long_values_are_shortened_in_reasons() -> None:
    error = failure({"const": "x"}, "y" * 500)
    assert error.reason.startswith("expected 'x', got 'yyy") and error.reason.endswith("...")
    assert len(error.reason) < 100


# -- JSON equality ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (0, -0.0, True),
        (True, 1, False),
        (False, 0, False),
        (None, False, False),
        ("1", 1, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ([1, 2], [2, 1], False),
        ([1, [2.0]], [1.0, [2]], True),
        ([True], [1], False),
        ({"a": [{"b": False}]}, {"a": [{"b": 0}]}, False),
        (2**64, float(2**64), True),
        (2**53 + 1, float(2**53), False),
    ],
)
def test_enum_const_and_unique_items_compare_as_json(a: object, b: object, equal: bool) -> None:
    assert compile_schema({"const": a}).is_valid(b) is equal
    assert compile_schema({"enum": ["other", a]}).is_valid(b) is equal
    assert compile_schema({"uniqueItems": True}).is_valid([a, b]) is not equal


def test_integral_float_is_an_integer_and_bool_is_not() -> None:
    integer = compile_schema({"type": "integer"})
    assert integer.is_valid(3.0) and integer.is_valid(-0.0)
    assert not integer.is_valid(3.5) and not integer.is_valid(True)
    number = compile_schema({"type": "number"})
    assert number.is_valid(7) and not number.is_valid(False)


# -- refused at compile time ------------------------------------------------------------------------------

SCHEMA_ERRORS: list[tuple[object, str, str]] = [
    (3, "", "a schema must be an object or a boolean, got integer"),
    (None, "", "a schema must be an object or a boolean, got null"),
    ([], "", "a schema must be an object or a boolean, got array"),
    ({"properties": {"a": "string"}}, "/properties/a", "a schema must be an object or a boolean, got string"),
    ({1: {}}, "", "schema keys must be strings, got 1"),
    ({"foo": 1}, "/foo", "unsupported keyword 'foo'; the supported subset of JSON Schema 2020-12 is listed in skillwire.skills.schema.SUPPORTED_KEYWORDS"),
    ({"properties": {"a": {"unevaluatedProperties": False}}}, "/properties/a/unevaluatedProperties", "unsupported keyword 'unevaluatedProperties'"),
    ({"dependencies": {}}, "/dependencies", "unsupported keyword 'dependencies' (use dependentRequired)"),
    ({"additionalItems": False}, "/additionalItems", "unsupported keyword 'additionalItems' (in 2020-12, use prefixItems"),
    ({"$anchor": "x"}, "/$anchor", "unsupported keyword '$anchor' (refer to schemas by JSON pointer"),
    ({"type": "str"}, "/type", "type must be one of null, boolean, object, array, number, integer, string or a non-empty array of them, got 'str'"),
    ({"type": []}, "/type", "type must be one of"),
    ({"type": ["string", "string"]}, "/type", "type must be one of"),
    ({"enum": "a"}, "/enum", "enum must be an array of JSON values, got 'a'"),
    ({"enum": [{1: 2}]}, "/enum", "enum must be an array of JSON values"),
    ({"const": float("nan")}, "/const", "const must be a JSON value, got nan"),
    ({"required": "x"}, "/required", "required must be an array of unique strings, got 'x'"),
    ({"required": ["a", "a"]}, "/required", "required must be an array of unique strings, got ['a', 'a']"),
    ({"minLength": -1}, "/minLength", "minLength must be a non-negative integer, got -1"),
    ({"maxItems": 1.5}, "/maxItems", "maxItems must be a non-negative integer, got 1.5"),
    ({"minProperties": True}, "/minProperties", "minProperties must be a non-negative integer, got true"),
    ({"minContains": "1"}, "/minContains", "minContains must be a non-negative integer, got '1'"),
    ({"contains": {}, "maxContains": -2}, "/maxContains", "maxContains must be a non-negative integer, got -2"),
    ({"minimum": "0"}, "/minimum", "minimum must be a number, got '0'"),
    ({"maximum": float("inf")}, "/maximum", "maximum must be a number, got inf"),
    ({"exclusiveMinimum": True}, "/exclusiveMinimum", "exclusiveMinimum must be a number, got true (the draft-04 boolean form is not supported)"),
    ({"multipleOf": 0}, "/multipleOf", "multipleOf must be greater than 0, got 0"),
    ({"pattern": "("}, "/pattern", "invalid regular expression '(': missing ): (; patterns are RE2 syntax"),
    ({"pattern": 1}, "/pattern", "pattern must be a string, got 1"),
    ({"patternProperties": {"(": {}}}, "/patternProperties/(", "invalid regular expression '('"),
    ({"properties": []}, "/properties", "properties must be an object of schemas, got []"),
    ({"$defs": {"a": {"type": "nope"}}}, "/$defs/a/type", "type must be one of"),
    ({"allOf": []}, "/allOf", "allOf must be a non-empty array of schemas, got []"),
    ({"anyOf": {}}, "/anyOf", "anyOf must be a non-empty array of schemas, got {}"),
    ({"oneOf": [{}, 3]}, "/oneOf/1", "a schema must be an object or a boolean, got integer"),
    ({"not": "x"}, "/not", "a schema must be an object or a boolean, got string"),
    ({"then": 1}, "/then", "a schema must be an object or a boolean, got integer"),
    ({"if": {}, "else": 1}, "/else", "a schema must be an object or a boolean, got integer"),
    ({"items": [{}]}, "/items", "items must be a schema; for per-position schemas use prefixItems"),
    ({"uniqueItems": "yes"}, "/uniqueItems", "uniqueItems must be a boolean, got 'yes'"),
    ({"dependentRequired": {"a": "b"}}, "/dependentRequired/a", "dependentRequired['a'] must be an array of unique strings, got 'b'"),
    ({"dependentRequired": []}, "/dependentRequired", "dependentRequired must be an object, got []"),
    ({"title": 1}, "/title", "title must be a string, got 1"),
    ({"format": None}, "/format", "format must be a string, got null"),
    ({"deprecated": "no"}, "/deprecated", "deprecated must be a boolean, got 'no'"),
    ({"examples": {}}, "/examples", "examples must be an array, got {}"),
    ({"$schema": "http://json-schema.org/draft-07/schema#"}, "/$schema", "unsupported $schema 'http://json-schema.org/draft-07/schema#': only JSON Schema 2020-12 (https://json-schema.org/draft/2020-12/schema) is supported"),
    ({"$schema": DIALECT + "/"}, "/$schema", "unsupported $schema"),
    ({"$id": 3}, "/$id", "$id must be a string, got 3"),
    ({"properties": {"a": {"$id": "a.json"}}}, "/properties/a/$id", "$id is only allowed at the root of the schema"),
    ({"$ref": 1}, "/$ref", "$ref must be a string, got 1"),
    ({"$ref": "https://example.com/s.json"}, "/$ref", "$ref 'https://example.com/s.json' is not supported: only local JSON pointers into the same schema are ('#', '#/$defs/Name'); remote, relative and $id-based refs are refused"),
    ({"items": {"$ref": "item.json#/$defs/a"}}, "/items/$ref", "$ref 'item.json#/$defs/a' is not supported"),
    ({"$id": "https://example.com/r", "$defs": {"a": {}}, "$ref": "https://example.com/r#/$defs/a"}, "/$ref", "$ref 'https://example.com/r#/$defs/a' is not supported: only local JSON pointers"),
    ({"$ref": "#node"}, "/$ref", "$ref '#node' is an anchor; only JSON pointers ('#', '#/$defs/Name') are supported"),
    ({"$defs": {}, "$ref": "#/$defs/missing"}, "/$ref", "$ref '#/$defs/missing' points nowhere: /$defs has no 'missing'"),
    ({"$ref": "#/$defs/a"}, "/$ref", "$ref '#/$defs/a' points nowhere: / has no '$defs'"),
    ({"allOf": [{}], "$ref": "#/allOf/1"}, "/$ref", "$ref '#/allOf/1' points nowhere: /allOf has no '1'"),
    ({"$defs": {"a~b": {}}, "$ref": "#/$defs/a~2b"}, "/$ref", "$ref '#/$defs/a~2b' is not a valid JSON pointer (bad '~' escape)"),
    ({"enum": [{}], "$ref": "#/enum/0"}, "/$ref", "$ref '#/enum/0' points at a value that is not a schema"),
    ({"$defs": {}, "$ref": "#/$defs"}, "/$ref", "$ref '#/$defs' points at a value that is not a schema"),
    ({"$ref": "#"}, "/$ref", "$ref cycle that never steps into the instance, so it could recurse forever: /$ref"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}}, "/$defs/a/$ref", "$ref cycle that never steps into the instance, so it could recurse forever: /$defs/a/$ref -> /$defs/b/allOf/0/$ref"),
    ({"anyOf": [{"type": "string"}, {"not": {"$ref": "#"}}]}, "/anyOf/1/not/$ref", "$ref cycle"),
    ({"if": {"$ref": "#"}}, "/if/$ref", "$ref cycle"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "schema_path", "reason"), SCHEMA_ERRORS)
def test_schemas_outside_the_subset_are_refused(schema: object, schema_path: str, reason: str) -> None:
    with pytest.raises(SchemaError) as caught:
        compile_schema(schema)
    assert caught.value.schema_path == schema_path
    assert caught.value.reason.startswith(reason)


def test_unknown_keyword_error_points_at_the_supported_set() -> None:
    with pytest.raises(SchemaError, match="SUPPORTED_KEYWORDS"):
        compile_schema({"properties": {"a": {"dependentSchemas": {}}}})
    assert "type" in SUPPORTED_KEYWORDS and "unevaluatedProperties" not in SUPPORTED_KEYWORDS
    assert schema_module.__doc__ is not None
    for keyword in SUPPORTED_KEYWORDS:
        assert keyword in schema_module.__doc__, keyword


def test_a_too_deeply_nested_schema_is_a_schema_error() -> None:
    schema: dict[str, Any] = {}
    for _ in range(5000):
        schema = {"not": schema}
    with pytest.raises(SchemaError, match="nested too deeply"):
        compile_schema(schema)


# -- recursion --------------------------------------------------------------------------------------------

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["value"],
        }
    },
    "$ref": "#/$defs/node",
}  # fmt: skip


def test_recursive_schema_accepts_a_valid_tree() -> None:
    compile_schema(TREE).validate(
        {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}, {"value": 4}]}
    )


def test_recursive_schema_reports_deep_violations_with_their_paths() -> None:
    error = failure(
        TREE, {"value": 1, "children": [{"value": 2}, {"value": 3, "children": [{"value": "x"}]}]}
    )
    assert error.reason == "expected integer, got string"
    assert error.instance_path == "/children/1/children/0/value"
    assert error.schema_path == "/$defs/node/properties/value/type"
    assert failure(TREE, {"value": 1, "children": [{}]}).instance_path == "/children/0"


def test_root_recursion_through_hash_ref() -> None:
    linked = {"type": "object", "properties": {"next": {"$ref": "#"}, "n": {"type": "integer"}}}
    chain: dict[str, Any] = {"n": "last"}
    for i in range(50):
        chain = {"n": i, "next": chain}
    error = failure(linked, chain)
    assert error.instance_path == "/next" * 50 + "/n"
    assert error.schema_path == "/properties/n/type"


def test_mutually_recursive_definitions() -> None:
    schema = {
        "$defs": {
            "even": {
                "anyOf": [{"type": "null"}, {"type": "array", "prefixItems": [{"$ref": "#/$defs/odd"}]}]
            },
            "odd": {"type": "array", "minItems": 1, "prefixItems": [{"$ref": "#/$defs/even"}]},
        },
        "$ref": "#/$defs/even",
    }
    validator = compile_schema(schema)
    assert validator.is_valid(None) and validator.is_valid([[None]]) and validator.is_valid([[[[None]]]])
    assert not validator.is_valid([None]) and not validator.is_valid([[[None]]])


def test_an_instance_too_deep_for_the_stack_is_invalid_not_a_crash() -> None:
    deep: Any = None
    for _ in range(20_000):
        deep = [deep]
    validator = compile_schema({"$defs": {"a": {"items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})
    assert validator.is_valid(deep) is False
    with pytest.raises(ValidationError, match="nested too deeply"):
        validator.validate(deep)


# -- compiled once ----------------------------------------------------------------------------------------


def test_the_schema_dict_is_not_read_again_after_compiling() -> None:
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    validator = compile_schema(schema)
    schema["minLength"] = 100
    schema["type"] = "integer"
    assert validator.is_valid("a")
    assert validator.schema is schema
    assert repr(validator) == "Validator({'type': 'integer', 'minLength': 100})"


# -- validate_json and its cache --------------------------------------------------------------------------


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Clear the cache and record every schema that validate_json compiles."""
    seen: list[object] = []
    real = schema_module.compile_schema

    def counting(schema: object) -> Validator:
        seen.append(schema)
        return real(schema)

    schema_module._cached_validator.cache_clear()
    monkeypatch.setattr(schema_module, "compile_schema", counting)
    yield seen
    schema_module._cached_validator.cache_clear()


def test_validate_json_validates(compiles: list[object]) -> None:
    validate_json(GREETER, {"name": "Ada"})
    with pytest.raises(ValidationError) as caught:
        validate_json(GREETER, {"name": "Ada", "style": "casual2"})
    assert caught.value.reason == "'casual2' is not one of ['casual', 'formal']"
    assert caught.value.instance_path == "/style"


def test_equal_schemas_share_one_compiled_validator(compiles: list[object]) -> None:
    validate_json(GREETER, {"name": "Ada"})
    copy = {key: value for key, value in GREETER.items()}  # equal, not identical
    validate_json(copy, {"name": "Bob"})
    validate_json({"type": "string"}, "x")
    validate_json({"type": "string"}, "y")
    assert compiles == [GREETER, {"type": "string"}]


def test_key_order_is_part_of_the_cache_key(compiles: list[object]) -> None:
    # the first violation reported depends on keyword order, so reordered schemas are compiled separately
    with pytest.raises(ValidationError) as first:
        validate_json({"required": ["a"], "maxProperties": 0}, {"b": 1})
    with pytest.raises(ValidationError) as second:
        validate_json({"maxProperties": 0, "required": ["a"]}, {"b": 1})
    assert (first.value.schema_path, second.value.schema_path) == ("/required", "/maxProperties")
    assert len(compiles) == 2


def test_json_equal_but_differently_typed_schemas_are_not_confused(compiles: list[object]) -> None:
    validate_json({"const": 1}, 1)
    with pytest.raises(ValidationError):
        validate_json({"const": True}, 1)
    assert len(compiles) == 2


def test_the_cache_is_bounded(compiles: list[object]) -> None:
    for n in range(300):
        validate_json({"maxLength": n}, "")
    validate_json({"maxLength": 299}, "")
    assert len(compiles) == 300
    validate_json({"maxLength": 0}, "")  # evicted long ago
    assert len(compiles) == 301
    assert schema_module._cached_validator.cache_info().currsize == 256


def test_validate_json_refuses_bad_schemas_every_time(compiles: list[object]) -> None:
    for _ in range(2):
        with pytest.raises(SchemaError, match="unsupported keyword 'nope'"):
            validate_json({"nope": 1}, 1)
    assert len(compiles) == 2


@pytest.mark.parametrize("schema", [{"const": {1, 2}}, {"minimum": float("nan")}, {"enum": [b"x"]}])
def test_validate_json_refuses_schemas_that_are_not_json(schema: object, compiles: list[object]) -> None:
    with pytest.raises(SchemaError, match="the schema is not JSON"):
        validate_json(schema, 1)
    assert compiles == []


# -- agreement with the reference implementation ----------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "x-1"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-4, 4),
    st.sampled_from([0.5, -1.5, 2.0, 2.5, 3.0]),
    st.sampled_from(["", "a", "ab", "abc", "b", "x-1", "7"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(NAMES, kids, max_size=3)),
    max_leaves=8,
)
TYPES = st.sampled_from(["null", "boolean", "object", "array", "number", "integer", "string"])
COUNTS = st.integers(0, 3)
NUMBERS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.5]))


def keyword(name: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return values.map(lambda value: {name: value})


LEAVES = st.one_of(
    st.booleans(),
    keyword("type", st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True))),
    keyword("enum", st.lists(VALUES, min_size=1, max_size=3)),
    keyword("const", VALUES),
    keyword("required", st.lists(NAMES, max_size=2, unique=True)),
    keyword(
        "dependentRequired", st.dictionaries(NAMES, st.lists(NAMES, max_size=2, unique=True), max_size=2)
    ),
    *(keyword(name, COUNTS) for name in ("minProperties", "maxProperties", "minItems", "maxItems")),
    *(keyword(name, COUNTS) for name in ("minLength", "maxLength")),
    keyword("uniqueItems", st.booleans()),
    keyword("pattern", st.sampled_from(["^a", "b", "^$", "\\d", "a|b", "^[a-c]+$"])),
    keyword("format", st.sampled_from(["email", "date"])),
    *(keyword(name, NUMBERS) for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")),
    keyword("multipleOf", st.sampled_from([1, 2, 3, 0.5, 0.25])),
    st.just({"$ref": "#/$defs/d"}),
)


def compound(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    def merged(parts: list[Any]) -> Any:
        out: dict[str, Any] = {}
        for part in parts:
            if isinstance(part, dict):
                out.update(part)
        return out

    schema_lists = st.lists(kids, min_size=1, max_size=3)
    return st.one_of(
        keyword("properties", st.dictionaries(NAMES, kids, max_size=3)),
        st.builds(
            lambda props, extra: {"properties": props, "additionalProperties": extra},
            st.dictionaries(NAMES, kids, max_size=2),
            kids,
        ),
        keyword("patternProperties", st.dictionaries(st.sampled_from(["^a", "b", "-"]), kids, max_size=2)),
        keyword("additionalProperties", kids),
        keyword("propertyNames", kids),
        keyword("items", kids),
        keyword("prefixItems", schema_lists),
        st.builds(lambda prefix, rest: {"prefixItems": prefix, "items": rest}, schema_lists, kids),
        keyword("contains", kids),
        st.builds(
            lambda sub, low, high: {"contains": sub, "minContains": low, "maxContains": high},
            kids,
            COUNTS,
            COUNTS,
        ),
        *(keyword(name, schema_lists) for name in ("allOf", "anyOf", "oneOf")),
        keyword("not", kids),
        st.builds(lambda a, b, c: {"if": a, "then": b, "else": c}, kids, kids, kids),
        st.lists(kids, min_size=2, max_size=3).map(merged),
    )


SCHEMAS = st.recursive(LEAVES, compound, max_leaves=10)
DEFINITIONS = st.recursive(
    LEAVES.filter(lambda s: s != {"$ref": "#/$defs/d"}), compound, max_leaves=6
).filter(lambda s: "$ref" not in repr(s))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=SCHEMAS, definition=DEFINITIONS, instances=st.lists(VALUES, min_size=1, max_size=6))
def test_verdicts_agree_with_the_jsonschema_reference(
    body: Any, definition: Any, instances: list[Any]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"$defs": {"d": definition}, "allOf": [body]}
    ours = compile_schema(schema)
    reference = jsonschema.Draft202012Validator(schema)
    for instance in instances:
        expected = reference.is_valid(instance)
        assert ours.is_valid(instance) is expected, (schema, instance)
        check_raises_iff_invalid(ours.validate, instance, expected)


def check_raises_iff_invalid(validate: Callable[[object], None], instance: object, valid: bool) -> None:
    if valid:
        validate(instance)
    else:
        with pytest.raises(ValidationError):
            validate(instance)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=SCHEMAS, instances=st.lists(VALUES, min_size=1, max_size=6))
def test_is_valid_and_validate_always_agree(body: Any, instances: list[Any]) -> None:
    validator = compile_schema({"$defs": {"d": {"type": "string"}}, "allOf": [body]})
    for instance in instances:
        check_raises_iff_invalid(validator.validate, instance, validator.is_valid(instance))
