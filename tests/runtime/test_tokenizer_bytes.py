"""`Tokenizer.token_bytes` on a Hugging Face backend comes from the kernels' one byte recovery.

A sentencepiece-style tokenizer (Metaspace, <0xNN> byte fallback) is where a recovery that asks
the decoder one token at a time goes wrong (the decoder strips the leading space and cannot show a
lone UTF-8 byte), so the tokens' bytes are checked against the tokenizer's own decoding of whole texts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.kernels.vocab_sources import vocabulary_from_hf
from stdsl.model_files.tokenizer import Tokenizer

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def sentencepiece_like() -> Tokenizer:
    from tokenizers import decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for piece in ["▁", "a", "b", "▁a", "ab", "▁ab"]:
        vocab[piece] = len(vocab)
    model = models.BPE(vocab=vocab, merges=[("▁", "a"), ("a", "b"), ("▁a", "b")], byte_fallback=True,
                       unk_token="<unk>")
    hf = tokenizers.Tokenizer(model)
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    hf.add_special_tokens(["<unk>", "<s>", "</s>"])
    return Tokenizer(hf=hf, eos_ids=(2,))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab é€😀\n"), min_size=1, max_size=30))
def test_token_bytes_spell_what_the_tokenizer_decodes(sentencepiece_like: Tokenizer, text: str) -> None:
    """Metaspace writes a space before the text unless it starts with one; the decoder strips one leading space."""
    ids = sentencepiece_like.encode(text)
    spelled = b"".join(sentencepiece_like.token_bytes[i] for i in ids)
    assert spelled == (text if text.startswith(" ") else " " + text).encode("utf-8")
    assert spelled[:1] == b" " and spelled[1:] == sentencepiece_like.decode(ids).encode("utf-8")


def test_specials_are_their_text_and_the_rest_is_the_kernels_vocabulary(sentencepiece_like: Tokenizer) -> None:
    token_bytes = sentencepiece_like.token_bytes
    vocab = vocabulary_from_hf(sentencepiece_like.hf, eos_ids=sentencepiece_like.eos_ids)
    assert len(token_bytes) == sentencepiece_like.vocab_size == vocab.size
    specials = set(sentencepiece_like.special_tokens.values())
    assert specials == {0, 1, 2}
    assert [token_bytes[i] for i in sorted(specials)] == [b"<unk>", b"<s>", b"</s>"]
    assert all(token_bytes[i] == vocab.token_bytes[i] for i in range(vocab.size) if i not in specials)
    assert token_bytes[sentencepiece_like.hf.token_to_id("<0xE2>")] == b"\xe2"
