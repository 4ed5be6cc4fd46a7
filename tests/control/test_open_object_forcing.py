"""Open objects cost nothing extra (issue 27, items 3 and 5): forced text crosses pushes and pops as the DFA's does.

Each task's schema (tests/data/tasks/extraction and recursive) is taken closed, as written, and open (every
`additionalProperties` removed, so undeclared members may hold any JSON value and it compiles to the pushdown).
A text is written under a controller as a model sampling the tokenizer's own split of it would (no model); the
steps and fed tokens are compared between twins:
- the open twin writes the closed twin's text with the same fed tokens (the
  tokenizer's own split), sampling wherever the closed one samples and elsewhere only at its tail choice (`,` or
  `}`: the step writes a `}`, with the bytes held back before it), at most once per object;
- a closed schema compiled as a pushdown with its nested containers outlined (a push at each nested `{` and `[`,
  a pop at each `}` and `]`) writes every text in exactly the DFA's tokens and steps;
- an open twin's text with undeclared members nested in its free-form values (calls of the any-value nonterminal)
  is written in the tokens and steps of the depth-bounded DFA of the same schema;
- the open twin's least budget is the closed one's (the tail may always stay empty).
"""

from __future__ import annotations

import json
import random
import zlib

import numpy as np
import pytest
from row_driver import RowDriver

import stdsl
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.control.special_vocabulary import vocabulary_of
from tests.data_files import EXTRACTION, RECURSIVE

TEXTS_PER_SCHEMA = 3
SLACK_TOKENS = 12
"""Tokens above the least budget the random texts may take (short texts keep the tests fast)."""


def opened(schema):
    """The schema with every `additionalProperties` removed."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [opened(v) for v in schema]
    return schema


def shared_tasks() -> dict[str, dict]:
    """Schema of every extraction and recursive task, by name."""
    paths = sorted(EXTRACTION.glob("*.json")) + sorted(RECURSIVE.glob("*.json"))
    return {p.stem: json.loads(p.read_text())["schema"] for p in paths}


TASKS = shared_tasks()
QUICK_TASKS = ("event", "tool_call", "fs")
"""Tasks checked in the default run (nested objects, an array of objects, a recursive one); the rest under -m slow."""
task_names = pytest.mark.parametrize("name", [
    pytest.param(name, marks=() if name in QUICK_TASKS else pytest.mark.slow) for name in TASKS
])


@pytest.fixture(scope="module")
def vocab(smollm2_tokenizer):
    return vocabulary_of(smollm2_tokenizer)


def controller(constraint, tokenizer, vocab, max_tokens=None):
    """A fresh controller of a compiled constraint (pushdown or DFA)."""
    machine = getattr(constraint, "machine", None)
    if machine is not None:
        return RowDriver(machine, tokenizer, vocab, max_tokens=max_tokens)
    return RowDriver(constraint.automaton, tokenizer, vocab, max_tokens=max_tokens)


def least_budget(constraint, tokenizer, vocab) -> int:
    """The least budget the engine admits (what its BudgetError names)."""
    from stdsl.errors import BudgetError

    control = controller(constraint, tokenizer, vocab, max_tokens=1)
    try:
        control.start()
    except BudgetError:
        pass
    assert control.least_output_tokens is not None
    return control.least_output_tokens


def random_text(constraint, tokenizer, vocab, seed: int, max_tokens: int) -> bytes:
    """A valid output of `constraint` from random admissible tokens within `max_tokens`: half the time one with a
    quote where one is admissible (strings end and keys come sooner, so short texts have structure)."""
    rng = random.Random(seed)
    quoting = np.array([b'"' in (spelling or b"") for spelling in vocab.token_bytes])
    control = controller(constraint, tokenizer, vocab, max_tokens=max_tokens)
    control.start()
    while not control.finished:
        allowed = control.mask()
        if rng.random() < 0.5 and (allowed & quoting).any():
            allowed = allowed & quoting
        token = rng.choice(np.flatnonzero(allowed).tolist())
        if vocab.eos[token]:
            break
        control.advance(token)
    assert control.accepting
    return bytes(control.committed)


def replay(constraint, tokenizer, vocab, text: bytes) -> tuple[list[int], list[int]]:
    """Write `text` under a constraint's controller as a model that samples the tokenizer's own split of it would:
    at each step the token of `encode_ordinary(text)` that starts where the output stands, where admissible, else
    the longest admissible token that continues it. Returns the tokens fed and the byte offsets sampled at."""
    control = controller(constraint, tokenizer, vocab)
    spelled = control.planner.by_bytes
    canonical, offset = {}, 0
    for token in tokenizer.encode_ordinary(text.decode()):
        canonical[offset] = token
        offset += len(vocab.token_bytes[token] or b"")
    fed, sampled_at = list(control.start()), []
    while not control.finished and len(control.committed) < len(text):
        at = len(control.committed)
        rest = text[at:]
        allowed = control.mask()
        token = canonical.get(at)
        if token is None or not allowed[token]:
            widths = range(min(len(rest), control.planner.longest_token), 0, -1)
            token = next((t for t in (spelled.get(rest[:w]) for w in widths) if t is not None and allowed[t]), None)
        assert token is not None, f"no admissible token continues {rest[:40]!r}"
        sampled_at.append(at)
        fed += control.advance(token)
    assert bytes(control.committed) == text and control.accepting, text
    return fed, sampled_at


def steps(text: bytes, sampled_at: list[int]) -> list[tuple[int, bytes]]:
    """Each sampling offset with the bytes written from it to the next one (held-back bytes included)."""
    ends = sampled_at[1:] + [len(text)]
    return [(at, text[at:end]) for at, end in zip(sampled_at, ends)]


FREE_VALUES = (b'1', b'"x"', b'null', b'[]', b'{}', b'[1,"a"]', b'{"a":[2,true]}', b'{"b":{"c":null}}', b'[{"d":[]}]')
"""Undeclared members' values: scalars and nested containers (each one a call of the any-value nonterminal)."""


