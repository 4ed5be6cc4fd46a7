"""The public decoding entry points (`stdsl.generate`, `stdsl.stream`, `stdsl.generate_batch`), all engine clients."""

from __future__ import annotations

from stdsl.runtime.decode import Stream, generate, generate_batch, stream

__all__ = ["Stream", "generate", "generate_batch", "stream"]
