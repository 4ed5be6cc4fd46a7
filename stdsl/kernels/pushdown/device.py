"""The pushdown state on the device (Appendix D.4): an int32 vector `[q, pointer, stack[0..63], S]`; gathers mask it.

`S` is the sum over the return states on the stack of their bn with the room each has once popped, so
need+(c) = bn(q) at the room above the stack + S (Proposition 2 under the cap; bn is clipped at BN_CAP bytes,
past any budget, so S fits int32, and need+ >= BN_CAP marks a configuration that cannot close); slots at and
above the pointer hold 0, so equal configurations have equal vectors; q = -1 marks a dead vector.  The tables are
the symbolic rows `ContextRows` computes on the CPU, each uploaded once as met: per state q a
*free* row over the vocabulary (an outcome code per token, or a slot for the tokens that need
the stack), per (q, top two return states, shallow) a *context* row of codes over those tokens,
and per row an outcome table (pops, pushed, final state, peak).  Masking and advancing are
gathers and elementwise ops (MLX, any backend); the rare tokens that pop below the top two
symbols are stepped exactly on the host and merged in.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.compiler.pushdown.machine import DEAD, PushdownMachine
from stdsl.errors import StdslError
from stdsl.kernels.pushdown.context_rows import CONTEXT_SYMBOLS, ContextRows, SymbolicRow
from stdsl.kernels.pushdown.rows import PushdownRows
from stdsl.kernels.vocabulary import Vocabulary

STACK_SLOTS = 64
Q, POINTER, STACK, SUM = 0, 1, 2, 2 + STACK_SLOTS
VECTOR_SIZE = SUM + 1
FIRST_OUTCOME = 2
NEVER = (1 << 31) - 1
BN_CAP = 1 << 24


@dataclass(frozen=True)
class DeviceOutcomes:
    """One symbolic row's outcomes on the device, indexed by code (codes 0 and 1 are never live).

    `final` is the state after eager returns through the token's own pushes; `falls` marks outcomes
    that end at a final state with nothing of their own pushed (eager returns continue into the
    stack).
    """

    live: mx.array
    pops: mx.array
    pushed: mx.array
    count: mx.array
    final: mx.array
    falls: mx.array
    peak: mx.array

    @property
    def nbytes(self) -> int:
        """Device bytes of the outcome arrays."""
        return sum(int(a.nbytes) for a in (self.live, self.pops, self.pushed, self.count, self.final, self.falls,
                                            self.peak))


@dataclass(frozen=True)
class DeviceRow:
    """A free row (`entries` over the vocabulary) or a context row (`entries` over the free row's stack tokens).

    A free row's entry is `offset + code` for an outcome code, `offset - 1 - i` for `stack_tokens[i]`
    (the i-th token that needs the stack; `offset` is their count), so one gather of
    [offset dead entries, live per code] masks it.  A context row's entry is a plain code;
    `host_tokens` lists its tokens that pop below its known symbols (stepped on the host).
    """

    entries: mx.array
    outcomes: DeviceOutcomes
    offset: int = 0
    stack_tokens: mx.array | None = None
    host_tokens: tuple[int, ...] = ()

    @property
    def nbytes(self) -> int:
        """Device bytes of the entries, stack token ids and outcome table."""
        extra = 0 if self.stack_tokens is None else int(self.stack_tokens.nbytes)
        return int(self.entries.nbytes) + extra + self.outcomes.nbytes


@dataclass
class DeviceStats:
    """Uploads and host fallbacks so far."""

    free_uploads: int = 0
    context_uploads: int = 0
    host_steps: int = 0
    uploaded_bytes: int = 0
    masks: int = 0
    advances: int = 0


def narrowest(values: np.ndarray) -> np.ndarray:
    """`values` as the narrowest of uint8, uint16 and int32 holding them (row entries are most of the device bytes)."""
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in (np.uint8, np.uint16):
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return values.astype(dtype)
    return values.astype(np.int32)


def settle_within(final: np.ndarray, state: int, pushed: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """Eager returns through a token's own pushes: (state, pushes left)."""
    while final[state] and pushed:
        state, pushed = pushed[-1], pushed[:-1]
    return state, pushed


class PushdownDevice:
    """Masks and advances device state vectors of one machine under one vocabulary, from uploaded symbolic rows.

    Equal to `PushdownRows.mask` (and the budget rule of `PushdownBudget`) and to the machine's
    concrete step.  Selecting a row reads the vector's first slots on the host (the rows are built
    lazily); everything over the vocabulary runs on the device.
    """

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, symbolic: ContextRows | None = None) -> None:
        if machine.max_depth > STACK_SLOTS:
            raise StdslError(f"PushdownDevice: max_depth {machine.max_depth} exceeds the {STACK_SLOTS} stack slots")
        if symbolic is not None and (symbolic.machine is not machine or symbolic.vocab is not vocab):
            raise StdslError("PushdownDevice: the symbolic rows belong to another machine or vocabulary")
        self.machine = machine
        self.vocab = vocab
        self.symbolic = symbolic if symbolic is not None else ContextRows(machine, vocab)
        grammar = machine.grammar
        self._final_host = np.asarray(grammar.accepting & ~grammar.has_successor)
        self._bn_host = np.minimum(np.asarray(grammar.bn_within, dtype=np.int64), BN_CAP)
        self.bn = mx.array(self._bn_host.astype(np.int32))
        self.final = mx.array(self._final_host)
        self.accepting = mx.array(np.asarray(grammar.accepting))
        self._eos_ids = mx.array(vocab.eos_ids)
        self._max_depth = mx.array(machine.max_depth, dtype=mx.int32)
        self._rows: dict[tuple[Any, ...], DeviceRow] = {}
        self.stats = DeviceStats()

    # ------------------------------------------------------------------ vectors

    def encode(self, config: int) -> mx.array:
        """The vector of a machine configuration (the dead vector for DEAD)."""
        vector = np.zeros(VECTOR_SIZE, dtype=np.int32)
        if config < 0:
            vector[Q] = DEAD
            return mx.array(vector)
        state, stack = self.machine.configuration(config)
        vector[Q], vector[POINTER] = state, len(stack)
        vector[STACK:STACK + len(stack)] = stack
        levels = len(self._bn_host) - 1
        vector[SUM] = sum(int(self._bn_host[min(self.machine.max_depth - slot, levels), item])
                          for slot, item in enumerate(stack))
        return mx.array(vector)

    def start(self) -> mx.array:
        """The vector of the machine's start configuration."""
        return self.encode(self.machine.start)

    def configuration(self, vector: mx.array) -> tuple[int, tuple[int, ...]]:
        """(state, stack bottom first) of a vector, as `PushdownMachine.configuration` lists it."""
        values = np.array(vector).tolist()
        return values[Q], tuple(values[STACK:STACK + values[POINTER]])

    def config_of(self, vector: mx.array) -> int:
        """The machine's configuration id of a vector (DEAD for the dead vector)."""
        state, stack = self.configuration(vector)
        return DEAD if state < 0 else self.machine.config_of(state, stack)

    # ------------------------------------------------------------------ uploads

    def _outcomes(self, row: SymbolicRow) -> DeviceOutcomes:
        count = FIRST_OUTCOME + len(row.outcomes)
        settled = [(pops, *settle_within(self._final_host, state, pushed), peak)
                   for pops, pushed, state, peak in row.outcomes]
        width = max([1] + [len(pushed) for _, _, pushed, _ in settled])
        pops = np.zeros(count, dtype=np.int32)
        pushed_table = np.zeros((count, width), dtype=np.int32)
        lengths = np.zeros(count, dtype=np.int32)
        final = np.zeros(count, dtype=np.int32)
        peak = np.full(count, NEVER, dtype=np.int32)
        for index, (popped, state, pushed, top) in enumerate(settled, start=FIRST_OUTCOME):
            pops[index], lengths[index], final[index], peak[index] = popped, len(pushed), state, top
            pushed_table[index, :len(pushed)] = pushed
        live = np.arange(count) >= FIRST_OUTCOME
        falls = live & (lengths == 0) & self._final_host[final]
        return DeviceOutcomes(mx.array(live), mx.array(pops), mx.array(pushed_table), mx.array(lengths),
                              mx.array(final), mx.array(falls), mx.array(peak))

    def _store(self, key: tuple[Any, ...], row: DeviceRow) -> DeviceRow:
        self._rows[key] = row
        self.stats.uploaded_bytes += row.nbytes
        return row

    def free_row(self, state: int) -> DeviceRow:
        """The uploaded free row of `state` (entries `offset + code`, or `offset - 1 - i` for the i-th stack token)."""
        key = ("free", state)
        found = self._rows.get(key)
        if found is not None:
            return found
        row = self.symbolic.free_row(state)
        offset = int(row.needs.size)
        entries = np.full(self.vocab.size, offset, dtype=np.int32)
        if row.tokens is None:
            entries += row.codes
        else:
            entries[row.tokens] += row.codes
        entries[row.needs] = offset - 1 - np.arange(offset, dtype=np.int32)
        entries[self.vocab.special | self.vocab.eos] = offset
        self.stats.free_uploads += 1
        stack_tokens = mx.array(row.needs.astype(np.int32)) if offset else None
        return self._store(key, DeviceRow(mx.array(narrowest(entries)), self._outcomes(row), offset, stack_tokens))

    def context_row(self, state: int, known: tuple[int, ...], below_empty: bool) -> DeviceRow:
        """The uploaded context row of `state` under the top symbols `known` (bottom first): codes per stack token."""
        key = ("context", state, known, below_empty)
        found = self._rows.get(key)
        if found is not None:
            return found
        free = self.symbolic.free_row(state)
        row = self.symbolic.context_row(free, state, known, below_empty)
        codes = np.zeros(max(1, free.needs.size), dtype=np.int32)
        if row.tokens is None:
            codes[:free.needs.size] = row.codes[free.needs]
        else:
            codes[np.searchsorted(free.needs, row.tokens)] = row.codes
        self.stats.context_uploads += 1
        return self._store(key, DeviceRow(mx.array(narrowest(codes)), self._outcomes(row),
                                          host_tokens=tuple(row.needs.tolist())))

    def _rows_at(self, values: list[int]) -> tuple[DeviceRow, DeviceRow | None]:
        state, pointer = values[Q], values[POINTER]
        if state < 0:
            raise StdslError("PushdownDevice: the state vector is dead (a refused token was advanced)")
        free = self.free_row(state)
        if not self.symbolic.free_row(state).needs.size:
            return free, None
        known = tuple(values[STACK + max(0, pointer - CONTEXT_SYMBOLS):STACK + pointer])
        return free, self.context_row(state, known, pointer <= CONTEXT_SYMBOLS)

    @property
    def nbytes(self) -> int:
        """Device bytes of the grammar arrays and every uploaded row."""
        grammar = sum(int(a.nbytes) for a in (self.bn, self.final, self.accepting, self._eos_ids))
        return grammar + sum(row.nbytes for row in self._rows.values())

    # ------------------------------------------------------------------ device math

    def _admitted(self, vector: mx.array, outcomes: DeviceOutcomes, remaining: int | None) -> mx.array:
        """Per outcome code of a row at this vector: live within the cap and, given `remaining`, within the budget."""
        budget = mx.array(NEVER if remaining is None else remaining, dtype=mx.int32)
        return _admitted_outcomes(vector, self.bn, self.final, self._max_depth, budget, outcomes.live, outcomes.pops,
                                  outcomes.count, outcomes.final, outcomes.falls, outcomes.peak, outcomes.pushed)

    def _host_results(self, vector: mx.array, tokens: tuple[int, ...]) -> list[int]:
        config = self.config_of(vector)
        self.stats.host_steps += len(tokens)
        return [self.machine.step(config, self.vocab.bytes_of(t)) for t in tokens]

    def mask(self, vector: mx.array, remaining: int | None = None) -> mx.array:
        """Admissible tokens (bool (V,)): live runs within the cap, need+ within `remaining` if given, eos iff accepts.

        Equals `PushdownRows.mask` and, with `remaining`, that mask narrowed by `PushdownBudget.admits`.
        """
        values = np.array(vector).tolist()
        free, context = self._rows_at(values)
        live = self._admitted(vector, free.outcomes, remaining)
        allowed = mx.concatenate([mx.zeros(free.offset, dtype=mx.bool_), live])[free.entries]
        if context is not None and free.stack_tokens is not None:
            allowed[free.stack_tokens] = self._admitted(vector, context.outcomes, remaining)[context.entries]
        allowed[self._eos_ids] = _accepts(vector, self.accepting)
        if context is not None and context.host_tokens:
            results = self._host_results(vector, context.host_tokens)
            admitted = [c >= 0 and (remaining is None or 1 + self.machine.need(c) <= remaining) for c in results]
            allowed[mx.array(context.host_tokens, dtype=mx.int32)] = mx.array(admitted)
        self.stats.masks += 1
        return allowed

    def advance(self, vector: mx.array, token: int) -> mx.array:
        """The vector after `token` (dead, q = -1, where refused): pop, push, final state, eager returns."""
        values = np.array(vector).tolist()
        free, context = self._rows_at(values)
        self.stats.advances += 1
        if not 0 <= token < self.vocab.size:
            raise StdslError(f"PushdownDevice.advance: token {token} is outside the vocabulary "
                             f"(size {self.vocab.size})")
        if self.vocab.special[token] or self.vocab.eos[token]:
            return self.encode(DEAD)
        if context is not None and token in context.host_tokens:
            return self.encode(self._host_results(vector, (token,))[0])
        entry = free.entries[token].astype(mx.int32) - free.offset
        pick = free.outcomes
        code = mx.maximum(entry, 0)
        fields = [pick.live[code], pick.pops[code], pick.count[code], pick.final[code], pick.falls[code],
                  pick.peak[code], pick.pushed[code]]
        if context is not None:
            other = context.outcomes
            inner = context.entries[mx.maximum(-1 - entry, 0)]
            stacked = entry < 0
            width = max(pick.pushed.shape[1], other.pushed.shape[1])
            mine = mx.pad(fields[6], (0, width - pick.pushed.shape[1]))
            theirs = mx.pad(other.pushed[inner], (0, width - other.pushed.shape[1]))
            fields = [mx.where(stacked, o[inner], f) for o, f in zip(
                (other.live, other.pops, other.count, other.final, other.falls, other.peak), fields[:6])]
            fields.append(mx.where(stacked, theirs, mine))
        live, pops, count, final, falls, peak, pushed = fields
        return _settled_vector(vector, self.bn, self.final, self._max_depth, live, pops, count, final, falls, peak,
                               pushed)


