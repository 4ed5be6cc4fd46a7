"""Certified block-parallel decoding on pushdown constraints: blocks between cut configurations (D.5).

Open objects (undeclared members may hold any JSON value) and recursive schemas compile to a
pushdown; their cut configurations must be met exactly once, in plan order, by every accepted
output, and certified decoding must stay token-identical to sequential greedy (a difference only
at a near-tie, `engine_oracle.agrees`).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.pushdown.cut_configurations import cut_configurations
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.tables import controller_of, machine_of
from stdsl.runtime.certified.blocks import END, block_plan
from stdsl.runtime.decode import generate
from tests.data_files import RECURSIVE as RECURSIVE_TASKS
from tests.runtime.engine_oracle import agrees
from tests.runtime.json_documents import load_task

EXTRACTION = ("person", "event", "product", "classification", "contact_card", "tool_call")
RECURSIVE = ("org", "fs", "expression", "solar", "thread")


def opened(schema: object) -> object:
    """The schema with every `additionalProperties` removed (its objects open)."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [opened(v) for v in schema]
    return schema


def open_task(name: str) -> tuple[dict, str]:
    """An extraction task's schema with its objects open, and its first prompt."""
    task = load_task(name)
    schema = opened(task["schema"])
    assert isinstance(schema, dict)
    return schema, task["prompts"][0].format(schema=json.dumps(schema), source=task["source"])


def recursive_task(name: str) -> dict:
    return json.loads((RECURSIVE_TASKS / f"{name}.json").read_text())


def machine(schema: dict) -> PushdownMachine:
    found = machine_of(compile_constraint(schema, strict=False))
    assert isinstance(found, PushdownMachine), "the schema should compile to a pushdown"
    return found


def visits(pushdown: PushdownMachine, document: bytes) -> list[int]:
    """The configuration before each byte of `document` and after the last one."""
    config, run = pushdown.start, [pushdown.start]
    for byte in document:
        config = pushdown.step_byte(config, byte)
        assert config >= 0, f"the machine refused {document!r}"
        run.append(config)
    return run


def assert_cuts_met_once_in_order(pushdown: PushdownMachine, document: bytes) -> None:
    """Every cut configuration occurs exactly once on the document's run, in plan order; blocks exit after entry."""
    assert pushdown.accepts(document)
    run = visits(pushdown, document)
    cuts = cut_configurations(pushdown)
    where = []
    for cut in cuts:
        assert run.count(cut) == 1, f"cut configuration {cut} met {run.count(cut)} times on {document!r}"
        where.append(run.index(cut))
    assert where == sorted(where)
    for block in block_plan(pushdown):
        if block.exit != END:
            assert run.index(block.entry) < run.index(block.exit)


def test_an_open_object_splits_at_its_required_members_and_ends_with_one_tail_block() -> None:
    schema = {"type": "object", "required": ["a", "b"],
              "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "string"}}}
    pushdown = machine(schema)
    blocks = block_plan(pushdown)
    assert [b.literal for b in blocks] == [b'{"a":', b'"b":', b"e"]
    assert blocks[-1].exit == END
    assert_cuts_met_once_in_order(pushdown, b'{"a":-3,"b":true,"c":"x","zz":[1,{"q":null}]}')


@pytest.mark.parametrize("name", EXTRACTION)
def test_an_open_schema_keeps_the_closed_schemas_blocks(name) -> None:
    """The keys of required members still start blocks; the undeclared tail is in the last block.  Where the open
    object's keys are laid out as tries (`pushdown.quoted_keys`, from 8 keys), a string value's opening quote is a
    forced byte of its key's block too."""
    closed = load_task(name)["schema"]
    schema, _ = open_task(name)
    dfa_blocks = block_plan(compile_constraint(closed).automaton)
    open_blocks = block_plan(machine(schema))
    assert len(dfa_blocks) >= 2
    assert len(open_blocks) >= len(dfa_blocks)
    for closed_block, open_block in zip(dfa_blocks, open_blocks):  # an open object's "}" is no longer forced
        literal = open_block.literal
        assert literal and (closed_block.literal.endswith(literal)
                            or literal.endswith(b':"') and closed_block.literal.endswith(literal[:-1])), literal
    assert open_blocks[-1].exit == END


def test_a_recursive_schema_splits_inside_its_root_object() -> None:
    pushdown = machine(recursive_task("org")["schema"])
    assert [b.literal for b in block_plan(pushdown)] == [b'{"name":', b',"role":', b',"reports":[']


@pytest.mark.parametrize("name", RECURSIVE)
def test_gold_trees_meet_each_cut_configuration_once(name) -> None:
    task = recursive_task(name)
    pushdown = machine(task["schema"])
    assert len(block_plan(pushdown)) >= 2
    assert_cuts_met_once_in_order(pushdown, json.dumps(task["gold"], separators=(",", ":")).encode())


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-999, 999), st.text("abcxyz", max_size=4))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text("pqrs", min_size=1, max_size=2), inner, max_size=3)),
    max_leaves=6)
