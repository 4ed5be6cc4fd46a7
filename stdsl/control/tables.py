"""The tables every row of a constraint shares, one registry for both kinds, and the one DFA/pushdown switch.

`Tables.of(compiled, vocab)` is the only place that tells a DFA from a pushdown: it finds the compiled
constraint's byte machine (`compiler.byte_machine.ByteMachine`) and builds, once per (machine, vocabulary),
its token rows, planners and budget (a `stdsl.caches` entry). Everything after reads the machine through the
protocol and the controller its tables make (`controller`), whichever kind it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from stdsl.caches import CacheKind
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.byte_machine import ByteMachine
from stdsl.compiler.pushdown.grammar import PushdownGrammar
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.budget.automaton_budget import MAX_QUESTION_ROWS, UNREACHABLE, BudgetTable
from stdsl.control.budget.block_bound import composed_chains_and_bound
from stdsl.control.budget.need_graphs import chain_bound, forced_chains, row_successors
from stdsl.control.budget.pushdown_budget import PushdownBudget, PushdownNeed
from stdsl.control.controller import ROW_MASKS, Controller
from stdsl.control.pushdown_controller import PushdownController
from stdsl.control.special_vocabulary import vocabulary_for
from stdsl.control.split.planner import ForcedPlanner, PreTokenizingTokenizer
from stdsl.errors import StdslError
from stdsl.kernels.pushdown.context_rows import DEFAULT_MAX_BYTES
from stdsl.kernels.pushdown.rows import PushdownRows
from stdsl.kernels.rows import RowCache
from stdsl.kernels.vocabulary import Vocabulary

MAX_UNCAPPED_ENTRIES = 50_000_000
"""States x vocabulary up to which a budget question may walk every row it reaches (at most the whole table once);
past it each question walks at most `MAX_QUESTION_ROWS` new rows."""


def machine_of(compiled: Any) -> Automaton | PushdownMachine:
    """The byte machine of a compiled constraint (a `Constraint`, `PushdownConstraint`, automaton, pushdown machine
    or grammar); StdslError naming the type of anything else."""
    if isinstance(compiled, (Automaton, PushdownMachine)):
        return compiled
    if isinstance(compiled, PushdownGrammar):
        return PushdownMachine(compiled)
    for name in ("machine", "automaton"):
        machine = getattr(compiled, name, None)
        if isinstance(machine, (Automaton, PushdownMachine)):
            return machine
    raise StdslError(f"expected a compiled constraint (stdsl.compile), got {type(compiled).__name__}")


class Tables(ABC):
    """Per (byte machine, vocabulary) state shared by every request: token rows, forced planners, the budget."""

    def __init__(self, machine: ByteMachine, vocab: Vocabulary, rows: Any) -> None:
        self.machine = machine
        self.vocab = vocab
        self.rows = rows
        """The machine's token rows on demand (what masks read)."""

    @staticmethod
    def of(compiled: Any, vocab: Vocabulary) -> Tables:
        """The shared tables of a compiled constraint under `vocab`: the one DFA/pushdown switch (see the module)."""
        machine = machine_of(compiled)
        if isinstance(machine, PushdownMachine):
            pushdown = machine
            return _TABLES.get((pushdown, vocab), lambda: PushdownTables(pushdown, vocab))
        automaton = machine
        return _TABLES.get((automaton, vocab), lambda: AutomatonTables(automaton, vocab))

    def planner(self, tokenizer: PreTokenizingTokenizer, healing: bool = True) -> ForcedPlanner:
        """The forced planner for a tokenizer, built once (a `stdsl.caches` entry that goes with these tables)."""
        return _PLANNERS.get((self, tokenizer),
                             lambda: ForcedPlanner(self.machine, tokenizer, self.vocab.token_bytes, healing),
                             (healing,))

    @abstractmethod
    def budget(self, planner: ForcedPlanner) -> Any:
        """The budget's cost table under `planner` (Theorem 21), built once."""

    def controller(self, tokenizer: PreTokenizingTokenizer, *, max_tokens: int | None, healing: bool = True,
                   masks: int = ROW_MASKS, budget: Any = None) -> Controller:
        """A controller over these tables for `tokenizer` and `max_tokens` (None: no budget), keeping `masks` masks.

        `budget` replaces the shared cost table (a caller's own, e.g. with other search limits).  Live masks come
        from the host rows (numpy only); the runtime hands a pushdown controller device masks on its runner thread
        (`runtime/batch/device_masks.py`).
        """
        planner = self.planner(tokenizer, healing)
        if max_tokens is not None and budget is None:
            budget = self.budget(planner)
        return self._controller(planner, max_tokens, budget if max_tokens is not None else None, masks)

    @abstractmethod
    def _controller(self, planner: ForcedPlanner, max_tokens: int | None, budget: Any, masks: int) -> Controller: ...

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes these tables hold (the machine and vocabulary are counted where they are kept)."""


class AutomatonTables(Tables):
    """A DFA's tables: rows on demand and the budget table."""

    machine: Automaton

    def __init__(self, machine: Automaton, vocab: Vocabulary) -> None:
        super().__init__(machine, vocab, RowCache(machine, vocab))
        self._budget: BudgetTable | None = None

    def budget(self, planner: ForcedPlanner) -> BudgetTable:
        if self._budget is None:
            self._budget = budget_table_for(self.machine, self.vocab, planner)
        return self._budget

    def _controller(self, planner: ForcedPlanner, max_tokens: int | None, budget: Any, masks: int) -> Controller:
        return Controller(self.machine, self.vocab, planner, self.rows, max_tokens=max_tokens, budget=budget,
                          masks=masks)

    @property
    def nbytes(self) -> int:
        budget = self._budget
        return int(self.rows.nbytes) + (budget.nbytes if budget is not None else 0)


