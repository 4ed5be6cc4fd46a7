"""Recursive JSON Schemas (`$ref` cycles) to pushdown grammars: the reference graph and its cycles.

The `$ref` targets on a cycle of the reference graph (its strongly connected components with
an edge inside) become nonterminals; every reference to one of them lowers to a call symbol,
and every other reference is inlined by the ordinary schema compiler.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.build import frames_cleared
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.graph_components import strongly_connected
from stdsl.compiler.json_schema.any_value import any_value_classes
from stdsl.compiler.json_schema.flatten import document_context, within_document
from stdsl.compiler.json_schema.json_tokens import JsonTokens, Whitespace
from stdsl.compiler.json_schema.outline_size import (
    MANY_MEMBERS_FROM,
    declared_members,
    outline_pays,
    plain_size_reaches,
)
from stdsl.compiler.json_schema.refusal_probe import KeyClassShapes, may_refuse_late, refused_early
from stdsl.compiler.json_schema.resolve import SUPPORTED, Context, Schema, flatten, resolve_ref
from stdsl.compiler.json_schema.to_ir import ANY_VALUE_DEPTH, _Compiler
from stdsl.compiler.pushdown.grammar import (
    CALL_BASE,
    MAX_DEPTH,
    Definition,
    GrammarConflictError,
    PushdownGrammar,
    call_symbol,
    compile_pushdown,
)
from stdsl.errors import CompileError, CompileTimeError, SchemaError, StateBudgetError

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
    names = list(graph)
    number = {name: i for i, name in enumerate(names)}
    edges = [{number[succ] for succ in graph[name]} for name in names]
    cyclic = {i for component in strongly_connected(edges)
              for i in component if len(component) > 1 or component[0] in edges[component[0]]}
    return [name for name in names if number[name] in cyclic]


def is_recursive_schema(schema: Any) -> bool:
    """Whether the schema's references form a cycle (it then needs the pushdown engine)."""
    return bool(recursive_targets(schema))


MAX_NONTERMINALS = 256
MAX_CONFLICT_RETRIES = 12
MAX_ANY_LEVELS = 8
"""A free-form value whose call meets an L(1) conflict (a branch of a union reads other bytes where the call
stands) is written out down to a nesting depth, calls below, which keeps its language: one level, then (still in
conflict) one past the deepest member the schema declares, where only calls meet.  Past this depth (its NFA
doubles per level), or in conflict still, it is bounded as the DFA compiler bounds it, at `ANY_VALUE_DEPTH`."""
COMBINATORS = ("allOf", "anyOf", "oneOf")
ANY_VALUE = "any JSON value"
"""The nonterminal of an unconstrained value (`true`, `{}`), which here nests to any depth the stack allows."""


