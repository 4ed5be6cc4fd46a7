"""The free-form value's nonterminal DFA, built once: shipped with the package for the usual whitespace, else
built on first use in a process; placed in each grammar at its own call symbol.

Every schema with a free-form value (`{}`, `true`, an object's undeclared members) calls the same nonterminal,
whose DFA (strings, numbers, containers calling it again) took a quarter of a typical schema's compile
(issue 36, item 3). It is built over call symbol 0 (`canonical_body`) and moved to the grammar's symbol; a
shipped table is used only when the body's `ir.structure_text` equals the one it was built from (shipped beside
it), so a changed lowering is built afresh rather than read stale.
`python -m stdsl.compiler.json_schema.any_value` rewrites it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimize import shrink
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.json_schema.json_tokens import JsonTokens, Whitespace
from stdsl.compiler.json_schema.to_ir import _Compiler
from stdsl.compiler.pushdown.grammar import CALL_BASE, call_symbol, over_classes

SHIPPED = Path(__file__).with_name("any_value_dfas")
"""Two files per shipped table: `NAME.ir`, the structure text of the body it was built from, and `NAME.i16`, the
table with the accepting flags as a last column, raw little-endian int16 (`np.fromfile` reads it in microseconds;
`np.load` of an `.npz` or `.npy` cost a cold process more than building the table)."""
WIDTH = CALL_BASE + 2
SHIPPED_WHITESPACE: tuple[Whitespace | None, ...] = (None, Whitespace())
"""The whitespace settings whose tables ship: compact (the default) and `Whitespace()`."""

_BUILT: dict[tuple[int, str] | None, tuple[np.ndarray, np.ndarray]] = {}
_PLACED: dict[tuple[tuple[int, str] | None, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
PLACED_KEPT = 256
"""Placements `any_value_classes` keeps (each a few kilobytes; a schema's number of definitions picks one)."""


class _CanonicalCompiler(_Compiler):
    """The schema compiler whose free-form values below the top are calls of nonterminal 0."""

    def _any_value(self, depth: int) -> ir.Node:
        return call_symbol(0) if depth == 0 else super()._any_value(depth)


def canonical_body(whitespace: Whitespace | None) -> ir.Node:
    """The free-form value's body with its inner values calling symbol 0 (`_CallingCompiler.any_value_body`'s
    body when the free-form nonterminal is the first)."""
    return _CanonicalCompiler(JsonTokens(whitespace))._any_value(1)


def _key(whitespace: Whitespace | None) -> tuple[int, str] | None:
    if whitespace is None or whitespace.max_run == 0:
        return None
    return (whitespace.max_run, whitespace.chars)


def _build(body: ir.Node) -> tuple[np.ndarray, np.ndarray]:
    """The body's minimal trim DFA over bytes and call symbol 0, as a full table (int32) and accepting mask."""
    dfa = determinize(build_nfa(body), 1 << 20, CALL_BASE + 1)
    table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
    return table.astype(np.int32)[:, dfa.byte_class], accepting


def _file_name(whitespace: Whitespace | None) -> str:
    key = _key(whitespace)
    return "compact" if key is None else f"ws{key[0]}-{key[1].encode().hex()}"


def shipped_dfa(whitespace: Whitespace | None, structure: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The shipped table for `whitespace`, if there is one and it was built from a body with this structure text
    (the files are named, not searched for: a glob compiled a regular expression in every process)."""
    name = SHIPPED / _file_name(whitespace)
    try:
        built_from = name.with_suffix(".ir").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    if built_from != structure:
        return None
    packed = np.fromfile(name.with_suffix(".i16"), dtype="<i2").reshape(-1, WIDTH)
    return packed[:, :-1].astype(np.int32), packed[:, -1].astype(bool)


def canonical_dfa(whitespace: Whitespace | None) -> tuple[np.ndarray, np.ndarray]:
    """The free-form body's DFA over bytes and call symbol 0: shipped, built earlier in this process, or built now."""
    key = _key(whitespace)
    found = _BUILT.get(key)
    if found is None:
        body = canonical_body(whitespace)
        structure = ir.structure_text(body)
        found = shipped_dfa(whitespace, structure) if structure is not None else None
        if found is None:
            found = _build(body)
        for array in found:
            array.flags.writeable = False
        _BUILT[key] = found
    return found


def any_value_dfa(whitespace: Whitespace | None, call_index: int, alphabet: int) -> tuple[np.ndarray, np.ndarray]:
    """The free-form body's DFA over `alphabet` symbols, its inner values calling definition `call_index`: what
    `pushdown.grammar` builds from `_CallingCompiler.any_value_body()`, table for table."""
    table, accepting = canonical_dfa(whitespace)
    placed = np.full((len(table), alphabet), -1, dtype=np.int32)
    placed[:, :CALL_BASE] = table[:, :CALL_BASE]
    placed[:, CALL_BASE + call_index] = table[:, CALL_BASE]
    return placed, accepting


def any_value_classes(whitespace: Whitespace | None, call_index: int, alphabet: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`any_value_dfa` over classes, as `pushdown.grammar.Definition.dfa` takes it, kept per placement: converting
    the table to classes cost every open object's compile a few percent."""
    key = (_key(whitespace), call_index, alphabet)
    found = _PLACED.get(key)
    if found is None:
        found = over_classes(*any_value_dfa(whitespace, call_index, alphabet))
        for array in found:
            array.flags.writeable = False
        if len(_PLACED) >= PLACED_KEPT:
            _PLACED.clear()
        _PLACED[key] = found
    return found


def write_shipped(folder: Path = SHIPPED) -> list[str]:
    """Build the tables of `SHIPPED_WHITESPACE` and write them to `folder` (its old tables removed); their
    names."""
    folder.mkdir(exist_ok=True)
    for old in [*folder.glob("*.i16"), *folder.glob("*.ir")]:
        old.unlink()
    names = []
    for whitespace in SHIPPED_WHITESPACE:
        body = canonical_body(whitespace)
        structure = ir.structure_text(body)
        assert structure is not None
        table, accepting = _build(body)
        packed = np.column_stack([table, accepting.astype(np.int32)])
        assert packed.shape[1] == WIDTH and len(table) < 2**15
        name = _file_name(whitespace)
        packed.astype("<i2").tofile(folder / f"{name}.i16")
        (folder / f"{name}.ir").write_text(structure, encoding="utf-8")
        names.append(name)
    return names


if __name__ == "__main__":
    print("wrote", SHIPPED, write_shipped(), file=sys.stderr)
