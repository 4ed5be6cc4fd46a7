"""Classify a support ticket, then ask for a different typed record per class: a Python `if` on a generated value.

Run: python examples/steps/classify_then_branch.py
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import stdsl as stcon
from stdsl import gen, select


class BugReport(BaseModel):
    component: str = Field(max_length=30)
    severity: int = Field(ge=1, le=5)


class Question(BaseModel):
    topic: str = Field(max_length=30)
    urgent: bool


@stcon.program
def triage(s, ticket: str):
    s.system("You triage support tickets.")
    s.user(f"Ticket: {ticket}\nIs this a bug report or a question? Answer bug or question.")
    s += select("kind", ["bug", "question"])
    if s["kind"] == "bug":
        s.user("Give the bug as JSON: the component that fails and its severity from 1 to 5.")
        s.assistant(gen("record", BugReport, max_tokens=40))
    else:
        s.user("Give the question as JSON: its topic and whether it is urgent.")
        s.assistant(gen("record", Question, max_tokens=40))
    return s["record"]


TICKETS = ["The app crashes every time I press the save button.", "How do I change the colour of my profile page?"]

if __name__ == "__main__":
    model = stcon.load()
    for ticket in TICKETS:
        result = triage.run(model, ticket=ticket)
        print(f"{result.kind}: {result.record!r}")
        for step in result.steps:
            print(f"  {step.name}: {step.prefilled_tokens} tokens prefilled, {step.stats.passes} passes")
