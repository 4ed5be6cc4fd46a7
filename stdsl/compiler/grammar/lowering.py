"""`lower_grammar`: a Lark / GBNF / EBNF grammar compiled exactly to one DFA, or to the pushdown when it must.

The grammar is read (`syntax="auto"`: a non-comment line with `::=` is GBNF / EBNF, else Lark), its
rules lowered to IR over rule symbols (`expressions`), and every rule on no cycle inlined. Where
rules recurse, some become pushdown nonterminals (`rule_graph`): the rest of their cycle is
inlined, left and right recursion become iteration, nullable nonterminals are split into `a' | ε`.
Choices are tried smallest first until one passes the pushdown's L(1) checks; if none does, the
grammar is refused naming the rule, its line and column, and the conflicting byte.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.grammar import syntax_tree as st
from stdsl.compiler.grammar.bracketing import bracket_parts
from stdsl.compiler.grammar.expressions import GrammarLowering, RuleTable
from stdsl.compiler.grammar.gbnf_syntax import parse_gbnf
from stdsl.compiler.grammar.json_slots import Frame, SlotLeaves, SlottedText, compile_frame, frame_of, slotted_text
from stdsl.compiler.grammar.lark_syntax import parse_lark
from stdsl.compiler.grammar.piece_alternatives import MIN_PIECES, assembled_alternative
from stdsl.compiler.grammar.rule_algebra import (
    Nullable,
    RuleUses,
    nonempty_part,
    productive_rules,
    rule_symbol,
    self_recursion_as_iteration,
    substitute,
    without_self_recursion,
)
from stdsl.compiler.grammar.rule_graph import is_cyclic, nonterminal_choices
from stdsl.compiler.graph_components import strongly_connected
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.embedding import compile_embedding, compile_merged
from stdsl.compiler.pushdown.grammar import (
    Definition,
    DefinitionError,
    GrammarConflictError,
    PushdownGrammar,
    call_symbol,
)
from stdsl.errors import CompileError, CompileTimeError, EmptyLanguageError, GrammarError, StateBudgetError

MAX_GRAMMAR_CHARS = 2_000_000
MAX_ATTEMPTS = 32

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
DEEP_CHAIN = 200
"""Rule references nested this deep are named when a grammar nests past what the compiler builds."""
_FRAMES = caches.kind("grammar frames")
"""A Lark grammar's lowered frame (`json_slots.Frame`; None: it is lowered whole) per frame text, start rule, special
tokens and state budget: a grammar whose `%json` schemas change reuses it."""


def detect_syntax(text: str) -> str:
    """vLLM's rule: "gbnf" when a line that is not a comment holds `::=`, else "lark"."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", "//")):
            continue
        if "::=" in stripped:
            return "gbnf"
    return "lark"


def parse_grammar(grammar: Grammar) -> st.GrammarTree:
    """The syntax tree of a `Grammar`, its start rule set."""
    if len(grammar.text) > MAX_GRAMMAR_CHARS:
        raise GrammarError(f"the grammar has {len(grammar.text):,} characters, more than the limit of "
                           f"{MAX_GRAMMAR_CHARS:,}", grammar.source)
    surrogate = _LONE_SURROGATE.search(grammar.text)
    if surrogate is not None:
        before = grammar.text[: surrogate.start()]
        raise GrammarError(f"lone surrogate U+{ord(surrogate.group()):04X} is not text (it has no UTF-8 encoding)",
                           grammar.source, before.count("\n") + 1, surrogate.start() - before.rfind("\n"))
    syntax = detect_syntax(grammar.text) if grammar.syntax == "auto" else grammar.syntax
    tree = parse_lark(grammar.text, grammar.source) if syntax == "lark" else parse_gbnf(grammar.text, grammar.source)
    if grammar.start is not None:
        tree.start = grammar.start
    return tree


def lower_grammar(grammar: Grammar, *, max_states: int = DEFAULT_MAX_STATES,
                  specials: dict[str, None] | None = None) -> Automaton | PushdownConstraint:
    """Compile `grammar`: its DFA when no recursion is left after inlining and iteration (`stdsl.compile` makes
    it a `Constraint` of kind "grammar"), else a `PushdownConstraint` of kind "grammar". Raises GrammarError
    naming source, line and column.

    The special tokens the grammar uses are added to `specials` (their private spellings, `special_tokens`, stand
    in the automaton); with `specials` None a special token is refused."""
    began = time.perf_counter()
    framed = _from_frame(grammar, max_states, specials)
    if framed is not None:
        return framed
    tree = parse_grammar(grammar)
    tokens = dict(grammar.special_tokens) if grammar.special_tokens is not None else None
    table = RuleTable(grammar.source, tokens, specials)
    try:
        lowered = GrammarLowering(tree, table)
        main = ir.seq(lowered.leading, rule_symbol(lowered.start))
        result = _RulePlan(table, main).compile(max_states)
    except RecursionError:
        raise _too_deep(tree, grammar.source) from None
    if isinstance(result, PushdownGrammar):
        used = tuple(specials) if specials is not None else ()
        return PushdownConstraint(result, "grammar", grammar, time.perf_counter() - began, special_tokens=used)
    return result


