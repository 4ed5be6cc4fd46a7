"""stdsl: declarative structured programs on language models, decoded under exact byte automata on MLX.

    import stdsl
    model = stdsl.load()                                  # the embedded SmolLM2-135M-Instruct
    result = stdsl.generate(model, "Extract ...", constraint=Person, max_tokens=200)
    result.value                                          # a validated Person instance
    stdsl.caches.stats()                                  # what every cache holds (stdsl.caches: one byte budget)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _package_version
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

try:
    __version__ = _package_version("stdsl")
except PackageNotFoundError:  # a source tree run without installing: no metadata to read
    __version__ = "0+unknown"

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


def __getattr__(name: str) -> Any:
    """Import the runtime (and MLX) only when a model is needed, so compiling stays light."""
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
