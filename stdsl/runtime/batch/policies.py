"""Scheduling policies of a batch core: runs that drive rows of the core instead of being rows (certified drafting).

A policy is a generator that the core resumes on its own thread, at the start of a step: there it may submit
rows (through its engine) and do model work off the batch (`Engine.call` runs at once on that thread), then it
yields the row handles it waits for. The core resumes it in the first step after they have all ended, so a
policy costs no thread, no lock and no pass of its own: its drafts are rows of the same batch, stepped with
everyone else's. It ends its own handle; cancelling it cancels the rows it waits for and closes it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

from stdsl.errors import Cancelled, GenerationError, StdslError
from stdsl.runtime.batch.handle import RowHandle

Policy = Generator[Sequence[RowHandle], None, None]
"""A policy's run: each value it yields is the handles it waits for before it is resumed."""


@dataclass(eq=False)
class _Run:
    steps: Policy
    handle: RowHandle
    waiting: Sequence[RowHandle] = field(default_factory=tuple)
    cancelled: bool = False


class Policies:
    """The policy runs of one core, by id (the core's row ids and these never collide: it hands out both)."""

    def __init__(self) -> None:
        self._runs: dict[int, _Run] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def start(self, uid: int, steps: Policy, handle: RowHandle) -> None:
        """Take run `uid`: it is first resumed at the next step."""
        self._runs[uid] = _Run(steps, handle)

    def cancel(self, uid: int) -> bool:
        """Cancel run `uid` and the rows it waits for (safe from any thread: it only sets flags); False if there is
        no such run."""
        run = self._runs.get(uid)
        if run is None:
            return False
        run.cancelled = True
        for handle in run.waiting:
            handle.cancel()
        return True

    def cancel_all(self) -> None:
        """Cancel every run (see `cancel`)."""
        for uid in list(self._runs):
            self.cancel(uid)

    def resume(self) -> list[int]:
        """Resume every run whose rows have all ended (a cancelled run is closed instead); the ids of the runs
        that ended."""
        ended: list[int] = []
        for uid, run in list(self._runs.items()):
            if run.cancelled:
                self._close(run, Cancelled("the request was cancelled before it finished"))
            elif all(handle.done for handle in run.waiting):
                try:
                    run.waiting = tuple(next(run.steps))
                    continue
                except StopIteration:
                    if not run.handle.done:
                        run.handle._finish(None, GenerationError("a scheduling policy ended without a result"))
                except Exception as error:  # a policy fails its own request, never the core
                    run.handle._finish(None, error if isinstance(error, StdslError) else _internal(error))
            else:
                continue
            del self._runs[uid]
            ended.append(uid)
        return ended

    def abandon(self) -> list[int]:
        """End every run at once as cancelled (the process is exiting); their ids."""
        ended = list(self._runs)
        for run in self._runs.values():
            self._close(run, Cancelled("the request was cancelled before it finished"))
        self._runs.clear()
        return ended

    @staticmethod
    def _close(run: _Run, error: StdslError) -> None:
        run.handle._finish(None, error)
        for handle in run.waiting:
            handle.cancel()
        run.steps.close()


def _internal(error: BaseException) -> GenerationError:
    wrapped = GenerationError(f"internal error in a scheduling policy: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped
