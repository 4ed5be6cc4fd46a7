"""Pushdown rows by the level pass equal byte-by-byte stepping of every token from every configuration."""

from __future__ import annotations

import json
from collections import deque
from itertools import product

import numpy as np

from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.pushdown.grammar import PushdownGrammar
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.kernels.pushdown.rows import PushdownRows, pushdown_row
from stdsl.kernels.vocabulary import Vocabulary
from tests.compiler.pushdown.test_pushdown import expressions, nested_lists
from tests.data_files import RECURSIVE

Config = tuple[int, tuple[int, ...]]


class ReferenceStepper:
    """C.12's machine on explicit (state, stack) pairs, one byte at a time (the oracle), from the grammar's arrays."""

    def __init__(self, grammar: PushdownGrammar) -> None:
        self.grammar = grammar
        self.moves = grammar.byte_table.tolist()
        self.calls: dict[int, list[tuple[set[int], int, int]]] = {}
        for edge, state in enumerate(grammar.call_state.tolist()):
            callee = int(grammar.call_callee[edge])
            first = set(np.flatnonzero(grammar.first[callee]).tolist())
            entry = (first, int(grammar.starts[callee]), int(grammar.call_return[edge]))
            self.calls.setdefault(state, []).append(entry)
        self.accepting = grammar.accepting.tolist()
        self.final = (grammar.accepting & ~grammar.has_successor).tolist()
        self.completing: dict[Config, bool] = {}

    def step(self, config: Config, byte: int) -> Config | None:
        """The configuration after one byte, or None when the byte is refused."""
        state, stack = config[0], list(config[1])
        while True:
            target = self.moves[state][byte]
            if target >= 0:
                state = target
                break
            entered = [(start, ret) for first, start, ret in self.calls.get(state, []) if byte in first]
            if entered:
                if len(stack) >= self.grammar.max_depth:
                    return None
                stack.append(entered[0][1])
                state = entered[0][0]
                continue
            if self.accepting[state] and stack:
                state = stack.pop()
                continue
            return None
        while self.final[state] and stack:
            state = stack.pop()
        return state, tuple(stack)

    def accepts(self, config: Config) -> bool:
        """Whether the output may end at `config`: its state and every return state accept."""
        return all(self.accepting[q] for q in (config[0], *config[1]))

    def completes(self, config: Config) -> bool:
        """Whether some byte string takes `config` to acceptance within the cap: a search over reachable
        configurations, letting the stack grow at most `extra` above its height, for extra = 0, 1, ... up to the cap."""
        if config not in self.completing:
            self.completing[config] = self._search_completion(config)
        return self.completing[config]

    def _search_completion(self, config: Config) -> bool:
        for extra in range(self.grammar.max_depth - len(config[1]) + 1):
            limit = len(config[1]) + extra
            seen, queue, clipped = {config}, deque([config]), False
            while queue:
                current = queue.popleft()
                if self.accepts(current):
                    return True
                for byte in range(256):
                    stepped = self.step(current, byte)
                    if stepped is None or stepped in seen:
                        continue
                    if len(stepped[1]) > limit:
                        clipped = True
                        continue
                    seen.add(stepped)
                    queue.append(stepped)
            if not clipped:
                return False
        return False

    def run(self, config: Config, data: bytes) -> Config | None:
        """The configuration after `data` (None once refused, or when it can no longer complete within the cap)."""
        for byte in data:
            stepped = self.step(config, byte)
            if stepped is None:
                return None
            config = stepped
        return config if self.completes(config) else None


def assert_row_exact(machine: PushdownMachine, vocab: Vocabulary, config: int,
                     rows: PushdownRows | None = None) -> None:
    """Every token's entry in the row is the configuration byte-by-byte stepping reaches (or dead).

    With `rows`, the row they compose from symbolic rows must be the same.
    """
    row = pushdown_row(machine, config, vocab)
    if rows is not None:
        assert np.array_equal(rows.next_states(config), row), machine.configuration(config)
    explicit = machine.configuration(config)
    oracle = ReferenceStepper(machine.grammar)
    for token, data in enumerate(vocab.token_bytes):
        expected = None if not data or vocab.eos[token] else oracle.run(explicit, data)
        got = None if row[token] < 0 else machine.configuration(int(row[token]))
        assert got == expected, (explicit, data, got, expected)


