"""Decoding under recursive constraints: valid trees, one pass per sampled token, budgets, the depth cap."""

from __future__ import annotations

import heapq
import json

import jsonschema
import numpy as np
import pytest
from row_driver import RowDriver

import stdsl
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.errors import BudgetError, CompileError, GenerationError
from stdsl.runtime.decode import generate
from tests.data_files import RECURSIVE

FS_SCHEMA = {
    "$ref": "#/$defs/entry",
    "$defs": {"entry": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8}, "children": {"type": "array", "items": {"$ref": "#/$defs/entry"}}},
        "required": ["name", "children"], "additionalProperties": False}},
}


def load_tasks() -> list[dict]:
    """The recursive tasks (tests/data/tasks/recursive)."""
    return [json.loads(p.read_text()) for p in sorted(RECURSIVE.glob("*.json"))]


def test_compile_returns_a_pushdown_constraint() -> None:
    constraint = stdsl.compile(FS_SCHEMA)
    assert isinstance(constraint, PushdownConstraint)
    assert constraint.accepts('{"name":"a","children":[{"name":"b","children":[]}]}')
    assert not constraint.accepts('{"name":"a","children":[{"name":"b"}]}')


def test_recursive_schema_decodes_to_a_valid_tree_in_one_pass_per_sample(tiny_model) -> None:
    constraint = stdsl.compile(FS_SCHEMA)
    out = stdsl.generate(tiny_model, "A tree:", constraint, max_tokens=120)
    tree = json.loads(out.text)
    jsonschema.validate(tree, FS_SCHEMA)
    assert out.stats.passes == out.stats.sampled_tokens
    assert out.stats.forced_tokens > 0


def test_forced_span_decoder_equals_reference(tiny_model) -> None:
    constraint = stdsl.compile(FS_SCHEMA)
    fast = generate(tiny_model, "Tree", constraint, max_tokens=80)
    slow = generate(tiny_model, "Tree", constraint, max_tokens=80, reference=True)
    assert fast.text == slow.text
    assert slow.stats.passes >= fast.stats.passes == fast.stats.sampled_tokens


def test_a_second_request_reuses_the_symbolic_rows(tiny_model) -> None:
    constraint = stdsl.compile(FS_SCHEMA)
    first = generate(tiny_model, "Tree", constraint, max_tokens=60)
    rows = Tables.of(constraint.machine, vocabulary_of(tiny_model.tokenizer)).rows
    walks = rows.stats.free_misses + rows.stats.context_misses
    assert walks > 0 and rows.symbolic.nbytes > 0
    second = generate(tiny_model, "Tree", constraint, max_tokens=60)
    assert second.text == first.text
    assert rows.stats.free_misses + rows.stats.context_misses == walks
    assert rows.stats.hit_rate > 0.5


def feed(control: RowDriver, target: bytes) -> None:
    """Advance until `target` is decided, each time with the longest admissible token that spells on toward it."""
    token_bytes = control.vocab.token_bytes
    while not control.decided.startswith(target):
        remaining = target[len(control.committed):]
        allowed = [int(t) for t in control.mask().nonzero()[0]]
        token = max((t for t in allowed if token_bytes[t] and remaining.startswith(token_bytes[t])),
                    key=lambda t: len(token_bytes[t]))
        control.advance(token)


def test_nesting_to_64_works_and_the_65th_level_is_refused(tiny_model) -> None:
    tokenizer = tiny_model.tokenizer
    machine = compile_recursive(FS_SCHEMA).machine
    open_entry = b'{"name":"x","children":['
    deep = machine.step(machine.start, open_entry * 63 + b'{"name":"x","children":')
    assert machine.depth(deep) == 64
    assert machine.config_accepts(machine.step(deep, b"[]}" + b"]}" * 63))
    assert machine.step(deep, b"[{") < 0
    control = RowDriver(machine, tokenizer, vocabulary_of(tokenizer))
    control.start()
    feed(control, open_entry * 63 + b'{"name":"x"')
    assert control.decided.endswith(b'{"name":"x","children":[]}')
    brace = next(t for t, b in enumerate(tokenizer.token_bytes) if b == b"{")
    assert not control.mask()[brace]
    with pytest.raises(GenerationError):
        control.advance(brace)
    feed(control, control.decided + b"]}" * 63)
    assert control.finished and control.accepting


