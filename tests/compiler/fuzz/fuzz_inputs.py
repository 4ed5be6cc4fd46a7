"""Fuzz inputs for the three parsers: seed corpora read from tests/data and the examples, and their mutants.

Seeds are real inputs (the JSON-Schema-Test-Suite, the `.stc` examples and the regexes in those schemas'
`pattern`s; the large `-m slow` runs add the MaskBench sample's schemas where that optional input is present).
A mutant is a seed changed by a short list of operations that hypothesis draws (so it can shrink a failure
to the one operation that matters): text loses, repeats, swaps or gains characters and tokens, or is spliced
with another seed; a JSON schema has a sub-value replaced by another JSON value, a keyword dropped or
inserted, a keyword given the wrong type, a piece nested hundreds deep, huge numbers, unicode and lone surrogates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.data_files import JSON_SCHEMA_SUITE, MASKBENCH

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"

REGEX_SEEDS = (
    r"^[a-z]+(?:-[a-z0-9]+)*$", r"\d{3}-\d{2,4}", r"(?P<year>\d{4})-(?P<month>0[1-9]|1[0-2])", r"[^\W\d_]+",
    r"\x41\u00e9\U0001F600\N{GREEK SMALL LETTER ALPHA}", r"[\0-\x1f\\\]\-]", r"a{2,}?b*?c+?d??", r"(?#note)x|y",
    r"(a|b|)*\.(c{0,3}|[d-f]{,2})", r"\s*\S+\s*", r"[\u0300-\u036f]", r"\101\7\08", r"[\b]", r"(?:(?:a)|b)$",
    r"(?=a)b", r"(a)\1", r"\bword\B", r"(?i)x", r"a++", r"(?>a)", r"(?(1)a|b)", r"[z-a]", r"\p{L}", r"\Z",
)
REGEX_TOKENS = (
    "(", ")", "[", "]", "{", "}", "*", "+", "?", "|", "^", "$", ".", "\\", "-", ",", "(?:", "(?P<n>", "(?P=n)",
    "(?=", "(?!", "(?<=", "(?#", "(?i)", "\\d", "\\W", "\\s", "\\b", "\\A", "\\1", "\\0", "\\377", "\\400",
    "\\x4", "\\xff", "\\u00e9", "\\ud800", "\\udfff", "\\U0010ffff", "\\U00110000", "\\N{", "\\N{BULLET}", "{2,3}",
    "{1000}", "{1001}", "{,5}", "{3,2}", "{99999999999999999999}", "é", "😀", "\ud800", "\x00", "\n", "0-9",
    "a-z", "[^", "[]", "[^]", "\\]", "*?", "+?", "??", "{2}?", "{2}+",
)
STC_SEEDS = (
    'output """{a: int}"""',
    'type P = {name: str(1..20), age?: int(0..150), tags: list[str](0..3, sep=", ")}\n'
    'param x: str = "hi"\nsystem """s {{ x }}"""\noutput """P: {p: json(P)}\nN: {n: number(-1.5..2e3)}"""',
    'type T = "a" | "b" | {k: T}\noutput """{t: T}"""',
    'output """{d: date} {t: time} {e: email} {r: str(/[a-z]+/)} {b: bool} {l: line}"""',
    'output """{x: list[int(1..9)](2..4, sep="\\n")} and {y: str(3)}"""',
)
STC_TOKENS = (
    '"""', "'''", "{", "}", "[", "]", "(", ")", ":", "?", "|", ",", "=", "..", "..3", "1..", "/[a-z]+/", "/(/", "type",
    "output", "param", "user", "system", "assistant", "str", "int", "number", "bool", "list", "json", "date", "line",
    "T", "P", "{{ x }}", "{{", "}}", "{% if %}", "{#", 'sep=""', "sep=1", "-1", "1e999", "99999999999999999999",
    "0.5", "#", "\n", '"', "\\", "é", "😀", "\ud800", "\x00", "\r", "\t",
)
SCHEMA_KEYWORDS = (
    "type", "properties", "required", "additionalProperties", "patternProperties", "items", "prefixItems",
    "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "enum", "const", "anyOf",
    "oneOf", "allOf", "not", "if", "then", "else", "$ref", "$defs", "definitions", "$id", "$anchor",
    "$dynamicRef", "$dynamicAnchor", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "minProperties", "maxProperties", "propertyNames",
    "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "default", "title",
)
SPECIAL_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2, 1.5, -0.0, 0.1, 1e308, -1e308, 5e-324, 10**400, -(10**400), 10**5000, 2**63,
    2**64 + 1,
    math.nan, math.inf, -math.inf, "", "a", "é😀", "\ud800", "\udfff\ud800", "\x00", "string", "object", "array",
    "integer", "number", "boolean", "null", "date-time", "email", "uri", "ipv4", "uuid", "regex", "#", "#/$defs/a",
    "#/properties/a", "#/definitions/a/items", "http://example.com/s", "#/a~1b~0c%25", "(a", "[", "\\", "\\ud800",
    "a{1001}", "^(?=x)$", "x" * 3000, [], {}, [None], [1, 1], ["a", "b"], {"type": "string"}, {"$ref": "#"},
    {"type": ["string", "null"]}, {"enum": []}, {"not": {}}, {"items": False}, {"minimum": 10**400},
    {"pattern": "^[0-9]{1000}$"}, {"format": "hostname"}, {1: 2}, {"a": {"$ref": "#/$defs/b"}},
)


