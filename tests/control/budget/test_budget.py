"""Valid outputs under a token budget (Theorem 21): need(q), the budget mask, and BudgetError up front."""

from __future__ import annotations

import heapq
import random
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.control.budget.automaton_budget import UNREACHABLE
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.split.planner import ForcedPlanner
from stdsl.control.tables import Tables
from stdsl.errors import BudgetError
from stdsl.kernels.token_table import token_table
from stdsl.runtime.decode import generate

BOUNDED_SCHEMA = {
    "type": "object",
    "properties": {
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 0, "maximum": 99},
        "ok": {"type": "boolean"},
    },
    "required": ["unit", "days", "ok"],
    "additionalProperties": False,
}
PATTERNS = (r"(red|green|blue)-[a-z]{2,5}-[0-9]{1,3}", r'\{"name":"[A-Za-z ]{1,8}","n":[0-9]{1,2}\}')


def bounded_automata() -> list:
    return [compile_regex(p) for p in PATTERNS] + [build_automaton(schema_to_ir(BOUNDED_SCHEMA))]


def dijkstra_need(automaton, vocab) -> np.ndarray:
    """need(q) by Dijkstra over token steps, every token one step (an independent oracle for the searched table)."""
    table = token_table(automaton, vocab)
    num = automaton.num_states
    out = np.full(num, UNREACHABLE)
    for source in range(num):
        best = {source: 0}
        heap = [(0, source)]
        while heap:
            dist, q = heapq.heappop(heap)
            if dist > best.get(q, 1 << 30):
                continue
            if automaton.accepting[q]:
                out[source] = dist
                break
            for end in set(table[q][table[q] >= 0].tolist()):
                if dist + 1 < best.get(end, 1 << 30):
                    best[end] = dist + 1
                    heapq.heappush(heap, (dist + 1, end))
    return out


def test_need_is_the_shortest_completion(smollm2_tokenizer) -> None:
    vocab = vocabulary_of(smollm2_tokenizer)
    for automaton in bounded_automata():
        planner = ForcedPlanner(automaton, smollm2_tokenizer, vocab.token_bytes)
        table = Tables.of(automaton, vocab).budget(planner)
        assert np.array_equal(table.need, dijkstra_need(automaton, vocab))
        assert table.rounds <= automaton.num_states + 1


