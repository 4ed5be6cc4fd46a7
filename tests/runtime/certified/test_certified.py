"""Certified block-parallel decoding (Theorem 23): token-identical to sequential greedy decoding.

Blocks come from single-visit cut states (Lemma 12); drafts are rows of the batch engine; a round
certifies at least one sampled token. Floating point: where an output differs from sequential
greedy, the first difference must be a near-tie (`engine_oracle.agrees`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import BudgetError
from stdsl.runtime.certified.blocks import END, block_plan
from stdsl.runtime.decode import generate
from tests.runtime.engine_oracle import agrees, sequential_greedy
from tests.runtime.json_documents import load_task

TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")


def task_prompts(name: str) -> tuple[dict, list[str]]:
    task = load_task(name)
    prompts = [p.format(schema=json.dumps(task["schema"]), source=task["source"]) for p in task["prompts"]]
    return task["schema"], prompts


def test_blocks_of_an_object_with_required_keys() -> None:
    schema = {"type": "object", "required": ["a", "b", "c"],
              "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "yy"]},
                             "c": {"type": "object", "required": ["d"], "properties": {"d": {"type": "boolean"}}}}}
    automaton = build_automaton(schema_to_ir(schema))
    blocks = block_plan(automaton)
    assert [b.literal for b in blocks] == [b'{"a":', b'"b":"', b'","c":{"d":']
    document = b'{"a":-12,"b":"yy","c":{"d":true}}'
    state, visits = 0, {0: 0}
    for offset, byte in enumerate(document):
        state = int(automaton.transitions[state, byte])
        visits.setdefault(state, offset + 1)
    entries = [visits[b.entry] for b in blocks]
    assert entries == sorted(entries)
    for block in blocks:
        if block.exit != END:
            assert visits[block.entry] < visits[block.exit]


def test_template_fields_separated_by_literal_text_are_blocks() -> None:
    blocks = block_plan(compile_regex(r"Name: [A-Z][a-z]{1,8}\nAge: [0-9]{1,2}\nCity: (Paris|Rome)\n"))
    assert [b.literal for b in blocks] == [b"Name: ", b"Age: ", b"City: "]


def test_a_cut_state_on_a_cycle_does_not_split() -> None:
    automaton = compile_regex(r"(ab)+c")
    assert all(cut not in automaton.single_visit_cuts() for cut in range(1, automaton.num_states)
               if automaton.step(cut, b"ab") == cut)
    assert len(block_plan(compile_regex(r"[a-z]+"))) <= 1


@pytest.mark.parametrize("name", TASKS)
def test_certified_equals_sequential_on_every_extraction_prompt(tiny_model, name) -> None:
    schema, prompts = task_prompts(name)
    for prompt in prompts:
        sequential = generate(tiny_model, prompt, schema, max_tokens=120)
        certified = generate(tiny_model, prompt, schema, max_tokens=120, parallel_fields=True)
        assert certified.stats.rounds >= 1
        assert certified.tokens == sequential.tokens or agrees(tiny_model, prompt, schema, 120, certified.tokens)
        assert certified.finish_reason == sequential.finish_reason
        assert certified.stats.passes <= sequential.stats.passes + 2 * certified.stats.rounds + 1


def test_certified_program_template_equals_sequential(tiny_model) -> None:
    pattern = compile_regex(r'Verdict: (accept|reject|revise)\nScore: ([1-9]|10)\nTitle: "[A-Za-z ]{1,12}"\n')
    sequential = generate(tiny_model, "Review it.", pattern, max_tokens=60)
    certified = generate(tiny_model, "Review it.", pattern, max_tokens=60, parallel_fields=True)
    assert certified.tokens == sequential.tokens or agrees(tiny_model, "Review it.", pattern, 60, certified.tokens)


LEAVES = st.sampled_from([
    {"type": "integer", "minimum": 0, "maximum": 999},
    {"type": "boolean"},
    {"enum": ["red", "green", "dark blue"]},
    {"type": "string", "maxLength": 6},
    {"type": "string", "pattern": "^[a-z]{2,5}$"},
])


@st.composite
def object_schemas(draw: st.DrawFn) -> dict:
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=2, max_size=4, unique=True))
    properties = {}
    for name in names:
        if draw(st.integers(0, 4)) == 0:
            inner = draw(st.lists(st.text("xyz", min_size=1, max_size=3), min_size=1, max_size=2, unique=True))
            properties[name] = {"type": "object", "required": inner, "properties": {n: draw(LEAVES) for n in inner}}
        else:
            properties[name] = draw(LEAVES)
    return {"type": "object", "required": names, "properties": properties}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=object_schemas(), budget=st.integers(30, 80))
def test_certified_equals_sequential_on_generated_schemas(tiny_model, schema, budget) -> None:
    try:
        generate(tiny_model, "Fill it in.", schema, max_tokens=budget)
    except BudgetError:
        with pytest.raises(BudgetError):
            generate(tiny_model, "Fill it in.", schema, max_tokens=budget, parallel_fields=True)
        return
    certified = generate(tiny_model, "Fill it in.", schema, max_tokens=budget, parallel_fields=True)
    expected, _, _ = sequential_greedy(tiny_model, "Fill it in.", schema, budget)
    assert certified.tokens == expected or agrees(tiny_model, "Fill it in.", schema, budget, certified.tokens)
    assert len(certified.tokens) <= budget


def test_sampling_falls_back_to_sequential(tiny_model) -> None:
    schema, prompts = task_prompts("person")
    sampled = generate(tiny_model, prompts[0], schema, max_tokens=80, temperature=0.7, seed=3, parallel_fields=True)
    again = generate(tiny_model, prompts[0], schema, max_tokens=80, temperature=0.7, seed=3)
    assert sampled.tokens == again.tokens and sampled.stats.rounds == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_certified_equals_sequential_on_smollm2(smollm2, name) -> None:
    schema, prompts = task_prompts(name)
    for prompt in prompts:
        sequential = generate(smollm2, prompt, schema, max_tokens=300)
        certified = generate(smollm2, prompt, schema, max_tokens=300, parallel_fields=True)
        assert certified.tokens == sequential.tokens or agrees(smollm2, prompt, schema, 300, certified.tokens)


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.stc")), ids=lambda p: p.stem)
def test_certified_equals_sequential_on_example_programs(tiny_model, path) -> None:
    from stdsl.compiler.stc.program import CompiledProgram

    program = CompiledProgram.from_file(path)
    args = program.arguments({name: "A short test input." for name in program.syntax.params})
    constraint = program.constraint(args)
    automaton = getattr(constraint, "automaton", None)
    if automaton is None or len(block_plan(automaton)) < 2:
        pytest.skip(f"{path.name} has no independent fields (recursive, or one block)")
    messages = program.messages(args)
    sequential = generate(tiny_model, messages, constraint, max_tokens=120)
    certified = generate(tiny_model, messages, constraint, max_tokens=120, parallel_fields=True)
    assert certified.stats.rounds >= 1
    assert certified.tokens == sequential.tokens or agrees(tiny_model, messages, constraint, 120, certified.tokens)
    assert constraint.parse(certified.text) is not None
