"""The state a Python program drives: `s += "text"`, `s += gen(...)`, messages, `s["name"]`, `s.fork(n)`.

As in SGLang's frontend, what a program appends runs in order on a worker of its own (one per branch), and the
program's thread goes on at once: it waits only where it reads a value (`s["name"]`, `s.text`). So the branches of
a fork submit their steps while the others decode, and the engine decodes them as rows of one batch, each
continuing the token sequence its parent decoded (the prompt cache holds it: a branch prefills only its own text).
A step that fails fails its branch alone: its records and later reads of that branch name the step and position.
A run can be stopped from any thread (`ProgramRunState.abort`: a server whose client left): its rows in flight are
cancelled and every later step fails as Cancelled without a pass.
"""

from __future__ import annotations

import queue
import reprlib
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, wait
from typing import Any

from stdsl.errors import Cancelled, OptionError, StdslError
from stdsl.runtime.batch.handle import RowHandle
from stdsl.runtime.decode import engine_for, submit
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.platform.workers import Worker
from stdsl.runtime.program_steps.actions import Gen
from stdsl.runtime.program_steps.record import StepError, StepRecord
from stdsl.runtime.program_steps.transcript import Transcript, TranscriptError

StepWatcher = Callable[[StepRecord], None]
"""Called with each step's record once the step has ended (on the thread that ran it)."""


class ProgramRunState:
    """One run of a program: its engine (the model's own unless given), the run's decoding options, every step
    record and branch; `on_step` hears of each step as it ends."""

    def __init__(self, model: Any, options: dict[str, Any], on_step: StepWatcher | None = None,
                 engine: Any = None) -> None:
        for reserved in ("chat", "prompt", "constraint"):
            if reserved in options:
                raise OptionError(reserved, f"a program run cannot set {reserved!r}: its steps decide it")
        DecodeOptions.of(**options)
        self.model = model
        self.engine = engine if engine is not None else engine_for(model)
        self.options = options
        self.records: list[StepRecord] = []
        self.states: list[State] = []
        self.on_step = on_step
        self.aborted = False
        self._handles: set[RowHandle] = set()

    def ended(self, record: StepRecord) -> None:
        """Mark `record` done and tell the watcher."""
        record.done = True
        if self.on_step is not None:
            self.on_step(record)

    def wait(self, handle: RowHandle) -> Any:
        """The generation of a submitted row (the run can cancel it meanwhile)."""
        self._handles.add(handle)
        if self.aborted:
            handle.cancel()
        try:
            return handle.result()
        finally:
            self._handles.discard(handle)

    def join(self) -> None:
        """Wait until every branch has run everything appended to it, then end their workers."""
        for state in list(self.states):
            state._queue.close()

    def cancel(self) -> None:
        """Cancel every row in flight (the program raised) and end the branches' workers."""
        self.abort()
        for state in list(self.states):
            state._queue.close(abandon=True)

    def abort(self) -> None:
        """Stop the run from any thread without waiting: cancel its rows in flight; every step not yet decoded fails
        as Cancelled, so the program's next read raises and the run ends."""
        self.aborted = True
        for handle in list(self._handles):
            handle.cancel()


