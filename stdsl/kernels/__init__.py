"""Vocabulary packing, the token table (the oracle), the table-free walk kernels and rows on demand."""

from stdsl.kernels.combined import CombinedTable
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocab_sources import qwen_vocabulary, vocabulary_from_hf, vocabulary_from_tiktoken
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.kernels.walk import walk_mask, walk_next_states

__all__ = [
    "CombinedTable",
    "RowCache",
    "Vocabulary",
    "qwen_vocabulary",
    "token_table",
    "vocabulary_from_hf",
    "vocabulary_from_tiktoken",
    "walk_mask",
    "walk_next_states",
]
