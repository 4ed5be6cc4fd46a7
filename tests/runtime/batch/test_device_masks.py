"""Device masks are the runtime's: picked and built on the runner thread, never on a caller's.

A request is prepared on the caller's thread (its forced prefix planned on the host rows); the core, on the runner,
hands a pushdown row's controller the device masks where `mask_source` picks them. Every call that picks the
source (MLX's default device), builds the device vector or computes a device mask is recorded with its thread.
"""

from __future__ import annotations

import threading

import pytest

import stdsl
import stdsl.kernels.walk as walk
from stdsl.kernels.pushdown.device import PushdownDevice
from stdsl.kernels.pushdown.device_masks import MASK_SOURCE_ENV, DeviceMasks
from stdsl.runtime.runner import THREAD_NAME

TREE = {"$defs": {"node": {"type": "object", "properties": {"n": {"type": "integer"},
                                                            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                     "maxItems": 2}},
                           "required": ["n", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}


def record_threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(call, thread name) of every device-mask call from now on: the source's pick, the vector's build, a mask."""
    calls: list[tuple[str, str]] = []

    def recorded(owner: object, name: str) -> None:
        original = getattr(owner, name)

        def call(*args: object, **kwargs: object) -> object:
            calls.append((name, threading.current_thread().name))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, call)

    recorded(walk, "backend")
    recorded(DeviceMasks, "__init__")
    recorded(PushdownDevice, "mask")
    recorded(PushdownDevice, "encode")
    return calls


def test_device_masks_are_built_and_computed_on_the_runner_thread_only(tiny_model, monkeypatch) -> None:
    monkeypatch.setenv(MASK_SOURCE_ENV, "device")
    calls = record_threads(monkeypatch)
    constraint = stdsl.compile(TREE)
    for seed in range(2):
        out = stdsl.generate(tiny_model, "Answer:", constraint, max_tokens=40, temperature=1.0, seed=seed)
        assert constraint.accepts(out.text) or out.finish_reason == "length"
    assert {name for name, _ in calls} >= {"mask", "encode"}
    assert {thread for _, thread in calls} == {THREAD_NAME}


def test_the_automatic_source_is_picked_on_the_runner_thread(tiny_model, monkeypatch) -> None:
    monkeypatch.setenv(MASK_SOURCE_ENV, "auto")
    calls = record_threads(monkeypatch)
    out = stdsl.generate(tiny_model, "Answer:", stdsl.compile(TREE), max_tokens=30, seed=0)
    assert out.tokens
    assert ("backend", THREAD_NAME) in calls
    assert {thread for _, thread in calls} == {THREAD_NAME}
