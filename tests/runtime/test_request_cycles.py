"""A finished request leaves no reference cycles: its controller, log and events are freed when the caller lets go
of the result, not at the collector's next full pass.

A row's handle held the engine's cancel, which held the row's submission, which held the handle: every request's
controller (its kept masks: a vocabulary-sized row each), log and events stayed until the collector walked them,
and on a long-running server those were old objects, walked only by its rare full collections.  Each test runs
requests with the collector off and asks it for what is unreachable afterwards.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

import stdsl

CLOSED = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                                           "city": {"type": "string", "maxLength": 12}},
          "required": ["name", "age", "city"]}
OPEN = {"type": "object", "properties": {"name": {"type": "string"}}}


def _unreachable_after(run: Any) -> int:
    """The objects in cycles that `run()` leaves once its results are dropped (run twice: the first fills the
    caches a process keeps)."""
    run()
    gc.collect()
    run()
    return gc.collect()


@pytest.mark.parametrize("schema", [CLOSED, OPEN], ids=["closed", "open"])
def test_a_generation_leaves_no_cycles(tiny_model, schema: dict, collector_off: None) -> None:
    constraint = stdsl.compile(schema, strict=schema is CLOSED)
    assert _unreachable_after(lambda: stdsl.generate(tiny_model, "A person:", constraint, max_tokens=24)) == 0


def test_a_stream_read_to_its_end_or_cancelled_leaves_no_cycles(tiny_model, collector_off: None) -> None:
    def read() -> None:
        for _ in stdsl.stream(tiny_model, "A person:", CLOSED, max_tokens=16):
            pass
        cancelled = stdsl.stream(tiny_model, "A person:", CLOSED, max_tokens=16)
        for _ in cancelled:
            cancelled.cancel()

    assert _unreachable_after(read) == 0


def test_a_batch_and_parallel_fields_leave_no_cycles(tiny_model, collector_off: None) -> None:
    requests = [{"prompt": f"Person {i}:", "constraint": CLOSED, "max_tokens": 16} for i in range(3)]

    def run() -> None:
        stdsl.generate_batch(tiny_model, requests)
        stdsl.generate(tiny_model, "A person:", CLOSED, max_tokens=32, parallel_fields=True)

    assert _unreachable_after(run) == 0
