"""Punctuation pairs no merge can join add nothing to the boundary cover (`BoundaryCovers._joined_after`).

Where the tokenizer splits by BPE merges alone and no token holds two punctuation characters side by side,
the split of a block followed by both starts with the split of the block followed by the first (oracle: the
tokenizer's own `encode_ordinary`), and the covers with those pairs left out are the covers with every pair
tried, at every step of random outputs.
"""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_canonical_boundaries import random_drive

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.split import boundary_cover
from stdsl.control.split.boundary_cover import BoundaryCovers, merges_only
from stdsl.control.split.token_spellings import TokenSpellings
from tests.runtime.json_documents import load_task

PUNCTUATION = string.punctuation
TEXT = st.text(alphabet=PUNCTUATION + "ab1 é\n", max_size=8)


def test_smollm2_splits_by_merges_alone_and_tiktoken_does_not(smollm2_tokenizer) -> None:
    from stdsl.model_files.tokenizer import Tokenizer

    assert merges_only(smollm2_tokenizer)
    assert not merges_only(Tokenizer.qwen())
    assert not merges_only(object())


def test_adjacent_pairs_are_the_byte_pairs_inside_tokens(smollm2_tokenizer) -> None:
    token_bytes = vocabulary_of(smollm2_tokenizer).token_bytes
    inside = {b[i:i + 2] for b in token_bytes if b for i in range(len(b) - 1)}
    pairs = TokenSpellings.of(token_bytes).adjacent_pairs
    found = {bytes([code >> 8, code & 0xFF]) for code in pairs.nonzero()[0].tolist()}
    assert found == inside


@settings(max_examples=200, deadline=None)
@given(block=TEXT, first=st.sampled_from(PUNCTUATION), then=st.sampled_from(PUNCTUATION), tail=TEXT)
def test_a_split_never_reaches_across_two_characters_no_token_holds(smollm2_tokenizer, block, first, then,
                                                                    tail) -> None:
    pairs = TokenSpellings.of(vocabulary_of(smollm2_tokenizer).token_bytes).adjacent_pairs
    if pairs[ord(first) * 256 + ord(then)]:
        return
    shorter = smollm2_tokenizer.encode_ordinary(block + first)
    longer = smollm2_tokenizer.encode_ordinary(block + first + then + tail)
    assert longer[: len(shorter)] == shorter


def covers_of_random_outputs(automaton, tokenizer, seed: int) -> dict:
    """The boundary cover of every configuration a few random outputs met (punctuation-heavy: `random_drive`)."""
    rng = random.Random(seed)
    for _ in range(4):
        control = random_drive(automaton, tokenizer, rng, steps=rng.randint(5, 40))
    return dict(control.controller.planner.covers._cover_cache)


@pytest.mark.parametrize("name", ["person", "classification", "event"])
def test_covers_without_unjoinable_pairs_are_the_covers_with_every_pair(name, smollm2_tokenizer,
                                                                        monkeypatch) -> None:
    schema = load_task(name)["schema"]
    monkeypatch.setattr(boundary_cover, "_PARTS", boundary_cover.CacheKind("fresh lookahead parts"))
    pruned = covers_of_random_outputs(build_automaton(schema_to_ir(schema)), smollm2_tokenizer, seed=7)
    monkeypatch.setattr(BoundaryCovers, "_joined_after", lambda self, first: None)
    monkeypatch.setattr(boundary_cover, "_PARTS", boundary_cover.CacheKind("fresh lookahead parts"))
    every = covers_of_random_outputs(build_automaton(schema_to_ir(schema)), smollm2_tokenizer, seed=7)
    assert pruned == every
    assert sum(cover is not None for cover in every.values()) > 10
