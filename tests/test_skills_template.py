"""Prompt templates: substitution, JSON rendering of non-strings, escapes, and every error with its location."""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest

from skillwire.errors import RenderError
from skillwire.skills import template as template_module
from skillwire.skills.template import Template, compile_template, render

# -- substitution -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "variables", "expected"),
    [
        ("Hello {{ name }}!", {"name": "Ada"}, "Hello Ada!"),
        ("Hello {{name}}!", {"name": "Ada"}, "Hello Ada!"),
        ("Hello {{   name\t}}!", {"name": "Ada"}, "Hello Ada!"),
        ("{{ user.name }}", {"user": {"name": "Ada"}}, "Ada"),
        ("{{ a.b.c }}", {"a": {"b": {"c": "deep"}}}, "deep"),
        ("{{ items.0 }}/{{ items.1 }}", {"items": ["x", "y"]}, "x/y"),
        ("{{ items.1.title }}", {"items": [{}, {"title": "second"}]}, "second"),
        ("{{ rows.0.0 }}", {"rows": [("t",)]}, "t"),
        ("{{ codes.404 }}", {"codes": {"404": "not found"}}, "not found"),
        (
            "{{ first-name }} {{ _private }} {{ x2 }}",
            {"first-name": "A", "_private": "B", "x2": "C"},
            "A B C",
        ),
        ("{{ a }}{{ a }}", {"a": "twice"}, "twicetwice"),
        ("no tags at all", {}, "no tags at all"),
        ("", {}, ""),
        ("{{ name }}", {"name": "literal {{ braces }} stay"}, "literal {{ braces }} stay"),
        ("{{ name }}", {"name": ""}, ""),
        ("{ single } and }} stray", {}, "{ single } and }} stray"),
        ("héllo {{ name }} ✓", {"name": "wörld"}, "héllo wörld ✓"),
        ("multi\nline {{ a }}\n", {"a": "ok"}, "multi\nline ok\n"),
        ("unused variables are fine", {"extra": 1}, "unused variables are fine"),
    ],
)
def test_variables_are_substituted(source: str, variables: dict[str, Any], expected: str) -> None:
    assert render(source, variables) == expected
    assert compile_template(source).render(variables) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", "text"),
        (3, "3"),
        (-2.5, "-2.5"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ([1, "a", None], '[1,"a",null]'),
        ((1, 2), "[1,2]"),
        ({"k": 1, "é": [True]}, '{"k":1,"é":[true]}'),
        (OrderedDict(b=1, a=2), '{"b":1,"a":2}'),
        (MappingProxyType({"m": {"n": 1}}), '{"m":{"n":1}}'),
        ("", ""),
    ],
)
def test_strings_render_as_is_and_everything_else_as_compact_json(value: object, expected: str) -> None:
    assert render("{{ v }}", {"v": value}) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (r"\{{ name }}", "{{ name }}"),
        (r"a \{{ b", "a {{ b"),
        (r"\{{ name }} is {{ name }}", "{{ name }} is Ada"),
        (r"\{{{ name }}", "{{{ name }}"),
        (r"\\{{ name }}", "\\{{ name }}"),  # only the backslash right before the braces is an escape
        (r"back\slash {{ name }}", r"back\slash Ada"),
        ("{{ name }}}", "Ada}"),
    ],
)
def test_escaped_braces_are_literal(source: str, expected: str) -> None:
    assert render(source, {"name": "Ada"}) == expected


# -- syntax errors, at compile time -----------------------------------------------------------------------

NOT_A_VARIABLE = "braces hold only a name or a dotted path such as user.name or items.0"


@pytest.mark.parametrize(
    ("source", "location", "reason"),
    [
        ("{{ a + b }}", "1:1", f"'a + b' is not a variable: {NOT_A_VARIABLE} (templates have no expressions, filters or logic)"),
        ("Hi {{ }}", "1:4", "empty '{{ }}': expected a variable name"),
        ("Hi {{}}", "1:4", "empty '{{ }}': expected a variable name"),
        ("line one\n  {{ name", "2:3", "'{{' is never closed by '}}'"),
        ("ok {{ a }}\n\nthen {{ b }} {{ c", "3:14", "'{{' is never closed by '}}'"),
        ("{{ name | upper }}", "1:1", "'name | upper' is not a variable"),
        ("{{ #if x }}", "1:1", "'#if x' is not a variable"),
        ("{{ user. name }}", "1:1", "'user. name' is not a variable"),
        ("{{ user.name. }}", "1:1", "'user.name.' is not a variable"),
        ("{{ .name }}", "1:1", "'.name' is not a variable"),
        ("{{ 0 }}", "1:1", "'0' is not a variable"),
        ("{{ items.-1 }}", "1:1", "'items.-1' is not a variable"),
        ("{{ items.01 }}", "1:1", "'items.01' is not a variable"),
        ("{{ a b }}", "1:1", "'a b' is not a variable"),
        ("{{ 'text' }}", "1:1", "\"'text'\" is not a variable"),
        ("{{ f() }}", "1:1", "'f()' is not a variable"),
        ("{{{ name }}}", "1:1", "'{ name' is not a variable"),
        ("{{ a {{ b }}", "1:1", "'a {{ b' is not a variable"),
        ("x\n\ty {{ a[0] }}", "2:4", "'a[0]' is not a variable"),
        ("{{ ä }}", "1:1", "'ä' is not a variable"),
    ],
)  # fmt: skip
def test_anything_but_a_path_in_braces_is_a_syntax_error(source: str, location: str, reason: str) -> None:
    with pytest.raises(RenderError) as caught:
        compile_template(source)
    assert caught.value.location == location
    assert caught.value.reason.startswith(reason)
    assert caught.value.variable == ""
    assert str(caught.value).startswith(f"{location}: ")
    with pytest.raises(RenderError):
        render(source, {"a": 1, "b": 2, "name": "n"})