def _bn_at(bn: mx.array, max_depth: mx.array, height: mx.array, state: mx.array) -> mx.array:
    """bn of `state` (any shape) with the room left above a stack of `height` (rows of `bn` are rooms 0, 1, ...)."""
    return bn[mx.clip(max_depth - height, 0, bn.shape[0] - 1), state]


def _admitted_outcomes_math(vector: mx.array, bn: mx.array, final: mx.array, max_depth: mx.array, budget: mx.array,
                            live: mx.array, pops: mx.array, count: mx.array, state: mx.array, falls: mx.array,
                            peak: mx.array, pushed: mx.array) -> mx.array:
    """Per outcome: live, within the cap (peak <= room), able to close (need+ < BN_CAP) and within the budget
    (1 + need+ of the settled result)."""
    slots = mx.arange(STACK_SLOTS, dtype=mx.int32)
    pointer = vector[POINTER]
    stack = vector[STACK:SUM]
    below_bn = mx.where(slots < pointer, _bn_at(bn, max_depth, slots, stack), 0)
    cumulative = mx.concatenate([mx.zeros(1, dtype=mx.int32), mx.cumsum(below_bn)])
    stops = (slots == 0) | ~final[stack]
    base = pointer - pops
    returns = falls & (base > 0)
    landing = mx.max(mx.where((slots[None, :] < base[:, None]) & stops[None, :], slots[None, :], -1), axis=1)
    settled = mx.where(returns, stack[mx.maximum(landing, 0)], state)
    height = mx.where(returns, landing, base + count)
    columns = mx.arange(pushed.shape[1], dtype=mx.int32)[None, :]
    pushed_bn = mx.sum(mx.where(columns < count[:, None],
                                _bn_at(bn, max_depth, base[:, None] + columns, pushed), 0), axis=1)
    need = (_bn_at(bn, max_depth, height, settled) + cumulative[mx.clip(mx.minimum(height, base), 0, STACK_SLOTS)]
            + pushed_bn)
    return live & (peak <= max_depth - pointer) & (need < BN_CAP) & (1 + need <= budget)


