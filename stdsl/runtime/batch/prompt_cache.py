"""A prompt cache: the KV state of token sequences already prefilled, found by longest exact prefix.

Keys and values at position k depend only on tokens 0..k, so a stored sequence serves every
prefix of itself: a new prompt that shares its first n tokens with a stored one starts from that
entry's first n positions and prefills only the rest. Sequences live in a radix trie over token
ids (edges labelled by token runs); entries are evicted least recently used to stay under a byte bound.
Each prompt cache is registered with `stdsl.caches`: its bytes count against the registry's budget, it shows in
`stdsl.caches.stats()` as "prompt caches", and `stdsl.caches.clear()` empties it.

Entries share their prefixes: a sequence stored after one it extends (the next turn of a conversation, every
conversation after the shared system prompt) keeps only the positions past the longest stored prefix, in a
segment of its own, and refers to the earlier entries' segments for the rest. A segment lives while an entry
uses it, so the byte bound counts each position once however many conversations share it.

The bound counts what an entry costs beside its states: its key (a tuple of Python ints, also the trie's labels), its
trie node and LRU slot, and MLX's own record of each stored array, a few kB an entry. With a small model these
outweigh the keys and values (a 2-layer, hidden-64 model holds 512 bytes of KV a position: an entry of 20 new
positions holds 10 kB of KV and about 8 kB beside them), so a bound on the states alone let the resident memory grow to
several times `max_bytes`.

A model with recurrent layers (`exact=True`) also keeps each entry's recurrent states, which hold exactly the
entry's sequence and cannot be cut: a query then reuses the longest stored sequence that is a whole prefix of it
(the end of an earlier prompt or reply), never part of one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import mlx.core as mx

from stdsl import caches
from stdsl.runtime.row_caches.attention import LayerKV
from stdsl.runtime.row_caches.layers import LeafRow
from stdsl.runtime.row_caches.recurrent import RecurrentState

ARRAY_BYTES = 640
"""MLX's record of one stored array beside its data (about 620 bytes an array on the CPU backend, measured)."""
TOKEN_BYTES = 128
"""An entry's key, a position: a tuple slot and an int object, in the key and in the trie's labels (about 125 bytes
a position of resident memory, measured over thousands of entries)."""
ENTRY_BYTES = 1024
"""An entry's own objects: its trie node and child slot, its LRU slot, its chain and segment records."""


@dataclass
class _Node:
    """A trie node: children by first token of their edge label; `entry` when a stored sequence ends here."""

    label: tuple[int, ...] = ()
    children: dict[int, _Node] = field(default_factory=dict)
    entry: tuple[int, ...] | None = None


@dataclass(eq=False)
class _Segment:
    """Positions from `start` on of the stored sequences that share them: each layer's (1, H, n, D) arrays."""

    start: int
    layers: list[LayerKV]
    nbytes: int
    users: int = 0


Chain = tuple[tuple[_Segment, int], ...]
"""An entry's positions: segments in order, each used up to its second member (an absolute position)."""


@dataclass
class CacheHit:
    """The longest stored prefix of a query: its length and each leaf cache's row: (1, H, L, D) keys and values
    (L ≥ length) or a recurrent state of exactly `length` positions."""

    length: int
    layers: list[LeafRow]


