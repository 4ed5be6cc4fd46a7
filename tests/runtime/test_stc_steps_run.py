"""`.stc` programs of steps run on the tiny random model (greedy).

Oracle: the same program written as a Python steps program (`@stcon.program` on a function of `s`) with each output
template's compiled constraint: the `.stc` plan drives the same step actions, so every step reads the same prompt
tokens and writes the same tokens. Also: a `for` iteration that fails fails alone, argument mistakes are refused
before any model pass, and `use` runs another program's steps in the same conversation.
"""

from __future__ import annotations

import pytest

import stdsl as stcon
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import OptionError
from stdsl.programs import Program
from stdsl.runtime.program_steps.actions import Gen
from stdsl.runtime.program_steps.record import StepError
from stdsl.runtime.program_steps.stc_steps import StepValues

BRANCHING = '''
param topic: str
system """You answer briefly about {{ topic }}."""
user """Pick a or b."""
output """{kind: "a" | "b"}"""
if kind == "a" {
  user """A number below 100."""
  output """N: {n: int(0..99)}"""
} else {
  output """N: {n: int(100..199)}"""
}
output plan """{xs: list[int(0..9)](2..3)}"""
for x in plan.xs {
  user """Is {{ x }} with {{ n }} good?"""
  output """{v: "yes" | "no"}"""
}
'''


def constraint_of(template: str):
    """The compiled constraint of one output template, as a one-step program compiles it."""
    return Program(f'output """{template}"""').program_constraint()


def python_twin(model, topic: str):
    """BRANCHING written as a Python steps program over the same compiled constraints."""
    kind_c = constraint_of('{kind: "a" | "b"}')
    low, high = constraint_of("N: {n: int(0..99)}"), constraint_of("N: {n: int(100..199)}")
    plan_c = constraint_of("{xs: list[int(0..9)](2..3)}")
    yes_c = constraint_of('{v: "yes" | "no"}')

    def field(name: str, constraint):
        return Gen(name, constraint, read=lambda generation: constraint.parse(generation.text))

    @stcon.program
    def twin(s, topic: str):
        s.system(f"You answer briefly about {topic}.")
        s.user("Pick a or b.")
        s += field("kind", kind_c)
        if s["kind"]["kind"] == "a":
            s.user("A number below 100.")
            s += field("n", low)
        else:
            s += field("n", high)
        s += field("plan", plan_c)
        n = s["n"]["n"]
        branches = s.fork(len(s["plan"]["xs"]))
        for branch, x in zip(branches, s["plan"]["xs"]):
            branch.user(f"Is {x} with {n} good?")
            branch += field("v", yes_c)
        return branches.values("v")

    return twin.run(model, topic=topic, max_tokens=12)


def test_a_stc_program_runs_the_same_steps_as_its_python_twin(tiny_model) -> None:
    program = Program(BRANCHING, "branching.stc")
    run = program.run(tiny_model, {"topic": "the sea"}, max_tokens=12)
    twin = python_twin(tiny_model, "the sea")
    assert [(s.prompt_ids, s.tokens, s.branch) for s in run.steps] == \
        [(s.prompt_ids, s.tokens, s.branch) for s in twin.steps]
    assert run.kind in ("a", "b") and isinstance(run.n, int)
    assert (0 <= run.n <= 99) if run.kind == "a" else (100 <= run.n <= 199)
    assert isinstance(run.plan, StepValues) and 2 <= len(run.plan.xs) <= 3
    assert run.v == [step.value["v"] for step in run.steps if step.branch]
    assert all(v in ("yes", "no") for v in run.v)
    assert [step.branch for step in run.steps if step.branch] == [(i,) for i in range(len(run.plan.xs))]


def test_later_steps_prefill_only_their_own_text(tiny_model) -> None:
    run = Program(BRANCHING, "branching.stc").run(tiny_model, {"topic": "rivers"}, max_tokens=12)
    main = [step for step in run.steps if not step.branch]
    for before, after in zip(main, main[1:]):
        assert after.stats.cached_tokens >= before.stats.prompt_tokens
    assert run.prefilled_tokens < sum(step.stats.prompt_tokens for step in run.steps) / 2


def test_a_failing_iteration_fails_alone_with_its_position(tiny_model) -> None:
    def check(x: int) -> int:
        if x == 2:
            raise ValueError("two is refused")
        return x * 10

    program = Program('''
user """Go."""
output """{n: int(0..9)}"""
for x in [1, 2, 3] {
  call y = check(x)
  user """{{ y }}"""
  output """{w: "ok" | "no"}"""
}
''', "fork.stc", functions={"check": check})
    run = program.run(tiny_model, max_tokens=8)
    assert run.y[0] == 10 and run.y[2] == 30
    assert isinstance(run.y[1], StepError) and run.y[1].branch == (1,) and "two is refused" in str(run.y[1])
    assert isinstance(run.w[1], StepError) and run.w[0] in ("ok", "no") and run.w[2] in ("ok", "no")
    assert "fork[1]" in str(run.y[1])


