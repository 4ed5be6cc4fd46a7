"""`stcon serve`: load a model and run the OpenAI-compatible server with uvicorn (127.0.0.1 unless told otherwise)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stdsl.errors import StdslError
from stdsl.server.constraints.compile_pool import MAX_COMPILE_BYTES


def serve(model_name: str | None = None, *, host: str = "127.0.0.1", port: int = 8000, max_rows: int = 8,
          api_key: str | None = None, max_queue: int = 64, limits: Mapping[str, int] | None = None,
          aliases: tuple[str, ...] = (), shutdown_seconds: int = 10, tool_format: str | None = None,
          max_compile_bytes: int = MAX_COMPILE_BYTES, program_dir: str | None = None, quiet: bool = False,
          steps_programs: tuple[str, ...] = (), functions: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Serve `model_name` (default: the embedded SmolLM2) until interrupted; requests may also name it by `aliases`;
    `limits` sets `stdsl.server.http.limits.Limits` fields (the others keep their defaults); `tool_format` names the
    tool-call format (None: the one the chat template writes, else Hermes); `max_compile_bytes` caps the memory of
    each compile; `program_dir` is the one directory clients' programs may read files from (None: none);
    `steps_programs` are `FILE.py:NAME` specs of the Python steps programs requests may run by name, or `FILE.stc`
    programs of steps (served by the file's stem; their `call` steps may call `functions`).  SIGTERM or
    SIGINT lets the requests in flight finish for up to `shutdown_seconds`, then cancels them and ends the
    process (see `shutdown.py`).  Logs "listening on" and one access line per request to stderr, unless `quiet`
    (then warnings and errors only)."""
    from stdsl.compiler.tools.formats import FORMATS
    from stdsl.runtime.model.loading import load
    from stdsl.server.http.app import create_app
    from stdsl.server.http.limits import Limits
    from stdsl.server.http.shutdown import run_until_signalled

    if not 0 < port < 65536:
        raise StdslError(f"--port must lie in 1..65535, got {port}")
    if shutdown_seconds < 0:
        raise StdslError(f"--shutdown-seconds must be at least 0, got {shutdown_seconds}")
    if tool_format is not None and tool_format not in FORMATS:
        raise StdslError(f"--tool-format must be one of {', '.join(sorted(FORMATS))}, got {tool_format!r}")
    if max_compile_bytes < 1 << 20:
        raise StdslError(f"--max-compile-bytes must be at least 1048576 (1 MiB), got {max_compile_bytes}")
    if program_dir is not None and not Path(program_dir).is_dir():
        raise StdslError(f"--program-dir must be a directory, got {program_dir!r}")
    served = served_steps_programs(steps_programs, functions)  # a bad program file is reported before the model loads
    model = load(model_name)
    app = create_app(model, max_rows=max_rows, api_key=api_key, max_queue=max_queue, limits=Limits(**(limits or {})),
                     aliases=aliases, tool_format=tool_format, max_compile_bytes=max_compile_bytes,
                     program_dir=program_dir, steps_programs=served)
    state = app.state.server
    _log_to_stderr(logging.WARNING if quiet else logging.INFO)
    logging.getLogger("stdsl.server").info("listening on http://%s:%d (model %s)", host, port, state.model_name)
    run_until_signalled(app, host=host, port=port, drain_seconds=shutdown_seconds,
                        on_signal=lambda: state.engine.close(drain_seconds=shutdown_seconds),
                        on_drained=state.cache.close, on_force=state.cache.close)


def _log_to_stderr(level: int) -> None:
    """Show the server's log records (`stdsl.server.*`: the start, the access log) at `level` on stderr."""
    server_log = logging.getLogger("stdsl.server")
    server_log.setLevel(level)
    if not any(getattr(handler, "stcon_serve", False) for handler in server_log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s stcon serve: %(message)s"))
        handler.stcon_serve = True  # type: ignore[attr-defined]
        server_log.addHandler(handler)
    server_log.propagate = False


def served_steps_programs(specs: tuple[str, ...], functions: Mapping[str, Callable[..., Any]] | None = None
                          ) -> dict[str, Any]:
    """The steps programs `FILE.py:NAME` and `FILE.stc` specs name, by name (ProgramError for a bad spec or two of one
    name); a `.stc` program's `call` steps may call `functions`."""
    from stdsl.compiler.stc.syntax import ProgramError
    from stdsl.programs import load_steps_program

    served: dict[str, Any] = {}
    for spec in specs:
        program = load_steps_program(spec, functions)
        if program.name in served:
            raise ProgramError(f"two steps programs are named {program.name!r}", spec)
        served[program.name] = program
    return served
