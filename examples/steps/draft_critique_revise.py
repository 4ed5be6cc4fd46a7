"""Draft, critique and revise: three typed steps in one assistant conversation, each reading the ones before.

Run: python examples/steps/draft_critique_revise.py
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import stdsl as stcon
from stdsl import gen


class Critique(BaseModel):
    score: int = Field(ge=1, le=10)
    problem: str = Field(max_length=60)


SENTENCE = stcon.Regex(r"[A-Z][a-z ,']{10,100}\.")


@stcon.program
def write(s, topic: str):
    s.system("You write one clear sentence at a time.")
    s.user(f"Write one sentence about {topic}.")
    s.assistant(gen("draft", SENTENCE, max_tokens=30))
    s.user("Critique that sentence as JSON: a score from 1 to 10 and its main problem.")
    s.assistant(gen("critique", Critique, max_tokens=40))
    s.user("Rewrite the sentence to fix that problem.")
    s.assistant(gen("revision", SENTENCE, max_tokens=30))
    return s["revision"]


if __name__ == "__main__":
    model = stcon.load()
    result = write.run(model, topic="tides")
    print("draft:    ", result.draft)
    print("critique: ", result.critique)
    print("revision: ", result.revision)
