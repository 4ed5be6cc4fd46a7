"""A Pydantic class as the JSON Schema of what Pydantic itself validates, or a refusal naming the field.

`model_json_schema()` describes more than the class accepts: RFC 3339 leap seconds and year 0000
(Pydantic rejects both), ECMA-262 `\\W`/`\\D`/`\\s` in patterns (Pydantic's regex engine reads them
as Unicode classes), `NaiveDatetime` written as `date-time` (which requires an offset).  This module
narrows each of those to the exact language Pydantic accepts, and refuses, with the field's path and
the reason, constraints no automaton can enforce (`PastDate`, `FutureDatetime`, a fixed offset, a
pattern class that cannot be written as ECMA-262).  Custom validators (`field_validator`, ...) run
Python code and are not enforced: `.value` still validates and may raise there.

A model that ignores extra fields (Pydantic's default) is written closed: the members it would drop
never reach the value, so generating them only costs tokens; every instance of the model stays
reachable.  A model with `extra="allow"` keeps them (they become attributes) and stays open.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from stdsl.errors import CompileError, SchemaError

YEAR = r"(?:[1-9]\d{3}|0[1-9]\d{2}|00[1-9]\d|000[1-9])"
LEAP_YEAR = r"(?:\d{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
             r"|02-(?:0[1-9]|1\d|2[0-8]))")
CLOCK = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?"
NAIVE_DATETIME = rf"^(?:{YEAR}-{MONTH_DAY}|{LEAP_YEAR}-02-29)[Tt]{CLOCK}$"
NOT_YEAR_ZERO = rf"^{YEAR}-"
NO_LEAP_SECOND_TIME = r"^\d\d:\d\d:[0-5]\d"
NO_LEAP_SECOND_DATETIME = rf"^{YEAR}-\d\d-\d\d[Tt]\d\d:\d\d:[0-5]\d"

RUST_SPACE = "\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"


def pydantic_schema(model_class: Any) -> dict[str, Any]:
    """The JSON Schema of exactly what `model_class` validates (see the module docstring); SchemaError otherwise."""
    for path, reason in _refusals(model_class.__pydantic_core_schema__, "", {}, set()):
        raise SchemaError(f"field {path.lstrip('.') or '(root)'} of {model_class.__name__}: {reason}", "#")
    return dict(model_class.model_json_schema(schema_generator=ValidatedJsonSchema))


class ValidatedJsonSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema generator narrowed to what Pydantic validates for dates, times and patterns."""

    def date_schema(self, schema: Any) -> Any:
        return {**super().date_schema(schema), "pattern": NOT_YEAR_ZERO}

    def time_schema(self, schema: Any) -> Any:
        return {**super().time_schema(schema), "pattern": NO_LEAP_SECOND_TIME}

    def datetime_schema(self, schema: Any) -> Any:
        if schema.get("tz_constraint") == "naive":
            return {"type": "string", "pattern": NAIVE_DATETIME}
        return {**super().datetime_schema(schema), "pattern": NO_LEAP_SECOND_DATETIME}

    def model_schema(self, schema: Any) -> Any:
        out = super().model_schema(schema)
        ignores_extra = schema["cls"].model_config.get("extra") in (None, "ignore")
        if ignores_extra and out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out

    def str_schema(self, schema: Any) -> Any:
        out = dict(super().str_schema(schema))
        if "pattern" in out:
            out["pattern"] = rust_pattern_as_ecma(out["pattern"])
        return out


class PatternRefused(CompileError):
    """A pattern escape whose Unicode meaning in Pydantic's regex engine has no exact ECMA-262 spelling here."""


def rust_pattern_as_ecma(pattern: str) -> str:
    """`pattern` as Pydantic's regex engine reads it, spelled in ECMA-262 (what the schema compiler reads).

    `\\s` and `\\S` become the Unicode White_Space class; `\\d` and `\\w` stay ASCII (a subset of the Unicode
    classes, so every string generated still validates) except inside a negated class, where the subset would
    admit too much; `\\D`, `\\W`, `\\b`, `\\B` are refused (PatternRefused).
    """
    out: list[str] = []
    in_class = negated = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            letter = pattern[i + 1]
            if letter in "DWbB" or (letter in "dw" and negated) or (letter == "S" and in_class):
                raise PatternRefused(f"\\{letter} in {pattern!r} means a Unicode class (to Pydantic and Python) that "
                                     "cannot be enforced exactly inside JSON; write an explicit class such as [^a-z]")
            if letter == "s":
                out.append(RUST_SPACE if in_class else f"[{RUST_SPACE}]")
            elif letter == "S":
                out.append(f"[^{RUST_SPACE}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if char == "[" and not in_class:
            in_class, negated = True, pattern[i + 1:i + 2] == "^"
        elif char == "]" and in_class and not (out and out[-1] in ("[", "[^")):
            in_class = negated = False
        out.append(char)
        i += 1
    return "".join(out)


def _refusals(schema: Any, path: str, definitions: dict[str, Any], seen: set[str]) -> Iterator[tuple[str, str]]:
    """(field path, reason) for every part of a pydantic-core schema that no automaton can enforce exactly."""
    kind = schema.get("type")
    if kind == "definitions":
        definitions = {**definitions, **{d["ref"]: d for d in schema["definitions"]}}
    if kind == "definition-ref":
        ref = schema["schema_ref"]
        if ref in seen or ref not in definitions:
            return
        yield from _refusals(definitions[ref], path, definitions, seen | {ref})
        return
    if kind in ("date", "datetime") and schema.get("now_op"):
        yield path, (f"a {kind} that must lie in the {schema['now_op']} depends on the clock when it is read, "
                     "which no automaton can enforce; use a plain date/datetime field")
    if kind == "datetime" and isinstance(schema.get("tz_constraint"), int):
        yield path, "a datetime with a fixed UTC offset is not supported; use AwareDatetime or NaiveDatetime"
    if kind == "str" and "pattern" in schema:
        try:
            rust_pattern_as_ecma(schema["pattern"])
        except PatternRefused as error:
            yield path, str(error)
    if kind == "model-fields":
        for name, field in schema["fields"].items():
            yield from _refusals(field["schema"], f"{path}.{name}", definitions, seen)
        return
    for key in ("schema", "items_schema", "values_schema", "keys_schema"):
        if isinstance(schema.get(key), dict):
            yield from _refusals(schema[key], path + ("[]" if key == "items_schema" else ""), definitions, seen)
    for choice in schema.get("choices", ()) if isinstance(schema.get("choices"), list) else ():
        yield from _refusals(choice[0] if isinstance(choice, tuple) else choice, path, definitions, seen)
    if isinstance(schema.get("choices"), dict):
        for choice in schema["choices"].values():
            yield from _refusals(choice, path, definitions, seen)
    for item in schema.get("items_schema", ()) if isinstance(schema.get("items_schema"), list) else ():
        yield from _refusals(item, path + "[]", definitions, seen)
