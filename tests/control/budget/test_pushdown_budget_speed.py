"""The exact pushdown budget stays exact and fast on a deeply recursive grammar (issue 27, item 1 follow-up).

The grammar nests brackets to any depth and SmolLM2's vocabulary holds runs of brackets ("(((", "])))"), so one
token may push or pop several return states: every mask step once took up to 28 s. The oracle is a uniform-cost
search over the vocabulary's tokens from a configuration (each forced chain counted by the tokenizer's own split),
cut only by the trivially sound bound ceil(shortest completion bytes / longest token).
"""

from __future__ import annotations

import heapq
import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

import stdsl
from stdsl.control.budget.live_token_length import longest_live_token
from stdsl.control.budget.pushdown_budget import PushdownBudget, PushdownNeed
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.model_files.tokenizer import Tokenizer
from tests.control.budget.test_pushdown_budget import bytes_to_unicode, random_walk_configs, recursive_trees
from tests.control.budget.test_pushdown_budget import small_tokenizer as small_tokenizer  # noqa: F401 (the fixture)

NESTED = 'root ::= "(" root ")" | "x" | "[" root ("," root)* "]"'
BRACKETS = ["((", "(((", "))", ")))", "))))", ")]", "])", "]]", "]))", "[(", "([", "[[", "(x", "x)", "x]", "x,",
            ",x", "],", "),", ")])", "()", ",,,,,,"]
STEP_SECONDS = 2.0
"""A generous bound on one mask step (mask and advance) of the SmolLM2 walk: once 28 s, now tens of ms."""


@pytest.fixture(scope="module")
def bracket_tokenizer() -> Tokenizer:
    """A byte-level BPE over all 256 bytes plus BRACKETS (left-to-right merges) and an eos special."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    merges: list[tuple[str, str]] = []
    for piece in BRACKETS:
        chars = "".join(alphabet[b] for b in piece.encode())
        for end in range(2, len(chars) + 1):
            if chars[:end] not in vocab:
                vocab[chars[:end]] = len(vocab)
                merges.append((chars[: end - 1], chars[end - 1]))
    vocab["<eos>"] = len(vocab)
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(["<eos>"])
    return Tokenizer(hf=hf, eos_ids=(vocab["<eos>"],))


def candidate_tokens(machine, tokenizer) -> list[bytes]:
    """The tokens whose every byte the grammar reads somewhere (no other token ever steps)."""
    read = set(np.flatnonzero((np.asarray(machine.grammar.byte_table) >= 0).any(axis=0)).tolist())
    specials = set(tokenizer.special_tokens.values())
    return [b for t, b in enumerate(tokenizer.token_bytes) if t not in specials and b and set(b) <= read]


def oracle_need(machine, tokenizer, config: int, limit: int) -> int | None:
    """Fewest tokens from `config` to acceptance, each token stepped byte by byte and its forced chain split by
    `encode_ordinary` (None: more than `limit`)."""
    tokens = candidate_tokens(machine, tokenizer)
    longest = max(len(b) for b in tokens)

    def chain(after: int) -> tuple[int, int]:
        forced = machine.forced_chain(after)
        return (len(tokenizer.encode_ordinary(forced.decode())) if forced else 0), machine.chain_end(after)

    best, heap = {config: 0}, [(0, config)]
    while heap:
        cost, here = heapq.heappop(heap)
        if cost > best[here]:
            continue
        if machine.config_accepts(here):
            return cost
        for data in tokens:
            after = machine.step(here, data)
            if after < 0:
                continue
            count, end = chain(after)
            reached = cost + 1 + count
            if reached + -(-machine.need(end) // longest) <= limit and reached < best.get(end, limit + 1):
                best[end] = reached
                heapq.heappush(heap, (reached, end))
    return None


def test_the_longest_live_token_bounds_every_token_that_steps(smollm2_tokenizer) -> None:
    machine = stdsl.compile(stdsl.Grammar(NESTED)).machine
    longest = longest_live_token(machine.grammar, vocabulary_of(smollm2_tokenizer))
    assert longest == 4
    walker = RowDriver(machine, smollm2_tokenizer, vocabulary_of(smollm2_tokenizer))
    walker.start()
    tokens = candidate_tokens(machine, smollm2_tokenizer)
    assert max(len(b) for b in tokens) > longest
    for config in random_walk_configs(walker, random.Random(0), 10):
        stepping = [b for b in tokens if machine.step(config, b) >= 0]
        assert stepping and max(len(b) for b in stepping) <= longest


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16))
def test_the_lower_bound_never_exceeds_the_token_search(bracket_tokenizer, seed: int) -> None:
    machine = stdsl.compile(stdsl.Grammar(NESTED)).machine
    vocab = vocabulary_of(bracket_tokenizer)
    walker = RowDriver(machine, bracket_tokenizer, vocab)
    walker.start()
    budget = Tables.of(machine, vocab).budget(walker.planner)
    for config in random_walk_configs(walker, random.Random(seed), 8):
        truth = oracle_need(machine, bracket_tokenizer, config, 30)
        assert truth is not None
        assert budget.solver.lower_bound(config) <= truth or machine.config_accepts(config)
        assert budget.need_at(config) == truth, machine.configuration(config)
    assert budget.exact


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schema=recursive_trees(), seed=st.integers(0, 2**16))
def test_the_lower_bound_holds_on_recursive_schemas(small_tokenizer, schema: dict, seed: int) -> None:  # noqa: F811
    machine = stdsl.compile(schema).machine
    vocab = vocabulary_of(small_tokenizer)
    walker = RowDriver(machine, small_tokenizer, vocab)
    walker.start()
    budget = Tables.of(machine, vocab).budget(walker.planner)
    for config in random_walk_configs(walker, random.Random(seed), 6):
        truth = budget.need_at(config)
        assert budget.solver.lower_bound(config) <= truth or machine.config_accepts(config)
    assert budget.exact


def walk_with_budget(control: RowDriver, rng: random.Random) -> list[float]:
    """Decode under the budget taking random admitted tokens; the seconds each mask step (mask and advance) took."""
    vocab = control.vocab
    times = []
    control.start()
    while not control.finished:
        began = time.perf_counter()
        allowed = control.mask()
        assert allowed.any(), "an admitted configuration's mask is empty"
        choices = np.flatnonzero(allowed & ~vocab.eos)
        if choices.size == 0 or (control.accepting and rng.random() < 0.1):
            control.advance(int(vocab.eos_ids[0]))
        else:
            control.advance(int(rng.choice(choices.tolist())))
        times.append(time.perf_counter() - began)
    return times


def test_the_nested_grammar_masks_fast_and_exactly_with_smollm2(smollm2_tokenizer) -> None:
    constraint = stdsl.compile(stdsl.Grammar(NESTED))
    vocab = vocabulary_of(smollm2_tokenizer)
    for seed in range(4):
        control = RowDriver(constraint.machine, smollm2_tokenizer, vocab, max_tokens=14)
        times = walk_with_budget(control, random.Random(seed))
        assert max(times) < STEP_SECONDS, times
        assert control.accepting and constraint.accepts(control.decided) and len(control.tokens) <= 14
        assert control.budget.exact  # type: ignore[union-attr]


def test_the_smollm2_masks_equal_the_token_search_near_the_limit(smollm2_tokenizer) -> None:
    """Where few tokens are left, each live token is admitted iff its step plus the oracle's need fits."""
    constraint = stdsl.compile(stdsl.Grammar(NESTED))
    machine, vocab = constraint.machine, vocabulary_of(smollm2_tokenizer)
    rng = random.Random(5)
    control = RowDriver(machine, smollm2_tokenizer, vocab, max_tokens=9)
    control.start()
    checked = 0
    while not control.finished:
        allowed = control.mask()
        assert control.remaining is not None
        if control.remaining <= 4 and not control.pending:
            row = control.rows.next_states(control.state)
            budget: PushdownBudget = control.budget  # type: ignore[assignment]
            for token in np.flatnonzero((row >= 0) & ~vocab.eos).tolist():
                step = budget.solver.chain_step(int(row[token]))
                truth = oracle_need(machine, smollm2_tokenizer, step.end, control.remaining)
                fits = truth is not None and step.cost + truth <= control.remaining
                assert bool(allowed[token]) == fits, (machine.configuration(control.state), token)
                checked += 1
        choices = np.flatnonzero(allowed & ~vocab.eos)
        control.advance(int(vocab.eos_ids[0]) if choices.size == 0 else int(rng.choice(choices.tolist())))
    assert checked > 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), max_tokens=st.integers(6, 16))
