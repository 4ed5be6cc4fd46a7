"""A compile time limit refuses a constraint that takes too long, promptly, and leaves no limit behind."""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable

import numpy as np
import pytest

import stdsl.caches
from stdsl.compiler import deadline
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization import minimize
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.constraint import Regex, compile
from stdsl.compiler.deadline import RELEASE_CHUNK, check_deadline, compile_deadline, released, released_keys
from stdsl.compiler.pushdown.grammar import GrammarConflictError
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import CompileError, CompileTimeError, StateBudgetError
from tests.compiler.fuzz.time_limit import collector_seconds
from tests.data_files import MASKBENCH, MASKBENCH_ABSENT

SLOW = "(a|b)*a(a|b){16}"


def test_a_slow_compile_is_refused_soon_after_the_limit() -> None:
    start = time.perf_counter()
    with pytest.raises(CompileTimeError, match="0.2 s limit"):
        compile(Regex(SLOW), max_seconds=0.2)
    assert time.perf_counter() - start < 1.5


def test_the_limit_is_a_compile_error_and_does_not_outlive_its_block() -> None:
    assert issubclass(CompileTimeError, CompileError)
    with compile_deadline(1e-9):
        time.sleep(0.001)
        with pytest.raises(CompileTimeError):
            check_deadline("a test")
    check_deadline("after the block")
    assert compile(Regex("[ab]{3}"), max_seconds=5.0).accepts(b"aba")


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        with compile_deadline(0):
            pass


OVERSHOOT_CASES = [
    ("x(?:(?:(?:ab){0,40}c){0,40}d){0,300}", "counted repetition|minimization|NFA construction", 0.3),
    ("(a|b)*a(a|b){21}", "determinization", 1.0),
    ("(?:[a-z]{0,80}x){0,200}y", "determinization", 1.0),
]


@pytest.mark.parametrize(("pattern", "stage", "limit"), OVERSHOOT_CASES)
def test_the_limit_is_honoured_within_ten_percent(pattern: str, stage: str, limit: float) -> None:
    """Every long loop checks the limit: the refusal comes at most 10% after it (plus 50 ms of scheduling on a
    shared machine), in the stage that was running, half-built NFA freed included.  Each case needs several times
    its limit in its stage on any machine (the state budget is lifted so that only the clock stops the build); a
    counted repetition minimizes each count's automaton, whose own checks name minimization.
    Time the process's garbage collector ran is not counted (see `time_limit`)."""
    start = time.perf_counter()
    with collector_seconds() as collecting, pytest.raises(CompileTimeError, match=stage):
        compile(Regex(pattern), max_seconds=limit, max_states=10**8)
    assert time.perf_counter() - start - collecting[0] < 1.1 * limit + 0.05


def _refused_after(limit: float, work: Callable[[], object], collector_counted: bool = False) -> float:
    """Seconds until `work`, run under a `limit` second compile limit, was refused (the smaller of wall and thread
    CPU time, as `tests/compiler/fuzz/time_limit.py` counts them: a loaded machine slows the wall clock only).
    The collector's time is left out, or with `collector_counted` counted with every object made before frozen
    (`gc.freeze`), so that it only walks what `work` makes: a collection the work's own garbage brings is its time."""
    if collector_counted:
        gc.collect()
        gc.freeze()
    try:
        wall, cpu = time.perf_counter(), time.thread_time()
        with collector_seconds() as collecting, pytest.raises(CompileTimeError):
            with compile_deadline(limit):
                work()
        elapsed = min(time.perf_counter() - wall, time.thread_time() - cpu)
    finally:
        if collector_counted:
            gc.unfreeze()
    return elapsed if collector_counted else elapsed - collecting[0]


def test_freeing_a_large_construction_checks_the_limit() -> None:
    """A subset construction's state sets and an NFA's move lists are freed a block at a time with a check between
    (`deadline.released`, `released_keys`): freed at once, MCPspec's largest body took 0.11 s of CPU without a
    check.  Under a limit already past, freeing these two million sets is refused after the first block."""
    sets = [frozenset((i, i + 1, i + 2)) for i in range(2_000_000)]
    kernels = {(i, i + 1): i for i in range(2_000_000)}
    assert _refused_after(0.001, lambda: released(sets, "a test")) < 0.05
    assert _refused_after(0.001, lambda: released_keys(kernels, "a test")) < 0.05
    assert len(sets) >= 2_000_000 - 2 * RELEASE_CHUNK and len(kernels) >= 2_000_000 - 2 * RELEASE_CHUNK
    released(sets, "a test")
    released_keys(kernels, "a test")
    assert not sets and not kernels


def test_listing_a_large_nfas_moves_checks_the_limit() -> None:
    """The first wide level of a subset construction lists every NFA state's class moves (`_ClassMoves.class_moves`):
    0.4 s for these 300,000 states in one stretch before it was checked a chunk at a time, most of it collecting the
    million tuples it made (the listing now makes none)."""
    nfa = build_nfa(parse_regex("[ab]*a(?:[ab]{1000}){300}"))
    assert _refused_after(0.05, lambda: determinize(nfa, 10**8), collector_counted=True) < 0.05 * 1.1 + 0.05


