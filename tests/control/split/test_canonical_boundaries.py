"""At every boundary between forced and sampled text the emitted tokens are the tokenizer's own split (Theorem 20, D.3).

Oracle: `Tokenizer.encode_ordinary` of the output (special-token text spelled as ordinary text),
compared stretch by stretch by `stdsl.control.split.canonical_check`: a stretch that holds a forced byte
may differ only by D.3's cover ("spanned"). Three drivers of the controller: a document (teacher
forcing with the tokenizer's own tokens: then even the sampled stretches must agree), random
admissible tokens, and the greedy choices of a tiny random-weight model. Tokenizers: SmolLM2's and
Qwen3.5's; constraints: the six extraction schemas and hypothesis-generated object schemas.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

import stdsl
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import compile_embeddable
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.split.canonical_check import boundary_differences, differences, forced_bytes
from tests.runtime.json_documents import compact, load_task, random_instance

TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")
SPECIAL_TEXT = ("<|im_end|>", "a<|im_start|>b", "<|endoftext|>")


@pytest.fixture(scope="module")
def qwen_tokenizer():
    from stdsl.model_files.tokenizer import Tokenizer

    return Tokenizer.qwen()


@pytest.fixture(scope="module")
def tokenizers(smollm2_tokenizer, qwen_tokenizer) -> dict:
    return {"smollm2": smollm2_tokenizer, "qwen": qwen_tokenizer}


@pytest.fixture(scope="module")
def task_automata() -> dict:
    return {name: build_automaton(schema_to_ir(load_task(name)["schema"])) for name in TASKS}


# ---------------------------------------------------------------------------- drivers


def teacher_drive(automaton, tokenizer, document: str) -> RowDriver:
    """Feed `document`: at each step the oracle's token that starts where the output ends, or (where
    D.3's cover forbids it) the longest admitted token that spells the document on from there."""
    vocab = vocabulary_of(tokenizer)
    control = RowDriver(automaton, tokenizer, vocab)
    data = document.encode("utf-8")
    starts: dict[int, int] = {}
    offset = 0
    for token in tokenizer.encode_ordinary(document):
        starts[offset] = token
        offset += len(tokenizer.token_bytes[token])
    control.start()
    while not control.finished:
        allowed = control.mask()
        at = len(control.committed)
        token = starts.get(at, -1) if at < len(data) else int(vocab.eos_ids[0])
        if token < 0 or not allowed[token]:
            fitting = [t for t in np.flatnonzero(allowed) if data.startswith(vocab.token_bytes[t] or b"\xff", at)]
            assert fitting, f"nothing admitted spells {data[at:at + 20]!r} after {control.decided!r}"
            token = max(fitting, key=lambda t: len(vocab.token_bytes[t]))
        control.advance(int(token))
    assert control.accepting and control.decided == data
    return control


def random_drive(automaton, tokenizer, rng: random.Random, steps: int) -> RowDriver:
    """Take `steps` random admissible tokens (half the time among punctuation-only ones, which merge
    with forced JSON punctuation), then close the output: random among the admissible tokens that
    bring the automaton closest to acceptance (eos once admitted). No budget, so no table-policy fallback."""
    vocab = vocabulary_of(tokenizer)
    punctuation = _punctuation_tokens(tokenizer)
    distance = automaton.min_bytes_to_accept
    control = RowDriver(automaton, tokenizer, vocab)
    control.start()
    for step in range(steps + 400):
        if control.finished:
            break
        allowed = control.mask()
        if step < steps:
            pool = np.flatnonzero(allowed & punctuation) if rng.random() < 0.5 else np.array([], dtype=np.int64)
            if len(pool) == 0:
                pool = np.flatnonzero(allowed)
        elif allowed[vocab.eos_ids].any():
            pool = vocab.eos_ids[allowed[vocab.eos_ids]]
        else:
            pool = np.flatnonzero(allowed & ~vocab.eos)
            after = distance[control.rows.next_states(control.state)[pool]]
            pool = pool[after == after.min()]
        control.advance(int(pool[rng.randrange(len(pool))]))
    assert control.finished and control.accepting
    return control


def budget_drive(automaton, tokenizer, rng: random.Random, max_tokens: int) -> RowDriver:
    """Random admissible tokens under a token budget: the budget mask closes the output."""
    control = RowDriver(automaton, tokenizer, vocabulary_of(tokenizer), max_tokens=max_tokens)
    control.start()
    while not control.finished:
        pool = np.flatnonzero(control.mask())
        control.advance(int(pool[rng.randrange(len(pool))]))
    return control


