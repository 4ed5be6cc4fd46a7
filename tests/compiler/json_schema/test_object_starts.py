"""An object's declared members are chosen among in one alternation: the same IR as the chain built one member at a
time (`_object` before it collected its starts)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.json_tokens import JsonTokens, Whitespace
from stdsl.compiler.json_schema.to_ir import _Compiler, _declared_names, _property_names, closes_object

VALUES = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"enum": [1, "a"]}, False, True,
                          {"type": "object", "properties": {"x": {"type": "null"}}}])
NAMES = st.sampled_from(["a", "b", "ab", "c", "", "d/e"])


@st.composite
def object_schemas(draw: st.DrawFn) -> dict:
    """Objects with declared members, some required (names outside `properties` and repeats too), maybe extras."""
    props = draw(st.dictionaries(NAMES, VALUES, max_size=5))
    schema: dict = {"type": "object", "properties": props,
                    "required": draw(st.lists(NAMES, max_size=4))}
    extra = draw(st.sampled_from([None, True, False, {"type": "boolean"}]))
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


def _chained_object(compiler: _Compiler, flat: dict) -> ir.Node:
    """`_object` for a schema without counts or dependencies, its declared members chained one at a time."""
    ctx = document_context(flat)
    declared = _declared_names(flat)
    names = _property_names(flat, "#", ctx)
    found = compiler._members(flat, declared, names, "#", ctx)
    if found is None:
        return ir.NOTHING
    members = [(member, is_required) for _, member, is_required in found]
    closed = compiler.strict and closes_object(flat)
    extra = ir.NOTHING if closed else compiler._extra_members(flat, declared, names, "#", ctx)
    t = compiler.tokens
    first, after, nullable = ir.NOTHING, ir.EMPTY, True
    for member, is_required in reversed(members):
        if is_required:
            first, after = ir.seq(member, after), ir.seq(t.comma, member, after)
            nullable = False
        else:
            first = ir.alt(ir.seq(member, after), first)
            after = ir.seq(ir.optional(ir.seq(t.comma, member)), after)
    return compiler._ordered_object(first, nullable, extra, True)


@settings(max_examples=200, deadline=None)
@given(object_schemas(), st.booleans(), st.booleans())
def test_declared_members_lower_as_their_chain_built_one_at_a_time(schema: dict, strict: bool, spaced: bool) -> None:
    tokens = JsonTokens(Whitespace() if spaced else None)
    compiler = _Compiler(tokens, strict=strict)
    expected = _chained_object(_Compiler(tokens, strict=strict), schema)
    assert compiler._object(schema, "#", document_context(schema)) == expected
