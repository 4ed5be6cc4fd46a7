"""Typed values while streaming (`Stream.events()`): every value equals the final value at its path, values come in
document order, and a stream cut anywhere yields no value the whole output contradicts.

Oracles: `json.loads` of the whole document (the reader on generated documents, spacings and cuts), and the
finished `Generation.value` of outputs decoded on the tiny random model (generated schemas, Pydantic, `.stc`
programs, regular expressions).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import stdsl
from stdsl.programs import Program
from stdsl.runtime.decode import stream
from stdsl.runtime.stream_values.json_reader import JsonReader, StreamValue
from stdsl.runtime.stream_values.readers import ProgramFields, keys_may_repeat

SCALARS = (st.none() | st.booleans() | st.integers(-10**20, 10**20)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
DOCUMENTS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=12)


def at(document: Any, path: tuple[str | int, ...]) -> Any:
    """The value at `path` in `document`."""
    for step in path:
        document = document[step]
    return document


def post_order(document: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path of `document` in the order its values end in the text (members before their container)."""
    inner: list[tuple[str | int, ...]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            inner += post_order(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            inner += post_order(value, (*path, index))
    return [*inner, path]


def check_against(events: list[StreamValue], final: Any) -> None:
    """Every complete value equals the final one at its path; every partial string is a prefix of it; in order."""
    ends = [event.end for event in events]
    assert ends == sorted(ends)
    for event in events:
        expected = at(final, event.path)
        if event.complete:
            assert event.value == expected and type(event.value) is type(expected), event
        else:
            assert isinstance(expected, str) and expected.startswith(event.value), event


def read_all(pieces: list[bytes], finish: bool = True) -> list[StreamValue]:
    reader = JsonReader()
    events = [event for piece in pieces for event in reader.feed(piece)]
    return events + (reader.finish() if finish else [])


@st.composite
def spelled(draw: st.DrawFn) -> tuple[Any, bytes]:
    """A document and one of its spellings (indents, separators, escaped or raw non-ASCII)."""
    document = draw(DOCUMENTS)
    indent = draw(st.sampled_from([None, 0, 2]))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]))
    text = json.dumps(document, indent=indent, separators=separators, ensure_ascii=draw(st.booleans()))
    return document, (text + draw(st.sampled_from(["", " ", "\n"]))).encode("utf-8")


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    pieces, at_ = [], 0
    for size in sizes:
        pieces.append(data[at_ : at_ + size])
        at_ += size
    return [*pieces, data[at_:]]


@settings(max_examples=300, deadline=None)
@given(spelled(), st.lists(st.integers(1, 7), max_size=40))
def test_reader_values_equal_the_documents_values_in_document_order(case, sizes) -> None:
    document, data = case
    final = json.loads(data)
    events = read_all(cut(data, sizes))
    check_against(events, final)
    assert [e.path for e in events if e.complete] == post_order(final)
    assert events[-1].path == () and events[-1].complete


@settings(max_examples=300, deadline=None)
@given(spelled(), st.lists(st.integers(1, 7), max_size=40), st.data())
def test_a_cut_stream_yields_only_values_of_the_whole_document(case, sizes, data) -> None:
    _, text = case
    stop = data.draw(st.integers(0, len(text)))
    events = read_all(cut(text[:stop], sizes), finish=False)
    check_against(events, json.loads(text))
    whole = [e for e in read_all([text]) if e.complete]
    assert [e for e in events if e.complete] == whole[: len([e for e in events if e.complete])]


LEAVES = st.sampled_from([
    {"type": "integer", "minimum": -50, "maximum": 50}, {"type": "number"}, {"type": "boolean"},
    {"type": "string", "maxLength": 6}, {"enum": ["red", "green", 3, None]},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3},
])


