"""The batch engine: many rows in one pass give each row exactly the tokens it would get alone.

Rows with DFA and pushdown constraints share a batch, join while others run, leave when done,
and one is cancelled; prompt-cache hits give the same tokens as a cold prefill.
"""

from __future__ import annotations

import threading

import pytest
from engine_oracle import agrees, sequential_greedy

from stdsl.compiler.automata.build import compile_regex
from stdsl.errors import BudgetError, Cancelled, OptionError, StdslError
from stdsl.runtime.batch.prefill import feed_width
from stdsl.runtime.decode import generate_batch
from stdsl.runtime.engine import Engine

TREE = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}}, "$ref": "#/$defs/n"}
REQUESTS = [
    ("Describe it.", r'\{"id":[0-9]{1,4},"tag":"[a-z]{1,6}","ok":(true|false)\}', 40),
    ("Name a colour.", {"enum": ["red", "green", "blue", "dark red"]}, 10),
    ("A tree please.", TREE, 30),
    ("Who?", {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "age": {"type": "integer"}}, "required": ["name", "age"]}, 30),
    ("List.", r"[a-z]+(, [a-z]+){0,3}\.", 16),
    ("Free text.", None, 12),
]


def constraint_of(spec):
    return compile_regex(spec) if isinstance(spec, str) else spec


def test_batched_rows_equal_each_row_alone(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=3)
    handles = []
    for prompt, spec, budget in REQUESTS[:2]:
        handles.append(engine.submit(prompt, constraint_of(spec), max_tokens=budget))
    next(iter(handles[0]))
    for prompt, spec, budget in REQUESTS[2:]:
        handles.append(engine.submit(prompt, constraint_of(spec), max_tokens=budget))
    results = [h.result(timeout=120) for h in handles]
    for (prompt, spec, budget), result in zip(REQUESTS, results):
        assert agrees(tiny_model, prompt, constraint_of(spec), budget, result.tokens), (prompt, result.text)
        assert len(result.tokens) <= budget
    assert engine.metrics()["rows_active"] == 0
    engine.close()


def test_a_cancelled_row_frees_its_slot_and_others_finish(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=2)
    doomed = engine.submit("Free text.", None, max_tokens=200)
    next(iter(doomed))
    others = [engine.submit(p, constraint_of(s), max_tokens=b) for p, s, b in REQUESTS[:3]]
    doomed.cancel()
    with pytest.raises(Cancelled):
        doomed.result(timeout=60)
    for (prompt, spec, budget), handle in zip(REQUESTS[:3], others):
        assert agrees(tiny_model, prompt, constraint_of(spec), budget, handle.result(timeout=120).tokens)
    engine.close()


def test_prompt_cache_hit_gives_the_cold_tokens(tiny_model) -> None:
    prompt = [{"role": "system", "content": "You answer in JSON. " * 8}, {"role": "user", "content": "Who?"}]
    spec = REQUESTS[3][1]
    engine = Engine(tiny_model, max_rows=2)
    cold = engine.submit(prompt, spec, max_tokens=30).result(timeout=60)
    assert engine.metrics()["prompt_cache_hits"] == 0
    warm = engine.submit(prompt, spec, max_tokens=30).result(timeout=60)
    longer = prompt + [{"role": "assistant", "content": cold.text}, {"role": "user", "content": "Again."}]
    follow = engine.submit(longer, spec, max_tokens=30).result(timeout=60)
    metrics = engine.metrics()
    assert metrics["prompt_cache_hits"] == 2 and metrics["prompt_cache_hit_tokens"] > 100
    assert warm.tokens == cold.tokens
    assert agrees(tiny_model, longer, spec, 30, follow.tokens)
    assert warm.stats.passes == cold.stats.passes
    engine.close()