def test_at_the_cap_only_continuations_that_can_close_are_admitted(tiny_model) -> None:
    tokenizer = tiny_model.tokenizer
    schema = {"$ref": "#/$defs/n", "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1,
                                                     "maxItems": 1}}}
    with pytest.raises(CompileError, match="no finite expansion"):
        compile_recursive(schema)
    chain = {"$ref": "#/$defs/n", "$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "array", "prefixItems": [
        {"$ref": "#/$defs/n"}, {"type": "null"}], "items": False, "minItems": 2}]}}}
    constraint = compile_recursive(chain, max_depth=3)
    assert constraint.machine.step(constraint.machine.start, b"[[") >= 0
    assert constraint.machine.step(constraint.machine.start, b"[[[") < 0
    control = RowDriver(constraint.machine, tokenizer, vocabulary_of(tokenizer))
    control.start()
    feed(control, b"[")
    bracket = next(t for t, b in enumerate(tokenizer.token_bytes) if b == b"[")
    assert control.mask()[bracket]
    control.advance(bracket)
    assert control.decided == b"[[null,null],null]"  # a third `[` could not close: the rest is forced
    assert control.finished and control.accepting


DEEP_SCHEMA = {"$ref": "#/$defs/v", "$defs": {"v": {"anyOf": [
    {"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/v"}, "minItems": 1}]}}}


def adversarial_tokens(control: RowDriver, tokenizer, steps: int = 3000) -> None:
    """Open with the admissible token of most `[` while one is admitted, then close with the most `]`."""
    token_bytes = tokenizer.token_bytes
    opening = np.array([b.count(b"[") if b"]" not in b else 0 for b in token_bytes])
    closing = np.array([b.count(b"]") if b"[" not in b else 0 for b in token_bytes])
    closing_phase = False
    for _ in range(steps):
        if control.finished:
            return
        allowed = control.mask()
        closing_phase = closing_phase or not (allowed & (opening > 0)).any()
        score = np.where(allowed, 1 + 1000 * (closing if closing_phase else opening), 0)
        control.advance(int(np.argmax(score)))
    raise AssertionError("the adversary did not finish")


@pytest.mark.parametrize("max_tokens", [None, 90, 300])
def test_an_adversary_pushing_past_the_cap_still_ends_valid(tiny_model, max_tokens: int | None) -> None:
    """Issue 15 item 3: after 80 `[` asked for, decoding never dead-ends at the 64-level cap."""
    tokenizer = tiny_model.tokenizer
    constraint = stdsl.compile(DEEP_SCHEMA)
    control = RowDriver(constraint.machine, tokenizer, vocabulary_of(tokenizer), max_tokens=max_tokens)
    control.start()
    adversarial_tokens(control, tokenizer)
    text = control.decided.decode()
    assert control.accepting and constraint.accepts(text)
    assert text.count("[") <= constraint.machine.max_depth - 1
    if max_tokens is None:
        assert text.count("[") == constraint.machine.max_depth - 1
    jsonschema.validate(json.loads(text), DEEP_SCHEMA)
    if max_tokens is not None:
        assert len(control.tokens) <= max_tokens


def test_budgets_from_the_first_feasible_one_up_are_valid(tiny_model) -> None:
    tasks = load_tasks()
    for task in tasks:
        constraint = stdsl.compile(task["schema"])
        first_valid = None
        for budget in range(8, 60, 6):
            try:
                out = generate(tiny_model, task["prompt"][:200], constraint, max_tokens=budget)
            except BudgetError:
                assert first_valid is None
                continue
            first_valid = first_valid or budget
            jsonschema.validate(json.loads(out.text), task["schema"])
            assert len(out.tokens) <= budget
        assert first_valid is not None, task["name"]


