"""`stcon serve`: load a model and run the OpenAI-compatible server with uvicorn (127.0.0.1 unless told otherwise)."""

from __future__ import annotations

from collections.abc import Mapping

from stdsl.errors import StdslError


def serve(model_name: str | None = None, *, host: str = "127.0.0.1", port: int = 8000, max_rows: int = 8,
          api_key: str | None = None, max_queue: int = 64, limits: Mapping[str, int] | None = None,
          aliases: tuple[str, ...] = ()) -> None:
    """Serve `model_name` (default: the embedded SmolLM2) until interrupted; requests may also name it by `aliases`;
    `limits` sets `stdsl.server.limits.Limits` fields (the others keep their defaults)."""
    import uvicorn

    from stdsl.runtime.model.loading import load
    from stdsl.server.app import create_app
    from stdsl.server.limits import Limits

    if not 0 < port < 65536:
        raise StdslError(f"--port must lie in 1..65535, got {port}")
    model = load(model_name)
    app = create_app(model, max_rows=max_rows, api_key=api_key, max_queue=max_queue, limits=Limits(**(limits or {})),
                     aliases=aliases)
    uvicorn.run(app, host=host, port=port, log_level="warning")
