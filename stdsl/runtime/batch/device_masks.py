"""Where a pushdown row's live masks come from, picked and built by the runtime on its runner thread.

A row's controller starts (its forced prefix, on the caller's thread) on the host rows, which run no MLX;
when the core takes the row in, on the runner, `place_masks` hands the controller the device state vector's
masks where `mask_source` picks the device (a GPU, or $STDSL_PUSHDOWN_MASKS) and the stack cap fits its slots.
Both give the same mask at every configuration, so when the switch happens changes no token; it only keeps
every MLX call on the one thread that owns MLX state.
"""

from __future__ import annotations

from stdsl.caches import CacheKind
from stdsl.control.controller import Controller
from stdsl.kernels.pushdown.device_masks import DeviceMasks, device_fits, mask_source
from stdsl.kernels.pushdown.rows import PushdownRows

_DEVICE_MASKS: CacheKind[DeviceMasks] = CacheKind("pushdown device masks")


def device_masks_of(rows: PushdownRows) -> DeviceMasks | None:
    """The device masks of a machine's rows, built once (a `stdsl.caches` entry that goes with the rows); None where
    the stack cap exceeds the device vector's slots."""
    if not device_fits(rows):
        return None
    return _DEVICE_MASKS.get((rows,), lambda: DeviceMasks(rows))


def place_masks(controller: Controller, source: str | None = None) -> Controller:
    """A pushdown row's controller on the device masks where `mask_source(source)` picks the device (call it on the
    runner thread: the choice and the masks run MLX); a DFA row's, or one placed already, as it is."""
    def picked(rows: PushdownRows) -> DeviceMasks | None:
        return device_masks_of(rows) if mask_source(source) == "device" else None

    return controller.with_live_masks(picked)
