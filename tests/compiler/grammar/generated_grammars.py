"""Small random grammars as trees, rendered three ways, with random derivations and mutations of them.

A `GrammarTree` holds terminals (UPPERCASE), rules (lowercase, `start` first), an optional `%ignore` of a
whitespace terminal and recursion of the usual shapes (self-embedding brackets, direct left recursion, right
recursion). It is rendered as the Lark text a user writes (`lark_text`), as a character-level Lark twin
(`char_level_lark`: every terminal expanded into rules over fixed-length literals and one-character classes,
the ignored whitespace written out after each terminal occurrence) and as GBNF of that twin (`gbnf_text`).
Lark's Earley parser reads the twin without any lexing choice, so it gives the scannerless reading (the union
over all splits into terminals) exactly; the Lark text itself gives what Lark's dynamic lexer accepts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from math import prod

from hypothesis import strategies as st

ATOM_CHARS = "abxyAB01.-_é\"\\"
CLASS_RANGES = (("a", "c"), ("x", "z"), ("0", "9"), ("A", "C"), ("à", "ö"), ("α", "γ"))
BRACKETS = (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"))
OPERATORS = "*/&"
SEPARATORS = ",;"
RESERVED = "".join(a + b for a, b in BRACKETS) + OPERATORS + SEPARATORS
WS_CHARS = " \t\n\r\f"
STRANGER_CHARS = "Zß中!\n "
"""Characters no generated grammar spells (except a space or newline in a literal of a grammar without
%ignore), mixed into random strings and mutations."""


@dataclass(frozen=True)
class Lit:
    """A string literal; `insensitive` is Lark's `"..."i`."""

    text: str
    insensitive: bool = False


@dataclass(frozen=True)
class Cls:
    """One character of `members` (single characters and (low, high) ranges), or of its complement."""

    members: tuple[str | tuple[str, str], ...]
    negated: bool = False


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Rep:
    """`item` repeated low..high times (high None: unbounded); `style` picks the spelling (`?`, `[]`, `*`, `+`, `~`)."""

    item: Expr
    low: int
    high: int | None
    style: str


@dataclass(frozen=True)
class Pattern:
    """A `/regex/` in the Lark text (one terminal), spelled out as rules in the twins."""

    item: Expr


@dataclass(frozen=True)
class Ref:
    """A reference to a rule or terminal of the grammar."""

    name: str


@dataclass(frozen=True)
class Common:
    """`%import common.NAME`: Lark's own terminal, `equivalent` its definition spelled in these trees."""

    name: str
    equivalent: Expr


Expr = Lit | Cls | Seq | Alt | Rep | Pattern | Ref | Common

_DIGIT = Cls((("0", "9"),))
_INT = Rep(_DIGIT, 1, None, "+")
_SIGN = Rep(Alt((Lit("+"), Lit("-"))), 0, 1, "?")
_LETTER = Cls((("a", "z"), ("A", "Z")))
_FLOAT = Alt((
    Seq((_INT, Cls(("e", "E")), _SIGN, _INT)),
    Seq((Alt((Seq((_INT, Lit("."), Rep(_INT, 0, 1, "?"))), Seq((Lit("."), _INT)))),
         Rep(Seq((Cls(("e", "E")), _SIGN, _INT)), 0, 1, "?"))),
))
COMMONS = {
    "DIGIT": _DIGIT,
    "INT": _INT,
    "SIGNED_INT": Seq((_SIGN, _INT)),
    "HEXDIGIT": Cls((("a", "f"), ("A", "F"), ("0", "9"))),
    "LCASE_LETTER": Cls((("a", "z"),)),
    "WORD": Rep(_LETTER, 1, None, "+"),
    "CNAME": Seq((Alt((Lit("_"), _LETTER)), Rep(Alt((Lit("_"), _LETTER, _DIGIT)), 0, None, "*"))),
    "NUMBER": Alt((_FLOAT, _INT)),
    "SIGNED_NUMBER": Seq((_SIGN, Alt((_FLOAT, _INT)))),
}
"""The `common.lark` terminals the generator imports, as `lark/grammars/common.lark` defines them."""

