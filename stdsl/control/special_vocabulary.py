"""The vocabularies constraints decode with: a tokenizer's shared one, and the variant spelling special tokens.

The shared vocabulary of a tokenizer gives special tokens no bytes, so no constraint allows them.
A grammar that names `<|python_tag|>` compiles it to 0xFF · text · 0xFF (`compiler.special_tokens`);
its variant of the vocabulary spells every special token so, and drops the ordinary tokens that
hold a 0xFF byte (no UTF-8 text holds one, so no output loses them), so exactly that token can walk
the spelling and masks, budgets and the forced planner need nothing else. Added tokens that are
not special (ordinary text) and eos tokens are spelled so only where the constraint names them,
in a variant of their own (such an eos token is then an ordinary token of the output). Built once
per tokenizer and set of such names, and only when a constraint uses special tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stdsl.caches import CacheKind
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.special_tokens import SPECIAL_MARK, special_spelling
from stdsl.errors import CompileError
from stdsl.kernels.vocabulary import TokenBytes, Vocabulary

_VOCABULARIES: CacheKind[Vocabulary] = CacheKind("vocabularies")
_SPECIAL_VOCABULARIES: CacheKind[Vocabulary] = CacheKind("special vocabularies")


def vocabulary_of(tokenizer: Any) -> Vocabulary:
    """The kernels' `Vocabulary` of a runtime `Tokenizer` (specials carry no bytes), built once per tokenizer
    (a `stdsl.caches` entry)."""
    return _VOCABULARIES.get((tokenizer,), lambda: _build_vocabulary(tokenizer))


def _build_vocabulary(tokenizer: Any) -> Vocabulary:
    if getattr(tokenizer, "hf", None) is not None:
        from stdsl.kernels.vocab_sources import vocabulary_from_hf

        return vocabulary_from_hf(tokenizer.hf, eos_ids=tokenizer.eos_ids)
    specials = getattr(tokenizer, "special_tokens", {}).values()
    return Vocabulary(TokenBytes(tokenizer.token_bytes, specials), tokenizer.eos_ids)


def for_tokenizer(constraint: Any, tokenizer: Any) -> Any:
    """`constraint`, a `Grammar` given the tokenizer's special tokens (so `<[id]>` resolves and names are checked
    with line and column) unless it has them already; anything else as it is."""
    if isinstance(constraint, Grammar) and constraint.special_tokens is None:
        return constraint.with_special_tokens(getattr(tokenizer, "special_tokens", None) or {})
    return constraint


def vocabulary_for(tokenizer: Any, compiled: Any) -> Vocabulary:
    """The vocabulary a compiled constraint decodes with: the tokenizer's shared one, or the variant that spells
    the special tokens when the constraint uses some (its `special_tokens`)."""
    names = tuple(getattr(compiled, "special_tokens", ()) or ())
    if not names:
        return vocabulary_of(tokenizer)
    return special_vocabulary(tokenizer, names)


def special_vocabulary(tokenizer: Any, names: Iterable[str]) -> Vocabulary:
    """The tokenizer's vocabulary with its special tokens (and the added or eos tokens in `names`) spelled
    privately; CompileError naming a special token the tokenizer does not have."""
    base = vocabulary_of(tokenizer)
    tokens: Mapping[str, int] = getattr(tokenizer, "special_tokens", None) or {}
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        if name not in tokens or not 0 <= tokens[name] < base.size:
            raise CompileError(f"the constraint uses the special token {name}, which the tokenizer "
                               f"{getattr(tokenizer, 'name', '')!r} does not have")
    own = tuple(sorted(name for name in wanted
                       if base.token_bytes[tokens[name]] is not None or base.eos[tokens[name]]))
    return _SPECIAL_VOCABULARIES.get((tokenizer,), lambda: _build(base, tokens, own), own)


def _build(base: Vocabulary, tokens: Mapping[str, int], own: tuple[str, ...]) -> Vocabulary:
    """The variant of `base`: special tokens (eos ones only when in `own`) and the added tokens in `own` spelled
    privately, ordinary tokens holding a 0xFF byte none."""
    mark = bytes([SPECIAL_MARK])
    token_bytes: list[bytes | None] = [None if b is not None and mark in b else b for b in base.token_bytes]
    named = set(own)
    for name, token in tokens.items():
        if not 0 <= token < base.size:
            continue
        if name in named or (base.token_bytes[token] is None and not base.eos[token]):
            token_bytes[token] = special_spelling(name)
    respelled = {tokens[name] for name in own}
    return Vocabulary(token_bytes, [i for i in base.eos_ids.tolist() if i not in respelled])
