"""Pipelined steps (`stdsl.runtime.batch.pipelining`): a step that queues the next pass before reading its draws
gives what the step reading them first gives, and what mlx-lm's own `generate_step` gives.

Oracles: the same core with pipelining off, stepped through the same schedule (rows joining, leaving, ending on eos,
on a stop string or at max_tokens, cancelled mid-run; greedy and seeded sampling): every row's tokens, text and
finish reason are equal. mlx-lm's `generate_step` for greedy free text (a first difference only at a near-tie, or
where mlx-lm's token is one free text refuses). A cold prefill for what the prompt cache stored of a row that ended on
eos after its last token was fed ahead. The model is the tiny llama (and, for the prompt cache, a sliding-window and a
recurrent architecture) with its eos logit raised after some tokens, so rows end on eos at points its weights pick.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlx_lm.generate import generate_step
from row_driver import RowDriver

from stdsl.compiler.automata.build import compile_regex
from stdsl.errors import Cancelled
from stdsl.runtime.batch import core as core_module
from stdsl.runtime.batch import pipelining
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.prompt_cache import PromptCache
from stdsl.runtime.batch.requests import compiled_constraint, prepare_request
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.engine import Engine
from stdsl.runtime.model.loading import Model
from stdsl.runtime.options import DecodeOptions
from tests.runtime.engine_oracle import NEAR_TIE
from tests.runtime.row_caches.architectures import tiny_net

PROMPTS = ["Describe it.", "Name a colour.", "List.", "Who?"]
PERIOD = 4
"""The eos logit is raised after every fed token whose id is a multiple of this."""
BUMP = 6.0
MAX_STEPS = 300


class _EndsOnEos:
    """A net whose eos logit is raised by BUMP after any fed token divisible by PERIOD (free text then ends on eos
    where the weights pick), otherwise the net's own logits."""

    def __init__(self, net: Any, eos: int) -> None:
        self.net, self.eos = net, eos
        self.layers = net.layers
        self.args = getattr(net, "args", None)
        if hasattr(net, "make_cache"):
            self.make_cache = net.make_cache

    def __call__(self, inputs: mx.array, cache: Any = None) -> mx.array:
        logits = self.net(inputs, cache=cache)
        bump = mx.where(inputs % PERIOD == 0, BUMP, 0.0)[..., None]
        return logits + bump * (mx.arange(logits.shape[-1]) == self.eos)


def _ending(net: Any, tokenizer: Any, name: str) -> Model:
    return Model(net=_EndsOnEos(net, tokenizer.eos_ids[0]), tokenizer=tokenizer, name=name)


@pytest.fixture(scope="module")
def ending_model(tiny_model) -> Model:
    return _ending(tiny_model.net, tiny_model.tokenizer, "tiny-ending")


@contextmanager
def _pipelined(on: bool) -> Iterator[None]:
    was = pipelining.PIPELINED
    pipelining.PIPELINED = on
    try:
        yield
    finally:
        pipelining.PIPELINED = was


ROW = st.fixed_dictionaries({
    "arrival": st.integers(0, 5),
    "prompt": st.integers(0, len(PROMPTS) - 1),
    "budget": st.integers(1, 14),
    "cancel_after": st.one_of(st.none(), st.integers(0, 8)),
    "seed": st.one_of(st.none(), st.integers(0, 3)),
    "stop": st.sampled_from([(), ("e",), (" the",)]),
    "regex": st.booleans(),
})


def _run(model: Model, rows: list[dict[str, Any]], max_rows: int, pipelined: bool) -> tuple[list[Any], BatchCore]:
    """Step a core through the schedule (rows inserted at their arrival step, cancelled when asked); each row's outcome:
    'cancelled', or its tokens, text and finish reason."""
    core = BatchCore(model, max_rows=max_rows)
    handles = [RowHandle(lambda: None) for _ in rows]
    uids: dict[int, int] = {}
    with _pipelined(pipelined):
        for step in range(MAX_STEPS):
            for k, row in enumerate(rows):
                if row["arrival"] == step:
                    sampling = {} if row["seed"] is None else {"temperature": 0.9, "seed": row["seed"]}
                    constraint = compile_regex(r"[a-z ,.]+") if row["regex"] else None
                    options = DecodeOptions.of(max_tokens=row["budget"], stop=() if row["regex"] else row["stop"],
                                               **sampling)
                    uids[k] = core.insert(prepare_request(model, PROMPTS[row["prompt"]], constraint, options),
                                          handles[k])
                if row["cancel_after"] is not None and row["arrival"] + row["cancel_after"] == step:
                    core.remove(uids[k])
            core.step()
            if step > max(r["arrival"] for r in rows) and not core.busy:
                break
        else:
            raise AssertionError(f"the core was still busy after {MAX_STEPS} steps")
    outcomes: list[Any] = []
    for handle in handles:
        try:
            result = handle.result(timeout=0)
        except Cancelled:
            outcomes.append("cancelled")
            continue
        outcomes.append((result.tokens, result.text, result.finish_reason))
    return outcomes, core


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=5), max_rows=st.integers(1, 3))
def test_pipelined_steps_equal_steps_that_read_their_draws_first(ending_model, rows: list[dict[str, Any]],
                                                                  max_rows: int) -> None:
    pipelined, core = _run(ending_model, rows, max_rows, pipelined=True)
    plain, _ = _run(ending_model, rows, max_rows, pipelined=False)
    assert pipelined == plain
    for row, outcome in zip(rows, pipelined):
        assert outcome == "cancelled" or len(outcome[0]) <= row["budget"]


