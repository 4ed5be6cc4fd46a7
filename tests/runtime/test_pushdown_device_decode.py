"""Greedy decoding under recursive constraints with masks from the device vector is token-identical to host masks.

$STDSL_PUSHDOWN_MASKS forces each source through the whole engine (the tiny random-weight model, SmolLM2's
vocabulary); here the device path runs on MLX's CPU backend, on a GPU in benchmarks/gpu_checks.sh.  Budgets
that bind near the end exercise the host budget applied on top of device masks.
"""

from __future__ import annotations

import pytest

import stdsl
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.generation import Generation
from stdsl.kernels.pushdown.device_masks import MASK_SOURCE_ENV
from stdsl.runtime.batch.device_masks import device_masks_of
from stdsl.runtime.decode import generate
from tests.runtime.test_pushdown_decode import FS_SCHEMA, load_tasks


def decode_both(tiny_model, monkeypatch: pytest.MonkeyPatch, schema: dict, max_tokens: int, **options) -> Generation:
    """Decode under host masks, then device masks (greedily, or sampled with a seed); they agree token for token."""
    constraint = stdsl.compile(schema)
    device_masks = device_masks_of(Tables.of(constraint.machine, vocabulary_of(tiny_model.tokenizer)).rows)
    assert device_masks is not None
    outputs = {}
    for source in ("host", "device"):
        monkeypatch.setenv(MASK_SOURCE_ENV, source)
        before = device_masks.served
        outputs[source] = generate(tiny_model, "Answer:", constraint, max_tokens=max_tokens, **options)
        assert (device_masks.served > before) == (source == "device")
    host, device = outputs["host"], outputs["device"]
    assert device.tokens == host.tokens and device.text == host.text
    assert device.finish_reason == host.finish_reason
    assert constraint.accepts(device.text) and len(device.tokens) <= max_tokens
    return host


@pytest.mark.parametrize("max_tokens", [14, 40, 120])
def test_the_tree_schema_decodes_alike_from_both_sources(tiny_model, monkeypatch: pytest.MonkeyPatch,
                                                         max_tokens: int) -> None:
    decode_both(tiny_model, monkeypatch, FS_SCHEMA, max_tokens)


def test_the_shared_recursive_tasks_decode_alike_from_both_sources(tiny_model, monkeypatch: pytest.MonkeyPatch) -> None:
    for task in load_tasks():
        decode_both(tiny_model, monkeypatch, task["schema"], 48)


@pytest.mark.parametrize(("seed", "max_tokens"), [(3, 120), (3, 40), (5, 120), (12, 120), (12, 30)])
def test_seeded_sampling_decodes_alike_from_both_sources(tiny_model, monkeypatch: pytest.MonkeyPatch, seed: int,
                                                         max_tokens: int) -> None:
    """Seeds whose samples nest two and three levels deep; the shorter budgets bind inside the nesting."""
    out = decode_both(tiny_model, monkeypatch, FS_SCHEMA, max_tokens, temperature=1.0, seed=seed)
    assert out.text.count("[{") >= 1
