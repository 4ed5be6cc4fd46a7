"""Programs on a model: literal text is forced (passes = sampled tokens) and results come back typed."""

from __future__ import annotations

import pytest

import stdsl as stcon
from stdsl.programs import Program

REVIEW = '''
param text: str
user """Review: {{ text }}"""
output """
Verdict: {verdict: "accept" | "reject" | "revise"}
Score: {score: int(1..10)}
Reasons:
{reasons: list[str(1..30)](1..3, sep="\\n")}
Record: {person: {name: str(1..20), age: int(0..130)}}
"""
'''


def test_literals_cost_no_pass(tiny_model) -> None:
    prog = Program(REVIEW, "review.stc")
    result = prog.run(tiny_model, {"text": "a paper"}, max_tokens=200, temperature=1.0, seed=3)
    constraint = prog.constraint({"text": "a paper"})
    assert constraint.accepts(result.text)
    stats = result.stats
    assert stats.passes == stats.sampled_tokens
    assert result.verdict in ("accept", "reject", "revise")
    assert 1 <= result.score <= 10
    assert 1 <= len(result.reasons) <= 3
    assert 0 <= result.person.age <= 130
    assert result.text.startswith("Verdict: ")
    # Every literal is emitted without a pass: the forced tokens cover at least the literal
    # text that the planner can commit ("Verdict: " is fed with the prompt, before any pass).
    assert stats.forced_tokens >= 4
    assert set(result.to_dict()) == {"verdict", "score", "reasons", "person"}


def test_decorated_program_with_pydantic_and_enum(tiny_model) -> None:
    import enum

    from pydantic import BaseModel

    class Mood(enum.Enum):
        happy = "happy"
        sad = "sad"

    class Pet(BaseModel):
        name: str
        legs: int

    @stcon.program
    def describe(animal: str):
        '''
        user """Describe a {{ animal }}."""
        output """Pet: {pet: Pet}
        Mood: {mood: Mood}"""
        '''

    result = describe("cat", model=tiny_model, max_tokens=120, temperature=1.0, seed=1)
    assert isinstance(result.pet, Pet)
    assert isinstance(result.mood, Mood)
    assert result.stats.passes == result.stats.sampled_tokens


def test_program_returned_string(tiny_model) -> None:
    @stcon.program
    def pick(options: list):
        choices = " | ".join(f'"{o}"' for o in options)
        return f'output """Choice: {{choice: {choices}}}"""'

    result = pick(["red", "blue"], model=tiny_model, max_tokens=20)
    assert result.choice in ("red", "blue")


def test_budget_too_small_is_reported(tiny_model) -> None:
    prog = Program(REVIEW, "review.stc")
    with pytest.raises(stcon.BudgetError):
        prog.run(tiny_model, {"text": "x"}, max_tokens=5)


def test_generate_takes_a_program_and_a_program_function(tiny_model) -> None:
    """Issue 15 item 7: `stdsl.generate(constraint=...)` accepts a `Program` and a `@program` function."""
    prog = Program('param label = "Count"\noutput """{{ label }}: {count: int(1..3)}"""', "count.stc")
    result = stcon.generate(tiny_model, "Count to three.", constraint=prog, max_tokens=20, temperature=1.0, seed=1)
    assert result.text.startswith("Count: ")
    assert 1 <= result.value["count"] <= 3

    @stcon.program
    def pick():
        '''
        output """Pick: {choice: "red" | "blue"}"""
        '''

    assert stcon.compile(pick) is pick.program.constraint({})
    result = stcon.generate(tiny_model, "Pick a colour.", constraint=pick, max_tokens=20)
    assert result.value["choice"] in ("red", "blue")


def test_a_program_with_required_parameters_is_refused_as_a_bare_constraint() -> None:
    prog = Program('param text: str\nuser """{{ text }}"""\noutput """{a: int}"""', "p.stc")
    with pytest.raises(stcon.CompileError, match="parameters text have no default"):
        stcon.compile(prog)
