"""Exact token budgets on the pushdown (issue 27): need(c) equals a brute-force search over token sequences.

A small byte-level BPE vocabulary (every byte, plus JSON punctuation runs and key words) keeps the oracle cheap:
a uniform-cost search from each configuration over every token, stepped byte by byte on the machine, each forced
chain counted by the tokenizer's own `encode_ordinary`. Schemas are drawn by hypothesis: open objects (free-form
members, nesting to any depth) and recursive trees.
"""

from __future__ import annotations

import heapq
import json
import random

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

import stdsl
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.errors import BudgetError
from stdsl.model_files.tokenizer import Tokenizer
from tests.data_files import EXTRACTION, RECURSIVE

PIECES = ['{"', '":', '",', '"}', '}]', ']}', '}}', ']]', '[]', '{}', '},', '],', 'null', 'true', 'false', '"a"',
          'kids', 'name', 'id', '"n', '":"', '","', '":[', '":{']
KEYS = ["id", "name", "kids", "n", "a"]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: printable bytes stand for themselves, the rest are shifted past 255."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    shifted, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            shifted[byte] = chr(byte)
        else:
            shifted[byte] = chr(256 + extra)
            extra += 1
    return shifted


@pytest.fixture(scope="module")
def small_tokenizer() -> Tokenizer:
    """A byte-level BPE over all 256 bytes plus PIECES (each built by left-to-right merges) and an eos special."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    merges: list[tuple[str, str]] = []
    for piece in PIECES:
        chars = "".join(alphabet[b] for b in piece.encode())
        for end in range(2, len(chars) + 1):
            if chars[:end] not in vocab:
                vocab[chars[:end]] = len(vocab)
                merges.append((chars[: end - 1], chars[end - 1]))
    vocab["<eos>"] = len(vocab)
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(["<eos>"])
    return Tokenizer(hf=hf, eos_ids=(vocab["<eos>"],))


def oracle_need(machine, tokenizer, config: int, limit: int = 60) -> int | None:
    """Fewest tokens from `config` to acceptance: every token of the vocabulary stepped byte by byte, then its forced
    chain counted by `encode_ordinary` (None: more than `limit`)."""
    spelled = [b for b in tokenizer.token_bytes]
    specials = set(tokenizer.special_tokens.values())
    tokens = [(t, b) for t, b in enumerate(spelled) if t not in specials and b]

    def chain(after: int) -> tuple[int, int]:
        forced = machine.forced_chain(after)
        return (len(tokenizer.encode_ordinary(forced.decode())) if forced else 0), machine.chain_end(after)

    best, heap = {config: 0}, [(0, config)]
    while heap:
        cost, here = heapq.heappop(heap)
        if cost > limit:
            return None
        if cost > best[here]:
            continue
        if machine.config_accepts(here):
            return cost
        for _, data in tokens:
            after = machine.step(here, data)
            if after < 0:
                continue
            count, end = chain(after)
            if cost + 1 + count < best.get(end, limit + 1):
                best[end] = cost + 1 + count
                heapq.heappush(heap, (cost + 1 + count, end))
    return None


LEAVES = st.sampled_from([{"type": "integer"}, {"type": "boolean"}, {"enum": ["a", "bc"]},
                          {"type": "string", "maxLength": 2}, {"type": "null"}])


@st.composite
def open_objects(draw: st.DrawFn, depth: int = 1) -> dict:
    """An object without additionalProperties (its undeclared members hold any JSON value), maybe nested; a nested
    one requires nothing (a nested open object with several required members before the outer ones can pass the
    exact search's guard: see docs/json_schema.md)."""
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    values = [draw(open_objects(depth=depth - 1)) if depth > 0 and draw(st.booleans()) else draw(LEAVES)
              for _ in keys]
    required = [k for k in keys if draw(st.booleans())] if depth > 0 else []
    return {"type": "object", "properties": dict(zip(keys, values)), "required": required}


@st.composite
def recursive_trees(draw: st.DrawFn) -> dict:
    """A tree through $ref: a node with a leaf value and a list of nodes (or a union of a leaf and a list)."""
    if draw(st.booleans()):
        return {"$ref": "#/$defs/v", "$defs": {"v": {"anyOf": [draw(LEAVES), {
            "type": "array", "items": {"$ref": "#/$defs/v"}, "minItems": draw(st.integers(0, 1))}]}}}
    node = {"type": "object", "properties": {"n": draw(LEAVES), "kids": {"type": "array",
                                                                        "items": {"$ref": "#/$defs/node"}}},
            "required": draw(st.sampled_from([["n", "kids"], ["kids"], ["n"]]))}
    if draw(st.booleans()):
        node["additionalProperties"] = False
    return {"$ref": "#/$defs/node", "$defs": {"node": node}}


def random_walk_configs(control: RowDriver, rng: random.Random, steps: int) -> list[int]:
    """Configurations met while taking random admissible tokens (the sampling configuration of each step)."""
    seen = [control.state]
    for _ in range(steps):
        if control.finished:
            break
        allowed = np.flatnonzero(control.mask() & ~control.vocab.eos)
        if allowed.size == 0:
            break
        control.advance(int(rng.choice(allowed.tolist())))
        if not control.pending:
            seen.append(control.state)
    return seen


def check_exact(schema: dict, tokenizer: Tokenizer, seed: int) -> None:
    """need equals the oracle on the start and along a random walk; the least budget is the oracle's minimum; every
    budget from it up ends valid under random admissible choices, and the one below is refused naming it."""
    constraint = stdsl.compile(schema, strict=False)
    machine = constraint.machine
    vocab = vocabulary_of(tokenizer)
    walker = RowDriver(machine, tokenizer, vocab)
    walker.start()
    budget = Tables.of(machine, vocab).budget(walker.planner)
    rng = random.Random(seed)
    for config in random_walk_configs(walker, rng, 6):
        assert budget.need_at(config) == oracle_need(machine, tokenizer, config), machine.configuration(config)
    assert budget.exact
    probe = RowDriver(machine, tokenizer, vocab, max_tokens=1)
    try:
        probe.start()
    except BudgetError:
        pass
    least = probe.least_output_tokens
    assert least is not None
    if least > 1:
        with pytest.raises(BudgetError, match=f"max_tokens={least - 1}: the shortest valid output needs {least} "):
            RowDriver(machine, tokenizer, vocab, max_tokens=least - 1).start()
    for max_tokens in range(least, least + 4):
        control = RowDriver(machine, tokenizer, vocab, max_tokens=max_tokens)
        control.start()
        while not control.finished:
            allowed = control.mask()
            choices = np.flatnonzero(allowed & ~vocab.eos)
            if choices.size == 0 or (control.accepting and rng.random() < 0.2):
                control.advance(int(vocab.eos_ids[0]))
            else:
                control.advance(int(rng.choice(choices.tolist())))
        assert control.accepting and constraint.accepts(control.decided)
        assert len(control.tokens) <= max_tokens
        jsonschema.validate(json.loads(control.decided), schema)


EXAMPLES = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MANY_EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@EXAMPLES
@given(schema=open_objects(), seed=st.integers(0, 2**16))
def test_open_objects_need_equals_the_token_search(small_tokenizer, schema: dict, seed: int) -> None:
    check_exact(schema, small_tokenizer, seed)


@EXAMPLES
@given(schema=recursive_trees(), seed=st.integers(0, 2**16))
def test_recursive_trees_need_equals_the_token_search(small_tokenizer, schema: dict, seed: int) -> None:
    check_exact(schema, small_tokenizer, seed)


@pytest.mark.slow
@MANY_EXAMPLES
@given(schema=st.one_of(open_objects(), recursive_trees()), seed=st.integers(0, 2**16))
def test_many_schemas_need_equals_the_token_search(small_tokenizer, schema: dict, seed: int) -> None:
    check_exact(schema, small_tokenizer, seed)




def opened(schema):
    """The schema with every `additionalProperties` removed (undeclared members then hold any JSON value)."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [opened(v) for v in schema]
    return schema


def least_budget(constraint, tokenizer) -> int:
    """The least budget the engine admits (what its BudgetError names)."""
    from row_driver import RowDriver

    vocab = vocabulary_of(tokenizer)
    machine = getattr(constraint, "machine", None)
    control = (RowDriver(machine, tokenizer, vocab, max_tokens=1) if machine is not None
               else RowDriver(constraint.automaton, tokenizer, vocab, max_tokens=1))
    try:
        control.start()
    except BudgetError:
        pass
    assert control.least_output_tokens is not None
    if machine is not None:
        assert control.budget.exact
    return control.least_output_tokens


def shared_schemas() -> list[tuple[str, dict]]:
    paths = sorted(EXTRACTION.glob("*.json")) + sorted(RECURSIVE.glob("*.json"))
    return [(p.stem, json.loads(p.read_text())["schema"]) for p in paths]


def check_open_twin(tiny_model, schema: dict, budgets) -> None:
    """The open twin's least budget is at most the closed one's (a closed output is an open one) and is refused one
    below; each budget from it decodes a valid output."""
    from stdsl.runtime.decode import generate

    tokenizer = tiny_model.tokenizer
    open_schema = opened(schema)
    closed, open_ = stdsl.compile(schema), stdsl.compile(open_schema, strict=False)
    least = least_budget(open_, tokenizer)
    assert least <= least_budget(closed, tokenizer)
    with pytest.raises(BudgetError, match=f"needs {least} tokens"):
        generate(tiny_model, "Answer.", open_, max_tokens=least - 1)
    for extra in budgets:
        out = generate(tiny_model, "Answer.", open_, max_tokens=least + extra)
        jsonschema.validate(json.loads(out.text), open_schema)
        assert len(out.tokens) <= least + extra


def test_open_twins_of_the_shared_tasks_keep_the_closed_boundary(tiny_model) -> None:
    for _, schema in shared_schemas():
        check_open_twin(tiny_model, schema, (0, 7))


@pytest.mark.slow
def test_open_twins_decode_valid_at_every_feasible_budget(tiny_model) -> None:
    for _, schema in shared_schemas():
        check_open_twin(tiny_model, schema, range(0, 40))
