"""The key of an undeclared member, `"` aside: canonical spellings of the strings other than some printable-ASCII
names, as one minimal embedded DFA written out directly (`strings.string_not_in`'s usual case).

The same language as the name trie `strings._outside` lowers to (a trie node: leave it with any other character,
then any characters; or follow a child; or end where no name ends), without the IR, its NFA fragment and the walks
over them, which were about a sixth of a large open Kubernetes schema's compile (kb_233: 0.30 -> 0.25 s).
The table is the minimal DFA: the trie's nodes merged where the names below them are the same (as the NFA builder
merged the trie's equal sub-expressions), one rest state for a string past the trie, and the partial states of a
character beyond ASCII or an escape (`string_units.canonical_beyond_ascii`'s), shared by every trie node.  Its
moves are handed to the NFA builder as the trie's IR gives them (each child byte a byte set of its own, the other
printable bytes one set per node, the rest as the units' automaton groups them), so the subset construction sees
the same byte classes and builds a body DFA of the same language, nearly always the same table: where the trie's
IR made a node and the rest of a string share NFA states, its subset construction could merge two equivalent states
that this one keeps apart, or the other way (1 of 864 body DFAs of every 10th MaskBench file; their minimal tables
are equal (its test), and so are the masks, `benchmarks/complement_masks.py`).  The
smaller NFA also counts smaller where the outline choice sizes a grammar's bodies (`outline_size`): 3 of those
files, 18 of the 212 Kubernetes ones, are now built as the plain grammar (median 0.67 of their time, three 5-15%
slower, all under 0.14 s: `benchmarks/results/compile_paired_kube66_kubernetes.md`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.chains import EMBEDDED_FROM
from stdsl.compiler.automata.embedded_moves import dfa_edges, known_edges, known_minimal
from stdsl.compiler.automata.nfa import known_trim
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.json_schema.scalars.string_units import canonical_beyond_ascii

Ranges = tuple[tuple[int, int], ...]
Moves = list[tuple[Ranges, int]]

PLAIN = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F))
"""The printable ASCII bytes a JSON string holds raw (all but `"` and `\\`)."""
PLAIN_CHARACTERS = frozenset(chr(byte) for lo, hi in PLAIN for byte in range(lo, hi + 1))
_SINGLE = tuple(((byte, byte),) for byte in range(256))


def plain_names(names: tuple[str, ...]) -> bool:
    """Whether every character of `names` is a `PLAIN` byte (the usual key; the case `name_complement` builds)."""
    return PLAIN_CHARACTERS.issuperset("".join(names))


def name_complement(names: tuple[str, ...]) -> ir.Embedded | None:
    """The canonical spellings of strings other than `names` (sorted, distinct, `plain_names`), between the quotes,
    as a trim minimal embedded DFA with its moves known; None when it would have `EMBEDDED_FROM` states or more
    (the chain layout would then take it whole, which the trie's IR never met)."""
    children, final, parents, entered_by = _trie(names)
    merged, order = _merged(children, final) if names else ([0] * len(children), [0])
    count = len(order) if names else 0
    rest, (_, partial_moves, partial_table, partial_accepting, _, lead_row) = count, _units()
    total = count + 1 + len(partial_moves)
    if total >= EMBEDDED_FROM:
        return None
    lead_live, partial_live = _live()
    table = np.empty((total, 256), dtype=np.int32)
    table[:rest + 1] = lead_row + rest * lead_live
    table[rest + 1:] = partial_table + rest * partial_live
    accepting = np.zeros(total, dtype=bool)
    accepting[:rest + 1] = True
    accepting[rest + 1:] = partial_accepting
    if count:
        state = np.array(merged, dtype=np.int64)
        table[state[parents], entered_by] = state[1:]
        accepting[:count] = np.logical_not(np.array(final, dtype=bool)[order])
    labels = _unit_labels().copy()
    child_bytes = np.array(sorted(set(entered_by)), dtype=np.int64)
    labels[child_bytes] = -1 - child_bytes
    node = known_minimal(known_trim(ir.Embedded(table, accepting)), labels)
    return known_edges(node, lambda: _moves(children, merged, order[:count], total))


def _moves(children: list[dict[int, int]], merged: list[int], order: list[int], total: int
           ) -> tuple[list[Ranges], list[list[tuple[int, int]]]]:
    """`name_complement`'s moves as the trie's IR gives them (each child byte a byte set of its own, the other
    printable bytes one set per node, the rest as the units' automaton groups them), for the NFA builder: only a
    body that is not laid out by `pushdown.quoted_keys` reads them, so they are written on first read."""
    rest, (partial_sets, partial_moves, _, _, lead_moves, _) = len(order), _units()
    symbol_sets: list[Ranges] = [PLAIN]
    moves: list[list[tuple[int, int]]] = [[] for _ in range(total)]
    lead = [(len(symbol_sets) + index, target + rest) for index, (_, target) in enumerate(lead_moves)]
    symbol_sets += [ranges for ranges, _ in lead_moves]
    single: dict[int, int] = {}
    others: dict[tuple[int, ...], int] = {(): 0}
    for state, original in enumerate(order):
        out = children[original]
        bytes_out = tuple(sorted(out))
        reached = [merged[out[byte]] for byte in bytes_out]
        number = others.get(bytes_out)
        if number is None:
            ranges = _without(bytes_out)
            number = others[bytes_out] = len(symbol_sets) if ranges else -1
            if ranges:
                symbol_sets.append(ranges)
        for byte in bytes_out:
            if byte not in single:
                single[byte] = len(symbol_sets)
                symbol_sets.append(_SINGLE[byte])
        moves[state] = ([(number, rest)] if number >= 0 else []) + lead + [
            (single[byte], target) for byte, target in zip(bytes_out, reached)]
    moves[rest] = [(0, rest), *lead]
    partial_base = len(symbol_sets)
    symbol_sets += partial_sets
    for state, partial in enumerate(partial_moves, rest + 1):
        moves[state] = [(partial_base + index, target + rest) for index, target in partial]
    return symbol_sets, moves


def _trie(names: tuple[str, ...]) -> tuple[list[dict[int, int]], list[bool], list[int], list[int]]:
    """The names' bytes as a trie: each node's children by byte, whether a name ends there (node 0 the root), and
    per node past the root its parent and the byte that enters it (node i's at i - 1: its table entry).

    The names are sorted, so each one leaves the previous one's path where they part and only adds nodes past it
    (no lookups along the shared prefix), and every node's children come in byte order (`_merged` reads them so)."""
    children: list[dict[int, int]] = [{}]
    final = [False]
    parents: list[int] = []
    entered_by: list[int] = []
    path = [0]
    previous = b""
    for count, name in enumerate(names):
        if count & 4095 == 4095:
            check_deadline("building a name trie")
        data = name.encode()
        shared, limit = 0, min(len(data), len(previous))
        while shared < limit and data[shared] == previous[shared]:
            shared += 1
        del path[shared + 1:]
        state = path[shared]
        for byte in data[shared:]:
            child = children[state][byte] = len(children)
            children.append({})
            final.append(False)
            parents.append(state)
            entered_by.append(byte)
            path.append(child)
            state = child
        final[state] = True
        previous = data
    return children, final, parents, entered_by


def _merged(children: list[dict[int, int]], final: list[bool]) -> tuple[list[int], list[int]]:
    """The trie's nodes merged where the names below them are the same (children come after their parent, so one
    pass from the last node up sees every child first; a node's children are in byte order, `_trie`'s): each node's
    state, and per state one node it stands for, the root's state 0."""
    canonical: dict[tuple[bool, tuple[int, ...], tuple[int, ...]], int] = {}
    merged = [0] * len(children)
    first_node: dict[int, int] = {}
    number = merged.__getitem__
    for node in range(len(children) - 1, -1, -1):
        if node & 16383 == 0:
            check_deadline("merging a name trie")
        out = children[node]
        state = merged[node] = canonical.setdefault((final[node], tuple(out), tuple(map(number, out.values()))),
                                                    len(canonical))
        first_node[state] = node
    renumber = dict.fromkeys(merged, 0)
    for rank, state in enumerate(renumber):
        renumber[state] = rank
    return [renumber[state] for state in merged], [first_node[state] for state in renumber]


def _without(taken: tuple[int, ...]) -> Ranges:
    """`PLAIN` less the bytes `taken` (sorted), as ranges."""
    if not taken:
        return PLAIN
    out = []
    for lo, hi in PLAIN:
        for byte in taken:
            if lo <= byte <= hi:
                if lo < byte:
                    out.append((lo, byte - 1))
                lo = byte + 1
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


@lru_cache(maxsize=1)
def _units() -> tuple[list[Ranges], list[list[tuple[int, int]]], np.ndarray, np.ndarray, Moves, np.ndarray]:
    """The units' automaton (`canonical_beyond_ascii`: its start 0, its accepting state 1, nothing after it) laid
    out after a rest state at 0, which stands for both its start and its accepting state: the partial states' symbol
    sets, their moves (the set's place among them, target) and rows from 1 on, their accepting flags, and the
    start's moves (symbol ranges, target) and row with the `PLAIN` bytes added to the rest state, every target
    counted from the rest state (the units' state k > 0 is k - 1, so the accepting state is the rest state, and a
    table is renumbered by one subtraction)."""
    units = canonical_beyond_ascii()
    table = np.asarray(units.transitions)
    shifted = (table - (table > 0)).astype(np.int32, copy=False)
    lead_row = shifted[0].copy()
    for lo, hi in PLAIN:
        lead_row[lo:hi + 1] = 0
    symbol_sets, numbered = dfa_edges(table)
    moves = [[(symbol_sets[number], target) for number, target in out] for out in numbered]
    sets: dict[Ranges, int] = {}
    partial_moves = [[(sets.setdefault(ranges, len(sets)), target - 1) for ranges, target in out] for out in moves[2:]]
    lead_moves = [(ranges, target - 1) for ranges, target in moves[0]]
    assert all(target >= 2 for _, target in moves[0]), "no unit beyond printable ASCII is one byte"
    return (list(sets), partial_moves, shifted[2:], np.array(units.accepting, dtype=np.bool_)[2:], lead_moves,
            lead_row)


@lru_cache(maxsize=1)
def _live() -> tuple[np.ndarray, np.ndarray]:
    """Where `_units`' start row and partial rows move (1) or are dead (0): such a row plus `rest` times this is the
    row with its targets counted from `rest` and its dead entries still -1."""
    *_, partial_table, _, _, lead_row = _units()
    return (lead_row >= 0).astype(np.int32), (partial_table >= 0).astype(np.int32)


@lru_cache(maxsize=1)
def _unit_labels() -> np.ndarray:
    """A label per byte, equal for bytes that every name complement's rest and partial states and its trie states'
    moves beside their children (`PLAIN`, the units' lead and partial sets) take alike: the bit set of the sets a
    byte is in.  A complement's own child bytes are then each labelled apart (negative labels)."""
    partial_sets, _, _, _, lead_moves, _ = _units()
    sets = [PLAIN, *(ranges for ranges, _ in lead_moves), *partial_sets]
    assert len(sets) < 63, "a byte's sets fit one int64"
    labels = np.zeros(256, dtype=np.int64)
    for bit, ranges in enumerate(sets):
        for lo, hi in ranges:
            labels[lo:hi + 1] |= 1 << bit
    return labels
