"""What a Python program run returns: every step's typed value and stats, in the order the program wrote them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from stdsl.errors import GenerationError, StdslError
from stdsl.generation import Stats
from stdsl.runtime.program_result import ProgramResult


class StepError(GenerationError):
    """A step of a program failed; `step` names it and `branch` is its fork position (() on the main line)."""

    def __init__(self, step: str, branch: tuple[int, ...], cause: BaseException) -> None:
        self.step, self.branch = step, branch
        where = f" in {branch_name(branch)}" if branch else ""
        super().__init__(f"step {step!r}{where} failed: {type(cause).__name__}: {cause}")
        self.__cause__ = cause


def branch_name(branch: tuple[int, ...]) -> str:
    """A fork position as the program reads it: `fork[2]`, `fork[0][1]` for a branch of a branch."""
    return "fork" + "".join(f"[{i}]" for i in branch)


@dataclass
class StepRecord:
    """One step: its name and kind (`gen`, `select`, `call`), fork position, typed value, text, stats and error;
    a generation step also keeps the token ids it decoded from (`prompt_ids`) and those it wrote (`tokens`)."""

    name: str
    kind: str
    branch: tuple[int, ...] = ()
    value: Any = None
    text: str = ""
    prompt_ids: list[int] = field(default_factory=list, repr=False)
    tokens: list[int] = field(default_factory=list, repr=False)
    stats: Stats | None = None
    error: StdslError | None = None
    seconds: float = 0.0
    done: bool = field(default=False, repr=False)

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens the model read for this step (the rest the prompt cache held from earlier steps)."""
        return self.stats.prompt_tokens - self.stats.cached_tokens if self.stats is not None else 0

    def to_dict(self) -> dict[str, Any]:
        """The step as plain data (a Pydantic value dumped, the error as its message)."""
        value = self.value.model_dump(mode="json", by_alias=True) if hasattr(self.value, "model_dump") else self.value
        return {"name": self.name, "kind": self.kind, "branch": list(self.branch), "value": value,
                "text": self.text, "stats": self.stats.as_dict() if self.stats is not None else None,
                "prefilled_tokens": self.prefilled_tokens,
                "error": str(self.error) if self.error is not None else None}


class ProgramRun(ProgramResult):
    """A Python program's result: the main line's values by name (attributes and mapping, as `ProgramResult`), the
    function's return value (`returned`), every step in program order (`steps`), the transcript (`text`) and
    the summed stats of every generation step (`stats`)."""

    def __init__(self, values: dict[str, Any], text: str, steps: list[StepRecord], returned: Any) -> None:
        super().__init__(values, text, total_stats(steps))
        self.steps = steps
        self.returned = returned

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens the model read over the whole run."""
        return sum(step.prefilled_tokens for step in self.steps)

    @property
    def errors(self) -> list[StepRecord]:
        """The steps that failed (a fork's branch fails alone: the others' values stand)."""
        return [step for step in self.steps if step.error is not None]

    def __repr__(self) -> str:
        return f"ProgramRun({self._values!r}, steps={len(self.steps)})"


def total_stats(steps: list[StepRecord]) -> Stats:
    """The stats of every generation step added up (seconds too: forks decoded together overlap in time)."""
    total = Stats()
    for step in steps:
        if step.stats is not None:
            for item in fields(Stats):
                setattr(total, item.name, getattr(total, item.name) + getattr(step.stats, item.name))
    return total
