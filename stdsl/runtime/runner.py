"""The process's one MLX thread: it steps every batch core and runs model work handed to it, and never ends.

Callers never touch a core: `submit` queues a request and returns its `RowHandle` at once, `call`
runs a function on this thread between two steps, `submit_policy` queues a scheduling policy's
run (certified drafting, `stdsl.runtime.batch.policies`), `cancel_all` and `wait_idle` serve
`Engine.close`. The thread starts on first use, on a pooled `Worker` whose
thread never returns (a thread that ran compiled MLX work must not end while the interpreter
finalizes, `stdsl.runtime.platform.workers`), and it has no idle exit: with no work it blocks on a condition.

The runner holds a core only while the core has rows, so a core (and its model) that its owner
drops is freed once it is idle. At exit one hook stops admission, ends every row as cancelled after
the step in flight (waiting at most `EXIT_WAIT_SECONDS`) and parks the thread for good, so its
thread-local MLX state is never torn down while Python finalizes.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from stdsl.errors import GenerationError, StdslError
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.policies import Policy
from stdsl.runtime.batch.requests import RowRequest
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.platform.workers import Worker

T = TypeVar("T")

EXIT_WAIT_SECONDS = 30.0
THREAD_NAME = "stdsl-runner"


@dataclass(eq=False)
class _Submission:
    """A request (or a scheduling policy's run) on its way into a core; `uid` once inserted, `cancelled` if its
    handle was cancelled first."""

    core: BatchCore
    request: RowRequest | Policy
    handle: RowHandle
    uid: int | None = None
    cancelled: bool = False


class Runner:
    """Steps batch cores on one thread that lives as long as the process (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._inbox: list[_Submission] = []
        self._arriving: list[_Submission] = []
        """Submissions taken from the inbox and being inserted (outside the lock): still owed, still cancellable."""
        self._calls: list[tuple[Callable[[], object], Future[object]]] = []
        self._busy: dict[int, BatchCore] = {}
        self._worker: Worker | None = None
        self._thread: threading.Thread | None = None
        self._exiting = False
        self._parked = threading.Event()

    # ------------------------------------------------------------------ callers' side (any thread)

    def submit(self, core: BatchCore, request: RowRequest) -> RowHandle:
        """Queue `request` on `core` and return its handle at once."""
        return self._enqueue(core, lambda handle: request)

    def submit_policy(self, core: BatchCore, make: Callable[[RowHandle], Policy]) -> RowHandle:
        """Queue a scheduling policy's run on `core` (`make(handle)` builds it: a generator that ends `handle`) and
        return its handle at once; the run is resumed on the runner thread only."""
        return self._enqueue(core, make)

    def _enqueue(self, core: BatchCore, make: Callable[[RowHandle], RowRequest | Policy]) -> RowHandle:
        holder: list[_Submission] = []
        handle = RowHandle(lambda: self._cancel(holder[0]))
        submission = _Submission(core, make(handle), handle)
        holder.append(submission)
        with self._lock:
            self._refuse_when_exiting()
            self._inbox.append(submission)
            self._busy[id(core)] = core
            self._start()
            self._lock.notify_all()
        return handle

    def call(self, work: Callable[[], T]) -> T:
        """Run `work` on the runner thread between two steps and return its result (raises what it raises);
        on the runner thread itself it runs at once."""
        if self.is_current():
            return work()
        future: Future[T] = Future()
        with self._lock:
            self._refuse_when_exiting()
            self._calls.append((work, future))  # type: ignore[arg-type]
            self._start()
            self._lock.notify_all()
        return future.result()

    def is_current(self) -> bool:
        """Whether the caller is the runner thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def cancel_all(self, core: BatchCore) -> None:
        """Cancel every row of `core`, also those not yet inserted; each ends at the core's next step."""
        with self._lock:
            for submission in self._inbox + self._arriving:
                if submission.core is core:
                    submission.cancelled = True
            core.remove_all()
            self._lock.notify_all()

    def wait_idle(self, core: BatchCore, timeout: float | None = None) -> bool:
        """Wait until `core` has no request queued or in flight; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._owes(core), timeout=timeout)

    def stop(self, timeout: float = EXIT_WAIT_SECONDS) -> None:
        """Refuse new work, end every row as cancelled after the step in flight, and park the thread for good
        (the exit hook)."""
        with self._lock:
            self._exiting = True
            for core in self._busy.values():
                core.remove_all()
            self._lock.notify_all()
            started = self._worker is not None
        if started and not self.is_current():
            self._parked.wait(timeout)

    def _owes(self, core: BatchCore) -> bool:
        return core.busy or any(s.core is core for s in self._inbox + self._arriving)

    def _refuse_when_exiting(self) -> None:
        if self._exiting:
            raise StdslError("the process is exiting; no new decoding work is taken")

    def _start(self) -> None:
        if self._worker is None:
            self._worker = Worker(self._serve, THREAD_NAME)
            self._worker.start()

    def _cancel(self, submission: _Submission) -> None:
        with self._lock:
            submission.cancelled = True
            if submission.uid is not None:
                submission.core.remove(submission.uid)
            self._lock.notify_all()

    # ------------------------------------------------------------------ the runner thread

    def _serve(self) -> None:
        self._thread = threading.current_thread()
        while self._turn():
            pass
        self._park()

    def _turn(self) -> bool:
        """Wait for work, then run the calls, insert the arrivals and step every busy core once; False once the
        process exits. (Its locals die with it, so an idle runner holds no core.)"""
        with self._lock:
            self._lock.wait_for(lambda: bool(self._inbox or self._calls or self._busy) or self._exiting)
            if self._exiting:
                return False
            calls, self._calls = self._calls, []
            arrivals, self._inbox = self._inbox, []
            self._arriving = arrivals
            cores = list(self._busy.values())
        for work, future in calls:
            try:
                future.set_result(work())
            except BaseException as error:  # handed to the caller, who raises it
                future.set_exception(error)
        for submission in arrivals:
            uid = self._insert(submission)
            with self._lock:
                submission.uid = uid
                if submission.cancelled and uid is not None:
                    submission.core.remove(uid)
        with self._lock:
            self._arriving = []
        for core in cores:
            core.step()
        with self._lock:
            for key, core in list(self._busy.items()):
                if not self._owes(core):
                    del self._busy[key]
            self._lock.notify_all()
        return True

    def _insert(self, submission: _Submission) -> int | None:
        """Insert a submission into its core; a request the core cannot take fails its handle (None)."""
        try:
            if isinstance(submission.request, RowRequest):
                return submission.core.insert(submission.request, submission.handle)
            return submission.core.insert_policy(submission.request, submission.handle)
        except Exception as error:
            failed = GenerationError(f"the request could not be queued: {type(error).__name__}: {error}")
            failed.__cause__ = error
            submission.handle._finish(None, failed)
            return None

    def _park(self) -> None:
        """End every row left as cancelled, then wait forever: this thread must not end before the process."""
        with self._lock:
            cores, self._busy = list(self._busy.values()), {}
            arrivals, self._inbox = self._inbox, []
            calls, self._calls = self._calls, []
        for submission in arrivals:
            self._insert(submission)
        for core in cores:
            core.abandon()
        for _, future in calls:
            future.set_exception(StdslError("the process is exiting; no new decoding work is taken"))
        with self._lock:
            self._lock.notify_all()
        self._parked.set()
        threading.Event().wait()


RUNNER = Runner()
"""The process's runner."""


@atexit.register
def _stop_at_exit() -> None:
    RUNNER.stop()