IGNORES = {
    "WS_INLINE": ("%import common.WS_INLINE\n%ignore WS_INLINE", " \t"),
    "WS": ("%import common.WS\n%ignore WS", " \t\n\r\f"),
    "OWN": ("SPACES: /[ \\t]+/\n%ignore SPACES", " \t"),
    "SPACE": ('%ignore " "', " "),
}
"""%ignore spellings: the Lark lines and the characters each makes ignorable."""


@dataclass
class GrammarTree:
    """Terminals and rules (insertion order; `start` first), the %ignore spelling (None: none) and what recurses."""

    terminals: dict[str, Expr] = field(default_factory=dict)
    rules: dict[str, Expr] = field(default_factory=dict)
    ignore: str | None = None
    shapes: tuple[str, ...] = ()

    @property
    def ignored_chars(self) -> str:
        return IGNORES[self.ignore][1] if self.ignore else ""

    def commons(self) -> list[str]:
        """The common terminals the grammar imports, in first-use order."""
        found: list[str] = []
        for body in [*self.terminals.values(), *self.rules.values()]:
            for node in walk(body):
                if isinstance(node, Common) and node.name not in found:
                    found.append(node.name)
        return found


def walk(expr: Expr) -> list[Expr]:
    """expr and every node below it (a reference is not followed)."""
    out = [expr]
    if isinstance(expr, (Seq, Alt)):
        for item in expr.items:
            out += walk(item)
    elif isinstance(expr, (Rep, Pattern)):
        out += walk(expr.item)
    return out


def nullable(expr: Expr, grammar: GrammarTree | None = None) -> bool:
    """Whether expr matches the empty string (references to rules read as not nullable when no grammar is given)."""
    if isinstance(expr, Lit):
        return expr.text == ""
    if isinstance(expr, Seq):
        return all(nullable(i, grammar) for i in expr.items)
    if isinstance(expr, Alt):
        return any(nullable(i, grammar) for i in expr.items)
    if isinstance(expr, Rep):
        return expr.low == 0 or nullable(expr.item, grammar)
    if isinstance(expr, (Pattern, Common)):
        return nullable(expr.item if isinstance(expr, Pattern) else expr.equivalent, grammar)
    if isinstance(expr, Ref) and grammar is not None and expr.name in grammar.terminals:
        return nullable(grammar.terminals[expr.name], grammar)
    return False


# ---------------------------------------------------------------- strategies


@st.composite
def literals(draw: st.DrawFn, spaces: bool) -> Lit:
    alphabet = ATOM_CHARS + (" \n" if spaces else "")
    text = draw(st.text(alphabet=st.sampled_from(alphabet), min_size=1, max_size=3))
    insensitive = any(c.isalpha() for c in text) and draw(st.integers(0, 6)) == 0
    return Lit(text, insensitive)


