"""Random pushdown grammars for property tests: up to three definitions whose bodies mix leaves and calls, each
call after a letter of its own (a-d, so calls never clash), wrapped in < >."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.pushdown.grammar import Definition, PushdownGrammar, call_symbol, compile_pushdown
from stdsl.errors import CompileError


@st.composite
def bodies(draw: st.DrawFn, count: int, leaves: Sequence[ir.Node]) -> ir.Node:
    """A random body over `leaves` and calls to the `count` definitions."""
    calls = [ir.seq(ir.literal("abcd"[i]), call_symbol(i)) for i in range(count)]
    node = draw(st.recursive(st.sampled_from([*leaves, *calls]), lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.alt(*items)),
        inner.map(lambda item: ir.repeat(item, 0, 2))), max_leaves=6))
    return ir.seq(ir.literal("<"), node, ir.literal(">"))


@st.composite
def grammars(draw: st.DrawFn, leaves: Sequence[ir.Node], entries: Sequence[ir.Node]) -> PushdownGrammar | None:
    """A grammar whose root calls the first definition after its letter, or the last after one of `entries`; None
    where it breaks an L(1) condition."""
    count = draw(st.integers(1, 3))
    definitions = [Definition(f"N{i}", draw(bodies(count, leaves))) for i in range(count)]
    root = ir.seq(ir.literal("abcd"[draw(st.integers(0, count - 1))]), call_symbol(0))
    try:
        return compile_pushdown(ir.alt(root, ir.seq(draw(st.sampled_from(entries)), call_symbol(count - 1))),
                                definitions, max_depth=draw(st.integers(1, 4)))
    except CompileError:
        return None