_PUNCTUATION: dict[int, np.ndarray] = {}


def _punctuation_tokens(tokenizer) -> np.ndarray:
    hit = _PUNCTUATION.get(id(tokenizer))
    if hit is None:
        marks = set(b"\"'()[]{},.:;!?-\\/<>|_ ")
        hit = np.array([bool(b) and all(c in marks for c in b) for b in vocabulary_of(tokenizer).token_bytes])
        _PUNCTUATION[id(tokenizer)] = hit
    return hit


def greedy_drive(model, automaton, prompt: str, steps: int) -> RowDriver:
    """Decode with the model's masked argmax, feeding each sampled token with its forced span in one
    pass; after `steps` samples the argmax is taken among the tokens closest to acceptance."""
    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    distance = automaton.min_bytes_to_accept
    control = RowDriver(automaton, tokenizer, vocab)
    cache = model.make_cache()
    feed = tokenizer.encode(prompt) + control.start()
    for step in range(steps + 400):
        if control.finished:
            break
        logits = np.array(model.forward(feed, cache)[-1])[: tokenizer.vocab_size]
        allowed = control.mask()
        if step >= steps and not allowed[vocab.eos_ids].any():
            after = np.where(allowed, distance[control.rows.next_states(control.state)], 1 << 30)
            allowed &= after == after.min()
        feed = control.advance(int(np.argmax(np.where(allowed, logits, -np.inf))))
    assert control.finished and control.accepting
    return control


def assert_canonical_boundaries(automaton, tokenizer, control: RowDriver) -> None:
    found = boundary_differences(tokenizer, automaton, control.tokens)
    assert not found, f"{control.decided!r}: " + "; ".join(d.describe() for d in found)


def assert_teacher_canonical(automaton, tokenizer, document: str) -> None:
    control = teacher_drive(automaton, tokenizer, document)
    data = document.encode("utf-8")
    found = differences(tokenizer, control.tokens, forced_bytes(automaton, data))
    assert all(d.kind == "spanned" for d in found), f"{document!r}: " + "; ".join(d.describe() for d in found)
    if not found:
        assert control.tokens == tokenizer.encode_ordinary(document)


# ---------------------------------------------------------------------------- the six extraction tasks


def task_documents(name: str, count: int, seed: int) -> list[str]:
    task = load_task(name)
    rng = random.Random(seed)
    return [compact(task["gold"])] + [compact(random_instance(rng, task["schema"])) for _ in range(count)]


@pytest.mark.parametrize("which", ["smollm2", "qwen"])
@pytest.mark.parametrize("name", TASKS)
def test_task_documents_are_fed_in_the_tokenizers_split(name, which, task_automata, tokenizers) -> None:
    for document in task_documents(name, 6 if which == "smollm2" else 3, seed=TASKS.index(name)):
        assert_teacher_canonical(task_automata[name], tokenizers[which], document)


@pytest.mark.parametrize("which", ["smollm2", "qwen"])
@pytest.mark.parametrize("name", TASKS)
def test_random_choices_meet_forced_text_in_the_tokenizers_split(name, which, task_automata, tokenizers) -> None:
    rng = random.Random(100 + TASKS.index(name))
    for _ in range(4 if which == "smollm2" else 2):
        control = random_drive(task_automata[name], tokenizers[which], rng, steps=rng.randint(10, 60))
        assert_canonical_boundaries(task_automata[name], tokenizers[which], control)


@pytest.mark.parametrize("which", ["smollm2", "qwen"])
def test_random_choices_under_a_budget_stay_valid(which, task_automata, tokenizers) -> None:
    """A budget may take the table policy's split near its end (validity first, Theorem 21); outputs stay valid."""
    rng = random.Random(7)
    for name in TASKS:
        control = budget_drive(task_automata[name], tokenizers[which], rng, max_tokens=rng.randint(40, 90))
        assert control.accepting and task_automata[name].accepts(control.decided)