def _settled_vector_math(vector: mx.array, bn: mx.array, final: mx.array, max_depth: mx.array, live: mx.array,
                         pops: mx.array, count: mx.array, state: mx.array, falls: mx.array, peak: mx.array,
                         pushed: mx.array) -> mx.array:
    """One outcome composed with the vector's stack: pop, push, eager returns, S recomputed; dead past the cap."""
    slots = mx.arange(STACK_SLOTS, dtype=mx.int32)
    pointer = vector[POINTER]
    stack = vector[STACK:SUM]
    base = pointer - pops
    top = base + count
    written = pushed[mx.clip(slots - base, 0, pushed.shape[0] - 1)]
    stack = mx.where(slots < base, stack, mx.where(slots < top, written, 0))
    stops = (slots == 0) | ~final[stack]
    landing = mx.max(mx.where((slots < top) & stops, slots, -1))
    returns = falls & (top > 0)
    state = mx.where(returns, stack[mx.maximum(landing, 0)], state)
    height = mx.where(returns, landing, top)
    stack = mx.where(slots < height, stack, 0)
    total = mx.sum(mx.where(slots < height, _bn_at(bn, max_depth, slots, stack), 0))
    alive = live & (peak <= max_depth - pointer) & (_bn_at(bn, max_depth, height, state) + total < BN_CAP)
    head = mx.stack([state, height]).astype(mx.int32)
    settled = mx.concatenate([head, stack.astype(mx.int32), total.astype(mx.int32)[None]])
    dead = mx.concatenate([mx.array([DEAD], dtype=mx.int32), mx.zeros(VECTOR_SIZE - 1, dtype=mx.int32)])
    return mx.where(alive, settled, dead)