@st.composite
def object_schemas(draw: st.DrawFn) -> dict:
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=4, unique=True))
    properties: dict[str, Any] = {}
    for name in names:
        if draw(st.integers(0, 3)) == 0:
            inner = draw(st.lists(st.text("xyz", min_size=1, max_size=3), min_size=1, max_size=2, unique=True))
            properties[name] = {"type": "object", "required": inner, "properties": {n: draw(LEAVES) for n in inner}}
        else:
            properties[name] = draw(LEAVES)
    return {"type": "object", "required": names, "properties": properties}


def decoded_events(model: Any, constraint: Any, **options: Any) -> tuple[list[StreamValue], stdsl.Generation]:
    streaming = stream(model, "Fill it in.", constraint, **options)
    items = list(streaming.events())
    text = "".join(item for item in items if isinstance(item, str))
    generation = streaming.result()
    assert text == generation.text
    return [item for item in items if isinstance(item, StreamValue)], generation


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=object_schemas(), temperature=st.sampled_from([0.0, 1.0]), seed=st.integers(0, 99))
def test_decoded_values_equal_the_final_value_on_generated_schemas(tiny_model, schema, temperature, seed) -> None:
    events, generation = decoded_events(tiny_model, schema, max_tokens=120, temperature=temperature, seed=seed)
    if not generation.accepted:  # cut by the budget: no final value, so no value of the whole output either
        assert all(e.path != () for e in events)
        return
    final = generation.value
    check_against(events, final)
    assert [e.path for e in events if e.complete] == post_order(final)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=object_schemas(), pieces=st.integers(1, 12))
def test_a_cancelled_stream_yields_only_values_the_finished_output_has(tiny_model, schema, pieces) -> None:
    events, generation = decoded_events(tiny_model, schema, max_tokens=120)
    if not generation.accepted:
        return
    streaming = stream(tiny_model, "Fill it in.", schema, max_tokens=120)
    seen: list[StreamValue] = []
    count = 0
    for item in streaming.events():
        if isinstance(item, str):
            count += 1
            if count == pieces:
                streaming.cancel()
        else:
            seen.append(item)
    check_against(seen, generation.value)
    complete = [e for e in seen if e.complete]
    assert complete == [e for e in events if e.complete][: len(complete)]


class Point(BaseModel):
    label: str = Field(max_length=8)
    x: int = Field(ge=-9, le=9)
    tags: list[str] = Field(max_length=2)


def test_pydantic_streams_partial_instances_then_the_validated_instance(tiny_model) -> None:
    events, generation = decoded_events(tiny_model, Point, max_tokens=80)
    final = generation.value
    partials = [e.value for e in events if e.path == () and not e.complete]
    assert [sorted(p.model_fields_set) for p in partials] == [["label"], ["label", "x"], ["label", "tags", "x"]]
    for partial in partials:
        for name in partial.model_fields_set:
            assert getattr(partial, name) == getattr(final, name)
    assert events[-1].path == () and events[-1].complete and events[-1].value == final
    check_against([e for e in events if e.path != ()], final.model_dump(mode="json"))


PROGRAM = '''
param topic: str
user """Describe {{ topic }}."""
output """
Name: {name: str(1..20)}
Count: {count: int(0..99)}
Mood: {mood: "calm" | "wild"}
Record: {record: {a: int(0..9), b: bool}}
Note: {note: str(1..30)}
"""
'''


