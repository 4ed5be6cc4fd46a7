"""The library refuses a prompt past the model's context at once, naming the token counts, as the server does
(one check, `runtime.context_window.output_room`, for both)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stdsl
from stdsl.errors import ContextLengthError
from stdsl.runtime.context_window import context_length, output_room
from stdsl.runtime.engine import Engine

CONTEXT = 64


@pytest.fixture(scope="module")
def short_model(smollm2_tokenizer):
    """A random-weight llama over SmolLM2's tokenizer whose config gives a 64-token context."""
    import mlx.core as mx
    from mlx_lm.models.llama import Model as LlamaModel
    from mlx_lm.models.llama import ModelArgs

    from stdsl.runtime.model.loading import Model

    args = ModelArgs(model_type="llama", hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                     num_attention_heads=2, num_key_value_heads=1, rms_norm_eps=1e-5,
                     vocab_size=smollm2_tokenizer.vocab_size, max_position_embeddings=CONTEXT,
                     tie_word_embeddings=True)
    mx.random.seed(5)
    net = LlamaModel(args)
    mx.eval(net.parameters())
    model = Model(net=net, tokenizer=smollm2_tokenizer, name="short-context-llama")
    yield model
    engine = getattr(model, "_stdsl_engine", None)
    if engine is not None:
        engine.close()


@given(st.integers(0, 200), st.one_of(st.none(), st.integers(1, 200)), st.integers(1, 150),
       st.one_of(st.none(), st.integers(1, 100)))
def test_output_room_fits_the_context_or_refuses(prompt: int, max_tokens: int | None, context: int,
                                                 default: int | None) -> None:
    try:
        room = output_room(prompt, max_tokens, context, default)
    except ContextLengthError as error:
        assert prompt >= context or (max_tokens is not None and prompt + max_tokens > context)
        assert str(prompt) in str(error) and str(context) in str(error)
        assert error.argument == ("prompt" if prompt >= context else "max_tokens")
        return
    assert 1 <= room and prompt + room <= context
    assert room == (max_tokens if max_tokens is not None else min(default or context, context - prompt))


def test_a_prompt_past_the_context_is_refused_at_once(short_model) -> None:
    prompt = "word " * 200
    tokens = len(short_model.tokenizer.encode(prompt))
    assert context_length(short_model) == CONTEXT and tokens > CONTEXT
    began = time.monotonic()
    own = Engine(short_model, max_rows=1)
    for call in (lambda: stdsl.generate(short_model, prompt, None, chat=False),
                 lambda: stdsl.stream(short_model, prompt, {"type": "integer"}, chat=False),
                 lambda: own.submit(prompt, None, chat=False)):
        with pytest.raises(ContextLengthError, match=f"the prompt has {tokens} tokens; this model's context is "
                                                     f"{CONTEXT} tokens") as info:
            call()
        assert info.value.argument == "prompt" and isinstance(info.value, stdsl.OptionError)
    own.close()
    [refused] = stdsl.generate_batch(short_model, [{"prompt": prompt, "chat": False}])
    assert isinstance(refused, ContextLengthError)
    assert time.monotonic() - began < 10


def test_max_tokens_must_fit_beside_the_prompt_and_no_limit_is_the_room_left(short_model) -> None:
    prompt = "word " * 20
    tokens = len(short_model.tokenizer.encode(prompt))
    with pytest.raises(ContextLengthError, match=f"max_tokens 60 plus the prompt's {tokens} tokens exceed"):
        stdsl.generate(short_model, prompt, None, chat=False, max_tokens=60)
    fitting = stdsl.generate(short_model, prompt, None, chat=False, max_tokens=CONTEXT - tokens, temperature=0)
    assert len(fitting.tokens) <= CONTEXT - tokens
    unlimited = stdsl.generate(short_model, prompt, None, chat=False, max_tokens=None, temperature=0)
    assert len(unlimited.tokens) <= CONTEXT - tokens


@pytest.mark.slow
def test_twelve_thousand_words_on_smollm2_are_refused_at_once(smollm2) -> None:
    """The issue's case: 12,000 words on SmolLM2's 8,192-token context (no answer within 600 s before)."""
    began = time.monotonic()
    with pytest.raises(ContextLengthError, match="this model's context is 8192 tokens"):
        stdsl.generate(smollm2, "Summarise this. " + "lorem " * 12_000, {"type": "string"})
    assert time.monotonic() - began < 30
