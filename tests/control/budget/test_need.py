"""need(q) without an all-state token table: solved on demand over token rows, behind the byte-token bound.

Oracles: shortest paths (Dijkstra) over the all-state token table, and the budget table built from
that table; the budget mask must admit exactly the tokens whose exact cost fits.
"""

from __future__ import annotations

import heapq
import random
from types import SimpleNamespace

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.control.budget.automaton_budget import UNREACHABLE, BudgetTable, build_budget_table
from stdsl.control.budget.need_graphs import chain_bound, forced_chains, row_successors, single_byte_tokens
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.split.planner import ForcedPlanner, Window
from stdsl.control.tables import budget_table_for
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary
from tests.runtime.json_documents import load_task

TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")
ALPHABET = b'ab{"}:,\xc3\xa9'


@st.composite
def automata_and_vocabularies(draw: st.DrawFn) -> tuple[Automaton, Vocabulary]:
    """A random DFA over a small alphabet (forced runs and forced cycles likely) and a vocabulary over it, which
    holds every byte of the alphabet as a token of its own (as byte-level vocabularies do) or not."""
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
    if draw(st.booleans()):
        tokens += [bytes([byte]) for byte in alphabet]
    tokens += [None, None]
    return Automaton(transitions, accepting), Vocabulary(tokens, eos_ids=[len(tokens) - 1])


def chains_of(automaton: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """(chain end, chain bytes) per state by the automaton's own forced-chain walk."""
    ends = np.array([automaton.chain_end(q) for q in range(automaton.num_states)], dtype=np.int64)
    lengths = np.array([len(automaton.forced_chain(q)) for q in range(automaton.num_states)], dtype=np.int64)
    return ends, lengths


def chain_count_of(automaton: Automaton, vocab: Vocabulary):
    """|φ(q)| as the fewest tokens that spell q's forced chain exactly (UNREACHABLE where none does), as every
    tokenizer's split of it is at least."""
    spellings = {b for b in vocab.token_bytes if b}

    def count(state: int) -> int:
        chain = automaton.forced_chain(state)
        fewest = [0] + [UNREACHABLE] * len(chain)
        for end in range(1, len(chain) + 1):
            fewest[end] = min([fewest[start] + 1 for start in range(end) if chain[start:end] in spellings],
                              default=UNREACHABLE)
        return fewest[-1]

    return count


def oracle_need(automaton: Automaton, vocab: Vocabulary) -> np.ndarray:
    """need(q) by Dijkstra over the all-state token table, every token one step (UNREACHABLE where no ending
    exists): forced bytes are spelled by the tokens that follow, as the planner's held-back runs are."""
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
            for end in set(table[state][table[state] >= 0].tolist()):
                if dist + 1 < best.get(end, UNREACHABLE):
                    best[end] = dist + 1
                    heapq.heappush(heap, (dist + 1, end))
    return out


def spells_every_byte(automaton: Automaton, vocab: Vocabulary) -> bool:
    """Whether every byte the automaton reads is a token of its own (the byte bound's premise: a forced chain of n
    bytes is spelled in at most n tokens)."""
    read = np.flatnonzero((np.asarray(automaton.transitions) >= 0).any(axis=0)).tolist()
    return all(single_byte_tokens(vocab)[read])


def lazy_table(automaton: Automaton, vocab: Vocabulary, chain_count) -> BudgetTable:
    """The production form: row successors on demand, the byte-token bound in front where its premise holds
    (else every question is searched from an unknown upper end)."""
    ends, lengths = chains_of(automaton)
    bound = chain_bound(automaton, vocab, ends, lengths, chain_count) if spells_every_byte(automaton, vocab) else None
    return BudgetTable(automaton.accepting, row_successors(automaton, vocab), bound)


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
    count = chain_count_of(automaton, vocab)
    want = oracle_need(automaton, vocab)
    table = lazy_table(automaton, vocab, count)
    order = list(range(automaton.num_states))
    rng.shuffle(order)
    for state in order[: len(order) // 2]:
        assert table.need_at(state) == want[state]
    assert np.array_equal(table.need, want)
    assert table.rounds <= automaton.num_states + 1
    eager = build_budget_table(token_table(automaton, vocab), automaton.accepting)
    assert np.array_equal(eager.need, want)


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies())
def test_the_byte_token_bound_is_never_below_need(case) -> None:
    automaton, vocab = case
    assume(spells_every_byte(automaton, vocab))
    count = chain_count_of(automaton, vocab)
    want = oracle_need(automaton, vocab)
    ends, lengths = chains_of(automaton)
    bound = chain_bound(automaton, vocab, ends, lengths, count)
    assert (bound.need >= want).all()
    assert (bound.through >= np.minimum(1 + want, UNREACHABLE)).all()


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies(), st.randoms(use_true_random=False))
def test_the_budget_mask_admits_exactly_the_tokens_whose_cost_fits(case, rng: random.Random) -> None:
    """Whatever the order of questions, admits() and fits() answer as the exact need would."""
    automaton, vocab = case
    count = chain_count_of(automaton, vocab)
    want = oracle_need(automaton, vocab)
    through = np.minimum(1 + want, UNREACHABLE)
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
        assert lazy.expanded_states == 0, name
        eager = build_budget_table(token_table(automaton, vocab), automaton.accepting)
        assert np.array_equal(lazy.need, eager.need), name
        assert lazy.bound is not None and (lazy.bound.need >= eager.need).all()


@settings(max_examples=150, deadline=None)
@given(automata_and_vocabularies(), st.integers(0, 3), st.randoms(use_true_random=False))
def test_questions_out_of_rows_stay_sound(case, max_rows: int, rng: random.Random) -> None:
    """A question that may walk only a few new rows answers from the bound where they run out: it may refuse a token
    that fits, never admit one that does not, and a reported need is never below the exact one."""
    automaton, vocab = case
    want = oracle_need(automaton, vocab)
    through = np.minimum(1 + want, UNREACHABLE)
    rows = token_table(automaton, vocab).astype(np.int64)
    table = lazy_table(automaton, vocab, chain_count_of(automaton, vocab))
    table.max_rows = max_rows
    questions = [(q, r) for q in range(automaton.num_states) for r in range(0, 12)]
    rng.shuffle(questions)
    for state, remaining in questions:
        row = rows[state]
        live = row >= 0
        admitted = table.admits(state, row, remaining)
        got = live if admitted is None else live & admitted
        assert not (got & ~(through[np.where(live, row, 0)] <= remaining)).any(), (state, remaining)
        if table.fits(state, 0, remaining):
            assert want[state] <= remaining
        assert table.need_at(state) >= want[state]
