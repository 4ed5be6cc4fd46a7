"""A model's row caches, one per layer as the model reads them, built from the caches mlx-lm makes for it.

mlx-lm's `make_prompt_cache(net)` says what each layer keeps; each kind gets its row-cache counterpart:
`KVCache` → `RowSlotsCache`, `RotatingKVCache` (sliding windows, gpt-oss) → a `RowSlotsCache` masked to the
window, `ChunkedKVCache` (Llama 4) → a `RowSlotsCache` masked to the query's chunk (and bounded as a window of the
chunk's size, which holds every key a chunk's queries see), `ArraysCache` (recurrent states) → `RowStatesCache`,
`CacheList` → a `RowCacheList` of its parts.
A kind with no exact counterpart is refused with the kind and the reason. The core steps the flat list of
leaf caches (`leaves`); the model gets `layers`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from stdsl.errors import UnsupportedModelError
from stdsl.runtime.platform.llama4_rows import install_row_masks
from stdsl.runtime.platform.mlx_lm_models import cache as mlx_cache
from stdsl.runtime.platform.mlx_lm_models import make_prompt_cache
from stdsl.runtime.row_caches.attention import LayerKV, RowSlotsCache
from stdsl.runtime.row_caches.recurrent import RecurrentState, RowStatesCache

LeafCache = RowSlotsCache | RowStatesCache
LeafRow = LayerKV | RecurrentState
"""One row of one leaf cache: attention keys and values (cut to any prefix) or a recurrent state (exact only)."""


class RowCacheList:
    """mlx-lm's `CacheList` over row caches: a layer that keeps several (falcon-h1's Mamba state and attention)."""

    def __init__(self, parts: Sequence[Any]) -> None:
        self.caches = list(parts)

    def __getitem__(self, index: int) -> Any:
        return self.caches[index]


def _leaf_factory(layer: Any, name: str) -> Callable[[], Any]:
    """A maker of the row cache standing for mlx-lm cache `layer` (a `CacheList` gives a list of makers)."""
    kind = type(layer)
    if kind is mlx_cache.KVCache:
        return RowSlotsCache
    if kind is mlx_cache.RotatingKVCache:
        if layer.keep:
            raise UnsupportedModelError(f"{name} keeps {layer.keep} sink positions in a sliding-window cache, which "
                                        "stdsl's batch engine does not batch exactly")
        window = int(layer.max_size)
        return lambda: RowSlotsCache(window=window)
    if kind is mlx_cache.ChunkedKVCache:
        install_row_masks()
        chunk = int(layer.chunk_size)
        return lambda: RowSlotsCache(window=chunk, chunk=chunk)  # a chunk's queries see at most its last `chunk` keys
    if issubclass(kind, mlx_cache.ArraysCache):
        size = len(layer.cache)
        return lambda: RowStatesCache(size)
    if kind is mlx_cache.CacheList:
        parts = [_leaf_factory(part, name) for part in layer.caches]
        return lambda: RowCacheList([make() for make in parts])
    reason = {"QuantizedKVCache": "its quantized KV cache is not batched by row"}.get(kind.__name__, "")
    raise UnsupportedModelError(f"{name} keeps {kind.__name__} in some layers, which stdsl's batch engine does not "
                                f"batch exactly{': ' + reason if reason else ''}")


class BatchCaches:
    """Every layer's row caches for one batch: `layers` as the model reads them, `leaves` flat, all in one slot
    layout. A row's state is the list of its leaf rows (`row`), and rows join from such lists (`append_rows`)."""

    def __init__(self, makers: Sequence[Callable[[], Any]], uniform_feeds: bool = False) -> None:
        self.layers = [make() for make in makers]
        self.uniform_feeds = uniform_feeds
        """Whether a ragged pass must run as passes of one width (`uniform_feeds.py`): some recurrent layer scans
        padding into its state."""
        self.leaves: list[LeafCache] = []
        for layer in self.layers:
            self.leaves += layer.caches if isinstance(layer, RowCacheList) else [layer]
        for leaf in self.leaves:
            if isinstance(leaf, RowStatesCache):
                leaf.keep_idle = uniform_feeds

    @property
    def trimmable(self) -> bool:
        """Whether a row's state can be cut to any prefix (no recurrent layer)."""
        return all(isinstance(leaf, RowSlotsCache) for leaf in self.leaves)

    @property
    def slots(self) -> list[int]:
        return self.leaves[0].slots

    @property
    def row_lengths(self) -> list[int]:
        return self.leaves[0].row_lengths

    def physical(self, feeds: Sequence[Sequence[int]]) -> list[Sequence[int]]:
        return self.leaves[0].physical(feeds)

    def prepare(self, feeds: Sequence[int], width: int) -> None:
        for leaf in self.leaves:
            leaf.prepare(feeds, width)

    def commit(self) -> None:
        for leaf in self.leaves:
            leaf.commit()

    def keep(self, indices: Sequence[int]) -> None:
        for leaf in self.leaves:
            leaf.keep(indices)

    def compact(self) -> None:
        """Gather the rows into exactly as many slots, now (free slots left by `keep` stop riding along in passes)."""
        for leaf in self.leaves:
            if leaf.free_slots:
                leaf.compact()

    def arrays(self) -> list[mx.array]:
        """Every array a pass writes, to evaluate with its logits."""
        return [a for leaf in self.leaves for a in leaf.arrays()]

    @property
    def nbytes(self) -> int:
        return sum(leaf.nbytes for leaf in self.leaves)

    def whole(self, index: int) -> bool:
        """Whether row `index` holds every position from the first in every layer (a bounded batch's sliding-window
        layers forget old ones), so it can be read and stored."""
        return all(leaf.whole(index) for leaf in self.leaves if isinstance(leaf, RowSlotsCache))

    def row(self, index: int, length: int | None = None) -> list[LeafRow]:
        """Row `index`'s state in every leaf (over its first `length` positions where the leaves can be cut)."""
        return [leaf.row(index, length) for leaf in self.leaves]

    def cut(self, index: int, count: int) -> None:
        """Forget row `index`'s last `count` positions in every layer (only where every layer can be cut)."""
        if count and not self.trimmable:
            raise ValueError("a row with recurrent states cannot be cut to a shorter prefix")
        for leaf in self.leaves:
            leaf.cut(index, count)

    def copy(self) -> BatchCaches:
        """The same rows in caches of their own: a pass on the copy leaves these as they were (arrays are shared until
        a pass rebinds them; only rows joining write in place)."""
        twin = copy.copy(self)
        twin.leaves = [copy.copy(leaf) for leaf in self.leaves]
        for leaf in twin.leaves:
            leaf.slots, leaf._lengths = list(leaf.slots), list(leaf._lengths)
            if isinstance(leaf, RowStatesCache):
                leaf.cache = list(leaf.cache)
            else:
                leaf._starts = list(leaf._starts)
        parts = iter(twin.leaves)
        twin.layers = [RowCacheList([next(parts) for _ in layer.caches]) if isinstance(layer, RowCacheList)
                       else next(parts) for layer in self.layers]
        return twin

    def append_rows(self, rows: Sequence[Sequence[LeafRow] | None], lengths: Sequence[int]) -> None:
        """Add rows, each given by its leaf rows (None: an empty row) and its length."""
        for k, leaf in enumerate(self.leaves):
            column = [None if r is None else r[k] for r in rows]
            if isinstance(leaf, RowSlotsCache):
                leaf.append_rows([_attention_row(c) for c in column], lengths)
            else:
                leaf.append_rows([_state_row(c) for c in column], lengths)


