"""The `.stc` programs of steps in examples/steps/ decoded on the embedded SmolLM2: every step's constraint holds,
every value has its type, and later steps read earlier ones from the prompt cache."""

from __future__ import annotations

import re
from pathlib import Path

from stdsl.programs import Program
from stdsl.runtime.program_steps.stc_steps import StepValues

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "steps"
SENTENCE = re.compile(r"[A-Z][a-z ,']{10,100}\.")


def example(name: str, **functions) -> Program:
    return Program.from_file(EXAMPLES / f"{name}.stc", functions=functions or None)


def reuses(run) -> None:
    """Every main-line generation step after the first reads from the cache what the step before it read."""
    generated = [step for step in run.steps if step.stats is not None and not step.branch]
    for before, after in zip(generated, generated[1:]):
        assert after.stats.cached_tokens >= before.stats.prompt_tokens


def test_classify_then_branch(smollm2) -> None:
    run = example("classify_then_branch").run(
        smollm2, {"ticket": "The app crashes every time I press the save button."}, max_tokens=30)
    assert run.kind in ("bug", "question")
    keys = {"component", "severity"} if run.kind == "bug" else {"topic", "urgent"}
    assert set(type(run.record).model_fields) == keys and run.returned is run.record
    if run.kind == "bug":
        assert 1 <= len(run.record.component) <= 30 and 1 <= run.record.severity <= 5
    reuses(run)


def test_plan_then_expand(smollm2) -> None:
    run = example("plan_then_expand").run(smollm2, {"goal": "bake bread at home"}, max_tokens=24)
    assert isinstance(run.plan, StepValues) and 2 <= len(run.plan.steps) <= 3
    assert all(re.fullmatch(r"[A-Za-z ,']{3,30}", step) for step in run.plan.steps)
    details = [step for step in run.steps if step.branch]
    assert [step.branch for step in details] == [(i,) for i in range(len(run.plan.steps))]
    assert run.detail == [step.value["detail"] for step in details]
    for step in details:
        assert re.fullmatch(r"[A-Z][a-z ,']{10,60}\.", step.value["detail"])
        assert step.stats.cached_tokens >= run.steps[0].stats.prompt_tokens


def test_facts_per_subject(smollm2) -> None:
    program = example("facts_per_subject")
    run = program.run(smollm2, {"topic": "Rome"}, max_tokens=80)
    (step,) = run.steps
    assert step.kind == "looped" and len(step.tokens) <= 80
    assert 1 <= len(run.subjects) <= 3 and all(re.fullmatch(r"[a-z][a-z ]{2,19}", s) for s in run.subjects)
    assert len(run.fact) == len(run.subjects) and run.returned == run.fact
    assert all(re.fullmatch(r"[A-Z][a-z ,']{5,60}\.", fact) for fact in run.fact)
    assert step.text == "Subjects: " + ", ".join(run.subjects) + "." + "".join(f"\n- {fact}" for fact in run.fact)


def test_tool_loop(smollm2) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("stc_example_tools", EXAMPLES / "tools.py")
    assert spec is not None and spec.loader is not None
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)
    run = example("tool_loop", add=tools.add, multiply=tools.multiply).run(
        smollm2, {"question": "What is 12 times 7, plus 5?"}, max_tokens=12)
    assert isinstance(run.answer, int) and run.returned == run.answer
    actions = [step.value["action"] for step in run.steps if step.name == "action"]
    calls = [step for step in run.steps if step.kind == "call"]
    assert 1 <= len(actions) <= 3 and all(a in ("add", "multiply", "answer") for a in actions)
    assert len(calls) == sum(a != "answer" for a in actions)
    numbers = [step.value for step in run.steps if step.name == "a, b"]
    for call, pair, action in zip(calls, numbers, actions):
        expected = pair["a"] + pair["b"] if action == "add" else pair["a"] * pair["b"]
        assert call.value == expected
    reuses(run)


def test_draft_critique_revise(smollm2) -> None:
    run = example("draft_critique_revise").run(smollm2, {"topic": "tides"}, max_tokens=30)
    assert SENTENCE.fullmatch(run.draft) and SENTENCE.fullmatch(run.revision)
    assert isinstance(run.critique, StepValues) and 1 <= run.critique.score <= 10
    assert re.fullmatch(r"[a-z ,']{5,60}", run.critique.problem)
    assert [step.name for step in run.steps] == ["draft", "score, problem", "revision"]
    reuses(run)
