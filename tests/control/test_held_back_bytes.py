"""Held-back bytes are decided: every token admitted after a plan agrees with its held-back bytes.

A sampled token whose tail merges with the forced block after it (`]"` then a forced `:` in a free
key, which the tokenizer spells `]` + `":`) is fed as its head, and its tail joins the held-back bytes.
Those bytes are the model's choice, not the automaton's, so the mask must keep the next token to them:
otherwise the decided bytes change under the caller (the streamed text and `Generation.data` part).
The oracle: over random drives, `decided` only ever grows at its end.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from row_driver import RowDriver

from stdsl.compiler.constraint import compile_embeddable
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.control.special_vocabulary import vocabulary_of

OPEN_OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}}


def _states(tokenizer, max_tokens: int | None) -> list[RowDriver]:
    vocab = vocabulary_of(tokenizer)
    dfa = compile_embeddable(OPEN_OBJECT, strict=False)
    pushdown = compile_recursive(OPEN_OBJECT, strict=False)
    return [RowDriver(dfa.automaton, tokenizer, vocab, max_tokens=max_tokens),
            RowDriver(pushdown.machine, tokenizer, vocab, max_tokens=max_tokens)]


def test_a_token_healed_into_the_held_back_block_binds_the_next_token(smollm2_tokenizer) -> None:
    tokenizer = smollm2_tokenizer
    head, key_end, other = tokenizer.encode('{"k'), tokenizer.encode(']"'), tokenizer.encode('__":')
    assert len(key_end) == 1 and len(other) == 1
    for state in _states(tokenizer, None):
        state.start()
        for token in head + key_end:
            assert state.mask()[token]
            state.advance(token)
        assert state.pending.endswith(b'":') and state.decided.endswith(b']":')
        allowed = state.mask()
        assert not allowed[other[0]]
        for token in np.flatnonzero(allowed).tolist():
            data = state.planner.token_bytes[token] or b""
            assert data.startswith(state.pending) or state.pending.startswith(data), data


@pytest.mark.parametrize("max_tokens", [None, 12])
def test_decided_bytes_only_grow_over_random_drives(smollm2_tokenizer, max_tokens) -> None:
    rng = random.Random(7)
    for seed in range(12):
        for state in _states(smollm2_tokenizer, max_tokens):
            state.start()
            decided = state.decided
            for _ in range(40):
                if state.finished:
                    break
                allowed = np.flatnonzero(state.mask()).tolist()
                state.advance(rng.choice(allowed))
                assert state.decided.startswith(decided), (seed, decided, state.decided)
                decided = state.decided
