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
from stdsl.compiler.json_schema.resolve import MAX_NESTING
from stdsl.compiler.pushdown.grammar import Definition, call_symbol
from stdsl.compiler.stc.types import FieldType, JsonType, ListType, RecordType, UnionType

DEFS = "#/$defs/"


@dataclass(eq=False)
class TypeRef(JsonType):
    """A reference back to a declared type being defined (`inner` is filled once that type is resolved)."""

    name: str = ""

    def schema(self) -> dict[str, Any]:
        return {"$ref": DEFS + self.name}

    def from_json(self, value: Any) -> Any:
        return self.inner.from_json(value)


def is_recursive(kind: FieldType) -> bool:
    """Whether a field type reaches a `TypeRef` (its values nest without a fixed bound); walked without recursion,
    so a chain of hundreds of declared types is answered."""
    seen: set[int] = set()
    stack = [kind]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, TypeRef):
            return True
        if isinstance(current, RecordType):
            stack.extend(t for t, _ in current.fields.values())
        elif isinstance(current, UnionType):
            stack.extend(current.options)
        elif isinstance(current, (ListType, JsonType)):
            stack.append(current.item if isinstance(current, ListType) else current.inner)
    return False


def nesting_depth(kind: FieldType) -> int:
    """How many records, unions and lists a field type holds inside one another (a `TypeRef` ends a path), walked
    without recursion: a type past `MAX_NESTING` is refused before anything recurses over it."""
    deepest = 0
    stack = [(kind, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(current, RecordType):
            stack.extend((t, depth + 1) for t, _ in current.fields.values())
        elif isinstance(current, UnionType):
            stack.extend((o, depth + 1) for o in current.options)
        elif isinstance(current, ListType):
            stack.append((current.item, depth + 1))
        elif isinstance(current, JsonType) and not isinstance(current, TypeRef):
            stack.append((current.inner, depth + 1))
        if deepest > MAX_NESTING:
            break
    return deepest


class RecursiveHoles:
    """The nonterminals of a program's recursive declared types, and the call-carrying IR of each recursive hole."""

    def __init__(self, declared: Mapping[str, FieldType]) -> None:
        self.names = sorted(declared)
        self.defs = {name: declared[name].schema() for name in self.names}
        self.calls = {DEFS + name: call_symbol(i) for i, name in enumerate(self.names)}
        _, bodies = recursive_schema_to_ir({"$defs": self.defs}, self.calls, zero_fractions=False)
        self.bodies = dict(bodies)

    def hole_ir(self, kind: FieldType) -> ir.Node | None:
        """The IR of a recursive hole (None for an ordinary one)."""
        if not is_recursive(kind):
            return None
        main, _ = recursive_schema_to_ir({**kind.schema(), "$defs": self.defs}, self.calls,
                                         zero_fractions=False)
        return main

    def definitions(self) -> list[Definition]:
        """The nonterminals, in call-symbol order."""
        return [Definition(name, self.bodies[DEFS + name]) for name in self.names]


def json_value_length(text: str) -> int:
    """Characters of the one JSON value `text` starts with (how a recursive field's end is found)."""
    _, end = json.JSONDecoder().raw_decode(text)
    return end