def small_vocabulary(symbols: str = "[],x") -> Vocabulary:
    """Every string of up to three symbols over the grammar's bytes, plus long pushes and pops, and eos."""
    tokens: list[bytes | None] = [("".join(p)).encode() for n in (1, 2, 3) for p in product(symbols, repeat=n)]
    tokens += [b"[[[[", b"[[[[[", b"]]]]", b"]]]]]", b"],[", b"x],[x", b"((((n", b"n)))", b"+n)]", b"q", None]
    return Vocabulary(tokens, eos_ids=[len(tokens) - 1])


def test_rows_equal_stepping_on_every_configuration_up_to_depth_four() -> None:
    machine = expressions(max_depth=4)
    vocab = small_vocabulary("[],n(+)")
    seen = {machine.start}
    queue = deque([machine.start])
    while queue:
        config = queue.popleft()
        for byte in b"[],n(+)":
            nxt = machine.step_byte(config, byte)
            if nxt >= 0 and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    assert max(machine.depth(c) for c in seen) == 4
    rows = PushdownRows(machine, vocab)
    for config in sorted(seen):
        assert_row_exact(machine, vocab, config, rows)
    assert len(seen) >= 40  # configurations that cannot close within the cap are no longer reached
    assert rows.stats.free_misses <= machine.grammar.num_states and rows.stats.context_misses > 0


def test_row_cache_masks_eos_exactly_at_accepting_configurations() -> None:
    machine = nested_lists()
    vocab = small_vocabulary()
    rows = PushdownRows(machine, vocab, max_rows=2)
    eos = int(vocab.eos_ids[0])
    done = machine.step(machine.start, b"[x]")
    assert rows.mask(done)[eos] and not rows.mask(done).sum() - 1
    middle = machine.step(machine.start, b"[x")
    assert not rows.mask(middle)[eos] and rows.mask(middle)[vocab.token_bytes.index(b"],[")] == 0
    assert rows.mask(middle)[vocab.token_bytes.index(b"]")]
    rows.mask(machine.start)
    assert len(rows) == 2 and rows.nbytes > 0


def sampled_configurations(machine: PushdownMachine, texts: list[bytes], per_text: int) -> list[int]:
    """Configurations after evenly spaced prefixes of accepted texts."""
    out = []
    for text in texts:
        for cut in np.linspace(0, len(text) - 1, per_text).astype(int).tolist():
            out.append(machine.step(machine.start, text[:cut]))
    return out


def recursive_tasks() -> list[tuple[dict, bytes]]:
    """(schema, compact gold text) of the recursive tasks (tests/data/tasks/recursive)."""
    tasks = [json.loads(p.read_text()) for p in sorted(RECURSIVE.glob("*.json"))]
    return [(t["schema"], json.dumps(t["gold"], separators=(",", ":"), ensure_ascii=False).encode()) for t in tasks]


def test_rows_equal_stepping_on_sampled_prefixes_with_smollm2(smollm2_tokenizer) -> None:
    from stdsl.control.special_vocabulary import vocabulary_of

    vocab = vocabulary_of(smollm2_tokenizer)
    for schema, gold in recursive_tasks():
        machine = compile_recursive(schema).machine
        rows = PushdownRows(machine, vocab)
        for config in sampled_configurations(machine, [gold], 8):
            assert_row_exact(machine, vocab, config, rows)


def test_rows_equal_stepping_on_sampled_prefixes_with_qwen() -> None:
    from stdsl.kernels.vocab_sources import qwen_vocabulary

    vocab = qwen_vocabulary()
    for schema, gold in recursive_tasks():
        machine = compile_recursive(schema).machine
        rows = PushdownRows(machine, vocab)
        for config in sampled_configurations(machine, [gold], 3):
            assert_row_exact(machine, vocab, config, rows)
