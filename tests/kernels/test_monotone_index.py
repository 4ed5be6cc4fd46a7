"""MonotoneIndex (16-bit low parts plus run starts) gathers and searches as the full index array does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.errors import StdslError
from stdsl.kernels.monotone_index import MonotoneIndex


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300_000), max_size=60), st.lists(st.integers(0, 320_000), max_size=30))
def test_monotone_index_equals_the_full_array(values: list[int], keys: list[int]) -> None:
    full = np.sort(np.asarray(values, dtype=np.int64))
    index = MonotoneIndex.of(full)
    assert index.values().tolist() == full.tolist() and index.size == full.shape[0]
    source = np.arange(int(full.max()) + 1 if full.size else 1, dtype=np.int64) * 7 - 3
    assert np.array_equal(index.take(source), source[full])
    sorted_keys = np.sort(np.asarray(keys, dtype=np.int64))
    first, count = index.ranges(sorted_keys)
    left = np.searchsorted(full, sorted_keys, side="left")
    assert np.array_equal(first, left)
    assert np.array_equal(count, np.searchsorted(full, sorted_keys, side="right") - left)
    for key in sorted_keys.tolist():
        assert index.ranges(np.asarray([key, key], dtype=np.int64))[0].tolist() == [int(np.searchsorted(full, key))] * 2
    assert index.nbytes == 2 * full.shape[0] + index.starts.nbytes


def test_monotone_index_refuses_unsorted_or_negative_values() -> None:
    with pytest.raises(StdslError, match="non-decreasing"):
        MonotoneIndex.of(np.asarray([3, 1]))
    with pytest.raises(StdslError, match="non-negative"):
        MonotoneIndex.of(np.asarray([-1, 1]))
