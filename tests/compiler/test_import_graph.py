"""No import cycles in `stdsl`: every import counts, function-local and `TYPE_CHECKING` ones included.

A cycle broken only by moving an import into a function is still two modules that need each
other; the shared piece belongs in a module both import (issue 13, item 4).
"""

from __future__ import annotations

import ast
from pathlib import Path

import stdsl
from stdsl.compiler.graph_components import strongly_connected

PACKAGE = Path(stdsl.__file__).parent

KNOWN_CYCLES: list[set[str]] = []


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every Python file of the package at `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its file (relative imports resolved)."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    found.add(target if target in modules else base)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module."""
    names = list(graph)
    number = {name: i for i, name in enumerate(names)}
    edges = [{number[succ] for succ in graph[name]} for name in names]
    return [{names[i] for i in component} for component in strongly_connected(edges) if len(component) > 1]


def test_the_finder_sees_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    (package / "d.py").write_text("import pkg.a\n")
    graph = import_graph(package)
    assert graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [{"pkg.a", "pkg.sub.b", "pkg.c"}]


def test_stdsl_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 100 and "stdsl.compiler.json_schema.scalars.strings" in graph
    unexpected = [sorted(c) for c in cycles(graph) if c not in KNOWN_CYCLES]
    assert unexpected == []