def test_the_next_turn_prefills_only_what_the_last_reply_did_not_feed(tiny_model) -> None:
    """A finished row's whole sequence (prompt and every token fed after it) is kept, so a follow-up prompt that
    repeats the reply prefills only the tokens after it, and decodes as it would cold."""
    engine = Engine(tiny_model, max_rows=2)
    prompt = tiny_model.tokenizer.encode("You answer in JSON. " * 6 + "Who?")
    first = engine.submit(prompt, None, max_tokens=20).result(timeout=60)
    assert len(first.tokens) == 20
    follow = prompt + first.tokens + tiny_model.tokenizer.encode(" Again.")
    before = engine.metrics()["prefilled_tokens"]
    again = engine.submit(follow, None, max_tokens=20).result(timeout=60)
    new_tokens = len(tiny_model.tokenizer.encode(" Again."))
    assert engine.metrics()["prefilled_tokens"] - before == new_tokens + 1  # and the reply's last token, never fed
    assert agrees(tiny_model, follow, None, 20, again.tokens)
    engine.close()


def test_submit_from_many_threads(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=4)
    results: dict[int, list[int]] = {}

    def worker(i: int) -> None:
        prompt, spec, budget = REQUESTS[i % len(REQUESTS)]
        results[i] = engine.submit(prompt, constraint_of(spec), max_tokens=budget).result(timeout=120).tokens

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, tokens in results.items():
        prompt, spec, budget = REQUESTS[i % len(REQUESTS)]
        expected, _, _ = sequential_greedy(tiny_model, prompt, constraint_of(spec), budget)
        assert tokens == expected or agrees(tiny_model, prompt, constraint_of(spec), budget, tokens)
    assert len(results) == 8
    engine.close()


def test_generate_batch_keeps_order_and_isolates_failures(tiny_model) -> None:
    requests = [
        {"prompt": "Describe it.", "constraint": compile_regex("(yes|no)"), "max_tokens": 4},
        {"prompt": None, "constraint": compile_regex("(yes|no)")},
        {"prompt": "x", "constraint": compile_regex("(yes|no)( (yes|no)){5}"), "max_tokens": 2},
        {"prompt": "x", "constraint": compile_regex("(yes|no)"), "temperature": -1},
        {"prompt": "Name a colour.", "constraint": {"enum": ["red", "green"]}},
    ]
    out = generate_batch(tiny_model, requests, max_rows=2)
    assert out[0].text in ("yes", "no") and out[4].value in ("red", "green")
    assert isinstance(out[1], OptionError) and out[1].argument == "prompt"
    assert isinstance(out[2], BudgetError)
    assert isinstance(out[3], OptionError) and out[3].argument == "temperature"
    with pytest.raises(StdslError):
        generate_batch(tiny_model, "not a list")


def test_stop_strings_end_free_text(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=2)
    free = engine.submit("Talk.", None, max_tokens=40).result(timeout=60)
    assert len(free.text) > 4
    stop = free.text[2:4]
    cut = engine.submit("Talk.", None, max_tokens=40, stop=[stop]).result(timeout=60)
    assert cut.text == free.text[: free.text.index(stop)]
    assert cut.finish_reason == "stop"
    engine.close()


def test_feed_width_prefers_dripping_one_long_feed() -> None:
    assert feed_width([1] * 7 + [40]) == 1
    assert feed_width([12]) == 12
    assert feed_width([5, 5, 5]) == 5


def test_an_automaton_passed_as_the_constraint_is_used_without_expanding_its_table(tiny_model, monkeypatch) -> None:
    from stdsl.compiler.automata.automaton import ByteClassTable

    automaton = compile_regex(r"[0-9]{3}")
    expected = generate_batch(tiny_model, [{"prompt": "Digits.", "constraint": automaton, "max_tokens": 8}])[0]

    def refused(self) -> None:
        raise AssertionError("the dense table was expanded")

    monkeypatch.setattr(ByteClassTable, "transitions", property(refused))
    got = generate_batch(tiny_model, [{"prompt": "Digits.", "constraint": automaton, "max_tokens": 8}])[0]
    assert got.tokens == expected.tokens and len(got.text) == 3 and got.text.isdigit()
