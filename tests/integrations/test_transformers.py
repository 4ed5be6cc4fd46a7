"""The transformers processor: valid outputs on SmolLM2 (loaded from its GGUF) and stdsl's own masks at every step.

The oracle for the masks is stdsl's decode loop replayed on the tokens transformers chose: a
fresh controller (healing off) masks at each sampling configuration and feeds the sampled token
with its forced span; the processor must give exactly that mask where the engine sampled, and
the singleton of the forced token everywhere else.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from row_driver import RowDriver
from transformers import LogitsProcessor, LogitsProcessorList

import stdsl
from stdsl.errors import BudgetError, StdslError
from stdsl.integrations.transformers import StdslLogitsProcessor, generate, stdsl_tokenizer
from stdsl.model_files.prompt import prompt_ids
from tests.data_files import EXTRACTION

TASKS = sorted(p.stem for p in EXTRACTION.glob("*.json"))
EMAIL = stdsl.Regex(r"[a-z]{1,12}@[a-z]{2,10}\.(com|org)")
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
TREE = {
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                       "required": ["v", "kids"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}


class MaskRecorder(LogitsProcessor):
    """Runs after the stdsl processor and keeps, per step, which entries of each row were left finite."""

    def __init__(self) -> None:
        self.masks: list[np.ndarray] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.masks.append(torch.isfinite(scores).numpy().copy())
        return scores


def replay_masks(constraint, hf_tokenizer, tokens: list[int], max_new_tokens: int) -> list[np.ndarray]:
    """The mask each engine step must have: stdsl's own loop, a row state (not the controller the processor runs
    on), replayed on `tokens` without healing (its masks where it samples, else singletons)."""
    control = RowDriver.of(stdsl.compile(constraint), stdsl_tokenizer(hf_tokenizer), max_tokens=max_new_tokens,
                             healing=False)
    vocab = control.vocab

    def singleton(token: int) -> np.ndarray:
        mask = np.zeros(vocab.size, dtype=bool)
        mask[token] = True
        return mask

    feed = control.start()
    masks = [singleton(t) for t in feed]
    position = len(feed)
    while position < len(tokens):
        if control.finished:
            masks.append(singleton(int(vocab.eos_ids[0])))
            break
        masks.append(control.mask())
        feed = control.advance(tokens[position])
        if not feed:
            break
        assert feed[0] == tokens[position]
        masks += [singleton(t) for t in feed[1:]]
        position += len(feed)
    return masks


def run_with_recorder(model, hf_tokenizer, prompt: str, constraint, max_new_tokens: int):
    """model.generate with the stdsl processor and a recorder behind it: (output tokens, recorded masks, processor)."""
    processor = StdslLogitsProcessor(constraint, hf_tokenizer, max_new_tokens=max_new_tokens)
    recorder = MaskRecorder()
    ids = torch.tensor([prompt_ids(stdsl_tokenizer(hf_tokenizer), prompt)])
    eos = int(processor.vocab.eos_ids[0])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new_tokens,
                         logits_processor=LogitsProcessorList([processor, recorder]), eos_token_id=eos,
                         pad_token_id=eos)
    return out[0, ids.shape[1]:].tolist(), [m[0] for m in recorder.masks], processor, out


@pytest.mark.parametrize("task", [pytest.param(task, marks=() if task == "person" else pytest.mark.slow)
                                  for task in TASKS])
def test_extraction_tasks_are_valid_and_masks_are_stdsl_masks(task: str, hf_smollm2) -> None:
    model, hf_tokenizer = hf_smollm2
    spec = json.loads((EXTRACTION / f"{task}.json").read_text())
    prompt = spec["prompts"][2].format(source=spec["source"], schema=json.dumps(spec["schema"]))
    tokens, masks, processor, out = run_with_recorder(model, hf_tokenizer, prompt, spec["schema"], 160)
    result = processor.finish(out)[0]
    jsonschema.validate(json.loads(result.text), spec["schema"], format_checker=jsonschema.FormatChecker())
    assert result.stats.forced_tokens > 0
    expected = replay_masks(spec["schema"], hf_tokenizer, tokens, 160)
    assert len(masks) == len(expected) == len(tokens)
    for step, (got, want) in enumerate(zip(masks, expected)):
        assert np.array_equal(got[: want.shape[0]], want), f"step {step}"
        assert not got[want.shape[0]:].any()


def test_generate_returns_stdsls_generation(hf_smollm2) -> None:
    model, hf_tokenizer = hf_smollm2
    result = generate(model, hf_tokenizer, "Write the email address of Ana at example.com.", EMAIL, max_new_tokens=20)
    assert stdsl.compile(EMAIL).accepts(result.text)
    assert result.value == result.text
    assert result.stats.emitted_tokens == len(result.tokens) <= 20
    assert result.stats.passes == result.stats.emitted_tokens + (result.finish_reason != "length")


@pytest.mark.slow
def test_recursive_schema_under_sampling_stays_valid(hf_smollm2) -> None:
    model, hf_tokenizer = hf_smollm2
    for seed in range(3):
        result = generate(model, hf_tokenizer, "A small tree as JSON.", TREE, max_new_tokens=40,
                          temperature=1.0, top_k=20, seed=seed)
        jsonschema.validate(json.loads(result.text), TREE)
        assert len(result.tokens) <= 40


@pytest.fixture(scope="module")
def tiny_hf(hf_smollm2):
    """A seeded 2-layer random-weight llama over SmolLM2's vocabulary in torch (fast, arbitrary outputs)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(config).eval(), hf_smollm2[1]


