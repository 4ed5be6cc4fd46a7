"""How a program's steps reach the engine (tiny random model, greedy): a fork's branches decode as rows of one batch
(passes counted by the engine), a watcher hears each step as it ends, and an aborted run cancels its rows in flight
and decodes no later step."""
from __future__ import annotations

import threading
import time

import pytest

import stdsl as stcon
from stdsl import gen
from stdsl.errors import Cancelled
from stdsl.runtime.engine import Engine
from stdsl.runtime.program_steps.run import run_program
from stdsl.runtime.program_steps.state import ProgramRunState

WORD = stcon.Regex("[a-z]{2,6}")


@pytest.fixture
def engine(tiny_model):
    """An engine of the test's own (with a prompt cache), so its pass counter sees this test's passes alone."""
    own = Engine(tiny_model)
    yield own
    own.close()


@stcon.program
def equal_branches(s, k: int):
    s.user("List some animals.")
    s += gen("animal", WORD, max_tokens=8)
    branches = s.fork(k)
    branches += gen("more", stcon.Regex("[a-z]{24}"), max_tokens=24)
    return branches.values("more")


def passes_of(model, engine, k: int) -> tuple[int, int, list]:
    """Engine passes of one run of `equal_branches` with `k` branches, the main line's passes, the branch steps."""
    before = engine.metrics()["passes"]
    run = run_program(ProgramRunState(model, {}, engine=engine), equal_branches.function, (k,), {})
    main, *branches = run.steps
    return engine.metrics()["passes"] - before, main.stats.passes, branches


def test_forks_of_k_equal_branches_take_one_branchs_passes(tiny_model, engine) -> None:
    one, main_one, (alone,) = passes_of(tiny_model, engine, 1)
    engine.prompt_cache.clear()
    four, main_four, branches = passes_of(tiny_model, engine, 4)
    assert main_one == main_four
    assert all(step.tokens == alone.tokens for step in branches)  # equal branches decode alike (greedy)
    fork_one, fork_four = one - main_one, four - main_four
    # one branch leads: the others join once its prompt is prefilled (the cache then serves it to them), so it
    # is a few passes ahead of them; after that every pass decodes all four rows
    assert fork_four <= fork_one + 5  # the slack the bound had while fork_one counted an unused pipelined pass
    # decoded one after another they would take every branch's passes; a fork's engine passes exceed its branch's
    # own by one, the pass that feeds its prompt (no step is pipelined where a draw may finish the automaton, so no
    # pass is queued that a row never uses: `pipelining.py`)
    assert sum(step.stats.passes for step in branches) >= 4 * (fork_one - 1) > fork_four


def test_a_watcher_hears_each_step_as_it_ends_in_program_order(tiny_model, engine) -> None:
    heard: list[tuple[str, object, bool]] = []
    state = ProgramRunState(tiny_model, {}, lambda record: heard.append((record.name, record.value, record.done)),
                            engine=engine)
    run = run_program(state, equal_branches.function, (2,), {})
    assert heard == [(step.name, step.value, True) for step in run.steps]


@stcon.program
def long_chain(s):
    s.user("Spell.")
    s += gen("short", WORD, max_tokens=8)
    s += gen("long", stcon.Regex("[a-z]{400}"), max_tokens=400)
    for i in range(3):
        s += gen(f"later{i}", WORD, max_tokens=8)


def test_an_aborted_run_cancels_its_row_in_flight_and_decodes_no_later_step(tiny_model, engine) -> None:
    state = ProgramRunState(tiny_model, {}, engine=engine)
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            run_program(state, long_chain.function, (), {})
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 60
    while not (len(state.records) > 1 and engine.metrics()["rows_active"] == 1):
        assert time.monotonic() < deadline, "the long step never reached the engine"
        time.sleep(0.01)
    passes = engine.metrics()["passes"]
    state.abort()
    worker.join(timeout=60)
    assert not worker.is_alive()
    (error,) = outcome
    assert isinstance(error, stcon.StepError) and error.step == "long" and isinstance(error.__cause__, Cancelled)
    short, long, *later = state.records
    assert short.error is None and isinstance(long.error.__cause__, Cancelled)
    assert all(record.error is not None and record.stats is None for record in later)
    metrics = engine.metrics()
    assert metrics["rows_active"] == 0 and metrics["rows_queued"] == 0
    assert metrics["passes"] - passes < 50  # it stopped well short of the 400 letters' passes
