"""Server-sent events stay one line each for every line reader: JSON's unescaped U+0085, U+2028 and U+2029 are
escaped, so a client splitting with `str.splitlines` or httpx's `iter_lines` still reads whole JSON events."""

from __future__ import annotations

import json

import httpx
from hypothesis import given
from hypothesis import strategies as st

from stdsl.server.http.events import LINE_ENDS_JSON_KEEPS, sse_event
from tests.server.server_fixtures import running_server

LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character `str.splitlines` ends a line at (httpx's `LineDecoder` uses the same set)."""
texts = st.text(alphabet=st.sampled_from([*LINE_ENDS, "a", "é", "\"", "\\", "\x00", "😀"]), max_size=12) | st.text()
payloads = st.recursive(st.none() | st.booleans() | st.integers() | texts,
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                        max_leaves=8)


def test_the_escaped_characters_are_every_line_end_json_keeps() -> None:
    """The oracle: of the characters `str.splitlines` ends lines at, exactly these come out of `json.dumps` as
    they are."""
    kept = {c for c in LINE_ENDS if json.dumps(c, ensure_ascii=False) == f'"{c}"'}
    assert kept == set(LINE_ENDS_JSON_KEEPS)


@given(payloads)
def test_an_event_is_one_line_whatever_its_text(payload) -> None:
    event = sse_event(payload)
    assert event.endswith("\n\n") and event.splitlines() == [event[:-2], ""]
    assert json.loads(event.removeprefix("data: ")) == payload


def test_a_streamed_reply_with_line_separators_reads_whole(tiny_model) -> None:
    """A constrained reply holding each line end JSON keeps, streamed and read line by line as httpx reads it: every
    event is JSON and the content comes back whole (before the escape the stream split inside an event there)."""
    wanted = "a\u2028b\x85c\u2029d é"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40, "stream": True,
            "guided_choice": [wanted]}
    with running_server(tiny_model, max_rows=1) as url:
        with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as response:
            assert response.status_code == 200
            lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == wanted
