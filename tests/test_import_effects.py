"""Importing stdsl changes nothing in the process; loading a model binds MKL whatever was imported first.

Real interpreters: one imports every module of stdsl (its foreign dependencies imported first, so their own
start-up is not counted) and compares the environment, `sys.modules`, the import hooks, the collector and
the mapped libraries before and after, then compiles with a thread watching the collector. Two more load the
embedded model with mlx-lm imported before and after stdsl: the user's `import mlx_lm` is the real package,
sharing its model classes with stdsl, and MLX's matmul calls MKL (its `cblas_sgemm` slot points into
libmkl_rt) either way.
"""

from __future__ import annotations

import ast
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import stdsl

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(stdsl.__file__).parent


def foreign_imports() -> list[str]:
    """The foreign top-level packages stdsl's modules import (mlx_lm left out: stdsl must not run its start-up)."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    local = {"stdsl", "mlx_lm", "__future__"} | set(sys.stdlib_module_names)
    return sorted(found - local) + ["mlx.core", "mlx.nn"]


EVERY_MODULE = """
import gc, importlib, json, os, pkgutil, sys, threading
for name in {foreign!r}:
    try:
        importlib.import_module(name)
    except Exception:
        pass
environment, modules, hooks = dict(os.environ), dict(sys.modules), list(sys.meta_path)
collector = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
import stdsl
imported, skipped = [], {{}}
for info in pkgutil.walk_packages(stdsl.__path__, "stdsl.", onerror=lambda name: None):
    try:
        importlib.import_module(info.name)
        imported.append(info.name)
    except stdsl.errors.MissingExtraError as error:
        skipped[info.name] = str(error)
maps = open("/proc/self/maps").read()
after = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
seen = set()
done = threading.Event()
def watch():
    while not done.is_set():
        seen.add(gc.isenabled())
watcher = threading.Thread(target=watch)
watcher.start()
stdsl.compile({{"type": "object", "properties": {{f"field_{{i}}": {{"type": "string"}} for i in range(60)}}}})
done.set()
watcher.join()
print(json.dumps({{
    "imported": imported, "skipped": skipped,
    "environment": sorted(set(os.environ.items()) ^ set(environment.items())),
    "replaced": sorted(name for name, module in modules.items() if sys.modules.get(name) is not module),
    "mlx_lm": "mlx_lm" in sys.modules,
    "hooks": [type(hook).__name__ for hook in sys.meta_path if hook not in hooks],
    "collector": [collector, after], "during_compile": sorted(seen),
    "mkl": "libmkl" in maps,
}}))
"""

WITH_MLX_LM = """
import json, os, sys, types
if {mlx_lm_first}:
    import mlx_lm
import stdsl
from stdsl.runtime.platform import plt_slots
from stdsl.runtime.platform.mlx_lm_models import KVCache, llama
model = stdsl.load()
text = stdsl.generate(model, "Count.", {{"type": "integer"}}, max_tokens=4).text
if not {mlx_lm_first}:
    import importlib.util
    assert importlib.util.find_spec("mlx_lm") is not None  # a look that imports nothing leaves the finder in place
    import mlx_lm
import mlx_lm.models.llama
from mlx_lm import generate
library = plt_slots.loaded_library("libmlx.")
print(json.dumps({{
    "text": text, "genuine": type(mlx_lm) is types.ModuleType and callable(mlx_lm.load) and callable(generate),
    "package_ran": os.environ.get("TRANSFORMERS_NO_ADVISORY_WARNINGS") == "1",
    "shared": mlx_lm.models.llama is llama and mlx_lm.models.cache.KVCache is KVCache,
    "sgemm": plt_slots.slot_library(library, "cblas_sgemm"),
}}))
"""


def run(script: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_module_of_stdsl_changes_nothing_in_the_process() -> None:
    report = run(EVERY_MODULE.format(foreign=foreign_imports()))
    assert len(report["imported"]) > 150 and "stdsl.runtime.engine" in report["imported"]
    assert all("needs vllm" in why for why in report["skipped"].values()), report["skipped"]
    assert report["environment"] == []
    assert report["replaced"] == []
    assert not report["mlx_lm"], "importing stdsl ran mlx_lm's package start-up"
    assert report["hooks"] in ([], ["_ParentFinder"])
    before, after = report["collector"]
    assert before == after and before[0]
    assert report["during_compile"] == [True]
    assert not report["mkl"], "importing stdsl loaded MKL"


linux_x86 = pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64",
                               reason="MKL is bound on Linux x86_64")


@linux_x86
@pytest.mark.parametrize("mlx_lm_first", [True, False], ids=["mlx_lm-before-stdsl", "mlx_lm-after-stdsl"])
def test_a_users_mlx_lm_and_stdsl_work_together_and_fast(mlx_lm_first: bool, smollm2_gguf_path: Path) -> None:
    report = run(WITH_MLX_LM.format(mlx_lm_first=mlx_lm_first))
    assert float(json.loads(report["text"])).is_integer()
    assert report["genuine"] and report["package_ran"] and report["shared"]
    assert report["sgemm"] is not None and "libmkl_rt" in Path(report["sgemm"]).name
