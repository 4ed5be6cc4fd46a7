"""Rows admitted together that share a prefix prefill it once (`shared_prefixes.py`, `prefill.py`).

The plan, against brute force: every stem is a prefix its riders share past their prompt-cache hits, nested stems
extend their parent, and a stem is made where it saves a pass's worth of positions. The prefill, on a tiny model of
each cache family (plain attention, sliding windows shorter than the prefix, recurrent states beside attention,
recurrent layers fed uniform passes): rows sharing prefixes that end mid-chunk give the logits of each row
prefilled alone by mlx-lm, and states that decode on as the row alone; a row cancelled during the prefill leaves
the others as they were. A row joining a running batch starts from a running row's keys and values where they
hold the prefix it shares (attention layers, the running row held whole).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lm.models.cache import make_prompt_cache

from stdsl.runtime.batch import prefill as prefill_module
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.forward import forward_rows
from stdsl.runtime.batch.prefill import TOKEN_COST, prefill_rows
from stdsl.runtime.batch.prompt_cache import PromptCache
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.batch.row import Row, RowHandle
from stdsl.runtime.batch.shared_prefixes import deepest_stems, plan_stems
from stdsl.runtime.model.loading import Model
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.row_caches.load_probe import cache_layout
from tests.runtime.engine_oracle import agrees
from tests.runtime.row_caches.architectures import tiny_net

FAMILIES = ["llama", "gemma3_text", "qwen3_5", "nemotron_h"]
"""Plain attention, sliding windows of 4 positions, Gated DeltaNet beside attention, Mamba 2 fed uniform passes."""


def _counters() -> dict[str, int]:
    return {"passes": 0, "prompt_tokens": 0, "prefilled_tokens": 0, "shared_prefix_rows": 0,
            "shared_prefix_tokens": 0}


# ---------------------------------------------------------------------------------------------- the plan

QUERIES = st.lists(st.lists(st.integers(0, 2), min_size=0, max_size=40), min_size=1, max_size=7)


@settings(max_examples=200, deadline=None)
@given(queries=QUERIES, data=st.data())
def test_each_stem_is_a_prefix_its_riders_share_past_their_hits_and_pays_for_its_pass(queries, data) -> None:
    hits = [data.draw(st.integers(0, len(q))) for q in queries]
    stems = plan_stems(queries, hits, TOKEN_COST)
    for index, stem in enumerate(stems):
        assert len(stem.riders) >= 2
        shared = queries[stem.riders[0]][: stem.length]
        assert all(queries[i][: stem.length] == shared for i in stem.riders)
        assert all(hits[i] < stem.length for i in stem.riders)
        if stem.parent is not None:
            parent = stems[stem.parent]
            assert parent.length == stem.base < stem.length and set(stem.riders) <= set(parent.riders)
            assert stem.parent < index and stem.level == parent.level + 1
        elif stem.hit_of is not None:
            assert stem.base == hits[stem.hit_of] and queries[stem.hit_of][: stem.base] == shared[: stem.base]
        else:
            assert stem.base == 0
        outer = stems[stem.parent].length if stem.parent is not None else 0
        saved = sum(stem.length - max(hits[i], outer) for i in stem.riders) - (stem.length - stem.base)
        assert saved * TOKEN_COST >= 1
    for i, chosen in enumerate(deepest_stems(stems, len(queries))):
        riding = [stem.length for stem in stems if i in stem.riders]
        assert (chosen is None) == (not riding)
        assert chosen is None or stems[chosen].length == max(riding)


def test_rows_sharing_a_system_prompt_then_pairs_sharing_more_get_nested_stems() -> None:
    system, a, b = list(range(100, 140)), list(range(200, 230)), list(range(300, 330))
    queries = [system + a + [1], system + a + [2], system + b + [3], system + b + [4], system + [5]]
    stems = plan_stems(queries, [0] * 5, TOKEN_COST)
    assert [(s.length, s.riders, s.parent) for s in stems] == [(40, (0, 1, 2, 3, 4), None), (70, (0, 1), 0),
                                                              (70, (2, 3), 0)]
    assert deepest_stems(stems, 5) == [1, 1, 2, 2, 0]


def test_no_stem_where_the_shared_prefix_saves_less_than_a_pass_or_a_hit_already_holds_it() -> None:
    assert plan_stems([[1, 2, 3, 9], [1, 2, 3, 8]], [0, 0], TOKEN_COST) == []  # 3 positions saved: not a pass
    long = list(range(50))
    assert plan_stems([long + [1], long + [2]], [50, 50], TOKEN_COST) == []  # the prompt cache holds it
    (stem,) = plan_stems([long + [1], long + [2], long + [3]], [50, 20, 0], TOKEN_COST)
    assert stem.riders == (1, 2) and stem.hit_of == 1 and stem.base == 20


# ---------------------------------------------------------------------------------------------- the prefill


@pytest.fixture(scope="module")
def family_models(smollm2_tokenizer) -> dict[str, Model]:
    return {name: Model(net=tiny_net(name, smollm2_tokenizer.vocab_size), tokenizer=smollm2_tokenizer,
                        name=f"tiny-{name}") for name in FAMILIES}


def _rows(model: Model, prompts: list[list[int]]) -> list[Row]:
    rows = []
    for prompt in prompts:
        request = prepare_request(model, prompt, None, DecodeOptions.of(max_tokens=4))
        rows.append(Row(request.prompt_ids, request.controller, request.log, request.options, request.parser,
                        RowHandle(lambda: None)))
    return rows


def _prompts() -> list[list[int]]:
    """Five prompts: all share 37 tokens, two pairs share 23 more, and one row is the shared prefix and a token."""
    rng = np.random.default_rng(7)
    system = rng.integers(10, 2000, 37).tolist()
    pair_a, pair_b = rng.integers(10, 2000, 23).tolist(), rng.integers(10, 2000, 23).tolist()
    return [system + pair_a + [11, 12, 13], system + pair_a + [14], system + pair_b + [15, 16],
            system + pair_b + rng.integers(10, 2000, 9).tolist(), system + [17]]


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.abs(got - want).max() <= 1e-3 * (np.abs(want).max() + 1.0))


def _alone(net: Any, prompt: list[int], after: list[list[int]]) -> list[np.ndarray]:
    """mlx-lm's one-sequence cache: the prompt's last logits, then each feed's."""
    cache = make_prompt_cache(net)
    out = [np.asarray(net(mx.array([prompt]), cache=cache)[0, -1].astype(mx.float32))]
    for feed in after:
        out.append(np.asarray(net(mx.array([feed]), cache=cache)[0, -1].astype(mx.float32)))
    return out


