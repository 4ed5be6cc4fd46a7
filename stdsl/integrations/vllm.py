"""stdsl constraints inside vLLM: a logits processor on vLLM's custom-logits-processor interface (v1).

    vllm serve MODEL --logits-processors stdsl.integrations.vllm:StdslLogitsProcessor
    LLM(model=MODEL, logits_processors=[StdslLogitsProcessor])

A request opts in with `SamplingParams(extra_args={"stdsl": spec})` (OpenAI server:
`"vllm_xargs": {"stdsl": "<spec as JSON text>"}`), where spec is the constraint spec of
`stcon serve`: `{"kind": "json_schema", "schema": ...}`, `{"kind": "regex", "pattern": ...}`,
`{"kind": "program", "source": ..., "arguments": {...}}` or `{"kind": "tools", ...}`.  The
budget is the request's `max_tokens`; compiled constraints (and their rows, budget tables and
planners) are cached across requests by the spec's canonical text.  Requests without the key
are left alone.  Per-request state follows vLLM's batch updates (removed, added, moved).
A request whose constraint cannot be met (no valid output within `max_tokens`, a nesting cap
reached) is ended at once with eos and the reason logged: never an invalid continuation.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stdsl.extras import missing_extra

try:
    import torch
    from vllm.sampling_params import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as missing:
    raise missing_extra("vllm", missing) from None

from stdsl.errors import StdslError
from stdsl.integrations.batch import BatchConstraints
from stdsl.integrations.stepwise import StepwiseConstraint
from stdsl.runtime.control.constraint_state import vocabulary_of
from stdsl.runtime.model.tokenizer import Tokenizer

if TYPE_CHECKING:
    from vllm.config import VllmConfig

EXTRA_ARG = "stdsl"
COMPILE_SECONDS = 60.0
MAX_COMPILED = 64
logger = logging.getLogger(__name__)
_COMPILED: OrderedDict[str, Any] = OrderedDict()


def request_spec(params: SamplingParams) -> Mapping[str, Any] | None:
    """The stdsl constraint spec a request carries in its extra args (a mapping or JSON text), or None."""
    raw = (params.extra_args or {}).get(EXTRA_ARG)
    if raw is None:
        return None
    spec = json.loads(raw) if isinstance(raw, str | bytes) else raw
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise StdslError(f"extra_args[{EXTRA_ARG!r}] must be a constraint spec object with a 'kind'")
    return spec


def compiled_constraint(spec: Mapping[str, Any]) -> Any:
    """The compiled constraint of a spec, cached by the spec's canonical text (the last MAX_COMPILED kept)."""
    from stdsl.server.constraint_spec import build_constraint, canonical_text

    key = canonical_text(spec)
    hit = _COMPILED.get(key)
    if hit is not None:
        _COMPILED.move_to_end(key)
        return hit
    compiled = build_constraint(spec, COMPILE_SECONDS)
    _COMPILED[key] = compiled
    if len(_COMPILED) > MAX_COMPILED:
        _COMPILED.popitem(last=False)
    return compiled


def engine_tokenizer(vllm_config: VllmConfig) -> Tokenizer:
    """stdsl's tokenizer over the engine's (the model config's tokenizer path, through transformers)."""
    from transformers import AutoTokenizer

    model_config = vllm_config.model_config
    hf = AutoTokenizer.from_pretrained(model_config.tokenizer, revision=model_config.tokenizer_revision,
                                       trust_remote_code=model_config.trust_remote_code)
    eos = hf.eos_token_id
    return Tokenizer.from_hf(hf, eos_ids=[int(eos)] if eos is not None else None)


class StdslLogitsProcessor(LogitsProcessor):
    """Masks each constrained request's logits to what its stdsl constraint admits, one token per step."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Refuse (ValueError: HTTP 400) a request whose spec does not compile."""
        try:
            spec = request_spec(sampling_params)
            if spec is not None:
                compiled_constraint(spec)
        except (StdslError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"stdsl constraint: {error}") from error

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        self.tokenizer = engine_tokenizer(vllm_config)
        self.vocab = vocabulary_of(self.tokenizer)
        self.batch = BatchConstraints(self.vocab)

    def is_argmax_invariant(self) -> bool:
        """The mask changes the argmax, so greedy requests need it too."""
        return False

    def _steps(self, params: SamplingParams) -> StepwiseConstraint | None:
        """A started controller for a request's constraint (None when it has none; ended with eos if it fails)."""
        spec = request_spec(params)
        if spec is None:
            return None
        steps = StepwiseConstraint(compiled_constraint(spec), self.tokenizer, self.vocab, params.max_tokens)
        try:
            steps.start()
        except StdslError as error:
            logger.warning("stdsl: request ended at once: %s", error)
            steps.fail(error)
        return steps

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow the batch: removed rows, then added (with their output lists), then moved."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.batch.remove(index)
        for index, params, _prompt, output_tokens in batch_update.added:
            self.batch.add(index, self._steps(params), output_tokens)
        for source, target, direction in batch_update.moved:
            self.batch.move(source, target, direction == MoveDirectionality.SWAP)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Take the rows' newest tokens, then mask the constrained rows in place."""
        self.batch.sync()
        return self.batch.apply(logits)