@st.composite
def classes(draw: st.DrawFn) -> Cls:
    members: list[str | tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            members.append(draw(st.sampled_from(CLASS_RANGES)))
        else:
            members.append(draw(st.sampled_from(ATOM_CHARS)))
    if draw(st.integers(0, 6)) == 0:
        return Cls(tuple(members) + tuple(RESERVED + WS_CHARS), negated=True)
    return Cls(tuple(dict.fromkeys(members)))


def repeat_of(item: Expr, draw: st.DrawFn, in_rule: bool) -> Rep:
    """item under a random quantifier; `[ ]` only at rule level (Lark reads it as an optional there)."""
    styles = ["?", "*", "+", "~", "~range"] + (["[]"] if in_rule else [])
    style = draw(st.sampled_from(styles))
    if style in ("?", "[]"):
        return Rep(item, 0, 1, style)
    if style == "*":
        return Rep(item, 0, None, style)
    if style == "+":
        return Rep(item, 1, None, style)
    if style == "~":
        n = draw(st.integers(1, 3))
        return Rep(item, n, n, "~")
    low = draw(st.integers(0, 2))
    return Rep(item, low, draw(st.integers(max(low, 1), 3)), "~")


@st.composite
def expressions(draw: st.DrawFn, depth: int, refs: tuple[str, ...], in_rule: bool, spaces: bool) -> Expr:
    """A random expression; `refs` are the names it may reference, `in_rule` allows `/regex/` and `[ ]`."""
    kinds = ["lit", "lit", "cls"] + (["ref", "ref"] if refs else [])
    if depth > 0:
        kinds += ["seq", "seq", "alt", "rep", "rep"] + (["pattern"] if in_rule else [])
    if in_rule:
        kinds.append("common")
    kind = draw(st.sampled_from(kinds))
    if kind == "lit":
        return draw(literals(spaces))
    if kind == "cls":
        return draw(classes())
    if kind == "ref":
        return Ref(draw(st.sampled_from(refs)))
    if kind == "common":
        name = draw(st.sampled_from(sorted(COMMONS)))
        return Common(name, COMMONS[name])
    if kind == "pattern":
        return Pattern(non_nullable(draw(expressions(depth - 1, (), False, spaces)), draw))
    if kind in ("seq", "alt"):
        items = tuple(draw(expressions(depth - 1, refs, in_rule, spaces)) for _ in range(draw(st.integers(2, 3))))
        return Seq(items) if kind == "seq" else Alt(items)
    return repeat_of(draw(expressions(depth - 1, refs, in_rule, spaces)), draw, in_rule)


def non_nullable(expr: Expr, draw: st.DrawFn, grammar: GrammarTree | None = None) -> Expr:
    """expr, or a literal followed by it when it matches the empty string (Lark's Earley refuses empty terminals)."""
    if nullable(expr, grammar):
        return Seq((Lit(draw(st.sampled_from("abxy01"))), expr))
    return expr


@st.composite
def recursive_rules(draw: st.DrawFn, grammar: GrammarTree, shape: str, index: int, spaces: bool) -> str:
    """Add one recursive rule family of `shape` to grammar and return the name to reference from start."""
    atom = draw(expressions(1, tuple(grammar.terminals), True, spaces))
    if shape == "nest":
        open_, close = BRACKETS[index % len(BRACKETS)]
        name, sep = f"nest{index}", Lit(SEPARATORS[index % len(SEPARATORS)])
        item = Alt((Ref(name), atom))
        body = draw(st.sampled_from([
            Rep(Seq((item, Rep(Seq((sep, item)), 0, None, "*"))), 0, 1, "[]"),
            Rep(item, 0, None, "*"),
            Rep(Ref(name), 0, 1, "?"),
        ]))
        grammar.rules[name] = Seq((Lit(open_), body, Lit(close)))
        return name
    if shape == "left":
        name, operand = f"left{index}", f"operand{index}"
        operator = Lit(OPERATORS[index % len(OPERATORS)])
        grammar.rules[name] = Alt((Seq((Ref(name), operator, Ref(operand))), Ref(operand)))
        if draw(st.booleans()):
            open_, close = BRACKETS[(index + 1) % len(BRACKETS)]
            grammar.rules[operand] = Alt((Seq((Lit(open_), Ref(name), Lit(close))), non_nullable(atom, draw, grammar)))
        else:
            grammar.rules[operand] = non_nullable(atom, draw, grammar)
        return name
    name = f"right{index}"
    sep = Lit(SEPARATORS[index % len(SEPARATORS)])
    atom = non_nullable(atom, draw, grammar)
    grammar.rules[name] = Alt((Seq((atom, sep, Ref(name))), atom))
    return name


@st.composite
def grammar_trees(draw: st.DrawFn) -> GrammarTree:
    """A random grammar: 0-3 terminals, 0-2 helper rules, 0-2 recursive families, maybe an %ignore."""
    ignore = draw(st.sampled_from([None, None, *IGNORES]))
    spaces = ignore is None
    grammar = GrammarTree(ignore=ignore)
    grammar.rules["start"] = Lit("")
    for i in range(draw(st.integers(0, 3))):
        body = draw(expressions(2, tuple(grammar.terminals), False, spaces))
        grammar.terminals[f"TERM{i}"] = non_nullable(body, draw, grammar)
    shapes = tuple(draw(st.lists(st.sampled_from(["nest", "left", "right"]), max_size=2)))
    grammar.shapes = shapes
    names = [draw(recursive_rules(grammar, shape, i, spaces)) for i, shape in enumerate(shapes)]
    helpers = [f"rule{i}" for i in range(draw(st.integers(0, 2)))]
    for i, name in reversed(list(enumerate(helpers))):
        grammar.rules[name] = draw(expressions(2, tuple(grammar.terminals) + tuple(helpers[i + 1:]), True, spaces))
    refs = tuple(grammar.terminals) + tuple(helpers)
    parts = [draw(expressions(2, refs, True, spaces)) for _ in range(draw(st.integers(0 if names else 1, 2)))]
    parts += [Ref(n) for n in names]
    order = draw(st.permutations(range(len(parts))))
    grammar.rules["start"] = Seq(tuple(parts[i] for i in order)) if len(parts) > 1 else parts[0]
    return grammar


# ---------------------------------------------------------------- rendering


def _lark_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _regex_char(c: str, in_class: bool) -> str:
    specials = "\\]^-[/" if in_class else ".^$*+?{}[]\\|()/"
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c in "\r\f":
        return "\\r" if c == "\r" else "\\f"
    if c == '"':
        return "\\x22"  # Lark drops an escaped backslash before a bare quote (`test_lark_regex_escapes.py`)
    return "\\" + c if c in specials else c


def _regex_class(cls: Cls) -> str:
    body = "".join(
        _regex_char(m, True) if isinstance(m, str) else f"{_regex_char(m[0], True)}-{_regex_char(m[1], True)}"
        for m in cls.members
    )
    return f"[{'^' if cls.negated else ''}{body}]"


def _regex(expr: Expr) -> str:
    """expr (no references) as a Python regex."""
    if isinstance(expr, Lit):
        if expr.insensitive:
            return "(?:" + "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else _regex_char(c, False)
                                   for c in expr.text) + ")"
        return "(?:" + "".join(_regex_char(c, False) for c in expr.text) + ")"
    if isinstance(expr, Cls):
        return _regex_class(expr)
    if isinstance(expr, Seq):
        return "(?:" + "".join(_regex(i) for i in expr.items) + ")"
    if isinstance(expr, Alt):
        return "(?:" + "|".join(_regex(i) for i in expr.items) + ")"
    if isinstance(expr, Rep):
        high = "" if expr.high is None else str(expr.high)
        return f"(?:{_regex(expr.item)}){{{expr.low},{high}}}"
    if isinstance(expr, (Pattern, Common)):
        return _regex(expr.item if isinstance(expr, Pattern) else expr.equivalent)
    raise TypeError(f"no regex for {expr!r}")