class _CallingCompiler(_Compiler):
    """The schema compiler with every schema that mentions a recursive target at its top level lowered to a call.

    A plain reference to a target calls the target's own nonterminal.  A schema that combines a
    target with other keywords (`{"$ref": t, "maxItems": 1}`, an `anyOf` with a target among its
    branches, an `allOf` part) gets a nonterminal of its own, keyed by its JSON text, whose
    body inlines the target once; the target's inner references are calls again.  An unconstrained
    value is a call of its own nonterminal (`ANY_VALUE`), so it nests as deep as the stack allows
    rather than the DFA compiler's `ANY_VALUE_DEPTH`; after conflicts its top `any_levels` levels are written out
    with calls below them (`_any_value`).
    With `outline`, every member value or array item that may be an object or array is a call of a
    nonterminal keyed by its schema's JSON text (but those in `inlined`), compiled once however
    often it occurs.  The root and every body are read in one document context (`context`, made for `root` unless
    given), so what it keeps (`Context.one_of`) serves them all.
    """

    def __init__(self, tokens: JsonTokens, calls: dict[str, ir.Node], root: Any, *, outline: bool = False,
                 inlined: frozenset[str] = frozenset(), any_levels: int = 0, zero_fractions: bool = True,
                 strict: bool = True, context: Context | None = None) -> None:
        super().__init__(tokens, zero_fractions, strict)
        self.targets = set(calls)
        self.calls = dict(calls)
        self.root = root
        self.context = context or document_context(root)
        self.extra: dict[str, tuple[Schema, str]] = {}
        self.names = {target: target for target in calls}
        self._taken_names = set(self.names.values())
        self.outline, self.inlined, self.any_levels = outline, inlined, any_levels
        self.nesting = self.deepest = 0
        self._memos = {0: self._lowered}
        self._depth_below: dict[int, tuple[Schema, int]] = {}
        self.outlined: set[str] = set()
        self._keys: dict[int, tuple[dict, str]] = {}

    def value(self, schema: Schema, path: str, ctx: Context) -> ir.Node:
        """A call for a schema that mentions a recursive target at its top level, else the ordinary lowering."""
        if isinstance(schema, dict) and self._mentions_target(schema, ctx, path):
            ref = schema.get("$ref")
            if isinstance(ref, str) and not any(k in SUPPORTED and k != "$ref" for k in schema):
                _, target = resolve_ref(ref, ctx, f"{path}/$ref")
                if target in self.calls:
                    return self.calls[target]
            key = self._key(schema)
            return self._call(key, schema, path, path)
        if not self._writes_out_any or not isinstance(schema, dict):
            return super().value(schema, path, ctx)
        known = self._depth_below.get(id(schema))
        if known is not None and known[0] is schema:
            self.deepest = max(self.deepest, self.nesting + known[1])
            return super().value(schema, path, ctx)
        outer, self.deepest = self.deepest, self.nesting
        try:
            return super().value(schema, path, ctx)
        finally:
            self._depth_below[id(schema)] = (schema, self.deepest - self.nesting)
            self.deepest = max(outer, self.deepest)

    def member(self, schema: Schema, path: str, ctx: Context) -> ir.Node:
        """With `outline`, a call for a member value or item that may be a container; else the ordinary lowering.
        Only a container's key (its JSON text) is written: most members are scalars (two thirds of kb_233's)."""
        if (self.outline and isinstance(schema, dict) and not self._mentions_target(schema, ctx, path)
                and _may_be_container(flatten(schema, path, ctx.entering())[0])):
            key = self._key(schema)
            if key not in self.inlined:
                self.outlined.add(key)
                return self._call(key, schema, path, path)
        if not self._writes_out_any:
            return super().member(schema, path, ctx)
        outer = self._lowered
        self.nesting += 1
        self.deepest = max(self.deepest, self.nesting)
        self._lowered = self._memos.setdefault(min(self.nesting, self.any_levels), {})
        try:
            return super().member(schema, path, ctx)
        finally:
            self.nesting -= 1
            self._lowered = outer

    def _key(self, schema: dict) -> str:
        """A schema's JSON text, the key of its nonterminal, written once per schema object (held, so that its id is
        not reused): each member is asked for at its outline check, and a schema's text holds its members' texts
        (writing each again at every level above was 3% of kb_233's lowering)."""
        known = self._keys.get(id(schema))
        if known is None or known[0] is not schema:
            known = self._keys[id(schema)] = (schema, json.dumps(schema))
        return known[1]

    @property
    def _writes_out_any(self) -> bool:
        """Whether unconstrained values are written out down to nesting `any_levels` (then the lowering counts
        its nesting, and the deepest a member reaches, in `deepest`)."""
        return 0 < self.any_levels <= MAX_ANY_LEVELS

    @property
    def any_depth(self) -> int:
        """With `any_levels`, the levels an unconstrained value at this nesting is written out: down to nesting
        `any_levels`, where every one is a call, so values that meet at one position of a body agree on it."""
        return max(self.any_levels - self.nesting, 0) if self._writes_out_any else ANY_VALUE_DEPTH

    def _call(self, key: str, schema: Schema, path: str, name: str) -> ir.Node:
        """The call symbol of the nonterminal `key` (its body `schema` at `path`), made on first use."""
        if key not in self.calls:
            if len(self.calls) >= MAX_NONTERMINALS:
                raise SchemaError(f"more than {MAX_NONTERMINALS} nonterminals (recursive combinations of "
                                  "definitions or outlined members)", path)
            self.calls[key] = call_symbol(len(self.calls))
            self.extra[key] = (schema, path)
            taken = self._taken_names
            self.names[key] = next(n for n in chain((name,), (f"{name} ({i})" for i in range(2, len(taken) + 3)))
                                   if n not in taken)
            taken.add(self.names[key])
        return self.calls[key]

    def _any_value(self, depth: int) -> ir.Node:
        """A call of the unconstrained-value nonterminal (any depth; its body is `any_value_body`), or with
        `any_levels` the value written out `depth` levels down to such calls (`any_depth`): the same language,
        its calls deeper than the bytes they clashed with.  Past `MAX_ANY_LEVELS`, the DFA compiler's value,
        bounded at `ANY_VALUE_DEPTH`."""
        if self.any_levels > MAX_ANY_LEVELS:
            return super()._any_value(depth)
        if self.any_levels == 0 or depth <= 0:
            return self._call(ANY_VALUE, True, ROOT, ANY_VALUE)
        return super()._any_value(depth)

    def any_value_body(self) -> ir.Node:
        """One JSON value whose member values and items are calls of the unconstrained-value nonterminal."""
        return super()._any_value(1)

    def _compact(self, node: ir.Node) -> ir.Node:
        """A large node as its automaton (`build_automaton`), unless it holds calls (their symbols are outside
        the bytes)."""
        return node if _holds_call(node) else super()._compact(node)

    def _mentions_target(self, schema: dict, ctx: Context, path: str) -> bool:
        """Whether `schema` refers to a recursive target by `$ref` or through the parts of its combinators."""
        if not self.targets:
            return False
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
        return super().value(schema, path, self.context)


