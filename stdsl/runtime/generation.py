"""Moved to `stdsl.generation` (importable without the runtime); this name stays until every importer has switched."""

from stdsl.generation import Generation, Stats

__all__ = ["Generation", "Stats"]
