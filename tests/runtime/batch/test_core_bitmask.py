"""The packed bitmask the core uploads at each draw equals the token table of each drawing row's configuration.

The oracle walks every token's bytes through the row's byte machine (the DFA, or the pushdown machine with its
stack cap) from the configuration it samples at, by brute force over a trie of the vocabulary: a token is
admissible iff its bytes leave the machine alive, eos iff the configuration accepts; then, as the split rules
say, tokens must agree with forced text held back, and a boundary cover narrows the step unless it would leave
nothing. Where the token budget has shaped the output, the upload must lie inside that table and equal the
controller's mask.
Batches mix DFA and pushdown rows that end at different steps, so rows leave and the bitmask's rows close up.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import stdsl
import stdsl.runtime.batch.core as core_module
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.options import DecodeOptions

CONSTRAINTS: list[Any] = [
    stdsl.Regex("(yes|no|maybe)!"),
    stdsl.Regex("[a-c]{0,5}(x|yz)?"),
    stdsl.Regex(r"-?[0-9]{1,3}(\.[0-9]{1,2})?"),
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False},
    {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
    {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"},
                                                           "maxItems": 1}},
                     "required": ["k"], "additionalProperties": False}}, "$ref": "#/$defs/n"},
]


PUSHDOWN_FROM = 4
"""The constraints from this index on are recursive (a pushdown machine, its stack capped at `MAX_DEPTH`)."""
MAX_DEPTH = 3
MAX_TOKENS = 40


@cache
def compiled(index: int) -> Any:
    if index >= PUSHDOWN_FROM:
        return compile_recursive(CONSTRAINTS[index], max_depth=MAX_DEPTH)
    return stdsl.compile(CONSTRAINTS[index])


Trie = dict[int, tuple[Any, list[int]]]


@cache
def vocabulary_trie(vocab: Vocabulary) -> Trie:
    """The vocabulary's spelled tokens as a byte trie: byte -> (child trie, ids of the tokens ending there)."""
    root: Trie = {}
    for token in range(vocab.size):
        spelled = vocab.token_bytes[token]
        if not spelled or vocab.eos[token]:
            continue
        node = root
        for k, byte in enumerate(spelled):
            child = node.setdefault(byte, ({}, []))
            if k == len(spelled) - 1:
                child[1].append(token)
            node = child[0]
    return root


TABLES: dict[tuple[int, int], np.ndarray] = {}


def token_table(machine: Any, vocab: Vocabulary, state: int) -> np.ndarray:
    """bool (V,): the tokens whose bytes leave `machine` alive from `state` (brute force over the trie; eos off)."""
    key = (id(machine), state)
    if key not in TABLES:
        table = np.zeros(vocab.size, dtype=bool)
        stack = [(state, vocabulary_trie(vocab))]
        while stack:
            at, node = stack.pop()
            for byte, (child, ends) in node.items():
                reached = machine.step(at, bytes([byte]))
                if reached < 0:
                    continue
                table[ends] = True
                stack.append((reached, child))
        TABLES[key] = table
    return TABLES[key]


def unpacked(words: np.ndarray) -> np.ndarray:
    """bool (W * 32,) of one bitmask row."""
    return np.unpackbits(words.astype("<i4").view(np.uint8), bitorder="little").astype(bool)