def _decodes_as_alone(model: Model, prompts: list[list[int]], chosen: list[int], states: list[Any],
                      last: list[mx.array]) -> None:
    """Each chosen row's last logits, and the logits of two ragged passes from its state, equal the row alone."""
    after = [[[21, 22], [23]], [[24], [25, 26, 27]], [[28, 29, 30], [31]], [[32], [33]], [[34, 35], [36, 37]]]
    caches = cache_layout(model.net).new(bounded=True)
    caches.append_rows(states, [len(prompts[i]) for i in chosen])
    got = [[np.asarray(x)] for x in last]
    for step in range(2):
        logits = np.asarray(forward_rows(model.net, caches, [after[i][step] for i in chosen]))
        for row in range(len(chosen)):
            got[row].append(logits[row])
    for row, i in enumerate(chosen):
        want = _alone(model.net, prompts[i], after[i])
        assert all(_close(g, w) for g, w in zip(got[row], want)), (model.name, i)


@pytest.mark.parametrize("chunk", [16, 512])
@pytest.mark.parametrize("family", FAMILIES)
def test_rows_sharing_prefixes_prefilled_together_equal_each_row_alone(family_models, family, chunk) -> None:
    """Nested stems (37 tokens for all, 60 for two pairs; chunks of 16 end them mid-chunk) prefilled once each:
    fewer positions fed than the prompts hold, and every row's logits and state those of the row alone."""
    model = family_models[family]
    prompts = _prompts()
    counters = _counters()
    rows = _rows(model, prompts)
    got = prefill_rows(model.net, cache_layout(model.net), PromptCache(0), rows, chunk, counters)
    assert got is not None
    states, last = got
    assert counters["shared_prefix_rows"] == 5
    assert counters["shared_prefix_tokens"] == 4 * 60 + 37
    assert counters["prefilled_tokens"] == 37 + 2 * 23 + 3 + 1 + 2 + 9 + 1  # each stem once, then each row's rest
    assert [row.stats.cached_tokens for row in rows] == [60, 60, 60, 60, 37]
    _decodes_as_alone(model, prompts, list(range(5)), states, last)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_row_cancelled_during_the_shared_prefill_leaves_the_others_as_alone(family_models, family,
                                                                             monkeypatch) -> None:
    """Rows cancelled after the stems' first pass: the prefill goes on for the others, which equal each row alone;
    when every row is cancelled it stops between two chunks and ends them all."""
    model = family_models[family]
    prompts = _prompts()
    forward = prefill_module.forward_rows

    def cancelling(victims: list[Row]) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> mx.array:
            out = forward(*args, **kwargs)
            for row in victims:
                row.cancelled = True
            return out
        return wrapped

    rows = _rows(model, prompts)
    monkeypatch.setattr(prefill_module, "forward_rows", cancelling([rows[1]]))
    got = prefill_rows(model.net, cache_layout(model.net), PromptCache(0), rows, 16, _counters())
    assert got is not None
    _decodes_as_alone(model, prompts, list(range(5)), *got)
    rows = _rows(model, prompts)
    monkeypatch.setattr(prefill_module, "forward_rows", cancelling(rows))
    counters = _counters()
    assert prefill_rows(model.net, cache_layout(model.net), PromptCache(0), rows, 16, counters) is None
    assert counters["passes"] == 1 and all(row.handle.done for row in rows)


