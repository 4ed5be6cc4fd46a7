"""The free-form value's nonterminal DFA, built once: shipped with the package for the usual whitespace, else
built on first use in a process; placed in each grammar at its own call symbol.

Every schema with a free-form value (`{}`, `true`, an object's undeclared members) calls the same nonterminal,
whose DFA (strings, numbers, containers calling it again) took a quarter of a typical schema's compile
(issue 36, item 3). It is built over call symbol 0 (`canonical_body`), kept over byte classes, and placed at the
grammar's symbol; a shipped table is used only when the body's `ir.structure_text` equals the one it was built from
(shipped in the same file), so a changed lowering is built afresh rather than read stale.
`python -m stdsl.compiler.json_schema.any_value` rewrites it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import determinize_expression
from stdsl.compiler.automata.minimization.minimize import shrink
from stdsl.compiler.json_schema.json_tokens import JsonTokens, Whitespace
from stdsl.compiler.json_schema.to_ir import _Compiler
from stdsl.compiler.pushdown.grammar import CALL_BASE, call_symbol, over_classes

SHIPPED = Path(__file__).with_name("any_value_dfas")
"""One file per shipped table, `NAME.dfa`, read whole in one call (a cold process's text read cost 0.5 ms, numpy's
`fromfile` 0.3, more than this): the length of the structure text of the body it was built from (4 bytes,
little-endian), that text (UTF-8, padded to an even length), then little-endian int16 words: the number of states
and byte classes, the table over the classes with call symbol 0's column last, each byte's class, the accepting
flags."""
SUFFIX = ".dfa"
SHIPPED_WHITESPACE: tuple[Whitespace | None, ...] = (None, Whitespace())
"""The whitespace settings whose tables ship: compact (the default) and `Whitespace()`."""

ClassForm = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A DFA over bytes and call symbol 0 as `pushdown.grammar.over_classes` gives it for that alphabet: the table over
byte classes with the call symbol's column last (int32), each byte's class (intp), the accepting flags."""
_BUILT: dict[tuple[int, str] | None, ClassForm] = {}
_PLACED: dict[tuple[tuple[int, str] | None, int, int], ClassForm] = {}
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


def _build(body: ir.Node) -> ClassForm:
    """The body's minimal trim DFA over bytes and call symbol 0, over byte classes (`ClassForm`)."""
    dfa = determinize_expression(body, 1 << 20, CALL_BASE + 1)
    table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
    classes, symbol_class, accepting = over_classes(table.astype(np.int32)[:, dfa.byte_class], accepting)
    return classes, symbol_class[:CALL_BASE], accepting


def _file_name(whitespace: Whitespace | None) -> str:
    key = _key(whitespace)
    return "compact" if key is None else f"ws{key[0]}-{key[1].encode().hex()}"


def shipped_dfa(whitespace: Whitespace | None, structure: str) -> ClassForm | None:
    """The shipped table for `whitespace`, if there is one and it was built from a body with this structure text
    (the file is named, not searched for: a glob compiled a regular expression in every process; its path is
    formatted, where joining `Path`s cost a fresh process 0.08 ms)."""
    try:
        with open(f"{SHIPPED}{os.sep}{_file_name(whitespace)}{SUFFIX}", "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    length = int.from_bytes(data[:4], "little")
    if data[4:4 + length] != structure.encode():
        return None
    words = np.frombuffer(data, dtype="<i2", offset=4 + length + length % 2)
    states, classes = int(words[0]), int(words[1])
    cells = states * (classes + 1)
    table = words[2:2 + cells].astype(np.int32).reshape(states, classes + 1)
    byte_class = words[2 + cells:2 + cells + CALL_BASE].astype(np.intp)
    return table, byte_class, words[2 + cells + CALL_BASE:].astype(bool)


def canonical_dfa(whitespace: Whitespace | None) -> ClassForm:
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


def any_value_classes(whitespace: Whitespace | None, call_index: int, alphabet: int) -> ClassForm:
    """The free-form body's DFA over `alphabet` symbols, its inner values calling definition `call_index`, over
    classes as `pushdown.grammar.Definition.dfa` takes it: what `pushdown.grammar` builds from
    `_CallingCompiler.any_value_body()`, placed from the canonical classes (the byte classes are the same at every
    placement; the call symbols are a class each, dead but the one called), kept per placement."""
    key = (_key(whitespace), call_index, alphabet)
    found = _PLACED.get(key)
    if found is None:
        table, byte_class, accepting = canonical_dfa(whitespace)
        classes = table.shape[1] - 1
        placed = np.full((len(table), classes + alphabet - CALL_BASE), -1, dtype=np.int32)
        placed[:, :classes] = table[:, :classes]
        placed[:, classes + call_index] = table[:, classes]
        symbol_class = np.concatenate([byte_class, classes + np.arange(alphabet - CALL_BASE)]).astype(np.intp)
        found = (placed, symbol_class, accepting)
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
    for old in folder.glob(f"*{SUFFIX}"):
        old.unlink()
    names = []
    for whitespace in SHIPPED_WHITESPACE:
        body = canonical_body(whitespace)
        structure = ir.structure_text(body)
        assert structure is not None
        table, byte_class, accepting = _build(body)
        assert len(table) < 2**15 and table.shape[1] < 2**15
        text = structure.encode()
        words = np.concatenate([[len(table), table.shape[1] - 1], table.ravel(), byte_class, accepting])
        name = _file_name(whitespace)
        (folder / (name + SUFFIX)).write_bytes(len(text).to_bytes(4, "little") + text + b"\0" * (len(text) % 2)
                                               + words.astype("<i2").tobytes())
        names.append(name)
    return names


if __name__ == "__main__":
    print("wrote", SHIPPED, write_shipped(), file=sys.stderr)
