"""The BLAS binding: MKL is found; binding is idempotent, sets no environment variable, and sends MLX's matmuls
and LAPACK calls to MKL whether `mlx.core` was imported (and used) before it or not.

The oracle is MKL's own log (MKL_VERBOSE=1 prints a line per call MKL serves) and the matmul speed."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import warnings

import pytest

from stdsl.runtime.platform import blas

linux_x86 = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64", reason="the BLAS binding is for Linux x86_64"
)

PROBE = """
import json, os, sys, time, warnings
environment = dict(os.environ)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import mlx.core as mx
    a = mx.random.normal((512, 512)); b = mx.random.normal((512, 512)); mx.eval(a, b)
    if {matmul_first}:
        mx.eval(a @ b)
    from stdsl.runtime.platform import blas
    first = blas.bind_blas() if {bind} else None
    second = blas.bind_blas() if {bind} else None
    print("CALLS", flush=True)
    mx.eval(a @ b)
    inverse = mx.linalg.inv(mx.eye(4) * 2, stream=mx.cpu)
    mx.eval(inverse)
    start = time.perf_counter()
    for _ in range({reps}):
        mx.eval(a @ b)
    seconds = (time.perf_counter() - start) / {reps}
print(json.dumps({{"first": first, "second": second, "gflops": 2 * 512**3 / seconds / 1e9,
                  "inverse": inverse[0, 0].item(), "environment_changed": dict(os.environ) != environment,
                  "warnings": [str(w.message) for w in caught]}}))
"""


def probe(*, bind: bool = True, matmul_first: bool = False, reps: int = 5) -> tuple[dict, str]:
    """Run the matmul probe in a fresh interpreter with MKL_VERBOSE=1: (its report, MKL's log after binding)."""
    code = PROBE.format(bind=bind, matmul_first=matmul_first, reps=reps)
    env = {**os.environ, "MKL_VERBOSE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    before, _, after = done.stdout.partition("CALLS")
    assert "SGEMM" not in before, "MKL served a call before it was bound"
    return json.loads(after.strip().splitlines()[-1]), after


@linux_x86
def test_mkl_is_found_from_the_installed_distribution():
    path = blas.find_mkl()
    assert path is not None and path.name.startswith("libmkl_rt")
    assert path.is_file()


@linux_x86
@pytest.mark.parametrize("matmul_first", [False, True], ids=["mlx-imported-first", "mlx-used-first"])
def test_binding_after_mlx_sends_its_blas_and_lapack_calls_to_mkl(matmul_first: bool):
    bound, log = probe(matmul_first=matmul_first)
    assert bound["first"] and bound["first"] == bound["second"] and bound["first"].endswith(blas.find_mkl().name)
    assert bound["warnings"] == [] and not bound["environment_changed"]
    assert "SGEMM(N,N,512,512,512" in log and "SGETRF" in log, log[:2000]
    assert "lp64 sequential" in log
    assert bound["inverse"] == pytest.approx(0.5)


@linux_x86
def test_binding_makes_fp32_matmul_fast():
    bound, _ = probe()
    unbound, log = probe(bind=False, reps=2)
    assert "SGEMM" not in log
    assert bound["gflops"] > 3 * unbound["gflops"], (bound["gflops"], unbound["gflops"])


def test_bind_is_a_noop_off_linux_x86(monkeypatch):
    monkeypatch.setattr(blas, "_bound_path", None)
    monkeypatch.setattr(blas.sys, "platform", "darwin")
    assert blas.bind_blas() is None


@linux_x86
def test_a_missing_mkl_warns_once_with_the_fix(monkeypatch):
    monkeypatch.setattr(blas, "_bound_path", None)
    monkeypatch.setattr(blas, "_warned", set())
    monkeypatch.setattr(blas, "find_mkl", lambda: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert blas.bind_blas() is None and blas.bind_blas() is None
    assert len(caught) == 1 and "pip install mkl" in str(caught[0].message)


@linux_x86
def test_stdsl_no_blas_turns_binding_off(monkeypatch):
    monkeypatch.setattr(blas, "_bound_path", None)
    monkeypatch.setenv("STDSL_NO_BLAS", "1")
    assert blas.bind_blas() is None


SLOTS = """
import ctypes, json, warnings
import mlx.core
from stdsl.runtime.platform import blas, plt_slots
library = plt_slots.loaded_library(blas.MLX_LIBRARY_PREFIX)
base = plt_slots.load_base(library)
named = {}
for name, offset in plt_slots.jump_slots(library).items():
    found = plt_slots.symbol_at(ctypes.c_uint64.from_address(base + offset).value)
    named[name] = None if found is None else found[1]
lie = plt_slots.symbol_at
plt_slots.symbol_at = lambda address: (lambda found: found and (found[0], "not_" + found[1]))(lie(address))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    refused = [blas.bind_blas(), blas.bind_blas()]
plt_slots.symbol_at = lie
print(json.dumps({"named": named, "refused": refused, "warnings": [str(w.message) for w in caught],
                  "sgemm": plt_slots.slot_library(library, "cblas_sgemm")}))
"""


@linux_x86
def test_slots_read_from_the_file_hold_the_functions_the_dynamic_linker_bound_and_a_mismatch_is_refused():
    done = subprocess.run([sys.executable, "-c", SLOTS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    named = report["named"]
    blas_and_lapack = {name: found for name, found in named.items() if name.startswith("cblas_") or
                       (name.endswith("_") and name[:-1].isalpha() and len(name) <= 8)}
    assert {"cblas_sgemm", "cblas_dgemm", "sgetrf_", "ssyevd_", "sgesdd_"} <= set(blas_and_lapack)
    assert all(found == name for name, found in blas_and_lapack.items()), blas_and_lapack
    assert sum(found == name for name, found in named.items()) > 0.8 * len(named)
    assert report["refused"] == [None, None] and len(report["warnings"]) == 1
    assert "keeps its slow reference BLAS" in report["warnings"][0]
    assert "libmkl" not in report["sgemm"]
