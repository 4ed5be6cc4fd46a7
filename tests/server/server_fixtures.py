"""A real server on 127.0.0.1 on a free port, run by uvicorn in a thread, for tests with the `openai` client."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(model: Any, **options: Any) -> Iterator[str]:
    """Start the app for `model` on a free local port; yields the base URL (…/v1) and stops the server after.

    The tests name the model "m" (an alias, unless `options` give others)."""
    import uvicorn

    from stdsl.server.http.app import create_app

    options.setdefault("aliases", ("m",))
    app = create_app(model, **options)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        app.state.server.engine.close()


def metric(base_url: str, name: str, headers: dict[str, str] | None = None) -> float:
    """One unlabelled sample of /metrics."""
    text = httpx.get(base_url.removesuffix("/v1") + "/metrics", headers=headers or {}).text
    for line in text.splitlines():
        if line.startswith(f"stdsl_{name} "):
            return float(line.split()[1])
    raise KeyError(name)


def live_group(pgid: int, within: float = 0.0) -> list[Any]:
    """The live (not zombie) processes of process group `pgid`, after waiting up to `within` seconds for it to
    empty (for tests that start a server or a pool in its own session and check that nothing outlives it)."""
    import os

    import psutil

    def members() -> list[Any]:
        out = []
        for process in psutil.process_iter(["status"]):
            try:
                if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                    out.append(process)
            except (ProcessLookupError, psutil.Error):
                continue
        return out

    end = time.monotonic() + within
    while (left := members()) and time.monotonic() < end:
        time.sleep(0.1)
    return left
