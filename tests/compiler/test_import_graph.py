"""No import cycles in `stdsl`, between modules or between packages: every import counts, function-local and
`TYPE_CHECKING` ones included.

A cycle broken only by moving an import into a function is still two modules that need each
other; the shared piece belongs in a module both import (issue 13, item 4). Packages too: two
subpackages that import each other are one room (issue 25).
"""

from __future__ import annotations

import ast
from pathlib import Path

import stdsl
from stdsl.compiler.graph_components import strongly_connected

PACKAGE = Path(stdsl.__file__).parent

KNOWN_CYCLES: list[set[str]] = []
KNOWN_PACKAGE_CYCLES: list[set[str]] = [
    {"stdsl.compiler.json_schema", "stdsl.compiler.pushdown"},
    {"stdsl.runtime.batch", "stdsl.runtime.options", "stdsl.runtime.runner"},
    {"stdsl.server.http", "stdsl.server.requests", "stdsl.server.tools"},
]
"""Package cycles found when the test was written (issue 25): json_schema.recursive and pushdown.constraint use
each other; runtime.options imports batch.sampling and the runner steps batch cores that batch.engine starts; the
server's rooms share protocol and error types through http. Each is to be cut by its owner; no new one may appear."""


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


def package_graph(root: Path) -> dict[str, set[str]]:
    """Package -> the packages its modules import; a module directly in a top-level package (`stdsl.compiler.ir`,
    `stdsl.runtime.options`) counts as its own package, since its folder is a layer, not one room."""
    modules = module_files(root)

    def package(module: str) -> str:
        parts = module.split(".")
        if len(parts) >= 3 and modules.get(".".join(parts[:3]), Path()).name == "__init__.py":
            return ".".join(parts[:3])
        return module

    graph: dict[str, set[str]] = {}
    for module, imported in import_graph(root).items():
        targets = graph.setdefault(package(module), set())
        targets.update(package(other) for other in imported if package(other) != package(module))
    return graph


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


def test_the_package_finder_sees_two_subpackages_that_need_each_other(tmp_path: Path) -> None:
    layer = tmp_path / "pkg" / "layer"
    for room in ("one", "two", "three"):
        (layer / room).mkdir(parents=True)
        (layer / room / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (layer / "__init__.py").write_text("")
    (layer / "loose.py").write_text("from pkg.layer.one import a\n")
    (layer / "one" / "a.py").write_text("from pkg.layer.two import b\n")
    (layer / "two" / "b.py").write_text("def f():\n    from pkg.layer.one import c\n")
    (layer / "one" / "c.py").write_text("from pkg.layer import loose\n")
    (layer / "three" / "d.py").write_text("from pkg.layer.one import a\n")
    graph = package_graph(tmp_path / "pkg")
    assert graph["pkg.layer.one"] == {"pkg.layer.two", "pkg.layer.loose"}
    assert cycles(graph) == [{"pkg.layer.one", "pkg.layer.two", "pkg.layer.loose"}]


def test_stdsl_has_no_package_cycle() -> None:
    graph = package_graph(PACKAGE)
    assert "stdsl.compiler.json_schema" in graph and "stdsl.runtime.options" in graph
    unexpected = [sorted(c) for c in cycles(graph) if c not in KNOWN_PACKAGE_CYCLES]
    assert unexpected == []
