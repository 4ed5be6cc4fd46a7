"""Recursive declared types of the program language, compiled to the pushdown engine (issue 5).

A declared type that refers to itself (directly or through others) resolves to a `TypeRef`
at the inner reference; every hole whose type reaches one becomes, in the output template, the
JSON lowering of its schema with each `TypeRef` as a call of that declared type's nonterminal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.json_schema.recursive import recursive_schema_to_ir
from stdsl.compiler.pushdown.grammar import Definition, call_symbol
from stdsl.compiler.stc.types import FieldType, JsonType, ListType, RecordType, UnionType, finite_numbers

DEFS = "#/$defs/"


@dataclass(eq=False)
class TypeRef(JsonType):
    """A reference back to a declared type being defined (`inner` is filled once that type is resolved)."""

    name: str = ""

    def schema(self) -> dict[str, Any]:
        return {"$ref": DEFS + self.name}

    def from_json(self, value: Any) -> Any:
        return self.inner.from_json(value)


def is_recursive(kind: FieldType, seen: set[int] | None = None) -> bool:
    """Whether a field type reaches a `TypeRef` (its values nest without a fixed bound)."""
    seen = set() if seen is None else seen
    if id(kind) in seen:
        return False
    seen.add(id(kind))
    if isinstance(kind, TypeRef):
        return True
    if isinstance(kind, RecordType):
        return any(is_recursive(t, seen) for t, _ in kind.fields.values())
    if isinstance(kind, UnionType):
        return any(is_recursive(o, seen) for o in kind.options)
    if isinstance(kind, (ListType, JsonType)):
        return is_recursive(kind.item if isinstance(kind, ListType) else kind.inner, seen)
    return False


class RecursiveHoles:
    """The nonterminals of a program's recursive declared types, and the call-carrying IR of each recursive hole."""

    def __init__(self, declared: Mapping[str, FieldType]) -> None:
        self.names = sorted(declared)
        self.defs = {name: declared[name].schema() for name in self.names}
        self.calls = {DEFS + name: call_symbol(i) for i, name in enumerate(self.names)}
        _, bodies = recursive_schema_to_ir({"$defs": self.defs}, self.calls, zero_fractions=False)
        self.bodies = {name: finite_numbers(body) for name, body in bodies.items()}

    def hole_ir(self, kind: FieldType) -> ir.Node | None:
        """The IR of a recursive hole (None for an ordinary one)."""
        if not is_recursive(kind):
            return None
        main, _ = recursive_schema_to_ir({**kind.schema(), "$defs": self.defs}, self.calls,
                                         zero_fractions=False)
        return finite_numbers(main)

    def definitions(self) -> list[Definition]:
        """The nonterminals, in call-symbol order."""
        return [Definition(name, self.bodies[DEFS + name]) for name in self.names]


def json_value_length(text: str) -> int:
    """Characters of the one JSON value `text` starts with (how a recursive field's end is found)."""
    _, end = json.JSONDecoder().raw_decode(text)
    return end
