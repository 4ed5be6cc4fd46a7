"""The compiled-constraint cache: keyed by canonical spec text, one compile per spec even when requested together,
bounded by bytes, refusals and time limits come back from the worker process as our errors."""
from __future__ import annotations

import asyncio
import json

import pytest

from stdsl.errors import CompileTimeError
from stdsl.server.constraints.constraint_cache import ConstraintCache, UnsupportedSchema, warm_variant


def _schema(i: int) -> dict:
    return {"kind": "json_schema", "strict": True, "schema": {
        "type": "object", "properties": {f"k{i}": {"type": "integer"}, "name": {"type": "string"}},
        "required": [f"k{i}", "name"]}}


def test_one_compile_per_spec_and_eviction_by_bytes() -> None:
    async def run() -> ConstraintCache:
        cache = ConstraintCache(max_bytes=5_000, compile_seconds=60)  # each closed constraint holds about 1.8 kB
        try:
            first = await asyncio.gather(*(cache.get(_schema(0)) for _ in range(4)))
            assert all(c is first[0] for c in first) and cache.stats.compiles == 1
            assert await cache.get(json.loads(json.dumps(_schema(0)))) is first[0]
            properties = _schema(0)["schema"]["properties"]
            reordered = {**_schema(0)["schema"], "properties": dict(reversed(properties.items()))}
            assert await cache.get({**_schema(0), "schema": reordered}) is not first[0]  # another key order
            for i in range(1, 6):
                await cache.get(_schema(i))
            assert cache.stats.bytes <= cache.max_bytes and cache.stats.evictions > 0
            assert cache.stats.entries < 7 and cache.stats.compiles == 7
        finally:
            cache.close()
        return cache

    cache = asyncio.run(run())
    assert cache.stats.hits >= 1 and cache.stats.compile_seconds > 0


def test_refusals_and_time_limits_are_our_errors() -> None:
    async def run() -> None:
        cache = ConstraintCache(compile_seconds=0.05)
        try:
            with pytest.raises(UnsupportedSchema, match="unevaluatedProperties"):
                await cache.get({"kind": "json_schema", "strict": True, "schema": {"unevaluatedProperties": False}})
            slow = {"type": "string", "pattern": "^(a|b)*a(a|b){16}$"}  # 2^17 DFA states: seconds to build
            with pytest.raises(CompileTimeError):
                await cache.get({"kind": "json_schema", "strict": True, "schema": slow})
            fallback = await cache.get({"kind": "json_schema", "strict": False,
                                        "schema": {"unevaluatedProperties": False}})
            assert fallback.accepts('{"any":[1]}')
        finally:
            cache.close()

    asyncio.run(run())


def test_a_recursive_schema_comes_back_from_the_worker() -> None:
    kids = {"type": "array", "items": {"$ref": "#/$defs/node"}}
    tree = {"$defs": {"node": {"type": "object", "properties": {"kids": kids}, "additionalProperties": False}},
            "$ref": "#/$defs/node"}

    async def run() -> None:
        cache = ConstraintCache(compile_seconds=60)
        try:
            compiled = await cache.get({"kind": "json_schema", "strict": True, "schema": tree})
        finally:
            cache.close()
        assert compiled.accepts('{"kids":[{"kids":[{"kids":[{"kids":[]}]}]}]}')
        assert not compiled.accepts('{"kids":[{"kid":[]}]}')

    asyncio.run(run())


def _tools(choice: str) -> dict:
    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}},
                                                  "required": ["n"]}} for i in range(3)]
    return {"kind": "tools", "format": "hermes", "tools": tools, "choice": choice, "parallel": True, "content": None}


def test_warm_variant_is_choice_auto_for_none_and_a_named_tool_only() -> None:
    assert warm_variant(_tools("none")) == _tools("auto")
    assert warm_variant(_tools("tool_1")) == _tools("auto")
    assert warm_variant(_tools("auto")) is None and warm_variant(_tools("required")) is None
    reasoning = {"kind": "reasoning", "format": "think", "mode": "on", "answer": _tools("none")}
    assert warm_variant(reasoning) == {**reasoning, "answer": _tools("auto")}
    assert warm_variant({**reasoning, "answer": None}) is None and warm_variant(_schema(0)) is None


def test_a_tool_list_first_seen_with_choice_none_is_compiled_for_auto_in_the_background() -> None:
    call = '<tool_call>\n{"name": "tool_2", "arguments": {"n": 7}}\n</tool_call>'

    async def run() -> None:
        cache = ConstraintCache(compile_seconds=60)
        try:
            none = await cache.get(_tools("none"))
            assert not none.accepts(call) and cache.stats.warmed == 1
            auto = await cache.get(_tools("auto"))  # joins the background compile, or finds it done
            assert auto.accepts(call) and cache.stats.compiles == 2
            await cache.get(_tools("tool_1"))  # the list's auto reply is held: nothing more to warm
            await cache.get(_schema(0))
            assert cache.stats.warmed == 1 and cache.stats.compiles == 4
        finally:
            cache.close()

    asyncio.run(run())


def test_a_new_tool_list_compiled_across_workers_equals_it_compiled_in_one_process(monkeypatch) -> None:
    """A list with enough unmet tools, met while two workers are free, is built from shares of its calls on both
    and assembled on one: the same reply as one process builds; the list with one tool changed is not split."""
    import numpy as np

    from stdsl.compiler.constraint_spec import build_constraint
    from stdsl.server.constraints import constraint_cache

    monkeypatch.setattr(constraint_cache, "SPLIT_MIN_TOOLS", 4)
    monkeypatch.setattr(constraint_cache, "SPARE_CORES", 2)
    spec = {**_tools("auto"), "format": "qwen_xml", "tools": [
        {"name": f"tool_{i}", "parameters": {"type": "object", "properties": {
            "n": {"type": "integer", "minimum": i}, "s": {"type": "string"}}, "required": ["n"]}} for i in range(6)]}
    changed = {**spec, "tools": [*spec["tools"][:5], {"name": "tool_5", "parameters": {"type": "object"}}]}

    async def run() -> tuple:
        cache = ConstraintCache(compile_seconds=60)
        try:
            split = await cache.get(spec)
            assert cache.stats.split == 1
            one_changed = await cache.get(changed)
            assert cache.stats.split == 1 and cache.stats.compiles == 2
        finally:
            cache.close()
        return split, one_changed

    split, one_changed = asyncio.run(run())
    for compiled, alone in ((split, build_constraint(spec, 60)), (one_changed, build_constraint(changed, 60))):
        assert compiled.source == alone.source and "calls" not in compiled.source
        assert np.array_equal(compiled.automaton.transitions, alone.automaton.transitions)
        assert np.array_equal(compiled.automaton.accepting, alone.automaton.accepting)


def test_a_split_list_with_a_refused_schema_is_refused_as_a_whole_one_is(monkeypatch) -> None:
    from stdsl.server.constraints import constraint_cache

    monkeypatch.setattr(constraint_cache, "SPLIT_MIN_TOOLS", 4)
    monkeypatch.setattr(constraint_cache, "SPARE_CORES", 2)
    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}
             for i in range(6)]
    tools[4]["parameters"] = {"type": "object", "properties": {"n": {"unevaluatedProperties": False}}}

    async def run() -> None:
        cache = ConstraintCache(compile_seconds=60)
        try:
            with pytest.raises(UnsupportedSchema, match="unevaluatedProperties"):
                await cache.get({**_tools("auto"), "tools": tools})
            assert cache.stats.split == 0 and cache.pool.stats.running == 0
        finally:
            cache.close()

    asyncio.run(run())
