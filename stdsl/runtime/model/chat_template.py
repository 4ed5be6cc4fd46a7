"""Moved to `stdsl.model_files.chat_template` (no MLX); this name stays until every importer has switched."""

from stdsl.model_files.chat_template import ChatTemplateError, render_chat_template

__all__ = ["ChatTemplateError", "render_chat_template"]