class PromptCache:
    """Stored KV states by token sequence, bounded by `max_bytes` (0 disables the cache); safe between threads (the
    engine's, and a caller's `stdsl.caches.clear()`). `exact`: reuse only whole stored sequences (recurrent
    models).

    Bytes (`nbytes`, `max_bytes`) are what the entries hold: their states and their bookkeeping (`entry_bytes`).
    """

    def __init__(self, max_bytes: int = 256 << 20, exact: bool = False) -> None:
        self.max_bytes = max_bytes
        self.exact = exact
        self._states: dict[tuple[int, ...], list[RecurrentState]] = {}
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.hit_tokens = 0
        self._root = _Node()
        self._entries: OrderedDict[tuple[int, ...], Chain] = OrderedDict()
        self._lock = threading.Lock()
        self._pattern: list[bool] = []
        caches.register("prompt caches", self)

    def __len__(self) -> int:
        return len(self._entries)

    def cache_stats(self) -> caches.CacheStats:
        """Entries and bytes held, lookups that found a prefix (hits) or none (misses), entries evicted."""
        with self._lock:
            return caches.CacheStats(len(self._entries), self.nbytes, self.hits, self.misses, self.evictions)

    def lookup(self, tokens: Sequence[int]) -> CacheHit | None:
        """The stored sequence sharing the longest prefix with `tokens` (None when nothing is shared)."""
        with self._lock:
            return self._lookup(tokens)

    def _lookup(self, tokens: Sequence[int]) -> CacheHit | None:
        found = self._longest_whole(tokens) if self.exact else self._longest(tokens)
        if found is None:
            self.misses += 1
            return None
        best, depth = found
        self._entries.move_to_end(best)
        self.hits += 1
        self.hit_tokens += depth
        attention = iter(_layers(self._entries[best], depth))
        states = iter(self._states.get(best, ()))
        return CacheHit(depth, [next(states) if state else next(attention) for state in self._pattern])

    def _longest_whole(self, tokens: Sequence[int]) -> tuple[tuple[int, ...], int] | None:
        """The longest stored sequence that is a prefix of `tokens`, and its length (None: none)."""
        node, depth = self._root, 0
        best: tuple[tuple[int, ...], int] | None = None
        query = tuple(tokens)
        while depth < len(query):
            child = node.children.get(query[depth])
            if child is None or tuple(query[depth : depth + len(child.label)]) != child.label:
                break
            depth += len(child.label)
            node = child
            if node.entry is not None:
                best = (node.entry, depth)
        return best

    def _longest(self, tokens: Sequence[int]) -> tuple[tuple[int, ...], int] | None:
        """A stored sequence sharing the longest prefix with `tokens`, and that prefix's length (None: none)."""
        node, depth = self._root, 0
        best: tuple[int, ...] | None = None
        query = tuple(tokens)
        while depth < len(query):
            child = node.children.get(query[depth])
            if child is None:
                break
            label = child.label
            shared = 0
            while shared < len(label) and depth + shared < len(query) and label[shared] == query[depth + shared]:
                shared += 1
            best = _any_entry(child)
            depth += shared
            if shared < len(label):
                break
            node = child
        if best is None or depth == 0:
            return None
        return best, depth

    def store(self, tokens: Sequence[int], leaves: list[LeafRow]) -> None:
        """Keep the state of `tokens`: each leaf cache's row, attention as (1, H, ≥ len, D) arrays (views allowed:
        the positions past the longest stored prefix are copied out), recurrent states as they are (they must
        hold exactly `tokens`; others are not stored), evicting least recently used entries past the bound."""
        key = tuple(tokens)
        layers = [leaf for leaf in leaves if not isinstance(leaf, RecurrentState)]
        states = [leaf for leaf in leaves if isinstance(leaf, RecurrentState)]
        per_position = sum(int(k.nbytes + v.nbytes) / max(k.shape[2], 1) for k, v in layers)
        state_bytes = sum(state.nbytes for state in states)
        least = per_position * len(key) + state_bytes + entry_bytes(key) + 2 * ARRAY_BYTES * len(layers)
        if (not key or least > self.max_bytes or self.max_bytes == 0
                or any(state.length != len(key) for state in states)):
            return
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
            self._pattern = [isinstance(leaf, RecurrentState) for leaf in leaves]
            if states:
                self._states[key] = states
                self.nbytes += state_bytes
            found = self._longest(key)
            chain = _cut(self._entries[found[0]], found[1]) if found is not None else ()
            start = found[1] if found is not None else 0
            if start < len(key):
                kept = [(mx.contiguous(k[..., start : len(key), :]), mx.contiguous(v[..., start : len(key), :]))
                        for k, v in layers]
                mx.eval(*[a for pair in kept for a in pair])
                size = sum(int(k.nbytes + v.nbytes) + 2 * ARRAY_BYTES for k, v in kept)
                chain += ((_Segment(start, kept, size), len(key)),)
            self._store(key, chain)

    def _store(self, key: tuple[int, ...], chain: Chain) -> None:
        for segment, _ in chain:
            if segment.users == 0:
                self.nbytes += segment.nbytes
            segment.users += 1
        self._entries[key] = chain
        self.nbytes += entry_bytes(key)
        self._insert(key)
        while self.nbytes > self.max_bytes and self._entries:  # the new entry too, if its shared segments outgrow it
            oldest = next(iter(self._entries))
            self._remove(oldest)
            self.evictions += 1

    def discard(self, tokens: Sequence[int]) -> None:
        """Forget the entry stored for exactly `tokens`, if any."""
        key = tuple(tokens)
        with self._lock:
            if key in self._entries:
                self._remove(key)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._root = _Node()
            self._entries.clear()
            self._states.clear()
            self.nbytes = 0

    def _insert(self, key: tuple[int, ...]) -> None:
        node, depth = self._root, 0
        while depth < len(key):
            child = node.children.get(key[depth])
            if child is None:
                node.children[key[depth]] = _Node(label=key[depth:], entry=key)
                return
            label = child.label
            shared = 0
            while shared < len(label) and depth + shared < len(key) and label[shared] == key[depth + shared]:
                shared += 1
            if shared < len(label):
                split = _Node(label=label[:shared], children={label[shared]: child})
                child.label = label[shared:]
                node.children[key[depth]] = split
                child = split
            depth += shared
            node = child
        node.entry = key

    def _remove(self, key: tuple[int, ...]) -> None:
        for segment, _ in self._entries.pop(key):
            segment.users -= 1
            if segment.users == 0:
                self.nbytes -= segment.nbytes
        self.nbytes -= sum(state.nbytes for state in self._states.pop(key, ())) + entry_bytes(key)
        path: list[_Node] = [self._root]
        node, depth = self._root, 0
        while depth < len(key):
            node = node.children[key[depth]]
            depth += len(node.label)
            path.append(node)
        node.entry = None
        for parent, child in zip(reversed(path[:-1]), reversed(path[1:])):
            if child.entry is None and not child.children:
                del parent.children[child.label[0]]
            elif child.entry is None and len(child.children) == 1:
                (only,) = child.children.values()
                only.label = child.label + only.label
                parent.children[child.label[0]] = only
            break_here = child.entry is not None or len(child.children) > 1
            if break_here:
                break


