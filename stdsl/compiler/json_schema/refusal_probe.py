"""A refusal found before the costly key automata it would otherwise wait for: the schema lowered once with each
object's undeclared-key classes told apart by emptiness alone.

An object with more than `keys.MAX_PATTERNS` patternProperties is refused where the lowering reaches its additional
members, after every object before it has split its own undeclared keys into minimal automata, 2^n products
minimized each (MaskBench o12652: `#/definitions/Tender` is refused after 0.3 s of other definitions' key classes).
The probe lowers the schema as the compile would, with the same compiler, but each key class is only searched for a
witness: the classes are the same (same order, same patterns matched), their key nodes stand-ins.  The lowering
reads a key node nowhere but in `_compact` (its size, its automaton), where the probe gives up; so a `SchemaError`
the probe meets is the one the compile meets at the same place, in the same order.  Anything else (no refusal, a
budget refusal, a probe given up) and the compile lowers the schema itself.  Only a schema holding such an object
is probed (`may_refuse_late`), so other compiles pay a walk of the schema's text and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product as cartesian
from typing import Any

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars.keys import (
    MAX_PATTERNS,
    names_automaton,
    pattern_matcher,
    plain_names,
    refuse_many_patterns,
)
from stdsl.compiler.json_schema.scalars.strings import QUOTE
from stdsl.errors import CompileError, EmptyLanguageError, SchemaError

DATA_KEYWORDS = ("enum", "const", "default", "examples")
MAX_SEARCHED = 50_000
"""The key-class states the probe searches, all classes together, before it gives up (the compile then lowers the
schema itself): a witness of a key class is a few bytes deep, and an empty class's search dies in a few more."""


class ProbeGivenUp(Exception):
    """The probe met what its stand-in key nodes cannot answer (a node's size or automaton) or searched too long."""


def may_refuse_late(schema: Any) -> bool:
    """Whether the schema document holds an object with more than `MAX_PATTERNS` patternProperties anywhere outside
    instance data: the refusal the probe is for (whether the lowering reaches that object is the probe's to find)."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            patterns = node.get("patternProperties")
            if isinstance(patterns, dict) and len(patterns) > MAX_PATTERNS:
                return True
            pending.extend(value for key, value in node.items() if key not in DATA_KEYWORDS)
        elif isinstance(node, list):
            pending.extend(node)
    return False


def refused_early(lower: Callable[[KeyClassShapes], object]) -> None:
    """Raise the `SchemaError` that `lower` (the compile's own lowering, given the probe's key classes) meets, if it
    meets one the probe can answer; return where the compile must lower the schema itself."""
    try:
        lower(KeyClassShapes())
    except SchemaError:
        raise
    except (ProbeGivenUp, CompileError):
        return


class KeyClassShapes:
    """`keys.key_classes` for a probe: the same classes in the same order, each a stand-in key node (compared by
    identity, as the real ones are) told from an empty class by a search for a witness key."""

    def __init__(self) -> None:
        self.made: dict[tuple, list[tuple[ir.Node, list[str]]]] = {}
        self.searched = 0

    def key_classes(self, patterns: dict, declared: list[str], names_body: ir.Node | None, with_unmatched: bool,
                    where: str) -> list[tuple[ir.Node, list[str]]]:
        """`keys.key_classes`' classes, their refusals raised alike; built once per distinct inputs, as there."""
        refuse_many_patterns(patterns, where)
        inputs = (tuple(patterns), tuple(declared), names_body, with_unmatched)
        if inputs not in self.made:
            self.made[inputs] = self._classes(patterns, declared, names_body, with_unmatched, where)
        return self.made[inputs]

    def _classes(self, patterns: dict, declared: list[str], names_body: ir.Node | None, with_unmatched: bool,
                 where: str) -> list[tuple[ir.Node, list[str]]]:
        """The nonempty classes, as `keys._key_classes` finds them: none when no undeclared key is allowed at all
        (its matchers then never built), else one per choice of the patterns matched that a key can make."""
        universe = [plain_names()]
        if names_body is not None:
            try:
                universe.append(build_automaton(names_body))
            except EmptyLanguageError:
                return []
        universe.append(names_automaton(declared))
        wanted = (True,) * (len(universe) - 1) + (False,)
        if not self._holds_key(universe, wanted):
            return []
        matchers = {p: pattern_matcher(p, f"{where}/{p}") for p in patterns}
        parts = [*universe, *matchers.values()]
        out = []
        for choice in cartesian((True, False), repeat=len(matchers)):
            if not with_unmatched and not any(choice):
                continue
            if self._holds_key(parts, wanted + choice):
                stand_in = ir.Embedded(np.full((1, 256), -1, dtype=np.int64), np.ones(1, dtype=bool))
                out.append((ir.seq(QUOTE, stand_in, QUOTE), [p for p, inside in zip(matchers, choice) if inside]))
        return out

    def _holds_key(self, parts: list[Automaton], wanted: tuple[bool, ...]) -> bool:
        """Whether some key is accepted by the `parts` marked wanted and by none of the others, the states searched
        counted against `MAX_SEARCHED`."""
        found, searched = _WitnessSearch(parts).has_witness(wanted, MAX_SEARCHED - self.searched)
        self.searched += searched
        return found


class _WitnessSearch:
    """Whether a key class is empty: a breadth-first search of the product of the automata that tell it (the
    universe of undeclared keys, the declared names, each pattern's matcher) for a state accepted as the class asks."""

    def __init__(self, parts: list[Automaton]) -> None:
        """The parts' tables over the classes of bytes that every part moves alike on (the distinct columns of their
        byte classes, found with `return_index`: numpy's plain `unique` imports `numpy.ma` on its first call, 10 ms
        a fresh process's compile would pay)."""
        columns, _ = np.unique(np.stack([part.byte_class for part in parts]), axis=1, return_index=True)
        self.tables = [part.class_transitions[:, columns[i]].tolist() for i, part in enumerate(parts)]
        self.accepting = [part.accepting.tolist() for part in parts]
        self.classes = columns.shape[1]

    def has_witness(self, wanted: tuple[bool, ...], budget: int) -> tuple[bool, int]:
        """(whether some key is accepted exactly by the parts `wanted` says, the states searched for it); raises
        `ProbeGivenUp` past `budget` states."""
        start = (0,) * len(self.tables)
        seen = {start}
        frontier = [start]
        searched = 0
        while frontier:
            following = []
            for state in frontier:
                searched += 1
                if searched > budget:
                    raise ProbeGivenUp("the key classes' search passed its budget")
                if all((at >= 0 and accepting[at]) == want
                       for at, accepting, want in zip(state, self.accepting, wanted)):
                    return True, searched
                for column in range(self.classes):
                    successor = self._step(state, column, wanted)
                    if successor is not None and successor not in seen:
                        seen.add(successor)
                        following.append(successor)
            frontier = following
        return False, searched

    def _step(self, state: tuple[int, ...], column: int, wanted: tuple[bool, ...]) -> tuple[int, ...] | None:
        """The state after a byte of class `column`, None where a part that must accept has died."""
        moved = []
        for at, table, want in zip(state, self.tables, wanted):
            target = table[at][column] if at >= 0 else -1
            if want and target < 0:
                return None
            moved.append(target)
        return tuple(moved)