def _json_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json")) if folder.is_dir() else []


@cache
def suite_schemas() -> tuple[Any, ...]:
    """Every schema of the JSON-Schema-Test-Suite (draft 2020-12, optional tests included)."""
    out = []
    for path in _json_files(JSON_SCHEMA_SUITE):
        for group in json.loads(path.read_text(encoding="utf-8")):
            out.append(group["schema"])
    return tuple(out)


@cache
def maskbench_schemas() -> tuple[Any, ...]:
    """Every schema of the MaskBench sample."""
    return tuple(json.loads(path.read_text(encoding="utf-8"))["schema"] for path in _json_files(MASKBENCH))


def schema_seeds(real_world: bool = False) -> tuple[Any, ...]:
    """Seed schemas: the suite's, and with `real_world` the MaskBench sample's where it is present."""
    return suite_schemas() + (maskbench_schemas() if real_world else ())


def _sub_values(value: Any) -> Iterator[Any]:
    yield value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        yield from _sub_values(child)


@cache
def regex_seeds(real_world: bool = False) -> tuple[str, ...]:
    """Seed regexes: hand-written ones covering the syntax, and every `pattern` and `patternProperties` key
    found in the seed schemas (sorted, without repeats)."""
    found: set[str] = set()
    for schema in schema_seeds(real_world):
        for value in _sub_values(schema):
            if isinstance(value, dict):
                if isinstance(value.get("pattern"), str):
                    found.add(value["pattern"])
                if isinstance(value.get("patternProperties"), dict):
                    found.update(value["patternProperties"])
    return REGEX_SEEDS + tuple(sorted(found))


@cache
def stc_seeds() -> tuple[str, ...]:
    """Seed programs: the `.stc` examples of the repository and a few covering the rest of the syntax."""
    examples = tuple(path.read_text(encoding="utf-8") for path in sorted(EXAMPLES.glob("*.stc")))
    return examples + STC_SEEDS


DEEP_NESTING = 150
TEXT_OPS = ("delete", "duplicate", "swap", "insert_token", "insert_char", "splice", "replace_char")
JSON_OPS = ("replace", "splice", "drop_key", "insert_keyword", "rename_key", "nest", "duplicate_key", "edit_text")

operation = st.tuples(st.integers(0, 15), st.integers(0, 2**16), st.integers(0, 2**16), st.integers(0, 2**16))


def mutate_text(text: str, ops: list[tuple[int, int, int, int]], tokens: tuple[str, ...], other: str) -> str:
    """`text` changed by each operation in turn; `tokens` are the pieces to insert, `other` a seed to splice in."""
    for kind, a, b, c in ops:
        name = TEXT_OPS[kind % len(TEXT_OPS)]
        at = a % (len(text) + 1)
        end = min(len(text), at + 1 + b % 8)
        if name == "delete":
            text = text[:at] + text[end:]
        elif name == "duplicate":
            text = text[:end] + text[at:end] * (1 + c % 3) + text[end:]
        elif name == "swap":
            there = end + c % (len(text) - end + 1)
            there_end = min(len(text), there + 1 + c % 8)
            text = text[:at] + text[there:there_end] + text[end:there] + text[at:end] + text[there_end:]
        elif name == "insert_token":
            text = text[:at] + tokens[b % len(tokens)] + text[at:]
        elif name == "insert_char":
            text = text[:at] + chr(b % 0x800 if c % 2 else b % 0x110000) + text[at:]
        elif name == "splice":
            cut = c % (len(other) + 1)
            text = text[:at] + other[cut:cut + 1 + b % 64]
        else:
            text = text[:at] + chr((b << 5 | c) % 0x110000) + text[at + 1:]
    return text


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, path + (index,))


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    _get(value, path[:-1])[path[-1]] = new
    return value


def _nest(value: Any, depth: int, shape: int) -> Any:
    """`value` wrapped `depth` times in one schema (or JSON) shape."""
    for _ in range(depth):
        value = [
            {"items": value}, {"not": value}, {"anyOf": [value, True]}, {"properties": {"a": value}},
            {"allOf": [value]}, [value], {"$defs": {"a": value}, "$ref": "#/$defs/a"},
        ][shape % 7]
    return value