@settings(max_examples=12, deadline=None)
@given(budget=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_every_budget_gives_a_valid_output_or_refuses_before_decoding(tiny_hf, budget: int, seed: int) -> None:
    model, hf_tokenizer = tiny_hf
    constraint = stdsl.compile(EMAIL)
    try:
        result = generate(model, hf_tokenizer, "email", constraint, max_new_tokens=budget, temperature=1.0, seed=seed)
    except BudgetError:
        assert budget < 6
        return
    assert constraint.accepts(result.text)
    assert len(result.tokens) <= budget


def test_rows_with_different_constraints_in_one_batch(tiny_hf) -> None:
    model, hf_tokenizer = tiny_hf
    constraints = [EMAIL, TREE, stdsl.Regex(r"(yes|no)")]
    processor = StdslLogitsProcessor(constraints, hf_tokenizer, max_new_tokens=30)
    ids = torch.tensor([prompt_ids(stdsl_tokenizer(hf_tokenizer), "answer")] * 3)
    torch.manual_seed(1)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=None, max_new_tokens=30,
                         logits_processor=LogitsProcessorList([processor]), eos_token_id=2, pad_token_id=2)
    texts = [g.text for g in processor.finish(out)]
    assert stdsl.compile(EMAIL).accepts(texts[0])
    jsonschema.validate(json.loads(texts[1]), TREE)
    assert texts[2] in ("yes", "no")


def test_a_constraint_list_must_match_the_batch(tiny_hf) -> None:
    model, hf_tokenizer = tiny_hf
    processor = StdslLogitsProcessor([EMAIL, EMAIL], hf_tokenizer, max_new_tokens=10)
    ids = torch.tensor([prompt_ids(stdsl_tokenizer(hf_tokenizer), "answer")])
    with pytest.raises(StdslError, match="2 constraints for a batch of 1"):
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10,
                       logits_processor=LogitsProcessorList([processor]), pad_token_id=2)


@pytest.mark.parametrize("path", ["rows", "walk"])
@pytest.mark.parametrize("constraint", [TREE, EMAIL, PERSON], ids=["recursive", "regex", "schema"])
def test_sampled_masks_equal_stdsls_for_recursive_and_regular_constraints(tiny_hf, constraint, path) -> None:
    model, hf_tokenizer = tiny_hf
    processor = StdslLogitsProcessor(constraint, hf_tokenizer, max_new_tokens=40, path=path)
    recorder = MaskRecorder()
    ids = torch.tensor([prompt_ids(stdsl_tokenizer(hf_tokenizer), "go")])
    torch.manual_seed(3)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=None, max_new_tokens=40,
                         logits_processor=LogitsProcessorList([processor, recorder]), eos_token_id=2, pad_token_id=2)
    tokens = out[0, ids.shape[1]:].tolist()
    expected = replay_masks(constraint, hf_tokenizer, tokens, 40)
    assert len(recorder.masks) == len(expected) == len(tokens)
    for step, (got, want) in enumerate(zip(recorder.masks, expected)):
        assert np.array_equal(got[0], want), f"step {step}"
    assert stdsl.compile(constraint).accepts(processor.finish(out)[0].text)


PAIRS = 'start: pair ("," pair)*\npair: KEY "=" VALUE\nKEY: /[a-z]{1,6}/\nVALUE: /[0-9]{1,3}/'
NESTED = 'root ::= "(" root ")" | "x" | "[" root ("," root)* "]"'


@settings(max_examples=6, deadline=None)
@given(budget=st.integers(4, 30), seed=st.integers(0, 2**16))
def test_a_grammar_constraint_gives_outputs_larks_parser_accepts(tiny_hf, budget: int, seed: int) -> None:
    import lark

    model, hf_tokenizer = tiny_hf
    try:
        result = generate(model, hf_tokenizer, "go", stdsl.Grammar(PAIRS), max_new_tokens=budget, temperature=1.0,
                          seed=seed)
    except BudgetError:
        assert budget < 5
        return
    assert len(result.tokens) <= budget
    lark.Lark(PAIRS, parser="earley", lexer="dynamic").parse(result.text)


@pytest.mark.slow
def test_a_recursive_grammar_constraint_stays_balanced(tiny_hf) -> None:
    model, hf_tokenizer = tiny_hf
    for seed in range(2):
        result = generate(model, hf_tokenizer, "go", stdsl.Grammar(NESTED), max_new_tokens=14, temperature=1.0,
                          seed=seed)
        assert stdsl.compile(stdsl.Grammar(NESTED)).accepts(result.text)
        assert result.text.count("(") == result.text.count(")") and len(result.tokens) <= 14


def test_a_bad_grammar_is_refused_naming_line_and_column(tiny_hf) -> None:
    with pytest.raises(stdsl.GrammarError, match=r"<grammar>:2:7: unclosed"):
        StdslLogitsProcessor(stdsl.Grammar('start: "a"\nrule: ( "b"'), tiny_hf[1], max_new_tokens=8)


@pytest.mark.parametrize("prompt", ["Extract the person.", [{"role": "system", "content": "Be brief."},
                                                            {"role": "user", "content": "Name a colour."}]])
def test_prompts_render_as_transformers_renders_them(hf_smollm2_tokenizer, prompt) -> None:
    """The one renderer (stdsl.model_files.prompt, stdsl.generate's) gives transformers' own chat-template ids."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    expected = hf_smollm2_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    expected = expected["input_ids"] if isinstance(expected, dict) or hasattr(expected, "keys") else expected
    assert prompt_ids(stdsl_tokenizer(hf_smollm2_tokenizer), prompt) == [int(t) for t in expected]
    text = "Extract the person."
    assert (prompt_ids(stdsl_tokenizer(hf_smollm2_tokenizer), text, chat=False)
            == hf_smollm2_tokenizer(text, add_special_tokens=False)["input_ids"])
