"""A process that imports torch and transformers, decodes on the engine and exits, exits 0 every time.

With torch importable the interpreter's exit after decoding aborted now and then ("terminate called without an
active exception", exit 134), hidden in the test suite by an `os._exit` in conftest. Each process here decodes with
the tiny random model (a row finished, a row still decoding at exit, a private `generate_batch` engine, and a
certified request, a scheduling policy of the core, mid-way through its rounds), so the engine's threads are idle,
busy and handed back when the interpreter finalizes. The default run starts 5
processes; `-m slow` starts 50.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DECODE_WITH_TORCH = """
import torch
import transformers
import mlx.core as mx
from mlx_lm.models.llama import Model as Llama, ModelArgs
import stdsl
from stdsl.model_files.gguf import GGUFFile
from stdsl.runtime.model.loading import Model, embedded_gguf_path
from stdsl.model_files.tokenizer import Tokenizer

tokenizer = Tokenizer.from_gguf(GGUFFile(embedded_gguf_path()))
args = ModelArgs(model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                 num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=tokenizer.vocab_size,
                 rope_theta=100000.0, rope_traditional=True, tie_word_embeddings=True)
mx.random.seed(0)
net = Llama(args)
mx.eval(net.parameters())
model = Model(net=net, tokenizer=tokenizer, name="tiny")
print(stdsl.generate(model, "Count.", {"type": "integer"}, max_tokens=8).text)
print(len(stdsl.generate_batch(model, [{"prompt": "a"}, {"prompt": "b"}], max_rows=2, max_tokens=4)))
stream = stdsl.stream(model, "Go on.", None, max_tokens=5000)
next(iter(stream))
from stdsl.runtime.decode import engine_for, submit
field = {"type": "string", "minLength": 30, "maxLength": 40}
record = {"type": "object", "required": ["a", "b", "c"], "properties": {"a": field, "b": field, "c": field},
          "additionalProperties": False}
certified = submit(engine_for(model), "Fill.", record, parallel_fields=True)
next(iter(certified))
"""


def _decode_and_exit(runs: int, at_once: int) -> None:
    failures = []
    for start in range(0, runs, at_once):
        processes = [subprocess.Popen([sys.executable, "-c", DECODE_WITH_TORCH], cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(min(at_once, runs - start))]
        for process in processes:
            out, err = process.communicate(timeout=600)
            if process.returncode != 0 or "terminate called" in err:
                failures.append((process.returncode, err[-2000:]))
    assert not failures, f"{len(failures)} of {runs} runs failed; first: {failures[0]}"


def test_decoding_with_torch_imported_exits_0() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    _decode_and_exit(5, 5)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_decoding_with_torch_imported_exits_0_fifty_times_out_of_fifty() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    _decode_and_exit(50, 5)
