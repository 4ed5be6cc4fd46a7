"""need(q) without an all-state token table: solved on demand over token rows, behind the byte-token bound.

Oracles: shortest paths (Dijkstra) over the all-state token table, and the budget table built from
that table; the budget mask must admit exactly the tokens whose exact cost fits.
"""

from __future__ import annotations

import heapq
import random
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.control.budget.automaton_budget import UNREACHABLE, BudgetTable, build_budget_table
from stdsl.control.budget.need_graphs import chain_bound, forced_chains, row_successors
from stdsl.control.constraint_state import budget_table_for, vocabulary_of
from stdsl.control.split.planner import ForcedPlanner, Window
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary
from tests.runtime.json_documents import load_task

TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")
ALPHABET = b'ab{"}:,\xc3\xa9'


@st.composite
def automata_and_vocabularies(draw: st.DrawFn) -> tuple[Automaton, Vocabulary]:
    """A random DFA over a small alphabet (forced runs and forced cycles likely) and a vocabulary over it."""
    alphabet = draw(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6, unique=True))
    num_states = draw(st.integers(1, 9))
    transitions = np.full((num_states, 256), -1, dtype=np.int16)
    for state in range(num_states):
        live = draw(st.lists(st.sampled_from(alphabet), min_size=0, max_size=len(alphabet), unique=True))
        for byte in live:
            transitions[state, byte] = draw(st.integers(0, num_states - 1))
    accepting = np.asarray(draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)), dtype=bool)
    token = st.lists(st.sampled_from(alphabet), min_size=1, max_size=4).map(bytes)
    tokens: list[bytes | None] = draw(st.lists(token, min_size=1, max_size=24))
    tokens += [None, None]
    return Automaton(transitions, accepting), Vocabulary(tokens, eos_ids=[len(tokens) - 1])


