"""The thread-free batch core, stepped by the test itself: rows decoded together equal each row decoded alone.

Rows join at any step, leave when done, are cancelled at any step, and some prompts make the model pass
raise: such a prefill fails exactly the rows admitted with it, every other row still gets the greedy tokens
it would get alone (or first differs from them at a near-tie, see engine_oracle), and the core ends idle.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import compile_regex
from stdsl.errors import Cancelled, StdslError
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.model.loading import Model
from stdsl.runtime.options import DecodeOptions
from tests.runtime.engine_oracle import NEAR_TIE, sequential_greedy

FAILURE = "a pass failed on purpose"
CONSTRAINTS: list[Any] = [
    None,
    compile_regex(r'\{"id":[0-9]{1,3},"ok":(true|false)\}'),
    {"enum": ["red", "green", "blue", "dark red"]},
    {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    compile_regex(r"[a-z]+(, [a-z]+){0,2}\."),
]
PROMPTS = ["Describe it.", "Name a colour.", "List.", "Who?"]
MAX_STEPS = 400


class _FailingNet:
    """The tiny llama, raising on any pass that feeds `marker` (a prompt holding it fails its prefill)."""

    def __init__(self, net: Any, marker: int) -> None:
        self.net, self.marker = net, marker
        self.layers, self.args = net.layers, net.args

    def __call__(self, inputs: mx.array, cache: Any = None) -> mx.array:
        if self.marker in sum(inputs.tolist(), []):
            raise RuntimeError(FAILURE)
        return self.net(inputs, cache=cache)


@pytest.fixture(scope="module")
def failing_model(tiny_model) -> tuple[Model, int]:
    marker = tiny_model.tokenizer.encode("Hello")[0]
    return Model(net=_FailingNet(tiny_model.net, marker), tokenizer=tiny_model.tokenizer, name="tiny-failing"), marker


_ALONE: dict[tuple[int, int, int], tuple[list[int], list[float], list[int]]] = {}


def _agrees_alone(model: Model, prompt: int, constraint: int, budget: int, tokens: list[int]) -> bool:
    """Whether `tokens` equal the row decoded alone, or first differ from it at a near-tie (memoized oracle)."""
    key = (prompt, constraint, budget)
    if key not in _ALONE:
        _ALONE[key] = sequential_greedy(model, PROMPTS[prompt], CONSTRAINTS[constraint], budget)
    expected, margins, starts = _ALONE[key]
    if tokens == expected:
        return True
    first = next((i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b), min(len(tokens), len(expected)))
    return margins[max(k for k, start in enumerate(starts) if start <= first)] <= NEAR_TIE


ROW = st.fixed_dictionaries({
    "arrival": st.integers(0, 6),
    "prompt": st.integers(0, len(PROMPTS) - 1),
    "constraint": st.integers(0, len(CONSTRAINTS) - 1),
    "budget": st.integers(14, 20),
    "cancel_after": st.one_of(st.none(), st.integers(0, 8)),
    "fails": st.booleans(),
})


def _run(model: Model, marker: int, rows: list[dict[str, Any]], max_rows: int) -> list[RowHandle]:
    """Step a core through the schedule: insert rows at their arrival step, cancel them when asked."""
    core = BatchCore(model, max_rows=max_rows)
    handles: list[RowHandle] = [RowHandle(lambda: None) for _ in rows]
    uids: dict[int, int] = {}
    for step in range(MAX_STEPS):
        for k, row in enumerate(rows):
            if row["arrival"] == step:
                prompt = [1, 2, marker] if row["fails"] else PROMPTS[row["prompt"]]
                constraint = None if row["fails"] else CONSTRAINTS[row["constraint"]]
                options = DecodeOptions.of(max_tokens=row["budget"])
                uids[k] = core.insert(prepare_request(model, prompt, constraint, options), handles[k])
            if row["cancel_after"] is not None and row["arrival"] + row["cancel_after"] == step:
                core.remove(uids[k])
        ended = core.step()
        assert all(handles[k].done for k, uid in uids.items() if uid in ended)
        if step > max(r["arrival"] for r in rows) and not core.busy:
            return handles
    raise AssertionError(f"the core was still busy after {MAX_STEPS} steps")


def _check(model: Model, rows: list[dict[str, Any]], handles: list[RowHandle]) -> None:
    """Each row's outcome: cancelled before admission, failed with its admission group, else its tokens alone."""
    admitted = [r for r in rows if r["cancel_after"] != 0]
    for row, handle in zip(rows, handles):
        assert handle.done
        if row["cancel_after"] == 0:
            with pytest.raises(Cancelled):
                handle.result(timeout=0)
            continue
        if any(other["fails"] and other["arrival"] == row["arrival"] for other in admitted):
            with pytest.raises(StdslError, match=FAILURE):
                handle.result(timeout=0)
            continue
        try:
            result = handle.result(timeout=0)
        except Cancelled:
            assert row["cancel_after"] is not None, "only a cancelled row may end cancelled"
            continue
        assert len(result.tokens) <= row["budget"]
        assert _agrees_alone(model, row["prompt"], row["constraint"], row["budget"], result.tokens), row


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=5), max_rows=st.integers(1, 3))
def test_rows_together_equal_each_row_alone(failing_model, rows: list[dict[str, Any]], max_rows: int) -> None:
    model, marker = failing_model
    rows = [{**r, "fails": False} for r in rows]
    _check(model, rows, _run(model, marker, rows, max_rows))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=5))