def _from_frame(grammar: Grammar, max_states: int, specials: dict[str, None] | None) -> Automaton | None:
    """A Lark grammar with many `%json` values compiled from its frame, kept per frame text (`json_slots`), or
    None where it has too few, or its frame does not compile that way (the caller lowers it whole)."""
    syntax = detect_syntax(grammar.text) if grammar.syntax == "auto" else grammar.syntax
    if (syntax != "lark" or grammar.text.count("%json") < MIN_PIECES or len(grammar.text) > MAX_GRAMMAR_CHARS
            or _LONE_SURROGATE.search(grammar.text)):
        return None
    slotted = slotted_text(grammar.text)
    if slotted is None or len(slotted.schemas) < MIN_PIECES:
        return None
    key = (slotted.frame, grammar.start, grammar.special_tokens, specials is None, max_states)
    frame: Frame | None = _FRAMES.get((), partial(_frame, grammar, slotted, max_states, specials is None), key)
    if frame is None:
        return None
    compiled = compile_frame(frame, slotted, max_states)
    if compiled is not None and specials is not None:
        specials.update(dict.fromkeys(frame.specials))
    return compiled


def _frame(grammar: Grammar, slotted: SlottedText, max_states: int, refuse_specials: bool) -> Frame | None:
    """The lowered frame of a grammar (`json_slots.frame_of`), or None where it recurses, is refused or has no
    alternative of pieces."""
    used: dict[str, None] | None = None if refuse_specials else {}
    tokens = dict(grammar.special_tokens) if grammar.special_tokens is not None else None
    table = RuleTable(grammar.source, tokens, used)
    leaves = SlotLeaves(len(slotted.schemas))
    table.json_slot = leaves.leaf
    try:
        lowered = GrammarLowering(parse_grammar(replace(grammar, text=slotted.frame)), table)
        main = _RulePlan(table, ir.seq(lowered.leading, rule_symbol(lowered.start))).regular_main()
        return None if main is None else frame_of(main, leaves, tuple(used or ()))
    except (StateBudgetError, CompileTimeError):
        raise
    except (CompileError, RecursionError):
        return None


def _too_deep(tree: st.GrammarTree, source: str) -> GrammarError:
    """The error for a grammar that nests past the compiler's depth: located at the first rule reached through a
    chain of `DEEP_CHAIN` rule references from the start rule, else at the start rule."""
    depth = {tree.start: 0}
    queue = [tree.start]
    for name in queue:
        definition = tree.definitions.get(name)
        if definition is None:
            continue
        if depth[name] >= DEEP_CHAIN:
            line, column = definition.position
            return GrammarError(f"rule {name} is reached through a chain of {depth[name]} rule references from "
                                f"{tree.start}; rules nest at most about {DEEP_CHAIN} deep here: shorten the chain "
                                "(a repetition such as item* instead of one rule per step)", source, line, column)
        for referenced in _references(definition.body):
            if referenced not in depth:
                depth[referenced] = depth[name] + 1
                queue.append(referenced)
    line, column = tree.start_position
    return GrammarError("the grammar nests too deeply to compile (expressions or rule references inside one "
                        "another); flatten it", source, line, column)


def _references(body: st.Expression) -> list[str]:
    """The rule names an expression refers to, found without recursion."""
    found: list[str] = []
    stack: list[object] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, st.Reference):
            found.append(node.name)
        elif dataclasses.is_dataclass(node):
            for item in (getattr(node, f.name) for f in dataclasses.fields(node)):
                if isinstance(item, (list, tuple)):
                    stack.extend(x for x in item if dataclasses.is_dataclass(x))
                elif dataclasses.is_dataclass(item) and not isinstance(item, st.GrammarTree):
                    stack.append(item)
    return found


def _regular(main: ir.Node, max_states: int) -> Automaton | PushdownGrammar:
    """The DFA of a grammar with every rule inlined: assembled around its alternative of literal-headed pieces where
    it has one (`piece_alternatives`), else compiled whole (a pushdown where it embeds a recursive grammar)."""
    try:
        assembled = assembled_alternative(main, max_states)
    except RecursionError:
        assembled = None
    return assembled if assembled is not None else compile_embedding(main, max_states=max_states)


