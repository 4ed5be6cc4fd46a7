"""Moved to `stdsl.model_files.gguf_tokenizer` (no MLX); this name stays until every importer has switched."""

from stdsl.model_files.gguf_tokenizer import GGUFTokenizerError, hf_tokenizer_from_gguf

__all__ = ["GGUFTokenizerError", "hf_tokenizer_from_gguf"]
