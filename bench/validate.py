"""Microbenchmark: JSON Schema validation of the greeter skill's input, in microseconds per call.

    python bench/validate.py

Measures ``validate_json`` (the public helper, with its compiled-validator cache) and a validator compiled
once by ``compile_schema``, on a valid and an invalid instance, best of several timeit repeats.
"""

from __future__ import annotations

import timeit
from pathlib import Path

from skillwire import SkillCard, compile_schema, validate_json
from skillwire.errors import ValidationError

ROOT = Path(__file__).resolve().parent.parent
NUMBER = 100_000
REPEAT = 5


def best_us(statement: object) -> float:
    times = timeit.repeat(statement, number=NUMBER, repeat=REPEAT)  # type: ignore[arg-type]
    return min(times) / NUMBER * 1e6


def main() -> None:
    card = SkillCard.parse((ROOT / "examples/greeter/greet/SKILL.md").read_text())
    schema = card.input_schema
    assert schema is not None
    valid = {"name": "Ada", "style": "formal"}
    invalid = {"name": "Ada", "style": "shouty"}
    validator = compile_schema(schema)

    def raises(check: object) -> None:
        try:
            check()  # type: ignore[operator]
        except ValidationError:
            return
        raise AssertionError("expected a ValidationError")

    rows = [
        ("validate_json(schema, valid)", best_us(lambda: validate_json(schema, valid))),
        ("compiled.validate(valid)", best_us(lambda: validator.validate(valid))),
        ("compiled.is_valid(invalid)", best_us(lambda: validator.is_valid(invalid))),
        (
            "validate_json(schema, invalid) raising",
            best_us(lambda: raises(lambda: validate_json(schema, invalid))),
        ),
        ("compile_schema(schema)", best_us(lambda: compile_schema(schema))),
    ]
    print("| call (greeter input schema) | µs per call |")
    print("|---|---:|")
    for name, us in rows:
        print(f"| `{name}` | {us:.2f} |")


if __name__ == "__main__":
    main()
