"""Processes that did MLX work on a worker thread exit cleanly, and the runtime imports no torch.

A thread that ran an `mx.compile`d function destroys MLX's per-thread compile cache when it ends,
which needs the GIL; ending during interpreter finalization aborted the process (exit 134) in
about half the runs, so worker threads never end (`stdsl.runtime.platform.workers`). Each test runs several
real processes at once and needs every one to exit 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

COMPILED_ON_A_WORKER = """
import atexit
import threading

import mlx.core as mx
from stdsl.runtime.platform.workers import Worker

double = mx.compile(lambda a: a * 2 + 1)
release = threading.Event()


def work():
    mx.eval(double(mx.ones(4)))
    release.wait()


Worker(work, "test-worker").start()
atexit.register(release.set)
"""
"""A worker whose target returns while the interpreter exits (released by an exit hook that no exit protocol
orders): a thread that ended then crashed the process every time (exit 134 or 139); a pooled one waits on."""


def _run_all(commands: list[list[str]], timeout: float = 240.0) -> list[subprocess.CompletedProcess[str]]:
    processes = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in commands]
    results = []
    for command, process in zip(commands, processes, strict=True):
        out, err = process.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return results


def test_worker_with_compiled_mlx_exits_cleanly() -> None:
    for result in _run_all([[sys.executable, "-c", COMPILED_ON_A_WORKER]] * 8):
        assert result.returncode == 0, result.stderr
        assert "terminate called" not in result.stderr


def test_runtime_loads_model_code_without_torch() -> None:
    script = """
import sys
import stdsl.runtime.platform.mlx_lm_models
from mlx_lm.models.llama import Model
from mlx_lm.models.cache import make_prompt_cache
assert "torch" not in sys.modules and "transformers" not in sys.modules, "model code pulled in torch"
import mlx_lm
assert callable(mlx_lm.load) and mlx_lm.__version__
from mlx_lm import generate
assert mlx_lm.models.cache.make_prompt_cache is make_prompt_cache
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_cli_generate_exits_cleanly(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "stdsl.cli", "generate", "--schema", "examples/person.schema.json",
               "--prompt-file", "examples/person.txt", "--max-tokens", "48"]
    for result in _run_all([command] * 3):
        assert result.returncode == 0, result.stderr
        assert "terminate called" not in result.stderr
        assert result.stdout.strip().startswith("{")
