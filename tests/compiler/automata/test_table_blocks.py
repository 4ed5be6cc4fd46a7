"""The blocked table builders give what the one numpy call they split gives, whatever the block size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from stdsl.compiler.automata import table_blocks
from stdsl.compiler.automata.minimization.minimize import renamed_rows
from stdsl.compiler.automata.table_blocks import (
    concatenated,
    converted,
    dead_table,
    equal_row_keys,
    in_row_blocks,
)

TABLES = st.tuples(st.integers(0, 40), st.integers(0, 6)).flatmap(
    lambda shape: arrays(np.int64, shape, elements=st.integers(-1, max(shape[0] - 1, 0))))


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few cells, so that small tables are split into many."""
    monkeypatch.setattr(table_blocks, "BLOCK_CELLS", 5)


@settings(max_examples=60, deadline=None)
@given(table=TABLES, data=st.data())
def test_blocked_renames_takes_and_conversions_match_numpy(table: np.ndarray, data: st.DataObject) -> None:
    rows = np.array(data.draw(st.lists(st.integers(0, max(len(table) - 1, 0)), max_size=len(table) and 30)),
                    dtype=np.int64)
    new_id = np.append(np.arange(len(table), dtype=np.int64)[::-1], -1)
    assert np.array_equal(renamed_rows(new_id, table, rows, "t"), new_id[table[rows]])
    columns = data.draw(st.lists(st.integers(0, max(table.shape[1] - 1, 0)), max_size=table.shape[1] and 9))
    taken = in_row_blocks(len(table), len(columns), table.dtype, lambda lo, hi: table[lo:hi, columns], "t")
    assert np.array_equal(taken, table[:, columns])
    narrow = converted(table, np.int32, "t")
    assert narrow.dtype == np.int32 and np.array_equal(narrow, table)
    assert converted(table, np.int64, "t") is table
    dead = dead_table(table.shape, np.int16, "t")
    assert dead.dtype == np.int16 and dead.shape == table.shape and (dead == -1).all()


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(arrays(np.int64, st.integers(0, 12)), min_size=1, max_size=5))
def test_blocked_concatenation_matches_numpy(parts: list[np.ndarray]) -> None:
    assert np.array_equal(concatenated(parts, "t"), np.concatenate(parts))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda width: st.lists(
    st.sampled_from([np.int32, np.int64]).flatmap(lambda dtype: arrays(dtype, st.tuples(st.integers(0, 9),
                                                                                         st.just(width)))),
    min_size=1, max_size=5)))
def test_blocked_concatenation_of_tables_matches_numpy(blocks: list[np.ndarray]) -> None:
    got = concatenated(blocks, "t")
    expected = np.concatenate(blocks)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


@settings(max_examples=100, deadline=None)
@given(rows=st.tuples(st.integers(0, 60), st.integers(1, 3)).flatmap(
    lambda shape: arrays(np.uint64, shape, elements=st.sampled_from([0, 1, 5, 2**63, 2**64 - 1]))))
def test_equal_row_keys_group_rows_as_unique_does(rows: np.ndarray) -> None:
    """Two rows get one key exactly when `np.unique(rows, axis=0)` gives them one."""
    keys = equal_row_keys(rows, "t")
    expected = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1) if len(rows) else np.zeros(0, int)
    assert len(keys) == len(rows)
    assert len(set(zip(keys.tolist(), expected.tolist()))) == len(set(keys.tolist())) == len(set(expected.tolist()))


@settings(max_examples=60, deadline=None)
@given(table=TABLES, dtype=st.sampled_from([np.int32, np.int64]), in_place=st.booleans(),
       cells=st.integers(1, 12))
def test_blocked_take_matches_numpy_in_place_or_not(table: np.ndarray, dtype: type[np.integer], in_place: bool,
                                                    cells: int) -> None:
    """`taken` a few cells a call numbers a table as one wrapped `np.take` does (a dead -1 reads the last entry),
    written over the indices themselves or into another array."""
    numbering = np.append(np.arange(len(table), dtype=dtype)[::-1] * 3, dtype(-1))
    indices = table.astype(dtype)
    expected = np.take(numbering, indices, mode="wrap")
    out = indices if in_place else np.empty_like(indices)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(table_blocks, "BLOCK_CELLS", cells)
        assert table_blocks.taken(numbering, indices, out, "t") is out
    assert np.array_equal(out, expected)