def _may_be_container(flat: Any) -> bool:
    """Whether a flattened schema with structure may hold an object or array (free-form and enum values do not)."""
    if not isinstance(flat, dict) or not flat or "enum" in flat:
        return False
    if any(key in flat for key in COMBINATORS):
        return True
    types = flat.get("type", ["object", "array"])
    return bool({"object", "array"} & set(types if isinstance(types, list) else [types]))


def _holds_call(node: ir.Node) -> bool:
    """Whether an IR node reads a call symbol (a byte set reaching past 255) anywhere."""
    return any(isinstance(current, ir.ByteSet) and bool(current.ranges) and current.ranges[-1][1] >= CALL_BASE
               for current in ir.distinct_nodes(node))


def recursive_schema_to_ir(schema: dict, calls: dict[str, ir.Node], *, whitespace: Whitespace | None = None,
                           compiler: _CallingCompiler | None = None, zero_fractions: bool = True,
                           strict: bool = True) -> tuple[ir.Node, dict[str, ir.Node]]:
    """The root's IR and the body of each nonterminal: the recursive targets (`calls`), then combinations met.

    References to the targets are lowered to `calls`; a combination gets the next call symbol,
    and its body is keyed by its JSON text (key order kept: it is the order members are written in).
    `zero_fractions` and `strict` are `schema_to_ir`'s (used when no `compiler` is given).
    """
    compiler = compiler or _CallingCompiler(JsonTokens(whitespace), calls, schema, zero_fractions=zero_fractions,
                                            strict=strict)
    ws = compiler.tokens.ws
    main = ir.seq(ws, compiler.value(schema, ROOT, compiler.context), ws)
    bodies = {}
    for target in calls:
        node, _ = resolve_ref(target, compiler.context, target)
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
                             outline: bool | None = False, zero_fractions: bool = True, strict: bool = True
                             ) -> PushdownGrammar:
    """The pushdown grammar of a JSON Schema: one nonterminal per target on a reference cycle.

    Schemas that combine a target with other keywords become nonterminals of their own.  With
    `outline` (for schemas whose single DFA is too large), every member value or array item that may
    be a container is a nonterminal too, compiled once however often it occurs; `outline=None` chooses
    (`_calling_grammar`).  A call that breaks an L(1) condition (two calls, or a call and a byte,
    possible at one state) is inlined and the grammar compiled again; the free-form value then falls back
    to the DFA compiler's bounded depth.  `zero_fractions` and `strict` are `schema_to_ir`'s.
    """
    grammar = _calling_grammar(schema, recursive_targets(schema), whitespace, max_states, max_depth, outline,
                               zero_fractions, strict, False)
    assert isinstance(grammar, PushdownGrammar)
    return grammar


