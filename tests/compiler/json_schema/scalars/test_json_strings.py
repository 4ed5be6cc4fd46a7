"""JSON strings: every json.dumps spelling is accepted, broken strings are not, lengths count characters."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl.caches
from stdsl.compiler import ir
from stdsl.compiler.automata import build
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars import strings
from stdsl.compiler.json_schema.scalars.formats import format_body
from stdsl.compiler.json_schema.scalars.strings import json_string, string_not_in
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import SchemaError, StateBudgetError

scalar_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_CACHE: dict = {}


def _automaton(key: str, build):
    if key not in _CACHE:
        _CACHE[key] = build_automaton(build())
    return _CACHE[key]


def _spellings(value: str) -> set[str]:
    """json.dumps both ways, plus every character as an uppercase \\u escape."""
    upper = "".join(f"\\u{ord(c):04X}" if ord(c) < 0x10000 else json.dumps(c)[1:-1].upper().replace("\\U", "\\u")
                    for c in value)
    return {json.dumps(value), json.dumps(value, ensure_ascii=False), f'"{upper}"'}


@settings(max_examples=300, deadline=None)
@given(scalar_text)
def test_every_spelling_is_accepted(value: str) -> None:
    automaton = _automaton("any", json_string)
    for text in _spellings(value):
        assert automaton.accepts(text.encode("utf-8")), text


@settings(max_examples=200, deadline=None)
@given(scalar_text, st.integers(0, 6), st.integers(0, 6))
def test_length_counts_characters(value: str, low: int, extra: int) -> None:
    automaton = _automaton(f"len{low},{low + extra}", lambda: json_string(low, low + extra))
    for text in _spellings(value):
        assert automaton.accepts(text.encode("utf-8")) == (low <= len(value) <= low + extra), text


BROKEN = ['"\x00"', '"\x1f"', '"a\nb"', '"\\x41"', '"\\u12"', '"\\u12G4"', '"\\ud800"', '"\\udc00"',
          '"\\ud800\\u0041"', '"abc', 'abc"', '"\\"', '"\\a"', "'a'", '"\\U0041"']


@pytest.mark.parametrize("text", BROKEN)
def test_broken_strings_are_rejected(text: str) -> None:
    assert not _automaton("any", json_string).accepts(text.encode("utf-8"))


def test_invalid_utf8_is_rejected() -> None:
    automaton = _automaton("any", json_string)
    for data in (b'"\xff"', b'"\xc0\x80"', b'"\xed\xa0\x80"', b'"\xe2\x82"', b'"\xf4\x90\x80\x80"'):
        assert not automaton.accepts(data)


KEY_CHARS = "ab\u00e9\U0001F600\"\\\n\x01\u0800"
names = st.lists(st.text(alphabet=KEY_CHARS, max_size=3), max_size=4)


@settings(max_examples=150, deadline=None)
@given(names, st.lists(st.text(alphabet=KEY_CHARS, max_size=4), max_size=10))
def test_string_not_in_reads_the_canonical_spelling_of_other_values(excluded: list[str], candidates: list[str]) -> None:
    """Undeclared keys are written as declared ones are: the canonical spelling, whatever the value; no spelling of
    an excluded value is ever read."""
    automaton = build_automaton(string_not_in(excluded))
    for value in candidates + excluded:
        canonical = json.dumps(value, ensure_ascii=False)
        for text in _spellings(value):
            assert automaton.accepts(text.encode("utf-8")) == (value not in excluded and text == canonical), \
                (excluded, text)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["ab", "^ab", "ab$", "^a.c$", "a|^b", "[0-9]{2}", "^(x|yz)+$", "\\d+x", "a\\.b"]),
       st.lists(st.text(alphabet="abcxyz0129.", max_size=6), max_size=15))
def test_pattern_is_a_search_on_plain_text(pattern: str, values: list[str]) -> None:
    automaton = build_automaton(schema_to_ir({"type": "string", "pattern": pattern}))
    for value in values:
        expected = re.search(pattern, value) is not None
        assert automaton.accepts(json.dumps(value).encode()) == expected, (pattern, value)


def test_pattern_outside_the_match_allows_escapes() -> None:
    automaton = build_automaton(schema_to_ir({"type": "string", "pattern": "^ab"}))
    assert automaton.accepts(b'"ab\\n\\u00e9"')
    assert not automaton.accepts(b'"\\u0061b"')


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["^\\\\[nt]$", '^"$', "^a\nb$", "^a\tb$", "^[^a]$", '"x', "^\\W+$", "[\\x00-\\x1f]"]),
       st.lists(st.text(alphabet='ab"\\\n\tnt\x01x', max_size=5), max_size=15))
def test_pattern_needing_quote_backslash_or_control_characters(pattern: str, values: list[str]) -> None:
    """Issue 15 item 7: the match may hold `"`, `\\` or control characters; they are spelled with their escapes."""
    automaton = _automaton("special:" + pattern, lambda: schema_to_ir({"type": "string", "pattern": pattern}))
    ecma = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern  # ECMA's `$` never matches before a final \n
    for value in values:
        expected = re.search(ecma, value) is not None
        for spelling in _spellings(value) | {json.dumps(value, ensure_ascii=False)}:
            if "\\u" not in spelling or not expected:
                assert automaton.accepts(spelling.encode()) == expected, (pattern, value, spelling)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab\u00e9\n", max_size=6), max_size=10))
def test_pattern_with_length_bounds_is_intersected(values: list[str]) -> None:
    automaton = _automaton("pattern+len", lambda: schema_to_ir({"type": "string", "pattern": "^a", "minLength": 2,
                                                                "maxLength": 4}))
    for value in values:
        expected = value.startswith("a") and 2 <= len(value) <= 4
        assert automaton.accepts(json.dumps(value).encode()) == expected, value


def test_format_with_pattern_is_intersected() -> None:
    automaton = build_automaton(schema_to_ir({"type": "string", "format": "date", "pattern": "^2024"}))
    assert automaton.accepts(b'"2024-02-29"')
    assert not automaton.accepts(b'"2023-01-01"') and not automaton.accepts(b'"2024"')


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["^a", "b$", "^[ab]+$"]), st.integers(0, 2), st.integers(2, 5),
       st.lists(st.text(alphabet="ab\u00e9", max_size=7), max_size=8))
def test_properties_with_the_same_string_constraints_share_one_intersection(
        pattern: str, low: int, high: int, values: list[str]) -> None:
    # Three properties with one pattern and length bounds: one product is built, and each property accepts what
    # the constraints allow (re and len as the oracle).
    stdsl.caches.clear()
    before = stdsl.caches.stats()["string constraint intersections"]
    field = {"type": "string", "pattern": pattern, "minLength": low, "maxLength": high}
    node = schema_to_ir({"type": "object", "properties": {"p": field, "q": dict(field), "r": {**field}},
                         "required": ["p", "q", "r"], "additionalProperties": False})
    after = stdsl.caches.stats()["string constraint intersections"]
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)
    automaton = build_automaton(node)
    for value in values:
        expected = re.search(pattern, value) is not None and low <= len(value) <= high
        text = json.dumps({"p": value, "q": value, "r": value}, ensure_ascii=False, separators=(",", ":"))
        assert automaton.accepts(text.encode()) == expected, (pattern, value)


def test_a_refused_intersection_is_built_once_and_names_each_asking_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # A product over the budget is refused the first time it is built; asked again (a schema refused as one DFA
    # is compiled again as a pushdown), the kept refusal is raised with the same reason at the new path.
    monkeypatch.setattr(strings, "MAX_PRODUCT_STATES", 5)
    stdsl.caches.clear()
    field = {"type": "string", "pattern": "^a+b", "maxLength": 9}
    reasons = []
    before = stdsl.caches.stats()["string constraint intersections"]
    for name in ("p", "q", "p"):
        with pytest.raises(StateBudgetError) as info:
            schema_to_ir({"type": "object", "properties": {name: dict(field)}})
        prefix = f"string constraints at #/properties/{name}: "
        assert str(info.value).startswith(prefix)
        assert isinstance(info.value.__cause__, StateBudgetError)
        reasons.append((str(info.value)[len(prefix):], str(info.value.__cause__)))
    assert len(set(reasons)) == 1 and reasons[0][0] == reasons[0][1]
    after = stdsl.caches.stats()["string constraint intersections"]
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)
    monkeypatch.setattr(strings, "MAX_PRODUCT_STATES", 200_000)
    stdsl.caches.clear()
    automaton = build_automaton(schema_to_ir({"type": "object", "properties": {"p": dict(field)},
                                              "required": ["p"], "additionalProperties": False}))
    assert automaton.accepts(b'{"p":"aab"}') and not automaton.accepts(b'{"p":"ba"}')


def test_bad_pattern_is_a_schema_error() -> None:
    with pytest.raises(SchemaError) as info:
        schema_to_ir({"properties": {"p": {"type": "string", "pattern": "(?<=a)b"}}})
    assert info.value.path == "#/properties/p/pattern"


FORMAT_CASES = {
    "date": (["2024-02-29", "2000-02-29", "1999-12-31"],
             ["2023-02-29", "1900-02-29", "2024-13-01", "2024-04-31", "24-01-01"]),
    "time": (["23:59:60Z", "12:00:00.5+01:00", "00:00:00z"], ["24:00:00Z", "12:00:00", "12:60:00Z", "22:59:60Z"]),
    "date-time": (["2024-01-01T00:00:00Z", "2024-01-01t10:10:10.1-05:30"],
                  ["2024-01-01 00:00:00Z", "2024-01-01T00:00Z"]),
    "email": (["a@b.co", "first.last+tag@example-site.org"], ["a@", "@b", "a..b@c", "a@-b.com", "a b@c"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"], ["123e4567e89b12d3"]),
    "uri": (["https://example.com/a?b#c", "urn:isbn:0451450523", "http://[::1]:80/"], ["/relative", "http://a:b/"]),
    "ipv4": (["0.0.0.0", "255.255.255.255"], ["256.0.0.1", "01.2.3.4", "1.2.3"]),
    "ipv6": (["::", "::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "fe80::"], ["1:2:3:4:5:6:7:8:9", ":::", "1::2::3"]),
}


@pytest.mark.parametrize("name", sorted(FORMAT_CASES))
def test_formats(name: str) -> None:
    good, bad = FORMAT_CASES[name]
    automaton = build_automaton(format_body(name))
    for text in good:
        assert automaton.accepts(text.encode()), (name, text)
    for text in bad:
        assert not automaton.accepts(text.encode()), (name, text)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["^[a-z]+$", "^[0-9]{2,}-x", "ab", "^\\w*$"]), st.integers(0, 3), st.integers(1, 40))
def test_an_intersection_is_embedded_as_its_minimal_automaton(pattern: str, low: int, extra: int) -> None:
    """The intersected leaf is known minimal, so building it returns the product as it is: the automaton that
    minimizing the leaf's table again gives."""
    stdsl.caches.clear()
    leaf = strings.string_body({"pattern": pattern, "minLength": low, "maxLength": low + extra}, "#")
    if leaf is ir.NOTHING:
        return
    built = build_automaton(leaf)
    again = build._leaf_automaton(leaf)
    assert np.array_equal(built.transitions, again.transitions)
    assert np.array_equal(built.accepting, again.accepting)


