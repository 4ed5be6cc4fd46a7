"""Fuzzing the JSON Schema compiler: any JSON value handed to `stdsl.compile` compiles, or is refused with a
SchemaError at a schema path, a DefinitionError naming the recursive definition, a GrammarConflictError naming
the recursive parts one byte of lookahead cannot tell apart, or an error about the whole schema (time, state budget,
empty language), never another exception, and never past `max_seconds`."""

from __future__ import annotations

import gc
import math
import sys
import threading
import time
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings

from stdsl.compiler.constraint import Constraint, compile
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.grammar import DefinitionError, GrammarConflictError
from stdsl.errors import CompileError, CompileTimeError, EmptyLanguageError, SchemaError, StateBudgetError
from tests.compiler.fuzz.fuzz_inputs import schema_inputs
from tests.compiler.fuzz.memory_cap import memory_cap
from tests.compiler.fuzz.time_limit import (
    LARGE_RUN_SECONDS,
    LIMIT_SECONDS,
    SLACK_SECONDS,
    collector_seconds,
    within_limit,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LARGE = settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WHOLE_SCHEMA_ERRORS = (CompileTimeError, StateBudgetError, EmptyLanguageError)


def check_schema(schema: Any) -> None:
    """The fuzz property for one schema (see the module docstring); a value that is not a schema (neither an
    object nor a boolean) is refused as a constraint, naming what it is."""
    if not isinstance(schema, (dict, bool)):
        with pytest.raises(CompileError, match="a bare string is ambiguous|cannot compile a constraint from"):
            compile(schema, max_seconds=LIMIT_SECONDS)
        return
    try:
        with within_limit(schema), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = compile(schema, max_seconds=LIMIT_SECONDS)
    except SchemaError as error:
        assert error.path.startswith("#") and f"(at schema path {error.path})" in str(error), str(error)
        return
    except DefinitionError as error:
        assert f"'{error.definition}'" in str(error), str(error)
        return
    except GrammarConflictError as error:
        assert str(error).startswith("not L(1): ") and " byte " in str(error), str(error)
        return
    except WHOLE_SCHEMA_ERRORS:
        return
    assert isinstance(compiled, (Constraint, PushdownConstraint))


@FAST
@given(schema_inputs())
@example({"anyOf": [{"$ref": "#"}, {"minimum": 2}]})
def test_json_schema_fuzz(schema: Any) -> None:
    check_schema(schema)


@pytest.mark.slow
@pytest.mark.timeout(LARGE_RUN_SECONDS)
@LARGE
@given(schema_inputs(real_world=True))
def test_json_schema_fuzz_large(schema: Any) -> None:
    with memory_cap():
        check_schema(schema)


@pytest.mark.parametrize(("schema", "path"), [
    ({"$schema": {"type": "object"}}, "#/$schema"),
    ({"allOf": [{"enum": [3]}, {"not": {"oneOf": ["integer", {"maxLength": 4}]}}]}, "#/allOf/1/not/oneOf/0"),
    ({"allOf": [{"enum": [35]}, {"not": {"allOf": None}}]}, "#/allOf/1/not/allOf"),
    ({"type": "integer", "minimum": 10**400}, "#/minimum"),
    ({"type": "integer", "exclusiveMaximum": -(10**400)}, "#/exclusiveMaximum"),
    ({"multipleOf": 10**4000}, "#/multipleOf"),
    ({"minLength": math.inf}, "#/minLength"),
    ({"maxItems": math.nan}, "#/maxItems"),
    ({"enum": [10**5000, 1]}, "#/enum/0"),
    ({"$schema": 10**5000}, "#/$schema"),
    ({"multipleOf": -(10**5000)}, "#/multipleOf"),
])
def test_fuzz_findings_are_schema_errors(schema: Any, path: str) -> None:
    """Inputs the fuzzer found raising TypeError, AttributeError, OverflowError, RecursionError or ValueError
    are refused with a SchemaError at their path."""
    with pytest.raises(SchemaError) as info:
        compile(schema, max_seconds=LIMIT_SECONDS)
    assert info.value.path == path, str(info.value)


def test_lone_surrogates_in_names_and_values_compile() -> None:
    """A lone surrogate in a const or a property name (a UnicodeEncodeError before) is spelled as its JSON escape."""
    assert compile({"const": "\ud800"}).accepts('"\\ud800"')
    named = compile({"properties": {"\udc00": {"type": "integer"}}, "required": ["\udc00"]})
    assert named.accepts('{"\\udc00":1}') and not named.accepts('{"\\udc00":"x"}')


def test_a_large_unique_enum_is_refused_within_the_time_limit() -> None:
    """`uniqueItems` over a 2,000-value enum checks every value against the enum; it ran far past the limit (a fuzzed
    865-value one: 13.8 s under 0.5 s) with no deadline check on the way, then was stopped by the limit, as each check
    flattened the 2,000-value schema again (quadratic, 2.3 s).  Flattened once (`resolve.flatten` keeps it), the
    checks are linear and the schema is refused for its size well within the limit.  The limit is wall time, which
    in a long test session on a busy machine also counts a full collection of the process's objects and the waits
    for a core, so under it either refusal may come; under a loose limit it is the size."""
    schema = {"type": "array", "uniqueItems": True, "items": {"enum": [f"v{i}" for i in range(2000)]}}
    with within_limit("uniqueItems over a 2,000-value enum"):
        with pytest.raises((SchemaError, CompileTimeError)):
            compile(schema, max_seconds=LIMIT_SECONDS)
    with collector_seconds() as collecting:
        started = time.thread_time()
        with pytest.raises(SchemaError, match="uniqueItems"):
            compile(schema, max_seconds=60)
        spent = time.thread_time() - started
    assert spent - collecting[0] < LIMIT_SECONDS, f"refused after {spent:.3f} s of CPU"



def test_a_large_outlined_pushdown_checks_the_limit_every_few_tenths_of_a_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fuzz case whose outlined grammar has 73,507 states was refused at 1.12 s under 0.5 s: laying out the
    grammar and its first tables ran a second (CPU time) between two deadline checks.  The longest such stretch
    of this compile (0.85 s in all) must stay well under the limit's slack.  The cyclic collector stays on during a
    compile, and in a long test session its full collections scan the whole heap; that time is not the compile's
    own work between checks, so it is left out of each stretch."""
    hex_id = {"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"}
    topics = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 1024}}
    key = {"type": "object", "properties": {
        "id": hex_id, "applicationKeyId": hex_id, "applicationId": hex_id,
        "creationDate": {"type": "string", "format": "date-time"},
        "lastUpdated": {"type": "string", "format": "date-time"}, "key": {"type": "string"},
        "status": {"type": "string", "enum": ["active", "inactive"]},
        "deviceIds": {"type": "array", "items": hex_id, "maxItems": 1000},
        "deviceTags": {"type": "array", "maxItems": 100, "items": {"type": "object", "additionalProperties": False,
                                                                    "properties": {
            "key": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
            "value": {"type": "string", "minLength": 1, "maxLength": 255}}}},
        "description": {"type": "string", "maxLength": 32767},
        "filterType": {"oneOf": [{"type": "string", "enum": ["all", "whitelist", "blacklist"]},
                                 {"type": "string", "enum": ["none"]}]},
        "pubTopics": topics, "subTopics": topics}}
    schema = {"type": "object", "properties": {
        "items": {"type": "array", "items": key}, "count": {"type": "integer"}, "totalCount": {},
        "perPage": {"type": "integer"}, "page": {"type": "integer"}, "filter": {"type": "string"},
        "sortDirection": {"type": "string", "enum": ["asc", "desc", "ASC", "DESC", ""]}, "applicationId": hex_id}}
    collecting, compiling = [0.0, 0.0], threading.get_ident()

    def collector_time(phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != compiling:
            return
        if phase == "start":
            collecting[1] = time.thread_time()
        else:
            collecting[0] += time.thread_time() - collecting[1]

    checked = [time.thread_time()]

    def timed_check(stage: str, releasing: float = 0.0) -> None:
        checked.append(time.thread_time() - collecting[0])
        check_deadline(stage, releasing)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("stdsl.") and \
                getattr(module, "check_deadline", None) is check_deadline:
            monkeypatch.setattr(module, "check_deadline", timed_check)
    gc.callbacks.append(collector_time)
    try:
        compiled = compile(schema, max_seconds=60)
    finally:
        gc.callbacks.remove(collector_time)
    checked.append(time.thread_time() - collecting[0])
    assert isinstance(compiled, PushdownConstraint) and compiled.grammar.num_states > 50_000
    assert max(b - a for a, b in zip(checked, checked[1:])) < SLACK_SECONDS
