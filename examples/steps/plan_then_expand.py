"""Write a plan, then expand each of its steps in a fork of its own: the branches decode as rows of one batch and
share the plan's prefix through the prompt cache.

Run: python examples/steps/plan_then_expand.py
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

import stdsl as stcon
from stdsl import gen


class Plan(BaseModel):
    steps: list[Annotated[str, Field(max_length=30)]] = Field(min_length=2, max_length=3)


@stcon.program
def plan_and_expand(s, goal: str):
    s.system("You plan tasks in short steps.")
    s.user(f"Goal: {goal}\nList two or three short steps as JSON.")
    s.assistant(gen("plan", Plan, max_tokens=40))
    branches = s.fork(len(s["plan"].steps))
    for branch, step in zip(branches, s["plan"].steps):
        branch.user(f"Explain how to do this step in one sentence: {step}")
        branch.assistant(gen("detail", stcon.Regex(r"[A-Z][a-z ,']{10,60}\."), max_tokens=20))
    return branches.values("detail")


if __name__ == "__main__":
    model = stcon.load()
    result = plan_and_expand.run(model, goal="bake bread at home")
    for step, detail in zip(result.plan.steps, result.returned):
        print(f"- {step}: {detail}")
    print(f"{result.prefilled_tokens} prompt tokens prefilled in {len(result.steps)} steps")
