"""What a program's file references may read: any regular file for a local user (capped, never a device or a
FIFO), nothing for a server's client by default, or relative paths inside the operator's directory (no absolute
path, no '..', no symlink out). Under a server's policy a refusal reads the same whether the path exists or not,
and no error quotes a byte of a file the client did not send."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stdsl.compiler.grammar import Grammar
from stdsl.compiler.source_files import FileAccess, SourceFileError
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import GrammarError

GRAMMAR = 'start: "yes" | "no"\n'
SECRET = "SECRET-token-4711"


def _program(name: str) -> str:
    return 'output """Answer: {x: grammar("' + name + '")}"""'


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """DIR with a grammar, a subfolder, a broken grammar, a secret outside DIR and links pointing out and in."""
    root = tmp_path / "programs"
    (root / "sub").mkdir(parents=True)
    (root / "yes_no.lark").write_text(GRAMMAR)
    (root / "sub" / "inner.lark").write_text(GRAMMAR)
    (root / "broken.lark").write_text(f'start: "a" | {SECRET} ?? "\n')
    (tmp_path / "secret.lark").write_text(f'start: "{SECRET}"\n')
    (root / "out.lark").symlink_to(tmp_path / "secret.lark")
    (root / "in.lark").symlink_to(root / "yes_no.lark")
    return root


def test_a_local_user_reads_files_relative_to_the_program(tree: Path) -> None:
    program_file = tree / "p.stc"
    program_file.write_text(_program("yes_no.lark"))
    program = CompiledProgram.from_file(program_file)
    assert program.constraint({}).accepts(b"Answer: yes")


@pytest.mark.parametrize("name", ["/etc/passwd", "/proc/self/environ", "/dev/zero", "yes_no.lark", "missing.lark"])
def test_a_server_program_reads_no_file_at_all(name: str) -> None:
    with pytest.raises(ProgramError) as caught:
        CompiledProgram(_program(name), "<request program>", files=FileAccess.none())
    message = str(caught.value)
    assert "reads no files" in message and "--program-dir" in message and "<request program>:1:" in message


def test_the_program_directory_serves_relative_paths_inside_it(tree: Path) -> None:
    files = FileAccess.under(tree)
    for name in ("yes_no.lark", "sub/inner.lark", "in.lark", "./yes_no.lark", "sub/./inner.lark"):
        program = CompiledProgram(_program(name), "<request program>", files=files)
        assert program.constraint({}).accepts(b"Answer: no"), name


@pytest.mark.parametrize("name", ["/etc/passwd", "../secret.lark", "sub/../../secret.lark", "out.lark",
                                  "/proc/self/environ", "/dev/zero", ""])
def test_paths_leaving_the_program_directory_are_refused_alike(tree: Path, name: str) -> None:
    with pytest.raises(ProgramError) as caught:
        CompiledProgram(_program(name), "<request program>", files=FileAccess.under(tree))
    assert "refused" in str(caught.value) and SECRET not in str(caught.value)


def test_a_refusal_does_not_tell_whether_the_path_exists(tree: Path) -> None:
    files = FileAccess.under(tree)
    pairs = (("../secret.lark", "../no-such.lark"), ("/etc/passwd", "/etc/no-such"),
             ("sub/../../secret.lark", "sub/../../gone.lark"))
    for pair in pairs:
        messages = []
        for name in pair:
            with pytest.raises(ProgramError) as caught:
                CompiledProgram(_program(name), "<request program>", files=files)
            messages.append(str(caught.value).replace(name, "NAME"))
        assert messages[0] == messages[1], pair
        assert str(tree) not in messages[0]


def test_a_broken_file_in_the_directory_is_located_without_quoting_it(tree: Path) -> None:
    with pytest.raises(ProgramError) as caught:
        CompiledProgram(_program("broken.lark"), "<request program>", files=FileAccess.under(tree))
    message = str(caught.value)
    assert "broken.lark does not compile" in message and "line 1" in message
    assert SECRET not in message and "??" not in message and str(tree) not in message
    with pytest.raises(GrammarError, match="broken.lark:1:"):  # a local user sees the grammar's own error
        CompiledProgram(_program(str(tree / "broken.lark")), "<p>")


def test_devices_fifos_directories_and_oversized_files_are_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    big = tmp_path / "big.lark"
    big.write_bytes(b"a" * 2048)
    local = FileAccess.local(max_bytes=1024)
    cases = [("/dev/zero", "not a regular file"), (str(fifo), "not a regular file"), (str(tmp_path), "directory"),
             (str(big), "larger than 1024 bytes"), (str(tmp_path / "none"), "no such file")]
    for path, reason in cases:
        with pytest.raises(SourceFileError, match=reason):
            local.read(Path(path), path)


def test_grammar_from_file_reads_under_the_local_policy(tmp_path: Path) -> None:
    path = tmp_path / "g.lark"
    path.write_text(GRAMMAR)
    assert Grammar.from_file(path).text == GRAMMAR
    for bad, reason in (("/dev/zero", "not a regular file"), (str(tmp_path), "directory")):
        with pytest.raises(GrammarError, match=reason):
            Grammar.from_file(bad)
    (tmp_path / "latin1.lark").write_bytes(b'start: "\xe9"\n')
    with pytest.raises(GrammarError, match=r"latin1.lark:1:9: not UTF-8"):
        Grammar.from_file(tmp_path / "latin1.lark")
