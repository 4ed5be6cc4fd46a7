"""`stcon serve` says where it listens and logs one access line per request (method, path, status, seconds)."""

from __future__ import annotations

import logging
import re

import httpx
import pytest

from tests.server.server_fixtures import running_server


def test_every_request_gets_an_access_line(tiny_model, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="stdsl.server.access"), running_server(tiny_model, max_rows=1) as url:
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=10).status_code == 200
        reply = httpx.post(url + "/chat/completions", timeout=60, json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "guided_choice": ["a"]})
        assert reply.status_code == 200
        assert httpx.get(url + "/nowhere", timeout=10).status_code == 404
    lines = [record.getMessage() for record in caplog.records if record.name == "stdsl.server.access"]
    pattern = r"127\.0\.0\.1:\d+ {} {} {} \d+\.\d{{3}} s"
    for method, path, status in (("GET", "/health", 200), ("POST", "/v1/chat/completions", 200),
                                 ("GET", "/v1/nowhere", 404)):
        assert any(re.fullmatch(pattern.format(method, re.escape(path), status), line) for line in lines), lines


def test_serve_logs_where_it_listens_unless_quiet(monkeypatch, tiny_model, capsys) -> None:
    """The start line names the address and the model; `quiet` keeps the access log off."""
    from stdsl.server.http import serve as serve_module

    started: list[str] = []
    server_log = logging.getLogger("stdsl.server")
    monkeypatch.setattr(server_log, "handlers", [])
    monkeypatch.setattr(server_log, "propagate", True)

    def run(app, **options) -> None:
        started.append(app.state.server.model_name)
        app.state.server.engine.close()
        app.state.server.cache.close()

    monkeypatch.setattr("stdsl.runtime.model.loading.load", lambda name: tiny_model)
    monkeypatch.setattr("stdsl.server.http.shutdown.run_until_signalled", run)
    try:
        for quiet in (False, True):
            serve_module.serve(port=8123, quiet=quiet)
            err = capsys.readouterr().err
            assert ("listening on http://127.0.0.1:8123 (model tiny-random-llama)" in err) is not quiet, err
            assert logging.getLogger("stdsl.server.access").isEnabledFor(logging.INFO) is not quiet
    finally:
        server_log.setLevel(logging.NOTSET)  # as it was, and the loggers' cached levels cleared
    assert started == ["tiny-random-llama"] * 2
