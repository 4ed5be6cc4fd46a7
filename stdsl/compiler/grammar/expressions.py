"""Grammar syntax trees to IR over rule symbols: terminals inlined as bytes, `%ignore` text after each terminal.

Every rule of the grammar (and of each `%lark { ... }` block inside it) gets an index in one
`RuleTable`; a use of a rule is `rule_symbol(index)`. A terminal (a string, a regex, a class, an
uppercase name, a `%json` value) is its bytes followed by the ignored text its grammar allows
there: `ignore*` (`ignore?` with `ignore_once`), so ignored text may stand between any two
terminals and after the last one, and before the first only with `allow_initial_skip`.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from functools import partial

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.grammar import syntax_tree as st
from stdsl.compiler.grammar.lark_syntax import is_terminal_name
from stdsl.compiler.grammar.rule_algebra import rule_symbol
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.regex.case_fold import fold_ranges
from stdsl.compiler.regex.parser import parse_regex
from stdsl.compiler.special_tokens import special_spelling
from stdsl.errors import CompileError, CompileTimeError, GrammarError, RegexError, StateBudgetError

MAX_RULES = 20_000
_json_values = caches.kind("grammar %json values")
"""A `%json` value's IR per schema text (keys in the schema's order): a grammar whose tools change one at a time
lowers the others' values once, and the same IR object lets what is kept per piece expression hit."""
JSON_WHITESPACE = Whitespace()
"""The whitespace a `%json` value may hold: stdsl's default bounded run in every gap (as llguidance's flexible
JSON, which accepts `{"a": 1}` as well as `{"a":1}`)."""


class RuleTable:
    """All rules of a grammar and its nested grammars: names (nested ones prefixed), bodies, where each stands.

    `tokens` are the tokenizer's special (and added) tokens, text -> id (None: no tokenizer); `specials` collects
    the special tokens the grammar uses (None: special tokens are refused, as in a program's field).
    """

    def __init__(self, source: str, tokens: dict[str, int] | None = None,
                 specials: dict[str, None] | None = None) -> None:
        self.source = source
        self.tokens = tokens
        self.specials = specials
        self.names: list[str] = []
        self.positions: list[st.Position] = []
        self.bodies: list[ir.Node] = []
        self.index: dict[str, int] = {}
        self.plain: list[ir.Node] = []
        """Nodes known to hold no rule symbol (the `%json` values and their items): rule walks need not enter them."""
        self.json_slot: Callable[[object], ir.Node | None] | None = None
        """For a grammar's frame (`json_slots`): the leaf standing for a slot's stand-in schema (None: a schema)."""

    def add(self, name: str, position: st.Position) -> int:
        if len(self.names) >= MAX_RULES:
            raise GrammarError(f"more than {MAX_RULES} rules", self.source, *position)
        self.index[name] = len(self.names)
        self.names.append(name)
        self.positions.append(position)
        self.bodies.append(ir.NOTHING)
        return self.index[name]

    def error(self, message: str, position: st.Position) -> GrammarError:
        return GrammarError(message, self.source, *position)

    def special_token(self, expr: st.SpecialToken) -> ir.Node:
        """The private spelling of a special token reference (an alternation for an id range), recorded as used."""
        written = expr.name or "<[" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in expr.ranges) + "]>"
        if self.specials is None:
            raise self.error(f"the special token {written} can only stand in a grammar passed as the whole "
                             "constraint (stdsl.Grammar), not in a program's field", expr.position)
        if expr.name is not None:
            if self.tokens is not None and expr.name not in self.tokens:
                raise self.error(f"{expr.name} is not a special or added token of the tokenizer", expr.position)
            names = [expr.name]
        else:
            names = self._names_by_id(expr, written)
        for name in names:
            self.specials.setdefault(name)
        return ir.alt(*(ir.literal(special_spelling(name)) for name in names))

    def _names_by_id(self, expr: st.SpecialToken, written: str) -> list[str]:
        """The texts of the tokens `<[ids]>` names; each id must be a special or added token of the tokenizer."""
        if self.tokens is None:
            raise self.error(f"{written} names tokens by id, which needs the tokenizer: pass the grammar uncompiled "
                             "to generate (it is compiled for the model's tokenizer), compile "
                             "Grammar(...).with_special_tokens(tokenizer.special_tokens), or name the token "
                             "(<|python_tag|>)", expr.position)
        by_id = {i: name for name, i in self.tokens.items()}
        ids = sorted(by_id)
        names: list[str] = []
        for low, high in expr.ranges:
            inside = ids[bisect.bisect_left(ids, low):bisect.bisect_right(ids, high)]
            if len(inside) != high - low + 1:
                missing = next(i for k, i in enumerate(range(low, high + 1)) if k >= len(inside) or inside[k] != i)
                raise self.error(f"{written}: token id {missing} is not a special or added token of the tokenizer "
                                 "(only those can be named by id; write ordinary text as a string)", expr.position)
            names.extend(by_id[i] for i in inside)
        return list(dict.fromkeys(names))