class _SerialQueue:
    """Work run in order on one pooled worker thread; `put` returns the work's future."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._abandoned = False
        self._last: Future[Any] | None = None
        self._worker = Worker(self._serve, name)
        self._worker.start()

    def put(self, work: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((work, future))
        self._last = future
        return future

    def drain(self) -> None:
        """Wait for everything put so far."""
        if self._last is not None:
            wait([self._last])

    def close(self, abandon: bool = False) -> None:
        """Run what is queued (or drop it, `abandon`) and end the worker."""
        self._abandoned = self._abandoned or abandon
        self._jobs.put(None)
        self._worker.wait()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            work, future = job
            if self._abandoned:
                future.cancel()
                continue
            try:
                future.set_result(work())
            except BaseException as error:  # the step's own record holds it; readers get it from the future
                future.set_exception(error)


class _ForkGroup:
    """The branches of one fork. The first to submit a step leads; the others submit theirs once the engine has
    prefilled the leader's prompt, so the prompt cache serves each of them all the text it shares with the leader
    (the parent's transcript and whatever the branches append alike) rather than each prefilling it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._led = False
        self.ready = threading.Event()

    def lead(self) -> bool:
        """Whether the caller is the first branch to submit (the others wait for `ready`)."""
        with self._lock:
            led, self._led = self._led, True
            return not led


class _Message:
    """`with s.user():` ... — the message opens on entry and closes on exit."""

    def __init__(self, state: State, role: str, filled: bool) -> None:
        self._state, self._role, self._filled = state, role, filled

    def __enter__(self) -> State:
        if self._filled:
            raise OptionError("content", f"s.{self._role}(content) is a whole message; write `with s.{self._role}():` "
                                         "to fill one step by step")
        self._state._put(lambda t: t.open(self._role))
        return self._state

    def __exit__(self, *exc: object) -> None:
        self._state._put(lambda t: t.close())


class State:
    """One branch of a program: append text, messages and steps to it; read its typed values by name."""

    def __init__(self, run: ProgramRunState, start: Future[tuple[Transcript, dict[str, Any]]],
                 branch: tuple[int, ...] = (), group: _ForkGroup | None = None) -> None:
        self._run = run
        self._branch = branch
        self._group = group
        self._values: dict[str, Any] = {}
        self._transcript: Transcript | None = None
        self._failure: StepError | None = None
        self._queue = _SerialQueue(f"stdsl-program{''.join(f'[{i}]' for i in branch)}")
        run.states.append(self)
        self._queue.put(lambda: self._begin(start))

    def _begin(self, start: Future[tuple[Transcript, dict[str, Any]]]) -> None:
        try:
            transcript, values = start.result()
        except StepError as error:
            self._failure = error
            return
        self._transcript, self._values = transcript.copy(), dict(values)  # each branch its own copy

    # ------------------------------------------------------------------ what a program writes

    def __iadd__(self, item: Any) -> State:
        """Append text (a str), a step (`gen`, `select`) or a list of them."""
        if isinstance(item, str):
            self._put(lambda t: t.append(item))
        elif isinstance(item, Gen):
            record = StepRecord(item.name, item.kind, self._branch)
            self._run.records.append(record)
            self._queue.put(lambda: self._generate(item, record))
        elif isinstance(item, (list, tuple)):
            for part in item:
                self += part
        else:
            raise OptionError("s", f"a program appends a str, gen(...), select(...) or a list of them, got "
                                   f"{reprlib.repr(item)}")
        return self

    def system(self, content: Any = None) -> _Message:
        """A system message: `s.system("text")`, or `with s.system(): ...`."""
        return self._message("system", content)

    def user(self, content: Any = None) -> _Message:
        """A user message: `s.user("text")`, or `with s.user(): ...`."""
        return self._message("user", content)

    def assistant(self, content: Any = None) -> _Message:
        """An assistant message: `s.assistant(gen(...))`, or `with s.assistant(): s += ...`."""
        return self._message("assistant", content)

    def _message(self, role: str, content: Any) -> _Message:
        if content is None:
            return _Message(self, role, filled=False)
        self._put(lambda t: t.open(role))
        self += content
        self._put(lambda t: t.close())
        return _Message(self, role, filled=True)

    def fork(self, branches: int | Iterable[str]) -> Forks:
        """Branches that each continue this state: `fork(n)` n alike, `fork(["a", "b"])` one per text appended."""
        texts: list[str | None]
        if isinstance(branches, int) and not isinstance(branches, bool):
            if branches < 1:
                raise OptionError("branches", f"fork(n) needs n >= 1, got {branches}")
            texts = [None] * branches
        elif isinstance(branches, Iterable) and not isinstance(branches, (str, bytes)):
            texts = list(branches)
            if not texts or not all(isinstance(text, str) for text in texts):
                raise OptionError("branches", f"fork([...]) needs a non-empty list of str, got {reprlib.repr(texts)}")
        else:
            raise OptionError("branches", f"fork takes a count or a list of str, got {reprlib.repr(branches)}")
        snapshot = self._queue.put(self._snapshot)
        group = _ForkGroup()
        forks = Forks(State(self._run, snapshot, (*self._branch, i), group) for i in range(len(texts)))
        for state, text in zip(forks, texts):
            if text is not None:
                state += text
        return forks

    def call(self, name: str, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call a Python function between steps (a tool, a lookup) after the steps before it; its return value is
        the step `name` (`s[name]`, and a `call` record in the run)."""
        self._sync()
        record = StepRecord(name, "call", self._branch)
        self._run.records.append(record)
        began = time.perf_counter()
        try:
            value = function(*args, **kwargs)
        except Exception as error:
            record.error = StepError(name, self._branch, error)
            record.seconds = time.perf_counter() - began
            self._run.ended(record)
            raise
        record.value = self._values[name] = value
        record.seconds = time.perf_counter() - began
        self._run.ended(record)
        return value

    # ------------------------------------------------------------------ what a program reads

    def __getitem__(self, name: str) -> Any:
        """The typed value of step `name` (the latest of that name), once the steps before it have run."""
        self._sync()
        if name not in self._values:
            known = ", ".join(map(repr, self._values)) or "none yet"
            raise KeyError(f"no step named {name!r} in this branch (steps: {known})")
        return self._values[name]

    def __contains__(self, name: str) -> bool:
        self._sync()
        return name in self._values

    def get(self, name: str, default: Any = None) -> Any:
        """The value of step `name`, or `default`."""
        return self[name] if name in self else default

    @property
    def text(self) -> str:
        """The transcript so far (chat markers included), once every step appended has run."""
        self._sync()
        assert self._transcript is not None
        return self._transcript.text

    @property
    def branch(self) -> tuple[int, ...]:
        """This state's fork position (() on the main line)."""
        return self._branch

    @property
    def error(self) -> StepError | None:
        """The failure that stopped this branch, once what was appended has run (None: none)."""
        self._queue.drain()
        return self._failure

    # ------------------------------------------------------------------ the branch's worker

    def _sync(self) -> None:
        """Wait for everything appended so far; raise the branch's failure."""
        self._queue.drain()
        if self._failure is not None:
            raise self._failure

    def _put(self, change: Callable[[Transcript], None]) -> None:
        def work() -> None:
            if self._failure is None and self._transcript is not None:
                try:
                    change(self._transcript)
                except TranscriptError as error:
                    self._failure = StepError("message", self._branch, error)
        self._queue.put(work)

    def _snapshot(self) -> tuple[Transcript, dict[str, Any]]:
        if self._failure is not None:
            raise self._failure
        assert self._transcript is not None
        return self._transcript, self._values

    def _generate(self, step: Gen, record: StepRecord) -> None:
        """Decode `step` from the transcript's tokens and append its output (on this branch's worker)."""
        began = time.perf_counter()
        try:
            if self._failure is not None:
                record.error = self._failure
                return
            if self._run.aborted:
                raise Cancelled("the program's run was stopped before this step")
            transcript = self._transcript
            assert transcript is not None
            if transcript.role is None and transcript.messages:
                transcript.open("assistant")
            ids = transcript.prompt()
            if not ids:
                raise TranscriptError("the program has no text before this step: append text or a message first")
            handle = self._submit(ids, step)
            generation = self._run.wait(handle)
            value = step.read(generation)
            transcript.add_generated(generation.text, generation.tokens)
            record.value, record.text, record.stats = value, generation.text, generation.stats
            record.prompt_ids, record.tokens = ids, list(generation.tokens)
            self._values[step.name] = value
        except (StdslError, KeyError, ValueError) as error:
            record.error = self._failure = StepError(step.name, self._branch, error)
        finally:
            record.seconds = time.perf_counter() - began
            self._run.ended(record)

    def _submit(self, ids: list[int], step: Gen) -> RowHandle:
        """Submit the step's row; a branch's first step waits for its fork's leader to be prefilled first."""
        group, self._group = self._group, None
        leads = group is not None and group.lead()
        if group is not None and not leads:
            group.ready.wait()
        engine = self._run.engine
        try:
            handle = submit(engine, ids, step.constraint, **{**self._run.options, **step.options}, chat=False)
            if leads:
                engine.call(_nothing)  # the runner's next turn takes the row in and prefills it in its step;
                engine.call(_nothing)  # the turn after it begins once that step is done
        finally:
            if group is not None and leads:
                group.ready.set()
        return handle


def _nothing() -> None:
    """Work for the runner that only marks a turn boundary."""


class Forks(list[State]):
    """The branches of a fork, in order: `forks += gen(...)` appends to each; `values(name)` reads them all."""

    def __iadd__(self, item: Any) -> Forks:  # type: ignore[override,misc]
        for state in self:
            state += item
        return self

    def values(self, name: str) -> list[Any]:
        """Each branch's value of step `name`, in branch order; a branch that failed gives its StepError instead."""
        out: list[Any] = []
        for state in self:
            try:
                out.append(state[name])
            except StepError as error:
                out.append(error)
        return out


def start(run: ProgramRunState) -> State:
    """The main line of a run: an empty transcript for the model's tokenizer."""
    ready: Future[tuple[Transcript, dict[str, Any]]] = Future()
    ready.set_result((Transcript(run.model.tokenizer), {}))
    return State(run, ready)
