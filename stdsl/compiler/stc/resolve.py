"""Resolve type expressions as written into field types, with a located error for every mistake."""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from typing import Any

from stdsl.compiler.graph_components import strongly_connected
from stdsl.compiler.source_files import FileAccess
from stdsl.compiler.stc.recursion import TypeRef
from stdsl.compiler.stc.syntax import Pos, Range, RegexArg, TypeExpr
from stdsl.compiler.stc.types import (
    BoolType,
    EnumType,
    FieldType,
    FormatType,
    IntType,
    JsonType,
    ListType,
    NumberType,
    PydanticType,
    RecordType,
    TextType,
    UnionType,
    enum_texts,
)

BUILTIN_TYPES = ("str", "line", "text", "int", "float", "number", "bool", "date", "time", "datetime", "list", "json",
                 "grammar")
_FORMATS = {"date": "date", "time": "time", "datetime": "date-time"}


def _named(expr: TypeExpr) -> set[str]:
    """The names of types `expr` refers to, found without recursion."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        current = stack.pop()
        if current.kind == "named":
            found.add(current.name)
        stack.extend(item for item in [current.inner, *current.args] if isinstance(item, TypeExpr))
        stack.extend(decl.type for decl in current.fields)
        stack.extend(current.options)
    return found


def _is_pydantic_class(obj: Any) -> bool:
    return isinstance(obj, type) and hasattr(obj, "model_json_schema") and hasattr(obj, "model_validate")


class TypeResolver:
    """Resolves names against the program's `type` declarations, then the Python scope, then builtins."""

    def __init__(self, declared: Mapping[str, tuple[TypeExpr, Pos]], scope: Mapping[str, Any] | None = None,
                 files: FileAccess | None = None) -> None:
        self.declared = declared
        self.files = files or FileAccess.local()
        self.scope = dict(scope or {})
        self.done: dict[str, FieldType] = {}
        self.active: list[str] = []
        self.refs: dict[str, list[tuple[TypeRef, Pos, list[str]]]] = {}
        self.recursive: dict[str, FieldType] = {}

    def resolve(self, expr: TypeExpr) -> FieldType:
        """The field type of `expr`; raises `ProgramError` at the expression's position."""
        if expr.kind == "enum":
            return EnumType((expr.value,))
        if expr.kind == "union":
            options = [self.resolve(o) for o in expr.options]
            if all(isinstance(o, EnumType) and o.enum_class is None for o in options):
                values: list[str] = []
                for o in options:
                    assert isinstance(o, EnumType)
                    for v in o.values:
                        if v in values:
                            raise expr.pos.error(f'the value "{v}" appears twice in this enum')
                        values.append(v)
                return EnumType(tuple(values))
            return UnionType(tuple(options))
        if expr.kind == "record":
            return self.record("Record", expr)
        return self.named(expr)

    def record(self, name: str, expr: TypeExpr) -> RecordType:
        """A record type from `{field: type, ...}`."""
        fields: dict[str, tuple[FieldType, bool]] = {}
        for decl in expr.fields:
            if decl.name in fields:
                raise decl.pos.error(f"field {decl.name} appears twice in record {name}")
            fields[decl.name] = (self.resolve(decl.type), decl.optional)
        if not fields:
            raise expr.pos.error(f"record {name} has no fields")
        return RecordType(name, fields)

    def resolve_declared(self) -> None:
        """Resolve every declared type, the types it names first, so that a long chain of declarations
        (`type T0 = {a: T1}`, `type T1 = ...`) never nests Python calls; only a cycle is walked in one go, and one
        too long for the stack is a located error at its first type."""
        names = list(self.declared)
        number = {name: i for i, name in enumerate(names)}
        graph = [{number[n] for n in _named(self.declared[name][0]) if n in number} for name in names]
        for component in strongly_connected(graph):
            first, pos = names[component[0]], self.declared[names[component[0]]][1]
            try:
                for member in component:
                    self.declared_type(names[member], self.declared[names[member]][0].pos)
            except RecursionError:
                raise pos.error(f"type {first} is one of {len(component)} types that refer to one another, which "
                                "nest too deeply to compile; shorten the cycle") from None

    def declared_type(self, name: str, pos: Pos) -> FieldType:
        """A type declared with `type NAME = ...`; a reference back into it is a `TypeRef` (the pushdown engine).

        A cycle with no record or list on it (e.g. `type T = T | int`) has no finite values and is refused.
        """
        if name in self.done:
            return self.done[name]
        if name in self.active:
            ref = TypeRef(name=name)
            self.refs.setdefault(name, []).append((ref, pos, list(self.active[self.active.index(name):])))
            return ref
        self.active.append(name)
        expr, _ = self.declared[name]
        kind = self.record(name, expr) if expr.kind == "record" else self.resolve(expr)
        self.active.pop()
        for ref, ref_pos, cycle in self.refs.get(name, []):
            if not isinstance(kind, RecordType) and not (isinstance(kind, ListType) and kind.item is ref):
                path = " -> ".join(cycle + [name])
                raise ref_pos.error(f"type {name} refers to itself ({path}) outside a record or list, "
                                    "so it has no finite value")
            ref.inner = kind
            self.recursive[name] = kind
        self.done[name] = kind
        return kind

    def named(self, expr: TypeExpr) -> FieldType:
        name = expr.name
        if name in self.declared:
            self._no_args(expr, f"type {name}")
            return self.declared_type(name, expr.pos)
        if name in self.scope:
            obj = self.scope[name]
            self._no_args(expr, name)
            if _is_pydantic_class(obj):
                return PydanticType(obj)
            if isinstance(obj, type) and issubclass(obj, enum.Enum):
                if not list(obj):
                    raise expr.pos.error(f"enum {name} has no members")
                try:
                    texts, values = enum_texts(obj)
                except ValueError as exc:
                    raise expr.pos.error(f"enum {name}: {exc}") from None
                return EnumType(texts, obj, values)
            raise expr.pos.error(f"{name} is a {type(obj).__name__}, not a Pydantic class or an Enum")
        if name not in BUILTIN_TYPES:
            known = list(self.declared) + list(self.scope) + list(BUILTIN_TYPES)
            hint = difflib.get_close_matches(name, known, n=1)
            suggestion = f"; did you mean {hint[0]}?" if hint else f"; known types: {', '.join(known)}"
            raise expr.pos.error(f"unknown type {name}{suggestion}")
        return self.builtin(expr)

    def builtin(self, expr: TypeExpr) -> FieldType:
        name = expr.name
        if name == "grammar":
            return self.grammar(expr)
        ranges = [a for a in expr.args if isinstance(a, Range)]
        regexes = [a for a in expr.args if isinstance(a, RegexArg)]
        types = [a for a in expr.args if isinstance(a, TypeExpr)]
        if len(ranges) > 1:
            raise expr.pos.error(f"{name} takes one range")
        bounds = ranges[0] if ranges else Range(None, None)
        allowed_keywords = {"list": {"sep"}}.get(name, set())
        for key in expr.keywords:
            if key not in allowed_keywords:
                raise expr.pos.error(f"{name} has no argument {key}=")
        if expr.inner is not None and name != "list":
            raise expr.pos.error(f"{name} takes no [type]")
        if types and name != "json":
            raise expr.pos.error(f"{name} takes no type argument")
        if regexes and name not in ("str", "line", "text"):
            raise expr.pos.error(f"{name} takes no /regex/")
        if name in ("str", "line", "text"):
            lo, hi = self._int_bounds(expr, bounds, "length", minimum=0)
            if regexes and ranges:
                raise expr.pos.error(f"{name} takes a length range or a /regex/, not both")
            pattern = regexes[0].pattern if regexes else None
            if pattern is not None:
                from stdsl.compiler.regex.parser import parse_regex

                try:
                    parse_regex(pattern)
                except Exception as exc:  # a RegexError carries its own position
                    raise expr.pos.error(f"bad regex /{pattern}/: {exc}") from None
            return TextType(lo or 0, hi, multiline=name == "text", pattern=pattern)
        if name == "int":
            lo, hi = self._int_bounds(expr, bounds, "value", minimum=None)
            return IntType(lo, hi)
        if name in ("float", "number"):
            if bounds.lo is not None and bounds.hi is not None and bounds.lo > bounds.hi:
                raise expr.pos.error(f"{name}({bounds.lo}..{bounds.hi}) is unsatisfiable: the range is empty")
            return NumberType(bounds.lo, bounds.hi)
        if ranges:
            if name != "list":
                raise expr.pos.error(f"{name} takes no range")
        if name == "bool":
            return BoolType()
        if name in _FORMATS:
            return FormatType(_FORMATS[name])
        if name == "json":
            if len(types) != 1:
                raise expr.pos.error("json takes one type: json(T)")
            return JsonType(self.resolve(types[0]))
        if expr.inner is None:
            raise expr.pos.error("list needs an item type: list[T]")
        lo, hi = self._int_bounds(expr, bounds, "item count", minimum=0)
        sep = expr.keywords.get("sep", ", ")
        if not isinstance(sep, str) or not sep:
            raise expr.pos.error("list sep= must be a non-empty string")
        return ListType(self.resolve(expr.inner), lo or 0, hi, sep)

    def grammar(self, expr: TypeExpr) -> FieldType:
        """`grammar("FILE", syntax="auto", start=RULE)`: text in the language of a grammar file."""
        from stdsl.compiler.grammar import SYNTAXES
        from stdsl.compiler.stc.grammar_field import grammar_field

        paths = [a for a in expr.args if isinstance(a, TypeExpr) and a.kind == "enum"]
        if len(paths) != 1 or len(expr.args) != 1 or expr.inner is not None:
            raise expr.pos.error('grammar takes one file name: grammar("file.lark")')
        unknown = set(expr.keywords) - {"syntax", "start"}
        if unknown:
            raise expr.pos.error(f"grammar has no argument {sorted(unknown)[0]}=; it takes syntax= and start=")
        syntax = expr.keywords.get("syntax", "auto")
        start = expr.keywords.get("start")
        if syntax not in SYNTAXES:
            raise expr.pos.error(f"grammar syntax= must be one of {', '.join(SYNTAXES)}, got {syntax!r}")
        if start is not None and not isinstance(start, str):
            raise expr.pos.error(f"grammar start= must be a rule name, got {start!r}")
        return grammar_field(paths[0].value, syntax, start, expr.pos, self.files)

    @staticmethod
    def _int_bounds(expr: TypeExpr, bounds: Range, what: str, minimum: int | None) -> tuple[int | None, int | None]:
        for value in (bounds.lo, bounds.hi):
            if value is not None and not isinstance(value, int):
                raise expr.pos.error(f"{expr.name} {what} bounds must be integers, got {value}")
            if value is not None and minimum is not None and value < minimum:
                raise expr.pos.error(f"{expr.name} {what} cannot be negative ({value})")
        if bounds.lo is not None and bounds.hi is not None and bounds.lo > bounds.hi:
            raise expr.pos.error(
                f"{expr.name}({bounds.lo}..{bounds.hi}) is unsatisfiable: the {what} range is empty"
            )
        return bounds.lo, bounds.hi  # type: ignore[return-value]

    @staticmethod
    def _no_args(expr: TypeExpr, what: str) -> None:
        if expr.called or expr.inner is not None:
            raise expr.pos.error(f"{what} takes no arguments")
