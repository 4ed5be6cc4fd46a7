"""Parse `.stc` program text (grammar in `stc.lark`) into a small syntax tree with source positions.

Lark's errors are turned into `ProgramError`s that name the file, line, column and what
was expected; nothing downstream sees a Lark object.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from stdsl.errors import CompileError

GRAMMAR_PATH = Path(__file__).with_name("stc.lark")
MAX_DIGITS = 30
"""The most digits a number in a program may have (bounds and defaults fit far below it)."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_TERMINAL_NAMES = {
    "NAME": "a name",
    "STRING": "a quoted string",
    "BLOCK": 'a """block"""',
    "REGEX": "a /regex/",
    "SIGNED_NUMBER": "a number",
    "ROLE": "system, user or assistant",
    "EXPR": "an expression",
    "$END": "end of input",
}
"""What users read for the grammar's pattern terminals; a literal terminal reads as its text, quoted (`_shown`)."""


class ProgramError(CompileError):
    """An error in a program, located by file, line and column (1-based)."""

    def __init__(self, message: str, source: str = "<program>", line: int = 0, column: int = 0) -> None:
        self.source, self.line, self.column, self.message = source, line, column, message
        where = f"{source}:{line}:{column}" if line else source
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Pos:
    """A source position (1-based line and column) inside a named source."""

    source: str
    line: int
    column: int

    def error(self, message: str) -> ProgramError:
        """A `ProgramError` at this position."""
        return ProgramError(message, self.source, self.line, self.column)


@dataclass
class TypeExpr:
    """A type as written: a named type with an optional `[inner]` and `(args)`, an enum value, a record or a union."""

    kind: str  # "named" | "enum" | "record" | "union"
    pos: Pos
    name: str = ""
    inner: TypeExpr | None = None
    args: list[Any] = field(default_factory=list)
    keywords: dict[str, Any] = field(default_factory=dict)
    fields: list[FieldDecl] = field(default_factory=list)
    options: list[TypeExpr] = field(default_factory=list)
    value: str = ""
    called: bool = False


@dataclass
class FieldDecl:
    """`name: type` inside a record (`name?: type` when optional) or a template hole."""

    name: str
    type: TypeExpr
    pos: Pos
    optional: bool = False


@dataclass(frozen=True)
class Range:
    """`lo..hi` with either end open (None)."""

    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class RegexArg:
    """`/pattern/` as a type argument."""

    pattern: str


@dataclass
class Message:
    """A prompt message: role and Jinja2 template text."""

    role: str
    template: str
    pos: Pos


@dataclass
class Expr:
    """A Jinja2 expression as written in a step (`if`, `for`, `call`, `use`, `return`), and where it begins."""

    text: str
    pos: Pos


@dataclass
class OutputStep:
    """A generation step: an output template, named (`output plan \"\"\"...\"\"\"`) or not."""

    name: str | None
    template: str
    pos: Pos
    block_pos: Pos


@dataclass
class IfStep:
    """`if` / `elif` / `else`: (condition, steps) in order; the `else` branch has no condition."""

    branches: list[tuple[Expr | None, list[Step]]]
    pos: Pos


@dataclass
class ForStep:
    """`for name in expr { ... }`: the body once per item, each iteration a fork of the state before the loop."""

    var: str
    iterable: Expr
    body: list[Step]
    pos: Pos


@dataclass
class RepeatStep:
    """`repeat n { ... }`: the body up to n times in sequence, each iteration reading the ones before; `break`
    ends it."""

    count: int
    body: list[Step]
    pos: Pos


@dataclass
class CallStep:
    """`call name = function(args)`: a registered Python function called between steps."""

    name: str
    call: Expr
    pos: Pos


@dataclass
class UseStep:
    """`use name = "other.stc" with a=expr, ...`: another program's steps run here, its result the value `name`."""

    name: str
    path: str
    arguments: Expr | None
    pos: Pos


@dataclass
class ReturnStep:
    """`return expr`: the program's result is this value (else the record of every step)."""

    value: Expr
    pos: Pos


@dataclass
class BreakStep:
    """`break`: leave the innermost `repeat`."""

    pos: Pos


Step = Message | OutputStep | IfStep | ForStep | RepeatStep | CallStep | UseStep | ReturnStep | BreakStep


