"""A dataset run in a process of its own, on the tests' tiny random llama: `python dataset_run_process.py PROGRAM
INPUT OUTPUT` (the kill-and-rerun test kills it mid-run and runs it again)."""

from __future__ import annotations

import sys

from stdsl.model_files.gguf import GGUFFile
from stdsl.model_files.tokenizer import Tokenizer
from stdsl.programs import Program
from stdsl.runtime.model.loading import Model, embedded_gguf_path
from stdsl.runtime.program_runs import run_dataset


def tiny_model() -> Model:
    """The conftest's tiny model: a seeded 2-layer, hidden-64 random llama over the real SmolLM2 tokenizer
    (MLX imported after stdsl.runtime, which binds the fast BLAS first)."""
    import mlx.core as mx
    from mlx_lm.models.llama import Model as LlamaModel
    from mlx_lm.models.llama import ModelArgs

    tokenizer = Tokenizer.from_gguf(GGUFFile(embedded_gguf_path()))
    args = ModelArgs(model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                     num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                     vocab_size=tokenizer.vocab_size, rope_theta=100000.0, rope_traditional=True,
                     tie_word_embeddings=True)
    mx.random.seed(0)
    net = LlamaModel(args)
    net.eval()
    mx.eval(net.parameters())
    return Model(net=net, tokenizer=tokenizer, name="tiny-random-llama")


def main(program_path: str, input_path: str, output_path: str) -> None:
    written, skipped = run_dataset(Program.from_file(program_path), tiny_model(), input_path, output_path,
                                   max_tokens=24)
    print(f"{written} {skipped}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