def with_undeclared(text: bytes, rng: random.Random) -> bytes:
    """`text` (compact JSON) with an undeclared member (`"zz":` and a free value) before some objects' `}`."""
    closes, in_string, escaped = [], False, False
    for i, byte in enumerate(text):
        if in_string:
            in_string, escaped = (not (byte == ord('"') and not escaped)), (byte == ord("\\") and not escaped)
        elif byte == ord('"'):
            in_string = True
        elif byte == ord("}"):
            closes.append(i)
    for i in reversed(closes):
        if rng.random() < 0.7:
            text = text[:i] + b',"zz":' + rng.choice(FREE_VALUES) + text[i:]
    return text


def objects_in(value) -> int:
    """Objects in a JSON value, nested ones included."""
    if isinstance(value, dict):
        return 1 + sum(objects_in(v) for v in value.values())
    if isinstance(value, list):
        return sum(objects_in(v) for v in value)
    return 0


def depth_of(value) -> int:
    """Container nesting depth of a JSON value (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def texts(constraint, tokenizer, vocab, name: str) -> list[bytes]:
    """A few short random valid outputs, seeded per task."""
    budget = least_budget(constraint, tokenizer, vocab) + SLACK_TOKENS
    return [random_text(constraint, tokenizer, vocab, zlib.crc32(f"{name}/{seed}".encode()), budget)
            for seed in range(TEXTS_PER_SCHEMA)]


@task_names
def test_the_open_twin_writes_the_closed_twins_texts_in_its_steps_plus_tail_choices(smollm2_tokenizer, vocab,
                                                                                     name: str) -> None:
    schema = TASKS[name]
    closed, open_ = stdsl.compile(schema), stdsl.compile(opened(schema), strict=False)
    assert hasattr(open_, "machine")
    for text in texts(closed, smollm2_tokenizer, vocab, name):
        closed_fed, closed_at = replay(closed, smollm2_tokenizer, vocab, text)
        open_fed, open_at = replay(open_, smollm2_tokenizer, vocab, text)
        assert open_fed == closed_fed, text
        assert set(closed_at) <= set(open_at), text
        tail = set(open_at) - set(closed_at)
        assert all(b"}" in step for at, step in steps(text, open_at) if at in tail), (text, sorted(tail))
        assert len(tail) <= objects_in(json.loads(text)), text


@task_names
def test_the_open_twins_least_budget_is_the_closed_ones(smollm2_tokenizer, vocab, name: str) -> None:
    closed, open_ = stdsl.compile(TASKS[name]), stdsl.compile(opened(TASKS[name]), strict=False)
    assert least_budget(open_, smollm2_tokenizer, vocab) == least_budget(closed, smollm2_tokenizer, vocab)


@task_names
def test_forced_spans_cross_pushes_and_pops_in_the_dfas_tokens_and_steps(smollm2_tokenizer, vocab, name: str) -> None:
    schema = TASKS[name]
    dfa = stdsl.compile(schema)
    if hasattr(dfa, "machine"):
        pytest.skip("a recursive task has no DFA twin")
    outlined = compile_recursive(schema, outline=True)
    nested = any(isinstance(v, dict) and v.get("type") in ("object", "array") for v in schema["properties"].values())
    assert len(outlined.grammar.names) > 1 or not nested
    for text in texts(dfa, smollm2_tokenizer, vocab, name):
        assert replay(outlined, smollm2_tokenizer, vocab, text) == replay(dfa, smollm2_tokenizer, vocab, text), text


@task_names
def test_undeclared_members_nested_in_free_values_decode_as_the_bounded_dfa(smollm2_tokenizer, vocab,
                                                                            name: str) -> None:
    from stdsl.compiler.constraint import compile_embeddable
    from stdsl.compiler.json_schema.to_ir import ANY_VALUE_DEPTH

    schema = TASKS[name]
    open_schema = opened(schema)
    pushdown = stdsl.compile(open_schema, strict=False)
    try:
        bounded = compile_embeddable(open_schema, strict=False)
    except stdsl.SchemaError:
        pytest.skip("a recursive task has no DFA twin")
    assert max(depth_of(json.loads(value)) for value in FREE_VALUES) <= ANY_VALUE_DEPTH
    compared = 0
    for seed, closed_text in enumerate(texts(stdsl.compile(schema), smollm2_tokenizer, vocab, name)):
        text = with_undeclared(closed_text, random.Random(seed))
        if b'"zz"' not in text:
            continue
        compared += 1
        assert replay(pushdown, smollm2_tokenizer, vocab, text) == replay(bounded, smollm2_tokenizer, vocab, text), text
    assert compared >= 1