def free_form_grammar(schema: dict, *, whitespace: Whitespace | None = None, max_states: int = DEFAULT_MAX_STATES,
                      max_depth: int = MAX_DEPTH, outline: bool | None = False, zero_fractions: bool = True,
                      strict: bool = True) -> PushdownGrammar | ir.Node:
    """The pushdown grammar of a schema without reference cycles whose free-form values (`true`, `{}`, an
    object's undeclared members) are calls of `ANY_VALUE`, so they nest to any depth; when it has no
    free-form value, or every one had to be inlined, the IR of the whole schema (`schema_to_ir`'s, for a DFA).
    The caller has found no reference cycle (`is_recursive_schema`), so none is looked for again."""
    return _calling_grammar(schema, [], whitespace, max_states, max_depth, outline, zero_fractions, strict, True)


class _OutlinedConflict(Exception):
    """An L(1) conflict an outlined grammar's try met where its retries were not allowed (`_calling_grammar` without
    `retry_conflicts`): the conflict, and the members inlined and free-form levels the next try would take (inlined
    None: no member can be moved, the conflict stands).  A later outlined grammar of the same schema starts there."""

    def __init__(self, error: GrammarConflictError, inlined: frozenset[str] | None, any_levels: int) -> None:
        super().__init__(str(error))
        self.error, self.inlined, self.any_levels = error, inlined, any_levels


def _calling_grammar(schema: dict, targets: list[str], whitespace: Whitespace | None, max_states: int,
                     max_depth: int, outline: bool | None, zero_fractions: bool, strict: bool,
                     calls_required: bool, context: Context | None = None, retry_conflicts: bool = True,
                     resume: _OutlinedConflict | None = None) -> PushdownGrammar | ir.Node:
    """`compile_recursive_schema` with the reference cycles' `targets` given, or with `calls_required` the root's
    IR once the grammar would have no nonterminal.

    `outline=None` chooses: the outlined grammar when the plain bodies are large (`outline_pays`, or measured on
    the outlined bodies of a schema with many members: `_outlined_at_once`) or pass `max_states`, else the plain
    one.  The choice does not change the outcome: an outlined grammar tried first is taken only when it compiles
    without an L(1) conflict (a conflict there is one the plain grammar meets too, and inlining it may change which
    free-form values nest), else the plain grammar is built, and when that passes `max_states` the outlined
    grammar's own outcome stands, as trying it second gave.  Without `retry_conflicts` a conflict is raised, not
    resolved (as an `_OutlinedConflict`, which says where the retries would go on); `resume` is such a conflict,
    met by this same grammar's first try: the retries start after it instead of meeting it again.  Every try reads
    the schema in one document `context` (what it keeps about the document serves them all)."""
    if context is None:
        return within_document(schema, lambda document: _calling_grammar(
            schema, targets, whitespace, max_states, max_depth, outline, zero_fractions, strict, calls_required,
            document, retry_conflicts, resume))
    calls = {target: call_symbol(i) for i, target in enumerate(targets)}
    inlined: set[str] = set()
    any_levels = 0
    tries = MAX_CONFLICT_RETRIES
    if resume is not None:
        if resume.inlined is None:
            raise resume.error
        inlined, any_levels, tries = set(resume.inlined), resume.any_levels, tries - 1
    tried = False
    outlined_error: CompileError | None = None
    outlined_conflict: _OutlinedConflict | None = None
    at_once = _outlined_at_once(schema, calls, whitespace, zero_fractions, strict, context) if outline is None else None
    if at_once is not None:
        tried = True
        grammar, outlined_error, outlined_conflict = _outlined_try(
            lambda: _first_outlined_pushdown(*at_once, whitespace, max_states, max_depth))
        if grammar is not None:
            return grammar

    def lowering_compiler() -> _CallingCompiler:
        """This try's compiler (its members inlined and free-form levels as the tries so far left them)."""
        return _CallingCompiler(JsonTokens(whitespace), calls, schema, outline=outline is True,
                                inlined=frozenset(inlined), any_levels=any_levels, zero_fractions=zero_fractions,
                                strict=strict, context=context)

    if resume is None and may_refuse_late(schema):
        refused_early(lambda shapes: recursive_schema_to_ir(schema, calls, compiler=_probing(lowering_compiler(),
                                                                                             shapes)))
    for _ in range(tries):
        compiler = lowering_compiler()
        try:
            main, bodies = recursive_schema_to_ir(schema, calls, compiler=compiler)
            if calls_required and not bodies:
                return main
            if outline is None and not tried and outline_pays(main, *bodies.values()):
                tried = True
                grammar, outlined_error, outlined_conflict = _outlined_try(lambda: _calling_grammar(
                    schema, targets, whitespace, max_states, max_depth, True, zero_fractions, strict, calls_required,
                    context, retry_conflicts=False))
                if grammar is not None:
                    return grammar
            return _pushdown(compiler, main, bodies, whitespace, max_states, max_depth)
        except GrammarConflictError as error:
            inlined, any_levels = _next_try(error, compiler, inlined, any_levels, retry_conflicts)
        except StateBudgetError:
            if outline is not None:
                raise
            if outlined_error is not None:
                raise outlined_error from None
            return _calling_grammar(schema, targets, whitespace, max_states, max_depth, True, zero_fractions, strict,
                                    calls_required, context, resume=outlined_conflict)
    raise CompileError(f"more than {MAX_CONFLICT_RETRIES} L(1) conflicts between outlined members")