def _accepts_math(vector: mx.array, accepting: mx.array) -> mx.array:
    """Whether the vector's configuration accepts: q and every return state on the stack accept."""
    slots = mx.arange(STACK_SLOTS, dtype=mx.int32)
    on_stack = mx.where(slots < vector[POINTER], accepting[vector[STACK:SUM]], True)
    return accepting[vector[Q]] & mx.all(on_stack)


_admitted_outcomes = mx.compile(_admitted_outcomes_math)
_settled_vector = mx.compile(_settled_vector_math)
_accepts = mx.compile(_accepts_math)


def reachable_configurations(machine: PushdownMachine, max_depth: int, limit: int = 4000) -> list[int]:
    """Configurations of stack depth <= max_depth reachable byte by byte (breadth first, at most `limit`)."""
    seen = {machine.start}
    queue = deque([machine.start])
    while queue and len(seen) < limit:
        config = queue.popleft()
        for byte in np.flatnonzero(machine.byte_row(config) >= 0).tolist():
            nxt = machine.step_byte(config, byte)
            if machine.depth(nxt) <= max_depth and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return sorted(seen)


def compare_device(device: PushdownDevice, rows: PushdownRows, configs: list[int],
                   remaining: tuple[int | None, ...] = (None,), dead_stride: int = 1,
                   live_limit: int | None = None) -> int:
    """Check device masks and advances against `rows` and the machine at each configuration; returns advances checked.

    Advances are checked for every live token (at most `live_limit`, evenly spaced) and every
    `dead_stride`-th token.  Raises StdslError
    naming the configuration and token of the first difference.
    """
    machine, vocab = device.machine, device.vocab
    budget_need = machine.needs
    checked = 0
    for config in configs:
        vector = device.encode(config)
        if device.configuration(vector) != machine.configuration(config):
            raise StdslError(f"device vector of {machine.configuration(config)} reads {device.configuration(vector)}")
        row = rows.next_states(config)
        for left in remaining:
            expected = rows.mask(config)
            if left is not None:
                expected &= (row < 0) | (1 + budget_need(row.astype(np.int64)) <= left)
                expected[vocab.eos_ids] = machine.config_accepts(config)
            got = np.array(device.mask(vector, left))
            if not np.array_equal(got, expected):
                token = int(np.flatnonzero(got != expected)[0])
                raise StdslError(f"device mask at {machine.configuration(config)} (remaining {left}): token {token} "
                                 f"{vocab.token_bytes[token]!r} gives {bool(got[token])}, rows {bool(expected[token])}")
        live = np.flatnonzero(row >= 0)
        if live_limit is not None and live.size > live_limit:
            live = live[np.linspace(0, live.size - 1, live_limit).astype(np.int64)]
        for token in sorted(set(live.tolist()) | set(range(0, vocab.size, dead_stride))):
            moved = device.configuration(device.advance(vector, token))
            nxt = int(row[token])
            want = (DEAD, ()) if nxt < 0 else machine.configuration(nxt)
            if moved != want:
                raise StdslError(f"device advance at {machine.configuration(config)} by token {token} "
                                 f"{vocab.token_bytes[token]!r} gives {moved}, machine {want}")
            checked += 1
    return checked


