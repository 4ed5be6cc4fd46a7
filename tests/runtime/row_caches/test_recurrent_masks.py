"""The padding mask a recurrent layer's row states give the model: the real positions of each slot, or none at all
when no slot is padded (the model's unmasked path gives the same state, without a select per position)."""

from __future__ import annotations

import numpy as np

from stdsl.runtime.row_caches.recurrent import RowStatesCache


def _cache(rows: int) -> RowStatesCache:
    cache = RowStatesCache(2)
    cache.append_rows([None] * rows, [0] * rows)
    return cache


def test_ragged_feeds_mask_each_slots_padding_and_waiting_rows() -> None:
    cache = _cache(3)
    cache.prepare([3, 1, 0], 3)
    mask = np.asarray(cache.make_mask(3))
    assert mask.tolist() == [[True, True, True], [True, False, False], [False, False, False]]


def test_feeds_that_fill_the_width_need_no_mask() -> None:
    cache = _cache(2)
    cache.prepare([4, 4], 4)
    assert cache.make_mask(4) is None and cache.lengths is not None
    cache.commit()
    assert cache.make_mask(1) is None