class _RulePlan:
    """The reachable rules, their components, and the search over nonterminal choices."""

    def __init__(self, table: RuleTable, main: ir.Node) -> None:
        self.table, self.main = table, main
        self.uses = RuleUses(table.plain)
        productive = productive_rules(table.bodies, self.uses)
        if len(productive) < len(table.names):
            barren = [set(self.uses(body)) if i not in productive else set() for i, body in enumerate(table.bodies)]
            first = next(c for c in strongly_connected(barren) if c[0] not in productive)[0]
            raise table.error(f"rule '{table.names[first]}' matches nothing (every alternative needs a rule or "
                              "terminal that matches nothing, or it recurses without end)", table.positions[first])
        self._analyse()
        self.owners: dict[int, int] = {}
        self.bracketed = self._bracket()
        if self.bracketed:
            self._analyse()
        self.choices = []
        for component in self.cyclic:
            required = {r for r in component
                        if without_self_recursion(table.bodies[r], r, self.uses) is None}
            preferred = sorted(component, key=lambda r: (r not in self.bracketed, r))
            self.choices.append(nonterminal_choices(preferred, self.graph, required))

    def _analyse(self) -> None:
        """The rule graph from the start rule, its components (callees first) and the cyclic ones."""
        reachable = self._reachable()
        self.graph = [set(self.uses(body)) & reachable if i in reachable else set()
                      for i, body in enumerate(self.table.bodies)]
        self.components = [c for c in strongly_connected(self.graph) if c[0] in reachable]
        self.cyclic = [c for c in self.components if is_cyclic(c, self.graph)]

    def _bracket(self) -> set[int]:
        """Give the bracketed parts of recursive rules rules of their own (`bracketing`); their indices."""
        table = self.table
        made: dict[ir.Node, int] = {}

        def new_rule(part: ir.Node, owner: int) -> int:
            found = made.get(part)
            if found is None:
                found = made[part] = table.add(f"{table.names[owner]}, part {len(made) + 1}", table.positions[owner])
                self.owners[found] = self.owners.get(owner, owner)
                table.bodies[found] = part
            return found

        for component in self.cyclic:
            cycle = frozenset(component)
            for rule in component:
                def made_for(part: ir.Node, owner: int = rule) -> int:
                    return new_rule(part, owner)

                table.bodies[rule] = bracket_parts(table.bodies[rule], cycle, self.uses, made_for)
        return set(made.values())

    def _reachable(self) -> set[int]:
        seen: set[int] = set()
        pending = list(self.uses(self.main))
        while pending:
            rule = pending.pop()
            if rule not in seen:
                seen.add(rule)
                pending.extend(self.uses(self.table.bodies[rule]))
        return seen

    def compile(self, max_states: int) -> PushdownGrammar | Automaton:
        """The automaton (no nonterminal left) or the pushdown grammar of the first choice that passes."""
        picked = [0] * len(self.cyclic)
        last: CompileError | None = None
        for _ in range(MAX_ATTEMPTS):
            check_deadline("choosing grammar nonterminals")
            chosen: set[int] = set()
            for component_choices, at in zip(self.choices, picked):
                chosen |= component_choices[at]
            try:
                return self._attempt(chosen, max_states)
            except (StateBudgetError, CompileTimeError):
                raise
            except EmptyLanguageError as error:
                raise self.table.error(f"the grammar matches nothing: {error}", self.table.positions[0]) from None
            except CompileError as error:
                last = error
                involved = self._involved(error)
                movable = [k for k, component in enumerate(self.cyclic)
                           if set(component) & involved and picked[k] + 1 < len(self.choices[k])]
                if not movable:
                    movable = [k for k in range(len(self.cyclic)) if picked[k] + 1 < len(self.choices[k])]
                if not movable:
                    break
                picked[movable[0]] += 1
        assert last is not None
        rule = min((self.owners.get(r, r) for r in self._involved(last)), default=0)
        raise self.table.error(f"no exact lowering of rule '{self.table.names[rule]}' passes the pushdown's "
                               f"one-byte lookahead checks: {last}", self.table.positions[rule]) from None

    def _involved(self, error: CompileError) -> set[int]:
        """The rules an error from the pushdown names."""
        if isinstance(error, GrammarConflictError):
            names = list(error.nonterminals)
        elif isinstance(error, DefinitionError):
            names = [error.definition]
        else:
            names = re.findall(r"'([^']+)'", str(error)) + re.findall(r"([^\s:]+) ->", str(error))
        return {self.table.index[name] for name in names if name in self.table.index}

    def regular_main(self) -> ir.Node | None:
        """The main expression with every rule inlined, or None where rules recurse (a pushdown's choices)."""
        return None if self.cyclic else self._inlined(set())[0]

    def _attempt(self, chosen: set[int], max_states: int) -> PushdownGrammar | Automaton:
        main, inline = self._inlined(chosen)
        nonterminals = sorted(chosen)
        if not nonterminals:
            return _regular(main, max_states)
        bodies = self.table.bodies
        definitions = {r: self_recursion_as_iteration(substitute(bodies[r], inline, self.uses), r, self.uses)
                       for r in nonterminals}
        main = self._inline_regular(main, definitions)
        if not definitions:
            return _regular(main, max_states)
        return self._pushdown(main, definitions, max_states)

    def _inlined(self, chosen: set[int]) -> tuple[ir.Node, Callable[[int], ir.Node | None]]:
        """The main expression with every rule but the `chosen` nonterminals inlined, and the inlining."""
        resolved: dict[int, ir.Node] = {}

        def inline(index: int) -> ir.Node | None:
            return resolved.get(index)

        bodies = self.table.bodies
        for component in self.components:
            members = [m for m in component if m not in chosen]
            for member in self._callees_first(members):
                body = substitute(bodies[member], inline, self.uses)
                flat = without_self_recursion(body, member, self.uses)
                if flat is None:
                    raise CompileError(f"rule '{self.table.names[member]}' recurses in its middle; it needs a "
                                       "nonterminal")
                resolved[member] = flat
        return substitute(self.main, inline, self.uses), inline

    def _inline_regular(self, main: ir.Node, definitions: dict[int, ir.Node]) -> ir.Node:
        """Inline, one at a time, each chosen nonterminal whose body no longer uses itself (its recursion became
        iteration once the rest of its cycle was inlined), rewriting the bodies it lands in; the new main body."""
        while True:
            check_deadline("choosing grammar nonterminals")
            regular = next((r for r, body in definitions.items() if r not in self.uses(body)), None)
            if regular is None:
                return main
            body = definitions.pop(regular)

            def replace(index: int, rule: int = regular, body: ir.Node = body) -> ir.Node | None:
                return body if index == rule else None

            for rule, other in definitions.items():
                definitions[rule] = self_recursion_as_iteration(substitute(other, replace, self.uses), rule,
                                                                self.uses)
            main = substitute(main, replace, self.uses)

    def _callees_first(self, members: list[int]) -> list[int]:
        """`members` ordered so that each comes after the members it uses (they have no cycle but self-uses)."""
        inside = set(members)
        order: list[int] = []
        done: set[int] = set()

        def visit(node: int) -> None:
            stack = [(node, iter(sorted(self.graph[node] & inside)))]
            done.add(node)
            while stack:
                current, successors = stack[-1]
                for succ in successors:
                    if succ not in done:
                        done.add(succ)
                        stack.append((succ, iter(sorted(self.graph[succ] & inside))))
                        break
                else:
                    stack.pop()
                    order.append(current)

        for member in members:
            if member not in done:
                visit(member)
        return order

    def _pushdown(self, main: ir.Node, bodies: dict[int, ir.Node], max_states: int) -> PushdownGrammar:
        """The pushdown of the chosen nonterminals: nullable ones split into `a' | ε`, symbols renumbered as calls."""
        nullable_rules: set[int] = set()
        changed = True
        while changed:
            changed = False
            nullable = Nullable(nullable_rules)
            for rule, body in bodies.items():
                if rule not in nullable_rules and nullable(body):
                    nullable_rules.add(rule)
                    changed = True
        numbering = {rule: k for k, rule in enumerate(sorted(bodies))}

        def call(index: int) -> ir.Node:
            node = call_symbol(numbering[index])
            return ir.optional(node) if index in nullable_rules else node

        out: list[Definition] = []
        for rule in sorted(bodies):
            body = bodies[rule]
            if rule in nullable_rules:
                cut = nonempty_part(body, Nullable(nullable_rules))
                if cut is None:
                    raise self.table.error(f"rule '{self.table.names[rule]}' matches the empty string through an "
                                           "embedded value and recurses; make it read at least one character",
                                           self.table.positions[rule])
                body = cut
            out.append(Definition(self.table.names[rule], substitute(body, call, self.uses)))
        return compile_merged(substitute(main, call, self.uses), out, max_states=max_states)