@settings(max_examples=40, deadline=None)
@given(low=st.integers(0, 4), high=st.integers(0, 4), typed=st.booleans(), pattern=st.sampled_from([None, "a"]))
def test_length_bounds_that_cross_admit_no_string(low: int, high: int, typed: bool, pattern: str | None) -> None:
    """`minLength` above `maxLength` leaves no string (hypothesis found `{"minLength": 1, "maxLength": 0}` raising a
    ValueError from the IR): an untyped schema keeps its other kinds, `type: string` is refused as empty, and the
    same bounds on `propertyNames` leave only `{}`; every outcome as `jsonschema` validates (open objects, as JSON
    Schema reads them)."""
    import jsonschema

    from stdsl.errors import EmptyLanguageError

    schema = {"minLength": low, "maxLength": high, **({"type": "string"} if typed else {}),
              **({"pattern": pattern} if pattern else {})}
    instances = ["", "a", "aa", "aaa", "aaaa", "ab", 1, None, {}]
    valid = [x for x in instances if jsonschema.Draft202012Validator(schema).is_valid(x)]
    try:
        compiled = stdsl.compile(schema, strict=False)
    except EmptyLanguageError:
        assert valid == []
    else:
        assert [x for x in instances if compiled.accepts(json.dumps(x))] == valid
    names = {"type": "object", "propertyNames": {"minLength": low, "maxLength": high}}
    objects = [{}, {"a": 1}, {"aa": 1}, {"aaa": 1, "b": 2}]
    compiled = stdsl.compile(names, strict=False)
    assert [o for o in objects if compiled.accepts(json.dumps(o, separators=(",", ":")))] == [
        o for o in objects if jsonschema.Draft202012Validator(names).is_valid(o)]
