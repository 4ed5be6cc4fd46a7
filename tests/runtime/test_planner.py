"""The canonical forced planner (Theorem 20, D.3): forced text is committed in the tokenizer's own split.

Unit tests of the planner's pieces (fully forced text, the boundary cover, the stable tail,
healing, byte fallbacks); the property at every forced/sampled boundary is in
test_canonical_boundaries.py.
"""

from __future__ import annotations

import random

import pytest
from json_documents import compact, load_task, random_instance

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.runtime.control.constraint_state import ConstraintState, shared_tables, vocabulary_of
from stdsl.runtime.control.planner import (
    ForcedPlanner,
    Window,
    lead_byte_representatives,
    valid_utf8_prefix,
)

TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")


@pytest.fixture(scope="module")
def qwen_tokenizer():
    from stdsl.runtime.model.tokenizer import Tokenizer

    return Tokenizer.qwen()


@pytest.fixture(scope="module")
def schema_automata() -> dict:
    return {name: build_automaton(schema_to_ir(load_task(name)["schema"])) for name in TASKS}


def documents(name: str, count: int, seed: int) -> list[str]:
    task = load_task(name)
    rng = random.Random(seed)
    return [compact(task["gold"])] + [compact(random_instance(rng, task["schema"])) for _ in range(count)]


@pytest.mark.parametrize("name", TASKS)
def test_a_fully_forced_document_is_encoded_canonically(name, smollm2_tokenizer, qwen_tokenizer) -> None:
    for tokenizer in (smollm2_tokenizer, qwen_tokenizer):
        for document in documents(name, 2, seed=7):
            automaton = build_automaton(ir.literal(document))
            control = ConstraintState(automaton, tokenizer, vocabulary_of(tokenizer))
            assert control.start() == tokenizer.encode(document)
            assert control.finished and control.accepting


def test_the_cover_spans_a_held_back_one_token_block(smollm2_tokenizer, schema_automata) -> None:
    """D.3: before a string value SmolLM2 writes `":"` for letters but `":` `".` for a leading `.`; the
    cover admits only `":"` (taken without the model), and the leading `.` stays admitted after it."""
    tokenizer = smollm2_tokenizer
    control = ConstraintState(schema_automata["person"], tokenizer, vocabulary_of(tokenizer))
    assert control.start() == tokenizer.encode('{"name":"')
    assert control.pending == b"" and control.cover is not None and control.window.spanned
    allowed = control.mask()
    for text in ("Maria", ".", "'"):
        assert allowed[tokenizer.encode(text)[0]], text
    planner = control.planner
    held = planner.boundary_cover(Window(), b'":"', control.state)
    assert held is not None and held.short == {tokenizer.encode('":"')[0]} and not held.after


def test_the_cover_keeps_the_tokenizers_split_of_a_held_back_key_block(qwen_tokenizer) -> None:
    """Qwen writes `":-` before a negative number and `":` before a digit: after `":` only a digit may follow."""
    tokenizer = qwen_tokenizer
    automaton = build_automaton(schema_to_ir({"type": "object", "properties": {"n": {"type": "integer"}},
                                              "required": ["n"]}))
    control = ConstraintState(automaton, tokenizer, vocabulary_of(tokenizer))
    control.start()
    assert control.pending == b'":'
    allowed = control.mask()
    assert allowed[tokenizer.encode('":')[0]] and allowed[tokenizer.encode('":-')[0]]
    control.advance(tokenizer.encode('":')[0])
    allowed = control.mask()
    assert allowed[tokenizer.encode("7")[0]] and not allowed[tokenizer.encode("-")[0]]


def test_stable_tail_commits_the_last_block(smollm2_tokenizer) -> None:
    tokenizer = smollm2_tokenizer
    vocab = vocabulary_of(tokenizer)
    certified = ConstraintState(compile_regex("x=[0-9]+"), tokenizer, vocab)
    assert certified.start() == tokenizer.encode("x=") and certified.pending == b""
    merging = ConstraintState(compile_regex("x=([0-9]+|=)"), tokenizer, vocab)
    assert merging.start() == tokenizer.encode("x") and merging.pending == b"="


def test_healing_replaces_a_sampled_token_that_merges_with_forced_text(smollm2_tokenizer) -> None:
    tokenizer = smollm2_tokenizer
    vocab = vocabulary_of(tokenizer)
    automaton = compile_regex("Mariaxyz|Bob")
    sampled = tokenizer.encode("M")[0]
    plan = ForcedPlanner(automaton, tokenizer, vocab.token_bytes).plan(Window(), 0, b"", sampled)
    assert plan.healed and list(plan.tokens) == tokenizer.encode("Mariaxyz")
    unhealed = ForcedPlanner(automaton, tokenizer, vocab.token_bytes, healing=False).plan(Window(), 0, b"", sampled)
    assert not unhealed.healed and unhealed.tokens[0] == sampled
    assert b"".join(vocab.bytes_of(t) for t in unhealed.tokens) == b"Mariaxyz"


def test_forced_text_starting_inside_a_character_is_spelled_by_bytes(smollm2_tokenizer) -> None:
    tokenizer = smollm2_tokenizer
    vocab = vocabulary_of(tokenizer)
    planner = ForcedPlanner(compile_regex("中x|b"), tokenizer, vocab.token_bytes, healing=False)
    lead = vocab.token_bytes.index(b"\xe4")
    plan = planner.plan(Window(), 0, b"", lead)
    assert b"".join(vocab.bytes_of(t) for t in plan.tokens) == "中x".encode()
    assert plan.finished


@pytest.mark.parametrize(
    "data,expected",
    [(b"", 0), (b"abc", 3), ("é".encode(), 2), ("é".encode()[:1], 0), (b"a\xe4\xb8", 1), (b"a\xffb", 1)],
)
def test_valid_utf8_prefix(data: bytes, expected: int) -> None:
    assert valid_utf8_prefix(data) == expected


def test_lead_byte_representatives_cover_their_lead_byte() -> None:
    for lead in list(range(0xC2, 0xF5)):
        reps = lead_byte_representatives(lead)
        assert reps, hex(lead)
        assert all(ch.encode("utf-8")[0] == lead for ch in reps)
    assert lead_byte_representatives(0x80) == ()
    assert shared_tables is not None
