"""Issue 15 item 2: a Pydantic class compiles to what Pydantic validates, or is refused naming the field.

The proof is a property: for generated models, every string drawn by random accepting walks over
the compiled automaton (or pushdown) validates with `model_validate_json`.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from typing import Annotated, Any, Literal, Optional

import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AwareDatetime, BaseModel, Field, FutureDate, NaiveDatetime, PastDate, PastDatetime

import stdsl
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.errors import CompileError, SchemaError
from tests.compiler.accepting_walks import distances, random_accepted


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


FIELD_TYPES: list[Any] = [
    int, float, bool, str, dt.date, dt.time, dt.datetime, NaiveDatetime, AwareDatetime, Colour, Level,
    Literal["a", "b"], Literal[1, 2, 3],
    Annotated[int, Field(ge=-5, le=300)], Annotated[float, Field(ge=0, lt=10)],
    Annotated[str, Field(min_length=1, max_length=6)], Annotated[str, Field(pattern=r"^\S+\s\d$")],
    Annotated[str, Field(pattern=r"^[a-c]+\s*$")], Annotated[str, Field(pattern=r"x\sy")],
]


def wrapped(draw: st.DrawFn, depth: int) -> Any:
    kind = draw(st.sampled_from(["plain", "plain", "optional", "list", "model"] if depth < 2 else ["plain"]))
    if kind == "plain":
        return draw(st.sampled_from(FIELD_TYPES))
    if kind == "optional":
        return Optional[wrapped(draw, depth + 1)]  # noqa: UP045 (a runtime type expression)
    if kind == "list":
        return Annotated[list[wrapped(draw, depth + 1)], Field(max_length=3)]  # type: ignore[misc]
    return model(draw, depth + 1)


def model(draw: st.DrawFn, depth: int = 0) -> type[BaseModel]:
    count = draw(st.integers(1, 4))
    fields = {f"f{i}": (wrapped(draw, depth), ...) for i in range(count)}
    return pydantic.create_model(f"M{depth}_{draw(st.integers(0, 10**6))}", **fields)  # type: ignore[call-overload]


@st.composite
def models(draw: st.DrawFn) -> type[BaseModel]:
    return model(draw)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(models(), st.integers(0, 2**32 - 1))
def test_every_accepted_string_validates(model_class: type[BaseModel], seed: int) -> None:
    try:
        constraint = stdsl.compile(model_class)
    except CompileError:
        return  # refused at compile time: allowed by the property
    rng = np.random.default_rng(seed)
    if isinstance(constraint, PushdownConstraint):
        machine: Any = constraint.machine
        dist = None
    else:
        machine = constraint.automaton
        dist = distances(machine)
    for _ in range(25):
        text = random_accepted(machine, rng, dist=dist).decode("utf-8")
        model_class.model_validate_json(text)


@pytest.mark.parametrize("value", ["2020-01-01T23:59:60Z", "0000-01-01T00:00:00Z", "2021-02-29T00:00:00Z"])
def test_datetimes_pydantic_rejects_are_not_generated(value: str) -> None:
    class Event(BaseModel):
        at: dt.datetime

    constraint = stdsl.compile(Event)
    assert not constraint.accepts(f'{{"at":"{value}"}}')
    assert constraint.accepts('{"at":"2020-02-29T23:59:59.5+01:00"}')


def test_dates_and_times_pydantic_rejects_are_not_generated() -> None:
    class Slot(BaseModel):
        day: dt.date
        start: dt.time

    constraint = stdsl.compile(Slot)
    assert not constraint.accepts('{"day":"0000-01-01","start":"10:00:00Z"}')
    assert not constraint.accepts('{"day":"2020-01-01","start":"23:59:60Z"}')
    assert constraint.accepts('{"day":"0001-01-01","start":"23:59:59Z"}')


def test_naive_datetimes_are_written_without_an_offset() -> None:
    class Log(BaseModel):
        at: NaiveDatetime

    constraint = stdsl.compile(Log)
    assert constraint.accepts('{"at":"2024-02-29T10:00:00"}')
    assert not constraint.accepts('{"at":"2024-02-29T10:00:00Z"}')
    assert not constraint.accepts('{"at":"2023-02-29T10:00:00"}')
    Log.model_validate_json('{"at":"2024-02-29T10:00:00"}')


@pytest.mark.parametrize(("annotation", "path", "reason"), [
    (PastDate, "born", "must lie in the past"),
    (Optional[list[FutureDate]], "born[]", "must lie in the future"),  # noqa: UP045
    (PastDatetime, "born", "must lie in the past"),
    (Annotated[str, Field(pattern=r"^\W+$")], "born", "\\W"),
    (Annotated[str, Field(pattern=r"^[^\d]+$")], "born", "\\d"),
])
def test_what_cannot_be_enforced_is_refused_with_the_field_path(annotation: Any, path: str, reason: str) -> None:
    inner = pydantic.create_model("Person", born=(annotation, ...))
    outer = pydantic.create_model("Record", person=(inner, ...))
    with pytest.raises(SchemaError) as info:
        stdsl.compile(outer)
    assert f"field person.{path} of Record" in str(info.value) and reason in str(info.value)


def test_unicode_whitespace_in_a_pattern_is_what_pydantic_reads() -> None:
    class Pair(BaseModel):
        text: str = Field(pattern=r"^a\sb$")

    constraint = stdsl.compile(Pair)
    for space in [" ", "\u3000", "\u2028", "\ufeff", "\x85", "\t"]:
        text = json.dumps({"text": f"a{space}b"}, ensure_ascii=False, separators=(",", ":"))
        assert constraint.accepts(text) == _validates(Pair, text), repr(space)


def _validates(model_class: type[BaseModel], text: str) -> bool:
    try:
        model_class.model_validate_json(text)
    except pydantic.ValidationError:
        return False
    return True


class Node(BaseModel):
    at: NaiveDatetime
    when: dt.time
    kids: list[Node] = Field(max_length=2)


def test_a_recursive_model_on_the_pushdown_generates_only_what_validates() -> None:
    constraint = stdsl.compile(Node)
    assert isinstance(constraint, PushdownConstraint)
    rng = np.random.default_rng(0)
    for _ in range(30):
        Node.model_validate_json(random_accepted(constraint.machine, rng).decode("utf-8"))


class Inner(BaseModel):
    x: int


class Ignoring(BaseModel):
    inner: Inner


class Allowing(BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    inner: Inner


def test_a_model_that_ignores_extra_fields_is_written_closed_and_one_that_keeps_them_stays_open() -> None:
    ignoring, allowing = stdsl.compile(Ignoring), stdsl.compile(Allowing)
    assert ignoring.accepts('{"inner":{"x":1}}') and allowing.accepts('{"inner":{"x":1}}')
    assert not ignoring.accepts('{"inner":{"x":1},"note":"dropped"}')
    assert not ignoring.accepts('{"inner":{"x":1,"y":2}}') and not allowing.accepts('{"inner":{"x":1,"y":2}}')
    kept = '{"inner":{"x":1},"note":[{"a":[[[[1]]]]}]}'
    assert allowing.accepts(kept)
    assert Allowing.model_validate_json(kept).model_extra == {"note": [{"a": [[[[1]]]]}]}
