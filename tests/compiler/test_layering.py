"""The compiler stands alone: no module under stdsl/compiler imports the runtime, kernels, server or MLX.

Every import counts, function-local and TYPE_CHECKING ones included, so running a program can
never creep back into the compiler (review problem 7).
"""

from __future__ import annotations

import ast
from pathlib import Path

import stdsl.compiler

COMPILER = Path(stdsl.compiler.__file__).parent
ALLOWED_STDSL = ("stdsl.compiler", "stdsl.errors", "stdsl.caches")
FORBIDDEN_FOREIGN = ("mlx", "torch")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in a file, wherever it stands."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def is_below_the_compiler(module: str) -> bool:
    """Whether a compiler module may import `module`: the compiler itself, errors, or a non-MLX library."""
    if module == "stdsl" or module.startswith("stdsl."):
        return any(module == allowed or module.startswith(allowed + ".") for allowed in ALLOWED_STDSL)
    return module.split(".")[0] not in FORBIDDEN_FOREIGN


def test_the_rule_tells_layers_apart() -> None:
    assert is_below_the_compiler("stdsl.compiler.ir.Node") and is_below_the_compiler("stdsl.errors.StdslError")
    assert is_below_the_compiler("stdsl.caches.CacheKind")
    assert is_below_the_compiler("numpy") and is_below_the_compiler("stdsl.compilers_x") is False
    assert not is_below_the_compiler("stdsl.runtime.api.generate") and not is_below_the_compiler("stdsl.programs")
    assert not is_below_the_compiler("stdsl.kernels.rows") and not is_below_the_compiler("mlx.core")
    assert not is_below_the_compiler("stdsl")


def test_no_compiler_module_imports_a_layer_above_it() -> None:
    files = sorted(COMPILER.rglob("*.py"))
    assert len(files) > 20
    upward = [f"{path.relative_to(COMPILER.parent)}:{line}: {module}"
              for path in files for line, module in imported_modules(path) if not is_below_the_compiler(module)]
    assert upward == []


def test_the_compiled_program_does_not_run_and_the_public_program_does() -> None:
    import stdsl
    from stdsl.compiler.stc.program import CompiledProgram

    assert not hasattr(CompiledProgram, "run") and not hasattr(CompiledProgram, "map")
    assert issubclass(stdsl.Program, CompiledProgram)
    assert callable(stdsl.Program.run) and callable(stdsl.Program.map)
