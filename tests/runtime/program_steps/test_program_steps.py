"""Python programs of steps (`@stcon.program` on a function of the state `s`), on the tiny random model (greedy).

Oracles: a run on an engine without a prompt cache (every step re-prefills the whole transcript), branches run one
by one as programs of their own, the model's chat template rendering the finished messages.
"""

from __future__ import annotations

import enum
import re

import pytest
from pydantic import BaseModel, Field

import stdsl as stcon
from stdsl import gen, select
from stdsl.errors import CompileError, OptionError, SchemaError
from stdsl.programs import StepsProgram
from stdsl.runtime.decode import engine_for
from stdsl.runtime.engine import Engine
from tests.runtime.engine_oracle import agrees

WORD = stcon.Regex("[a-z]{2,6}")


@stcon.program
def chain(s, topic: str):
    s.system("You answer briefly.")
    s.user(f"Name a word about {topic}.")
    s += gen("first", WORD, max_tokens=8)
    s.user("Another one, and a number.")
    with s.assistant():
        s += "Word: "
        s += gen("second", WORD, max_tokens=8)
        s += "\nNumber: "
        s += gen("n", int, max_tokens=4)
    s.user("Yes or no?")
    s += select("yes", ["yes", "no"])
    return s["n"]


def run_uncached(model, monkeypatch, program, **args):
    """Run `program` on an engine that keeps no prompt cache: every step prefills its whole prompt."""
    engine_for(model)
    engine = Engine(model, prompt_cache_bytes=0)
    monkeypatch.setattr(model, "_stdsl_engine", engine)
    try:
        return program.run(model, **args)
    finally:
        monkeypatch.undo()
        engine.close()


def _steps(run):
    return [(step.name, step.branch, step.text) for step in run.steps]


def test_steps_reuse_the_kv_cache_and_match_full_prefill(tiny_model, monkeypatch) -> None:
    full = run_uncached(tiny_model, monkeypatch, chain, topic="the sea")
    prefilled_full = [step.prefilled_tokens for step in full.steps]
    assert all(step.stats.cached_tokens == 0 for step in full.steps)
    cached = chain.run(tiny_model, topic="the sea")
    assert _steps(cached) == _steps(full)
    assert cached.text == full.text
    steps = cached.steps
    for before, after in zip(steps, steps[1:]):
        # every token the previous step read, and all but its last emitted tokens, come from the cache
        assert after.stats.cached_tokens >= before.stats.prompt_tokens
    assert sum(s.prefilled_tokens for s in steps) * 2 < sum(prefilled_full)
    assert isinstance(cached["n"], int) and cached.returned == cached["n"]
    assert cached["yes"] in ("yes", "no")
    assert re.fullmatch("[a-z]{2,6}", cached.first) and re.fullmatch("[a-z]{2,6}", cached.second)


def test_chat_transcript_is_the_templates_rendering(tiny_model) -> None:
    run = chain.run(tiny_model, topic="rain")
    messages = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "Name a word about rain."},
                {"role": "assistant", "content": run.first},
                {"role": "user", "content": "Another one, and a number."},
                {"role": "assistant", "content": f"Word: {run.second}\nNumber: {run.n}"},
                {"role": "user", "content": "Yes or no?"}]
    expected = tiny_model.tokenizer.apply_chat_template(messages, add_generation_prompt=True) + run.yes
    assert run.text == expected


@stcon.program
def fan_out(s, texts: list):
    s.user("List some animals.")
    s += gen("animal", WORD, max_tokens=8)
    branches = s.fork(texts)
    branches += gen("more", WORD, max_tokens=8)
    return branches.values("more")


def test_forks_in_one_batch_equal_branches_one_by_one(tiny_model) -> None:
    texts = [" and", " then", ", also", "\n"]
    together = fan_out.run(tiny_model, texts=texts)
    parent, branches = together.steps[0], together.steps[1:]
    assert [step.branch for step in together.steps] == [(), (0,), (1,), (2,), (3,)]
    for step, text in zip(branches, texts):
        assert step.prompt_ids == parent.prompt_ids + parent.tokens + tiny_model.tokenizer.encode(text)
        # each branch decoded alone (greedy, one sequence) gives its tokens, or first differs at a near-tie
        assert agrees(tiny_model, step.prompt_ids, WORD, 8, step.tokens)
        assert step.stats.cached_tokens >= parent.stats.prompt_tokens
    assert together.returned == [step.value for step in branches]


@stcon.program
def shared_tail(s, n: int):
    s.user("List some animals.")
    s += gen("animal", WORD, max_tokens=8)
    branches = s.fork(n)
    for i, branch in enumerate(branches):
        branch.user(f"Now a longer instruction that every branch gives alike, word for word, then its own: {i}")
        branch += gen("more", WORD, max_tokens=8)
    return branches.values("more")


def test_fork_branches_share_the_text_they_append_alike(tiny_model) -> None:
    run = shared_tail.run(tiny_model, n=4)
    branches = run.steps[1:]
    alike = len(tiny_model.tokenizer.encode("Now a longer instruction that every branch gives alike, word for word"))
    # one branch leads; the others find its prompt in the cache and prefill only what differs from it
    followers = [step for step in branches if step.prefilled_tokens < alike]
    assert len(followers) >= len(branches) - 1
    assert all(isinstance(value, str) for value in run.returned)


@stcon.program
def one_fails(s):
    s.user("Spell.")
    branches = s.fork(3)
    for i, branch in enumerate(branches):
        branch += gen("word", stcon.Regex("[0-9]{6}"), max_tokens=3 if i == 1 else 8)
    return branches.values("word")