@pytest.mark.parametrize("family", ["llama", "qwen3_5"])
def test_a_stem_starts_from_a_prompt_cache_hit_and_extends_it(family_models, family) -> None:
    """Two rows whose shared prefix extends a stored prompt (recurrent states: a whole stored sequence): the stem is
    prefilled from the hit, not from nothing, and each row equals the row alone."""
    model = family_models[family]
    prompts = _prompts()
    layout = cache_layout(model.net)
    cache = PromptCache(exact=not layout.trimmable)
    assert prefill_rows(model.net, layout, cache, _rows(model, [prompts[0][:42]]), 512, _counters()) is not None
    counters = _counters()
    got = prefill_rows(model.net, layout, cache, _rows(model, prompts[:2]), 512, counters)
    assert got is not None
    assert counters["prefilled_tokens"] == 18 + 3 + 1 and counters["shared_prefix_tokens"] == 2 * 18
    _decodes_as_alone(model, prompts, [0, 1], *got)


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
@pytest.mark.parametrize("held", [40, 300])
def test_a_row_joining_starts_from_a_running_rows_prefix_while_it_is_held_whole(family_models, family, held) -> None:
    """A row admitted while another runs starts from the running row's keys and values for the prefix they share
    (37 tokens), unless a sliding window has made the running row forget its oldest positions (a 300-token row:
    past the window and GROWTH); either way both rows decode as each alone."""
    model = family_models[family]
    rng = np.random.default_rng(3)
    system = _prompts()[0][:37]
    first, second = system + rng.integers(10, 2000, held - 37).tolist(), system + [19, 23]
    core = BatchCore(model, max_rows=2, prompt_cache_bytes=0)
    handles = [RowHandle(lambda: None), RowHandle(lambda: None)]
    core.insert(prepare_request(model, first, None, DecodeOptions.of(max_tokens=10)), handles[0])
    core.step()
    core.step()
    core.insert(prepare_request(model, second, None, DecodeOptions.of(max_tokens=10)), handles[1])
    while core.busy:
        core.step()
    forgets = family == "gemma3_text" and held > 260
    assert core.counters["shared_prefix_rows"] == (0 if forgets else 1)
    assert core.counters["prefilled_tokens"] == held + 2 + (37 if forgets else 0)
    for prompt, handle in zip((first, second), handles):
        assert agrees(model, prompt, None, 10, handle.result(timeout=0).tokens)


def test_recurrent_rows_do_not_start_from_a_running_row(family_models) -> None:
    """A running row's recurrent state holds its whole sequence, not the prefix a new row shares: no donor."""
    model = family_models["qwen3_5"]
    system = _prompts()[0][:37]
    core = BatchCore(model, max_rows=2, prompt_cache_bytes=0)
    handles = [RowHandle(lambda: None), RowHandle(lambda: None)]
    core.insert(prepare_request(model, system + [5, 6], None, DecodeOptions.of(max_tokens=6)), handles[0])
    core.step()
    core.insert(prepare_request(model, system + [7], None, DecodeOptions.of(max_tokens=6)), handles[1])
    while core.busy:
        core.step()
    assert core.counters["shared_prefix_rows"] == 0 and core.counters["prefilled_tokens"] == 39 + 38
    for prompt, handle in zip((system + [5, 6], system + [7]), handles):
        assert agrees(model, prompt, None, 6, handle.result(timeout=0).tokens)
