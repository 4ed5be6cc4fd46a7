"""Every documented example runs: each fenced block of README.md and docs/*.md is run (Python on the embedded
SmolLM2, `stcon` commands as processes under `-m slow`), compiled (`.stc` programs), compared with the file it
lists, or carries a visible `<!-- not run: why -->` marker (tests/doc_blocks.py says which is which)."""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

import stdsl
from stdsl.cli import build_parser
from stdsl.programs import Program
from stdsl.runtime.options import DecodeOptions
from stdsl.server.requests.request_plan import COMPLETION_MAX_TOKENS, DEFAULT_MAX_TOKENS
from tests.doc_blocks import DOC_FILES, ROOT, Block, doc_blocks, is_set_up, shell_commands

CHECKED_RESULT = re.compile(r"#\s*(?:[\w ]+:\s*)?(True|False)\s*$")
"""A trailing `# True` / `# False` (or `# GBNF: True`) after an expression: the test asserts that value."""

docs = pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))


def working_folder(tmp_path: Path) -> Path:
    """A folder to run a doc's blocks in: the repository's examples beside what the doc's listings write."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return tmp_path


@docs
def test_every_block_is_run_checked_or_marked(path: Path) -> None:
    """No block is left out silently: each is one the tests run or check, or says in the doc why it is not."""
    for block in doc_blocks(path):
        assert block.kind != "unmarked", (f"{block.where}: a {block.info or 'plain'} block that is neither Python, "
                                          "`stcon` commands, a named listing nor marked `<!-- not run: why -->`")
        if block.marker is not None and block.marker[0] == "partly run":
            assert block.kind == "shell", f"{block.where}: only a shell block is partly run"
        if block.marker is not None and block.marker[0] == "run against":
            assert block.kind == "served", f"{block.where}: only a Python block is run against a server"
        if block.kind == "shell":
            set_up = [c for c in shell_commands(block.text) if is_set_up(c)]
            assert not set_up or (block.marker is not None and block.marker[0] == "partly run"), \
                f"{block.where}: {' '.join(set_up[0])} is set-up; mark the block `<!-- partly run: why -->`"


@docs
def test_listings_equal_the_files_they_name(path: Path) -> None:
    """A listing headed by a repository path is that file, whole (or, marked `(excerpt)`, a run of its lines)."""
    for block in doc_blocks(path):
        if block.kind != "listing":
            continue
        name, excerpt = block.named or ("", False)
        text = (ROOT / name).read_text(encoding="utf-8")
        if excerpt:
            lines, wanted = text.split("\n"), block.body.split("\n")
            assert any(lines[i:i + len(wanted)] == wanted for i in range(len(lines))), \
                f"{block.where}: the excerpt is not a run of lines of {name}"
        else:
            assert block.body + "\n" == text, f"{block.where}: the listing differs from {name}"


@docs
def test_blocks_compile(path: Path) -> None:
    """Without a model: Python compiles, programs compile, every `stcon` command parses as the CLI reads it."""
    for block in doc_blocks(path):
        if block.kind in ("python", "served"):
            compile(checked(block), block.where, "exec")
        elif block.kind == "program":
            Program(block.body, source=block.named[0] if block.named else block.where)
        elif block.kind == "shell":
            for command in shell_commands(block.text):
                if is_set_up(command):
                    continue
                assert command[0] == "stcon", f"{block.where}: {command[0]} is not an stcon command"
                try:
                    build_parser().parse_args(command[1:])
                except SystemExit:
                    pytest.fail(f"{block.where}: `{' '.join(command)}` does not parse")


def checked(block: Block) -> ast.Module:
    """The block's code, each expression statement whose line ends in `# True` / `# False` made an assertion."""
    tree = ast.parse(block.text, block.where)
    results = {}
    for token in tokenize.generate_tokens(io.StringIO(block.text).readline):
        found = CHECKED_RESULT.match(token.string) if token.type == tokenize.COMMENT else None
        if found:
            results[token.start[0]] = found.group(1) == "True"
    for index, statement in enumerate(tree.body):
        if isinstance(statement, ast.Expr) and statement.end_lineno in results:
            expected = results[statement.end_lineno]
            test = ast.Compare(left=statement.value, ops=[ast.Is()], comparators=[ast.Constant(expected)])
            tree.body[index] = ast.copy_location(ast.Assert(test=test, msg=ast.Constant(f"not {expected}")), statement)
    return ast.fix_missing_locations(tree)


def set_up_programs(blocks: list[Block], folder: Path) -> None:
    for block in blocks:
        if block.kind == "program" and block.named:
            (folder / block.named[0]).write_text(block.body + "\n", encoding="utf-8")


