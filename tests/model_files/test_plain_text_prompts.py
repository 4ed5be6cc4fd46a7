"""A prompt read as plain text (no chat template) gets the special tokens its tokenizer adds, as mlx-lm's `generate`
encodes it: Gemma's `<bos>` first, nothing for SmolLM2, and no second BOS when the text already starts with one.

Oracle: mlx-lm's own `stream_generate`, whose encoded prompt is read where it reaches `generate_step`.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

import pytest
from mlx_lm.tokenizer_utils import TokenizerWrapper
from tokenizers import processors
from transformers import PreTrainedTokenizerFast

from stdsl.model_files.prompt import prompt_ids
from stdsl.model_files.tokenizer import Tokenizer

mlx_generate = importlib.import_module("mlx_lm.generate")
TEXTS = ["The capital of France is", "", " leading space", "<|im_start|>already begun", "two\nlines"]


def mlx_lm_prompt(wrapper: TokenizerWrapper, text: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The token ids mlx-lm's `stream_generate` decodes from for prompt `text`."""
    seen: list[list[int]] = []

    def record(prompt: Any, *_: Any, **__: Any) -> Any:
        seen.append([int(t) for t in prompt.tolist()])
        raise _Seen

    monkeypatch.setattr(mlx_generate, "generate_step", record)
    with pytest.raises(_Seen):
        list(mlx_generate.stream_generate(None, wrapper, text, max_tokens=1))
    return seen[0]


class _Seen(Exception):
    """Stops mlx-lm's generation once its prompt is read."""


def wrapped(backend: Any, bos: str | None) -> TokenizerWrapper:
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token="<|im_end|>")
    return TokenizerWrapper(fast)


@pytest.fixture(scope="module")
def with_bos(smollm2_tokenizer) -> TokenizerWrapper:
    """SmolLM2's vocabulary with a Gemma-like post-processor that puts the BOS token first."""
    backend = copy.deepcopy(smollm2_tokenizer.hf)
    bos = "<|im_start|>"
    backend.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, 1)])
    return wrapped(backend, bos)


def test_a_tokenizer_that_adds_bos_gets_it_as_in_mlx_lm(with_bos, monkeypatch) -> None:
    ours = Tokenizer.from_hf(with_bos)
    for text in TEXTS:
        expected = mlx_lm_prompt(with_bos, text, monkeypatch)
        assert prompt_ids(ours, text, chat=False) == expected, text
        assert expected[0] == 1 and expected.count(1) == 1, text


def test_a_tokenizer_that_adds_nothing_encodes_the_text_alone_as_in_mlx_lm(smollm2_tokenizer, monkeypatch) -> None:
    reference = wrapped(copy.deepcopy(smollm2_tokenizer.hf), None)
    ours = Tokenizer.from_hf(reference)
    for text in [t for t in TEXTS if t]:  # an empty prompt decodes from a start token (mlx-lm refuses it)
        assert prompt_ids(ours, text, chat=False) == mlx_lm_prompt(reference, text, monkeypatch), text
    assert prompt_ids(smollm2_tokenizer, "Hi", chat=False) == smollm2_tokenizer.encode("Hi")
