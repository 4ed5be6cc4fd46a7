"""Moved to `stdsl.model_files.gguf` (no MLX); this name stays until every importer has switched."""

from stdsl.model_files.gguf import AFFINE_SPLITTERS, GGMLType, GGUFError, GGUFFile

__all__ = ["AFFINE_SPLITTERS", "GGMLType", "GGUFError", "GGUFFile"]