def _next_try(error: GrammarConflictError, compiler: _CallingCompiler, inlined: set[str], any_levels: int,
              retry_conflicts: bool) -> tuple[set[str], int]:
    """The members inlined and free-form levels of the try after `compiler`'s L(1) conflict `error`; raised as an
    `_OutlinedConflict` where retries are not allowed, and as it is where no conflicting part can move.  A function of
    its own: the conflict kept in the caller's frame would hold the error, whose traceback holds that frame."""
    after = _after_conflict(error, compiler, inlined, any_levels)
    if not retry_conflicts:
        raise after from error
    if after.inlined is None:
        raise error
    return set(after.inlined), after.any_levels


def _probing(compiler: _CallingCompiler, shapes: KeyClassShapes) -> _CallingCompiler:
    """`compiler` made a probe's (`refusal_probe`): its undeclared-key classes are `shapes`'."""
    compiler.key_shapes = shapes
    return compiler


def _after_conflict(error: GrammarConflictError, compiler: _CallingCompiler, inlined: set[str], any_levels: int
                    ) -> _OutlinedConflict:
    """Where the try after `compiler`'s L(1) conflict `error` goes on: the conflicting outlined members inlined too,
    a conflicting free-form value written out one level past the deepest declared member (or, past
    `MAX_ANY_LEVELS`, bounded); inlined None where no conflicting part can move."""
    keys = {key for key, name in compiler.names.items() if name in error.nonterminals}
    movable = keys & (compiler.outlined | {ANY_VALUE})
    if not movable:
        return _OutlinedConflict(error, None, any_levels)
    if ANY_VALUE in movable:
        needed = compiler.deepest + 1 if any_levels else 1
        any_levels = needed if any_levels < needed <= MAX_ANY_LEVELS else MAX_ANY_LEVELS + 1
    return _OutlinedConflict(error, frozenset(inlined | (movable - {ANY_VALUE})), any_levels)


