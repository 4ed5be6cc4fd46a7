"""Measure, before serving, that a model decoded on the batch engine's row caches gives its own logits.

The engine right-pads rows fed spans of different lengths, lets rows that wait feed nothing, and hands the model
row caches instead of mlx-lm's. mlx-lm's hybrid models read `cache.lengths` to keep such padding out of their
recurrent states, but not every architecture does (some scan every position), and a model may expect more of its
caches than the protocol (a method, a state kept elsewhere). Three tiny passes tell: two rows fed spans of
different lengths, then one waiting while the other feeds, must give at every fed row the logits mlx-lm's own
one-sequence cache gives. A model whose recurrent layers fail so (they scan a shorter row's padding into its
state) is measured again fed uniform passes (`uniform_feeds.py`: one model pass per distinct feed length) and served
so if that is exact. A model that fails is refused at load with what went wrong.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.errors import UnsupportedModelError
from stdsl.runtime.platform.mlx_lm_models import cache as mlx_cache
from stdsl.runtime.platform.mlx_lm_models import make_prompt_cache
from stdsl.runtime.row_caches.layers import BatchCaches, CacheLayout
from stdsl.runtime.row_caches.recurrent import RecurrentState, RowStatesCache
from stdsl.runtime.row_caches.uniform_feeds import run_uniform

PROBE_FEEDS = ([[1, 2, 3], [1]], [[4], []], [[5], [2, 3]])
"""Each pass's feeds: rows of different lengths, a row that waits, and the waiting row fed again."""

RELATIVE_TOLERANCE = 2e-2
"""How far a batched row's logits may stray from the same row decoded alone, relative to their largest magnitude:
float16 and bfloat16 models differ in the last bits between batch shapes; padding that leaks differs by far more."""


def _batched(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]]) -> np.ndarray:
    """Float32 logits at each row's last fed position after one ragged pass (passes of one width where the caches
    ask for them)."""
    if caches.uniform_feeds:
        return np.asarray(run_uniform(lambda part, _: _one_pass(net, caches, part), feeds))
    return np.asarray(_one_pass(net, caches, feeds))


def _one_pass(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]]) -> mx.array:
    width = max(len(f) for f in feeds)
    caches.prepare([len(f) for f in feeds], width)
    inputs = mx.array([list(f) + [0] * (width - len(f)) for f in caches.physical(feeds)], dtype=mx.int32)
    out = net(inputs, cache=caches.layers)
    caches.commit()
    last = mx.array([max(len(f) - 1, 0) for f in feeds], dtype=mx.int32)[:, None, None]
    return mx.take_along_axis(out, last, axis=1)[:, 0, :].astype(mx.float32)


def _written(caches: BatchCaches) -> bool:
    """Whether every recurrent layer holds a state after a pass (a model may keep its state elsewhere)."""
    return all(leaf.arrays() for leaf in caches.leaves if isinstance(leaf, RowStatesCache))


def _leaves(caches: list[Any]) -> list[Any]:
    """mlx-lm's caches of one sequence, flat in the order of `BatchCaches.leaves` (a `CacheList` gives its parts)."""
    return [part for layer in caches for part in (layer.caches if type(layer) is mlx_cache.CacheList else [layer])]


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    """Within RELATIVE_TOLERANCE of the largest finite logit; equal infinities (a head that sets ids it never emits
    to -inf, as Phi-3-small's does) agree, any other infinity or NaN does not."""
    if got.shape != want.shape:
        return False
    with np.errstate(invalid="ignore"):
        difference = np.abs(np.where(got == want, 0.0, got - want))
    scale = float(np.abs(want[np.isfinite(want)]).max(initial=0.0))
    return bool(difference.max(initial=0.0) <= RELATIVE_TOLERANCE * (scale + 1e-6))