def test_a_call_checks_its_arguments_against_the_annotations(tiny_model) -> None:
    def shout(word: str) -> str:
        return word.upper()

    program = Program('user """Go."""\noutput """{n: int(0..9)}"""\ncall loud = shout(n)', "typed.stc",
                      functions={"shout": shout})
    with pytest.raises(StepError, match=r"step 'loud' failed: .*word"):
        program.run(tiny_model, max_tokens=6)


class NoModel:
    """A model that fails any use: a run that touches it did a model pass it should not have."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the model was used ({name}) before the program's arguments were checked")


def test_argument_mistakes_are_refused_before_any_model_pass() -> None:
    program = Program('param items\nuser """Go."""\nfor x in items {\n  output """{v: int}"""\n}', "args.stc")
    with pytest.raises(ProgramError, match=r"args.stc:3:10: for over items, which is not a list \(it is int\)"):
        program.run(NoModel(), {"items": 3})
    with pytest.raises(ProgramError, match="parameter items has no value"):
        program.run(NoModel(), {})
    typed = Program('param n: int\noutput """{a: int}"""\noutput """{b: int}"""', "typed.stc")
    with pytest.raises(OptionError, match="n"):
        typed.run(NoModel(), {"n": "five"})


def test_use_runs_another_program_in_the_same_conversation(tmp_path, tiny_model) -> None:
    (tmp_path / "pick.stc").write_text('param what: str\nuser """Pick {{ what }}."""\n'
                                       'output """{choice: "x" | "y"}"""\n')
    (tmp_path / "twice.stc").write_text('param a: str\nuse first = "pick.stc" with what=a\n'
                                        'use second = "pick.stc" with what=first.choice\n'
                                        'return [first.choice, second.choice]\n')
    main = tmp_path / "main.stc"
    main.write_text('system """Be brief."""\nuse both = "twice.stc" with a="letters"\n'
                    'user """Now {{ both | join(" ") }}."""\noutput """{last: int(0..9)}"""\n')
    run = Program.from_file(main).run(tiny_model, max_tokens=6)
    assert all(choice in ("x", "y") for choice in run.both) and len(run.both) == 2
    assert isinstance(run.last, int)
    assert [step.name for step in run.steps] == ["choice", "choice", "last"]
    assert run.steps[1].stats.cached_tokens >= run.steps[0].stats.prompt_tokens


def test_map_runs_each_input_as_its_own_run(tiny_model) -> None:
    program = Program(BRANCHING, "branching.stc")
    runs = program.map([{"topic": "the sea"}, {"topic": 3}, {"topic": "rivers"}], model=tiny_model, max_tokens=12)
    assert isinstance(runs[1], OptionError)
    for run, topic in zip((runs[0], runs[2]), ("the sea", "rivers")):
        alone = program.run(tiny_model, {"topic": topic}, max_tokens=12)
        assert [(s.name, s.branch, s.tokens) for s in run.steps] == [(s.name, s.branch, s.tokens) for s in alone.steps]


FUSED = '''
user """Review it."""
output """Verdict: {verdict: "accept" | "reject"}"""
if verdict == "BRANCH" {
  output """; reasons: {reasons: list[str(/[a-z]{2,8}/)](1..2, sep=", ")}"""
}
'''


@pytest.mark.parametrize("branch", ["accept", "reject"])
def test_branches_on_the_step_own_value_decode_in_one_step(tiny_model, branch: str) -> None:
    program = Program(FUSED.replace("BRANCH", branch), "fused.stc")
    assert program.plan is not None
    constraint = program.branched_constraint(next(iter(program.plan.fused.values())), {})
    for seed in range(3):
        run = program.run(tiny_model, max_tokens=14, temperature=1.0, seed=seed)
        (step,) = run.steps
        assert step.kind == "branched" and constraint.automaton.accepts(step.text.encode())
        assert len(step.tokens) <= 14
        assert ("reasons" in run) == (run.verdict == branch)
        if run.verdict == branch:
            assert 1 <= len(run.reasons) <= 2 and all(reason.isalpha() for reason in run.reasons)


def test_certified_fields_leave_every_step_token_identical(tiny_model) -> None:
    program = Program('''user """Two people."""
output """Verdict: {verdict: "accept" | "reject"}"""
if verdict == "accept" {
  output """; {who: { name: str(1..8), age: int(0..99) }} and {other: { name: str(1..8), age: int(0..99) }}"""
}
user """Two more."""
output """{a: { name: str(1..8), age: int(0..99) }} {b: { name: str(1..8), age: int(0..99) }}"""
''', "certified.stc")
    plain = program.run(tiny_model, max_tokens=60)
    certified = program.run(tiny_model, max_tokens=60, parallel_fields=True)
    assert [s.kind for s in plain.steps] == ["branched", "output"]
    assert [(s.name, s.tokens) for s in certified.steps] == [(s.name, s.tokens) for s in plain.steps]
