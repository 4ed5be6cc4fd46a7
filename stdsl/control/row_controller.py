"""The row state of one output under a compiled constraint, over the tables `Tables.of` picks.

Every surface that decodes (the transformers and vLLM processors) starts a row here, over the
vocabulary the constraint needs (the tokenizer's shared one, or the variant that spells its special tokens).
"""

from __future__ import annotations

from typing import Any

from stdsl.control.constraint_state import ConstraintState
from stdsl.control.special_vocabulary import vocabulary_for
from stdsl.control.split.planner import PreTokenizingTokenizer


def controller_for(compiled: Any, tokenizer: PreTokenizingTokenizer, *, max_tokens: int | None,
                   healing: bool = True, pushdown_masks: str | None = None) -> ConstraintState:
    """A fresh (not started) row state of `compiled` for `tokenizer`; StdslError naming the type of anything else.

    `pushdown_masks` picks where a pushdown's masks come from ('host', 'device' or 'auto': `Tables.controller`).
    """
    return ConstraintState(compiled, tokenizer, vocabulary_for(tokenizer, compiled), max_tokens=max_tokens,
                           healing=healing, masks=pushdown_masks)
