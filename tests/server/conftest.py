"""Fixtures of the server tests that talk to one server through the official `openai` client."""

from __future__ import annotations

import openai
import pytest

from tests.server.server_fixtures import running_server


@pytest.fixture(scope="module")
def base_url(tiny_model):
    """A server of the tiny model on a free local port, one per test module."""
    with running_server(tiny_model, max_rows=8) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url):
    """The official `openai` client of that server."""
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
