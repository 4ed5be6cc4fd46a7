"""stdsl: declarative structured programs on language models, decoded under exact byte automata on MLX.

    import stdsl
    model = stdsl.load()                                  # the embedded SmolLM2-135M-Instruct
    result = stdsl.generate(model, "Extract ...", constraint=Person, max_tokens=200)
    result.value                                          # a validated Person instance
    stdsl.caches.stats()                                  # what every cache holds (stdsl.caches: one byte budget)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stdsl import caches
from stdsl.errors import (
    BudgetError,
    Cancelled,
    CompileError,
    GenerationError,
    GrammarError,
    OptionError,
    RegexError,
    SchemaError,
    StdslError,
    UnsupportedModelError,
)

__version__: str
"""The installed distribution's version (read by `__getattr__` on first use)."""

if TYPE_CHECKING:
    from stdsl.compiler.constraint import Constraint, Regex, compile
    from stdsl.compiler.grammar import Grammar
    from stdsl.programs import Program, program
    from stdsl.runtime.api import Stream, generate, generate_batch, stream
    from stdsl.runtime.engine import Engine
    from stdsl.runtime.model.loading import Model, load
    from stdsl.runtime.program_result import ProgramResult
    from stdsl.runtime.program_steps.actions import gen, select
    from stdsl.runtime.program_steps.record import ProgramRun, StepError
    from stdsl.runtime.program_steps.state import State

_LAZY = {
    "compile": "stdsl.compiler.constraint",
    "Regex": "stdsl.compiler.constraint",
    "Constraint": "stdsl.compiler.constraint",
    "Grammar": "stdsl.compiler.grammar",
    "Program": "stdsl.programs",
    "ProgramResult": "stdsl.runtime.program_result",
    "program": "stdsl.programs",
    "gen": "stdsl.runtime.program_steps.actions",
    "select": "stdsl.runtime.program_steps.actions",
    "State": "stdsl.runtime.program_steps.state",
    "ProgramRun": "stdsl.runtime.program_steps.record",
    "StepError": "stdsl.runtime.program_steps.record",
    "load": "stdsl.runtime.model.loading",
    "Model": "stdsl.runtime.model.loading",
    "generate": "stdsl.runtime.api",
    "stream": "stdsl.runtime.api",
    "generate_batch": "stdsl.runtime.api",
    "Stream": "stdsl.runtime.api",
    "Engine": "stdsl.runtime.engine",
}


def _installed_version() -> str:
    """The installed distribution's version: read on first use, as `importlib.metadata` alone costs a fresh
    process 10-20 ms of imports (email, zipfile, socket) that a compile never needs."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stdsl")
    except PackageNotFoundError:  # a source tree run without installing: no metadata to read
        return "0+unknown"


def __getattr__(name: str) -> Any:
    """Import the runtime (and MLX) only when a model is needed, so compiling stays light; the version is read
    only when asked for."""
    if name == "__version__":
        globals()["__version__"] = found = _installed_version()
        return found
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'stdsl' has no attribute {name!r}")


__all__ = [
    "__version__",
    "compile",
    "program",
    "Program",
    "ProgramResult",
    "ProgramRun",
    "State",
    "gen",
    "select",
    "StepError",
    "Regex",
    "Grammar",
    "Constraint",
    "load",
    "Model",
    "generate",
    "stream",
    "generate_batch",
    "Stream",
    "Engine",
    "caches",
    "StdslError",
    "CompileError",
    "RegexError",
    "SchemaError",
    "GrammarError",
    "BudgetError",
    "GenerationError",
    "OptionError",
    "Cancelled",
    "UnsupportedModelError",
]
