"""XGrammar as a driver of the shared decode loop (`decode.run_loop`): masks only, or with jump-forward tokens.

The vocabulary is given RAW: each id's bytes from the model's own tokenizer, the special ids as empty
bytes so XGrammar classifies them as special (never text), eos as the stop token. JSON is compact
(`any_whitespace=False`, separators `,` `:`), as for llguidance and stdsl.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from decode import Driver
from peers import bitmask_to_bool


class XGrammarDriver(Driver):
    """XGrammar `GrammarMatcher`; `fast_forward` feeds `find_jump_forward_tokens` after each sampled token."""

    def __init__(self, model: Any, fast_forward: bool) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.fast_forward = fast_forward
        self.name = "xgrammar_ff" if fast_forward else "xgrammar"
        self.vocab_size = model.vocab_size
        specials = set(model.tokenizer.special_tokens.values())
        stop = [int(t) for t in model.tokenizer.eos_ids]
        raw = [b"" if i in specials or i in stop else data for i, data in enumerate(model.tokenizer.token_bytes)]
        self.info = xgrammar.TokenizerInfo(raw, xgrammar.VocabType.RAW, vocab_size=self.vocab_size,
                                           stop_token_ids=stop, add_prefix_space=False)
        self.compiler = xgrammar.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.bits = np.full(xgrammar.get_bitmask_shape(1, self.vocab_size), -1, dtype=np.int32)
        self.compiled: Any = None

    def compile(self, schema: dict) -> None:
        self.compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                          separators=(",", ":"))
        self.matcher = self.xgr.GrammarMatcher(self.compiled)

    def _accept(self, token: int) -> None:
        if not self.matcher.accept_token(token):
            raise RuntimeError(f"xgrammar rejected token {token}")

    def _forced(self) -> list[int]:
        if not self.fast_forward:
            return []
        forced = [int(t) for t in self.matcher.find_jump_forward_tokens()]
        for token in forced:
            self._accept(token)
        return forced

    def start(self) -> list[int]:
        return self._forced()

    def mask(self) -> np.ndarray:
        self.matcher.fill_next_token_bitmask(self.bits, 0)
        return bitmask_to_bool(self.bits, self.vocab_size)

    def advance(self, token: int) -> list[int]:
        self._accept(token)
        return self._forced()

    def stopped(self) -> bool:
        return bool(self.matcher.is_terminated())

    def grammar_bytes(self) -> int:
        """XGrammar's own count of the compiled grammar's memory (`CompiledGrammar.memory_size_bytes`)."""
        return int(self.compiled.memory_size_bytes)
