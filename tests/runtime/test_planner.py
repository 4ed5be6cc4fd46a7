"""The canonical forced planner (Theorem 20, D.3): forced text is committed in the tokenizer's own split.

The main property: drive the controller with a document, sampling the token the tokenizer
itself would emit whenever the constraint leaves a choice; the emitted tokens must spell the
document and equal `tokenizer.encode(document)` (SmolLM2's GGUF tokenizer and Qwen3.5's).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from json_documents import compact, random_instance

from stdsl.compiler import ir
from stdsl.compiler.automaton import build_automaton, compile_regex
from stdsl.compiler.json_schema import schema_to_ir
from stdsl.runtime.constraint_state import ConstraintState, shared_tables, vocabulary_of
from stdsl.runtime.planner import (
    ForcedPlanner,
    Window,
    lead_byte_representatives,
    valid_utf8_prefix,
)

EXTRACTION = Path(__file__).resolve().parents[2] / ".." / "shared" / "tasks" / "extraction"
TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")


def load_task(name: str) -> dict:
    path = EXTRACTION / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"shared extraction task {path} is not available")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def qwen_tokenizer():
    from stdsl.runtime.tokenizer import Tokenizer

    return Tokenizer.qwen()


@pytest.fixture(scope="module")
def schema_automata() -> dict:
    return {name: build_automaton(schema_to_ir(load_task(name)["schema"])) for name in TASKS}


def teacher_tokens(automaton, tokenizer, document: str) -> list[int]:
    """Drive the controller with `document`: at each sampling step take tokenizer.encode's next token."""
    vocab = vocabulary_of(tokenizer)
    control = ConstraintState(automaton, tokenizer, vocab)
    target = tokenizer.encode(document)
    control.start()
    while not control.finished:
        allowed = control.mask()
        k = len(control.tokens)
        token = target[k] if k < len(target) else int(vocab.eos_ids[0])
        assert allowed[token], (
            f"the tokenizer's token {tokenizer.decode([token])!r} is masked after {control.decided!r} "
            f"(pending {control.pending!r}, cover {control.cover})"
        )
        control.advance(token)
    assert control.accepting
    assert control.decided == document.encode("utf-8")
    return control.tokens


def documents(name: str, count: int, seed: int) -> list[str]:
    task = load_task(name)
    rng = random.Random(seed)
    return [compact(task["gold"])] + [compact(random_instance(rng, task["schema"])) for _ in range(count)]


def check_documents(automaton, tokenizer, name: str, count: int, seed: int) -> None:
    for document in documents(name, count, seed):
        assert automaton.accepts(document.encode("utf-8")), document
        tokens = teacher_tokens(automaton, tokenizer, document)
        assert tokens == tokenizer.encode(document), document


@pytest.mark.parametrize("name", TASKS)
def test_documents_follow_the_canonical_split_smollm2(name, schema_automata, smollm2_tokenizer) -> None:
    check_documents(schema_automata[name], smollm2_tokenizer, name, 10, seed=TASKS.index(name))


@pytest.mark.parametrize("name", TASKS)
def test_documents_follow_the_canonical_split_qwen(name, schema_automata, qwen_tokenizer) -> None:
    check_documents(schema_automata[name], qwen_tokenizer, name, 3, seed=10 + TASKS.index(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_many_documents_follow_the_canonical_split(name, schema_automata, smollm2_tokenizer, qwen_tokenizer) -> None:
    check_documents(schema_automata[name], smollm2_tokenizer, name, 150, seed=100 + TASKS.index(name))
    check_documents(schema_automata[name], qwen_tokenizer, name, 40, seed=200 + TASKS.index(name))


@pytest.mark.parametrize("name", TASKS)
def test_a_fully_forced_document_is_encoded_canonically(name, smollm2_tokenizer, qwen_tokenizer) -> None:
    for tokenizer in (smollm2_tokenizer, qwen_tokenizer):
        for document in documents(name, 2, seed=7):
            automaton = build_automaton(ir.literal(document))
            control = ConstraintState(automaton, tokenizer, vocabulary_of(tokenizer))
            assert control.start() == tokenizer.encode(document)
            assert control.finished and control.accepting


def test_last_block_is_held_back_with_a_cover(smollm2_tokenizer, schema_automata) -> None:
    tokenizer = smollm2_tokenizer
    control = ConstraintState(schema_automata["person"], tokenizer, vocabulary_of(tokenizer))
    committed = control.start()
    assert committed == tokenizer.encode('{"name')
    assert control.pending == b'":"'
    assert control.cover == 3
    allowed = control.mask()
    assert allowed[tokenizer.encode('":"')[0]]
    assert not allowed[tokenizer.encode('"')[0]]
    assert tokenizer.encode('":""')[0] in control.cover_exempt


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
