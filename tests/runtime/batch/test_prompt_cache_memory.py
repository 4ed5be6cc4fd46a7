"""The prompt cache's byte bound holds its resident memory, not only its keys and values: a small model's entries
cost more in bookkeeping (the key's Python ints, the trie, MLX's record of each array) than in KV, and the server's
soak grew by hundreds of MB while the cache reported a fraction of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import psutil
import pytest

BOUND = 24 << 20

# Run in a fresh process, so the memory other tests freed cannot absorb the growth; glibc's malloc_trim gives freed
# memory back to the system before each reading, so the resident memory counts what is held.
MEASURE = f"""
import ctypes, gc, json, random
import mlx.core as mx
import psutil
from stdsl.runtime.batch.prompt_cache import PromptCache

def resident():
    gc.collect()
    mx.clear_cache()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return psutil.Process().memory_info().rss

rng = random.Random(0)
system = [rng.randrange(300, 49_000) for _ in range(30)]
layers = [(mx.random.normal((1, 2, 60, 16)), mx.random.normal((1, 2, 60, 16))) for _ in range(2)]
mx.eval(layers)
cache = PromptCache(max_bytes={BOUND})
before = resident()
for _ in range(6_000):
    cache.store(system + [rng.randrange(300, 49_000) for _ in range(rng.randrange(5, 21))], layers)
print(json.dumps({{"grown": resident() - before, "nbytes": cache.nbytes, "evictions": cache.evictions}}))
"""


@pytest.mark.skipif(not psutil.LINUX or mx.default_device() != mx.cpu,
                    reason="reads glibc's resident memory of arrays held on the CPU")
def test_a_prompt_cache_stays_within_its_bound_in_resident_memory() -> None:
    """Conversations of a 2-layer, hidden-64 model (the soak's tiny model: 512 bytes of KV a position) sharing a
    30-token system prompt, each with 5 to 20 tokens of its own, stored until the cache evicts: the resident memory
    grows by at most the bound (and a margin for the allocator), and the cache reports what it holds."""
    done = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, timeout=120, check=True,
                          cwd=Path(__file__).parents[3])
    found = json.loads(done.stdout.splitlines()[-1])
    grown, nbytes = found["grown"], found["nbytes"]
    assert found["evictions"] > 0 and nbytes <= BOUND
    assert grown <= 1.2 * BOUND, f"{grown / 2**20:.1f} MB resident for a {BOUND >> 20} MB bound"
    assert grown >= 0.6 * nbytes, f"{grown / 2**20:.1f} MB resident, {nbytes / 2**20:.1f} MB reported"
