"""`stdsl.control` runs without MLX: a process where any import of `mlx` fails imports every control module and
decodes DFA and pushdown rows through their controllers (numpy masks, the packed bitmask), even when
$STDSL_PUSHDOWN_MASKS asks for device masks (the runtime's choice, never control's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import importlib, json, os, pkgutil, sys

import numpy as np

class BlockMlx:
    """Fails and records every import of mlx or a submodule (even one a caller would catch)."""
    tried = []
    def find_spec(self, name, path=None, target=None):
        if name == "mlx" or name.startswith("mlx."):
            self.tried.append(name)
            raise ImportError(f"mlx is blocked in this process ({name})")
        return None

sys.meta_path.insert(0, BlockMlx())
os.environ["STDSL_PUSHDOWN_MASKS"] = "device"
import stdsl.control
for module in pkgutil.walk_packages(stdsl.control.__path__, "stdsl.control."):
    importlib.import_module(module.name)

import stdsl
from stdsl.control.tables import controller_of
from stdsl.kernels.token_mask import bitmask_words, pack_words
from stdsl.model_files.gguf import GGUFFile
from stdsl.model_files.tokenizer import Tokenizer

tokenizer = Tokenizer.from_gguf(GGUFFile(sys.argv[1]))
tree = {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}
rng = np.random.default_rng(0)
texts = []
for constraint in (stdsl.compile(stdsl.Regex("(yes|no|maybe)!")), stdsl.compile(tree)):
    for budget in (None, 24):
        controller = controller_of(constraint, tokenizer, max_tokens=budget)
        log = controller.started()
        out = np.zeros(bitmask_words(controller.vocab.size) + 1, dtype=np.int32)
        while not log.configuration.finished:
            allowed = controller.row_mask(log)
            controller.fill_row(log, out)
            assert np.array_equal(out[:-1], pack_words(allowed)) and out[-1] == 0
            move = controller.taken(log, int(rng.choice(np.flatnonzero(allowed))))
            log = log.apply(move)
            if not move.feed:
                break
        text = log.decided.decode()
        assert constraint.accepts(text), text
        texts.append(text)
print(json.dumps({"texts": texts, "tried": BlockMlx.tried,
                  "loaded": sorted(name for name in sys.modules if name.split(".")[0] == "mlx")}))
'''


def test_control_imports_and_decodes_dfa_and_pushdown_rows_with_mlx_blocked(smollm2_gguf_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(smollm2_gguf_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tried"] == [] and result["loaded"] == []
    assert len(result["texts"]) == 4
