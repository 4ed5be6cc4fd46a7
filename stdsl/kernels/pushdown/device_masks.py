"""Where a pushdown row's mask comes from on the decode path: the device state vector on a GPU, host rows otherwise.

The runtime picks (`stdsl.runtime.batch.device_masks`, on its runner thread; control never imports MLX).
`mask_source` picks: `STDSL_PUSHDOWN_MASKS=device|host|auto` (or an explicit choice) overrides; `auto`, the
default, takes the device where MLX's default device is a Metal or CUDA GPU, as `walk.backend()` picks the
DFA's walk kernel, and the host rows (`PushdownRows`, memoized per configuration) on the CPU, where they are
two orders of magnitude faster (benchmarks/results/pushdown_masks.md).  `DeviceMasks` serves a
configuration's mask from `PushdownDevice`, equal to `PushdownRows.mask` on every configuration.
MLX is imported only when the device is chosen.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.pushdown.rows import PushdownRows

if TYPE_CHECKING:
    from stdsl.kernels.pushdown.device import PushdownDevice

MASK_SOURCE_ENV = "STDSL_PUSHDOWN_MASKS"
MASK_SOURCES = ("auto", "device", "host")
DEFAULT_MAX_MASKS = 16


def mask_source(requested: str | None = None) -> str:
    """'device' or 'host': `requested`, else $STDSL_PUSHDOWN_MASKS, else 'auto' (the device iff MLX's default
    device is a Metal or CUDA GPU)."""
    where = "the mask source argument" if requested is not None else f"${MASK_SOURCE_ENV}"
    choice = (requested if requested is not None else os.environ.get(MASK_SOURCE_ENV, "auto")).strip().lower()
    if choice not in MASK_SOURCES:
        raise StdslError(f"pushdown mask source {choice!r} from {where} is not one of {', '.join(MASK_SOURCES)}")
    if choice == "auto":
        from stdsl.kernels.walk import backend

        return "device" if backend() in ("metal", "cuda") else "host"
    return choice


def device_fits(rows: PushdownRows) -> bool:
    """Whether the machine's stack cap fits the device vector's slots (deeper caps stay on the host rows)."""
    from stdsl.kernels.pushdown.device import STACK_SLOTS

    return rows.machine.max_depth <= STACK_SLOTS


class DeviceMasks:
    """Masks of a machine's configurations from the device vector: encode, `PushdownDevice.mask`, read back.

    The stack cap (peak <= room), eos iff the configuration accepts, and the rare tokens that pop below the
    top two return states (stepped on the host) are the device's; forced text (held-back bytes, the boundary
    cover) is applied by the caller on top, as on host masks.  The exact token budget is not: the vector's S
    sums Proposition 2's bn, bytes of the shortest completion, which bounds the token need only where every
    byte is a token, while the budget admits t iff 1 + |φ(c')| + need(end(c')) <= tokens left
    (`PushdownBudget`), so the caller narrows by the host budget where it binds.  The last `max_masks`
    masks are kept (a step asks for the mask after the advance, then again before sampling).
    """

    def __init__(self, rows: PushdownRows, max_masks: int = DEFAULT_MAX_MASKS) -> None:
        from stdsl.kernels.pushdown.device import PushdownDevice

        if max_masks < 1:
            raise StdslError(f"DeviceMasks: max_masks must be at least 1, got {max_masks}")
        self.device: PushdownDevice = PushdownDevice(rows.machine, rows.vocab, rows.symbolic)
        self.max_masks = max_masks
        self.served = 0
        """Masks served so far (kept ones included; `device.stats.masks` counts those the device computed)."""
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Bytes the device vector uploaded (the kept masks are a few vocabularies of bools besides)."""
        return int(self.device.nbytes)

    def mask(self, config: int) -> np.ndarray:
        """Admissible tokens at `config` (a fresh bool (V,)): live runs within the cap, eos iff it accepts."""
        with self._lock:
            self.served += 1
            found = self._masks.get(config)
            if found is None:
                device = self.device
                found = np.array(device.mask(device.encode(config)))
                found.flags.writeable = False
                self._masks[config] = found
                if len(self._masks) > self.max_masks:
                    self._masks.popitem(last=False)
            else:
                self._masks.move_to_end(config)
            return found.copy()
