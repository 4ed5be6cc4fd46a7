"""The canonical forced planner (Theorem 20, D.3): forced text is committed in the tokenizer's own split.

Unit tests of the planner's pieces (fully forced text, the boundary cover, the stable tail,
healing, byte fallbacks); the property at every forced/sampled boundary is in
test_canonical_boundaries.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.split.boundary_cover import BoundaryCover
from stdsl.control.split.characters import lead_byte_representatives, starts_a_character
from stdsl.control.split.planner import ForcedPlanner, Window, valid_utf8_prefix
from tests.runtime.json_documents import compact, load_task, random_instance

TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")


@pytest.fixture(scope="module")
def qwen_tokenizer():
    from stdsl.model_files.tokenizer import Tokenizer

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
            control = RowDriver(automaton, tokenizer, vocabulary_of(tokenizer))
            assert control.start() == tokenizer.encode(document)
            assert control.finished and control.accepting


def test_the_cover_spans_a_held_back_one_token_block(smollm2_tokenizer, schema_automata) -> None:
    """D.3: before a string value SmolLM2 writes `":"` for letters but `":` `".` for a leading `.`; the
    cover admits only `":"` (taken without the model), and the leading `.` stays admitted after it."""
    tokenizer = smollm2_tokenizer
    control = RowDriver(schema_automata["person"], tokenizer, vocabulary_of(tokenizer))
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
    control = RowDriver(automaton, tokenizer, vocabulary_of(tokenizer))
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
    certified = RowDriver(compile_regex("x=[0-9]+"), tokenizer, vocab)
    assert certified.start() == tokenizer.encode("x=") and certified.pending == b""
    merging = RowDriver(compile_regex("x=([0-9]+|=)"), tokenizer, vocab)
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


def test_a_byte_starts_a_character_exactly_when_it_has_representatives() -> None:
    assert [starts_a_character(b) for b in range(256)] == [bool(lead_byte_representatives(b)) for b in range(256)]


def drive_gold(automaton, tokenizer, document: str) -> list:
    """Feed `document` in the tokenizer's split (the longest admitted token that spells it where the cover
    forbids that) and return the boundary cover of every sampling configuration on the way."""
    vocab = vocabulary_of(tokenizer)
    control = RowDriver(automaton, tokenizer, vocab)
    data = document.encode("utf-8")
    starts: dict[int, int] = {}
    offset = 0
    for token in tokenizer.encode_ordinary(document):
        starts[offset] = token
        offset += len(tokenizer.token_bytes[token])
    control.start()
    covers = [control.cover]
    while not control.finished:
        allowed = control.mask()
        at = len(control.committed)
        token = starts.get(at, -1) if at < len(data) else int(vocab.eos_ids[0])
        if token < 0 or not allowed[token]:
            fitting = [t for t in np.flatnonzero(allowed) if data.startswith(vocab.token_bytes[t] or b"\xff", at)]
            token = max(fitting, key=lambda t: len(vocab.token_bytes[t]))
        control.advance(int(token))
        covers.append(control.cover)
    assert control.accepting and control.decided == data
    return covers


def test_covers_are_the_same_from_the_tokenizers_shared_parts_as_computed_afresh(smollm2_tokenizer,
                                                                                   monkeypatch) -> None:
    """Lookahead parts and splits are shared by every grammar of a tokenizer: a grammar whose covers come
    from parts other grammars left behind gets the covers it computes with nothing shared."""
    from stdsl.caches import CacheKind
    from stdsl.control.split import boundary_cover, split_memo

    fresh = {}
    for name in TASKS:
        monkeypatch.setattr(boundary_cover, "_PARTS", CacheKind("fresh lookahead parts"))
        monkeypatch.setattr(split_memo, "_MEMOS", CacheKind("fresh split memos"))
        automaton = build_automaton(schema_to_ir(load_task(name)["schema"]))
        fresh[name] = drive_gold(automaton, smollm2_tokenizer, documents(name, 0, seed=1)[0])
    monkeypatch.setattr(boundary_cover, "_PARTS", CacheKind("fresh lookahead parts"))
    for name in reversed(TASKS):
        automaton = build_automaton(schema_to_ir(load_task(name)["schema"]))
        assert drive_gold(automaton, smollm2_tokenizer, documents(name, 0, seed=1)[0]) == fresh[name], name


def cover_mask_oracle(token_bytes, cover: BoundaryCover) -> np.ndarray:
    """`BoundaryCover`'s admitted tokens from its definition: `short`, or longer than `held` with the byte at
    `held` in `after`; never `excluded`; and for each `live` byte no admitted token starts with at `held`,
    every token that does."""
    lengths = np.array([len(b or b"") for b in token_bytes])
    at_held = np.array([(b or b"")[cover.held] if len(b or b"") > cover.held else -1 for b in token_bytes])
    longer = lengths > cover.held
    allowed = np.isin(np.arange(len(token_bytes)), list(cover.short))
    allowed |= longer & np.isin(at_held, list(cover.after))
    allowed[list(cover.excluded)] = False
    for byte in cover.live:
        starting = longer & (at_held == byte)
        if not allowed[starting].any():
            allowed |= starting
    return allowed


@settings(max_examples=10, deadline=None)
@given(held=st.integers(0, 4), after=st.sets(st.integers(0, 255), max_size=40),
       live=st.sets(st.integers(0, 255), max_size=40), seed=st.integers(0, 2**16))
def test_cover_masks_follow_their_definition(smollm2_tokenizer, held, after, live, seed) -> None:
    vocab = vocabulary_of(smollm2_tokenizer)
    rng = random.Random(seed)
    short = frozenset(rng.sample(range(vocab.size), 5))
    excluded = frozenset(rng.sample(range(vocab.size), 200))
    cover = BoundaryCover(held, short, frozenset(after), False, excluded, frozenset(live))
    planner = ForcedPlanner(compile_regex("x"), smollm2_tokenizer, vocab.token_bytes)
    assert np.array_equal(planner.cover_mask(cover), cover_mask_oracle(vocab.token_bytes, cover))


@settings(max_examples=12, deadline=None)
@given(pattern=st.sampled_from(["[a-z ]*", "[a-z ]*=[0-9]+;[^\\n]*", "(ab|c)*xyz[a-z .]*", "[^\"]*\"[a-z]{2}\""]),
       seed=st.integers(0, 10_000))
def test_an_unforced_state_plans_the_sampled_token_alone_as_the_full_split_does(smollm2_tokenizer, pattern,
                                                                                 seed) -> None:
    """Where no byte is ever forced from a state on, `plan` skips re-splitting the window: along random walks its
    plans (tokens, states, held-back bytes, covers, ends) equal those of the planner that always re-splits."""
    vocab = vocabulary_of(smollm2_tokenizer)
    automaton = compile_regex(pattern)
    fast = ForcedPlanner(automaton, smollm2_tokenizer, vocab.token_bytes)
    full = ForcedPlanner(automaton, smollm2_tokenizer, vocab.token_bytes)
    full.__dict__["_forcing_reachable"] = None  # the cached property read as for a pushdown machine: never unforced
    rng = random.Random(seed)
    spelled = [i for i, b in enumerate(vocab.token_bytes) if b]
    first = fast.plan(Window(), 0, b"", None)
    assert first == full.plan(Window(), 0, b"", None)
    fast_at = full_at = first
    skipped = 0
    for _ in range(40):
        if fast_at.finished:
            break
        live = [t for t in rng.sample(spelled, 2000)
                if (after := automaton.step(fast_at.state, vocab.token_bytes[t])) >= 0 and fast.live_count[after] > 0]
        if fast_at.cover is not None:
            live = [t for t in live if fast.cover_mask(fast_at.cover)[t]]
        if not live:
            break
        token = rng.choice(live)
        skipped += not fast_at.pending and fast_at.window.forced_end == 0 and fast.unforced(fast_at.state)
        fast_at = fast.plan(fast_at.window, fast_at.state, fast_at.pending, token)
        full_at = full.plan(full_at.window, full_at.state, full_at.pending, token)
        assert (fast_at.tokens, fast_at.state, fast_at.pending, fast_at.cover, fast_at.finished, fast_at.healed,
                fast_at.decided) == (full_at.tokens, full_at.state, full_at.pending, full_at.cover, full_at.finished,
                                     full_at.healed, full_at.decided)
    assert skipped or pattern != "[a-z ]*"  # free text: every step takes the shortcut
