"""Moved to `stdsl.model_files.tokenizer` (no MLX); this name stays until every importer has switched."""

from stdsl.model_files.tokenizer import CHATML_TEMPLATE, Tokenizer, TokenizerError

__all__ = ["CHATML_TEMPLATE", "Tokenizer", "TokenizerError"]
