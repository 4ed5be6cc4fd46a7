"""stdsl's own caches live in the registry: a compile and a decode's tables show in stdsl.caches.stats(), clear()
leaves no entry and no byte of any kind, a small budget is kept, threads compiling one schema compile it once, a
program's constraints go with the program, and an engine's prompt cache is counted and emptied."""

from __future__ import annotations

import gc
import threading

import pytest

import stdsl
from stdsl.compiler import constraint as compiler_constraint

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                      "items": {"$ref": "#/$defs/node"}}},
                           "additionalProperties": False}}, "$ref": "#/$defs/node"}


def _drive(compiled, tokenizer) -> None:
    """Start a controller on `compiled` with a budget and ask one mask (builds the shared tables, planner, budget)."""
    from row_driver import RowDriver

    from stdsl.control.special_vocabulary import vocabulary_of

    vocab = vocabulary_of(tokenizer)
    state = RowDriver(compiled, tokenizer, vocab, max_tokens=200)
    state.start()
    assert state.mask().any()


def test_a_decode_fills_the_registry_and_clear_empties_every_kind(smollm2_tokenizer) -> None:
    stdsl.caches.clear()
    _drive(stdsl.compile(PERSON), smollm2_tokenizer)
    _drive(stdsl.compile(TREE), smollm2_tokenizer)
    stats = stdsl.caches.stats()
    for kind in ("compiled constraints", "vocabularies", "constraint tables", "forced planners", "pushdown budgets",
                 "token spellings", "split memos"):
        assert stats[kind].entries >= 1 and stats[kind].bytes > 0, (kind, stats[kind])
    assert stats["forced planners"].bytes < stats["vocabularies"].bytes  # a planner's memos, not the shared bytes
    stdsl.caches.clear()
    after = stdsl.caches.stats()
    assert all(held.entries == 0 and held.bytes == 0 for held in after.values()), after
    assert stdsl.caches.registry.nbytes == 0 and len(stdsl.caches.registry) == 0


def test_a_small_budget_keeps_the_registry_under_it(smollm2_tokenizer) -> None:
    stdsl.caches.clear()
    budget = stdsl.caches.registry.budget
    try:
        stdsl.caches.set_budget(1 << 20)
        _drive(stdsl.compile(PERSON), smollm2_tokenizer)
        held = stdsl.caches.registry.nbytes
        assert held <= 1 << 20 or len(stdsl.caches.registry) == 0
        assert sum(s.evictions for s in stdsl.caches.stats().values()) > 0
    finally:
        stdsl.caches.set_budget(budget)
        stdsl.caches.clear()


def test_threads_compiling_one_schema_compile_it_once(monkeypatch) -> None:
    stdsl.caches.clear()
    calls: list[int] = []
    real = compiler_constraint._compile

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler_constraint, "_compile", counted)
    schema = {**PERSON, "title": "threads"}
    start = threading.Barrier(6)
    results: list[object] = []
    errors: list[BaseException] = []

    def work() -> None:
        start.wait()
        try:
            results.append(stdsl.compile(schema))
        except BaseException as error:  # noqa: BLE001 - collected to fail the test in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(calls) == 1
    assert len(results) == 6 and all(result is results[0] for result in results)


def test_a_programs_constraints_are_kept_per_filled_text_and_go_with_the_program() -> None:
    from stdsl.compiler.stc.program import CompiledProgram

    stdsl.caches.clear()
    program = CompiledProgram('param topic: str\noutput """A {{ topic }}: {n: int}"""', "t.stc")
    first = program.constraint({"topic": "cats"})
    assert program.constraint({"topic": "cats"}) is first
    assert program.constraint({"topic": "dogs"}) is not first
    assert stdsl.caches.stats()["program constraints"].entries == 2
    del program, first
    gc.collect()
    assert stdsl.caches.stats()["program constraints"].entries == 0


def test_an_engines_prompt_cache_is_counted_and_emptied() -> None:
    mx = pytest.importorskip("mlx.core")
    from stdsl.runtime.batch.prompt_cache import PromptCache

    stdsl.caches.clear()
    cache = PromptCache(max_bytes=1 << 20)
    layer = (mx.zeros((1, 2, 8, 4)), mx.zeros((1, 2, 8, 4)))
    cache.store(list(range(8)), [layer])
    assert cache.lookup(list(range(5))) is not None and cache.lookup([99]) is None
    held = stdsl.caches.stats()["prompt caches"]
    assert held.entries >= 1 and held.bytes >= 2 * 64 * 4 and held.hits >= 1 and held.misses >= 1
    stdsl.caches.clear()
    assert len(cache) == 0 and cache.nbytes == 0 and cache.lookup(list(range(5))) is None