class PushdownTables(Tables):
    """A pushdown machine's tables: its rows (the symbolic ones bounded by `max_row_bytes`), planners, the exact
    budget (host only)."""

    machine: PushdownMachine
    rows: PushdownRows

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, max_row_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__(machine, vocab, PushdownRows(machine, vocab, max_bytes=max_row_bytes))

    def budget(self, planner: ForcedPlanner) -> PushdownBudget:
        """The exact budget under a planner's table policy (need is memoized across requests), built once (a
        `stdsl.caches` entry that goes with these tables and the planner)."""
        return _BUDGETS.get((self, planner), lambda: PushdownBudget(
            PushdownNeed(self.machine, self.rows.symbolic, planner, self.vocab)))

    def _controller(self, planner: ForcedPlanner, max_tokens: int | None, budget: Any, masks: int) -> Controller:
        return PushdownController(self.machine, self.vocab, planner, self.rows, max_tokens=max_tokens, budget=budget,
                                  masks=masks)

    @property
    def nbytes(self) -> int:
        """Bytes of the rows (concrete, symbolic, masks)."""
        return self.rows.nbytes


_TABLES: CacheKind[Tables] = CacheKind("constraint tables")
_PLANNERS: CacheKind[ForcedPlanner] = CacheKind("forced planners")
_BUDGETS: CacheKind[PushdownBudget] = CacheKind("pushdown budgets")


def controller_of(compiled: Any, tokenizer: Any, *, max_tokens: int | None, healing: bool = True,
                  masks: int = ROW_MASKS) -> Controller:
    """The controller of a compiled constraint for a runtime tokenizer, over the vocabulary it needs (the shared
    one, or the variant spelling its special tokens): `Tables.of(...).controller(...)`."""
    tables = Tables.of(compiled, vocabulary_for(tokenizer, compiled))
    return tables.controller(tokenizer, max_tokens=max_tokens, healing=healing, masks=masks)


def budget_table_for(automaton: Automaton, vocab: Vocabulary, planner: ForcedPlanner) -> BudgetTable:
    """need(q) for the automaton, searched on demand over token rows behind the byte bound of `chain_bound`, which
    settles every question far from the limit: a new grammar's first mask walks no token row for its budget, and near
    the limit only the rows of states a search reaches are walked. Exact up to `MAX_UNCAPPED_ENTRIES`; past it, exact
    wherever a question settles within its rows, else answered by the bound (sound, at most a little early to close).
    """
    composed = composed_chains_and_bound(automaton, vocab, planner)
    if composed is not None:
        bound = composed[2]
    else:
        chain_end, chain_bytes = forced_chains(automaton, planner.chain)
        bound = chain_bound(automaton, vocab, chain_end, chain_bytes, planner.chain_token_count)
    rows = UNREACHABLE if automaton.num_states * vocab.size <= MAX_UNCAPPED_ENTRIES else MAX_QUESTION_ROWS
    return BudgetTable(np.asarray(automaton.accepting), row_successors(automaton, vocab), bound, rows)