def _lark_quantified(inner: str, rep: Rep) -> str:
    if rep.style == "[]":
        return f"[{inner}]"
    if rep.style in ("?", "*", "+"):
        return f"({inner}){rep.style}"
    if rep.low == rep.high:
        return f"({inner}) ~ {rep.low}"
    return f"({inner}) ~ {rep.low}..{rep.high}"


def _lark(expr: Expr, char_level: bool, ws: str | None) -> str:
    """expr in Lark; `char_level` expands terminals and patterns into rules and appends `ws` after each token."""
    token = ""
    if isinstance(expr, Lit):
        token = _lark_string(expr.text) + ("i" if expr.insensitive else "")
    elif isinstance(expr, Cls):
        if not expr.negated and len(expr.members) == 1 and isinstance(expr.members[0], tuple):
            low, high = expr.members[0]
            token = f"{_lark_string(low)}..{_lark_string(high)}"
        else:
            token = f"/{_regex_class(expr)}/"
    elif isinstance(expr, Pattern):
        if not char_level:
            return f"/{_regex(expr.item)}/"
        token = _lark(expr.item, True, None)
    elif isinstance(expr, Common):
        if not char_level:
            return expr.name
        token = _lark(expr.equivalent, True, None)
    elif isinstance(expr, Ref):
        if char_level and expr.name.isupper():
            token = expr.name.lower() + "_t"
        else:
            return expr.name
    elif isinstance(expr, (Seq, Alt)):
        joiner = " " if isinstance(expr, Seq) else " | "
        return "(" + joiner.join(_lark(i, char_level, ws) for i in expr.items) + ")"
    elif isinstance(expr, Rep):
        return _lark_quantified(_lark(expr.item, char_level, ws), expr)
    if char_level and ws:
        return f"({token} {ws}*)"
    return token


