"""The reply DFA assembled from per-tool call DFAs accepts exactly what the single-expression build accepts, and a
tool list with one tool changed compiles that one tool only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint_spec import ARGUMENTS_LOWERING, _arguments_ir, _Deadline, build_constraint
from stdsl.compiler.tools import reply_automaton as assembly
from stdsl.compiler.tools.formats import FORMATS, ToolSpec, format_named
from stdsl.compiler.tools.reply_grammar import reply_ir
from stdsl.errors import StdslError
from tests.compiler.language_difference import assert_agree_on_walks, difference

KEYS = ("path", "city", "limit", "mode", "tags", "unit")

values = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "string", "enum": ["asc", "desc"]}, {"type": "array", "items": {"type": "integer"}},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False},
])


@st.composite
def tool_lists(draw: Any) -> list[ToolSpec]:
    """One to four tools whose names share prefixes (the trie the assembly determinizes) and small schemas."""
    names = draw(st.lists(st.sampled_from(["get", "get_a", "get_ab", "set", "search", "s"]), min_size=1, max_size=4,
                          unique=True))
    tools = []
    for name in names:
        keys = draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True))
        properties = {key: draw(values) for key in keys}
        required = [key for key in keys if draw(st.booleans())]
        tools.append(ToolSpec(name, {"type": "object", "properties": properties, "required": required,
                                     "additionalProperties": False}))
    return tools


def _both(tools: list[ToolSpec], name: str, choice: str, parallel: bool) -> tuple[Automaton, Automaton]:
    """The single-expression build and the assembled one; a refusal (a schema a family cannot write) must be the
    same refusal both ways, and then the example is discarded."""
    tool_format = format_named(name)
    deadline = _Deadline(120)
    try:
        whole = build_automaton(reply_ir(tools, tool_format, _arguments_ir(deadline, []), choice=choice,
                                         parallel=parallel))
    except StdslError as error:
        with pytest.raises(type(error)):
            assembly.reply_automaton(tools, tool_format, _arguments_ir(deadline, []), ARGUMENTS_LOWERING,
                                     choice=choice, parallel=parallel)
        assume(False)
    assembled = assembly.reply_automaton(tools, tool_format, _arguments_ir(deadline, []), ARGUMENTS_LOWERING,
                                         choice=choice, parallel=parallel)
    assert assembled is not None
    return whole, assembled


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=tool_lists(), name=st.sampled_from(sorted(FORMATS)), choice=st.sampled_from(["auto", "required", "named"]),
       parallel=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_assembled_reply_accepts_exactly_the_whole_reply_grammar(tools: list[ToolSpec], name: str, choice: str,
                                                                 parallel: bool, seed: int) -> None:
    chosen = tools[-1].name if choice == "named" else choice
    whole, assembled = _both(tools, name, chosen, parallel)
    assert difference(whole, assembled) is None
    assert_agree_on_walks(whole, assembled, np.random.default_rng(seed))


@pytest.mark.parametrize("name", ["hermes", "qwen_xml", "harmony"])
def test_one_changed_tool_compiles_that_tool_only(name: str) -> None:
    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {"a": {"type": "integer",
             "minimum": i}}, "required": ["a"]}} for i in range(5)]
    spec = {"kind": "tools", "format": name, "tools": tools, "choice": "auto", "parallel": True, "content": None}
    build_constraint(spec, 60)
    before = assembly._CALLS.stats()
    other = {"type": "object", "properties": {"b": {"type": "string"}}}
    changed = [*tools[:4], {"name": "tool_4", "parameters": other}]
    build_constraint({**spec, "tools": changed}, 60)
    after = assembly._CALLS.stats()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 4)


def test_response_format_beside_tools_is_assembled_exactly() -> None:
    tools = [ToolSpec("get", {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})]
    content = build_automaton(reply_ir([], format_named("hermes"), _arguments_ir(_Deadline(60), []),
                                       choice="none"))
    from stdsl.compiler import ir

    leaf = ir.Embedded(content.transitions, content.accepting)
    tool_format = format_named("hermes")
    whole = build_automaton(reply_ir(tools, tool_format, _arguments_ir(_Deadline(60), []), content=leaf))
    assembled = assembly.reply_automaton(tools, tool_format, _arguments_ir(_Deadline(60), []), ARGUMENTS_LOWERING,
                                         content=leaf)
    assert assembled is not None and difference(whole, assembled) is None


def test_a_new_tool_of_known_parameter_types_intersects_no_new_value() -> None:
    """Each guarded value (a raw string without the stop tags, a JSON value without the markers) is built once per
    format and value language: a second tool of the same parameter types reuses them."""
    from stdsl.compiler.tools.formats import raw_values

    parameters = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "array",
                  "items": {"type": "string"}}, "k": {"type": "integer"}}, "required": ["q"]}
    spec = {"kind": "tools", "format": "qwen_xml", "choice": "auto", "parallel": True, "content": None,
            "tools": [{"name": "first", "parameters": parameters}]}
    build_constraint(spec, 60)
    before = raw_values._INTERSECTIONS.stats()
    build_constraint({**spec, "tools": [{"name": "second", "parameters": {**parameters, "required": ["k"]}}]}, 60)
    after = raw_values._INTERSECTIONS.stats()
    assert after.misses == before.misses and after.hits - before.hits == 2


@pytest.mark.parametrize("name", ["hermes", "qwen_xml", "harmony"])
def test_a_list_with_one_tool_changed_reuses_the_front_and_accepts_the_whole_grammar(name: str) -> None:
    """The calls' heads are determinized once per list of names: a list whose one tool's schema changed lays out
    the new call behind the kept front, and still accepts exactly the single-expression build."""
    from stdsl.compiler.automata.substitution import blocks

    tools = [ToolSpec(f"get_{i}", {"type": "object", "properties": {"a": {"type": "integer", "minimum": i}},
                                   "required": ["a"]}) for i in range(4)]
    _both(tools, name, "auto", True)
    before = blocks._FRONTS.stats()
    changed = [*tools[:2], ToolSpec("get_2", {"type": "object", "properties": {"b": {"type": "string"}}}), tools[3]]
    whole, assembled = _both(changed, name, "auto", True)
    after = blocks._FRONTS.stats()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
    assert difference(whole, assembled) is None


@pytest.mark.parametrize("name", ["hermes", "qwen_xml", "harmony"])
def test_a_list_built_from_calls_of_other_workers_equals_it_built_in_one_process(name: str) -> None:
    """The calls of two shares of a list, each built in an emptied cache as another worker would and pickled, kept
    before the list's build (its spec's `calls`): the build compiles none of them again and gives the one-process
    reply, an open (`strict: false`) tool's lowering included."""
    import pickle

    from stdsl import caches
    from stdsl.compiler.constraint_spec import tool_call_share

    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": i}, "b": {"type": "string"}}, "required": ["a"]}} for i in range(5)]
    tools[3]["strict"] = False
    spec = {"kind": "tools", "format": name, "tools": tools, "choice": "auto", "parallel": True, "content": None}
    caches.clear()
    alone = build_constraint(spec, 60)
    calls = []
    for share in ([0, 2, 4], [1, 3]):
        caches.clear()
        calls += pickle.loads(pickle.dumps(tool_call_share({"kind": "tool_calls", "tools": spec, "share": share}, 60)))
    caches.clear()
    before = assembly._CALLS.stats()
    assembled = build_constraint({**spec, "calls": calls}, 60)
    after = assembly._CALLS.stats()
    assert len(calls) == 5 and (after.misses - before.misses, after.hits - before.hits) == (5, 5)  # the 5 kept
    assert assembled.source == spec
    assert np.array_equal(assembled.automaton.transitions, alone.automaton.transitions)
    assert np.array_equal(assembled.automaton.accepting, alone.automaton.accepting)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_lists(), st.sampled_from(sorted(FORMATS)))
