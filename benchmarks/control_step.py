"""Per-step host control work without a model: a row state's mask and advance on the person schema and free text.

What `benchmarks/step_profile.py` calls mask + control, isolated from the model pass (whose contention swamps it on
a busy machine): random admissible tokens under `max_tokens=96`, the median step of each walk, the least of five.

    python benchmarks/control_step.py          # prints one line per constraint (about 30 s)
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import stdsl
from stdsl.control.tables import controller_of

TASK = Path(__file__).resolve().parents[1] / ".." / "shared" / "tasks" / "extraction" / "person.json"


def walk_ms(compiled: object, tokenizer: object, seed: int, steps: int = 64) -> float:
    """Median milliseconds of one mask + advance over a random walk of up to `steps` tokens (eos avoided)."""
    rng = random.Random(seed)
    controller = controller_of(compiled, tokenizer, max_tokens=96)
    log = controller.started()
    times = []
    while not log.configuration.finished and len(times) < steps:
        began = time.perf_counter()
        allowed = controller.row_mask(log)
        masked = time.perf_counter() - began
        choices = np.flatnonzero(allowed & ~controller.vocab.eos)
        token = int(choices[rng.randrange(len(choices))]) if len(choices) else int(np.flatnonzero(allowed)[0])
        began = time.perf_counter()
        log = log.apply(controller.taken(log, token))
        times.append(masked + time.perf_counter() - began)
    return 1000 * statistics.median(times)


def main() -> int:
    tokenizer = stdsl.load().tokenizer
    specs = {"object schema": stdsl.compile(json.loads(TASK.read_text())["schema"]),
             "free text": stdsl.compile(stdsl.Regex(r"[\s\S]*"))}
    for name, compiled in specs.items():
        walk_ms(compiled, tokenizer, 0)  # warm-up: rows, planner, budget
        print(f"{name}: {min(walk_ms(compiled, tokenizer, seed) for seed in range(1, 6)):.3f} ms per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