@pytest.mark.parametrize("name", TASKS)
def test_greedy_model_output_meets_forced_text_in_the_tokenizers_split(name, task_automata, tiny_model) -> None:
    task = load_task(name)
    prompt = task["prompts"][0].format(source=task["source"], schema=json.dumps(task["schema"]))
    control = greedy_drive(tiny_model, task_automata[name], prompt, steps=40)
    assert_canonical_boundaries(task_automata[name], tiny_model.tokenizer, control)


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_many_task_documents(name, task_automata, tokenizers) -> None:
    for which, count in (("smollm2", 120), ("qwen", 30)):
        for document in task_documents(name, count, seed=1000 + TASKS.index(name)):
            assert_teacher_canonical(task_automata[name], tokenizers[which], document)


# ---------------------------------------------------------------------------- generated schemas

KEYS = st.sampled_from(["a", "name", "id", "x_y", "k1", "über", "a b", "tags", "Ok"])
ENUM_VALUES = ["red", ".x", "'q'", "(a)", "", "x y", "{}", "-1", "a,b", "\\n", *SPECIAL_TEXT]
LEAVES = st.one_of(
    st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}]),
    st.lists(st.sampled_from(ENUM_VALUES), min_size=1, max_size=4, unique=True).map(lambda v: {"enum": v}),
)


def objects(children: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    return st.dictionaries(KEYS, children, min_size=1, max_size=3).map(
        lambda props: {"type": "object", "properties": props, "required": sorted(props)})


SCHEMAS = objects(st.recursive(
    LEAVES, lambda inner: st.one_of(objects(inner), inner.map(lambda s: {"type": "array", "items": s, "maxItems": 3})),
    max_leaves=5))


def check_generated_documents(schema: dict, tokenizer, seed: int) -> None:
    automaton = build_automaton(schema_to_ir(schema, strict=False))  # the open objects these cases were chosen on
    rng = random.Random(seed)
    for _ in range(3):
        assert_teacher_canonical(automaton, tokenizer, compact(random_instance(rng, schema)))


def check_generated_choices(schema: dict, tokenizer, seed: int) -> None:
    automaton = build_automaton(schema_to_ir(schema, strict=False))
    rng = random.Random(seed)
    for _ in range(2):
        control = random_drive(automaton, tokenizer, rng, steps=rng.randint(5, 40))
        assert_canonical_boundaries(automaton, tokenizer, control)


DEEP_PUNCTUATION = pytest.mark.xfail(strict=True, reason=(
    "known gap: in runs of JSON punctuation that sampled and forced bytes share (nested arrays and "
    'strings ending in punctuation: `[[`, `"]]}`, `!"],`) the BPE split depends on more characters ahead '
    "than the cover looks at (the next character, its forced chain and one more choice), so a few "
    "boundaries part from encode (and a teacher token can be masked)"))


@pytest.mark.slow
@DEEP_PUNCTUATION
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=SCHEMAS, seed=st.integers(0, 2**16))
def test_generated_schema_documents_smollm2(schema, seed, smollm2_tokenizer) -> None:
    check_generated_documents(schema, smollm2_tokenizer, seed)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=SCHEMAS, seed=st.integers(0, 2**16))
def test_generated_schema_documents_qwen(schema, seed, qwen_tokenizer) -> None:
    check_generated_documents(schema, qwen_tokenizer, seed)


@pytest.mark.slow
@DEEP_PUNCTUATION
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=SCHEMAS, seed=st.integers(0, 2**16))
def test_generated_schema_random_choices_smollm2(schema, seed, smollm2_tokenizer) -> None:
    check_generated_choices(schema, smollm2_tokenizer, seed)


@pytest.mark.slow
@DEEP_PUNCTUATION
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=SCHEMAS, seed=st.integers(0, 2**16))
def test_generated_schema_random_choices_qwen(schema, seed, qwen_tokenizer) -> None:
    check_generated_choices(schema, qwen_tokenizer, seed)


@pytest.mark.slow
@DEEP_PUNCTUATION
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=SCHEMAS)
def test_generated_schemas_greedy_tiny_model(schema, tiny_model) -> None:
    automaton = build_automaton(schema_to_ir(schema))
    control = greedy_drive(tiny_model, automaton, "Fill in the object.", steps=20)
    assert_canonical_boundaries(automaton, tiny_model.tokenizer, control)


@pytest.mark.slow
@DEEP_PUNCTUATION
@pytest.mark.parametrize("name", TASKS)
def test_many_random_task_outputs(name, task_automata, tokenizers) -> None:
    for which, count in (("smollm2", 30), ("qwen", 8)):
        rng = random.Random(2000 + TASKS.index(name))
        for _ in range(count):
            control = random_drive(task_automata[name], tokenizers[which], rng, steps=rng.randint(10, 80))
            assert_canonical_boundaries(task_automata[name], tokenizers[which], control)