def lark_alternatives(expr: Expr, char_level: bool) -> int:
    """How many alternatives Lark's EBNF-to-BNF step writes for expr inside one rule: a sequence multiplies its
    items', `?`/`[ ]` add the empty one, `~ n..m` is each count spelled out; `*`/`+` and references get rules of
    their own. In the char-level twin, common terminals and patterns are spelled inline."""
    if isinstance(expr, (Seq, Alt)):
        counts = [lark_alternatives(i, char_level) for i in expr.items]
        return prod(counts) if isinstance(expr, Seq) else sum(counts)
    if isinstance(expr, Rep):
        inner = lark_alternatives(expr.item, char_level)
        if expr.style in ("*", "+"):
            return 1
        if expr.style in ("?", "[]"):
            return inner + 1
        return sum(inner**k for k in range(expr.low, (expr.high or expr.low) + 1))
    if char_level and isinstance(expr, (Pattern, Common)):
        return lark_alternatives(expr.item if isinstance(expr, Pattern) else expr.equivalent, True)
    return 1


def lark_expansion(grammar: GrammarTree) -> int:
    """The most alternatives Lark writes for one rule of the grammar's Lark text or its char-level twin (where
    terminals are rules too): Lark's
    grammar loader compares them pairwise, so a few thousand take it minutes (a rule of SIGNED_NUMBER ~ 2 spelled
    out char by char is about 27,000)."""
    in_rules = [lark_alternatives(body, char_level) for body in grammar.rules.values() for char_level in (False, True)]
    return max(in_rules + [lark_alternatives(body, True) for body in grammar.terminals.values()])


def lark_text(grammar: GrammarTree) -> str:
    """The grammar as a user writes it in Lark (terminals, /regex/, %import common, %ignore)."""
    lines = [f"{name}: {_lark(body, False, None)}" for name, body in grammar.rules.items()]
    lines += [f"{name}: {_lark(body, False, None)}" for name, body in grammar.terminals.items()]
    lines += [f"%import common.{name}" for name in grammar.commons()]
    if grammar.ignore:
        lines.append(IGNORES[grammar.ignore][0])
    return "\n".join(lines) + "\n"


def char_level_lark(grammar: GrammarTree) -> str:
    """The scannerless twin in Lark: no lexing choice left, ignored whitespace written out after each token."""
    ws = "ignored_ws" if grammar.ignore else None
    lines = [f"{name}: {_lark(body, True, ws)}" for name, body in grammar.rules.items()]
    lines += [f"{name.lower()}_t: {_lark(body, True, None)}" for name, body in grammar.terminals.items()]
    if ws:
        lines.append(f"{ws}: /{_regex_class(Cls(tuple(grammar.ignored_chars)))}/")
    return "\n".join(lines) + "\n"


