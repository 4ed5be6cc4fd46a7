"""The calls of many tools of a JSON-arguments format built in one pass: each call is a literal head, the tool's
arguments kept free of the format's end literals (the guard), and a literal tail.

Built one tool at a time, a call costs a product with the guard, a trim and a layout, each a few dozen small numpy
operations over a table of a hundred-odd states: a cold list of 128 tools spent most of that time in per-operation
overhead.  Here every new tool's arguments are stacked into one table over classes that refine them all, the guard's
product runs once beside its start over the stack (`ops.intersect_beside_start`'s search: every state paired with the
guard's start at once, the pairs of a begun literal searched), heads and tails are chained on, one trim drops what no
call start reaches or no call end is reached from, and the stack is cut back into one DFA per tool.  Each equals the
per-tool build (`concatenation` of the head, `intersection` of the arguments with the guard, and the tail) in
language: trim, not minimized, like that layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.ops import joint_classes, product_beside_start
from stdsl.compiler.automata.state_graph import (
    csr_gather,
    distinct_values,
    predecessor_lists,
    reachable,
    successor_lists,
)
from stdsl.compiler.deadline import check_deadline

QUEUED_UP_TO = 4096
"""A stack of at most this many states (a few new calls: a list with one tool changed) is trimmed by a search that
visits its states one by one, which there costs less than a numpy step per level of the deepest call."""

CallParts = tuple[bytes, Automaton, bytes]
"""A call's literal head, its arguments' DFA (before the guard) and its literal tail."""


def _layable(parts: CallParts) -> bool:
    """Whether the call lays out with no subset construction: a head and a tail, arguments that accept no empty
    text and stop where they accept (an accepting state has no move, so the tail's first byte is unambiguous)."""
    head, arguments, tail = parts
    return bool(head) and bool(tail) and not bool(arguments.accepting[0]) and not bool(
        (arguments.live_count[arguments.accepting] > 0).any())


def guarded_calls(calls: Sequence[CallParts], guard: Automaton) -> list[Automaton | None]:
    """Each call's DFA: its head, then its arguments' texts that `guard` accepts, then its tail; None for a call
    that does not lay out (see `_layable`) or whose guarded arguments are empty (the caller builds those one by
    one, which refuses an empty one with its own error)."""
    chosen = [index for index, parts in enumerate(calls) if _layable(parts)]
    built: list[Automaton | None] = [None] * len(calls)
    if not chosen:
        return built
    heads = [calls[index][0] for index in chosen]
    tails = [calls[index][2] for index in chosen]
    arguments = [calls[index][1] for index in chosen]
    maps = {automaton.byte_class.tobytes(): automaton.byte_class for automaton in (*arguments, guard)}
    joint, first = joint_classes(list(maps.values()), {byte for text in (*heads, *tails) for byte in text})
    product, accepting, owner, width = _product(arguments, guard, first)
    table, final, starts, owner = _chained(product, accepting, owner, heads, tails, joint, width, arguments)
    if len(table) <= QUEUED_UP_TO:
        keep = reachable(*successor_lists(table), starts) & reachable(*predecessor_lists(table), final)
    else:
        keep = _reached_forward(table, starts) & _reached_backward(table, final)
    ends = np.zeros(len(table), dtype=bool)
    ends[final] = True
    for position, automaton in enumerate(_cut(table, ends, owner, keep, starts, joint)):
        built[chosen[position]] = automaton
    return built


def _product(arguments: list[Automaton], guard: Automaton, first: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The guard's product beside its start over the stacked arguments: (table over the joint classes, accepting,
    each pair's call, the guard's width); pair (q, start) is state q of the stack."""
    tables = [automaton.class_transitions[:, automaton.byte_class[first]] for automaton in arguments]
    sizes = np.array([len(table) for table in tables], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    owner = np.repeat(np.arange(len(tables), dtype=np.int64), sizes)
    stacked = np.concatenate(tables, dtype=np.int32)
    dead = stacked < 0
    stacked += offsets[owner].astype(np.int32)[:, None]
    stacked[dead] = -1
    del dead
    stacked_accepting = np.concatenate([automaton.accepting for automaton in arguments])
    guard_table = guard.class_transitions[:, guard.byte_class[first]].astype(np.int32)
    table, pairs, width = product_beside_start(stacked, guard_table, "guarded calls")
    accepting = stacked_accepting[pairs // width] & guard.accepting[pairs % width]
    return table, accepting, owner[pairs // width], width


def _chained(product: np.ndarray, accepting: np.ndarray, owner: np.ndarray, heads: list[bytes], tails: list[bytes],
             joint: np.ndarray, width: int, arguments: list[Automaton]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The product with each call's head chained before its arguments' start and its tail after each accepting pair:
    (table, the calls' end states, their start states, each state's call)."""
    size = len(product)
    head_sizes = np.array([len(head) for head in heads], dtype=np.int64)
    tail_sizes = np.array([len(tail) for tail in tails], dtype=np.int64)
    head_base = size + np.concatenate([[0], np.cumsum(head_sizes)[:-1]])
    tail_base = size + int(head_sizes.sum()) + np.concatenate([[0], np.cumsum(tail_sizes)[:-1]])
    total = size + int(head_sizes.sum() + tail_sizes.sum())
    table = np.full((total, product.shape[1]), -1, dtype=np.int32)
    table[:size] = product
    argument_starts = np.concatenate([[0], np.cumsum([automaton.num_states for automaton in arguments])[:-1]])
    head_bytes = np.frombuffer(b"".join(heads), dtype=np.uint8)
    head_states = np.arange(size, size + len(head_bytes))
    following = head_states + 1
    last = head_base + head_sizes - 1
    following[last - size] = argument_starts
    table[head_states, joint[head_bytes]] = following
    tail_bytes = np.frombuffer(b"".join(tails), dtype=np.uint8)
    tail_states = np.arange(tail_base[0], tail_base[0] + len(tail_bytes))
    tail_first = np.zeros(len(tail_bytes), dtype=bool)
    tail_first[tail_base - tail_base[0]] = True
    table[tail_states[~tail_first] - 1, joint[tail_bytes[~tail_first]]] = tail_states[~tail_first]
    ends = np.flatnonzero(accepting)
    table[ends, joint[tail_bytes[tail_base[owner[ends]] - tail_base[0]]]] = tail_base[owner[ends]]
    calls = np.arange(len(heads), dtype=np.int64)
    state_owner = np.concatenate([owner, np.repeat(calls, head_sizes), np.repeat(calls, tail_sizes)])
    return table, tail_base + tail_sizes - 1, head_base, state_owner


def _cut(table: np.ndarray, final: np.ndarray, owner: np.ndarray, keep: np.ndarray, starts: np.ndarray,
         joint: np.ndarray) -> list[Automaton | None]:
    """The kept states of each call as its own DFA, its head's first state numbered 0 (None where that is gone).  Each
    call's rows are gathered on their own: all of them at once were two copies of a 400-tool reply's 20 MB table, fresh
    pages on every first build."""
    states = np.flatnonzero(keep)
    not_start = np.ones(len(table), dtype=np.int64)
    not_start[starts] = 0
    order = states[np.lexsort((states, not_start[states], owner[states]))]
    groups = np.searchsorted(owner[order], np.arange(len(starts) + 1))
    local = np.full(len(table) + 1, -1, dtype=np.int32)
    local[order] = np.arange(len(order)) - groups[owner[order]]
    cut: list[Automaton | None] = []
    for call, start in enumerate(starts.tolist()):
        low, high = int(groups[call]), int(groups[call + 1])
        if not keep[start]:
            cut.append(None)
            continue
        cut.append(Automaton.from_classes(local[table[order[low:high]]], final[order[low:high]], joint))
    return cut


def _reached_forward(table: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """The states some source reaches, one level of every call at once per numpy step (the calls are searched side
    by side, so the steps are the deepest call's, not the sum: a queue would visit the states one by one)."""
    seen = np.zeros(len(table), dtype=bool)
    seen[sources] = True
    frontier = sources
    while len(frontier):
        check_deadline("guarded calls")
        following = table[frontier].reshape(-1)
        following = following[following >= 0]
        frontier = distinct_values(following[~seen[following]])
        seen[frontier] = True
    return seen


def _reached_backward(table: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    """The states that reach some sink, a level per numpy step as in `_reached_forward`."""
    indptr, indices = predecessor_lists(table)
    seen = np.zeros(len(table), dtype=bool)
    seen[sinks] = True
    frontier = sinks
    while len(frontier):
        check_deadline("guarded calls")
        before = csr_gather(indptr, indices, frontier)
        frontier = distinct_values(before[~seen[before]])
        seen[frontier] = True
    return seen
