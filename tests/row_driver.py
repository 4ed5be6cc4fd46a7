"""A test's hand on one output: a controller and its log, moved one step at a time as the engine moves a row.

The package has no such object: a row is its controller and its frozen `Log`, and only applying a controller's
move changes the log. Tests that walk an output step by step keep the two together here, and read what they
check from the log and the controller.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stdsl.control.controller import ROW_MASKS, Configuration, Controller
from stdsl.control.log import Log
from stdsl.control.tables import Tables, controller_of


class RowDriver:
    """One output under one constraint: `controller` and `log` (before `start`, the empty log at the initial
    configuration)."""

    def __init__(self, machine: Any, tokenizer: Any, vocab: Any, *, max_tokens: int | None = None,
                 healing: bool = True, budget: Any = None) -> None:
        self.controller: Controller = Tables.of(machine, vocab).controller(
            tokenizer, max_tokens=max_tokens, healing=healing, budget=budget)
        self.log = Log(self.controller.initial())

    @classmethod
    def of(cls, compiled: Any, tokenizer: Any, *, max_tokens: int | None, healing: bool = True) -> RowDriver:
        """The driver of a compiled constraint's controller from the one factory (`controller_of`)."""
        driver = cls.__new__(cls)
        driver.controller = controller_of(compiled, tokenizer, max_tokens=max_tokens, healing=healing)
        driver.log = Log(driver.controller.initial())
        return driver

    @classmethod
    def of_request(cls, request: Any) -> RowDriver:
        """The driver of a prepared request's row (`RowRequest`: its controller and started log)."""
        driver = cls.__new__(cls)
        driver.controller, driver.log = request.controller, request.log
        return driver

    @classmethod
    def request(cls, model: Any, compiled: Any, options: Any) -> RowDriver:
        """The driver of a row the engine would make for `model` under `options` (its max_tokens and healing)."""
        return cls.of(compiled, model.tokenizer, max_tokens=options.max_tokens, healing=options.healing)

    def start(self) -> list[int]:
        """The forced prefix φ(c0)."""
        self.log = self.controller.started()
        return list(self.log.tokens)

    def advance(self, token: int) -> list[int]:
        """Take a sampled token; the tokens to feed."""
        move = self.controller.taken(self.log, token)
        self.log = self.log.apply(move)
        return list(move.feed)

    def mask(self) -> np.ndarray:
        """The row's admissible tokens (a writable copy)."""
        return self.controller.row_mask(self.log).copy()

    @property
    def configuration(self) -> Configuration:
        return self.log.configuration

    @property
    def finished(self) -> bool:
        return self.log.configuration.finished

    @property
    def accepting(self) -> bool:
        return self.controller.accepting(self.log.configuration)

    @property
    def decided(self) -> bytes:
        return self.log.decided

    @property
    def committed(self) -> bytes:
        return self.log.data

    @property
    def tokens(self) -> list[int]:
        return list(self.log.tokens)

    @property
    def budget(self) -> Any:
        return self.controller.budget

    @budget.setter
    def budget(self, table: Any) -> None:
        """Swap the cost table before `start` (a controller of its own)."""
        twin = self.controller.with_masks(ROW_MASKS)
        twin.budget = table
        self.controller = twin

    @property
    def least_output_tokens(self) -> int | None:
        """need(c1) from the start under a budget (None without one)."""
        return None if self.controller.max_tokens is None else self.controller.least_output_tokens()

    # What the controller and the configuration hold, read through the driver.
    vocab = property(lambda self: self.controller.vocab)
    planner = property(lambda self: self.controller.planner)
    rows = property(lambda self: self.controller.rows)
    automaton = property(lambda self: self.controller.machine)
    max_tokens = property(lambda self: self.controller.max_tokens)
    reasoning = property(lambda self: self.controller.reasoning)
    forced_count = property(lambda self: self.log.forced)
    state = property(lambda self: self.log.configuration.state)
    pending = property(lambda self: self.log.configuration.pending)
    window = property(lambda self: self.log.configuration.window)
    cover = property(lambda self: self.log.configuration.cover)
    remaining = property(lambda self: self.log.configuration.remaining)
    budget_shaped = property(lambda self: self.log.configuration.budget_shaped)