@docs
def test_python_blocks_run_on_the_embedded_model(path: Path, smollm2, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each doc's Python blocks run in order in one namespace, compiled as a user's file is (not under this module's
    `from __future__ import annotations`, which leaves a Pydantic model's field types unresolved); `stdsl.load()`
    gives the session's SmolLM2."""
    blocks = doc_blocks(path)
    if not any(block.kind == "python" for block in blocks):
        return
    real_load = stdsl.load

    def load(*args: Any, **kwargs: Any) -> Any:
        return smollm2 if not args and not kwargs else real_load(*args, **kwargs)

    monkeypatch.setattr(stdsl, "load", load)
    monkeypatch.chdir(working_folder(tmp_path))
    set_up_programs(blocks, tmp_path)
    namespace: dict[str, Any] = {"__name__": f"doc:{path.name}"}
    for block in blocks:
        if block.kind == "python":
            exec(compile(checked(block), block.where, "exec", dont_inherit=True), namespace)


@pytest.mark.slow
@docs
def test_shell_blocks_run(path: Path, tmp_path: Path) -> None:
    """Each `stcon` command of a doc runs as a process (from a folder holding the examples and the doc's
    programs) and exits 0."""
    blocks = doc_blocks(path)
    folder = working_folder(tmp_path)
    set_up_programs(blocks, folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for block in blocks:
        if block.kind != "shell":
            continue
        for command in shell_commands(block.text):
            if is_set_up(command):
                continue
            done = subprocess.run([sys.executable, "-m", "stdsl.cli", *command[1:]], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{block.where}: `{' '.join(command)}` exited {done.returncode}: " \
                                         f"{done.stderr[-2000:]}"


@pytest.mark.slow
@docs
def test_served_blocks_answer_through_a_running_server(path: Path, smollm2) -> None:
    """Each Python block marked to run against `stcon serve` runs, in order in one namespace (compiled as a user's
    file is), against the server app of the embedded model (what `stcon serve` runs) on a free local port."""
    from tests.server.server_fixtures import running_server

    blocks = [block for block in doc_blocks(path) if block.kind == "served"]
    if not blocks:
        return
    namespace: dict[str, Any] = {"__name__": f"doc:{path.name}"}
    with running_server(smollm2, aliases=()) as base_url:
        for block in blocks:
            code = block.text.replace("http://127.0.0.1:8000/v1", base_url)
            exec(compile(code, block.where, "exec", dont_inherit=True), namespace)


def test_default_max_tokens_are_stated_once_and_match_the_code() -> None:
    """README's table of default `max_tokens` holds the values the library, the CLI and the server use."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Default `max_tokens`", 1)[1].split("\n\n", 2)[1]
    rows = {cells[1].strip(): cells[2].strip() for line in table.split("\n") if line.startswith("| ")
            for cells in [line.split("|")]}
    parser = build_parser()
    cli = {"generate": parser.parse_args(["generate", "--schema", "s.json", "--prompt", "p"]).max_tokens,
           "run": parser.parse_args(["run", "p.stc"]).max_tokens}
    assert rows["library (`generate`, `stream`, `generate_batch`, `Engine.submit`, programs' `run` and `map`)"] \
        == f"{DecodeOptions().max_tokens}"
    assert rows["`stcon generate`, `stcon run` (`--max-tokens`)"] == f"{cli['generate']}" == f"{cli['run']}"
    assert rows["`stcon serve`, `/v1/chat/completions`"].startswith(f"{DEFAULT_MAX_TOKENS:,}")
    assert rows["`stcon serve`, `/v1/completions`"].startswith(f"{COMPLETION_MAX_TOKENS}")
    for path in DOC_FILES[1:]:
        text = path.read_text(encoding="utf-8")
        for number in re.findall(r"`max_tokens` (?:defaults to|default) (\d+(?:,\d{3})*)", text):
            assert number in {"256", "1,024", "16"}, f"{path.name} states a default max_tokens of {number}"


def test_a_result_comment_is_checked() -> None:
    """`expr  # True` in a doc is an assertion: a line whose value differs fails the block."""
    text = "x = 2\nx == 2   # True\nx > 2    # GBNF: False\nx == 3   # True"
    block = Block(ROOT / "README.md", 1, "python", text, None)
    namespace: dict[str, Any] = {}
    with pytest.raises(AssertionError, match="not True"):
        exec(compile(checked(block), block.where, "exec"), namespace)
    assert namespace["x"] == 2


NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(rf"(?<![\w./])((?:{NUMBER}\s?/\s?)*{NUMBER})\s?(×|%|ms|µs|MB|KB|GB|s\b|tokens/s)")
"""A measured figure: a number with a unit, a ratio (×) or a share (%); numbers in a slash list before the unit
(`0.295 / 0.276 / 0.292 s`) share it."""
NOT_MEASURED = re.compile(r"\([^()]*\b(?:was|were|before)\b[^()]*\)"
                          r"|\btarget (?:of )?(?:[≤≥] )?\S+|\S+(?: \S+)? target\b")
"""An earlier run's figures in a parenthesis (`(was 9.5 s)`) and targets (`the 100 MB target`, `the target of 2×`):
the current results file need not hold them."""
RESULTS = ROOT / "benchmarks" / "results"


def quoting_passages(path: Path) -> list[tuple[str, list[Path]]]:
    """Each paragraph (or table row) of a doc that cites a results file, with the files it cites: a
    `benchmarks/results/NAME.md` named in it, or in README's table of benchmarks the script's own results."""
    out = []
    for paragraph in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        for passage in paragraph.split("\n") if paragraph.lstrip().startswith("|") else [paragraph]:
            names = set(re.findall(r"benchmarks/results/(\w+)\.md", passage))
            names |= set(re.findall(r"^\| `benchmarks/(\w+)\.py`", passage)) if path.name == "README.md" else set()
            files = [RESULTS / f"{name}{suffix}" for name in sorted(names) for suffix in (".md", ".json")]
            if names:
                out.append((passage, [file for file in files if file.is_file()]))
    return out


def numbers_in(text: str) -> set[Decimal]:
    """The numbers of a results file (past 20 digits they are ids and hashes, not figures)."""
    found = (Decimal(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text))
    return {number for number in found if number.adjusted() < 20}


def quoted(figure: str, unit: str, numbers: set[Decimal]) -> bool:
    """Whether a results file holds the figure: the same number, rounded to the figure's digits (a share may
    be written as a fraction there)."""
    value = Decimal(figure.replace(",", ""))
    step = Decimal(1).scaleb(value.as_tuple().exponent)  # type: ignore[arg-type]
    candidates = {value} | ({value / 100} if unit == "%" else set())
    for number in numbers:
        for wanted in candidates:
            digits = step / 100 if wanted != value else step
            if number == wanted or number.quantize(digits, rounding=ROUND_HALF_UP) == wanted:
                return True
    return False


@docs
def test_measured_figures_are_those_of_the_results_files(path: Path) -> None:
    """Every figure in a passage that cites `benchmarks/results/` appears in the cited file (rounded as quoted);
    earlier runs' figures in a `(was ...)` / `(... before ...)` parenthesis, and targets, are not checked."""
    for passage, files in quoting_passages(path):
        assert files, f"{path.name}: cites a results file that does not exist: {passage[:120]}"
        numbers = set().union(*(numbers_in(file.read_text(encoding="utf-8")) for file in files))
        missing = [f"{figure}{unit}" for figures, unit in FIGURE.findall(NOT_MEASURED.sub("", passage))
                   for figure in re.split(r"\s?/\s?", figures) if not quoted(figure, unit, numbers)]
        assert not missing, f"{path.name}: {missing} are in none of {[f.name for f in files]}: {passage[:160]}"


def test_a_slash_list_shares_its_unit() -> None:
    """Every number of `0.016 / 0.25 / 1.03 s` is a figure in seconds, not only the last (objects43 changed one on
    purpose and the test still passed)."""
    assert FIGURE.findall("p50 / p95 / p99 0.016 / 0.25 / 1.03 s, 12/24 files in 3 s") == [
        ("0.016 / 0.25 / 1.03", "s"), ("3", "s")]


def test_a_figure_is_quoted_only_as_its_file_holds_it() -> None:
    """The issue's contradiction: serving.md quoted 0.83× and 236 MB where server.md holds 1.09× and 8.2 MB."""
    numbers = numbers_in((RESULTS / "server.md").read_text(encoding="utf-8"))
    assert quoted("1.09", "×", numbers) and quoted("8.2", "MB", numbers) and quoted("42", "%", numbers)
    assert not quoted("0.83", "×", numbers) and not quoted("236", "MB", numbers) and not quoted("43.5", "%", numbers)
    assert quoted("306", "s", {Decimal("305.5")}) and not quoted("306", "s", {Decimal("305.4")})


@docs
def test_every_test_a_doc_cites_exists(path: Path) -> None:
    """A test a doc names as proof (`tests/runtime/test_engine.py`, or a bare `test_pushdown_rows.py`) exists."""
    text = path.read_text(encoding="utf-8")
    for cited in re.findall(r"`(tests/[\w/.]*)", text):
        assert (ROOT / cited.rstrip("/.")).exists(), f"{path.name} cites {cited}, which does not exist"
    names = {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    for cited in re.findall(r"\b(test_\w+\.py)\b", text):
        assert cited in names, f"{path.name} cites {cited}, which does not exist"


ROOMS = "compiler|kernels|control|runtime|server|integrations|theory|model_files"


@docs
def test_every_package_path_a_doc_names_exists(path: Path) -> None:
    """A file or folder of the package a doc names (`runtime/engine.py`, `stdsl/control/split/`) exists, so a
    move (issue 34) cannot leave a doc pointing at nothing."""
    text = path.read_text(encoding="utf-8")
    for cited in re.findall(rf"(?<![\w/.-])(?:stdsl/)?((?:{ROOMS})/[\w/]*[\w](?:\.py|/)?)", text):
        assert (ROOT / "stdsl" / cited.rstrip("/")).exists(), f"{path.name} names {cited}, which does not exist"