def _first_outlined_pushdown(compiler: _CallingCompiler, main: ir.Node, bodies: dict[str, ir.Node],
                             whitespace: Whitespace | None, max_states: int, max_depth: int) -> PushdownGrammar:
    """`_pushdown` of the outlined grammar's first try (`_outlined_at_once`), its L(1) conflict raised as the
    `_OutlinedConflict` that try would raise, so that a later outlined grammar resumes after it."""
    try:
        return _pushdown(compiler, main, bodies, whitespace, max_states, max_depth)
    except GrammarConflictError as error:
        raise _after_conflict(error, compiler, set(), 0) from error


def _outlined_at_once(schema: dict, calls: dict[str, ir.Node], whitespace: Whitespace | None, zero_fractions: bool,
                      strict: bool, context: Context) -> tuple[_CallingCompiler, ir.Node, dict[str, ir.Node]] | None:
    """The outlined grammar's compiler, root and bodies, lowered before the plain ones for a schema that declares
    `MANY_MEMBERS_FROM` members or more, when the plain bodies they stand for are large (`plain_size_reaches`):
    a large schema's plain bodies were lowered only to be measured and dropped (0.1 s of a Kubernetes schema's
    0.45 s).  None where the plain grammar is lowered first, as for any other schema: fewer members, plain bodies
    below `OUTLINE_FROM`, no nonterminal the plain grammar would have (it would be the DFA compiler's IR), or a
    lowering that refused (the plain one then refuses as it did)."""
    if declared_members(schema) < MANY_MEMBERS_FROM:
        return None
    compiler = _CallingCompiler(JsonTokens(whitespace), calls, schema, outline=True, zero_fractions=zero_fractions,
                                strict=strict, context=context)
    try:
        main, bodies = recursive_schema_to_ir(schema, calls, compiler=compiler)
    except CompileTimeError:
        raise
    except CompileError:
        return None
    if not calls and ANY_VALUE not in bodies:
        return None
    called = {compiler.calls[key].ranges[0][0]: bodies[key] for key in compiler.outlined}  # type: ignore[union-attr]
    plain = [main, *(body for key, body in bodies.items() if key not in compiler.outlined)]
    return (compiler, main, bodies) if plain_size_reaches(plain, called) else None


def _outlined_try(attempt: Callable[[], PushdownGrammar | ir.Node]
                  ) -> tuple[PushdownGrammar | ir.Node | None, CompileError | None, _OutlinedConflict | None]:
    """The outlined grammar `attempt` builds, tried before the plain one: (it, None, None), or None and its error
    for the plain grammar to stand in, or None and the L(1) conflict it met (which the plain grammar resolves its
    own way; the conflict says where a later outlined try resumes); a compile past its time limit is raised."""
    try:
        return attempt(), None, None
    except CompileTimeError:
        raise
    except _OutlinedConflict as conflict:
        return None, None, frames_cleared(conflict, detach=True)
    except CompileError as error:
        return None, frames_cleared(error, detach=True), None


def _pushdown(compiler: _CallingCompiler, main: ir.Node, bodies: dict[str, ir.Node], whitespace: Whitespace | None,
              max_states: int, max_depth: int) -> PushdownGrammar:
    """The pushdown grammar of a lowered root and bodies, the free-form value's body DFA built once (or shipped)."""
    definitions = [Definition(compiler.names[key], body, _any_value_dfa(compiler, whitespace, len(bodies))
                              if key == ANY_VALUE else None) for key, body in bodies.items()]
    return compile_pushdown(main, definitions, max_states=max_states, max_depth=max_depth)


def _any_value_dfa(compiler: _CallingCompiler, whitespace: Whitespace | None, count: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The free-form value's body DFA, built once per whitespace (or shipped) and placed at its call symbol among
    `count` definitions, over classes (`Definition.dfa`)."""
    symbol = compiler.calls[ANY_VALUE]
    assert isinstance(symbol, ir.ByteSet)
    return any_value_classes(whitespace, symbol.ranges[0][0] - CALL_BASE, CALL_BASE + count)
