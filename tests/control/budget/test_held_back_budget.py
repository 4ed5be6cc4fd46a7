"""The token budget where held-back bytes include a sampled token's tail (`(ab|abc)+d`): every walk ends in budget.

The canonical split can feed a sampled token's head and hold its tail back with the forced bytes after it (SmolLM2
spells "abab" as "ab" "ab", so a sampled "aba" before a forced "b" feeds "ab" and holds "ab"). The next tokens must
spell those bytes, so the budget counts them: a configuration whose held bytes cannot be spelled and ended within
the tokens left is never reached, and the mask is never empty before the output may finish.
"""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

import stdsl
from stdsl.errors import BudgetError

WALKS = 6
"""Random walks per regex and budget (a compile is shared by them)."""
BUDGETS = range(1, 13)
"""Every budget is walked: the hole shows at the one that leaves a held-back tail exactly one token."""

words = st.text(alphabet="abc", min_size=1, max_size=3)


@st.composite
def overlapping_alternations(draw: st.DrawFn) -> str:
    """`(w|wx|...)+e`: alternatives that are prefixes of one another, repeated, then a closing letter."""
    stem = draw(words)
    longer = [stem + draw(st.text(alphabet="abc", min_size=1, max_size=2)) for _ in range(draw(st.integers(1, 2)))]
    alternatives = sorted({stem, *longer})
    return "(" + "|".join(alternatives) + ")+" + draw(st.sampled_from("de"))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=overlapping_alternations(), seed=st.integers(0, 2**16))
@example(pattern=r"(ab|abc)+d", seed=0)
def test_walks_over_overlapping_prefixes_never_empty_and_end_within_budget(
        smollm2_tokenizer, pattern: str, seed: int) -> None:
    compiled = stdsl.compile(stdsl.Regex(pattern))
    rng = random.Random(seed)
    for max_tokens, walk in itertools.product(BUDGETS, range(WALKS)):
        row = RowDriver.of(compiled, smollm2_tokenizer, max_tokens=max_tokens)
        try:
            row.start()
        except BudgetError:
            continue
        path = []
        while not row.finished:
            allowed = np.flatnonzero(row.mask())
            assert allowed.size, (f"walk {walk}: empty mask after {path} with {row.pending!r} held back and "
                                  f"{row.remaining} tokens left")
            token = int(rng.choice(allowed))
            path.append(token)
            row.advance(token)
        assert len(row.tokens) <= max_tokens
        assert re.fullmatch(pattern, row.decided.decode()), (walk, row.decided)


@pytest.mark.parametrize("seed", range(4))
def test_sampled_tail_held_back_at_the_last_tokens_still_ends(smollm2_tokenizer, seed: int) -> None:
    """The reviewer's walk: `(ab|abc)+d` in 9 tokens, each step uniform over the admitted tokens."""
    compiled = stdsl.compile(stdsl.Regex(r"(ab|abc)+d"))
    rng = random.Random(seed)
    row = RowDriver.of(compiled, smollm2_tokenizer, max_tokens=9)
    row.start()
    while not row.finished:
        allowed = np.flatnonzero(row.mask())
        assert allowed.size, (row.tokens, row.pending, row.remaining)
        row.advance(int(rng.choice(allowed)))
    assert len(row.tokens) <= 9 and re.fullmatch(r"(ab|abc)+d", row.decided.decode())