def entry_bytes(key: tuple[int, ...]) -> int:
    """What an entry for `key` holds beside its states and arrays: its key and its own objects."""
    return ENTRY_BYTES + TOKEN_BYTES * len(key)


def _cut(chain: Chain, length: int) -> Chain:
    """The part of a chain covering its first `length` positions."""
    out: list[tuple[_Segment, int]] = []
    for segment, used in chain:
        if segment.start >= length:
            break
        out.append((segment, min(used, length)))
    return tuple(out)


def _layers(chain: Chain, length: int) -> list[LayerKV]:
    """Each layer's (1, H, ≥ length, D) keys and values of a chain's first `length` positions (one concatenation
    where the chain has several segments)."""
    parts = _cut(chain, length)
    layers: list[LayerKV] = []
    for layer in range(len(parts[0][0].layers)):
        keys = [segment.layers[layer][0][..., : used - segment.start, :] for segment, used in parts]
        values = [segment.layers[layer][1][..., : used - segment.start, :] for segment, used in parts]
        layers.append((keys[0], values[0]) if len(parts) == 1 else
                      (mx.concatenate(keys, axis=2), mx.concatenate(values, axis=2)))
    return layers


def _any_entry(node: _Node) -> tuple[int, ...] | None:
    """A stored sequence at or below `node` (every such sequence shares the path to `node`)."""
    while node.entry is None:
        if not node.children:
            return None
        node = next(iter(node.children.values()))
    return node.entry