def test_free_text_steps_are_pipelined_and_rows_at_their_budget_are_fed_nothing(tiny_model, monkeypatch) -> None:
    """Free text rows run pipelined steps (each pass after the prefill feeds the device's draws), a regex that forces
    a byte never does; rows ending at max_tokens take as many passes as without pipelining (their last draw is fed to
    no pass), and the prompt cache stores the same sequences."""
    drawn_passes: list[int] = []
    stored: list[tuple[int, ...]] = []
    forward_drawn, store = core_module.forward_drawn, PromptCache.store
    monkeypatch.setattr(core_module, "forward_drawn", lambda *args: drawn_passes.append(1) or forward_drawn(*args))
    monkeypatch.setattr(PromptCache, "store", lambda cache, tokens, leaves: stored.append(tuple(tokens)) or store(
        cache, tokens, leaves))
    rows = [{"arrival": 0, "prompt": p, "budget": 9 + p, "cancel_after": None, "seed": None, "stop": (),
             "regex": False} for p in range(3)]
    pipelined, core = _run(tiny_model, rows, max_rows=3, pipelined=True)
    stored_pipelined, stored[:] = list(stored), []
    plain, reference = _run(tiny_model, rows, max_rows=3, pipelined=False)
    assert pipelined == plain
    assert all(reason == "length" for _, _, reason in pipelined)
    assert core.counters["passes"] == reference.counters["passes"]
    assert len(drawn_passes) == max(row["budget"] for row in rows) - 1  # every pass after the prefill
    assert stored_pipelined == stored and len(stored) == 6  # each row's prompt, then its prompt and output
    drawn_passes.clear()
    core = BatchCore(tiny_model, max_rows=1)
    handle = RowHandle(lambda: None)
    forcing = compile_regex(r"(ab|ac)d[a-z]{0,6}")
    core.insert(prepare_request(tiny_model, "Say it.", forcing, DecodeOptions.of(max_tokens=12)), handle)
    while core.busy:
        core.step()
    assert handle.result(timeout=0).text.startswith("a") and not drawn_passes


def test_pipelined_draws_are_evaluated_apart_from_the_pass_they_feed(tiny_model, monkeypatch) -> None:
    """Each pipelined step queues its draws in an `async_eval` of their own before the pass that feeds them, and that
    pass's `async_eval` leaves them out: MLX signals one event per call, so reading draws queued with the pass would
    wait for the whole pass (the device then idles through the host's control work)."""
    evaluated: list[tuple[mx.array, ...]] = []
    fed: list[tuple[mx.array, mx.array]] = []
    async_eval, forward_drawn = mx.async_eval, core_module.forward_drawn

    def recording_async_eval(*arrays: mx.array) -> None:
        evaluated.append(arrays)  # kept alive, so identities stay distinct
        async_eval(*arrays)

    def recording_forward_drawn(net: Any, caches: Any, drawn: mx.array, feeds: Any) -> mx.array:
        logits = forward_drawn(net, caches, drawn, feeds)
        fed.append((drawn, logits))
        return logits

    def holds(arrays: tuple[mx.array, ...], wanted: mx.array) -> bool:
        return any(a is wanted for a in arrays)

    monkeypatch.setattr(core_module.mx, "async_eval", recording_async_eval)
    monkeypatch.setattr(core_module, "forward_drawn", recording_forward_drawn)
    result, _ = _decode_alone(tiny_model, None, 12, pipelined=True)
    assert len(result.tokens) == 12 and len(fed) == 11
    for drawn, logits in fed:
        with_pass = next(k for k, arrays in enumerate(evaluated) if holds(arrays, logits))
        assert not holds(evaluated[with_pass], drawn)
        assert any(holds(arrays, drawn) for arrays in evaluated[:with_pass])


def _decode_alone(model: Model, constraint: Any, max_tokens: int, pipelined: bool) -> tuple[Any, BatchCore]:
    """One greedy row under `constraint` on a core of its own: its result and the core (its pass counter)."""
    core = BatchCore(model, max_rows=1)
    handle = RowHandle(lambda: None)
    with _pipelined(pipelined):
        core.insert(prepare_request(model, "Spell a long word.", constraint, DecodeOptions.of(max_tokens=max_tokens)),
                    handle)
        while core.busy:
            core.step()
    return handle.result(timeout=0), core


