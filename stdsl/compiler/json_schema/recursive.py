"""Recursive JSON Schemas (`$ref` cycles) to pushdown grammars: the reference graph and its cycles.

The `$ref` targets on a cycle of the reference graph (its strongly connected components with
an edge inside) become nonterminals; every reference to one of them lowers to a call symbol,
and every other reference is inlined by the ordinary schema compiler.
"""

from __future__ import annotations

import json
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.resolve import SUPPORTED, Context, Schema, resolve_ref
from stdsl.compiler.json_schema.to_ir import Whitespace, _Compiler, _Tokens
from stdsl.compiler.pushdown.grammar import MAX_DEPTH, Definition, PushdownGrammar, call_symbol, compile_pushdown
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
    ctx = document_context(schema)
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


MAX_NONTERMINALS = 256
COMBINATORS = ("allOf", "anyOf", "oneOf")
ANY_VALUE = "any JSON value"
"""The nonterminal of an unconstrained value (`true`, `{}`), which here nests to any depth the stack allows."""


class _CallingCompiler(_Compiler):
    """The schema compiler with every schema that mentions a recursive target at its top level lowered to a call.

    A plain reference to a target calls the target's own nonterminal.  A schema that combines a
    target with other keywords (`{"$ref": t, "maxItems": 1}`, an `anyOf` with a target among its
    branches, an `allOf` part) gets a nonterminal of its own, keyed by its canonical JSON, whose
    body inlines the target once; the target's inner references are calls again.  An unconstrained
    value is a call of its own nonterminal (`ANY_VALUE`), so it nests as deep as the stack allows
    rather than the DFA compiler's `ANY_VALUE_DEPTH`.
    """

    def __init__(self, tokens: _Tokens, calls: dict[str, ir.Node], root: Any) -> None:
        super().__init__(tokens)
        self.targets = set(calls)
        self.calls = dict(calls)
        self.root = root
        self.extra: dict[str, tuple[Schema, str]] = {}

    def value(self, schema: Schema, path: str, ctx: Context) -> ir.Node:
        """A call for a schema that mentions a recursive target at its top level, else the ordinary lowering."""
        if isinstance(schema, dict) and self._mentions_target(schema, ctx, path):
            ref = schema.get("$ref")
            if isinstance(ref, str) and not any(k in SUPPORTED and k != "$ref" for k in schema):
                _, target = resolve_ref(ref, ctx, f"{path}/$ref")
                if target in self.calls:
                    return self.calls[target]
            key = json.dumps(schema, sort_keys=True)
            if key not in self.calls:
                if len(self.calls) >= MAX_NONTERMINALS:
                    raise SchemaError(f"more than {MAX_NONTERMINALS} recursive combinations of definitions", path)
                self.calls[key] = call_symbol(len(self.calls))
                self.extra[key] = (schema, path)
            return self.calls[key]
        return super().value(schema, path, ctx)

    def _any_value(self, depth: int) -> ir.Node:
        """A call of the unconstrained-value nonterminal (any depth); its body is `any_value_body`."""
        if ANY_VALUE not in self.calls:
            self.calls[ANY_VALUE] = call_symbol(len(self.calls))
            self.extra[ANY_VALUE] = (True, ROOT)
        return self.calls[ANY_VALUE]

    def any_value_body(self) -> ir.Node:
        """One JSON value whose member values and items are calls of the unconstrained-value nonterminal."""
        return super()._any_value(1)

    def _mentions_target(self, schema: dict, ctx: Context, path: str) -> bool:
        """Whether `schema` refers to a recursive target by `$ref` or through the parts of its combinators."""
        ref = schema.get("$ref")
        if isinstance(ref, str):
            try:
                if resolve_ref(ref, ctx, f"{path}/$ref")[1] in self.targets:
                    return True
            except SchemaError:
                return False
        return any(isinstance(part, dict) and self._mentions_target(part, ctx, path)
                   for key in COMBINATORS if isinstance(schema.get(key), list) for part in schema[key])

    def body(self, schema: Schema, path: str) -> ir.Node:
        """The inlined lowering of a nonterminal's schema (its own top-level mention is not a call)."""
        return super().value(schema, path, document_context(self.root))


def recursive_schema_to_ir(schema: dict, calls: dict[str, ir.Node], *,
                           whitespace: Whitespace | None = None) -> tuple[ir.Node, dict[str, ir.Node]]:
    """The root's IR and the body of each nonterminal: the recursive targets (`calls`), then combinations met.

    References to the targets are lowered to `calls`; a combination gets the next call symbol,
    and its body is keyed by its canonical JSON.
    """
    compiler = _CallingCompiler(_Tokens(whitespace), calls, schema)
    ws = compiler.tokens.ws
    main = ir.seq(ws, compiler.value(schema, ROOT, document_context(schema)), ws)
    bodies = {}
    for target in calls:
        node, _ = resolve_ref(target, document_context(schema), target)
        bodies[target] = compiler.body(node, target)
    done: set[str] = set()
    while len(done) < len(compiler.extra):
        for key, (part, path) in list(compiler.extra.items()):
            if key not in done:
                done.add(key)
                bodies[key] = compiler.any_value_body() if key == ANY_VALUE else compiler.body(part, path)
    return main, bodies


def compile_recursive_schema(schema: dict, *, whitespace: Whitespace | None = None,
                             max_states: int = DEFAULT_MAX_STATES, max_depth: int = MAX_DEPTH,
                             outline: bool = False) -> PushdownGrammar:
    """The pushdown grammar of a JSON Schema: one nonterminal per target on a reference cycle.

    Schemas that combine a target with other keywords become nonterminals of their own.  With
    `outline`, every referenced definition is a nonterminal, recursive or not: for schemas whose
    single DFA is too large, a definition used at many places is compiled once and called.
    """
    targets = [path for path in reference_graph(schema) if path != ROOT] if outline else recursive_targets(schema)
    calls = {target: call_symbol(i) for i, target in enumerate(targets)}
    main, bodies = recursive_schema_to_ir(schema, calls, whitespace=whitespace)
    definitions = [Definition(_display_name(key), body) for key, body in bodies.items()]
    return compile_pushdown(main, definitions, max_states=max_states, max_depth=max_depth)


def _display_name(key: str) -> str:
    """A nonterminal's name in messages: the target path, or a combination's JSON cut short."""
    return key if key.startswith(ROOT) else (key if len(key) <= 80 else key[:77] + "...")