@dataclass
class ProgramSyntax:
    """Everything a `.stc` program declares, in source order.

    A one-step program (messages and exactly one unnamed output, as every program was before steps) keeps
    `messages`, `output` and `output_pos`; a program of several steps has `has_steps` set, its body in `steps`
    and an empty `output`.
    """

    source: str
    types: dict[str, tuple[TypeExpr, Pos]]
    params: dict[str, tuple[str | None, Any, Pos]]
    messages: list[Message]
    output: str
    output_pos: Pos
    steps: list[Step] = field(default_factory=list)
    has_steps: bool = False


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        start=["program", "hole"],
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
    )


@lru_cache(maxsize=1)
def _literals() -> dict[str, str]:
    """Each literal terminal's name (Lark's own, such as `LPAR` or `__ANON_0`) to its text."""
    return {term.name: term.pattern.value for term in _parser().terminals if term.pattern.type == "str"}


def _shown(name: str) -> str:
    """A terminal as users read it: what it matches, never Lark's internal name."""
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    literal = _literals().get(name)
    return repr(literal) if literal is not None else "a token"


def _expected(names: set[str]) -> str:
    shown = sorted({_shown(n) for n in names})
    return ", ".join(shown[:8]) + (" ..." if len(shown) > 8 else "")


def _lark_error(exc: Exception, text: str, source: str, line_offset: int, col_offset: int) -> ProgramError:
    line = getattr(exc, "line", 0) or 0
    column = getattr(exc, "column", 0) or 0
    at_end = isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END")
    if at_end or line <= 0:
        stripped = text.rstrip()
        line = stripped.count("\n") + 1
        column = len(stripped) - stripped.rfind("\n")
    col = column + (col_offset if line == 1 else 0)
    line += line_offset
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        got = "end of input" if tok.type == "$END" else repr(str(tok))
        return ProgramError(f"unexpected {got}; expected {_expected(exc.expected)}", source, line, col)
    if isinstance(exc, UnexpectedCharacters):
        allowed = _expected(set(exc.allowed or ()))
        return ProgramError(f"unexpected character {exc.char!r}; expected {allowed}", source, line, col)
    if isinstance(exc, UnexpectedEOF):
        return ProgramError(f"unexpected end of input; expected {_expected(set(exc.expected))}", source, line, col)
    return ProgramError(str(exc), source, line, col)