def test_a_syntax_error_is_found_even_when_no_variables_are_given() -> None:
    with pytest.raises(RenderError, match="never closed"):
        compile_template("fine {{ a }} then {{ broken")


# -- missing variables and bad paths, at render time ------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "variables", "location", "variable", "reason"),
    [
        ("Hi {{ name }}", {}, "1:4", "name", "missing variable 'name'"),
        ("{{ a }} {{ b }}", {"a": 1}, "1:9", "b", "missing variable 'b'"),
        ("x\n{{ user.name }}", {"user": {}}, "2:1", "user.name", "missing variable 'user.name': 'user' has no 'name'"),
        ("{{ a.b.c }}", {"a": {"b": {"d": 1}}}, "1:1", "a.b.c", "missing variable 'a.b.c': 'a.b' has no 'c'"),
        ("{{ items.2 }}", {"items": ["x", "y"]}, "1:1", "items.2", "missing variable 'items.2': 'items' has only 2 items"),
        ("{{ items.1 }}", {"items": ["x"]}, "1:1", "items.1", "missing variable 'items.1': 'items' has only 1 item"),
        ("{{ user.name }}", {"user": "Ada"}, "1:1", "user.name", "cannot resolve 'user.name': 'user' is a string, not a mapping"),
        ("{{ user.name }}", {"user": None}, "1:1", "user.name", "cannot resolve 'user.name': 'user' is null, not a mapping"),
        ("{{ n.x }}", {"n": 3}, "1:1", "n.x", "cannot resolve 'n.x': 'n' is a number, not a mapping"),
        ("{{ items.first }}", {"items": [1]}, "1:1", "items.first", "cannot resolve 'items.first': 'items' is a list, not a mapping"),
        ("{{ word.0 }}", {"word": "abc"}, "1:1", "word.0", "cannot resolve 'word.0': 'word' is a string, not a mapping or a list"),
        ("{{ flag.0 }}", {"flag": True}, "1:1", "flag.0", "cannot resolve 'flag.0': 'flag' is a boolean, not a mapping or a list"),
        ("{{ s.0 }}", {"s": {1, 2}}, "1:1", "s.0", "cannot resolve 's.0': 's' is a set, not a mapping or a list"),
    ],
)  # fmt: skip
def test_missing_variables_are_errors_never_empty_text(
    source: str, variables: dict[str, Any], location: str, variable: str, reason: str
) -> None:
    with pytest.raises(RenderError) as caught:
        render(source, variables)
    error = caught.value
    assert (error.location, error.variable, error.reason) == (location, variable, reason)
    assert str(error) == f"{location}: {reason}"


def test_a_variable_whose_value_is_null_is_not_missing() -> None:
    assert render("{{ a }}", {"a": None}) == "null"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({1, 2}, "variable 'v' cannot be rendered as JSON: set is not JSON"),
        ([object()], "variable 'v' cannot be rendered as JSON: object is not JSON"),
    ],
)
def test_values_that_are_not_json_are_errors(value: object, reason: str) -> None:
    with pytest.raises(RenderError) as caught:
        render("x {{ v }}", {"v": value})
    assert (caught.value.reason, caught.value.location, caught.value.variable) == (reason, "1:3", "v")


def test_a_value_that_contains_itself_is_an_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(RenderError, match="cannot be rendered as JSON: Circular reference"):
        render("{{ v }}", {"v": loop})


# -- compiled templates -----------------------------------------------------------------------------------


def test_compiled_template_lists_its_variable_paths() -> None:
    template = compile_template("{{ user.name }} {{user.name}} {{ items.0 }} \\{{ escaped }} {{ n }}")
    assert template.variables == frozenset({"user.name", "items.0", "n"})
    assert compile_template("plain").variables == frozenset()
    assert isinstance(template, Template)
    assert template.source.startswith("{{ user.name }}")
    assert repr(compile_template("a {{ b }}")) == "Template('a {{ b }}')"


def test_a_compiled_template_renders_many_times() -> None:
    template = compile_template("{{ who }} says {{ what }}")
    assert template.render({"who": "Ada", "what": "hi"}) == "Ada says hi"
    assert template.render({"who": "Bob", "what": 2}) == "Bob says 2"


def test_render_parses_each_distinct_template_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = template_module._parse

    def counting(source: str) -> Any:
        parsed.append(source)
        return real(source)

    template_module._cached.cache_clear()
    monkeypatch.setattr(template_module, "_parse", counting)
    try:
        for name in ("a", "b", "c"):
            assert render("hi {{ name }}", {"name": name}) == f"hi {name}"
        render("bye {{ name }}", {"name": "a"})
        assert parsed == ["hi {{ name }}", "bye {{ name }}"]
    finally:
        template_module._cached.cache_clear()