def mutate_json(value: Any, ops: list[tuple[int, int, int, int]], pool: tuple[Any, ...], other: Any) -> Any:
    """A copy of the JSON `value` changed by each operation; `pool` holds replacement values, `other` is a
    second seed whose sub-values can be spliced in; a string (a `pattern`, a name, a `$ref`) can be edited as text."""
    value = json_copy(value)
    other_parts = list(_sub_values(other))
    nested_deep = False
    for kind, a, b, c in ops:
        name = JSON_OPS[kind % len(JSON_OPS)]
        paths = list(_paths(value))
        path = paths[a % len(paths)]
        node = _get(value, path)
        if name == "replace":
            value = _set(value, path, json_copy(pool[b % len(pool)]))
        elif name == "splice":
            value = _set(value, path, json_copy(other_parts[b % len(other_parts)]))
        elif name == "edit_text" and isinstance(node, str):
            value = _set(value, path, mutate_text(node, [(kind, a, b, c)], REGEX_TOKENS, node))
        elif name == "nest":
            deep = c % 3 == 0 and not nested_deep
            nested_deep = nested_deep or deep
            value = _set(value, path, _nest(node, 1 + b % DEEP_NESTING if deep else 1 + b % 12, c))
        elif isinstance(node, dict) and name == "drop_key" and node:
            node.pop(list(node)[b % len(node)])
        elif isinstance(node, dict) and name == "insert_keyword":
            node[SCHEMA_KEYWORDS[b % len(SCHEMA_KEYWORDS)]] = json_copy(pool[c % len(pool)])
        elif isinstance(node, dict) and name == "rename_key" and node:
            key = list(node)[b % len(node)]
            node[SCHEMA_KEYWORDS[c % len(SCHEMA_KEYWORDS)] if c % 4 else f"\ud800{key}"] = node.pop(key)
        elif isinstance(node, dict) and name == "duplicate_key" and node:
            key = list(node)[b % len(node)]
            node[SCHEMA_KEYWORDS[c % len(SCHEMA_KEYWORDS)]] = json_copy(node[key])
        elif isinstance(node, list) and node:
            node.insert(b % (len(node) + 1), json_copy(node[c % len(node)]))
    return value


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON-like value (dicts and lists copied, scalars shared)."""
    if isinstance(value, dict):
        return {key: json_copy(child) for key, child in value.items()}
    if isinstance(value, list):
        return [json_copy(child) for child in value]
    return value


@cache
def json_pool(real_world: bool = False) -> tuple[Any, ...]:
    """Replacement values: the special ones and every tenth sub-value of every twentieth seed schema."""
    found = [part for schema in schema_seeds(real_world)[::20] for part in list(_sub_values(schema))[::10]]
    return SPECIAL_VALUES + tuple(found)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS) | st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@st.composite
def regex_inputs(draw: st.DrawFn, real_world: bool = False) -> str:
    """A regex: a seed, a mutated seed, or random text over regex tokens and characters."""
    seeds = regex_seeds(real_world)
    how = draw(st.integers(0, 4))
    if how == 0:
        pieces = draw(st.lists(st.sampled_from(REGEX_TOKENS) | st.text(max_size=3), max_size=12))
        return "".join(pieces)
    seed = draw(st.sampled_from(seeds))
    if how == 1:
        return seed
    return mutate_text(seed, draw(st.lists(operation, min_size=1, max_size=4)), REGEX_TOKENS,
                       draw(st.sampled_from(seeds)))


@st.composite
def schema_inputs(draw: st.DrawFn, real_world: bool = False) -> Any:
    """A schema: a seed, a mutated seed, or a random JSON value with schema keywords as keys."""
    seeds = schema_seeds(real_world)
    how = draw(st.integers(0, 5))
    if how == 0:
        return draw(json_values)
    seed = draw(st.sampled_from(seeds))
    if how == 1:
        return seed
    return mutate_json(seed, draw(st.lists(operation, min_size=1, max_size=4)), json_pool(real_world),
                       draw(st.sampled_from(seeds)))


@st.composite
def stc_inputs(draw: st.DrawFn) -> str:
    """A `.stc` program: a seed, a mutated seed, or random text over program tokens."""
    seeds = stc_seeds()
    how = draw(st.integers(0, 5))
    if how == 0:
        return "".join(draw(st.lists(st.sampled_from(STC_TOKENS) | st.text(max_size=3), max_size=16)))
    seed = draw(st.sampled_from(seeds))
    if how == 1:
        return seed
    return mutate_text(seed, draw(st.lists(operation, min_size=1, max_size=4)), STC_TOKENS,
                       draw(st.sampled_from(seeds)))