def test_a_failing_branch_fails_alone_with_its_position(tiny_model) -> None:
    run = one_fails.run(tiny_model)
    first, failed, last = run.returned
    assert re.fullmatch("[0-9]{6}", first) and re.fullmatch("[0-9]{6}", last)
    assert isinstance(failed, stcon.StepError) and failed.branch == (1,)
    assert "fork[1]" in str(failed) and "'word'" in str(failed)
    assert [step.branch for step in run.errors] == [(1,)]


class Mood(enum.Enum):
    calm = "calm"
    loud = "loud"


class Pet(BaseModel):
    name: str = Field(max_length=8)
    legs: int = Field(ge=0, le=8)


@stcon.program
def typed(s):
    s += "Pet: "
    s += gen("pet", Pet, max_tokens=40)
    s += "\nMood: "
    s += gen("mood", Mood)
    s += "\nHappy: "
    s += gen("happy", bool)
    s += "\nWeight: "
    s += gen("weight", float, max_tokens=6)
    s += "\nSound: "
    s += gen("sound", ["woof", "meow"])
    s += "\nNote: "
    s += gen("note", max_tokens=5)


def test_values_are_typed_as_soon_as_their_step_ends(tiny_model) -> None:
    run = typed.run(tiny_model, temperature=1.0, seed=5)
    assert isinstance(run.pet, Pet) and isinstance(run.mood, Mood) and isinstance(run.happy, bool)
    assert isinstance(run.weight, float) and run.sound in ("woof", "meow") and isinstance(run.note, str)
    assert [step.kind for step in run.steps] == ["gen", "gen", "gen", "gen", "select", "gen"]
    assert run.text.startswith("Pet: " + run.steps[0].text + "\nMood: ")
    assert run.stats.passes == sum(step.stats.passes for step in run.steps)


@stcon.program
def with_tool(s, a: int):
    s += f"{a} plus one is "
    value = s.call("plus", lambda x: x + 1, a)
    s += f"{value}. Say a word: "
    s += gen("word", WORD, max_tokens=8)
    return s["plus"]


def test_a_call_step_is_recorded_and_read_like_a_value(tiny_model) -> None:
    run = with_tool.run(tiny_model, a=41)
    assert run.returned == 42 == run.plus
    assert [(step.kind, step.name, step.value) for step in run.steps][0] == ("call", "plus", 42)
    assert "41 plus one is 42. Say a word: " in run.text


def test_map_runs_inputs_together_in_order(tiny_model) -> None:
    topics = ["sun", "moon", "stars"]
    results = chain.map([{"topic": t} for t in topics] + ["bad"], model=tiny_model)
    assert [r.text for r in results[:3]] == [chain.run(tiny_model, topic=t).text for t in topics]
    assert isinstance(results[3], OptionError)


def test_bad_steps_fail_before_any_model_pass(tiny_model) -> None:
    engine = engine_for(tiny_model)
    before = engine.metrics()["passes"]
    with pytest.raises(CompileError, match="cannot compile a constraint from int"):
        gen("x", 42)
    with pytest.raises(SchemaError):
        gen("x", {"type": "integer", "minimum": 5, "maximum": 1, "multipleOf": "a"})
    with pytest.raises(OptionError, match="non-empty list"):
        select("x", [])
    with pytest.raises(OptionError, match="more than once"):
        select("x", ["a", "b", "a"])
    with pytest.raises(OptionError, match="option 1 must be a non-empty str"):
        select("x", ["a", ""])
    with pytest.raises(OptionError, match="step 'x'.*max_tokns"):
        gen("x", WORD, max_tokns=3)
    with pytest.raises(OptionError, match="stop applies to free text"):
        gen("x", WORD, stop="\n")
    with pytest.raises(OptionError, match="cannot set 'chat'"):
        gen("x", chat=False)
    with pytest.raises(OptionError, match="unknown option 'temprature'"):
        chain.run(tiny_model, topic="x", temprature=0.5)
    with pytest.raises(CompileError, match="topic"):
        chain.run(tiny_model, subject="x")
    with pytest.raises(CompileError, match="steps program"):
        stcon.compile(chain)
    assert engine.metrics()["passes"] == before


def test_template_functions_stay_templates() -> None:
    @stcon.program
    def describe(animal: str):
        '''
        user """Describe a {{ animal }}."""
        output """{name: str(1..10)}"""
        '''

    assert describe.program is not None
    assert isinstance(chain, StepsProgram)


@stcon.program
def raises_midway(s):
    s.user("Spell.")
    branches = s.fork(2)
    branches += gen("word", WORD, max_tokens=8)
    raise RuntimeError("the program's own error")


@stcon.program
def main_line_fails(s):
    s.user("Digits.")
    s += gen("digits", stcon.Regex("[0-9]{6}"), max_tokens=2)


def test_a_program_that_raises_or_fails_on_its_main_line_ends_clean(tiny_model) -> None:
    engine = engine_for(tiny_model)
    with pytest.raises(RuntimeError, match="the program's own error"):
        raises_midway.run(tiny_model)
    with pytest.raises(stcon.StepError, match="step 'digits' failed: BudgetError") as caught:
        main_line_fails.run(tiny_model)
    assert caught.value.branch == () and caught.value.step == "digits"
    assert engine.metrics()["rows_active"] == 0 and engine.metrics()["rows_queued"] == 0
