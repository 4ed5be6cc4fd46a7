"""The symbol classes a subset construction steps by: the coarsest partition of the symbols that no byte set splits,
checked against a symbol-by-symbol oracle, with sets of overlapping, touching and repeated ranges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata import symbol_classes as symbol_classes_module
from stdsl.compiler.automata.symbol_classes import symbol_classes

ALPHABET = 300
symbol_ranges = st.tuples(st.integers(0, ALPHABET - 1), st.integers(0, 40)).map(
    lambda t: (t[0], min(t[0] + t[1], ALPHABET - 1)))
single_symbols = st.integers(0, ALPHABET - 1).map(lambda b: ((b, b),))
byte_set_lists = st.lists(st.one_of(single_symbols, st.lists(symbol_ranges, max_size=4).map(tuple)),
                          min_size=1, max_size=80)


def _check_partition(sets: list[tuple[tuple[int, int], ...]]) -> tuple[list[int], list[list[int]], list[int]]:
    """The partition of `sets`, asserted to be the coarsest one no set splits, numbered by smallest member, with
    each set's classes and mask exactly those of its symbols; returned as plain lists."""
    symbol_class, set_classes, set_masks = symbol_classes(sets, alphabet=ALPHABET)
    assert symbol_class.shape == (ALPHABET,)
    signature = [tuple(any(lo <= b <= hi for lo, hi in s) for s in sets) for b in range(ALPHABET)]
    by_signature: dict[tuple[bool, ...], set[int]] = {}
    for symbol, key in enumerate(signature):
        by_signature.setdefault(key, set()).add(int(symbol_class[symbol]))
    assert all(len(found) == 1 for found in by_signature.values())
    assert len(by_signature) == int(symbol_class.max()) + 1
    first_symbols = [int(np.flatnonzero(symbol_class == c)[0]) for c in range(int(symbol_class.max()) + 1)]
    assert first_symbols == sorted(first_symbols)
    for ranges, classes, mask in zip(sets, set_classes, set_masks, strict=True):
        members = {int(symbol_class[b]) for lo, hi in ranges for b in range(lo, hi + 1)}
        assert classes == sorted(members)
        assert mask == sum(1 << c for c in members)
    return symbol_class.tolist(), set_classes, set_masks


@settings(max_examples=150, deadline=None)
@given(byte_set_lists)
def test_classes_are_the_coarsest_partition_no_set_splits(sets: list[tuple[tuple[int, int], ...]]) -> None:
    _check_partition(sets)


@settings(max_examples=80, deadline=None)
@given(byte_set_lists)
def test_memberships_read_bit_by_bit_and_unpacked_agree(sets: list[tuple[tuple[int, int], ...]]) -> None:
    """Both ways of reading the (class, set) memberships from the runs' signatures give the same lists and masks."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(symbol_classes_module, "MANY_SETS", 10**9)
        bits = _check_partition(sets)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(symbol_classes_module, "MANY_SETS", 0)
        unpacked = _check_partition(sets)
    assert bits == unpacked


def test_no_sets_is_one_class_and_a_set_to_the_last_symbol_has_no_run_past_it() -> None:
    symbol_class, set_classes, set_masks = symbol_classes([], alphabet=8)
    assert symbol_class.tolist() == [0] * 8 and set_classes == [] and set_masks == []
    symbol_class, set_classes, set_masks = symbol_classes([((4, 7),), ((0, 7),)], alphabet=8)
    assert symbol_class.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert set_classes == [[1], [0, 1]] and set_masks == [0b10, 0b11]


def test_ranges_past_the_alphabet_are_cut_at_its_end() -> None:
    symbol_class, set_classes, set_masks = symbol_classes([((6, 20),), ((9, 12),)], alphabet=8)
    assert symbol_class.tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    assert set_classes == [[1], []] and set_masks == [0b10, 0]
