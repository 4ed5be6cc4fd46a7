"""The JSON-Schema-Test-Suite (draft 2020-12) against the schema compiler and the byte automaton.

For every schema that compiles: each valid instance, written by `dump_in_schema_order`, is
accepted; no invalid instance is accepted in any of several serializations.  Schemas that are
refused must raise SchemaError.  `format` is an assertion here, so the suite's "only an
annotation" cases are skipped and the format-assertion tests of `optional/format` are run instead.
That is the exact language (`strict=False`); the strict default (objects closed to their declared members)
must still accept no invalid instance.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import ANY_VALUE_DEPTH, schema_to_ir
from stdsl.errors import EmptyLanguageError, SchemaError, StateBudgetError
from tests.data_files import JSON_SCHEMA_SUITE as SUITE
from tests.data_files import MASKBENCH, MASKBENCH_ABSENT

FORMATS = ("date", "time", "date-time", "email", "uuid", "uri", "ipv4", "ipv6")
HEAVY_FILES = {"ref.json", "required.json", "properties.json", "items.json", "additionalProperties.json"}
FORMAT_UNPRODUCED = ("leap second, positive time-offset", "leap second, large positive", "leap second, negative",
                     "leap second, large negative", "leap second, with minus offset", "quoted string",
                     "address-literal")
MAX_STATES = 50_000

@dataclass
class Tally:
    """Counts over the suite, and the failures (which must stay empty)."""

    schemas: int = 0
    compiled: int = 0
    refused: int = 0
    too_big: int = 0
    valid_accepted: int = 0
    valid_total: int = 0
    valid_too_deep: int = 0
    valid_unproduced: int = 0
    valid_closed: int = 0
    invalid_rejected: int = 0
    invalid_total: int = 0
    failures: list[str] = field(default_factory=list)


def _serializations(instance: object, schema: object) -> set[str]:
    """Several spellings of one instance (schema order, instance order, ASCII escapes)."""
    out = {json.dumps(instance, separators=(",", ":")), json.dumps(instance, separators=(",", ":"), ensure_ascii=False)}
    try:
        out.add(dump_in_schema_order(instance, schema))
    except SchemaError:
        pass
    return out


def _nesting(value: object) -> int:
    """How many container levels a JSON value nests (scalars: 0)."""
    if isinstance(value, dict):
        return 1 + max((_nesting(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_nesting(v) for v in value), default=0)
    return 0


def _run_group(group: dict, where: str, tally: Tally, unproduced: tuple[str, ...], strict: bool = False) -> None:
    """One suite group; `strict` compiles closed objects, whose valid instances may be rejected."""
    tally.schemas += 1
    schema = group["schema"]
    try:
        node = schema_to_ir(schema, strict=strict)
        automaton = build_automaton(node, MAX_STATES)
    except EmptyLanguageError:
        automaton = None
    except StateBudgetError:
        tally.too_big += 1
        return
    except SchemaError:
        tally.refused += 1
        return
    except Exception as exc:  # noqa: BLE001 - any other exception is a failure to report
        tally.failures.append(f"{where}: {type(exc).__name__}: {exc}")
        return
    tally.compiled += 1
    for test in group["tests"]:
        if "only an annotation" in test["description"]:
            continue
        label = f"{where} / {test['description']}"
        if test["valid"]:
            tally.valid_total += 1
            text = dump_in_schema_order(test["data"], schema)
            if automaton is not None and automaton.accepts(text.encode("utf-8")):
                tally.valid_accepted += 1
            elif _nesting(test["data"]) > ANY_VALUE_DEPTH:
                tally.valid_too_deep += 1
            elif any(phrase in test["description"] for phrase in unproduced):
                tally.valid_unproduced += 1
            elif strict:
                tally.valid_closed += 1
            else:
                tally.failures.append(f"valid rejected: {label}: {text}")
        else:
            tally.invalid_total += 1
            spellings = _serializations(test["data"], schema)
            accepted = [s for s in spellings if automaton is not None and automaton.accepts(s.encode("utf-8"))]
            if accepted:
                tally.failures.append(f"INVALID ACCEPTED: {label}: {accepted[0]}")
            else:
                tally.invalid_rejected += 1


def run_suite(files: list[Path], unproduced: tuple[str, ...] = (), strict: bool = False) -> Tally:
    """Run every group of the given suite files; valid tests described by `unproduced` may be rejected."""
    tally = Tally()
    for path in files:
        for i, group in enumerate(json.loads(path.read_text())):
            _run_group(group, f"{path.name}#{i} {group['description']}", tally, unproduced, strict)
    return tally


def _report(name: str, tally: Tally, seconds: float) -> None:
    print(f"\n{name}: {tally.compiled}/{tally.schemas} schemas compiled ({tally.refused} refused, "
          f"{tally.too_big} over {MAX_STATES} states); valid accepted {tally.valid_accepted}/{tally.valid_total} "
          f"({tally.valid_too_deep} nest deeper than the generic-value bound {ANY_VALUE_DEPTH}, "
          f"{tally.valid_unproduced} documented as not produced, {tally.valid_closed} closed by strict); "
          f"invalid rejected {tally.invalid_rejected}/{tally.invalid_total}; {seconds:.1f}s")


def _core_files(include_heavy: bool) -> list[Path]:
    return [p for p in sorted(SUITE.glob("*.json")) if include_heavy or p.name not in HEAVY_FILES]


def _format_files() -> list[Path]:
    return [SUITE / "optional" / "format" / f"{name}.json" for name in FORMATS]


def test_suite_core() -> None:
    start = time.time()
    tally = run_suite(_core_files(include_heavy=False))
    _report("draft2020-12 core", tally, time.time() - start)
    assert not tally.failures, "\n".join(tally.failures[:30])
    assert tally.compiled >= 100


def test_suite_core_strict_accepts_no_invalid_instance() -> None:
    start = time.time()
    tally = run_suite(_core_files(include_heavy=False), strict=True)
    _report("draft2020-12 core, strict", tally, time.time() - start)
    assert not tally.failures, "\n".join(tally.failures[:30])
    assert tally.valid_closed > 0 and tally.valid_accepted > tally.valid_closed


def test_suite_format_assertions() -> None:
    start = time.time()
    tally = run_suite(_format_files(), FORMAT_UNPRODUCED)
    assert tally.valid_unproduced <= 10
    _report("optional/format (assertion)", tally, time.time() - start)
    assert not tally.failures, "\n".join(tally.failures[:30])
    assert tally.compiled == tally.schemas


@pytest.mark.slow
def test_suite_all_files() -> None:
    start = time.time()
    tally = run_suite(_core_files(include_heavy=True))
    _report("draft2020-12 all", tally, time.time() - start)
    assert not tally.failures, "\n".join(tally.failures[:30])
    assert tally.compiled >= 140


class _SlowSchema(BaseException):
    """A schema that took longer than the per-schema limit of the MaskBench run."""


def _alarm(signum: int, frame: object) -> None:
    raise _SlowSchema


@pytest.mark.slow
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=MASKBENCH_ABSENT)
def test_maskbench_sample_never_accepts_an_invalid_instance() -> None:
    start = time.time()
    tally, slow = Tally(), 0
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for path in sorted(MASKBENCH.glob("*.json"))[::20]:
            signal.alarm(20)
            try:
                _run_group(json.loads(path.read_text()), path.name, tally, ())
            except _SlowSchema:
                slow += 1
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    _report(f"JSONSchemaBench sample (every 20th file; {slow} over 20 s)", tally, time.time() - start)
    assert not [f for f in tally.failures if not f.startswith("valid rejected")], tally.failures[:10]