class GrammarLowering:
    """Lowers one grammar tree's rules into `table` (names prefixed with `prefix`); `start` is its start rule."""

    def __init__(self, tree: st.GrammarTree, table: RuleTable, prefix: str = "") -> None:
        self.tree, self.table, self.prefix = tree, table, prefix
        self.terminals: dict[str, ir.Node] = {}
        self.open_terminals: list[str] = []
        self.nested = 0
        self.lazy_rule: str | None = None
        for name, definition in tree.definitions.items():
            if not definition.terminal:
                table.add(prefix + name, definition.position)
        if tree.start not in tree.definitions or tree.definitions[tree.start].terminal:
            raise table.error(f"the grammar has no start rule '{tree.start}'", tree.start_position)
        self.start = table.index[prefix + tree.start]
        ignore = [self.terminal_expression(expr) for expr in tree.ignore]
        once = tree.options.get("ignore_once") is True or tree.options.get("skip_repetition") == "once"
        skipped = ir.alt(*ignore) if ignore else ir.EMPTY
        self.trailing = ir.EMPTY if not ignore else (ir.optional(skipped) if once else ir.star(skipped))
        self.leading = self.trailing if tree.options.get("allow_initial_skip") is True else ir.EMPTY
        for name, definition in tree.definitions.items():
            if definition.terminal:
                self.terminal(name, definition.position)
            elif definition.lazy:
                table.bodies[table.index[prefix + name]] = ir.seq(self.lazy_body(definition), self.trailing)
            else:
                table.bodies[table.index[prefix + name]] = self.rule_expression(definition.body)

    def terminal(self, name: str, position: st.Position) -> ir.Node:
        """A terminal's bytes (no ignored text inside), built once."""
        found = self.terminals.get(name)
        if found is not None:
            return found
        if name in self.tree.declared:
            return ir.NOTHING
        definition = self.tree.definitions.get(name)
        if definition is None or not definition.terminal:
            raise self.table.error(f"undefined terminal '{name}'", position)
        if name in self.open_terminals:
            cycle = " -> ".join(self.open_terminals[self.open_terminals.index(name):] + [name])
            raise self.table.error(f"terminal '{name}' refers to itself ({cycle}); terminals are regular, "
                                   "write a rule (lowercase name) for a recursive structure", definition.position)
        self.open_terminals.append(name)
        node = self.terminal_expression(definition.body)
        self.open_terminals.pop()
        if node == ir.NOTHING and name not in self.tree.declared:
            raise self.table.error(f"terminal '{name}' matches nothing", definition.position)
        self.terminals[name] = node
        return node

    def lazy_body(self, definition: st.Definition) -> ir.Node:
        """A `[lazy]` rule as one lexeme (no ignored text inside) that ends as soon as its body can: the strings of
        the body with no proper prefix in the body, i.e. its DFA with no move out of an accepting state."""
        self.lazy_rule = definition.name
        body = self.terminal_expression(definition.body)
        self.lazy_rule = None
        automaton = build_automaton(body)
        table = np.array(automaton.transitions)
        table[automaton.accepting] = -1
        return ir.Embedded(table, np.array(automaton.accepting))

    def terminal_expression(self, expr: st.Expression) -> ir.Node:
        """The bytes of an expression inside a terminal (or `%ignore`): no rules, no ignored text."""
        if isinstance(expr, st.Reference):
            if not is_terminal_name(expr.name) and expr.name not in self.tree.declared:
                where = f"the lazy rule '{self.lazy_rule}'" if self.lazy_rule else "a terminal"
                raise self.table.error(f"'{expr.name}' is a rule; {where} may only use terminals, strings and "
                                       "regexes", expr.position)
            return self.terminal(expr.name, expr.position)
        if isinstance(expr, (st.Sequence, st.Choice, st.Repetition)):
            return self.combine(expr, self.terminal_expression)
        if isinstance(expr, (st.JsonSchema, st.NestedGrammar)):
            raise self.table.error("%json and %lark may only stand in rules", expr.position)
        if isinstance(expr, st.SpecialToken):
            where = f"the lazy rule '{self.lazy_rule}'" if self.lazy_rule else "a terminal"
            raise self.table.error(f"a special token cannot stand inside {where} (it is one token of the tokenizer, "
                                   "not text); use it in a rule", expr.position)
        return self.leaf(expr)

    def rule_expression(self, expr: st.Expression) -> ir.Node:
        """The IR of an expression in a rule: rule uses as symbols, each terminal followed by ignored text."""
        if isinstance(expr, st.Reference):
            if is_terminal_name(expr.name) or expr.name in self.tree.declared:
                return ir.seq(self.terminal(expr.name, expr.position), self.trailing)
            index = self.table.index.get(self.prefix + expr.name)
            if index is None:
                raise self.table.error(f"undefined rule '{expr.name}'", expr.position)
            return rule_symbol(index)
        if isinstance(expr, (st.Sequence, st.Choice, st.Repetition)):
            return self.combine(expr, self.rule_expression)
        if isinstance(expr, st.JsonSchema):
            return ir.seq(self.json_value(expr), self.trailing)
        if isinstance(expr, st.SpecialToken):
            return ir.seq(self.table.special_token(expr), self.trailing)
        if isinstance(expr, st.NestedGrammar):
            self.nested += 1
            inner = GrammarLowering(expr.grammar, self.table,
                                    f"{self.prefix}%lark@{expr.position[0]}:{expr.position[1]}/")
            return ir.seq(inner.leading, rule_symbol(inner.start))
        return ir.seq(self.leaf(expr), self.trailing)

    def combine(self, expr: st.Sequence | st.Choice | st.Repetition, lower: object) -> ir.Node:
        assert callable(lower)
        if isinstance(expr, st.Sequence):
            return ir.seq(*(lower(item) for item in expr.items))
        if isinstance(expr, st.Choice):
            return ir.alt(*(lower(item) for item in expr.items))
        return ir.repeat(lower(expr.item), expr.low, expr.high)

    def leaf(self, expr: st.Expression) -> ir.Node:
        """The bytes of a string, regex or class."""
        if isinstance(expr, st.Literal):
            if not expr.ignore_case:
                return ir.literal(expr.text)
            return ir.seq(*(ir.codepoints(fold_ranges([(ord(c), ord(c))], re.escape(c))) for c in expr.text))
        if isinstance(expr, st.Pattern):
            try:
                return parse_regex(expr.pattern, ignore_case="i" in expr.flags, dot_all="s" in expr.flags)
            except RegexError as error:
                reason = str(error).split("\n")[0]
                raise self.table.error(f"in /{expr.pattern}/: {reason}", (expr.position[0],
                                       expr.position[1] + 1 + error.position)) from None
        if isinstance(expr, st.CharClass):
            return ir.codepoints(expr.ranges, expr.negate)
        raise AssertionError(f"not a leaf: {expr!r}")

    def json_value(self, expr: st.JsonSchema) -> ir.Node:
        """The JSON texts valid against an inline schema; one whose `$ref`s form a cycle is its pushdown embedded
        (`pushdown.embedding`), so the grammar then compiles to a pushdown."""
        from stdsl.compiler.json_schema.recursive import compile_recursive_schema, is_recursive_schema
        from stdsl.compiler.pushdown.embedding import grammar_leaf

        slot = self.table.json_slot(expr.schema) if self.table.json_slot is not None else None
        if slot is not None:
            return slot
        if not isinstance(expr.schema, (dict, bool)):
            raise self.table.error("the schema after %json must be a JSON object or boolean", expr.position)
        try:
            if isinstance(expr.schema, dict) and is_recursive_schema(expr.schema):
                label = f"the %json schema at {self.table.source}:{expr.position[0]}:{expr.position[1]}"
                return grammar_leaf(compile_recursive_schema(expr.schema, whitespace=JSON_WHITESPACE), label)
            node = _json_values.get((), partial(schema_to_ir, expr.schema, whitespace=JSON_WHITESPACE),
                                    (json.dumps(expr.schema, ensure_ascii=False, separators=(",", ":")),))
        except (StateBudgetError, CompileTimeError):
            raise
        except CompileError as error:
            raise self.table.error(f"in the %json schema: {error}", expr.position) from None
        if node == ir.NOTHING:
            raise self.table.error("the %json schema admits no value", expr.position)
        self.table.plain += [node, *node.items] if isinstance(node, ir.Seq) else [node]
        return node