class RecordingCore(BatchCore):
    """A core that notes, at each draw, each drawing row's controller and configuration."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.draws: list[list[tuple[Any, Any]]] = []

    def _draw(self, drawing: list[int], finished: list[int]) -> list[int]:
        if drawing:
            self.draws.append([(self._rows[i].controller, self._rows[i].log.configuration)
                               for i in drawing])
        return super()._draw(drawing, finished)

    def _sample_ahead(self) -> None:
        self.draws.append([(row.controller, row.log.configuration) for row in self._rows])
        super()._sample_ahead()


@example(picks=[(1, 1), (2, 2), (0, 3)], max_rows=3, cancel=(0, 3))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, len(CONSTRAINTS) - 1), st.integers(0, 2**16)), min_size=1,
                      max_size=4),
       max_rows=st.integers(1, 4), cancel=st.none() | st.tuples(st.integers(0, 3), st.integers(1, 6)))
def test_the_uploaded_bitmask_equals_the_token_table_of_every_drawing_row(tiny_model, monkeypatch, picks, max_rows,
                                                                          cancel):
    """`cancel` (row, step): that row is cancelled before that step, so rows after it move up with masks filled."""
    uploads: list[np.ndarray] = []
    sample_packed = core_module.sample_packed

    def recording(logits: Any, words: np.ndarray, samplers: Any) -> list[int]:
        uploads.append(words.copy())
        return sample_packed(logits, words, samplers)

    def recording_ahead(logits: Any, words: np.ndarray, samplers: Any) -> Any:
        uploads.append(words.copy())
        return draw_packed(logits, words, samplers)

    draw_packed = core_module.draw_packed
    monkeypatch.setattr(core_module, "sample_packed", recording)
    monkeypatch.setattr(core_module, "draw_packed", recording_ahead)
    core = RecordingCore(tiny_model, max_rows=max_rows, prompt_cache_bytes=0)
    handles, uids = [], []
    for k, (index, seed) in enumerate(picks):
        handles.append(RowHandle(lambda: None))
        request = prepare_request(tiny_model, f"Row {k}:", compiled(index),
                                  DecodeOptions.of(temperature=1.0, seed=seed, max_tokens=MAX_TOKENS))
        uids.append(core.insert(request, handles[-1]))
    steps = 0
    while core.busy:
        steps += 1
        if cancel is not None and cancel[1] == steps and cancel[0] < len(uids):
            core.remove(uids[cancel[0]])
        core.step()
    for k, handle in enumerate(handles):
        if cancel is None or k != cancel[0]:
            assert handle.result().finish_reason in ("eos", "stop", "length")
    assert len(uploads) == len(core.draws) > 0
    exact = 0
    for words, rows in zip(uploads, core.draws):
        assert words.shape[0] == len(rows) and words.dtype == np.int32
        for row_words, (controller, configuration) in zip(words, rows):
            vocab = controller.vocab
            got = unpacked(row_words)
            assert not got[vocab.size:].any()
            got = got[: vocab.size]
            table, ending = split_rules(controller, configuration,
                                        token_table(controller.machine, vocab, configuration.state))
            eos = got[vocab.eos_ids]
            got[vocab.eos_ids] = False
            if configuration.budget_shaped:
                assert not (got & ~table).any() and not (eos & ~ending).any(), configuration
                assert np.array_equal(unpacked(row_words)[: vocab.size], controller.mask(configuration))
            else:
                assert np.array_equal(got, table) and eos.all() == ending and eos.any() == ending, configuration
                exact += 1
    assert exact > 0


def split_rules(controller: Any, configuration: Any, table: np.ndarray) -> tuple[np.ndarray, bool]:
    """`table` under the rules of the canonical split (held-back bytes to agree with, the boundary cover that yields
    where it would leave no token), and whether eos is admissible."""
    allowed = table.copy()
    if configuration.pending:
        allowed &= controller.planner.spellings.agreeing_with(configuration.pending)
    ending = controller.accepting(configuration)
    cover = configuration.cover
    if cover:
        covered = allowed & controller.planner.cover_mask(cover)
        if covered.any() or (ending and cover.eos):
            allowed, ending = covered, ending and cover.eos
    return allowed, ending


@pytest.mark.parametrize("index", range(len(CONSTRAINTS)))
def test_each_oracle_constraint_compiles_to_its_kind(index: int) -> None:
    pushdown = getattr(compiled(index), "machine", None) is not None
    assert pushdown == (index >= PUSHDOWN_FROM)