def check_pushdown_device(seed: int = 0) -> int:
    """Self-check of the device pushdown state on this machine's default MLX device; returns tokens checked.

    A recursive schema (nested arrays of integers) at stack caps 3 and 64, a small vocabulary with
    multibyte tokens, a special and eos: every configuration to depth 4, masks (with and without
    a budget) and advances against `PushdownRows` and the machine.  Raises StdslError on the first mismatch.
    """
    from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive

    schema = {"$ref": "#/$defs/n", "$defs": {"n": {"anyOf": [
        {"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}}
    rng = np.random.default_rng(seed)
    pieces = [b"[", b"]", b",", b"1", b"0", b"-", b"[[", b"]]", b"],[", b"1]", b",[", b"]]]", b"[[[", b"12", b"x"]
    tokens: set[bytes] = set(pieces)
    while len(tokens) < 120:
        tokens.add(b"".join(pieces[i] for i in rng.integers(0, len(pieces), size=int(rng.integers(2, 5)))))
    listed: list[bytes | None] = [*sorted(tokens), None, None]
    vocab = Vocabulary(listed, eos_ids=[len(listed) - 1])
    checked = 0
    for cap in (3, 64):
        machine = compile_recursive(schema, max_depth=cap).machine
        rows = PushdownRows(machine, vocab)
        device = PushdownDevice(machine, vocab, rows.symbolic)
        checked += compare_device(device, rows, reachable_configurations(machine, 4, limit=300), (None, 2, 5))
    return checked