def _state_difference(batch: BatchCaches, row: int, alone: list[Any], number: int) -> str | None:
    """How the row's recurrent states differ from those mlx-lm's own caches hold after the same tokens (None: they
    agree) on probe pass `number`."""
    for leaf, theirs in zip(batch.row(row), _leaves(alone)):
        if not isinstance(leaf, RecurrentState):
            continue
        for mine, reference in zip(leaf.arrays, theirs.cache):
            if (mine is None) != (reference is None):
                return PADDING_PROBLEMS[min(number, 1)]
            if mine is not None and mine.shape != reference.shape:
                return GROWING_STATE
            if mine is not None and not _close(np.asarray(mine.astype(mx.float32)),
                                               np.asarray(reference.astype(mx.float32))):
                return PADDING_PROBLEMS[min(number, 1)]
    return None


PADDING_PROBLEMS = ("its recurrent layers take in the padding of a shorter row",
                    "a row's recurrent state changes while it waits")
"""What a model that scans padding into its recurrent states fails with (then uniform passes are measured)."""
GROWING_STATE = ("its recurrent state's shape follows the row's length (a history of its last tokens, shorter while "
                 "the row is short)")


def _mismatch(net: Any, layout: CacheLayout) -> str | None:
    """What differs between the batch engine's passes and mlx-lm's one-sequence decoding (None: nothing)."""
    rows = len(PROBE_FEEDS[0])
    batch = layout.new()
    batch.append_rows([None] * rows, [0] * rows)
    alone = [make_prompt_cache(net) for _ in range(rows)]
    for number, feeds in enumerate(PROBE_FEEDS):
        got = _batched(net, batch, feeds)
        if number == 0 and not _written(batch):
            return "its recurrent layers keep no state in the cache the engine gives them"
        for row, feed in enumerate(feeds):
            if not feed:
                continue
            want = np.asarray(net(mx.array([feed]), cache=alone[row])[0, -1].astype(mx.float32))
            difference = _state_difference(batch, row, alone[row], number)
            if difference is not None:
                return difference
            if not _close(got[row], want):
                return "its logits on the engine's row caches differ from its own caches'"
    return None


def _problem(net: Any, layout: CacheLayout) -> str | None:
    try:
        return _mismatch(net, layout)
    except Exception as error:  # the model asked the row caches for something they do not do
        return f"it does not run on the engine's row caches ({type(error).__name__}: {error})"


def check_exact(net: Any, layout: CacheLayout, name: str = "this model") -> None:
    """Refuse (UnsupportedModelError, naming why) a model the batch engine cannot decode exactly; a model exact only
    when fed uniform passes is marked so (`layout.uniform_feeds`)."""
    problem = _problem(net, layout)
    if problem is not None and problem in PADDING_PROBLEMS:
        layout.uniform_feeds = True
        uniform = _problem(net, layout)
        if uniform is None:
            return
        layout.uniform_feeds = False
        problem = (f"{problem}, even fed passes of one width" if uniform == problem else
                   f"{problem}, and fed passes of one width {uniform}")
    if problem is not None:
        raise UnsupportedModelError(f"{name} cannot be batched exactly ({type(net).__module__}): {problem}, so rows "
                                    "of different lengths cannot share a pass; stdsl's batch engine does not serve it")


_LAYOUTS: dict[int, CacheLayout] = {}


def cache_layout(net: Any, name: str = "this model") -> CacheLayout:
    """How the batch engine caches `net`'s layers, measured exact once per net: a model with a layer kind it cannot
    batch, or whose logits on the row caches differ from its own caches', is refused with UnsupportedModelError."""
    key = id(net)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = CacheLayout(net, name)
        if layout.makers:  # a net that caches no layer (a test's stand-in) has no row cache to measure
            check_exact(net, layout, name)
        try:
            weakref.finalize(net, _LAYOUTS.pop, key, None)
        except TypeError:  # an object without weak references is measured again at each use
            return layout
        _LAYOUTS[key] = layout
    return layout
