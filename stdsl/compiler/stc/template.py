"""Output templates: literal text interleaved with typed holes, compiled to one automaton and read back by position.

Literal text becomes forced chains.  A field whose language is prefix-free (JSON, most enums) ends where
its own automaton first accepts; any other field is bounded by the literal that follows it
(`bounding.py`), so the first occurrence of that literal after a field's start is exactly the
field's end.  Reading a result back therefore needs no second grammar: only the literals.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.ops import is_prefix_free
from stdsl.compiler.stc.bounding import bounded_by
from stdsl.compiler.stc.recursion import MAX_NESTING, is_recursive, json_value_length, nesting_depth
from stdsl.compiler.stc.syntax import FieldDecl, Pos, ProgramError, parse_hole
from stdsl.compiler.stc.types import FieldType, json_text
from stdsl.errors import CompileError


@dataclass
class Literal:
    """Literal text (a Jinja2 template: `{{ name }}` is filled from the program's arguments)."""

    template: str
    pos: Pos


@dataclass
class Hole:
    """A typed field `{name: type}`."""

    decl: FieldDecl
    kind: FieldType


Segment = Literal | Hole


def split_template(text: str, start: Pos) -> list[tuple[str, str, Pos]]:
    """Cut template text into ("literal", text, pos) and ("hole", inside, pos) pieces.

    `{{ ... }}`, `{% ... %}` and `{# ... #}` stay in literal text (Jinja2); `\\{` and `\\}` are
    literal braces; any other `{` opens a hole that ends at its matching `}`.
    """
    pieces: list[tuple[str, str, Pos]] = []
    buf: list[str] = []
    line, col = start.line, start.column
    buf_pos = Pos(start.source, line, col)
    i = 0

    def advance(chunk: str) -> None:
        nonlocal line, col
        for ch in chunk:
            if ch == "\n":
                line, col = line + 1, 1
            else:
                col += 1

    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            buf.append(text[i + 1])
            advance(text[i : i + 2])
            i += 2
            continue
        if ch == "{" and text[i + 1 : i + 2] in ("{", "%", "#"):
            closer = {"{": "}}", "%": "%}", "#": "#}"}[text[i + 1]]
            end = text.find(closer, i + 2)
            if end < 0:
                raise ProgramError(f"unclosed {text[i:i + 2]} (expected {closer})", start.source, line, col)
            chunk = text[i : end + 2]
            buf.append(chunk)
            advance(chunk)
            i = end + 2
            continue
        if ch == "}":
            raise ProgramError("unmatched '}' in the output template (write \\} for a literal brace)",
                               start.source, line, col)
        if ch == "{":
            end = _matching_brace(text, i)
            if end < 0:
                raise ProgramError("unclosed '{' in the output template (write \\{ for a literal brace)",
                                   start.source, line, col)
            if buf:
                pieces.append(("literal", "".join(buf), buf_pos))
                buf = []
            hole_pos = Pos(start.source, line, col + 1)
            pieces.append(("hole", text[i + 1 : end], hole_pos))
            advance(text[i : end + 1])
            i = end + 1
            buf_pos = Pos(start.source, line, col)
            continue
        buf.append(ch)
        advance(ch)
        i += 1
    if buf:
        pieces.append(("literal", "".join(buf), buf_pos))
    return pieces


def _matching_brace(text: str, open_at: int) -> int:
    depth, i, quote = 0, open_at, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"/" and depth > 0 and text[i - 1] in " (,=[|:":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


class Template:
    """A parsed output template: its segments and the field types of its holes."""

    def __init__(self, text: str, start: Pos, resolve: Any) -> None:
        self.segments: list[Segment] = []
        names: dict[str, Pos] = {}
        for kind, body, pos in split_template(text, start):
            if kind == "literal":
                self.segments.append(Literal(body, pos))
                continue
            decl = parse_hole(body, pos.source, pos.line, pos.column)
            if decl.name in names:
                first = names[decl.name]
                raise decl.pos.error(
                    f"field {decl.name} appears twice (first at line {first.line}, column {first.column})")
            names[decl.name] = decl.pos
            kind = resolve(decl.type)
            if nesting_depth(kind) > MAX_NESTING:
                raise decl.pos.error(f"field {decl.name}: its type nests deeper than {MAX_NESTING} levels, as "
                                     "JSON Schema counts them (records, lists and unions inside one another, declared "
                                     "types included)")
            self.segments.append(Hole(decl, kind))
        if not names:
            raise ProgramError("the output template has no {field: type}", start.source, start.line, start.column)

    @property
    def fields(self) -> dict[str, FieldType]:
        """Field name → type, in template order."""
        return {s.decl.name: s.kind for s in self.segments if isinstance(s, Hole)}

    def render_literals(self, args: Mapping[str, Any], render: Any) -> list[str | Hole]:
        """The segments with literal templates filled from `args` (holes left as they are).

        Literals that render to nothing are dropped and neighbours merged, so two fields that end up
        adjacent get the adjacency check.
        """
        parts: list[str | Hole] = []
        for segment in self.segments:
            part = render(segment.template, args, segment.pos) if isinstance(segment, Literal) else segment
            if isinstance(part, str) and parts and isinstance(parts[-1], str):
                parts[-1] += part
            elif part != "":
                parts.append(part)
        return parts

    def to_ir(self, parts: list[str | Hole], hole_ir: Callable[[FieldType], ir.Node | None] | None = None) -> ir.Node:
        """One IR for the whole output; raises `ProgramError` where a field's end would be ambiguous.

        `hole_ir` gives the IR of a field whose type is recursive (calls of the pushdown engine).
        """
        nodes: list[ir.Node] = []
        for index, part in enumerate(parts):
            if isinstance(part, str):
                nodes.append(ir.literal(part))
                continue
            special = hole_ir(part.kind) if hole_ir is not None else None
            if special is not None:
                nodes.append(special)
                continue
            after = parts[index + 1] if index + 1 < len(parts) else None
            what = f"field {part.decl.name}"
            try:
                if isinstance(after, Hole) and not _ends_by_itself(part):
                    raise CompileError(
                        f"{what} is followed directly by field {after.decl.name} and could continue, so its "
                        "end would be ambiguous; put literal text between them"
                    )
                if _ends_by_itself(part):
                    nodes.append(part.kind.text_ir())
                else:
                    literal = after.encode("utf-8") if isinstance(after, str) else b""
                    nodes.append(bounded_by(part.kind, literal, what))
            except ProgramError:
                raise
            except CompileError as exc:
                raise part.decl.pos.error(str(exc)) from None
        return ir.seq(*nodes)

    @staticmethod
    def read(parts: list[str | Hole], text: str) -> dict[str, Any]:
        """Field values of an accepted output, located by the literals around them."""
        values: dict[str, Any] = {}
        pos = 0
        for index, part in enumerate(parts):
            if isinstance(part, str):
                if not text.startswith(part, pos):
                    raise ValueError(f"output does not contain the literal {part!r} at offset {pos}")
                pos += len(part)
                continue
            after = parts[index + 1] if index + 1 < len(parts) else None
            if after is not None and (isinstance(after, Hole) or _ends_by_itself(part)):
                end = pos + _first_accept(part.kind, text[pos:])
            elif after:
                end = text.find(after, pos)
            else:
                end = len(text)
            if end < 0:
                raise ValueError(f"field {part.decl.name} is not followed by {after!r}")
            values[part.decl.name] = _read_hole(part.kind, text[pos:end])
            pos = end
        return values

    @staticmethod
    def render(parts: list[str | Hole], values: Mapping[str, Any]) -> str:
        """The output text for given field values (the inverse of `read`)."""
        return "".join(p if isinstance(p, str) else _render_hole(p.kind, values[p.decl.name]) for p in parts)


def _read_hole(kind: FieldType, text: str) -> Any:
    """A field's value: a recursive field is written as the JSON of its type (the pushdown's language)."""
    if is_recursive(kind):
        return kind.from_json(json.loads(text))
    return kind.read(text)


def _render_hole(kind: FieldType, value: Any) -> str:
    """A field's text (the inverse of `_read_hole`)."""
    return json_text(kind, value) if is_recursive(kind) else kind.render(value)


def _ends_by_itself(hole: Hole) -> bool:
    """Whether a field's value ends where its own automaton first accepts (a prefix-free language, e.g. JSON)."""
    if is_recursive(hole.kind):
        return True
    return not hole.kind.free_text and is_prefix_free(hole.kind.automaton)


def _first_accept(kind: FieldType, rest: str) -> int:
    """Characters of `rest` read until a prefix-free field's automaton accepts (one JSON value if recursive)."""
    if is_recursive(kind):
        return json_value_length(rest)
    automaton = kind.automaton
    state = automaton.start
    if automaton.accepting[state]:
        return 0
    data = rest.encode("utf-8")
    for i, byte in enumerate(data):
        state = automaton.next_state(state, byte)
        if state < 0:
            break
        if automaton.accepting[state]:
            return len(data[: i + 1].decode("utf-8"))
    raise ValueError("field value not found")
