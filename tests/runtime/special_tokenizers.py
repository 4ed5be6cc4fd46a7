"""Tokenizers of other families for the tests, built from SmolLM2's: its tokenizer.json with the family's markers
added as special (or ordinary added) tokens, and a tiny random-weight llama whose vocabulary covers them."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_BUILT: dict[tuple[int, str, str, str], tuple[Any, Any]] = {}


def marker_texts() -> list[str]:
    """Every thinking tag and tool-call marker of the formats, in a fixed order."""
    from stdsl.compiler.reasoning import FORMATS as THINKING
    from stdsl.compiler.tools.formats import FORMATS

    found = [m for f in THINKING.values() for m in f.markers] + [m for f in FORMATS.values() for m in f.markers]
    return list(dict.fromkeys(found))


def family_model(base: Any, kind: str, chat_template: str, architecture: str = "llama") -> tuple[Any, Any]:
    """(tokenizer, tiny model of `architecture`) over SmolLM2's tokenizer with every marker added as a `kind`
    ("special" or "added") token, built once per process and template (per-tokenizer tables are then shared by the
    tests that use it)."""
    key = (id(base), kind, chat_template, architecture)
    if key not in _BUILT:
        markers = marker_texts()
        tokenizer = with_added_tokens(base, special=markers if kind == "special" else (),
                                      added=markers if kind == "added" else (), chat_template=chat_template)
        _BUILT[key] = (tokenizer, tiny_model_for(tokenizer, architecture=architecture))
    return _BUILT[key]


def with_added_tokens(base: Any, special: Sequence[str] = (), added: Sequence[str] = (),
                      chat_template: str | None = None) -> Any:
    """SmolLM2's tokenizer (`base`) with `special` added as special tokens and `added` as ordinary added tokens."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    from stdsl.model_files.tokenizer import Tokenizer

    hf = HFTokenizer.from_str(base.hf.to_str())
    hf.add_tokens([AddedToken(text, special=True) for text in special]
                  + [AddedToken(text, special=False) for text in added])
    return Tokenizer(hf=hf, eos_ids=base.eos_ids, bos_id=base.bos_id,
                     chat_template=chat_template if chat_template is not None else base.chat_template,
                     name=f"smollm2+{len(special)}s{len(added)}a")


def tiny_model_for(tokenizer: Any, seed: int = 0, architecture: str = "llama") -> Any:
    """A seeded 2-layer, hidden-64 random-weight llama (or another of `row_caches/architectures.py`) over `tokenizer`
    (every id, added ones included)."""
    import mlx.core as mx
    from mlx_lm.models.llama import Model as LlamaModel
    from mlx_lm.models.llama import ModelArgs

    from stdsl.runtime.model.loading import Model
    from tests.runtime.row_caches.architectures import tiny_net

    if architecture != "llama":
        return Model(net=tiny_net(architecture, tokenizer.vocab_size), tokenizer=tokenizer,
                     name=f"tiny-{architecture}-{tokenizer.name}")

    args = ModelArgs(model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                     num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                     vocab_size=tokenizer.vocab_size, rope_theta=100000.0, rope_traditional=True,
                     tie_word_embeddings=True)
    mx.random.seed(seed)
    net = LlamaModel(args)
    net.eval()
    mx.eval(net.parameters())
    return Model(net=net, tokenizer=tokenizer, name=f"tiny-{tokenizer.name}")
