"""Recursive JSON Schemas (`$ref` cycles) to pushdown grammars: the reference graph and its cycles.

The `$ref` targets on a cycle of the reference graph (its strongly connected components with
an edge inside) become nonterminals; every reference to one of them lowers to a call symbol,
and every other reference is inlined by the ordinary schema compiler.
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.json_schema import Whitespace, _Compiler, _Tokens
from stdsl.compiler.json_schema_resolve import SUPPORTED, Context, Schema, resolve_ref
from stdsl.compiler.pushdown import MAX_DEPTH, Definition, PushdownGrammar, call_symbol, compile_pushdown
from stdsl.errors import SchemaError

ROOT = "#"
CONTAINERS = ("$defs", "definitions")
DATA_KEYWORDS = ("enum", "const", "default", "examples")


def _refs_in(node: Any, out: list[str]) -> None:
    """Every `$ref` string in a schema, not descending into `$defs` containers or instance data."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out.append(value)
            elif key not in CONTAINERS and key not in DATA_KEYWORDS:
                _refs_in(value, out)
    elif isinstance(node, list):
        for item in node:
            _refs_in(item, out)


def reference_graph(schema: Any) -> dict[str, list[str]]:
    """Reference target path -> the target paths its schema refers to, from the root `#` outward.

    References that do not resolve are left out here; the schema compiler reports them where they occur.
    """
    if not isinstance(schema, dict):
        return {ROOT: []}
    ctx = Context(schema)
    graph: dict[str, list[str]] = {}
    pending: list[tuple[str, Any]] = [(ROOT, schema)]
    while pending:
        path, node = pending.pop()
        if path in graph:
            continue
        refs: list[str] = []
        _refs_in(node, refs)
        graph[path] = []
        for ref in refs:
            try:
                target, target_path = resolve_ref(ref, ctx, f"{path}/$ref")
            except SchemaError:
                continue
            if target_path not in graph[path]:
                graph[path].append(target_path)
            pending.append((target_path, target))
    return graph


def recursive_targets(schema: Any) -> list[str]:
    """Reference targets on a cycle (strongly connected components with an inner edge), in discovery order."""
    graph = reference_graph(schema)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cyclic: set[str] = set()

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                cyclic.update(component)

    for node in graph:
        if node not in index:
            connect(node)
    return [node for node in graph if node in cyclic]


def is_recursive_schema(schema: Any) -> bool:
    """Whether the schema's references form a cycle (it then needs the pushdown engine)."""
    return bool(recursive_targets(schema))


class _CallingCompiler(_Compiler):
    """The schema compiler with every reference to a recursive target lowered to that target's call symbol."""

    def __init__(self, tokens: _Tokens, calls: dict[str, ir.Node]) -> None:
        super().__init__(tokens)
        self.calls = calls

    def value(self, schema: Schema, path: str, ctx: Context) -> ir.Node:
        """A call for a plain reference to a recursive target, else the ordinary lowering."""
        if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            _, target = resolve_ref(schema["$ref"], ctx, f"{path}/$ref")
            if target in self.calls:
                siblings = sorted(k for k in schema if k in SUPPORTED and k != "$ref")
                if siblings:
                    raise SchemaError(f"a recursive $ref ({target}) cannot be combined with {', '.join(siblings)}",
                                      path)
                return self.calls[target]
        return super().value(schema, path, ctx)


def recursive_schema_to_ir(schema: dict, calls: dict[str, ir.Node], *,
                           whitespace: Whitespace | None = None) -> tuple[ir.Node, dict[str, ir.Node]]:
    """The root's IR and each recursive target's body, with references to the targets lowered to `calls`."""
    compiler = _CallingCompiler(_Tokens(whitespace), calls)
    ctx = Context(schema)
    ws = compiler.tokens.ws
    main = ir.seq(ws, compiler.value(schema, ROOT, ctx), ws)
    bodies = {}
    for target in calls:
        node, _ = resolve_ref(target, ctx, target)
        bodies[target] = super(_CallingCompiler, compiler).value(node, target, Context(schema))
    return main, bodies


def compile_recursive_schema(schema: dict, *, whitespace: Whitespace | None = None,
                             max_states: int = DEFAULT_MAX_STATES, max_depth: int = MAX_DEPTH) -> PushdownGrammar:
    """The pushdown grammar of a recursive JSON Schema: one nonterminal per target on a reference cycle."""
    targets = recursive_targets(schema)
    calls = {target: call_symbol(i) for i, target in enumerate(targets)}
    main, bodies = recursive_schema_to_ir(schema, calls, whitespace=whitespace)
    definitions = [Definition(target, bodies[target]) for target in targets]
    return compile_pushdown(main, definitions, max_states=max_states, max_depth=max_depth)