def _gbnf_char(c: str) -> str:
    if c.isascii() and (c.isalnum() or c in "_.é "):
        return c
    if ord(c) < 0x80:
        return f"\\x{ord(c):02X}"
    return f"\\u{ord(c):04X}" if ord(c) % 2 else c


def _gbnf_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _gbnf_class(cls: Cls) -> str:
    body = "".join(_gbnf_char(m) if isinstance(m, str) else f"{_gbnf_char(m[0])}-{_gbnf_char(m[1])}"
                   for m in cls.members)
    return f"[{'^' if cls.negated else ''}{body}]"


def _gbnf(expr: Expr, ws: str | None) -> str:
    token = ""
    if isinstance(expr, Lit):
        if expr.insensitive:
            token = "(" + " ".join(f"[{_gbnf_char(c.lower())}{_gbnf_char(c.upper())}]" if c.isalpha() else
                                   _gbnf_string(c) for c in expr.text) + ")"
        else:
            token = _gbnf_string(expr.text)
    elif isinstance(expr, Cls):
        token = _gbnf_class(expr)
    elif isinstance(expr, (Pattern, Common)):
        token = _gbnf(expr.item if isinstance(expr, Pattern) else expr.equivalent, None)
    elif isinstance(expr, Ref):
        if not expr.name.isupper():
            return expr.name.replace("start", "root") if expr.name == "start" else expr.name
        token = expr.name.lower() + "-t"
    elif isinstance(expr, (Seq, Alt)):
        joiner = " " if isinstance(expr, Seq) else " | "
        return "(" + joiner.join(_gbnf(i, ws) for i in expr.items) + ")"
    elif isinstance(expr, Rep):
        inner = f"({_gbnf(expr.item, ws)})"
        if expr.style in ("?", "[]", "*", "+"):
            return inner + ("?" if expr.style == "[]" else expr.style)
        if expr.low == expr.high:
            return f"{inner}{{{expr.low}}}"
        return f"{inner}{{{expr.low},{expr.high}}}"
    return f"({token} {ws}*)" if ws else token


