"""A `for` over a bounded list its own step generates decodes with that step in one engine run (the tiny random model):
the text is in the language of the length it chose, read back as the list and one value per iteration; a tight
`max_tokens` still gives a valid text over every iteration (or the budget error before decoding); certified fields
inside the loop leave every token as sequential decoding writes it."""

from __future__ import annotations

import pytest

from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import BudgetError
from stdsl.programs import Program
from stdsl.runtime.certified.blocks import block_plan
from stdsl.runtime.program_steps.record import StepError

LOOP = '''
user """Plan it."""
output plan """Plan: {xs: list[int(0..9)](1..3, sep=", ")}"""
for x in plan.xs {
  output """ - {d: "go" | "stop"} {n: int(0..99)}"""
}
user """Done?"""
output """{done: bool}"""
'''


def test_a_compiled_loop_decodes_the_list_and_its_iterations_in_one_step(tiny_model) -> None:
    program = Program(LOOP, "loop.stc")
    assert program.plan is not None
    constraint = program.looped_constraint(next(iter(program.plan.fused_loops.values())), {})
    for seed in range(3):
        run = program.run(tiny_model, max_tokens=40, temperature=1.0, seed=seed)
        assert [step.kind for step in run.steps] == ["looped", "output"]
        step = run.steps[0]
        assert constraint.automaton.accepts(step.text.encode()) and len(step.tokens) <= 40
        count = len(run.plan.xs)
        assert 1 <= count <= 3 and len(run.d) == len(run.n) == count
        expected = "Plan: " + ", ".join(map(str, run.plan.xs)) + "".join(
            f" - {d} {n}" for d, n in zip(run.d, run.n))
        assert step.text == expected
        assert isinstance(run.done, bool)


@pytest.mark.parametrize("max_tokens", range(4, 14))
def test_a_tight_budget_holds_over_every_iteration(tiny_model, max_tokens: int) -> None:
    program = Program(LOOP, "loop.stc")
    constraint = program.looped_constraint(next(iter(program.plan.fused_loops.values())), {})  # type: ignore[union-attr]
    for seed in range(2):
        try:
            run = program.run(tiny_model, max_tokens=max_tokens, temperature=1.0, seed=seed)
        except StepError as error:
            assert isinstance(error.__cause__, BudgetError), error
            needed = int(str(error.__cause__).split("needs ")[1].split()[0])
            assert needed > max_tokens
            continue
        step = run.steps[0]
        assert len(step.tokens) <= max_tokens and constraint.automaton.accepts(step.text.encode())
        assert len(run.d) == len(run.plan.xs)


def test_certified_fields_inside_the_loop_are_token_identical(tiny_model) -> None:
    program = Program('''user """People."""
output """{xs: list[int(0..9)](1..2, sep=",")}:"""
for x in xs {
  output """ {who: { name: str(1..6), age: int(0..99) }} and {other: { name: str(1..6), age: int(0..99) }};"""
}
''', "certified.stc")
    loop = program.looped_constraint(next(iter(program.plan.fused_loops.values())), {})  # type: ignore[union-attr]
    assert len(block_plan(loop.automaton)) >= 2  # fields the certified decoder can draft in parallel
    plain = program.run(tiny_model, max_tokens=80)
    certified = program.run(tiny_model, max_tokens=80, parallel_fields=True)
    assert [s.kind for s in plain.steps] == ["looped"]
    assert [(s.name, s.tokens) for s in certified.steps] == [(s.name, s.tokens) for s in plain.steps]
    assert certified.who == plain.who and len(plain.who) == len(plain.xs)


def test_a_loop_that_cannot_be_compiled_is_refused_before_any_model_pass() -> None:
    program = Program('param p: str\noutput """{xs: list[int(0..9)](1..2)}:"""\nfor x in xs {\n'
                      '  output """{{ p }}{d: str(/[a-z]{1,4}/)}"""\n}\n', "bad.stc")
    with pytest.raises(ProgramError, match=r"bad\.stc:4:\d+: for over xs compiled into its output"):
        program.run(None, {"p": ""})
