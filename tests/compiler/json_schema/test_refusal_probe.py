"""The refusal probe: its key classes are `key_classes`' (same patterns matched, same order, same refusals), and a
compile that probes ends as one that does not (the same refusal and message, or the same tables)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import stdsl.caches
from stdsl.compiler import ir
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema import recursive
from stdsl.compiler.json_schema.refusal_probe import KeyClassShapes, may_refuse_late
from stdsl.compiler.json_schema.scalars.keys import key_classes
from stdsl.compiler.json_schema.scalars.strings import string_body
from stdsl.errors import StdslError

PATTERNS = ["^a", "^b", "b$", "^ab", "^a[0-9]+$", "x", "^(?:a|b)c", "é", "^[a-c]{2}$", "^$", "[", "^a\\p{Lu}"]
NAMES = ["a", "b", "ab", "a1", "bc", "x", "", "é"]

pattern_sets = st.lists(st.sampled_from(PATTERNS), min_size=0, max_size=6, unique=True)
declared_names = st.lists(st.sampled_from(NAMES), max_size=3, unique=True)
names_bodies = st.sampled_from([None, {"maxLength": 2}, {"pattern": "^a"}, {"pattern": "^q"}, {"minLength": 3}])


def outcome(call: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", its value) or (the refusal's class, its message)."""
    try:
        return "ok", call()
    except StdslError as error:
        return type(error).__name__, str(error)


@settings(max_examples=150, deadline=None)
@given(pattern_sets, declared_names, names_bodies, st.booleans())
def test_probe_classes_are_the_key_classes(patterns: list[str], declared: list[str], names: dict | None,
                                           with_unmatched: bool) -> None:
    stdsl.caches.clear()
    patterns_of = {p: {} for p in patterns}
    body = string_body(names, "#/propertyNames", plain=True) if names else None
    where = "#/patternProperties"
    real = outcome(lambda: [matched for _, matched in key_classes(patterns_of, declared, body, with_unmatched, where)])
    stdsl.caches.clear()
    probed = outcome(lambda: [matched for _, matched in KeyClassShapes().key_classes(patterns_of, declared, body,
                                                                                      with_unmatched, where)])
    assert probed == real


PROBED_WITHOUT_NUMPY_MA = """
import sys
from stdsl.compiler.json_schema.refusal_probe import KeyClassShapes
classes = KeyClassShapes().key_classes({"^x": {}, "y$": {}}, ["xa"], None, True, "#/patternProperties")
assert sorted(matched for _, matched in classes) == [[], ["^x"], ["^x", "y$"], ["y$"]], classes
assert "numpy.ma" not in sys.modules
"""


def test_a_witness_search_does_not_import_numpy_ma() -> None:
    """The probe's product of key automata takes their distinct byte-class columns without numpy's plain `unique`,
    whose first call imports `numpy.ma` (10 ms of a fresh process's compile)."""
    subprocess.run([sys.executable, "-c", PROBED_WITHOUT_NUMPY_MA], check=True)


def objects(depth: int) -> st.SearchStrategy[dict]:
    """Object schemas whose members may be such objects again, with patternProperties of up to six patterns."""
    member = st.sampled_from([{"type": "string"}, {"type": "integer", "minimum": 1}, False,
                              {"type": "string", "format": "no-such-format"}, {"$ref": "#/definitions/big"},
                              {"$ref": "#/definitions/small"}])
    if depth:
        member = st.one_of(member, st.deferred(lambda: objects(depth - 1)))
    return st.builds(
        lambda props, required, patterns, extra: {
            "type": "object", "properties": props, "required": required[:len(props)] and list(props)[:len(required)],
            **({"patternProperties": {p: {"type": "string"} for p in patterns}} if patterns else {}),
            **({"additionalProperties": extra} if extra is not None else {})},
        st.dictionaries(st.sampled_from(["a", "b", "c", "ab"]), member, max_size=3),
        st.lists(st.booleans(), max_size=2), pattern_sets, st.sampled_from([None, False, {"type": "integer"}]))


BIG = {"type": "object", "patternProperties": {f"^p{i}": {"type": "string"} for i in range(5)}}


def probing_and_not(schema: dict) -> tuple[tuple, tuple]:
    """The compile's outcome with the probe and without it (tables for a compiled schema)."""
    def compiled() -> tuple[str, Any]:
        stdsl.caches.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = outcome(lambda: compile_constraint(schema, max_states=100_000, strict=False))
        if found[0] != "ok":
            return found
        return "ok", [np.asarray(table).tobytes() for table in _tables(found[1])]

    with_probe = compiled()
    with patch.object(recursive, "may_refuse_late", lambda _schema: False):
        without = compiled()
    return with_probe, without


def _tables(value: Any, seen: set[int] | None = None) -> list[Any]:
    """Every array a compiled constraint holds, walked as `benchmarks/compile_identity.py` walks it."""
    seen = set() if seen is None else seen
    if id(value) in seen or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return []
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, dict):
        return [a for key in sorted(value, key=repr) for a in _tables(value[key], seen)]
    if isinstance(value, (list, tuple)):
        return [a for item in value for a in _tables(item, seen)]
    if hasattr(value, "__dict__") and type(value).__module__.startswith("stdsl"):
        return [a for key in sorted(vars(value)) if key not in ("source", "model_class", "compile_seconds")
                for a in _tables(vars(value)[key], seen)]
    return []


@settings(max_examples=60, deadline=None)
@given(root=objects(2), small=objects(1), refer_big=st.booleans())
@example(root={"type": "object", "properties": {"t": {"$ref": "#/definitions/big"}}, "required": ["t"]},
         small={"type": "object"}, refer_big=True)
@example(root={"type": "object", "properties": {"x": False, "t": {"$ref": "#/definitions/big"}}, "required": ["x"]},
         small={"type": "object"}, refer_big=True)
def test_a_probed_compile_ends_as_an_unprobed_one(root: dict, small: dict, refer_big: bool) -> None:
    schema = {**root, "definitions": {"big": BIG if refer_big else {"type": "string"}, "small": small, "unused": BIG}}
    assert may_refuse_late(schema)
    with_probe, without = probing_and_not(schema)
    assert with_probe == without


def test_an_unreached_definition_is_not_refused() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "definitions": {"unused": BIG}}
    with_probe, without = probing_and_not(schema)
    assert with_probe == without and with_probe[0] == "ok"


def test_a_pruned_branch_is_not_refused() -> None:
    never = {"type": "object", "properties": {"x": False, "t": BIG}, "required": ["x"]}
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "n": never}}
    with_probe, without = probing_and_not(schema)
    assert with_probe == without and with_probe[0] == "ok"


def test_the_refusal_names_the_object_reached() -> None:
    schema = {"type": "object", "properties": {"t": {"$ref": "#/definitions/big"}}, "definitions": {"big": BIG}}
    with_probe, without = probing_and_not(schema)
    assert with_probe == without
    assert with_probe[0] == "SchemaError" and "#/definitions/big/patternProperties" in with_probe[1]


def test_a_stand_in_is_no_real_key() -> None:
    classes = KeyClassShapes().key_classes({"^a": {}}, [], None, True, "#/patternProperties")
    assert [matched for _, matched in classes] == [["^a"], []]
    assert all(isinstance(key, ir.Seq) for key, _ in classes)
