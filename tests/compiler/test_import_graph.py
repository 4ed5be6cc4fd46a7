"""No import cycles in `stdsl`, between modules or between packages: every import counts, function-local and
`TYPE_CHECKING` ones included.

A cycle broken only by moving an import into a function is still two modules that need each
other; the shared piece belongs in a module both import (issue 13, item 4). Packages too: two
rooms that import each other are one room (issue 25), at every depth (issue 34).
"""

from __future__ import annotations

import ast
from pathlib import Path

import stdsl
from stdsl.compiler.graph_components import strongly_connected

PACKAGE = Path(stdsl.__file__).parent

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


def sibling_graphs(root: Path) -> dict[str, dict[str, set[str]]]:
    """Package -> the graph of its children (subpackages and modules): a child imports another when any module
    inside it imports any module inside the other. Every package counts, at every depth, so two rooms of a room
    that need each other show as a cycle of that room (issue 34, item 5)."""
    modules = module_files(root)
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    graphs: dict[str, dict[str, set[str]]] = {
        package: {child: set() for child in modules if child.rpartition(".")[0] == package and child != package}
        for package in packages}

    def child_of(module: str, package: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1:].split(".")[0]

    for module, imported in import_graph(root).items():
        for package, graph in graphs.items():
            source = child_of(module, package)
            if source is None:
                continue
            for other in imported:
                target = child_of(other, package)
                if target is not None and target != source:
                    graph[source].add(target)
    return graphs


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
    assert [sorted(c) for c in cycles(graph)] == []


def test_the_sibling_finder_sees_rooms_that_need_each_other_at_any_depth(tmp_path: Path) -> None:
    layer = tmp_path / "pkg" / "layer"
    for room in ("one", "two", "three", "deep/inner", "deep/outer"):
        (layer / room).mkdir(parents=True)
        (layer / room / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (layer / "__init__.py").write_text("")
    (layer / "deep" / "__init__.py").write_text("")
    (layer / "loose.py").write_text("from pkg.layer.one import a\n")
    (layer / "one" / "a.py").write_text("from pkg.layer.two import b\n")
    (layer / "two" / "b.py").write_text("def f():\n    from pkg.layer.one import c\n")
    (layer / "one" / "c.py").write_text("from pkg.layer import loose\n")
    (layer / "three" / "d.py").write_text("from pkg.layer.one import a\n")
    (layer / "deep" / "inner" / "e.py").write_text("from pkg.layer.deep.outer import f\n")
    (layer / "deep" / "outer" / "f.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                   "    from pkg.layer.deep.inner import e\n")
    graphs = sibling_graphs(tmp_path / "pkg")
    assert graphs["pkg.layer"]["pkg.layer.one"] == {"pkg.layer.two", "pkg.layer.loose"}
    assert cycles(graphs["pkg.layer"]) == [{"pkg.layer.one", "pkg.layer.two", "pkg.layer.loose"}]
    assert cycles(graphs["pkg.layer.deep"]) == [{"pkg.layer.deep.inner", "pkg.layer.deep.outer"}]
    assert cycles(graphs["pkg.layer.one"]) == []


def test_no_two_rooms_of_stdsl_need_each_other() -> None:
    graphs = sibling_graphs(PACKAGE)
    assert "stdsl.runtime.options" in graphs["stdsl.runtime"] and "stdsl.compiler.json_schema.scalars" in graphs
    found = {package: [sorted(c) for c in cycles(graph)] for package, graph in graphs.items() if cycles(graph)}
    assert found == {}
