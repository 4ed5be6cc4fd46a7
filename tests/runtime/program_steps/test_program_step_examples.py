"""The example programs of steps (examples/steps/) decoded on the embedded SmolLM2: every step's constraint holds and
every value has its type; later steps reuse the KV cache of the earlier ones."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "steps"
SENTENCE_TAIL = re.compile(r"[A-Z][a-z ,']{10,100}\.")


def example(name: str) -> ModuleType:
    """The example module `examples/steps/<name>.py`, imported by path."""
    spec = importlib.util.spec_from_file_location(f"steps_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def reuses(run) -> None:
    """Every generation step after the first reads from the cache at least what the step before it read."""
    generated = [step for step in run.steps if step.stats is not None and not step.branch]
    for before, after in zip(generated, generated[1:]):
        assert after.stats.cached_tokens >= before.stats.prompt_tokens


def test_classify_then_branch(smollm2) -> None:
    module = example("classify_then_branch")
    for ticket in module.TICKETS:
        run = module.triage.run(smollm2, ticket=ticket)
        expected = module.BugReport if run.kind == "bug" else module.Question
        assert run.kind in ("bug", "question") and isinstance(run.record, expected)
        assert run.returned is run.record
        reuses(run)


def test_plan_then_expand(smollm2) -> None:
    module = example("plan_then_expand")
    run = module.plan_and_expand.run(smollm2, goal="bake bread at home")
    assert isinstance(run.plan, module.Plan) and 2 <= len(run.plan.steps) <= 3
    details = [step for step in run.steps if step.branch]
    assert [step.branch for step in details] == [(i,) for i in range(len(run.plan.steps))]
    assert run.returned == [step.value for step in details]
    for step in details:
        assert re.fullmatch(r"[A-Z][a-z ,']{10,60}\.", step.value)
        assert step.stats.cached_tokens >= run.steps[0].stats.prompt_tokens


def test_tool_loop(smollm2) -> None:
    module = example("tool_loop")
    run = module.solve.run(smollm2, question="What is 12 times 7, plus 5?")
    assert isinstance(run.answer, int) and run.returned == run.answer
    calls = [step for step in run.steps if step.kind == "call"]
    actions = [step.value for step in run.steps if step.name == "action"]
    assert all(action in ("add", "multiply", "answer") for action in actions)
    assert len(calls) == sum(action != "answer" for action in actions)
    reuses(run)


def test_draft_critique_revise(smollm2) -> None:
    module = example("draft_critique_revise")
    run = module.write.run(smollm2, topic="tides")
    assert SENTENCE_TAIL.fullmatch(run.draft) and SENTENCE_TAIL.fullmatch(run.revision)
    assert isinstance(run.critique, module.Critique) and 1 <= run.critique.score <= 10
    reuses(run)

