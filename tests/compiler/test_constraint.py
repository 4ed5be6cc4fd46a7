"""`stdsl.compile`: every kind of spec, clear refusals, and the compile cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import stdsl


class Item(BaseModel):
    name: str
    count: int


def test_kinds_compile_and_parse() -> None:
    schema = stdsl.compile({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
                            "required": ["n"]})
    assert schema.accepts('{"n":5}') and not schema.accepts('{"n":0}')
    assert schema.parse('{"n":5}') == {"n": 5}
    regex = stdsl.compile(stdsl.Regex(r"[A-Z]{3}-\d{4}"))
    assert regex.accepts(b"ABC-1234") and not regex.accepts(b"AB-1234")
    model = stdsl.compile(Item)
    assert model.parse('{"name":"x","count":2}') == Item(name="x", count=2)
    assert model.num_states > 0 and model.nbytes > 0


def test_bad_specs_are_refused() -> None:
    with pytest.raises(stdsl.CompileError, match="ambiguous"):
        stdsl.compile("[a-z]+")
    with pytest.raises(stdsl.CompileError, match="cannot compile"):
        stdsl.compile(42)
    with pytest.raises(stdsl.RegexError, match="position"):
        stdsl.compile(stdsl.Regex("a(?=b)"))
    with pytest.raises(stdsl.SchemaError, match="schema path"):
        stdsl.compile({"type": "foo"})


def test_same_schema_compiles_once() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 7}}, "additionalProperties": False}
    first = stdsl.compile(schema)
    assert stdsl.compile(dict(schema)) is first
    assert stdsl.compile(schema, max_states=10_000) is not first
    assert stdsl.compile(stdsl.Regex("x+")) is stdsl.compile(stdsl.Regex("x+"))
    assert stdsl.compile(first) is first


def test_property_order_is_part_of_the_key() -> None:
    """Properties are written in declared order, so a schema with them reordered is another program (the cache once
    keyed schemas by sorted JSON and handed the second order the first one's automaton)."""
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "required": ["a", "b"], "additionalProperties": False}
    ba = {**ab, "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    first, second = stdsl.compile(ab), stdsl.compile(ba)
    assert first is not second
    assert first.automaton.accepts(b'{"a":1,"b":2}') and not first.automaton.accepts(b'{"b":2,"a":1}')
    assert second.automaton.accepts(b'{"b":2,"a":1}') and not second.automaton.accepts(b'{"a":1,"b":2}')


def test_a_schema_too_large_for_one_dfa_is_outlined_into_a_pushdown() -> None:
    from stdsl.compiler.constraint import compile as compile_constraint
    from stdsl.compiler.pushdown.constraint import PushdownConstraint

    item = {"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 6} for i in range(5)},
            "additionalProperties": False}
    schema = {"$defs": {"item": item},
              "type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/item"} for i in range(12)},
              "additionalProperties": False}
    flat = compile_constraint(schema, max_states=200_000)
    outlined = compile_constraint(schema, max_states=flat.num_states // 4)
    assert isinstance(outlined, PushdownConstraint)
    for text in ['{}', '{"p0":{"k1":"abc"},"p3":{}}', '{"p1":{"k0":"abcdef","k4":""},"p11":{"k2":"x"}}',
                 '{"p0":{"k1":"abcdefg"}}', '{"p3":{},"p0":{}}', '{"p0":{"k9":""}}']:
        assert outlined.accepts(text) == flat.accepts(text), text


def test_free_form_values_nest_to_any_depth_and_a_dfa_is_there_for_embedding() -> None:
    from stdsl.compiler.constraint import Constraint, compile_embeddable
    from stdsl.compiler.pushdown.constraint import PushdownConstraint

    deep = '{"name":"x","extra":[{"a":[[[{"b":[1]}]]]}]}'
    shallow = '{"name":"x","extra":{"a":[1]}}'
    open_schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    exact = stdsl.compile(open_schema, strict=False)
    assert isinstance(exact, PushdownConstraint)
    assert exact.accepts(deep) and exact.accepts(shallow) and not exact.accepts('{"extra":1}')
    assert isinstance(stdsl.compile(open_schema), Constraint) and not stdsl.compile(open_schema).accepts(shallow)
    bounded = compile_embeddable(open_schema, strict=False)
    assert isinstance(bounded, Constraint)
    assert bounded.accepts(shallow) and not bounded.accepts(deep)
    closed = stdsl.compile({**open_schema, "additionalProperties": False})
    assert isinstance(closed, Constraint) and not closed.accepts(shallow)
    clash = stdsl.compile({"anyOf": [{"type": "string"}, {}]})
    assert clash.accepts('"s"') and clash.accepts("[[1]]") and clash.accepts("[[[[[[1]]]]]]")
    assert stdsl.compile(True).accepts("[[[[[[]]]]]]")


@pytest.mark.parametrize("spec", [stdsl.Regex(r"[0-9]+"),
                                  {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                                   "$ref": "#/$defs/t"}], ids=["dfa", "pushdown"])
def test_accepts_of_a_non_text_value_is_an_option_error(spec: object) -> None:
    from stdsl.compiler.pushdown.constraint import PushdownConstraint

    constraint = stdsl.compile(spec)
    assert isinstance(constraint, PushdownConstraint) == isinstance(spec, dict)
    for value, name in [(5, "int"), (None, "NoneType"), (["5"], "list")]:
        with pytest.raises(stdsl.OptionError, match=f"not {name}"):
            constraint.accepts(value)  # type: ignore[arg-type]
    assert constraint.accepts(bytearray(b"5") if isinstance(spec, stdsl.Regex) else bytearray(b"[[]]"))


def test_compiling_a_schema_in_a_fresh_process_leaves_pydantic_unimported() -> None:
    """Pydantic costs a cold compile 0.1-0.3 s to import; only a Pydantic class needs it (issue 36, item 3)."""
    code = ("import sys, stdsl; c = stdsl.compile({'type': 'object', 'properties': {'a': {'type': 'integer'}}}); "
            "assert c.accepts('{\"a\":1}'); print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(stdsl.__file__).parents[1])
    assert out.stdout.strip() == "[]"


def test_compiling_schemas_in_a_fresh_process_leaves_slow_stdlib_and_numpy_modules_unimported() -> None:
    """A cold compile pays no import it does not use (issue 36, item 3): numpy.ma (np.unique's first plain call,
    15-20 ms), importlib.metadata (the version, read on first use), difflib (did-you-mean hints)."""
    schemas = [{"type": "object", "properties": {"a": {"enum": ["x", "yy", "zzz"]}, "b": {"type": "string",
                                                                                          "pattern": "^[a-f]{2,9}$"}}},
               {"type": "array", "items": {}},
               {"type": "object", "properties": {"n": {"$ref": "#"}, "v": {"type": "integer"}}}]
    code = (f"import sys, stdsl; cs = [stdsl.compile(s) for s in {schemas!r}]; "
            "assert cs[0].accepts('{\"a\":\"yy\",\"b\":\"abc\"}') and cs[1].accepts('[[1],{}]'); "
            "assert cs[2].accepts('{\"n\":{\"v\":1}}'); "
            "print(sorted(m for m in ('numpy.ma', 'importlib.metadata', 'difflib') if m in sys.modules)); "
            "print(stdsl.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(stdsl.__file__).parents[1])
    unimported, version = out.stdout.split("\n")[:2]
    assert unimported == "[]"
    assert version == stdsl.__version__
