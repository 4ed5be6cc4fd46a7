"""A body DFA whose quoted keys and strings are laid out with numpy, not met one by one in the subset construction.

An open object's body reads, after `{` or `,`, one of the declared keys still allowed (each a quoted literal) or an
undeclared one (a quote, the embedded DFA of the names outside the declared ones, a quote).  The subset construction
meets every (place in the member order) x (node of the keys' trie) pair as a state of its own, a few microseconds of
Python each: about 12,000 of a large Kubernetes schema's 31,000 body states.  Here every quoted literal of plain
bytes followed by a colon (a key), every quoted embedded DFA, and every free-form string value (a quote, an
expression, a quote: its minimal DFA, kept on the expression) becomes one placeholder symbol; the much smaller
skeleton is determinized as before (kb_233: 2,753 states over 95 bodies), and each skeleton state that moves on
placeholders gets the trie of its keys, with a copy of the embedded DFA per state it returns to wherever the string
has left the trie, built for all such states of the body at once.

The result accepts the same language as the subset construction over the body: a placeholder's text is a quoted
string whose embedded DFA never reads a quote where it may end, so at one state the texts form a prefix code; a
state that also moves on the quote byte itself, two embedded DFAs at one state, or a literal key that an embedded
DFA beside it also accepts (or reads on into a quote), sends the body back to the subset construction (`None`).  The
table is trimmed, not minimized (as the subset construction's), and its trie states are shared where what they read
from there on is the same, so that it has about as many states (Kubernetes bodies 1.4% more, every 10th MaskBench
file's 0.5%); its minimal DFA is the subset construction's (`tests/compiler/pushdown/test_quoted_keys.py`).
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton, determinized
from stdsl.compiler.automata.embedded_moves import known_minimal, minimal_labels
from stdsl.compiler.automata.minimization.minimize import trim_in_bfs_order
from stdsl.compiler.automata.nfa import estimated_states
from stdsl.compiler.automata.state_graph import distinct_values, reachable, successor_lists
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.literal_keys import (
    KEYLESS,
    QUOTE,
    QUOTE_SET,
    Key,
    literal_keys,
    quoted_key,
    sequence_parts,
)
from stdsl.errors import EmptyLanguageError, StateBudgetError

QUOTED_TEXT = "_quoted_text"
"""Keeps (in a node's `__dict__`) a quoted text's embedded DFA, or None where it has none (`quoted_text`)."""
MOVED_INTO_START = "_moved_into_start"
"""Keeps (in a node's `__dict__`) whether an embedded DFA moves back to its start (`_moved_into_start`)."""
SPREAD = 0x9E3779B97F4A7C15 - (1 << 64)
"""Spreads the weights of `_shared`'s sums: odd multiples of 2^64 / golden ratio, summed in wrapping int64 (numpy's
own loop: a float product's first call in a process starts BLAS, 30 ms)."""
AMBIGUOUS = b"\x00ambiguous"
"""Set in a body's keys by `_skeleton` where an alternation holds two quoted strings other than literal keys (a
value that is one of two string types or an enum beside a string): some state would then read a quote or two
embedded DFAs, and the layout would give up only after determinizing the skeleton (o51165: 40 ms).  No key has
this text (a key's bytes hold no NUL)."""
KEYED_FROM = 8
"""A body with fewer literal keys is left to the subset construction: its keys' states are few, and the layout's
fixed cost (a skeleton, a second determinization, its texts' DFAs, some fifty numpy calls) outweighs them.  Over
every 5th Kubernetes file, forked, summed CPU: 3.58 / 3.52 / 3.60 / 3.66 s from 0 / 3 / 5 / 8 keys against 4.10 s
all by the subset construction; but from 3 keys, small schemas' bodies (2-12 ms compiles: MaskBench o31276, JME_41,
o39500) took 1.3-2x their subset construction's time warm, and from 8 as long as it."""
QUOTED_TEXT_NFA = 512
"""A quoted text whose NFA would have more states (`nfa.estimated_states`) is left to the subset construction."""
QUOTED_TEXT_STATES = 256
"""A quoted text's DFA of more states is left to the subset construction."""


def keyed_body_dfa(body: ir.Node, max_states: int, alphabet: int, call_base: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`body`'s trim DFA in `_body_dfa`'s form (its table over classes, each of the `alphabet` symbols' class, its
    accepting mask) with its quoted keys laid out as tries, or None where the body has no such key or its keys do
    not form a prefix code at some state (the caller runs the subset construction)."""
    if len(literal_keys(body)) < KEYED_FROM:
        return None
    keys: dict[Key, int] = {}
    skeleton = _skeleton(body, keys, alphabet, {})
    if keys.pop(AMBIGUOUS, None) is not None:
        return None
    if not all(may_be_quoted_text(key) for key in keys if not isinstance(key, (bytes, ir.Embedded))):
        return None
    texts = [quoted_text(key) if not isinstance(key, (bytes, ir.Embedded)) else key for key in keys]
    if any(text is None for text in texts):
        return None
    dfa = determinized(skeleton, max_states, alphabet + len(keys))
    table = np.asarray(dfa.table)
    key_class = np.asarray(dfa.byte_class)[alphabet:alphabet + len(keys)]
    if len(distinct_values(key_class)) != len(keys):
        return None
    moves = table[:, key_class]
    rows = np.flatnonzero((moves >= 0).any(axis=1))
    if (table[rows, dfa.byte_class[QUOTE]] >= 0).any():
        return None
    check_deadline("laying out quoted keys")
    return _laid_out(table, np.asarray(dfa.accepting, dtype=bool), np.asarray(dfa.byte_class[:alphabet]),
                     texts, rows, moves[rows], max_states, call_base, dfa.all_live)  # type: ignore[arg-type]


def _skeleton(node: ir.Node, keys: dict[Key, int], alphabet: int, memo: dict[int, ir.Node]) -> ir.Node:
    """`node` with each quoted key (`quoted_key`) inside a sequence replaced by a placeholder symbol (`alphabet` + its
    number in `keys`); a part without keys is returned as it is, and shared parts stay shared (`memo`, by id)."""
    found = memo.get(id(node))
    if found is not None:
        return found
    if KEYLESS in node.__dict__:
        return node
    result = node
    if isinstance(node, ir.Seq):
        if "_literal" not in node.__dict__:
            items = _sequence_keys(node.items, keys, alphabet, memo)
            if items is not None:
                result = ir.Seq(tuple(items))
    elif isinstance(node, ir.Alt):
        if sum(_opens_quoted_text(item) for item in node.items) > 1:
            keys[AMBIGUOUS] = -1
        items = [_skeleton(item, keys, alphabet, memo) for item in node.items]
        if any(new is not old for new, old in zip(items, node.items)):
            result = ir.Alt(tuple(items))
    elif isinstance(node, ir.Repeat):
        item = _skeleton(node.item, keys, alphabet, memo)
        if item is not node.item:
            result = ir.Repeat(item, node.min, node.max)
    if result is node and not isinstance(node, (ir.ByteSet, ir.Embedded, ir.EmbeddedGrammar)):
        node.__dict__[KEYLESS] = True
    memo[id(node)] = result
    return result


def _opens_quoted_text(node: ir.Node) -> bool:
    """Whether `node` starts with a quoted string other than a literal key (a quoted literal or text: a value)."""
    literal = node.__dict__.get("_literal")
    if literal is not None:
        return bool(literal[0] == QUOTE)
    if not isinstance(node, ir.Seq) or not node.items or node.items[0] is not QUOTE_SET:
        return False
    return not isinstance(quoted_key(node.items, 1)[0], bytes)


def _sequence_keys(items: tuple[ir.Node, ...], keys: dict[Key, int], alphabet: int, memo: dict[int, ir.Node]
                   ) -> list[ir.Node] | None:
    """A sequence's items with its quoted keys replaced by placeholders and its other items by their skeletons, or
    None where nothing changed."""
    out: list[ir.Node] = []
    changed = False
    for key, item in sequence_parts(items):
        if key is not None:
            symbol = alphabet + keys.setdefault(key, len(keys))
            out.append(ir.ByteSet(((symbol, symbol),)))
            changed = True
        elif not isinstance(item, ir.ByteSet):
            new = _skeleton(item, keys, alphabet, memo)
            changed = changed or new is not item
            out.append(new)
        else:
            out.append(item)
    return out if changed else None


def quoted_text(node: ir.Node) -> ir.Embedded | None:
    """The minimal DFA of a string's text between two quotes (a free-form string value) that `may_be_quoted_text`
    admits, as an embedded automaton known minimal, kept on the node; None where its DFA has more than
    `QUOTED_TEXT_STATES` states or reads a quote where it may end (no prefix code)."""
    if QUOTED_TEXT in node.__dict__:
        return node.__dict__[QUOTED_TEXT]  # type: ignore[no-any-return]
    found: ir.Embedded | None = None
    try:
        automaton = build_automaton(node, QUOTED_TEXT_STATES)
    except (StateBudgetError, EmptyLanguageError):
        automaton = None
    if automaton is not None and not (automaton.transitions[automaton.accepting, QUOTE] >= 0).any():
        embedded = ir.Embedded(np.ascontiguousarray(automaton.transitions, dtype=np.int32),
                               np.array(automaton.accepting, dtype=bool))
        found = known_minimal(embedded, np.asarray(automaton.byte_class, dtype=np.int64))
    node.__dict__[QUOTED_TEXT] = found
    return found


def may_be_quoted_text(node: ir.Node) -> bool:
    """Whether a string's text may be laid out before its DFA is built: an expression over bytes of at most
    `QUOTED_TEXT_NFA` NFA states (a long counted string: refusing its DFA only once built was 0.12 s of sp_371's
    compile).  A body is given up on before any of its texts' DFAs is built where one of them fails this (o39500:
    four DFAs built, 4.6 ms, before a fifth was found too long)."""
    return estimated_states(node) <= QUOTED_TEXT_NFA and not any(
        isinstance(part, ir.EmbeddedGrammar) or (isinstance(part, ir.ByteSet) and part.ranges[-1][1] > 255)
        or (isinstance(part, ir.Embedded) and np.shape(part.transitions)[1:] != (256,))
        for part in ir.distinct_nodes(node))


def _laid_out(table: np.ndarray, accepting: np.ndarray, symbol_class: np.ndarray, keys: list[Key],
              rows: np.ndarray, moves: np.ndarray, max_states: int, call_base: int, all_live: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The skeleton (`table` over its classes; `moves[i]` the placeholders' moves from state `rows[i]`) with the
    trie of its keys after the opening quote of each of those states, trim; None where the keys there are no prefix
    code.  States: the skeleton's, the trie nodes (one per keyed state and node, where a node leads to a key allowed
    there, shared where what is read from there on is the same: `_shared`), then a copy of each embedded DFA per
    state it returns to (where a string has left the trie)."""
    literal = [index for index, key in enumerate(keys) if isinstance(key, bytes)]
    embedded = [index for index, key in enumerate(keys) if not isinstance(key, bytes)]
    nodes_of = [key for key in keys if isinstance(key, ir.Embedded)]
    automata = [(np.asarray(node.transitions), np.asarray(node.accepting, dtype=bool)) for node in nodes_of]
    reads = moves[:, embedded] >= 0
    if (reads.sum(axis=1) > 1).any():
        return None
    emb_of = np.where(reads.any(axis=1), np.argmax(np.hstack([reads, np.ones((len(rows), 1), dtype=bool)]), axis=1),
                      -1)
    emb_target = moves[:, embedded].max(axis=1, initial=-1)
    targets = moves[:, literal]
    allowed = targets >= 0
    trie = _Trie([key for key in keys if isinstance(key, bytes)])
    nodes = len(trie.parent)
    live = trie.summed(allowed.astype(np.int64)) > 0
    live[:, 0] = True
    # each embedded DFA's state at the trie nodes live where it is read (-1 elsewhere)
    emb_state = np.full((len(automata), nodes), -1, dtype=np.int64)
    emb_state[:, 0] = 0
    for number, (transitions, _) in enumerate(automata):
        needed = np.flatnonzero(live[emb_of == number].any(axis=0))
        if len(needed) > 1:
            emb_state[number] = trie.walked(transitions, needed)
    for number, (transitions, emb_accepting) in enumerate(automata):
        # a literal that an embedded DFA beside it accepts, or reads on into a quote, is no prefix code
        along = emb_state[number]
        if (transitions[along[along >= 0], QUOTE] >= 0).any():
            return None
        at_end = along[trie.end_node]
        accepted = (at_end >= 0) & emb_accepting[np.maximum(at_end, 0)]
        if (allowed[emb_of == number][:, accepted]).any():
            return None
    byte_class = _refined(symbol_class[:256], [_column_labels(node) for node in nodes_of], trie.byte[1:])
    byte_columns = int(byte_class.max()) + 1
    first_byte = np.full(byte_columns, 256, dtype=np.int64)
    np.minimum.at(first_byte, byte_class, np.arange(256))
    call_classes = distinct_values(symbol_class[call_base:])
    column_source = np.concatenate([symbol_class[first_byte], call_classes]).astype(np.intp)
    final_class = np.concatenate([byte_class, byte_columns + np.searchsorted(call_classes, symbol_class[call_base:])])
    quote = int(byte_class[QUOTE])
    skeleton_states = len(table)
    # the trie nodes' states, keyed state by keyed state
    pair_row, pair_node = np.nonzero(live)
    pair_emb = emb_of[pair_row]
    route_state = np.where(pair_emb >= 0, emb_state[np.maximum(pair_emb, 0), pair_node] if automata else -1, -1)
    pair_state = skeleton_states + _shared(pair_row, pair_node, targets, trie, route_state, pair_emb, emb_target,
                                           skeleton_states)
    pair_states = int(pair_state.max(initial=skeleton_states - 1)) + 1 - skeleton_states
    pair_id = np.full(live.shape, -1, dtype=np.int64)
    pair_id[pair_row, pair_node] = pair_state
    copies = sorted({(int(e), int(t)) for e, t in zip(emb_of, emb_target) if e >= 0})
    copy_of = {pair: index for index, pair in enumerate(copies)}
    sizes = np.array([len(automata[number][0]) for number, _ in copies], dtype=np.int64)
    copy_start = skeleton_states + pair_states
    bases = copy_start + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    total = copy_start + int(sizes.sum())
    if total > max_states:
        return None
    check_deadline("laying out quoted keys")
    out = np.full((total, len(column_source)), -1, dtype=np.int32)
    out[:skeleton_states] = table[:, column_source]
    out[rows, quote] = pair_id[:, 0]
    if copies:
        # the copies: each embedded DFA's rows over the final classes, its accepting states closing on the quote
        over_final = {number: transitions[:, first_byte] for number, (transitions, _) in enumerate(automata)}
        blocks = np.concatenate([over_final[number] for number, _ in copies])
        closing = np.concatenate([automata[number][1] for number, _ in copies])
        copy_target = np.array([target for _, target in copies], dtype=np.int64)
        local_start = bases - copy_start
        shift = np.repeat(bases, sizes)
        out[copy_start:, :byte_columns] = np.where(blocks >= 0, blocks + shift[:, None], -1)
        out[copy_start + np.flatnonzero(closing), quote] = np.repeat(copy_target, sizes)[closing]
        # a trie state reads on as its embedded DFA's state there, in its keyed state's copy (written from one of
        # the pairs sharing the state: they read alike)
        row_copy = np.array([copy_of.get((int(e), int(t)), -1) for e, t in zip(emb_of, emb_target)], dtype=np.int64)
        one_pair = np.empty(pair_states, dtype=np.int64)
        one_pair[pair_state - skeleton_states] = np.arange(len(pair_state))
        reading = one_pair[route_state[one_pair] >= 0]
        copy = row_copy[pair_row[reading]]
        source = local_start[copy] + route_state[reading]
        ids = pair_state[reading]
        read_rows = blocks[source]
        out[ids, :byte_columns] = np.where(read_rows >= 0, read_rows + bases[copy][:, None], -1)
        ends_there = closing[source]
        out[ids[ends_there], quote] = copy_target[copy[ends_there]]
    child_row, child_index = np.nonzero(live[:, 1:])
    child = child_index + 1
    out[pair_id[child_row, trie.parent[child]], byte_class[trie.byte[child]]] = pair_id[child_row, child]
    ending = np.flatnonzero(trie.end_key[pair_node] >= 0)
    key_target = targets[pair_row[ending], trie.end_key[pair_node[ending]]]
    taken = key_target >= 0
    out[pair_state[ending[taken]], quote] = key_target[taken]
    final_accepting = np.zeros(total, dtype=bool)
    final_accepting[:skeleton_states] = accepting
    check_deadline("trimming quoted keys")
    if not all_live:
        trimmed, trimmed_accepting = trim_in_bfs_order(out, final_accepting, dtype=np.int32)
        return trimmed, final_class.astype(np.intp), trimmed_accepting
    no_literal = ~allowed.any(axis=1)
    alone = {(int(e), int(t)) for e, t in zip(emb_of[no_literal], emb_target[no_literal]) if e >= 0}
    keep = _copies_reached(out, copy_start, copies, bases, nodes_of, alone)
    if keep is not None:
        renumbered = np.append(np.cumsum(keep, dtype=np.int32) - 1, np.int32(-1))
        out = renumbered[out[keep]]
        final_accepting = final_accepting[keep]
    return out, final_class.astype(np.intp), final_accepting


def _shared(pair_row: np.ndarray, pair_node: np.ndarray, targets: np.ndarray, trie: _Trie,
            route_state: np.ndarray, pair_emb: np.ndarray, emb_target: np.ndarray, skeleton_states: int
            ) -> np.ndarray:
    """Each trie pair's state number from 0: pairs of one node whose keys below it return to the same states (a key
    not allowed counts as returning nowhere) and whose embedded DFA, where it is still alive there, is the same with
    the same return share a state: what they read from there on is the same.  Candidates are grouped by a weighted
    sum of those returns (wrapping) and then compared key by key; a pair unlike its group's first keeps a state of its
    own."""
    route = np.where(route_state >= 0, (pair_emb + 1) * (skeleton_states + 1) + emb_target[pair_row] + 1, 0)
    weights = (np.arange(1, targets.shape[1] + 1, dtype=np.int64) * SPREAD) | 1
    summed = trie.summed((targets + 2) * weights, pair_row, pair_node)
    order = np.lexsort((summed, route, pair_node))
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = ((pair_node[order][1:] != pair_node[order][:-1]) | (route[order][1:] != route[order][:-1])
                  | (summed[order][1:] != summed[order][:-1]))
    first = order[np.flatnonzero(starts)][np.cumsum(starts) - 1]
    representative = np.empty(len(order), dtype=np.int64)
    representative[order] = first
    merged = np.flatnonzero(representative != np.arange(len(order)))
    rows_compared = pair_row[merged] * len(targets) + pair_row[representative[merged]]
    compared = distinct_values(rows_compared)
    differs = (targets[compared // len(targets)] != targets[compared % len(targets)]).astype(np.int64)
    unlike = merged[trie.summed(differs, np.searchsorted(compared, rows_compared), pair_node[merged]) != 0]
    representative[unlike] = unlike
    is_first = representative == np.arange(len(order))
    number = np.cumsum(is_first) - 1
    return number[representative]


def _copies_reached(out: np.ndarray, copy_start: int, copies: list[tuple[int, int]], bases: np.ndarray,
                    automata: list[ir.Embedded], alone: set[tuple[int, int]]) -> np.ndarray | None:
    """Which states to keep: all but the embedded DFAs' copied states that no trie state leads into; None where every
    state is kept.  A copy that some keyed state reads alone (no literal key allowed there: its trie is the root,
    whose row is the embedded DFA's start row) holds every state but the start (unless moved back into), as each
    state of the embedded DFA is reached from its start; others are searched."""
    if not copies:
        return None
    entered = out[:copy_start].reshape(-1)
    seen = np.zeros(len(out) - copy_start, dtype=bool)
    seen[entered[entered >= copy_start] - copy_start] = True
    keep = np.ones(len(out), dtype=bool)
    for (number, target), base in zip(copies, bases.tolist()):
        transitions = np.asarray(automata[number].transitions)
        local = seen[base - copy_start:base - copy_start + len(transitions)]
        if (number, target) in alone and _all_reachable(automata[number]):
            keep[base] = local[0] or _moved_into_start(automata[number])
        else:
            keep[base:base + len(transitions)] = reachable(*successor_lists(transitions), np.flatnonzero(local))
    return None if keep.all() else keep


def _moved_into_start(node: ir.Embedded) -> bool:
    """Whether some move of an embedded DFA leads back to its start (kept on the node)."""
    known = node.__dict__.get(MOVED_INTO_START)
    if known is None:
        known = bool((np.asarray(node.transitions) == 0).any())
        node.__dict__[MOVED_INTO_START] = known
    return bool(known)


def _all_reachable(node: ir.Embedded) -> bool:
    """Whether every state of an embedded DFA is reachable from its start: known for a minimal one
    (`known_minimal`), else searched once and kept on the node."""
    if minimal_labels(node) is not None:
        return True
    known = node.__dict__.get("_all_reachable")
    if known is None:
        known = bool(reachable(*successor_lists(np.asarray(node.transitions)), np.array([0])).all())
        object.__setattr__(node, "_all_reachable", known)
    return bool(known)


class _Trie:
    """The literal keys' trie: node 0 the root (after the opening quote), each later node's parent, byte and the key
    ending there (-1 if none), each key's end node, and the range of keys (in sorted order) that pass a node.  Built
    with numpy from the keys in sorted order: a key's bytes past its common prefix with the key before it are new
    nodes, numbered depth by depth (a parent before its children)."""

    def __init__(self, texts: list[bytes]) -> None:
        count = len(texts)
        order = sorted(range(count), key=texts.__getitem__)
        lengths = np.array([len(texts[key]) for key in order], dtype=np.int64)
        width = int(lengths.max(initial=0))
        grid = np.zeros((count, width + 1), dtype=np.int64)
        depth = np.arange(width + 1)
        inside = depth[None, :] < lengths[:, None]
        grid[inside] = np.frombuffer(b"".join([texts[key] for key in order]), dtype=np.uint8)
        common = np.zeros(count, dtype=np.int64)
        if count > 1:
            differs = (grid[1:] != grid[:-1]) | (depth[None, :] >= np.minimum(lengths[1:], lengths[:-1])[:, None])
            common[1:] = np.argmax(differs, axis=1)
        fresh = inside & (depth[None, :] >= common[:, None])
        fresh_t = fresh.T
        number = np.zeros(fresh_t.shape, dtype=np.int64)
        number[fresh_t] = 1 + np.arange(int(fresh_t.sum()))
        owner = np.maximum.accumulate(np.where(fresh, np.arange(count)[:, None], -1), axis=0)
        node_of = np.where(inside, number.T[np.maximum(owner, 0), depth[None, :]], 0)
        nodes = int(fresh.sum()) + 1
        parent = np.full(nodes, -1, dtype=np.int64)
        byte = np.full(nodes, -1, dtype=np.int64)
        rows, columns = np.nonzero(fresh)
        made = node_of[rows, columns]
        parent[made] = np.where(columns > 0, node_of[rows, np.maximum(columns - 1, 0)], 0)
        byte[made] = grid[rows, columns]
        keys = np.array(order, dtype=np.int64)
        self.end_node = np.zeros(count, dtype=np.int64)
        self.end_node[keys] = np.where(lengths > 0, node_of[np.arange(count), np.maximum(lengths - 1, 0)], 0)
        self.end_key = np.full(nodes, -1, dtype=np.int64)
        self.end_key[self.end_node] = np.arange(count)
        self.parent, self.byte, self.order = parent, byte, keys
        self.low = np.zeros(nodes, dtype=np.int64)
        self.high = np.full(nodes, count, dtype=np.int64)
        key_rows, key_depths = np.nonzero(inside)
        passed = node_of[key_rows, key_depths]
        self.low[passed] = count
        self.high[passed] = 0
        np.minimum.at(self.low, passed, key_rows)
        np.maximum.at(self.high, passed, key_rows + 1)

    def summed(self, values: np.ndarray, rows: np.ndarray | None = None, nodes: np.ndarray | None = None
               ) -> np.ndarray:
        """Per row of `values` (one column per key) and trie node, the sum over the keys that pass the node (a range
        of the keys in sorted order); only at the (row, node) pairs given, if given.  Sums wrap (int64)."""
        running = np.zeros((len(values), len(self.order) + 1), dtype=np.int64)
        np.cumsum(values[:, self.order], axis=1, out=running[:, 1:])
        if rows is None or nodes is None:
            return running[:, self.high] - running[:, self.low]
        return running[rows, self.high[nodes]] - running[rows, self.low[nodes]]

    def walked(self, transitions: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """A DFA's state at each of `nodes` (ascending, each with its parent: the root first), read from its start
        (-1 once it has rejected, and at the nodes not given)."""
        states = np.full(len(self.parent), -1, dtype=np.int64)
        states[0] = 0
        parent, byte = self.parent.tolist(), self.byte.tolist()
        for node in nodes[1:].tolist():
            above = states[parent[node]]
            states[node] = transitions[above, byte[node]] if above >= 0 else -1
        return states


def _refined(skeleton_class: np.ndarray, labelled: list[np.ndarray], literal_bytes: np.ndarray) -> np.ndarray:
    """The coarsest classes of the 256 bytes that split the skeleton's classes, every embedded DFA's labels, and
    each of `literal_bytes` and the quote from every other byte; numbered by first byte."""
    alone = np.zeros(256, dtype=np.int64)
    alone[literal_bytes] = literal_bytes + 1
    alone[QUOTE] = QUOTE + 1
    labels = np.stack([np.asarray(skeleton_class, dtype=np.int64), alone, *labelled])
    order = np.lexsort(labels[::-1])
    ordered = labels[:, order]
    starts = np.ones(256, dtype=bool)
    starts[1:] = (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)
    group = np.empty(256, dtype=np.int64)
    group[order] = np.cumsum(starts) - 1
    first = np.full(int(group.max()) + 1, 256, dtype=np.int64)
    np.minimum.at(first, group, np.arange(256))
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[group]


def _column_labels(node: ir.Embedded) -> np.ndarray:
    """A label per byte, equal only for bytes that an embedded DFA moves alike on: as its writer recorded them
    (`known_minimal`), else by its columns' bytes."""
    known = minimal_labels(node)
    if known is not None:
        return known
    columns = np.ascontiguousarray(np.asarray(node.transitions, dtype=np.int64).T)
    seen: dict[bytes, int] = {}
    return np.array([seen.setdefault(columns[b].tobytes(), len(seen)) for b in range(256)], dtype=np.int64)