def _string(token: Any, pos: Pos) -> str:
    """The value of a quoted string token, read with Python's escapes; a bad escape, a raw NUL or a lone
    surrogate is refused at `pos`."""
    text = str(token)
    if "\0" in text:
        raise pos.error("a string cannot hold a raw NUL character; write \\x00")
    try:
        value = str(ast.literal_eval(text))
    except (SyntaxError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise pos.error(f"bad string {text}: {reason}") from None
    surrogate = _LONE_SURROGATE.search(value)
    if surrogate is not None:
        raise pos.error(f"string {text} holds a lone surrogate U+{ord(surrogate.group()):04X}, which is not text "
                        "(it has no UTF-8 encoding)")
    return value


def _pos(node: Any, source: str, line_offset: int, col_offset: int) -> Pos:
    if isinstance(node, Token):
        line, column = node.line or 0, node.column or 0
    else:
        line, column = node.meta.line, node.meta.column
    return Pos(source, line + line_offset, column + (col_offset if line == 1 else 0))


class _Builder:
    """Turns Lark trees into the syntax dataclasses above."""

    def __init__(self, source: str, line_offset: int = 0, col_offset: int = 0) -> None:
        self.source, self.line_offset, self.col_offset = source, line_offset, col_offset

    def pos(self, node: Any) -> Pos:
        return _pos(node, self.source, self.line_offset, self.col_offset)

    def value(self, node: Any) -> Any:
        if isinstance(node, Tree):
            if node.data == "string_value":
                return _string(node.children[0], self.pos(node.children[0]))
            if node.data == "name_value":
                text = str(node.children[0])
                return {"true": True, "false": False, "none": None}.get(text.lower(), text)
            if node.data == "number":
                return self.number(node)
        raise self.pos(node).error("expected a value")

    def number(self, node: Any) -> float:
        """A numeric literal; more than `MAX_DIGITS` digits is a located error (Python refuses 4,301 and more)."""
        text = str(node.children[0])
        if sum(c.isdigit() for c in text.partition("e")[0].partition("E")[0]) > MAX_DIGITS:
            raise self.pos(node).error(f"a number in a program has at most {MAX_DIGITS} digits")
        value = float(text) if any(c in text for c in ".eE") else int(text)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.pos(node).error(f"the number {text} is not finite")
        return value

    def type_expr(self, node: Any) -> TypeExpr:
        if node.data == "union":
            options = [self.type_expr(child) for child in node.children]
            if len(options) == 1:
                return options[0]
            return TypeExpr("union", self.pos(node), options=options)
        if node.data == "enum_value":
            return TypeExpr("enum", self.pos(node), value=_string(node.children[0], self.pos(node)))
        if node.data == "record":
            fields = [self.field(child) for child in node.children if child is not None]
            return TypeExpr("record", self.pos(node), fields=fields)
        if node.data == "named":
            name_tok, inner, *arglist = node.children
            expr = TypeExpr("named", self.pos(node), name=str(name_tok))
            expr.inner = self.type_expr(inner) if inner is not None else None
            expr.called = bool(arglist)
            for arg in arglist[0].children if arglist else ():
                if arg is None:
                    continue
                if arg.data == "range":
                    lo, hi = arg.children
                    expr.args.append(Range(self.number(lo) if lo else None, self.number(hi) if hi else None))
                elif arg.data == "regex_arg":
                    expr.args.append(RegexArg(str(arg.children[0])[1:-1].replace("\\/", "/")))
                elif arg.data == "keyword_arg":
                    key = str(arg.children[0])
                    if key in expr.keywords:
                        raise self.pos(arg).error(f"argument {key}= given twice")
                    expr.keywords[key] = self.value(arg.children[1])
                elif arg.data == "type_arg":
                    expr.args.append(self.type_expr(arg.children[0]))
                else:
                    expr.args.append(self.value(arg))
            return expr
        raise self.pos(node).error(f"unexpected {node.data}")

    def field(self, node: Any) -> FieldDecl:
        name, optional, type_node = node.children
        return FieldDecl(str(name), self.type_expr(type_node), self.pos(node), optional is not None)

    def expr(self, token: Any) -> Expr:
        return Expr(str(token).rstrip(), self.pos(token))

    def steps(self, nodes: list[Any]) -> list[Step]:
        return [self.step(node) for node in nodes if node is not None]

    def step(self, node: Any) -> Step:
        """One step of a program's body (messages and outputs included)."""
        pos = self.pos(node)
        kind = node.data
        if kind == "message":
            role, block = node.children
            return Message(str(role), _block_text(str(block)), _block_start(block, self.source))
        if kind == "output":
            name, block = node.children
            return OutputStep(str(name) if name is not None else None, _block_text(str(block)), pos,
                              _block_start(block, self.source))
        if kind == "if_step":
            condition, body, *rest = node.children
            branches: list[tuple[Expr | None, list[Step]]] = [(self.expr(condition), self.steps(body.children))]
            for branch in rest:
                if branch is None:
                    continue
                if branch.data == "elif_branch":
                    branches.append((self.expr(branch.children[0]), self.steps(branch.children[1].children)))
                else:
                    branches.append((None, self.steps(branch.children[0].children)))
            return IfStep(branches, pos)
        if kind == "for_step":
            var, iterable, body = node.children
            return ForStep(str(var), self.expr(iterable), self.steps(body.children), pos)
        if kind == "repeat_step":
            count, body = node.children
            times = self.number(count)
            if not isinstance(times, int) or times < 1:
                raise self.pos(count).error(f"repeat needs a whole number of times, at least 1, got {times}")
            return RepeatStep(times, self.steps(body.children), pos)
        if kind == "call_step":
            name, call = node.children
            return CallStep(str(name), self.expr(call), pos)
        if kind == "use_step":
            name, path, arguments = node.children
            return UseStep(str(name), _string(path, self.pos(path)), self.expr(arguments) if arguments else None, pos)
        if kind == "return_step":
            return ReturnStep(self.expr(node.children[0]), pos)
        if kind == "break_step":
            return BreakStep(pos)
        raise pos.error(f"unexpected {kind}")


def check_text(text: str, source: str, line_offset: int = 0, col_offset: int = 0) -> None:
    """Refuse a lone surrogate (a str can hold one, but it is no text: it has no UTF-8 encoding) at its position."""
    found = _LONE_SURROGATE.search(text)
    if found is not None:
        before = text[:found.start()]
        line = before.count("\n") + 1
        column = found.start() - before.rfind("\n") + (col_offset if line == 1 else 0)
        raise ProgramError(f"lone surrogate U+{ord(found.group()):04X} is not text (it has no UTF-8 encoding)",
                           source, line + line_offset, column)


def parse_hole(text: str, source: str, line: int, column: int) -> FieldDecl:
    """Parse the inside of a template hole `{name: type}` located at (line, column) of `source`."""
    check_text(text, source, line - 1, column - 1)
    try:
        tree: Any = _parser().parse(text, start="hole")
    except (UnexpectedToken, UnexpectedCharacters, UnexpectedEOF) as exc:
        raise _lark_error(exc, text, source, line - 1, column - 1) from None
    builder = _Builder(source, line - 1, column - 1)
    name, type_node = tree.children
    try:
        return FieldDecl(str(name), builder.type_expr(type_node), builder.pos(name))
    except RecursionError:
        raise ProgramError("the type nests too deeply to compile (records, lists or parentheses inside one "
                           "another); name inner types with `type` declarations", source, line, column) from None


def parse_type(text: str, source: str = "<type>") -> TypeExpr:
    """Parse a bare type expression such as `list[str](1..3)` (used by the Python front end)."""
    return parse_hole(f"_: {text}", source, 1, -2).type


def parse_program(text: str, source: str = "<program>") -> ProgramSyntax:
    """Parse a whole `.stc` program; every syntax error names source, line, column and what was expected."""
    check_text(text, source)
    try:
        tree: Any = _parser().parse(text, start="program")
    except (UnexpectedToken, UnexpectedCharacters, UnexpectedEOF) as exc:
        raise _lark_error(exc, text, source, 0, 0) from None
    builder = _Builder(source)
    types: dict[str, tuple[TypeExpr, Pos]] = {}
    params: dict[str, tuple[str | None, Any, Pos]] = {}
    steps: list[Step] = []
    for item in tree.children:
        pos = builder.pos(item)
        if item.data == "type_decl":
            name = str(item.children[0])
            if name in types:
                raise pos.error(f"type {name} is declared twice (first at line {types[name][1].line})")
            try:
                types[name] = (builder.type_expr(item.children[1]), pos)
            except RecursionError:
                raise pos.error(f"type {name} nests too deeply to compile (records, lists or parentheses inside one "
                                "another); name inner types with `type` declarations") from None
        elif item.data == "param":
            name_tok, type_tok, default = item.children
            if str(name_tok) in params:
                raise pos.error(f"parameter {name_tok} is declared twice")
            params[str(name_tok)] = (
                str(type_tok) if type_tok is not None else None,
                builder.value(default) if default is not None else None,
                pos,
            )
        else:
            steps.append(builder.step(item))
    outputs = [step for step in steps if isinstance(step, OutputStep)]
    if not outputs and not any(not isinstance(step, Message) for step in steps):
        raise ProgramError('the program has no output """...""" block', source, 1, 1)
    one_step = len(outputs) == 1 and outputs[0].name is None and all(
        isinstance(step, (Message, OutputStep)) for step in steps)
    if one_step:
        messages = [step for step in steps if isinstance(step, Message)]
        return ProgramSyntax(source, types, params, messages, outputs[0].template, outputs[0].block_pos)
    return ProgramSyntax(source, types, params, [], "", Pos(source, 1, 1), steps, has_steps=True)


def _block_start(block: Token, source: str) -> Pos:
    """Where the text of an output or message block begins (after the quotes and a dropped leading newline)."""
    if str(block)[3:4] == "\n":
        return Pos(source, (block.line or 0) + 1, 1)
    return Pos(source, block.line or 0, (block.column or 0) + 3)


def _block_text(block: str) -> str:
    """The text of a prompt `\"\"\"block\"\"\"`, without one leading and one trailing newline."""
    text = block[3:-3]
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text
