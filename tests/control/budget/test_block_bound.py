"""The forced chains and byte-token bound of a tool reply composed from per-block tables equal the whole-table
computation, a list with one tool changed computes one block's tables, and budgets on tool replies stay exact."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.constraint_spec import ARGUMENTS_LOWERING, _arguments_ir, _Deadline, build_constraint
from stdsl.compiler.tools.formats import FORMATS, ToolSpec, format_named
from stdsl.compiler.tools.reply_automaton import reply_automaton
from stdsl.control.budget import block_bound
from stdsl.control.budget.automaton_budget import UNREACHABLE, build_budget_table
from stdsl.control.budget.need_graphs import chain_bound, forced_chains
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.split.planner import ForcedPlanner
from stdsl.control.tables import budget_table_for
from stdsl.errors import StdslError
from stdsl.kernels.token_table import token_table

VALUES = [
    {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "number"}, {"type": "boolean"},
    {"type": "string", "enum": ["asc", "desc"]}, {"type": "array", "items": {"type": "integer"}},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False},
]


@st.composite
def tool_lists(draw: Any) -> list[ToolSpec]:
    """One to five tools whose names share prefixes and whose schemas repeat (blocks met again in other lists)."""
    names = draw(st.lists(st.sampled_from(["get", "get_a", "get_ab", "set", "search", "s", "x_1"]), min_size=1,
                          max_size=5, unique=True))
    tools = []
    for name in names:
        keys = draw(st.lists(st.sampled_from(["path", "city", "limit", "mode"]), max_size=3, unique=True))
        properties = {key: draw(st.sampled_from(VALUES)) for key in keys}
        required = [key for key in keys if draw(st.booleans())]
        tools.append(ToolSpec(name, {"type": "object", "properties": properties, "required": required,
                                     "additionalProperties": False}))
    return tools


def _assembled(tools: list[ToolSpec], name: str, choice: str, parallel: bool, tokens: bool) -> Automaton:
    tool_format = format_named(name)
    if tokens:
        tool_format = tool_format.with_tokens(tool_format.markers)
    try:
        automaton = reply_automaton(tools, tool_format, _arguments_ir(_Deadline(120), []), ARGUMENTS_LOWERING,
                                    choice=choice, parallel=parallel)
    except StdslError:
        automaton = None
    assume(automaton is not None)
    assert automaton is not None
    return automaton


def _whole(automaton: Automaton, tokenizer: Any, vocab: Any) -> tuple[np.ndarray, ...]:
    planner = ForcedPlanner(automaton, tokenizer, vocab.token_bytes, False)
    ends, lengths = forced_chains(automaton, planner.chain)
    bound = chain_bound(automaton, vocab, ends, lengths, planner.chain_token_count)
    return ends, lengths, bound.need, bound.through


def _composed(automaton: Automaton, tokenizer: Any, vocab: Any) -> tuple[np.ndarray, ...] | None:
    planner = ForcedPlanner(automaton, tokenizer, vocab.token_bytes, False)
    composed = block_bound.composed_chains_and_bound(automaton, vocab, planner)
    if composed is None:
        return None
    ends, lengths, bound = composed
    return ends, lengths, bound.need, bound.through


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(tools=tool_lists(), name=st.sampled_from(sorted(FORMATS)), choice=st.sampled_from(["auto", "required", "named"]),
       parallel=st.booleans(), tokens=st.booleans())
def test_per_block_chains_and_bound_equal_the_whole_table_computation(smollm2_tokenizer, tools: list[ToolSpec],
                                                                      name: str, choice: str, parallel: bool,
                                                                      tokens: bool) -> None:
    vocab = vocabulary_of(smollm2_tokenizer)
    automaton = _assembled(tools, name, tools[-1].name if choice == "named" else choice, parallel, tokens)
    composed = _composed(automaton, smollm2_tokenizer, vocab)
    assume(composed is not None)
    assert composed is not None
    for got, want in zip(composed, _whole(automaton, smollm2_tokenizer, vocab)):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("name", ["hermes", "qwen_xml", "harmony"])
def test_a_list_with_one_tool_changed_computes_one_block(smollm2_tokenizer, name: str) -> None:
    vocab = vocabulary_of(smollm2_tokenizer)
    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {"a": {"type": "integer",
             "minimum": i}, "q": {"type": "string"}}, "required": ["a"]}} for i in range(6)]
    spec = {"kind": "tools", "format": name, "tools": tools, "choice": "auto", "parallel": True, "content": None}
    first = build_constraint(spec, 60).automaton
    assert len(first.blocks) == len(tools)
    assert _composed(first, smollm2_tokenizer, vocab) is not None
    chains, needs = block_bound._CHAINS.stats(), block_bound._NEEDS.stats()
    other = {"type": "object", "properties": {"b": {"type": "string"}}}
    changed = [*tools[:5], {"name": "tool_5", "parameters": other}]
    automaton = build_constraint({**spec, "tools": changed}, 60).automaton
    composed = _composed(automaton, smollm2_tokenizer, vocab)
    assert composed is not None
    assert block_bound._CHAINS.stats().misses - chains.misses == 1
    assert block_bound._NEEDS.stats().misses - needs.misses == 1
    for got, want in zip(composed, _whole(automaton, smollm2_tokenizer, vocab)):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("name", ["hermes", "qwen_xml"])
def test_budgets_on_a_tool_reply_are_exact(smollm2_tokenizer, name: str) -> None:
    """need through the composed bound and rows on demand equals need over the all-state token table, and the budget
    mask admits exactly the tokens whose exact cost fits, for budgets around every state's need."""
    vocab = vocabulary_of(smollm2_tokenizer)
    tools = [{"name": tool, "parameters": {"type": "object", "properties": {"n": {"type": "integer"},
             "s": {"type": "string", "enum": ["on", "off"]}}, "required": ["n"]}} for tool in ("get", "set")]
    spec = {"kind": "tools", "format": name, "tools": tools, "choice": "required", "parallel": False,
            "content": None}
    automaton = build_constraint(spec, 60).automaton
    assert automaton.blocks
    planner = ForcedPlanner(automaton, smollm2_tokenizer, vocab.token_bytes)
    lazy = budget_table_for(automaton, vocab, planner)
    rows = token_table(automaton, vocab).astype(np.int64)
    eager = build_budget_table(rows, automaton.accepting)
    assert np.array_equal(lazy.need, eager.need)
    assert lazy.bound is not None and (lazy.bound.need >= eager.need).all()
    fresh = budget_table_for(automaton, vocab, planner)
    through = np.minimum(1 + eager.need, UNREACHABLE)
    rng = np.random.default_rng(0)
    for state in rng.permutation(automaton.num_states)[:40].tolist():
        live = rows[state] >= 0
        for remaining in range(max(int(eager.need[state]) - 2, 0), int(eager.need[state]) + 3):
            exact = live & (through[np.where(live, rows[state], 0)] <= remaining)
            admitted = fresh.admits(state, rows[state], remaining)
            assert np.array_equal(live if admitted is None else live & admitted, exact), (state, remaining)


def test_an_automaton_without_blocks_is_left_to_the_whole_computation(smollm2_tokenizer) -> None:
    vocab = vocabulary_of(smollm2_tokenizer)
    automaton = build_constraint({"kind": "regex", "pattern": "ab+c"}, 60).automaton
    assert _composed(automaton, smollm2_tokenizer, vocab) is None