@settings(max_examples=30, deadline=None)
@given(which=st.integers(0, 2), budget=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_any_sampling_rule_ends_valid_within_a_feasible_budget(smollm2_tokenizer, which, budget, seed) -> None:
    """Theorem 21(ii): under the budget mask every choice of admissible tokens ends in the language."""
    automaton = bounded_automata()[which]
    vocab = vocabulary_of(smollm2_tokenizer)
    rng = random.Random(seed)
    control = RowDriver(automaton, smollm2_tokenizer, vocab, max_tokens=budget)
    try:
        control.start()
    except BudgetError:
        assert control.least_output_tokens is not None and control.least_output_tokens > budget
        return
    while not control.finished:
        allowed = control.mask()
        assert bool(allowed[vocab.eos_ids].any()) == control.accepting
        choices = np.flatnonzero(allowed & ~vocab.eos)
        if choices.size == 0 or (control.accepting and rng.random() < 0.1):
            control.advance(int(vocab.eos_ids[0]))
        else:
            control.advance(int(rng.choice(choices.tolist())))
    assert control.accepting
    assert automaton.accepts(control.decided)
    assert len(control.tokens) <= budget
    assert vocab.decode(control.tokens) == control.decided


def test_every_budget_is_valid_or_refused_up_front(tiny_model) -> None:
    """Every budget from 1 to the unconstrained length: valid output iff need(c1) <= budget, else BudgetError."""
    for automaton in bounded_automata():
        free = generate(tiny_model, "Answer.", automaton, max_tokens=None)
        assert automaton.accepts(free.data)
        vocabulary = vocabulary_of(tiny_model.tokenizer)
        control = RowDriver(automaton, tiny_model.tokenizer, vocabulary, max_tokens=10**6)
        control.start()
        least = control.least_output_tokens
        assert least is not None and least <= len(free.tokens)
        for budget in range(1, len(free.tokens) + 1):
            if budget < least:
                with pytest.raises(BudgetError, match=f"max_tokens={budget}"):
                    generate(tiny_model, "Answer.", automaton, max_tokens=budget)
                continue
            out = generate(tiny_model, "Answer.", automaton, max_tokens=budget)
            assert automaton.accepts(out.data), (budget, out.text)
            assert len(out.tokens) <= budget
        assert generate(tiny_model, "Answer.", automaton, max_tokens=len(free.tokens)).tokens == free.tokens


class _NoPassModel:
    """A model stub that fails if the decoder ever runs a pass (BudgetError must come first)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.net = SimpleNamespace(layers=[])  # no layers: the engine's cache check passes, no pass can run

    def make_cache(self) -> list:
        raise AssertionError("the decoder prepared a pass before reporting an infeasible budget")

    def forward(self, tokens, cache):
        raise AssertionError("the decoder ran a pass before reporting an infeasible budget")


def test_infeasible_budget_is_reported_before_decoding(smollm2_tokenizer) -> None:
    stub = _NoPassModel(smollm2_tokenizer)
    automaton = compile_regex(PATTERNS[1])
    with pytest.raises(BudgetError, match="no valid output fits in max_tokens=3"):
        generate(stub, "x", automaton, max_tokens=3, chat=False)


def test_budget_mask_is_inactive_far_from_the_limit(smollm2_tokenizer) -> None:
    """Theorem 21(iii): with room to spare the budget mask admits exactly the unbudgeted mask."""
    vocab = vocabulary_of(smollm2_tokenizer)
    automaton = bounded_automata()[1]
    free = RowDriver(automaton, smollm2_tokenizer, vocab)
    roomy = RowDriver(automaton, smollm2_tokenizer, vocab, max_tokens=1000)
    assert free.start() == roomy.start()
    rng = random.Random(4)
    while not free.finished:
        allowed = free.mask()
        assert np.array_equal(allowed, roomy.mask())
        token = int(rng.choice(np.flatnonzero(allowed).tolist()))
        assert free.advance(token) == roomy.advance(token)


TAGS = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                                                  "maxItems": 5}}, "required": ["tags"], "additionalProperties": False}
"""A tags schema whose DFA (1,026 states) times SmolLM2's 49,152 tokens is past where need was only bounded."""
HELD_BACK = r"(ab|cd) (the|a) (cat|dog)s?"
"""After "ab" the space is forced, and SmolLM2 spells it with the next word (" the", " cat"): 3 tokens, not 5."""


def _fitting(mask: np.ndarray | None, row: np.ndarray) -> np.ndarray:
    live = row >= 0
    return live if mask is None else mask & live


@pytest.mark.parametrize("which", range(len(PATTERNS) + 3))
def test_the_searched_need_equals_the_whole_solve(smollm2_tokenizer, which: int) -> None:
    """Issue 35: need searched from the states asked (behind the byte bound) answers as the whole solve over every
    token row: need within a limit, the budget masks and the least output, on large automata too (the tags schema
    was refused at its least budget as needing one token more)."""
    from stdsl.control import tables
    from stdsl.kernels.rows import row_next_states

    vocab = vocabulary_of(smollm2_tokenizer)
    automaton = (bounded_automata() + [compile_regex(HELD_BACK), build_automaton(schema_to_ir(TAGS))])[which]
    planner = ForcedPlanner(automaton, smollm2_tokenizer, vocab.token_bytes, True)
    whole = tables.budget_table_for(automaton, vocab, planner).need
    searched = tables.budget_table_for(automaton, vocab, planner)
    rng = random.Random(which)
    for state in rng.sample(range(automaton.num_states), min(30, automaton.num_states)):
        for limit in range(8):
            assert searched.within(state, limit) == (whole[state] <= limit), (state, limit)
        row = row_next_states(automaton, state, vocab)
        through = np.where(row >= 0, 1 + whole[np.where(row >= 0, row, 0)], UNREACHABLE)
        for remaining in range(1, 9):
            assert np.array_equal(_fitting(searched.admits(state, row, remaining), row),
                                  (row >= 0) & (through <= remaining)), (state, remaining)
    control = RowDriver(automaton, smollm2_tokenizer, vocab, max_tokens=10**6,
                              budget=tables.budget_table_for(automaton, vocab, planner))
    control.start()
    assert control.least_output_tokens == int(whole[0])


@pytest.mark.parametrize(("pattern", "least"), [(HELD_BACK, 3), (None, 5)])
def test_a_least_budget_decodes_and_one_below_is_refused_naming_it(tiny_model, pattern, least) -> None:
    """The least output counts held-back forced bytes spelled with the next token ("ab", " the", " cat") and tokens
    across a large automaton ('{"', 'tags', '":', '[', ']}'): that budget decodes valid, one less is refused."""
    automaton = compile_regex(pattern) if pattern else build_automaton(schema_to_ir(TAGS))
    shortest = "ab the cat" if pattern else '{"tags":[]}'
    assert automaton.accepts(shortest.encode()) and len(tiny_model.tokenizer.encode(shortest)) == least
    for seed in range(3):
        out = generate(tiny_model, f"Answer {seed}.", automaton, max_tokens=least, chat=False)
        assert automaton.accepts(out.data) and len(out.tokens) <= least, out.text
    with pytest.raises(BudgetError, match=f"max_tokens={least - 1}: the shortest valid output needs {least} tokens"):
        generate(tiny_model, "Answer.", automaton, max_tokens=least - 1, chat=False)


def test_every_budget_from_the_least_decodes_valid_on_a_large_automaton(tiny_model) -> None:
    """Every budget from the tags schema's least up decodes a valid output within it (the search's answers hold)."""
    automaton = build_automaton(schema_to_ir(TAGS))
    for budget in range(5, 17):
        out = generate(tiny_model, "Tags:", automaton, max_tokens=budget, chat=False)
        assert automaton.accepts(out.data), (budget, out.text)
        assert len(out.tokens) <= budget


def test_a_report_sized_output_stays_within_a_control_budget(smollm2_tokenizer) -> None:
    """examples/report.stc (5,624 states x 49,152 tokens, past where need was only bounded) driven by random admissible
    tokens under tight budgets: each step's budget questions walk a bounded number of new token rows, and the whole
    output's control time stays far inside the engine's 60 s (the unbounded exact search went past it)."""
    import time
    from pathlib import Path

    from stdsl.control.budget.automaton_budget import MAX_QUESTION_ROWS
    from stdsl.programs import Program

    program = Program.from_file(Path(__file__).resolve().parents[3] / "examples" / "report.stc")
    automaton = program.constraint(program.arguments({"notes": "a bad config push; rolled back."})).automaton
    vocab = vocabulary_of(smollm2_tokenizer)
    RowDriver(automaton, smollm2_tokenizer, vocab, max_tokens=1000).start()  # the shared tables, built once
    rng = random.Random(3)
    for budget in (70, 90):
        began = time.perf_counter()
        control = RowDriver(automaton, smollm2_tokenizer, vocab, max_tokens=budget)
        control.start()
        table = control.budget
        while not control.finished:
            walked = table.expanded_states
            allowed = control.mask()
            choices = np.flatnonzero(allowed & ~vocab.eos)
            token = int(vocab.eos_ids[0]) if allowed[vocab.eos_ids].any() else int(rng.choice(choices.tolist()))
            control.advance(token)
            assert table.expanded_states - walked <= 4 * MAX_QUESTION_ROWS
        assert automaton.accepts(control.decided) and len(control.tokens) <= budget
        assert time.perf_counter() - began < 30.0, budget
