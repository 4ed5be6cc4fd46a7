"""Measure, before serving, that a model's recurrent layers keep padding out of their states.

The batch engine right-pads rows fed spans of different lengths, and rows that wait feed nothing at all. mlx-lm's
hybrid models read `cache.lengths` to leave such positions out of their states, but not every architecture does
(some scan every position). Two tiny passes tell: a row fed one token beside a row fed three, and then a row
that feeds nothing, must hold the state it holds when fed alone. A model that fails is refused at load.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.errors import UnsupportedModelError
from stdsl.runtime.row_caches.layers import BatchCaches, CacheLayout
from stdsl.runtime.row_caches.recurrent import RecurrentState, RowStatesCache

RELATIVE_TOLERANCE = 1e-2
"""How far a padded row's state may stray from the same row fed alone, relative to the state's largest entry:
float16 and bfloat16 models differ in the last bits between batch shapes; padding that leaks differs by far more."""


def _pass(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]]) -> None:
    width = max(len(f) for f in feeds)
    caches.prepare([len(f) for f in feeds], width)
    inputs = mx.array([list(f) + [0] * (width - len(f)) for f in caches.physical(feeds)], dtype=mx.int32)
    out = net(inputs, cache=caches.layers)
    caches.commit()
    mx.eval(out, *caches.arrays())


def _states(caches: BatchCaches, index: int) -> list[np.ndarray]:
    return [np.asarray(a.astype(mx.float32)) for leaf in caches.row(index) if isinstance(leaf, RecurrentState)
            for a in leaf.arrays if a is not None]


def _written(caches: BatchCaches) -> bool:
    """Whether every recurrent layer holds a state after a pass (a model may keep its state elsewhere)."""
    return all(leaf.arrays() for leaf in caches.leaves if isinstance(leaf, RowStatesCache))


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    return len(got) == len(want) and all(
        g.shape == w.shape and float(np.abs(g - w).max(initial=0.0)) <= RELATIVE_TOLERANCE * (
            float(np.abs(w).max(initial=0.0)) + 1e-6) for g, w in zip(got, want))


def check_padding(net: Any, layout: CacheLayout, name: str = "this model") -> None:
    """Refuse (UnsupportedModelError) a model whose recurrent states take in padding or change for a waiting row."""
    alone = layout.new()
    alone.append_rows([None], [0])
    _pass(net, alone, [[1]])
    if not _written(alone):
        raise UnsupportedModelError(f"{name}'s recurrent layers keep no state in the cache the engine gives them "
                                    f"({type(net).__module__}); stdsl's batch engine does not serve it")
    batch = layout.new()
    batch.append_rows([None, None], [0, 0])
    _pass(net, batch, [[1, 2, 3], [1]])
    padded = _same(_states(batch, 1), _states(alone, 0))
    before = _states(batch, 1)
    _pass(net, batch, [[4], []])
    waiting = _same(_states(batch, 1), before)
    if not (padded and waiting):
        what = "take in the padding of a shorter row" if not padded else "change for a row that feeds nothing"
        raise UnsupportedModelError(
            f"{name}'s recurrent layers {what} ({type(net).__module__}), so rows of different lengths cannot share "
            "a pass exactly; stdsl's batch engine does not serve it")


_LAYOUTS: dict[int, CacheLayout] = {}


def cache_layout(net: Any, name: str = "this model") -> CacheLayout:
    """How the batch engine caches `net`'s layers (measured once per net): a model with a layer kind it cannot
    batch, or with recurrent layers that let padding in, is refused with UnsupportedModelError naming why."""
    key = id(net)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = CacheLayout(net, name)
        if not layout.trimmable:
            check_padding(net, layout, name)
        _LAYOUTS[key] = layout
        weakref.finalize(net, _LAYOUTS.pop, key, None)
    return layout