def leaf_row_arrays(rows: Sequence[LeafRow] | None) -> list[mx.array]:
    """The arrays a row's state holds (each leaf cache's row; None: an empty state), to evaluate them."""
    arrays: list[mx.array] = []
    for row in rows or ():
        arrays += [a for a in row.arrays if a is not None] if isinstance(row, RecurrentState) else list(row)
    return arrays


def _attention_row(row: LeafRow | None) -> LayerKV | None:
    if isinstance(row, RecurrentState):
        raise TypeError("a recurrent state cannot start a row of an attention layer")
    return row


def _state_row(row: LeafRow | None) -> RecurrentState | None:
    if row is not None and not isinstance(row, RecurrentState):
        raise TypeError("attention keys cannot start a row of a recurrent layer")
    return row


class CacheLayout:
    """How to build a model's `BatchCaches`: one maker per layer, from the caches mlx-lm makes for it."""

    def __init__(self, net: Any, name: str = "this model") -> None:
        template = make_prompt_cache(net)
        self.makers = [_leaf_factory(layer, name) for layer in template]
        self.uniform_feeds = False
        """Whether the model's rows are fed passes of one width (set by the load probe: `load_probe.py`)."""
        self.trimmable = self.new().trimmable

    def new(self, bounded: bool = False) -> BatchCaches:
        """Empty row caches for a batch; `bounded`: sliding-window layers forget positions older than their window
        (the running batch, whose rows are never cut: `RowSlotsCache`)."""
        caches = BatchCaches(self.makers, self.uniform_feeds)
        for leaf in caches.leaves:
            if isinstance(leaf, RowSlotsCache):
                leaf.bounded = leaf.window is not None and bounded
        return caches