@pytest.mark.slow
def test_the_recursive_tasks_produce_valid_trees_on_smollm2(smollm2) -> None:
    matches = 0
    for task in load_tasks():
        prompt = task["prompt"].replace("{schema}", json.dumps(task["schema"])).replace("{source}", task["source"])
        out = stdsl.generate(smollm2, prompt, task["schema"], max_tokens=600)
        tree = json.loads(out.text)
        jsonschema.validate(tree, task["schema"])
        assert out.stats.passes == out.stats.sampled_tokens
        matches += tree == task["gold"]
    print(f"{matches} of 5 recursive tasks equal the gold tree")


def test_a_recursive_program_type_compiles_to_the_pushdown_and_decodes(tiny_model) -> None:
    from stdsl.programs import Program

    prog = Program('type Node = {name: str(1..6), kids: list[Node](0..2)}\noutput """Tree: {tree: Node}\nDone."""')
    constraint = prog.constraint({})
    assert isinstance(constraint, PushdownConstraint)
    text = 'Tree: {"name":"a","kids":[{"name":"b","kids":[]}]}\nDone.'
    assert constraint.accepts(text)
    assert not constraint.accepts(text.replace('"kids":[]', '"kids":[1]'))
    assert not constraint.accepts(text.replace('"b"', '"bbbbbbb"'))
    assert constraint.parse(text)["tree"].kids[0].name == "b"
    result = prog.run(tiny_model, {}, max_tokens=120)
    assert result.stats.passes == result.stats.sampled_tokens
    assert result.text.startswith("Tree: {") and result.text.endswith("\nDone.")
    assert result["tree"].name


def fewest_tokens(machine, tokenizer, vocab, limit: int) -> int:
    """The fewest tokens of any valid output under the table policy (each sampled token then its forced chain in the
    tokenizer's own split): uniform-cost search over configurations with the real token rows, chains from the machine
    and counted by `encode_ordinary` (none of the budget's own code)."""
    rows = Tables.of(machine, vocab).rows

    def chain(config: int) -> tuple[int, int]:
        forced = machine.forced_chain(config)
        return (len(tokenizer.encode_ordinary(forced.decode())) if forced else 0), machine.chain_end(config)

    first, start = chain(machine.start)
    best, heap = {start: first}, [(first, start)]
    while heap:
        cost, config = heapq.heappop(heap)
        if cost > limit:
            break
        if cost > best[config]:
            continue
        if machine.config_accepts(config):
            return cost
        row = rows.next_states(config)
        for after in np.unique(row[row >= 0]).tolist():
            count, end = chain(after)
            if cost + 1 + count < best.get(end, limit + 1):
                best[end] = cost + 1 + count
                heapq.heappush(heap, (cost + 1 + count, end))
    raise AssertionError(f"no valid output within {limit} tokens")


def test_the_budget_error_states_the_true_minimum(tiny_model) -> None:
    """Issue 27 item 1: the least budget is the true shortest output (no longer Proposition 2's byte bound); one
    below it is refused with that number, and it decodes a valid output."""
    tokenizer = tiny_model.tokenizer
    vocab = vocabulary_of(tokenizer)
    constraint = stdsl.compile(FS_SCHEMA)
    tight = RowDriver(constraint.machine, tokenizer, vocab, max_tokens=3)
    with pytest.raises(BudgetError, match="the shortest valid output needs"):
        tight.start()
    least = tight.least_output_tokens
    assert least is not None and least == fewest_tokens(constraint.machine, tokenizer, vocab, 40)
    assert least < constraint.machine.need(constraint.machine.start)
    with pytest.raises(BudgetError, match=f"max_tokens={least - 1}: the shortest valid output needs {least} tokens"):
        generate(tiny_model, "Tree", constraint, max_tokens=least - 1)
    out = generate(tiny_model, "Tree", constraint, max_tokens=least)
    jsonschema.validate(json.loads(out.text), FS_SCHEMA)
    assert len(out.tokens) <= least