def test_a_reply_built_a_few_rows_at_a_time_is_the_same_table(tools: list[ToolSpec], name: str) -> None:
    """The blocks stacked and split (`split_rows`), the calls' rows placed (`call_layouts`) and the products
    numbered (`table_blocks.taken`) a block of rows at a time, to keep each temporary under numpy's huge-page size,
    build the very arrays the one-pass build does when a block is a single row."""
    from stdsl import caches
    from stdsl.compiler.automata import table_blocks

    def arrays() -> list[np.ndarray] | None:
        caches.clear()
        try:
            built = assembly.reply_automaton(tools, format_named(name), _arguments_ir(_Deadline(120), []),
                                             ARGUMENTS_LOWERING)
        except StdslError:
            return None
        return [built.branch_rows, built.sole_class, built.sole_target, built.byte_class, built.accepting]

    whole = arrays()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(table_blocks, "BLOCK_CELLS", 1)
        piecewise = arrays()
    assume(whole is not None)
    assert piecewise is not None
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(whole, piecewise))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=tool_lists(), parallel=st.booleans())
def test_plain_json_text_or_calls_is_text_then_calls(tools: list[ToolSpec], parallel: bool) -> None:
    """The plain `json` format writes "auto" as text or calls, the first byte deciding (which a recursive
    parameter's pushdown needs): the same language as text then optional calls, the general form."""
    tool_format = format_named("json")
    lower = _arguments_ir(_Deadline(60), [])
    call = ir.alt(*(tool_format.tool_call_ir(tool, lower) for tool in tools))
    calls = tool_format.calls_ir(call, parallel)
    decided = build_automaton(tool_format.reply_ir(tool_format.free_ir(), calls, False))
    general = build_automaton(ir.seq(tool_format.free_ir(), ir.optional(calls)))
    assert difference(decided, general) is None
