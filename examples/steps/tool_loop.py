"""A tool-using loop: the model picks one of the registered Python functions (or answers), the program calls it
and the model continues from its result, reusing the KV cache of everything it has read.

Run: python examples/steps/tool_loop.py
"""

from __future__ import annotations

import stdsl as stcon
from stdsl import gen, select


def add(a: int, b: int) -> int:
    return a + b


def multiply(a: int, b: int) -> int:
    return a * b


TOOLS = {"add": add, "multiply": multiply}


@stcon.program
def solve(s, question: str, rounds: int = 3):
    s.system("You answer arithmetic questions with tools: add or multiply two numbers, then answer.")
    s.user(question)
    for turn in range(rounds):
        with s.assistant():
            s += "Action: "
            s += select("action", [*TOOLS, "answer"])
            if s["action"] == "answer":
                break
            s += "\nFirst number: "
            s += gen("a", int, max_tokens=6)
            s += "\nSecond number: "
            s += gen("b", int, max_tokens=6)
        result = s.call(f"result{turn}", TOOLS[s["action"]], s["a"], s["b"])
        s.user(f"The tool returned {result}.")
    s += "\nAnswer: "
    s += gen("answer", int, max_tokens=8)
    return s["answer"]


if __name__ == "__main__":
    model = stcon.load()
    result = solve.run(model, question="What is 12 times 7, plus 5?")
    for step in result.steps:
        print(f"{step.kind} {step.name} = {step.value!r}")
