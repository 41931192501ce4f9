"""``skillwire``'s commands come from one table of command families (``skillwire.cli.main.FAMILIES``): each
family's module adds exactly the commands it says it runs, no two families claim one command, and every
command of the parser is run by its family."""

from __future__ import annotations

import argparse

from skillwire.cli.main import FAMILIES, Family, _parser


def _added(family: Family) -> list[str]:
    """The commands ``family`` adds to a parser of its own, in order."""
    parser = argparse.ArgumentParser(prog="skillwire")
    sub = parser.add_subparsers(dest="command")
    family.add_parsers(sub)
    return list(sub.choices)


def test_each_family_adds_the_commands_it_runs() -> None:
    for family in FAMILIES:
        assert set(_added(family)) == set(family.COMMANDS), family


def test_no_command_belongs_to_two_families() -> None:
    claimed = [command for family in FAMILIES for command in family.COMMANDS]
    assert len(claimed) == len(set(claimed))


def test_the_parser_has_the_families_commands_in_the_tables_order() -> None:
    [sub] = [action for action in _parser()._actions if isinstance(action, argparse._SubParsersAction)]
    assert list(sub.choices) == [command for family in FAMILIES for command in _added(family)]
