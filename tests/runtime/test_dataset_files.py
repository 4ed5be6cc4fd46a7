"""The files of a dataset run, without a model: input lines split on "\\n" only, every malformed line refused on
its own, the output refused before any work when it cannot take the records, and an earlier run's records read
back without cutting a whole one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.errors import OptionError
from stdsl.runtime.dataset_files import (
    MAX_DEPTH,
    check_output,
    finished_lines,
    input_lines,
    read_arguments,
    record_text,
)

LINE_BREAKS_OF_SPLITLINES = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
text_with_breaks = st.text(alphabet=st.sampled_from("ab \"\\{}" + LINE_BREAKS_OF_SPLITLINES), max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=5), json_values | text_with_breaks, max_size=3), min_size=1,
                max_size=6), st.booleans())
def test_lines_split_on_newline_only_and_read_back_equal(tmp_path_factory: pytest.TempPathFactory,
                                                        records: list[dict[str, object]], ascii_only: bool) -> None:
    path = tmp_path_factory.mktemp("input") / "data.jsonl"
    path.write_bytes("\n".join(json.dumps(r, ensure_ascii=ascii_only) for r in records).encode("utf-8") + b"\n")
    lines = input_lines(path)
    assert [number for number, _ in lines] == list(range(1, len(records) + 1))
    assert [read_arguments(raw, number) for number, raw in lines] == records


def test_blank_lines_keep_the_numbering(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \r\n{"a": "x\xe2\x80\xa8y"}\r\n{"a": 3}')
    assert [(n, read_arguments(raw, n)) for n, raw in input_lines(path)] == [
        (1, {"a": 1}), (4, {"a": "x\u2028y"}), (5, {"a": 3})]


@pytest.mark.parametrize(("raw", "says"), [
    (b'{"n": ' + b"9" * 5000 + b"}", "digits"),
    (b'{"n": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", f"deeper than {MAX_DEPTH}"),
    (b'{"n": ' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}", f"deeper than {MAX_DEPTH}"),
    (b'{"n": [1, 2', "not valid JSON at column 12"),
    (b'["n", 1]', "not a JSON object of program arguments (a list)"),
    (b'"text"', "(a string)"),
    (b'{"n": NaN}', "NaN is not a JSON number"),
    (b'{"n": "\xff\xfe"}', "not UTF-8 text (byte 0xff at column 8)"),
    (b'{"n": "\xed\xa0\x80"}', "not UTF-8 text (byte 0xed at column 8)"),
])
def test_each_malformed_line_is_refused_on_its_own(raw: bytes, says: str) -> None:
    with pytest.raises(OptionError) as caught:
        read_arguments(raw, 2)
    assert says in str(caught.value)


def test_a_lone_surrogate_escape_is_read_as_text_for_the_program_to_refuse() -> None:
    assert read_arguments(b'{"n": "\\ud800"}') == {"n": "\ud800"}
    assert read_arguments(b'\xef\xbb\xbf{"n": 1}', 1) == {"n": 1}


def test_outputs_that_cannot_take_the_records_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"n": 1}\n')
    (tmp_path / "link.jsonl").symlink_to(data)
    os.link(data, tmp_path / "hard.jsonl")
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("x")
    cases = {
        data: "is the input file",
        tmp_path / "link.jsonl": "is the input file",
        tmp_path / "hard.jsonl": "is the input file",
        tmp_path / "folder": "is a directory",
        tmp_path / "missing" / "out.jsonl": "does not exist",
        tmp_path / "plain" / "out.jsonl": "does not exist",
        Path("/proc/version"): "cannot be written",
    }
    for output, says in cases.items():
        with pytest.raises(OptionError) as caught:
            check_output(data, output)
        assert says in str(caught.value) and str(output) in str(caught.value)
    assert data.read_text() == '{"n": 1}\n'
    check_output(data, tmp_path / "new.jsonl")
    assert not (tmp_path / "new.jsonl").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_output_is_refused(tmp_path: Path) -> None:
    data, output = tmp_path / "data.jsonl", tmp_path / "out.jsonl"
    data.write_text('{"n": 1}\n')
    output.write_text("")
    output.chmod(0o444)
    with pytest.raises(OptionError, match="cannot be written"):
        check_output(data, output)


def test_a_whole_last_record_is_kept_and_a_torn_one_cut(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    output.write_text(record_text(1, {"result": {"a": 1}}) + record_text(2, {"error": "bad"}).rstrip("\n"))
    assert finished_lines(output) == {1, 2}
    assert output.read_text().endswith('"bad"}\n')
    whole = output.read_bytes()
    output.write_bytes(whole + b'{"line": 3, "resu')
    assert finished_lines(output) == {1, 2} and output.read_bytes() == whole


@pytest.mark.parametrize("foreign", ['{"n": 1}\n{"n": 2}', '{"n": 1}\n', "plain text without a newline"])
def test_a_file_that_is_not_a_results_file_is_refused_unchanged(tmp_path: Path, foreign: str) -> None:
    output = tmp_path / "out.jsonl"
    output.write_text(foreign)
    with pytest.raises(OptionError, match="not a record of a dataset run"):
        finished_lines(output)
    assert output.read_text() == foreign


def test_records_with_lone_surrogates_stay_utf8() -> None:
    text = record_text(4, {"error": "bad value '\ud800' and é"})
    assert json.loads(text.encode("utf-8")) == {"line": 4, "error": "bad value '\ud800' and é"}
    assert record_text(5, {"result": {"name": "é"}}) == '{"line": 5, "result": {"name": "é"}}\n'