def test_hopcroft_refinement_checks_the_limit_within_a_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refinement round over a large splitter (the first ones hold half the states) checks the limit as it goes:
    the limit was checked every 64 rounds, and one round over 150,000 states took 0.3 s.  The moves into each
    state are listed before the limit starts, so that only the rounds run under it."""
    states = 150_000
    rng = np.random.default_rng(0)
    table = np.stack([np.arange(1, states + 1) % states, rng.integers(0, states, states),
                      rng.integers(0, states, states), np.arange(states) * 7 % states], axis=1)
    accepting = rng.random(states) < 0.5
    entering = minimize.entering_symbols(table)
    monkeypatch.setattr(minimize, "entering_symbols", lambda _: entering)
    assert _refused_after(0.05, lambda: minimize.nerode_blocks(table, accepting)) < 0.05 * 1.1 + 0.05


def _table_of_runs(states: int, width: int, seed: int) -> np.ndarray:
    """A DFA-like table: about half its moves live, each to one of the next few states (the runs a sort meets in a
    product's or a subset construction's table)."""
    rng = np.random.default_rng(seed)
    targets = (np.arange(states)[:, None] + rng.integers(1, 5, (states, width))) % states
    return np.where(rng.random((states, width)) < 0.6, targets, -1).astype(np.int32)


def test_listing_the_moves_into_each_state_checks_the_limit() -> None:
    """`entering_symbols` (the start of Hopcroft's refinement) listed, keyed, sorted and grouped all of a table's
    moves with two checks between: 0.16 s past a 50 ms limit for these 19 million cells (MaskBench o21135 and
    sourcery_yaml: 0.13-0.19 s of CPU on a loaded machine).  The listing and grouping now go a block at a time."""
    table = _table_of_runs(600_000, 32, 1)
    assert _refused_after(0.05, lambda: minimize.entering_symbols(table)) < 0.05 * 1.1 + 0.05


def test_breadth_first_numbering_checks_the_limit() -> None:
    """`bfs_order` found each state's distinct successors with one sort over every live cell of the table before
    its first check: 0.17 s past a 50 ms limit for these 7 million cells.  It now sorts a block of rows at a time."""
    table = _table_of_runs(300_000, 24, 2)
    assert _refused_after(0.05, lambda: minimize.bfs_order(table)) < 0.05 * 1.1 + 0.05


DEADLINE_GAP_FILES = ["Snowplow---sp_261_Normalized.json", "MCPspec---ServerResult.json", "Github_ultra---o21135.json"]


def _longest_stretch(schema: dict) -> float:
    """The longest stretch of thread CPU between two deadline checks of one compile (the collector's left out)."""
    checked: list[float] = []

    class TimedClock:
        """`time` as the deadline module reads it: every check's time noted."""

        @staticmethod
        def perf_counter() -> float:
            checked.append(time.thread_time() - collecting[0])
            return time.perf_counter()

    deadline.time = TimedClock  # type: ignore[assignment]
    stdsl.caches.clear()
    with collector_seconds() as collecting:
        try:
            compile(schema, max_states=100_000, max_seconds=60, strict=False)
        except (StateBudgetError, GrammarConflictError):
            pass
        checked.append(time.thread_time() - collecting[0])
    return max(b - a for a, b in zip(checked, checked[1:]))


@pytest.mark.slow
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=MASKBENCH_ABSENT)
@pytest.mark.parametrize("name", DEADLINE_GAP_FILES)
def test_maskbench_compiles_check_the_limit_at_least_every_tenth_of_a_second(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MaskBench schemas whose compiles had the longest stretches without a deadline check (subset construction's
    move listing, a pushdown body's table, Hopcroft refinement and renumbering of a large product: 0.24-0.45 s of
    CPU each): no stretch between two checks is longer than 0.15 s of thread CPU time, the collector's left out."""
    monkeypatch.setattr(deadline, "time", deadline.time)  # restored after `_longest_stretch` replaces it
    longest = _longest_stretch(json.loads((MASKBENCH / name).read_text())["schema"])
    assert longest < 0.15, f"{longest:.3f} s of CPU between two deadline checks"


FRESH_PROCESS_GAP_FILES = ["JsonSchemaStore---sourcery_yaml_schema.json", "Github_ultra---o69209.json"]


@pytest.mark.slow
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=MASKBENCH_ABSENT)
@pytest.mark.parametrize("name", FRESH_PROCESS_GAP_FILES)
def test_maskbench_compiles_in_a_fresh_process_check_the_limit_at_least_every_tenth_of_a_second(name: str) -> None:
    """As above, compiled in a child forked for it, as a server's worker or `jsonschema_coverage.py` compiles: there
    every large array is fresh memory, and its page faults made stretches of CPU that a long test process, reusing
    its freed memory, does not see: 0.47 s filling an intersection's table (sourcery_yaml, refused at the state
    budget) and 0.98 s filling a pushdown call table (o69209, refused as not LL(1))."""
    schema = json.loads((MASKBENCH / name).read_text())["schema"]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            os.write(write, repr(_longest_stretch(schema)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found = pipe.read()
    os.waitpid(child, 0)
    assert found, "the child compiling the schema died"
    assert float(found) < 0.15, f"{float(found):.3f} s of CPU between two deadline checks"