@pytest.mark.parametrize("pattern", [r"[a-z]{24,30}", r"[a-z]{1,4}"])
def test_no_pass_is_queued_for_a_draw_that_may_finish_the_automaton(tiny_model, monkeypatch, pattern: str) -> None:
    """A regex that forces no byte but ends (no byte is live after its last one) is pipelined only at states where
    no token can end it: the pipelined row takes the passes of the row that reads its draws first, none queued with
    its last draw that it never uses, and the same tokens; where no state can end early, some steps still pipeline."""
    compiled = compile_regex(pattern)
    assert compiled.forces_nothing
    drawn_passes: list[int] = []
    forward_drawn = core_module.forward_drawn
    monkeypatch.setattr(core_module, "forward_drawn", lambda *args: drawn_passes.append(1) or forward_drawn(*args))
    pipelined, core = _decode_alone(tiny_model, compiled, 40, pipelined=True)
    plain, reference = _decode_alone(tiny_model, compiled, 40, pipelined=False)
    assert (pipelined.tokens, pipelined.finish_reason) == (plain.tokens, plain.finish_reason)
    assert pipelined.finish_reason == "stop" and pipelined.stats.passes == plain.stats.passes
    assert core.counters["passes"] == reference.counters["passes"] == pipelined.stats.passes
    assert bool(drawn_passes) == (pattern == r"[a-z]{24,30}")  # no token spells 24 letters; one may spell 1 to 4


def _admitted(model: Model, before: list[int], token: int) -> bool:
    """Whether free text admits `token` after the output tokens `before`."""
    control = RowDriver.request(model, compiled_constraint(None), DecodeOptions.of(max_tokens=None))
    control.start()
    for sampled in before:
        control.advance(sampled)
    return bool(control.mask()[token])


def _agrees_with_generate_step(model: Model, ids: list[int], tokens: list[int], ended_on_eos: bool) -> None:
    """`tokens` (and eos after them when the row ended on it) are mlx-lm's `generate_step` greedy output from `ids`,
    or first differ from it at a near-tie or where mlx-lm's token is one free text refuses."""
    wanted = tokens + [model.tokenizer.eos_ids[0]] if ended_on_eos else tokens
    steps = list(generate_step(mx.array(ids), model.net, max_tokens=len(wanted)))
    want = [int(token) for token, _ in steps]
    first = next((i for i, (a, b) in enumerate(zip(wanted, want)) if a != b), None)
    if first is None:
        return
    top = np.sort(np.asarray(steps[first][1].astype(mx.float32)))[-2:]
    assert top[1] - top[0] <= NEAR_TIE or not _admitted(model, tokens[:first], want[first]), (first, tokens, want)


def test_pipelined_rows_joining_and_leaving_equal_mlx_lm_generate_step(ending_model) -> None:
    """Five greedy free-text rows from token ids on three rows of a running engine (later ones join as earlier ones end
    on eos or at their budget): each is mlx-lm's `generate_step` output, eos included where the row ended on it."""
    tokenizer = ending_model.tokenizer
    prompts = [tokenizer.encode(text) for text in ("Once upon a time", "The capital of France is", "1, 2, 3,",
                                                   "def main():", "Hello there")]
    engine = Engine(ending_model, max_rows=3)
    try:
        results = [h.result() for h in [engine.submit(ids, None, max_tokens=10 + k)
                                        for k, ids in enumerate(prompts)]]
    finally:
        engine.close()
    assert {result.finish_reason for result in results} == {"eos", "length"}
    for ids, result in zip(prompts, results):
        _agrees_with_generate_step(ending_model, ids, result.tokens, result.finish_reason == "eos")


@pytest.mark.parametrize("architecture", ["llama", "gemma3_text", "qwen3_5"])
def test_the_prompt_cache_entry_of_a_row_ended_on_eos_equals_a_cold_prefill(smollm2_tokenizer, architecture) -> None:
    """A row that ended on eos in a pipelined step was fed eos ahead: the prompt cache stores its sequence with eos,
    and the next turn, which repeats it, reuses it and decodes what a cold prefill decodes (mlx-lm's generate_step)."""
    model = _ending(tiny_net(architecture, smollm2_tokenizer.vocab_size), smollm2_tokenizer, f"ending-{architecture}")
    ids = smollm2_tokenizer.encode("Tell me a story about a cat")
    core = BatchCore(model, max_rows=1)
    first = RowHandle(lambda: None)
    core.insert(prepare_request(model, ids, None, DecodeOptions.of(max_tokens=40)), first)
    while core.busy:
        core.step()
    reply = first.result(timeout=0)
    assert reply.finish_reason == "eos"
    turn = ids + reply.tokens + [smollm2_tokenizer.eos_ids[0]] + smollm2_tokenizer.encode(" And then?")
    second = RowHandle(lambda: None)
    core.insert(prepare_request(model, turn, None, DecodeOptions.of(max_tokens=8)), second)
    while core.busy:
        core.step()
    result = second.result(timeout=0)
    assert result.stats.cached_tokens >= len(ids) + len(reply.tokens) + 1
    _agrees_with_generate_step(model, turn, result.tokens, result.finish_reason == "eos")