# ---------------------------------------------------------------------------- regressions


def test_name_age_schema_commits_the_tokenizers_split_of_the_key_block(smollm2_tokenizer) -> None:
    """`{name: string, age: integer}` on SmolLM2: `":"` (not `":` then `"`) before a name, as encode writes it."""
    tokenizer = smollm2_tokenizer
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    automaton = compile_embeddable(schema).automaton
    control = RowDriver(automaton, tokenizer, vocabulary_of(tokenizer))
    assert control.start() == tokenizer.encode('{"name":"')
    assert control.mask()[tokenizer.encode("Maria")[0]]
    for document in ('{"name":"Maria","age":31}', '{"name":"","age":-4}'):
        assert teacher_drive(automaton, tokenizer, document).tokens == tokenizer.encode(document)


@pytest.mark.parametrize("which", ["smollm2", "qwen"])
def test_a_held_back_key_block_spanned_before_punctuation(which, tokenizers) -> None:
    """D.3: where the tokenizer would start the held-back `":"` shorter (a value opening with
    punctuation), the model spans it with one token and the value still decodes."""
    tokenizer = tokenizers[which]
    schema = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}
    automaton = compile_embeddable(schema).automaton
    for value in (".x", "'q'", "\\n", ")", ""):
        assert_teacher_canonical(automaton, tokenizer, compact({"n": value}))


@pytest.mark.parametrize("which", ["smollm2", "qwen"])
@pytest.mark.parametrize("schema", [
    {"const": "<|im_end|>"},
    {"enum": list(SPECIAL_TEXT)},
    {"type": "object", "properties": {"stop": {"const": "x<|im_end|>y"}, "v": {"enum": ["<|im_start|>", "b"]}},
     "required": ["stop", "v"], "additionalProperties": False},
], ids=["const", "enum", "object"])
def test_forced_text_that_spells_a_special_token_is_written_with_ordinary_tokens(which, schema, tokenizers) -> None:
    tokenizer = tokenizers[which]
    automaton = compile_embeddable(schema).automaton
    specials = set(tokenizer.special_tokens.values())
    rng = random.Random(5)
    for _ in range(6):
        control = random_drive(automaton, tokenizer, rng, steps=8)
        assert control.accepting and not specials & set(control.tokens)
        assert_canonical_boundaries(automaton, tokenizer, control)
    for value in SPECIAL_TEXT:
        document = json.dumps(value)
        if automaton.accepts(document.encode()):
            assert teacher_drive(automaton, tokenizer, document).tokens == tokenizer.encode_ordinary(document)


@pytest.mark.parametrize("schema", [{"const": "<|im_end|>"}, {"enum": ["<|im_end|>", "<|im_start|>x"]}],
                         ids=["const", "enum"])
def test_special_token_text_decodes_to_completion(schema, tiny_model) -> None:
    result = stdsl.generate(tiny_model, "Say it.", constraint=schema, max_tokens=30)
    assert json.loads(result.text) in (schema.get("enum") or [schema.get("const")])
    assert result.tokens == tiny_model.tokenizer.encode_ordinary(result.text)


def test_special_token_text_in_a_program_literal_decodes_to_completion(tiny_model) -> None:
    program = stdsl.Program('output """<|im_end|> then {x: "<|im_start|>" | "y"} end"""\n')
    result = program.run(tiny_model, max_tokens=30)
    assert result.x in ("<|im_start|>", "y")
    assert result.text == f"<|im_end|> then {result.x} end"


def test_encode_ordinary_spells_special_text_and_equals_encode_elsewhere(tokenizers) -> None:
    for tokenizer in tokenizers.values():
        for text in ("plain {\"a\": 1}", *SPECIAL_TEXT):
            ids = tokenizer.encode_ordinary(text)
            assert b"".join(tokenizer.token_bytes[i] for i in ids) == text.encode()
            assert not set(ids) & set(tokenizer.special_tokens.values())
        assert tokenizer.encode_ordinary("plain text, 12") == tokenizer.encode("plain text, 12")
        assert tokenizer.encode("<|im_end|>") != tokenizer.encode_ordinary("<|im_end|>")
