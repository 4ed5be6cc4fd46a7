"""stdsl constraints inside vLLM: one logits processor class on both of vLLM's custom-logits-processor interfaces.

    vllm serve MODEL --logits-processors stdsl.integrations.vllm:StdslLogitsProcessor
    LLM(model=MODEL, logits_processors=[StdslLogitsProcessor])

vLLM 0.32 has two model runners, each with its own interface: the V1 runner's
(`vllm.v1.sample.logits_processor.LogitsProcessor`: batch updates of removed, added and moved rows) and
Model Runner V2's (`vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor`: requests by slot,
`add_request`, `apply(logits, ctx)`), the default wherever Triton runs.  The class subclasses both
(where the V2 interface exists), so the same name serves either runner.

A request opts in with `SamplingParams(extra_args={"stdsl": spec})` (OpenAI server:
`"vllm_xargs": {"stdsl": "<spec as JSON text>"}`), where spec is a constraint spec of
`stdsl.integrations.constraint_request` (the kinds of `stcon serve`, and `grammar`).  At admission
`validate_params` refuses, as HTTP 400, a spec that is malformed or does not compile, a request that
also asks for vLLM's own structured outputs or for a sampling option that would cut or bend a
constrained output (`stop`, `stop_token_ids`, `min_tokens`, `ignore_eos`, `allowed_token_ids`,
`bad_words`, `thinking_token_budget`, `repetition_detection`), and one whose `max_tokens` holds no
valid output.  The budget is the request's `max_tokens`; requests without the key are left alone.
"""

from __future__ import annotations

import logging
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

from stdsl.extras import missing_extra

try:
    import torch
    from vllm.sampling_params import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor
except ImportError as missing:
    raise missing_extra("vllm", missing) from None

from stdsl.caches import CacheKind
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.errors import BudgetError, OptionError, StdslError
from stdsl.integrations.batch import BatchConstraints, mask_rows, take_tokens
from stdsl.integrations.constraint_request import FIELD, compiled_constraint, parse_spec
from stdsl.integrations.stepwise import StepwiseConstraint
from stdsl.model_files.tokenizer import Tokenizer

if TYPE_CHECKING:
    from vllm.config import ModelConfig, VllmConfig

EXTRA_ARG = FIELD
FRONTEND_FRAMES = 8
logger = logging.getLogger(__name__)

_CONFLICTS: tuple[tuple[str, str], ...] = (
    ("structured_outputs", "vLLM's own structured outputs (structured_outputs, guided_*, a json_schema "
                           "response_format) cannot be combined with an stdsl constraint on one request: send one"),
    ("stop", "stop strings would cut a constrained output short; the constraint decides where it ends"),
    ("stop_token_ids", "stop_token_ids would cut a constrained output short; the constraint decides where it ends"),
    ("min_tokens", "min_tokens would forbid the end of a constrained output where the constraint requires it"),
    ("ignore_eos", "ignore_eos would decode past the end of a constrained output"),
    ("allowed_token_ids", "allowed_token_ids can exclude every token the constraint allows"),
    ("bad_words", "bad_words can exclude every token the constraint allows"),
    ("thinking_token_budget", "thinking_token_budget forces tokens the constraint has not allowed"),
    ("repetition_detection", "repetition_detection would end a constrained output early"),
)


def _interfaces() -> tuple[type, ...]:
    """The custom-logits-processor interfaces of the installed vLLM: V1's, and Model Runner V2's where it exists."""
    try:
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2LogitsProcessor
    except ImportError:
        return (V1LogitsProcessor,)
    return (V1LogitsProcessor, V2LogitsProcessor)


def request_spec(params: SamplingParams) -> dict[str, Any] | None:
    """The checked stdsl spec a request carries in its extra args (a mapping or JSON text), or None."""
    raw = (params.extra_args or {}).get(EXTRA_ARG)
    return None if raw is None else parse_spec(raw)


def refuse_conflicts(params: SamplingParams) -> None:
    """OptionError naming the first sampling option set on `params` that an stdsl constraint cannot honour."""
    for name, why in _CONFLICTS:
        value = getattr(params, name, None)
        if value not in (None, False, 0, [], ()):
            raise OptionError(name, f"{name}: {why}")


_TOKENIZERS: CacheKind[Tokenizer] = CacheKind("integration tokenizers", max_entries=4)


def _tokenizer(path: str, revision: str | None, trust_remote_code: bool) -> Tokenizer:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code)
    eos = hf.eos_token_id
    return Tokenizer.from_hf(hf, eos_ids=[int(eos)] if eos is not None else None)


def engine_tokenizer(model_config: ModelConfig) -> Tokenizer:
    """stdsl's tokenizer over the engine's (the model config's tokenizer path, through transformers), once per path."""
    where = (str(model_config.tokenizer), model_config.tokenizer_revision, bool(model_config.trust_remote_code))
    return _TOKENIZERS.get((), lambda: _tokenizer(*where), where)


