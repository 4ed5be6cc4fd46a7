"""stdsl constraints inside Hugging Face transformers: a `LogitsProcessor` for `model.generate`, and `generate`.

    from stdsl.integrations.transformers import StdslLogitsProcessor, generate
    result = generate(hf_model, hf_tokenizer, "Extract ...", constraint=schema, max_new_tokens=160)
    result.value                      # parsed and validated, as stdsl.generate returns it

The processor gives each batch row its own constraint and uses `max_new_tokens` as the budget
(every generated token, forced ones included, counts, so a valid output always fits or
BudgetError is raised before decoding).  transformers appends one token per step, so forced
text is emitted one token at a time: the mask is then the singleton of the next forced token
(see `stdsl.integrations.stepwise`).  Beam search is not supported (a row's history could change).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from stdsl.extras import missing_extra

try:
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList
except ImportError as missing:
    raise missing_extra("transformers", missing) from None

from stdsl.caches import CacheKind
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.errors import GenerationError, StdslError
from stdsl.generation import Generation
from stdsl.integrations.batch import BatchConstraints
from stdsl.integrations.stepwise import StepwiseConstraint
from stdsl.model_files.prompt import Prompt, check_prompt, prompt_ids
from stdsl.model_files.tokenizer import Tokenizer

_TOKENIZERS: CacheKind[Tokenizer] = CacheKind("integration tokenizers", max_entries=8)


def stdsl_tokenizer(hf_tokenizer: Any) -> Tokenizer:
    """stdsl's `Tokenizer` over a transformers tokenizer (its fast backend), kept while that tokenizer lives."""
    if isinstance(hf_tokenizer, Tokenizer):
        return hf_tokenizer
    eos = getattr(hf_tokenizer, "eos_token_id", None)
    eos_ids = [int(i) for i in (eos if isinstance(eos, Sequence) else [eos]) if i is not None]
    return _TOKENIZERS.get((hf_tokenizer,), lambda: Tokenizer.from_hf(hf_tokenizer, eos_ids=eos_ids or None))


class StdslLogitsProcessor(LogitsProcessor):
    """Masks each row's logits to the tokens its stdsl constraint admits, step by step.

    `constraint`: one constraint for every row, or a sequence with one per row (anything
    `stdsl.compile` accepts).  `max_new_tokens` must be the value given to `generate` (None: no
    budget).  A processor serves one `generate` call.  `path` picks the torch mask path (None: by device).
    """

    def __init__(self, constraint: Any, tokenizer: Any, *, max_new_tokens: int | None,
                 path: str | None = None) -> None:
        many = isinstance(constraint, Sequence) and not isinstance(constraint, str | bytes)
        self.constraints = [compile_constraint(c) for c in constraint] if many else [compile_constraint(constraint)]
        self.per_row = many
        self.tokenizer = stdsl_tokenizer(tokenizer)
        self.vocab = vocabulary_of(self.tokenizer)
        self.max_new_tokens = max_new_tokens
        self.batch = BatchConstraints(self.vocab, path)
        self.prompt_length: int | None = None

    def _start(self, rows: int) -> None:
        """First step: one controller per row (their forced prefixes are queued)."""
        if self.per_row and len(self.constraints) != rows:
            raise StdslError(f"StdslLogitsProcessor: {len(self.constraints)} constraints for a batch of {rows} rows")
        for b in range(rows):
            steps = StepwiseConstraint(self.constraints[b if self.per_row else 0], self.tokenizer,
                                       self.max_new_tokens)
            steps.start()
            self.batch.add(b, steps, [])

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Take each row's newest token, then mask `scores` (B, V) in place."""
        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
            self._start(int(input_ids.shape[0]))
        elif input_ids.shape[0] != len(self.batch.rows):
            raise StdslError("StdslLogitsProcessor: the batch changed size (beam search is not supported)")
        else:
            for b, row in self.batch.rows.items():
                row.output_tokens[:] = input_ids[b, self.prompt_length:].tolist()
            self.batch.sync()
        return cast(torch.FloatTensor, self.batch.apply(scores))

    def steps(self, row: int = 0) -> StepwiseConstraint:
        """The controller of batch row `row` (after generation: its output and counts)."""
        if row not in self.batch.rows:
            raise StdslError(f"StdslLogitsProcessor: no row {row} (has generate run?)")
        return self.batch.rows[row].steps

    def finish(self, sequences: torch.Tensor) -> list[Generation]:
        """The `Generation` of every row from `generate`'s output sequences (prompt included)."""
        if self.prompt_length is None:
            raise GenerationError("generate produced no step under the constraint")
        results = []
        for b in sorted(self.batch.rows):
            steps = self.batch.rows[b].steps
            steps.sync(sequences[b, self.prompt_length:].tolist())
            results.append(steps.generation(prompt_tokens=self.prompt_length))
        return results


def generate(hf_model: Any, hf_tokenizer: Any, prompt: Prompt, constraint: Any, *, max_new_tokens: int = 256,
             temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
             chat: bool = True, path: str | None = None, **generate_options: Any) -> Generation:
    """One output of a transformers model under `constraint`, as `stdsl.generate` returns it (.text, .value, .stats).

    The prompt is rendered as `stdsl.generate` renders it (the tokenizer's chat template when it has one and
    `chat`). Greedy when `temperature` is 0; else sampling with top-p/top-k after the mask. A prompt of the
    wrong shape, or whose text holds a lone surrogate, is an OptionError before any work.
    """
    check_prompt(prompt)
    began = time.perf_counter()
    processor = StdslLogitsProcessor(constraint, hf_tokenizer, max_new_tokens=max_new_tokens, path=path)
    ids = prompt_ids(processor.tokenizer, prompt, chat=chat)
    device = getattr(hf_model, "device", torch.device("cpu"))
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    sampling: dict[str, Any] = {"do_sample": False}
    if temperature > 0:
        sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": top_k or None}
        if seed is not None:
            torch.manual_seed(seed)
    eos = [int(i) for i in processor.vocab.eos_ids]
    output = hf_model.generate(
        input_ids, attention_mask=torch.ones_like(input_ids), logits_processor=LogitsProcessorList([processor]),
        max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=eos[0] if eos else None,
        **sampling, **generate_options)
    sequences = output.sequences if hasattr(output, "sequences") else output
    result = processor.finish(sequences)[0]
    result.stats.seconds = time.perf_counter() - began
    return result