def test_a_mask_out_of_expansions_refuses_soundly_and_never_empties(bracket_tokenizer, seed: int,
                                                              max_tokens: int) -> None:
    """With no expansions for any search, tokens left unanswered are refused: the mask still admits the tokens of a
    proven path, and every output decoded ends valid within its budget."""
    constraint = stdsl.compile(stdsl.Grammar(NESTED))
    machine, vocab = constraint.machine, vocabulary_of(bracket_tokenizer)
    control = RowDriver(machine, bracket_tokenizer, vocab, max_tokens=max_tokens)
    tables = Tables.of(machine, vocab)
    control.budget = PushdownBudget(PushdownNeed(machine, tables.rows.symbolic, control.planner, vocab),
                                    max_mask_expansions=0)
    walk_with_budget(control, random.Random(seed))
    assert control.accepting and constraint.accepts(control.decided) and len(control.tokens) <= max_tokens


def masks_of_a_walk(machine, tokenizer, max_tokens: int, seed: int, max_mask_expansions: int
                    ) -> tuple[list[bytes], int]:
    """The packed masks of one random walk under a fresh budget whose masks may expand `max_mask_expansions`
    configurations, and how many answers that budget gave by a bound."""
    vocab = vocabulary_of(tokenizer)
    control = RowDriver(machine, tokenizer, vocab, max_tokens=max_tokens)
    tables = Tables.of(machine, vocab)
    control.budget = PushdownBudget(PushdownNeed(machine, tables.rows.symbolic, control.planner, vocab),
                                    max_mask_expansions=max_mask_expansions)
    rng, masks = random.Random(seed), []
    control.start()
    while not control.finished:
        allowed = control.mask()
        masks.append(np.packbits(allowed).tobytes())
        choices = np.flatnonzero(allowed & ~vocab.eos)
        control.advance(int(vocab.eos_ids[0]) if choices.size == 0 else int(rng.choice(choices.tolist())))
    return masks, control.budget.solver.bounded_answers


def test_masks_do_not_depend_on_the_clock(bracket_tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guards count expansions, not seconds: a walk whose guard binds gives the same masks when every look at
    the clock finds ten more seconds gone (a loaded machine), so certified drafts and sequential decoding agree."""
    machine = stdsl.compile(stdsl.Grammar(NESTED)).machine
    for seed in (0, 2):
        quiet, bounded = masks_of_a_walk(machine, bracket_tokenizer, 10, seed, 3)
        assert bounded > 0, "the guard never bound: the test would not see a clock"
        clock = iter(range(0, 10**9, 10))
        monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
        loaded, _ = masks_of_a_walk(machine, bracket_tokenizer, 10, seed, 3)
        monkeypatch.undo()
        assert loaded == quiet