LEAVES = {"integer": st.integers(-99, 999), "boolean": st.booleans(), "string": st.text("abc de", max_size=5),
          "array": st.lists(st.integers(0, 9), max_size=3)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), names=st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=4,
                                      unique=True))
def test_open_objects_meet_each_cut_configuration_once(data, names) -> None:
    kinds = {name: data.draw(st.sampled_from(sorted(LEAVES))) for name in names}
    optional = data.draw(st.lists(st.sampled_from(["o1", "o2"]), unique=True))
    properties = {name: ({"type": "array", "items": {"type": "integer"}} if kind == "array" else {"type": kind})
                  for name, kind in kinds.items()}
    properties.update({name: {"type": "integer"} for name in optional})
    schema = {"type": "object", "required": names, "properties": properties}
    document = {name: data.draw(LEAVES[kind]) for name, kind in kinds.items()}
    document.update({name: 1 for name in optional if data.draw(st.booleans())})
    extra = data.draw(st.dictionaries(st.text("pqrs", min_size=1, max_size=2), JSON_VALUES, max_size=2))
    document.update(extra)
    pushdown = machine(schema)
    assert_cuts_met_once_in_order(pushdown, json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode())


PERSON = {"name": "Ann", "age": 3, "email": "a@b.c", "status": "approved", "tags": ["x", "y", "z"]}


def _longest_token_walk(controller, row, document: bytes):
    """The row that reads `document` sampling, at each step, the longest allowed token that fits it and still leads
    to the whole document (depth first, longest first: a canonical split can stop a longer token's path, as `},`
    where the document goes on through `},"`)."""
    token_of = {spelled: token for token, spelled in enumerate(controller.vocab.token_bytes) if spelled}
    stack = [(row, None)]
    while stack:
        row, choices = stack.pop()
        if row.configuration.finished or len(row.data) >= len(document):
            if row.decided == document:
                return row
            continue
        if choices is None:
            rest, allowed = document[len(row.data):], controller.row_mask(row)
            choices = [token_of[rest[:k]] for k in range(1, 17) if rest[:k] in token_of and allowed[token_of[rest[:k]]]]
        if choices:
            stack.append((row, choices[:-1]))
            stack.append((row.apply(controller.taken(row, choices[-1])), None))
    raise AssertionError("no allowed token path reads the document")


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(st.text(':"]a,', min_size=1, max_size=3), JSON_VALUES, min_size=1, max_size=3))
def test_a_draft_rows_sampled_tokens_replay_its_path(tiny_model, extra) -> None:
    """A row that samples the longest token fitting a document (`:"` after an undeclared key, which the forced-span
    policy feeds as `:` + `":`) is followed exactly by a replay of the tokens it sampled: the same tokens, and the
    same ones forced (the fed tokens alone would sample the `":` the row had forced)."""
    schema, _ = open_task("person")
    document = json.dumps({**PERSON, **{k: v for k, v in extra.items() if k not in PERSON}},
                          separators=(",", ":"), ensure_ascii=False).encode()
    controller = controller_of(compile_constraint(schema, strict=False), tiny_model.tokenizer, max_tokens=None)
    start = controller.started()
    row = _longest_token_walk(controller, start.recording(), document)
    assert row.decided == document
    sampled = row.sampled_tokens()
    replay = start
    while len(replay.tokens) < len(row.tokens):
        replay = replay.apply(controller.taken(replay, sampled[len(replay.data)]))
    assert replay.tokens == row.tokens and replay.forced == row.forced


