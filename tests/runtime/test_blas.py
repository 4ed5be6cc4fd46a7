"""The BLAS binding: MKL is found, binding is idempotent, refused after mlx.core, and makes fp32 matmuls fast."""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from stdsl.runtime import blas

BLAS_FILE = Path(blas.__file__).resolve()
linux_x86 = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64", reason="the BLAS binding is for Linux x86_64"
)

# Loads blas.py by path (not through `import stdsl.runtime`, whose __init__ binds on its own), so each
# subprocess decides for itself whether MLX gets MKL.
PROBE = """
import importlib.util, json, sys, time, warnings
spec = importlib.util.spec_from_file_location("blas_under_test", {blas_file!r})
blas = importlib.util.module_from_spec(spec); spec.loader.exec_module(blas)
mode = {mode!r}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if mode == "late":
        import mlx.core
    first = blas.bind_blas() if mode != "unbound" else None
    second = blas.bind_blas() if mode != "unbound" else None
import mlx.core as mx
a = mx.random.normal((1024, 1024)); b = mx.random.normal((1024, 1024)); mx.eval(a @ b)
start = time.perf_counter()
for _ in range({reps}):
    mx.eval(a @ b)
seconds = (time.perf_counter() - start) / {reps}
print(json.dumps({{"first": first, "second": second, "gflops": 2 * 1024**3 / seconds / 1e9,
                  "warnings": [str(w.message) for w in caught]}}))
"""


def probe(mode: str, reps: int = 3) -> dict:
    """Run the matmul probe in a fresh interpreter: mode 'bound', 'unbound' or 'late' (bind after mlx)."""
    code = PROBE.format(blas_file=str(BLAS_FILE), mode=mode, reps=reps)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@linux_x86
def test_mkl_is_found_from_the_installed_distribution():
    path = blas.find_mkl()
    assert path is not None and path.name.startswith("libmkl_rt")
    assert path.is_file()


@linux_x86
def test_binding_is_idempotent_and_makes_fp32_matmul_fast():
    bound = probe("bound")
    unbound = probe("unbound", reps=2)
    assert bound["first"] and bound["first"] == bound["second"]
    assert bound["warnings"] == []
    assert bound["gflops"] > 3 * unbound["gflops"], (bound["gflops"], unbound["gflops"])


@linux_x86
def test_binding_after_mlx_core_is_a_noop_that_warns_once():
    late = probe("late", reps=1)
    assert late["first"] is None and late["second"] is None
    assert len(late["warnings"]) == 1 and "import stdsl.runtime" in late["warnings"][0]


def test_bind_is_a_noop_off_linux_x86(monkeypatch):
    monkeypatch.setattr(blas, "_bound_path", None)
    monkeypatch.setattr(blas.sys, "platform", "darwin")
    assert blas.bind_blas() is None
