"""The Python functions examples/stc_steps/tool_loop.stc calls (`stcon run ... --functions tools.py`)."""


def add(a: int, b: int) -> int:
    return a + b


def multiply(a: int, b: int) -> int:
    return a * b
