"""The grammar syntax tree both dialects parse to: expressions over rules and terminals, each with its position.

Lark and GBNF / EBNF read into the same tree; `lowering` turns it into bytes. A position is the
1-based (line, column) of the construct in its source text, so every later error can name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Position = tuple[int, int]


@dataclass(frozen=True)
class Literal:
    """A string, matched exactly (or, with `ignore_case`, as Python's `re.IGNORECASE` reads it)."""

    text: str
    ignore_case: bool
    position: Position


@dataclass(frozen=True)
class Pattern:
    """A Python `re` pattern matched whole, with the Lark flags it was written with (`i`, `s`)."""

    pattern: str
    flags: str
    position: Position


@dataclass(frozen=True)
class CharClass:
    """One code point from inclusive ranges (negated: any code point outside them)."""

    ranges: tuple[tuple[int, int], ...]
    negate: bool
    position: Position


@dataclass(frozen=True)
class Reference:
    """A use of a rule or terminal by name."""

    name: str
    position: Position


@dataclass(frozen=True)
class SpecialToken:
    """`<name>` (a special token by its text, such as `<|python_tag|>`) or `<[ids]>` (by token id: `ranges` of
    inclusive id ranges): exactly one token of the tokenizer, never text that spells the same characters."""

    name: str | None
    ranges: tuple[tuple[int, int], ...]
    position: Position


@dataclass(frozen=True)
class Sequence:
    """Concatenation (no items: the empty string)."""

    items: tuple[Expression, ...]
    position: Position


@dataclass(frozen=True)
class Choice:
    """Alternation."""

    items: tuple[Expression, ...]
    position: Position


@dataclass(frozen=True)
class Repetition:
    """`item` between `low` and `high` times (`high` None: unbounded)."""

    item: Expression
    low: int
    high: int | None
    position: Position


@dataclass(frozen=True)
class JsonSchema:
    """`%json { schema }`: any JSON text valid against the schema."""

    schema: object
    position: Position


@dataclass(frozen=True)
class NestedGrammar:
    """`%lark { ... }`: a grammar of its own (rules, terminals, `%ignore`) used as one expression."""

    grammar: GrammarTree
    position: Position


Expression = (Literal | Pattern | CharClass | Reference | SpecialToken | Sequence | Choice | Repetition | JsonSchema
              | NestedGrammar)


@dataclass(frozen=True)
class Definition:
    """A rule (or, with `terminal`, a Lark terminal) and where its name stands; a `lazy` rule (llguidance's
    `[lazy]`) matches only the strings of its body that no shorter string of its body is a prefix of."""

    name: str
    body: Expression
    position: Position
    terminal: bool = False
    lazy: bool = False


@dataclass
class GrammarTree:
    """A parsed grammar: its definitions by name, its `%ignore` expressions and its options.

    `declared` are `%declare`d terminals (no definition: they match nothing here), `options` the merged
    `%llguidance` / `%grammar_options` objects, `start` the start rule's name.
    """

    definitions: dict[str, Definition] = field(default_factory=dict)
    ignore: list[Expression] = field(default_factory=list)
    declared: dict[str, Position] = field(default_factory=dict)
    options: dict[str, object] = field(default_factory=dict)
    start: str = "start"
    start_position: Position = (1, 1)


def empty(position: Position) -> Sequence:
    """The empty string."""
    return Sequence((), position)


def sequence_of(items: list[Expression], position: Position) -> Expression:
    """The concatenation of `items` (the item itself when there is one)."""
    return items[0] if len(items) == 1 else Sequence(tuple(items), position)


def choice_of(items: list[Expression], position: Position) -> Expression:
    """The alternation of `items` (the item itself when there is one)."""
    return items[0] if len(items) == 1 else Choice(tuple(items), position)
