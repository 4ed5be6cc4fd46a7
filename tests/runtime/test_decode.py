"""The decode loop (Theorem 19): the forced-span decoder emits exactly the reference decoder's tokens.

The reference decoder feeds every emitted token in its own pass; the forced-span decoder feeds
the sampled token with its forced continuation in one pass, so it makes one pass per sample.
"""

from __future__ import annotations

import json

import pytest

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import StdslError
from stdsl.runtime.decode import generate, prompt_tokens, stream
from tests.data_files import EXTRACTION

PATTERNS = (
    r"(red|green|blue) (apple|banana|cherry)s?",
    r'\{"id":[0-9]{1,4},"tag":"[a-z]{1,6}","ok":(true|false)\}',
    r"Name: [A-Z][a-z]{1,9}\nAge: [0-9]{1,2}\n",
    r"[a-z]+(, [a-z]+)*\.",
)
SCHEMAS = ("person", "tool_call", "classification", "event")
SAMPLING = ({}, {"temperature": 1.0, "seed": 11}, {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "seed": 3})


def constraints() -> list[tuple[str, object]]:
    out = [(p, compile_regex(p)) for p in PATTERNS]
    for name in SCHEMAS:
        path = EXTRACTION / f"{name}.json"
        if path.is_file():
            out.append((name, build_automaton(schema_to_ir(json.loads(path.read_text())["schema"]))))
    return out


CONSTRAINTS = constraints()


@pytest.mark.parametrize("label,automaton", CONSTRAINTS, ids=[c[0][:20] for c in CONSTRAINTS])
def test_forced_span_decoder_equals_reference(tiny_model, label, automaton) -> None:
    for sampling in SAMPLING:
        fast = generate(tiny_model, "Describe it.", automaton, max_tokens=48, **sampling)
        slow = generate(tiny_model, "Describe it.", automaton, max_tokens=48, reference=True, **sampling)
        assert fast.tokens == slow.tokens, (label, sampling)
        assert fast.text == slow.text
        assert automaton.accepts(fast.data)
        assert fast.stats.passes == fast.stats.sampled_tokens
        assert slow.stats.passes >= fast.stats.passes
        assert fast.stats.emitted_tokens == len(fast.tokens) <= 48
        assert fast.stats.forced_tokens + fast.stats.sampled_tokens >= len(fast.tokens)
        assert tiny_model.tokenizer.decode(fast.tokens) == fast.text


def test_stream_yields_the_generated_text(tiny_model) -> None:
    automaton = CONSTRAINTS[1][1]
    pieces = list(stream(tiny_model, "Go.", automaton, max_tokens=30, temperature=1.0, seed=5))
    whole = generate(tiny_model, "Go.", automaton, max_tokens=30, temperature=1.0, seed=5)
    assert len(pieces) > 1
    assert "".join(pieces) == whole.text


def test_a_fully_forced_output_needs_no_pass(tiny_model) -> None:
    automaton = build_automaton(ir.literal('{"answer":"yes"}'))
    out = generate(tiny_model, "Answer.", automaton, max_tokens=20)
    assert out.text == '{"answer":"yes"}'
    assert out.stats.passes == 0 and out.stats.sampled_tokens == 0
    assert out.tokens == tiny_model.tokenizer.encode(out.text)
    assert out.value == {"answer": "yes"}


def test_prompt_uses_the_chat_template(tiny_model) -> None:
    tokenizer = tiny_model.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    expected = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
    assert prompt_tokens(tiny_model, messages) == expected
    assert prompt_tokens(tiny_model, "Hi") == tokenizer.encode(
        tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    )
    assert prompt_tokens(tiny_model, "Hi", chat=False) == tokenizer.encode("Hi")
    out = generate(tiny_model, messages, compile_regex("(yes|no)"), max_tokens=4)
    assert out.text in ("yes", "no") and out.stats.prompt_tokens == len(expected)


def test_eos_ends_only_in_accepting_states(tiny_model) -> None:
    automaton = compile_regex("[a-c]{2,6}")
    for seed in range(4):
        out = generate(tiny_model, "Go.", automaton, max_tokens=12, temperature=2.0, seed=seed)
        assert automaton.accepts(out.data)
        assert out.finish_reason in ("eos", "stop", "length")


def test_bad_constraint_is_rejected(tiny_model) -> None:
    with pytest.raises(StdslError):
        generate(tiny_model, "x", "not an automaton", max_tokens=5)