def gbnf_text(grammar: GrammarTree) -> str:
    """The scannerless twin in GBNF (`root` for `start`, code-point classes, `{m,n}` repetition)."""
    ws = "ignored-ws" if grammar.ignore else None
    lines = [f"{'root' if name == 'start' else name} ::= {_gbnf(body, ws)}" for name, body in grammar.rules.items()]
    lines += [f"{name.lower()}-t ::= {_gbnf(body, None)}" for name, body in grammar.terminals.items()]
    if ws:
        lines.append(f"{ws} ::= {_gbnf_class(Cls(tuple(grammar.ignored_chars)))}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- strings


class Deriver:
    """Random derivations of a grammar tree, bounded in depth (past it, the shortest way out is taken)."""

    def __init__(self, grammar: GrammarTree, rng: random.Random) -> None:
        self.grammar, self.rng = grammar, rng
        self.height: dict[str, float] = {name: float("inf") for name in [*grammar.rules, *grammar.terminals]}
        changed = True
        while changed:
            changed = False
            for name, body in [*grammar.rules.items(), *grammar.terminals.items()]:
                h = 1 + self._height(body)
                if h < self.height[name]:
                    self.height[name], changed = h, True

    def _height(self, expr: Expr) -> float:
        if isinstance(expr, Ref):
            return self.height[expr.name]
        if isinstance(expr, Seq):
            return max((self._height(i) for i in expr.items), default=0)
        if isinstance(expr, Alt):
            return min(self._height(i) for i in expr.items)
        if isinstance(expr, Rep):
            return self._height(expr.item) if expr.low else 0
        if isinstance(expr, (Pattern, Common)):
            return self._height(expr.item if isinstance(expr, Pattern) else expr.equivalent)
        return 0

    def derive(self, depth: int = 6) -> str:
        return self._derive(self.grammar.rules["start"], depth, in_token=False)

    def _space(self) -> str:
        chars = self.grammar.ignored_chars
        if not chars or self.rng.random() < 0.6:
            return ""
        return "".join(self.rng.choice(chars) for _ in range(self.rng.randint(1, 2)))

    def _derive(self, expr: Expr, depth: int, in_token: bool) -> str:
        rng = self.rng
        if isinstance(expr, Lit):
            text = "".join(rng.choice((c.lower(), c.upper())) for c in expr.text) if expr.insensitive else expr.text
            return text if in_token else text + self._space()
        if isinstance(expr, Cls):
            char = self._class_char(expr)
            return char if in_token else char + self._space()
        if isinstance(expr, (Pattern, Common)):
            inner = self._derive(expr.item if isinstance(expr, Pattern) else expr.equivalent, depth, True)
            return inner if in_token else inner + self._space()
        if isinstance(expr, Ref):
            if expr.name in self.grammar.terminals:
                text = self._derive(self.grammar.terminals[expr.name], depth - 1, True)
                return text if in_token else text + self._space()
            return self._derive(self.grammar.rules[expr.name], depth - 1, in_token)
        if isinstance(expr, Seq):
            return "".join(self._derive(i, depth, in_token) for i in expr.items)
        if isinstance(expr, Alt):
            options = list(expr.items)
            if depth <= 0:
                least = min(self._height(i) for i in options)
                options = [i for i in options if self._height(i) == least]
            return self._derive(rng.choice(options), depth - 1, in_token)
        assert isinstance(expr, Rep)
        high = expr.low + 3 if expr.high is None else expr.high
        count = expr.low if depth <= 0 else rng.randint(expr.low, high)
        return "".join(self._derive(expr.item, depth - 1, in_token) for _ in range(count))

    def _class_char(self, cls: Cls) -> str:
        if cls.negated:
            outside = [c for c in ATOM_CHARS + STRANGER_CHARS + "qé€" if not _in_members(c, cls.members)]
            return self.rng.choice(outside)
        member = self.rng.choice(cls.members)
        if isinstance(member, str):
            return member
        return chr(self.rng.randint(ord(member[0]), ord(member[1])))


def _in_members(c: str, members: tuple[str | tuple[str, str], ...]) -> bool:
    return any(c == m if isinstance(m, str) else m[0] <= c <= m[1] for m in members)


def mutations(text: str, rng: random.Random, alphabet: str, count: int) -> list[str]:
    """`count` edits of text: insert, delete, replace or swap one character, or duplicate a slice."""
    out = []
    for _ in range(count):
        chars = list(text)
        kind = rng.choice(("insert", "delete", "replace", "swap", "duplicate"))
        at = rng.randint(0, max(len(chars) - 1, 0))
        if kind == "insert" or not chars:
            chars.insert(rng.randint(0, len(chars)), rng.choice(alphabet))
        elif kind == "delete":
            del chars[at]
        elif kind == "replace":
            chars[at] = rng.choice(alphabet)
        elif kind == "swap" and len(chars) > 1:
            at = min(at, len(chars) - 2)
            chars[at], chars[at + 1] = chars[at + 1], chars[at]
        else:
            end = rng.randint(at, len(chars))
            chars[at:at] = chars[at:end]
        out.append("".join(chars))
    return out


def alphabet_of(grammar: GrammarTree, text: str) -> str:
    """Characters for random strings and mutations: the grammar's own, the reserved ones, strangers."""
    return "".join(dict.fromkeys(text + RESERVED + STRANGER_CHARS + ATOM_CHARS + grammar.ignored_chars + "ce9+"))


def random_strings(rng: random.Random, alphabet: str, count: int, longest: int = 5) -> list[str]:
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest))) for _ in range(count)]
