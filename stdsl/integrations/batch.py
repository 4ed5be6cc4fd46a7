"""The constrained rows of an engine's batch: one `StepwiseConstraint` per batch index, kept across reordering.

Engines keep a persistent batch whose rows come and go: vLLM reports requests removed, added
(with a live reference to the request's output token list) and moved (one way, or swapped), in
that order.  This registry follows those updates, takes each row's new tokens before the step,
and masks the step's logits for the constrained rows in one `batch_mask` (unconstrained rows untouched).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from stdsl.errors import StdslError
from stdsl.integrations.stepwise import StepwiseConstraint
from stdsl.kernels.torch_mask import apply_mask, batch_mask
from stdsl.kernels.vocabulary import Vocabulary

logger = logging.getLogger(__name__)


def take_tokens(steps: StepwiseConstraint, tokens: Sequence[int]) -> None:
    """Feed a row the engine's new tokens; a token the constraint cannot take ends that row with eos (logged),
    so one row's failure never raises inside the engine's step and takes the other rows down with it."""
    try:
        steps.take(tokens)
    except StdslError as error:
        logger.warning("stdsl: request ended: %s", error)
        steps.fail(error)


def mask_rows(logits: torch.Tensor, rows: Mapping[int, StepwiseConstraint], vocab: Vocabulary,
              path: str | None = None) -> torch.Tensor:
    """Mask the rows of `logits` (B, width) named in `rows` in place (the others untouched) and return it."""
    indices = sorted(i for i in rows if i < logits.shape[0])
    if not indices:
        return logits
    on_host = (path or ("rows" if logits.device.type == "cpu" else "walk")) == "rows"
    allowed = batch_mask([rows[i].row(host=on_host) for i in indices], vocab, logits.device,
                         width=int(logits.shape[1]), path=path)
    if len(indices) < logits.shape[0]:
        full = torch.ones(logits.shape, dtype=torch.bool, device=logits.device)
        full[torch.as_tensor(indices, dtype=torch.long, device=logits.device)] = allowed
        allowed = full
    return apply_mask(logits, allowed)


@dataclass
class BatchRow:
    """A constrained request in the batch: its controller and the engine's running list of its output tokens."""

    steps: StepwiseConstraint
    output_tokens: list[int]


class BatchConstraints:
    """Constrained rows by batch index; `path` picks the torch mask path (None: by device).

    On the 'rows' path (the CPU default) each row is its controller's own host mask (row cache,
    budget shortcut), uploaded in one copy; on the 'walk' path DFA rows are walked on the device.
    """

    def __init__(self, vocab: Vocabulary, path: str | None = None) -> None:
        self.vocab = vocab
        self.path = path
        self.rows: dict[int, BatchRow] = {}

    def remove(self, index: int) -> None:
        """The request at `index` left the batch (a no-op for an unconstrained one)."""
        self.rows.pop(index, None)

    def add(self, index: int, steps: StepwiseConstraint | None, output_tokens: list[int]) -> None:
        """A request took `index` (replacing whatever was there); `steps` None for an unconstrained request."""
        if steps is None:
            self.rows.pop(index, None)
        else:
            self.rows[index] = BatchRow(steps, output_tokens)

    def move(self, source: int, target: int, swap: bool) -> None:
        """The request at `source` now sits at `target`; with `swap` the one at `target` moves to `source`."""
        moving = self.rows.pop(source, None)
        other = self.rows.pop(target, None)
        if moving is not None:
            self.rows[target] = moving
        if swap and other is not None:
            self.rows[source] = other

    def sync(self) -> None:
        """Take every row's tokens appended since the last step."""
        for row in self.rows.values():
            take_tokens(row.steps, row.output_tokens[row.steps.emitted:])

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask the constrained rows of `logits` (B, width) in place and return it."""
        return mask_rows(logits, {i: row.steps for i, row in self.rows.items()}, self.vocab, self.path)
