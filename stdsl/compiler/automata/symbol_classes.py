"""The coarsest classes of symbols that no byte set of an NFA splits: what the subset construction steps by.

A symbol's class is the set of byte sets holding it.  The symbols are swept once in order: a set's membership flips
at each end of its ranges, so a run of symbols between two ends has the previous run's sets with the flipped ones
toggled, written as the bits of an int (the run's signature).  The Python work is one step per range end, per run
and per (class, set) membership, where a table of every set by every symbol cost numpy a pass over each (0.3 ms a
call at about 60 sets over 450 symbols; such calls were 5-8% of a Kubernetes schema's compile).
"""

from __future__ import annotations

import numpy as np

MANY_SETS = 56
"""Past this many byte sets the (class, set) memberships are read from the signatures with numpy (a bit matrix
unpacked and transposed) rather than bit by bit: over the calls of a Kubernetes schema and every 40th MaskBench file
(`benchmarks/symbol_classes_speed.py`), 64 to 71 sets took 0.17 ms a call that way against 0.22 ms bit by bit, 48 to
55 sets 0.13 against 0.12, and 24 to 31 sets 0.068 against 0.045 (numpy's fixed cost)."""


def symbol_classes(byte_sets: list[tuple[tuple[int, int], ...]], alphabet: int = 256
                   ) -> tuple[np.ndarray, list[list[int]], list[int]]:
    """Partition the symbols 0..alphabet-1 (bytes, then any call symbols) into the coarsest classes no set splits
    (a range past the alphabet is cut at its end).

    Returns the class of each symbol (classes numbered by their smallest member), and for each byte set the sorted
    list of the classes it contains and the same classes as the bits of an int (its mask)."""
    if not byte_sets:
        return np.zeros(alphabet, dtype=np.int64), [], []
    flips: dict[int, int] = {0: 0}
    get = flips.get
    bit = 1
    for ranges in byte_sets:
        for lo, hi in (ranges if len(ranges) <= 1 else _merged(ranges)):
            flips[lo] = get(lo, 0) ^ bit
            flips[hi + 1] = get(hi + 1, 0) ^ bit
        bit <<= 1
    starts = sorted(start for start in flips if start < alphabet)
    class_ids: dict[int, int] = {}
    run_classes = []
    signature = 0
    for start in starts:
        signature ^= flips[start]
        found = class_ids.get(signature)
        if found is None:
            found = class_ids[signature] = len(class_ids)
        run_classes.append(found)
    starts.append(alphabet)
    sizes = [stop - start for start, stop in zip(starts, starts[1:])]
    symbol_class = np.repeat(np.array(run_classes, dtype=np.int64), sizes)
    if len(byte_sets) > MANY_SETS:
        return (symbol_class, *_memberships_unpacked(list(class_ids), len(byte_sets)))
    set_classes: list[list[int]] = [[] for _ in byte_sets]
    set_masks = [0] * len(byte_sets)
    for number, signature in enumerate(class_ids):
        mark = 1 << number
        while signature:
            low = signature & -signature
            index = low.bit_length() - 1
            set_classes[index].append(number)
            set_masks[index] |= mark
            signature ^= low
    return symbol_class, set_classes, set_masks


def _merged(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """A set's ranges sorted, overlapping or touching ones joined (a flip at each end then marks the set's edges)."""
    ordered = sorted(ranges)
    merged = [ordered[0]]
    for lo, hi in ordered[1:]:
        last_lo, last_hi = merged[-1]
        if lo <= last_hi + 1:
            merged[-1] = (last_lo, max(hi, last_hi))
        else:
            merged.append((lo, hi))
    return merged


def _memberships_unpacked(signatures: list[int], count: int) -> tuple[list[list[int]], list[int]]:
    """Each of `count` sets' classes (sorted) and mask from the classes' signatures in class order, through a bit
    matrix: the signatures' bytes unpacked to (class, set), transposed, and packed again per set."""
    width = (count + 7) // 8
    packed = np.frombuffer(b"".join([signature.to_bytes(width, "little") for signature in signatures]), np.uint8)
    member = np.unpackbits(packed.reshape(len(signatures), width), axis=1, count=count, bitorder="little").T
    sets, classes = np.nonzero(member)
    flat = classes.tolist()
    bounds = np.searchsorted(sets, np.arange(count + 1)).tolist()
    rows = np.packbits(member, axis=1, bitorder="little")
    step = rows.shape[1]
    data = rows.tobytes()
    return ([flat[lo:hi] for lo, hi in zip(bounds, bounds[1:])],
            [int.from_bytes(data[i * step:(i + 1) * step], "little") for i in range(count)])
