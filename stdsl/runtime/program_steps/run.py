"""Running a Python program: its function drives a `State`; the result records every step (`ProgramRun`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stdsl.errors import OptionError, StdslError
from stdsl.runtime.program_steps.record import ProgramRun
from stdsl.runtime.program_steps.state import ProgramRunState, start


def run_steps(function: Callable[..., Any], model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any],
              options: Mapping[str, Any]) -> ProgramRun:
    """Run `function(s, *args, **kwargs)` on `model` with the decoding `options` every step starts from.

    The run waits for every branch; a failure on the main line raises its StepError, a fork's branch that fails
    is in the result's `errors` (its value is read as that error)."""
    return run_program(ProgramRunState(model, dict(options)), function, args, kwargs)


def run_program(run: ProgramRunState, function: Callable[..., Any], args: tuple[Any, ...],
                kwargs: Mapping[str, Any]) -> ProgramRun:
    """Run `function(s, *args, **kwargs)` as `run` (a state its caller made to watch its steps as they end, or to
    abort it from another thread); as `run_steps`."""
    main = start(run)
    try:
        returned = function(main, *args, **kwargs)
    except BaseException:
        run.cancel()
        raise
    run.join()
    if main._failure is not None:
        raise main._failure
    assert main._transcript is not None
    return ProgramRun(dict(main._values), main._transcript.text, run.records, returned)


Binder = Callable[[Mapping[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]]
"""An input's argument dict as the function's positional and keyword arguments (ProgramError when they do not fit)."""


def map_steps(function: Callable[..., Any], inputs: Iterable[Any], model: Any, options: Mapping[str, Any],
              bind: Binder) -> list[ProgramRun | StdslError]:
    """Run the program once per argument dict, all at once (their steps decode in one batch); a `ProgramRun` per
    input, in order, or the StdslError that input met."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any]] | StdslError] = []
    for index, arguments in enumerate(inputs):
        if not isinstance(arguments, Mapping):
            calls.append(OptionError("inputs", f"inputs[{index}] must be a dict of program arguments, got "
                                               f"{type(arguments).__name__}"))
            continue
        try:
            calls.append(bind(arguments))
        except StdslError as error:
            calls.append(error)

    def one(call: tuple[tuple[Any, ...], dict[str, Any]] | StdslError) -> ProgramRun | StdslError:
        if isinstance(call, StdslError):
            return call
        try:
            return run_steps(function, model, call[0], call[1], options)
        except StdslError as error:
            return error

    if not calls:
        return []
    with ThreadPoolExecutor(max_workers=min(len(calls), 16), thread_name_prefix="stdsl-map") as pool:
        return list(pool.map(one, calls))