def test_program_fields_stream_at_their_ends_as_the_result_reads_them(tiny_model) -> None:
    program = Program(PROGRAM)
    constraint = program.constraint({"topic": "a cat"})
    events, generation = decoded_events(tiny_model, constraint, max_tokens=120)
    final = constraint.parse(generation.text)
    assert [e.path for e in events] == [(name,) for name in final]
    for event in events:
        assert event.value == final[event.path[0]]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_program_fields_from_any_cut_agree_with_the_whole_reading(data) -> None:
    constraint = Program(PROGRAM).constraint({"topic": "x"})
    values = {"name": data.draw(st.text("ab :\n", min_size=1, max_size=6)), "count": data.draw(st.integers(0, 99)),
              "mood": data.draw(st.sampled_from(["calm", "wild"])),
              "record": {"a": data.draw(st.integers(0, 9)), "b": data.draw(st.booleans())},
              "note": data.draw(st.text("xy\n", min_size=1, max_size=6))}
    text = constraint.render(values)
    final = constraint.parse(text)
    stop = data.draw(st.integers(0, len(text)))
    reader = ProgramFields(constraint.parts)
    sizes = data.draw(st.lists(st.integers(1, 5), max_size=30))
    events: list[StreamValue] = []
    position = 0
    for size in sizes:
        events += reader.feed(text[position : min(position + size, stop)])
        position = min(position + size, stop)
    events += reader.feed(text[position:stop])
    for event in events:
        assert event.value == final[event.path[0]]
    if stop == len(text):
        events += reader.finish()
        assert [e.path[0] for e in events] == list(final)


def test_a_regex_streams_its_text_and_then_its_value(tiny_model) -> None:
    events, generation = decoded_events(tiny_model, stdsl.Regex("[a-z]{3,8}"), max_tokens=10)
    partials = [e.value for e in events if not e.complete]
    assert partials and all(generation.text.startswith(p) for p in partials)
    assert [e.value for e in events if e.complete] == [generation.value]


def test_iterating_a_stream_still_yields_its_text_pieces(tiny_model) -> None:
    streaming = stream(tiny_model, "Fill it in.", {"type": "integer"}, max_tokens=8)
    assert "".join(streaming) == streaming.result().text
    assert [e.value for e in streaming.values()] == [streaming.result().value]


@pytest.mark.parametrize("document", ['"\\ud83d"', '"\\ud83dx"', '"\\ud83d\\n"', '"a\\u00e9\\ud83d\\ude00"'])
def test_surrogate_escapes_split_anywhere_read_as_json_loads_reads_them(document) -> None:
    final = json.loads(document)
    for split in range(len(document) + 1):
        events = read_all([document[:split].encode(), document[split:].encode()])
        check_against(events, final)


KEYS = st.sampled_from(["a", "b", "c"])
MEMBERS = st.recursive(SCALARS.map(json.dumps), lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
    st.lists(st.tuples(KEYS, inner), max_size=4).map(
        lambda pairs: "{" + ",".join(f'"{k}": {v}' for k, v in pairs) + "}")), max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(MEMBERS, st.lists(st.integers(1, 5), max_size=40), st.data())
def test_repeated_keys_yield_only_the_member_the_final_value_keeps(text, sizes, data) -> None:
    data_bytes = text.encode("utf-8")
    final = json.loads(data_bytes)  # a repeated key keeps its last member
    reader = JsonReader(keys_may_repeat=True)
    stop = data.draw(st.integers(0, len(data_bytes)))
    events = [event for piece in cut(data_bytes[:stop], sizes) for event in reader.feed(piece)]
    if stop == len(data_bytes):
        events += reader.finish()
        assert [e.path for e in events] == post_order(final)
    check_against(events, final)


@pytest.mark.parametrize(("schema", "repeat"), [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"enum": [1]}}}},
     False),
    ({"type": "object"}, True), ({"type": "object", "properties": {"a": {}}}, True),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}},
     True),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/d"}}, "$defs": {"d": {"type": "object"}}}, True),
])
def test_schemas_that_admit_undeclared_members_hold_object_members(schema, repeat) -> None:
    assert keys_may_repeat(schema) is repeat


def test_an_open_object_may_repeat_a_key_so_its_members_wait_for_its_end(tiny_model) -> None:
    assert stdsl.compile({"type": "object"}).accepts('{"a":1,"a":2}')  # why members are held
    events, generation = decoded_events(tiny_model, {"type": "object", "additionalProperties": {"type": "integer"}},
                                        max_tokens=40)
    if generation.accepted:
        check_against(events, generation.value)
        assert [e.path for e in events] == post_order(generation.value)