def frontend_model_config() -> ModelConfig | None:
    """The model config of the vLLM frontend admitting this request, or None outside one.

    vLLM hands `validate_params` only the SamplingParams; its caller, the frontend's `InputProcessor`
    (which holds the model config), is a few frames up the stack.
    """
    frame = sys._getframe(1)
    for _ in range(FRONTEND_FRAMES):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        owner: Any = frame.f_locals.get("self")
        if hasattr(owner, "validate_logits_processors_params") and hasattr(owner, "model_config"):
            return owner.model_config  # type: ignore[no-any-return]
    return None


def check_budget(compiled: Any, model_config: ModelConfig, max_tokens: int | None) -> None:
    """BudgetError when no valid output of `compiled` fits in `max_tokens` tokens of the model's tokenizer."""
    tokenizer = engine_tokenizer(model_config)
    StepwiseConstraint(compiled, tokenizer, max_tokens).start()


@cache
def _nothing() -> Any:
    """The constraint of the empty output: what a request that cannot be constrained is ended with."""
    from stdsl.compiler.constraint import Regex
    from stdsl.compiler.constraint import compile as compile_constraint

    return compile_constraint(Regex(""))


class StdslLogitsProcessor(*_interfaces()):  # type: ignore[misc]
    """Masks each constrained request's logits to what its stdsl constraint admits, one token per step.

    Built by the V1 runner as `(vllm_config, device, is_pin_memory)` and by Model Runner V2 as
    `(vllm_config, req_states)`; the second argument says which interface drives it.
    """

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Refuse (ValueError: HTTP 400, naming the problem) a request the processor cannot serve exactly."""
        try:
            spec = request_spec(sampling_params)
            if spec is None:
                return
            refuse_conflicts(sampling_params)
            compiled = compiled_constraint(spec)
            model_config = frontend_model_config()
            if model_config is not None and sampling_params.max_tokens is not None:
                check_budget(compiled, model_config, sampling_params.max_tokens)
        except BudgetError as error:
            raise ValueError(f"stdsl constraint: {error} (raise max_tokens; vLLM's /v1/completions defaults "
                             f"it to 16)") from None
        except StdslError as error:
            raise ValueError(f"stdsl constraint: {error}") from None

    def __init__(self, vllm_config: VllmConfig, device_or_states: Any, is_pin_memory: bool = False) -> None:
        if getattr(vllm_config, "speculative_config", None) is not None:
            raise ValueError("the stdsl logits processor does not support speculative decoding")
        self.tokenizer = engine_tokenizer(vllm_config.model_config)
        self.vocab = vocabulary_of(self.tokenizer)
        self.batch = BatchConstraints(self.vocab)
        self.req_states: Any = None if isinstance(device_or_states, torch.device) else device_or_states
        self.slots: dict[int, StepwiseConstraint] = {}

    def is_argmax_invariant(self) -> bool:
        """The mask changes the argmax, so greedy requests need it too."""
        return False

    def _steps(self, params: SamplingParams) -> StepwiseConstraint | None:
        """A started controller for a request's constraint (None when it has none; ended with eos if it fails).

        Behind vLLM's frontend a request that fails here was already refused at admission; a failure
        left (a spec given to an engine without that frontend) ends the output at once, logged.
        """
        try:
            spec = request_spec(params)
            if spec is None:
                return None
            steps = StepwiseConstraint(compiled_constraint(spec), self.tokenizer, params.max_tokens)
            steps.start()
        except StdslError as error:
            logger.warning("stdsl: request ended at once: %s", error)
            steps = StepwiseConstraint(_nothing(), self.tokenizer, None)
            steps.fail(error)
        return steps

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """V1: follow the batch: removed rows, then added (with their output lists), then moved."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.batch.remove(index)
        for index, params, _prompt, output_tokens in batch_update.added:
            self.batch.add(index, self._steps(params), output_tokens)
        for source, target, direction in batch_update.moved:
            self.batch.move(source, target, direction == MoveDirectionality.SWAP)

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        """V2: a request took slot `req_idx`; True when it carries a constraint (the slot's old state is dropped)."""
        steps = self._steps(sampling_params)
        if steps is None:
            self.slots.pop(req_idx, None)
            return False
        self.slots[req_idx] = steps
        return True

    def apply_staged_writes(self) -> None:
        """V2: nothing is staged; the masks are built in `apply`."""

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        """Take the rows' newest tokens, then mask the constrained rows in place (`ctx`: V2's batch layout)."""
        if ctx is None:
            self.batch.sync()
            return self.batch.apply(logits)
        return self._apply_slots(logits, ctx)

    def _apply_slots(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        """V2: rows map to request slots; a row's output so far ends with the token it was fed at `ctx.pos`."""
        if not self.slots:
            return logits
        states = self.req_states
        slots, positions, fed = (ctx.expanded_idx_mapping.tolist(), ctx.pos.tolist(), ctx.input_ids.tolist())
        rows: dict[int, StepwiseConstraint] = {}
        for row, slot in enumerate(slots):
            steps = self.slots.get(slot)
            if steps is None:
                continue
            prompt = int(states.prompt_len.np[slot])
            produced = positions[row] + 1 - prompt
            if produced > steps.emitted:
                earlier = states.all_token_ids.gpu[slot, prompt + steps.emitted: prompt + produced - 1].tolist()
                take_tokens(steps, [*earlier, fed[row]])
            rows[row] = steps
        return mask_rows(logits, rows, self.vocab)