@pytest.mark.parametrize("name", EXTRACTION)
def test_certified_equals_sequential_on_open_extraction_schemas(tiny_model, name) -> None:
    schema, prompt = open_task(name)
    assert isinstance(machine_of(compile_constraint(schema, strict=False)), PushdownMachine)
    sequential = generate(tiny_model, prompt, schema, max_tokens=60, strict=False)
    certified = generate(tiny_model, prompt, schema, max_tokens=60, parallel_fields=True, strict=False)
    assert certified.stats.rounds >= 1
    assert certified.tokens == sequential.tokens or agrees(tiny_model, prompt, compile_constraint(schema, strict=False),
                                                           60, certified.tokens)
    assert certified.finish_reason == sequential.finish_reason


@pytest.mark.parametrize("name", RECURSIVE)
def test_certified_equals_sequential_on_recursive_tasks(tiny_model, name) -> None:
    task = recursive_task(name)
    prompt = task["prompt"].format(schema=json.dumps(task["schema"]), source=task["source"])
    sequential = generate(tiny_model, prompt, task["schema"], max_tokens=60)
    certified = generate(tiny_model, prompt, task["schema"], max_tokens=60, parallel_fields=True)
    assert certified.stats.rounds >= 1
    assert certified.tokens == sequential.tokens or agrees(tiny_model, prompt, task["schema"], 60, certified.tokens)


def test_a_pushdown_without_two_blocks_decodes_sequentially(tiny_model) -> None:
    schema = {"type": "array", "items": {"$ref": "#"}}
    assert len(block_plan(machine(schema))) < 2
    certified = generate(tiny_model, "A list.", schema, max_tokens=20, parallel_fields=True)
    assert certified.stats.rounds == 0
    assert certified.tokens == generate(tiny_model, "A list.", schema, max_tokens=20).tokens


@pytest.mark.slow
@pytest.mark.parametrize("name", EXTRACTION)
def test_certified_equals_sequential_on_open_schemas_on_smollm2(smollm2, name) -> None:
    schema, prompt = open_task(name)
    sequential = generate(smollm2, prompt, schema, max_tokens=300, strict=False)
    certified = generate(smollm2, prompt, schema, max_tokens=300, parallel_fields=True, strict=False)
    assert certified.stats.rounds >= 1
    assert certified.tokens == sequential.tokens or agrees(smollm2, prompt, compile_constraint(schema, strict=False),
                                                           300, certified.tokens)


@pytest.mark.slow
@pytest.mark.parametrize("name", ("org", "expression"))
def test_certified_equals_sequential_on_recursive_tasks_on_smollm2(smollm2, name) -> None:
    task = recursive_task(name)
    prompt = task["prompt"].format(schema=json.dumps(task["schema"]), source=task["source"])
    sequential = generate(smollm2, prompt, task["schema"], max_tokens=300)
    certified = generate(smollm2, prompt, task["schema"], max_tokens=300, parallel_fields=True)
    assert certified.stats.rounds >= 1
    assert certified.tokens == sequential.tokens or agrees(smollm2, prompt, task["schema"], 300, certified.tokens)
