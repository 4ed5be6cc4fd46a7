"""A compile leaves no reference cycles: what it built is freed when the last reference goes, not by the collector.

The collector is paused while compiles run (`collector_pause`); garbage in cycles waited for its next collection,
which after a refusal at the time limit walked every object the compile had built: o65421 and o65432 of MaskBench
answered 0.5 s past a 9.5 s limit.  Each schema below takes a path that made a cycle: a closure calling itself, a
memo of a bound method, a cached flattening holding its context, a machine holding views of itself, a refusal kept
with its frames.  Each test compiles with the collector off, drops the result and the caches, and asks the
collector how many unreachable objects it found.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

import stdsl
from stdsl.compiler.constraint import compile
from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.grammar import Grammar
from stdsl.errors import CompileTimeError, SchemaError
from tests.data_files import GRAMMARS

OBJECT = {"type": "object", "properties": {"c": {"type": "integer"}, "d": {"type": "boolean"}}}
SCHEMAS: dict[str, Any] = {
    "open object (free-form values, a pushdown)": {"type": "object", "properties": {"a": {"type": "string"},
                                                                                    "b": OBJECT}},
    "member counts beside extra members": {"type": "object", "properties": {"a": {"type": "string"},
                                                                             "b": {"type": "string"}},
                                           "minProperties": 1, "maxProperties": 3,
                                           "additionalProperties": {"type": "integer"}},
    "dependent members": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                           "c": {"type": "boolean"}},
                          "dependentRequired": {"a": ["b"]}},
    "enum of structured values": {"enum": [{"a": 1}, [1, 2.0], "x", None]},
    "references": {"$defs": {"o": OBJECT}, "type": "object",
                   "properties": {"x": {"$ref": "#/$defs/o"}, "y": {"type": "array", "items": {"$ref": "#/$defs/o"}}}},
    "many members (outlined first)": {"type": "object", "properties": {f"m{i}": OBJECT for i in range(40)}},
    "an L(1) conflict tried again (kept to resume from)": {"type": "object", "anyOf": [
        {"properties": {"lang": {"type": "string"}}},
        {"properties": {"id": {"type": "object", "additionalProperties": False},
                        "entry": {"type": "array", "items": {"properties": {"uri": {"type": "object"}}}}}}]},
}
ONE_OF_REFUSED = {"type": "object", "properties": {
    key: {"oneOf": [{"type": "object", "patternProperties": {"^a": {"type": "integer"}}},
                    {"type": "object", "properties": {"ab": {"type": "string"}}}]} for key in ("x", "y")}}
"""Two members reading one `oneOf` that is refused: the refusal is kept in the document's context and raised again."""


def _unreachable_after(build: Any) -> int:
    """The objects in cycles that `build()` and dropping its result and the caches leave."""
    stdsl.caches.clear()
    gc.collect()
    try:
        build()
    except SchemaError:
        pass
    stdsl.caches.clear()
    return gc.collect()


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_compile_leaves_no_cycles(name: str, strict: bool, collector_off: None) -> None:
    assert _unreachable_after(lambda: compile(SCHEMAS[name], strict=strict)) == 0


@pytest.mark.parametrize("name", sorted(path.name for path in GRAMMARS.iterdir()
                                         if path.suffix in (".lark", ".gbnf", ".ebnf")))
def test_a_grammars_compile_leaves_no_cycles(name: str, collector_off: None) -> None:
    """Rule rewriting and bracketing walk the rules recursively (recursive rules are what brackets are for)."""
    assert _unreachable_after(lambda: compile(Grammar.from_file(GRAMMARS / name))) == 0


@pytest.mark.parametrize("tool_format", ["hermes", "qwen_xml", "harmony"])
def test_a_tool_replys_compile_leaves_no_cycles(tool_format: str, collector_off: None) -> None:
    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
                 "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}},
             {"name": "search", "parameters": {"type": "object", "properties": {
                 "query": {"type": "string", "maxLength": 40}, "filters": OBJECT}}}]
    spec = {"kind": "tools", "format": tool_format, "tools": tools, "choice": "auto", "parallel": True,
            "content": None}
    assert _unreachable_after(lambda: build_constraint(spec, 60)) == 0


def test_a_refusal_kept_and_raised_again_leaves_no_cycles(collector_off: None) -> None:
    with pytest.raises(SchemaError, match="oneOf"):
        compile(ONE_OF_REFUSED)
    assert _unreachable_after(lambda: compile(ONE_OF_REFUSED)) == 0


def _slow_schema() -> dict:
    """An open object of 60 members (bounded strings, small objects, enums): a few tenths of a second to compile."""
    kinds = [{"type": "string", "maxLength": 200, "pattern": "^[a-z0-9_]+$"},
             {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"enum": ["a", "b", {"k": [1, 2]}]}}},
             {"type": ["string", "null"], "maxLength": 120}]
    return {"type": "object", "properties": {f"field_{i}": kinds[i % 3] for i in range(60)}, "minProperties": 1}


def _fastest_compile(schema: dict) -> float:
    """The shortest of three compiles of `schema` (caches emptied before each; the process's memos kept)."""
    times = []
    for _ in range(3):
        stdsl.caches.clear()
        started = time.perf_counter()
        compile(schema, strict=False)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize("share", [0.05, 0.2, 0.5])
def test_a_compile_stopped_at_its_time_limit_leaves_no_cycles(share: float, collector_off: None) -> None:
    """Stopped at a share of its fastest time, so that it is stopped however fast the host runs it."""
    schema = _slow_schema()
    whole = _fastest_compile(schema)

    def stopped() -> None:
        with pytest.raises(CompileTimeError):
            compile(schema, strict=False, max_seconds=whole * share)

    assert _unreachable_after(stopped) == 0
