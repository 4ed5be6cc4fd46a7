"""Build a Hugging Face `tokenizers.Tokenizer` from GGUF tokenizer metadata: byte-level BPE or SentencePiece BPE.

The byte-level pre-tokenizer follows llama.cpp's rule for `tokenizer.ggml.pre` (e.g. `smollm` splits every
digit on its own before the GPT-2 regex), which transformers' GGUF import ignores. SentencePiece vocabularies
(`tokenizer.ggml.model = "llama"`, Gemma's and Llama 2's) list no merges: they are rebuilt from the vocabulary.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as HFTokenizer

from stdsl.errors import StdslError

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

DIGITS_THEN_GPT2 = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva")
PLAIN_GPT2 = ("default", "gpt2", "gpt-2", "mpt", "olmo", "jais")
LLAMA3 = ("llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe")
QWEN2 = ("qwen2", "deepseek-r1-qwen")

TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4
SPIECE_SPACE = "\u2581"


class GGUFTokenizerError(StdslError):
    """GGUF tokenizer metadata is missing or describes a tokenizer this builder does not support."""


def pre_tokenizer_for(pre: str) -> Any:
    """The `tokenizers` pre-tokenizer matching llama.cpp's regexes for `tokenizer.ggml.pre`."""
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre in DIGITS_THEN_GPT2:
        return pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        )
    if pre in PLAIN_GPT2:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    pattern = {**dict.fromkeys(LLAMA3, LLAMA3_PATTERN), **dict.fromkeys(QWEN2, QWEN2_PATTERN)}.get(pre)
    if pattern is None:
        supported = ", ".join(DIGITS_THEN_GPT2 + PLAIN_GPT2 + LLAMA3 + QWEN2)
        raise GGUFTokenizerError(f"GGUF tokenizer.ggml.pre = {pre!r} is not supported (supported: {supported})")
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"), byte_level])


def hf_tokenizer_from_gguf(metadata: Mapping[str, Any]) -> HFTokenizer:
    """A `tokenizers.Tokenizer` from `tokenizer.ggml.*` metadata: byte-level BPE (`gpt2`) or SentencePiece (`llama`)."""
    model = metadata.get("tokenizer.ggml.model")
    if model == "llama":
        return sentencepiece_tokenizer(metadata)
    if model != "gpt2":
        raise GGUFTokenizerError(
            f"GGUF tokenizer.ggml.model = {model!r} is not supported (byte-level BPE 'gpt2', SentencePiece 'llama')"
        )
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        if key not in metadata:
            raise GGUFTokenizerError(f"GGUF metadata lacks {key}")
    tokens = [str(t) for t in metadata["tokenizer.ggml.tokens"]]
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise GGUFTokenizerError("GGUF tokenizer.ggml.tokens has duplicate entries")
    merges: list[tuple[str, str]] = []
    for number, merge in enumerate(metadata["tokenizer.ggml.merges"]):
        left, space, right = str(merge).partition(" ")
        if not space:
            raise GGUFTokenizerError(f"GGUF tokenizer.ggml.merges[{number}] = {merge!r} is not 'left right'")
        merges.append((left, right))
    tokenizer = HFTokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizer_for(str(metadata.get("tokenizer.ggml.pre", "default")))
    tokenizer.decoder = decoders.ByteLevel()
    token_types = metadata.get("tokenizer.ggml.token_type")
    if token_types is not None:
        kinds = [int(kind) for kind in token_types]
        control = [AddedToken(tokens[i], special=True, normalized=False)
                   for i, k in enumerate(kinds) if k == TOKEN_TYPE_CONTROL]
        user = [AddedToken(tokens[i], normalized=False) for i, k in enumerate(kinds) if k == TOKEN_TYPE_USER_DEFINED]
        tokenizer.add_special_tokens(control)
        tokenizer.add_tokens(user)
    tokenizer.post_processor = _bos_eos_processor(metadata, tokens)
    return tokenizer


def sentencepiece_merges(pieces: list[str]) -> list[tuple[str, str]]:
    """BPE merges implied by a SentencePiece vocabulary: every split of a piece into two pieces of the vocabulary,
    earlier pieces first, longer left part first (transformers' order; Gemma's scores do not follow merge order)."""
    vocab = set(pieces)
    merges: list[tuple[str, str]] = []
    for piece in pieces:
        merges.extend((piece[:cut], piece[cut:]) for cut in range(len(piece) - 1, 0, -1)
                      if piece[:cut] in vocab and piece[cut:] in vocab)
    return merges


def sentencepiece_tokenizer(metadata: Mapping[str, Any]) -> HFTokenizer:
    """SentencePiece BPE with byte fallback (`<0xNN>` pieces), spaces as "▁" and no added prefix space.

    A piece of two or more spaces is stored with real spaces; it is respelled in "▁" so merges reach it.
    Control and unused pieces become special added tokens, user-defined ones (e.g. HTML tags) plain added tokens.
    """
    if "tokenizer.ggml.tokens" not in metadata:
        raise GGUFTokenizerError("GGUF metadata lacks tokenizer.ggml.tokens")
    if metadata.get("tokenizer.ggml.add_space_prefix", False):
        raise GGUFTokenizerError("GGUF SentencePiece tokenizers with add_space_prefix are not supported")
    tokens = [str(t) for t in metadata["tokenizer.ggml.tokens"]]
    pieces = [SPIECE_SPACE * len(t) if t and not t.strip(" ") else t for t in tokens]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    if len(vocab) != len(pieces):
        raise GGUFTokenizerError("GGUF tokenizer.ggml.tokens has duplicate entries")
    unk_id = metadata.get("tokenizer.ggml.unknown_token_id")
    unk = pieces[int(unk_id)] if unk_id is not None else None
    tokenizer = HFTokenizer(models.BPE(vocab=vocab, merges=sentencepiece_merges(pieces), unk_token=unk,
                                       fuse_unk=True, byte_fallback=True))
    tokenizer.normalizer = normalizers.Replace(" ", SPIECE_SPACE)
    tokenizer.decoder = decoders.Sequence([decoders.Replace(SPIECE_SPACE, " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    kinds = [int(kind) for kind in metadata.get("tokenizer.ggml.token_type", ())]
    tokenizer.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                  for i, k in enumerate(kinds) if k == TOKEN_TYPE_CONTROL])
    tokenizer.add_tokens([AddedToken(tokens[i], normalized=False)
                          for i, k in enumerate(kinds) if k == TOKEN_TYPE_USER_DEFINED and tokens[i] == pieces[i]])
    tokenizer.post_processor = _bos_eos_processor(metadata, pieces)
    return tokenizer


def _bos_eos_processor(metadata: Mapping[str, Any], tokens: list[str]) -> Any:
    """Add BOS/EOS around encodings with `add_special` when the GGUF asks for it (add_bos_token, ...)."""
    single = "$A"
    specials = []
    for role, where in (("bos", "{} $A"), ("eos", "$A {}")):
        token_id = metadata.get(f"tokenizer.ggml.{role}_token_id")
        if metadata.get(f"tokenizer.ggml.add_{role}_token") and token_id is not None:
            single = where.format(tokens[int(token_id)]).replace("$A", single)
            specials.append((tokens[int(token_id)], int(token_id)))
    if not specials:
        return None
    return processors.TemplateProcessing(single=single, special_tokens=specials)