def test_a_failing_admission_fails_only_the_rows_admitted_with_it(failing_model, rows: list[dict[str, Any]]) -> None:
    model, marker = failing_model
    _check(model, rows, _run(model, marker, rows, max_rows=len(rows)))


def test_a_fixed_schedule_of_joins_leaves_failures_and_cancels(failing_model) -> None:
    model, marker = failing_model
    rows = [
        {"arrival": 0, "prompt": 0, "constraint": 1, "budget": 16, "cancel_after": None, "fails": False},
        {"arrival": 0, "prompt": 1, "constraint": 2, "budget": 8, "cancel_after": None, "fails": False},
        {"arrival": 2, "prompt": 2, "constraint": 0, "budget": 16, "cancel_after": 3, "fails": False},
        {"arrival": 3, "prompt": 3, "constraint": 0, "budget": 6, "cancel_after": None, "fails": True},
        {"arrival": 3, "prompt": 3, "constraint": 3, "budget": 12, "cancel_after": None, "fails": False},
        {"arrival": 4, "prompt": 2, "constraint": 4, "budget": 12, "cancel_after": 0, "fails": False},
        {"arrival": 5, "prompt": 0, "constraint": 4, "budget": 14, "cancel_after": None, "fails": False},
    ]
    handles = _run(model, marker, rows, max_rows=len(rows))
    _check(model, rows, handles)
    assert handles[0].result(timeout=0).tokens and handles[6].result(timeout=0).tokens
    with pytest.raises(Cancelled):
        handles[2].result(timeout=0)


def test_a_row_whose_prompt_is_done_leaves_the_prefill_passes(failing_model, monkeypatch) -> None:
    """Prompts of different lengths admitted together: no prefill pass feeds a row nothing (a row whose prompt is
    done leaves the prefill batch instead of riding along as padding), and each row still decodes as alone."""
    import stdsl.runtime.batch.core as core_module
    import stdsl.runtime.batch.prefill as prefill_module

    model, _ = failing_model
    feeds: list[list[int]] = []
    forward_rows = core_module.forward_rows

    def recording(net: Any, caches: Any, rows: Any, read: Any = None) -> mx.array:
        feeds.append([len(feed) for feed in rows])
        return forward_rows(net, caches, rows, read)

    monkeypatch.setattr(core_module, "forward_rows", recording)
    monkeypatch.setattr(prefill_module, "forward_rows", recording)
    core = BatchCore(model, max_rows=4, prefill_chunk=4, prompt_cache_bytes=0)
    picks = [(0, 0), (2, 0), (1, 2), (3, 4)]
    handles = [RowHandle(lambda: None) for _ in picks]
    for (prompt, constraint), handle in zip(picks, handles):
        core.insert(prepare_request(model, PROMPTS[prompt], CONSTRAINTS[constraint], DecodeOptions.of(max_tokens=16)),
                    handle)
    core.step()  # the prefill, then the first decode pass
    prefill = feeds[: core.counters["passes"] - 1]
    assert all(all(prefill_rows) for prefill_rows in prefill), prefill
    assert len({len(prefill_rows) for prefill_rows in prefill}) > 1, "some row should have left the prefill early"
    for _ in range(MAX_STEPS):
        if not core.busy:
            break
        core.step()
    for (prompt, constraint), handle in zip(picks, handles):
        assert _agrees_alone(model, prompt, constraint, 16, handle.result(timeout=0).tokens)


def test_rows_prefilled_on_two_cores_equal_each_row_alone(failing_model, monkeypatch) -> None:
    """Rows admitted together feed as two groups on two cores (`_feed_together`, every prefill of two rows or more
    here) and project through a head split over two streams; each row still decodes as alone, joins and cancels
    included."""
    import stdsl.runtime.batch.forward as forward_module
    import stdsl.runtime.batch.prefill as prefill_module

    model, marker = failing_model
    groups: list[int] = []
    beside = prefill_module.beside

    def counted(first: Any, second: Any) -> Any:
        groups.append(2)
        return beside(first, second)

    monkeypatch.setattr(prefill_module, "BESIDE_TOKENS", 1)
    monkeypatch.setattr(prefill_module, "beside", counted)
    monkeypatch.setattr(forward_module, "SPLIT_HEAD_BYTES", 0)
    rows = [
        {"arrival": 0, "prompt": 0, "constraint": 1, "budget": 16, "cancel_after": None, "fails": False},
        {"arrival": 0, "prompt": 1, "constraint": 2, "budget": 8, "cancel_after": None, "fails": False},
        {"arrival": 0, "prompt": 3, "constraint": 0, "budget": 12, "cancel_after": None, "fails": False},
        {"arrival": 2, "prompt": 2, "constraint": 0, "budget": 16, "cancel_after": 3, "fails": False},
        {"arrival": 3, "prompt": 3, "constraint": 3, "budget": 12, "cancel_after": None, "fails": False},
        {"arrival": 3, "prompt": 0, "constraint": 4, "budget": 14, "cancel_after": None, "fails": False},
    ]
    _check(model, rows, _run(model, marker, rows, max_rows=4))
    assert groups, "some prefill should have run on two cores"
