"""Every layer imports only the layers below it: compiler < kernels < control < runtime < server, and the
integrations (torch, vLLM processes) beside the runtime, on the controller alone; the CLI on top.

Every import counts, function-local and TYPE_CHECKING ones included, so a dependency cannot creep back in
through a deferred import. A new top-level package or module fails `test_every_package_has_a_place` until it
is given its place here. (This replaces tests/compiler/test_layering.py, which checked the compiler alone.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stdsl
from stdsl.compiler.graph_components import strongly_connected

PACKAGE = Path(stdsl.__file__).parent
BASE = frozenset({"stdsl.errors", "stdsl.caches", "stdsl.extras"})
MODEL_FREE = frozenset({"mlx", "mlx_lm", "torch", "transformers", "vllm"})
"""Foreign packages a numpy-only layer never imports."""

LOWER: dict[str, frozenset[str]] = {
    "stdsl.errors": frozenset(),
    "stdsl.caches": frozenset({"stdsl.errors"}),
    "stdsl.extras": frozenset({"stdsl.errors"}),
    "stdsl.compiler": BASE,
    "stdsl.theory": BASE | {"stdsl.compiler"},
    "stdsl.kernels": BASE | {"stdsl.compiler"},
    "stdsl.generation": BASE,
    "stdsl.model_files": BASE | {"stdsl.kernels"},
    "stdsl.control": BASE | {"stdsl.compiler", "stdsl.kernels", "stdsl.generation", "stdsl.model_files"},
    "stdsl.integrations": BASE | {"stdsl.compiler", "stdsl.kernels", "stdsl.generation", "stdsl.model_files",
                                  "stdsl.control"},
    "stdsl.runtime": BASE | {"stdsl.compiler", "stdsl.kernels", "stdsl.generation", "stdsl.model_files",
                             "stdsl.control"},
    "stdsl.programs": BASE | {"stdsl.compiler", "stdsl.runtime"},
    "stdsl": BASE | {"stdsl.compiler", "stdsl.programs", "stdsl.runtime"},
    "stdsl.server": BASE | {"stdsl.compiler", "stdsl.kernels", "stdsl.generation", "stdsl.model_files",
                            "stdsl.control", "stdsl.runtime", "stdsl.programs"},
}
"""Unit -> the units it may import (besides itself). A unit is a top-level module or subpackage of stdsl, or
`stdsl` (its `__init__`, the public API)."""
LOWER["stdsl.cli"] = frozenset(LOWER) - {"stdsl.cli"}

FORBIDDEN_FOREIGN: dict[str, frozenset[str]] = {
    **{unit: MODEL_FREE for unit in ("stdsl.errors", "stdsl.caches", "stdsl.extras", "stdsl.compiler",
                                     "stdsl.theory", "stdsl.generation", "stdsl.model_files", "stdsl.control")},
    "stdsl.kernels": frozenset({"mlx_lm", "transformers", "vllm"}),
    "stdsl.integrations": frozenset({"mlx", "mlx_lm"}),
}
"""Unit -> foreign packages it never imports: the controller is numpy only, kernels never load model code,
the integrations run in torch and vLLM processes without MLX."""


def unit_of(module: str) -> str:
    """The layer unit of a dotted stdsl module name (`stdsl.compiler.ir` -> `stdsl.compiler`)."""
    return ".".join(module.split(".")[:2])


def imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, wherever it stands (relative ones resolved)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def files_by_unit() -> dict[str, list[tuple[Path, str]]]:
    """Unit -> (file, its package's dotted name) of every Python file of stdsl."""
    out: dict[str, list[tuple[Path, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out.setdefault(unit_of(name), []).append((path, package))
    return out


def violations(unit: str, line: int, module: str) -> str | None:
    """Why `unit` may not import `module` (None: it may)."""
    if module == "stdsl" or module.startswith("stdsl."):
        target = "stdsl" if module == "stdsl" else unit_of(module)
        if target == unit or target in LOWER[unit]:
            return None
        return f"{unit} imports {module} (line {line}), a layer it may not use"
    if module.split(".")[0] in FORBIDDEN_FOREIGN.get(unit, ()):
        return f"{unit} imports {module} (line {line})"
    return None


def test_the_rule_tells_layers_apart() -> None:
    assert violations("stdsl.control", 1, "stdsl.kernels.rows.RowCache") is None
    assert violations("stdsl.control", 1, "stdsl.runtime.options") is not None
    assert violations("stdsl.kernels", 1, "stdsl.control.tables.Tables") is not None
    assert violations("stdsl.integrations", 1, "stdsl.server.constraints") is not None
    assert violations("stdsl.integrations", 1, "torch") is None
    assert violations("stdsl.integrations", 1, "mlx.core") is not None
    assert violations("stdsl.compiler", 1, "stdsl") is not None
    assert violations("stdsl.compiler", 1, "stdsl.compilers_x") is not None
    assert violations("stdsl.control", 1, "numpy") is None and violations("stdsl.control", 1, "mlx") is not None
    assert violations("stdsl.cli", 1, "stdsl.server.http.serve") is None


def test_the_layers_form_no_cycle() -> None:
    names = sorted(LOWER)
    number = {name: i for i, name in enumerate(names)}
    edges = [{number[lower] for lower in LOWER[name]} for name in names]
    assert all(len(component) == 1 for component in strongly_connected(edges))


def test_every_package_has_a_place() -> None:
    assert set(files_by_unit()) <= set(LOWER), sorted(set(files_by_unit()) - set(LOWER))


@pytest.mark.parametrize("unit", sorted(LOWER))
def test_no_module_imports_a_layer_above_its_own(unit: str) -> None:
    files = files_by_unit().get(unit, [])
    wrong = [f"{path.relative_to(PACKAGE.parent)}: {why}" for path, package in files
             for line, module in imports(path, package) if (why := violations(unit, line, module))]
    assert wrong == []


def test_the_compiled_program_does_not_run_and_the_public_program_does() -> None:
    from stdsl.compiler.stc.program import CompiledProgram

    assert not hasattr(CompiledProgram, "run") and not hasattr(CompiledProgram, "map")
    assert issubclass(stdsl.Program, CompiledProgram)
    assert callable(stdsl.Program.run) and callable(stdsl.Program.map)