def chains_of(automaton: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """(chain end, chain bytes) per state by the automaton's own forced-chain walk."""
    ends = np.array([automaton.chain_end(q) for q in range(automaton.num_states)], dtype=np.int64)
    lengths = np.array([len(automaton.forced_chain(q)) for q in range(automaton.num_states)], dtype=np.int64)
    return ends, lengths


def chain_count_of(automaton: Automaton):
    """A stand-in for |φ(q)| that is at most the chain's bytes (as every tokenizer's split is)."""
    return lambda state: (len(automaton.forced_chain(state)) + 1) // 2


def oracle_need(automaton: Automaton, vocab: Vocabulary, chain_count) -> np.ndarray:
    """need(q) by Dijkstra over the all-state token table (UNREACHABLE where no ending exists)."""
    table = token_table(automaton, vocab)
    out = np.full(automaton.num_states, UNREACHABLE, dtype=np.int64)
    for source in range(automaton.num_states):
        best = {source: 0}
        heap = [(0, source)]
        while heap:
            dist, state = heapq.heappop(heap)
            if dist > best.get(state, UNREACHABLE):
                continue
            if automaton.accepting[state]:
                out[source] = dist
                break
            for mid in set(table[state][table[state] >= 0].tolist()):
                end = automaton.chain_end(mid)
                weight = dist + 1 + chain_count(mid)
                if weight < best.get(end, UNREACHABLE):
                    best[end] = weight
                    heapq.heappush(heap, (weight, end))
    return out


def lazy_table(automaton: Automaton, vocab: Vocabulary, chain_count) -> BudgetTable:
    """The production form: row successors on demand, the byte-token bound in front."""
    ends, lengths = chains_of(automaton)
    return BudgetTable(automaton.accepting, row_successors(automaton, vocab), ends, chain_count,
                       chain_bound(automaton, vocab, ends, lengths, chain_count))


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies())
def test_forced_chains_follow_the_automaton(case) -> None:
    automaton, _ = case
    chain_of = lambda q: (automaton.forced_chain(q), automaton.chain_end(q))  # noqa: E731
    want_ends, want_lengths = chains_of(automaton)
    bare = SimpleNamespace(transitions=automaton.transitions, accepting=automaton.accepting)
    for form in (automaton, bare):
        ends, lengths = forced_chains(form, chain_of)
        assert np.array_equal(ends, want_ends) and np.array_equal(lengths, want_lengths)


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies(), st.randoms(use_true_random=False))
def test_need_solved_on_demand_equals_shortest_paths_over_the_token_table(case, rng: random.Random) -> None:
    automaton, vocab = case
    count = chain_count_of(automaton)
    want = oracle_need(automaton, vocab, count)
    table = lazy_table(automaton, vocab, count)
    order = list(range(automaton.num_states))
    rng.shuffle(order)
    for state in order[: len(order) // 2]:
        assert table.need_at(state) == want[state]
    assert np.array_equal(table.need, want)
    assert table.rounds <= automaton.num_states + 1
    chain_end = chains_of(automaton)[0]
    eager = build_budget_table(token_table(automaton, vocab), automaton.accepting, lambda q: (count(q), chain_end[q]))
    assert np.array_equal(eager.need, want)


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies())
def test_the_byte_token_bound_is_never_below_need(case) -> None:
    automaton, vocab = case
    count = chain_count_of(automaton)
    want = oracle_need(automaton, vocab, count)
    ends, lengths = chains_of(automaton)
    bound = chain_bound(automaton, vocab, ends, lengths, count)
    assert (bound.need >= want).all()
    counts = np.array([count(q) for q in range(automaton.num_states)])
    assert (bound.through >= np.minimum(1 + counts + want[ends], UNREACHABLE)).all()


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies(), st.randoms(use_true_random=False))
def test_the_budget_mask_admits_exactly_the_tokens_whose_cost_fits(case, rng: random.Random) -> None:
    """Whatever the order of questions, admits() and fits() answer as the exact need would."""
    automaton, vocab = case
    count = chain_count_of(automaton)
    want = oracle_need(automaton, vocab, count)
    ends = chains_of(automaton)[0]
    through = np.minimum(1 + np.array([count(q) for q in range(automaton.num_states)]) + want[ends], UNREACHABLE)
    rows = token_table(automaton, vocab).astype(np.int64)
    table = lazy_table(automaton, vocab, count)
    questions = [(q, r) for q in range(automaton.num_states) for r in range(0, 12)]
    rng.shuffle(questions)
    for state, remaining in questions:
        row = rows[state]
        live = row >= 0
        exact = live & (through[np.where(live, row, 0)] <= remaining)
        admitted = table.admits(state, row, remaining)
        got = live if admitted is None else live & admitted
        assert np.array_equal(got, exact), (state, remaining)
        spent = rng.randrange(3)
        assert table.fits(state, spent, remaining) == (want[state] < UNREACHABLE and spent + want[state] <= remaining)


def test_extraction_schemas_need_equals_the_token_table_construction(smollm2_tokenizer) -> None:
    """On the six extraction schemas and SmolLM2, need through rows on demand equals need through the
    all-state token table, and the first masks' questions are settled by the bound alone."""
    vocab = vocabulary_of(smollm2_tokenizer)
    for name in TASKS:
        automaton = build_automaton(schema_to_ir(load_task(name)["schema"]))
        planner = ForcedPlanner(automaton, smollm2_tokenizer, vocab.token_bytes)
        lazy = budget_table_for(automaton, vocab, planner)
        start = planner.plan(Window(), 0, b"", None)
        assert lazy.fits(start.state, len(start.tokens), 256)
        assert lazy.solved_states == 0, name
        eager = build_budget_table(token_table(automaton, vocab), automaton.accepting,
                                   lambda q: (planner.chain_token_count(q), planner.chain(q)[1]))
        assert np.array_equal(lazy.need, eager.need), name
        assert lazy.bound is not None and (lazy.bound.need >= eager.need).all()
