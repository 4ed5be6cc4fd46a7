"""Vocabulary packing, the token table (the oracle), the table-free walk kernels and rows on demand.

The walk kernels use MLX; they are imported on first use so that `import stdsl.kernels` (and the
numpy-only rows path) does not load MLX.
"""

from typing import Any

from stdsl.kernels.combined import CombinedTable
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocab_sources import qwen_vocabulary, vocabulary_from_hf, vocabulary_from_tiktoken
from stdsl.kernels.vocabulary import Vocabulary

_WALK_NAMES = ("walk_mask", "walk_next_states")

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


def __getattr__(name: str) -> Any:
    """`walk_mask` and `walk_next_states`, imported (with MLX) on first access."""
    if name in _WALK_NAMES:
        import stdsl.kernels.walk as walk

        return getattr(walk, name)
    raise AttributeError(f"module 'stdsl.kernels' has no attribute {name!r}")
