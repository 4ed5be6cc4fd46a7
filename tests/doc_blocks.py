"""The fenced code blocks of README.md and docs/*.md, each classified by what the docs test does with it.

A block is one of:
- `python`: run, in order with the file's other Python blocks, in one namespace;
- `shell`: `stcon ...` commands, run as processes (a `pip install` step of a `&&` chain is skipped only under a
  `<!-- partly run: why -->` marker);
- `program`: a `.stc` listing whose first line names it (`# review.stc`), compiled and written to the working
  folder under that name for the blocks after it;
- `listing`: a listing of a repository file (`# examples/review.stc`: it must equal the file, whole; with
  `(excerpt)` after the name its lines must be a run of the file's lines);
- `served`: Python marked `<!-- run against: a running stcon serve ... -->`, run (under `-m slow`) against the
  server of the embedded model on a free port, its `http://127.0.0.1:8000` pointed there;
- `not run`: marked in the doc by `<!-- not run: why -->` on the line before the fence.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"^<!--\s*(not run|partly run|run against):\s*(.+?)\s*-->$")
NAMED = re.compile(r"^#\s+(\S+)(\s+\(excerpt\))?\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its info string, its text, and the marker before it (if any)."""

    path: Path
    line: int
    info: str
    text: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def named(self) -> tuple[str, bool] | None:
        """(the file name its first line gives, whether it is an excerpt), or None."""
        first = self.text.split("\n", 1)[0]
        found = NAMED.match(first)
        if found is None or "." not in found.group(1):
            return None
        return found.group(1), bool(found.group(2))

    @property
    def body(self) -> str:
        """The text after the naming first line."""
        return self.text.split("\n", 1)[1] if "\n" in self.text else ""

    @property
    def kind(self) -> str:
        if self.marker is not None and self.marker[0] == "not run":
            return "not run"
        if self.marker is not None and self.marker[0] == "run against" and self.info == "python":
            return "served"
        named = self.named
        if named is not None and (named[1] or (ROOT / named[0]).is_file()):
            return "listing"
        if named is not None and named[0].endswith(".stc"):
            return "program"
        if self.info == "python":
            return "python"
        if self.info in ("", "sh", "bash") and shell_commands(self.text):
            return "shell"
        return "unmarked"


def doc_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    start: int | None = None
    for number, line in enumerate(lines):
        if not line.startswith("```"):
            continue
        if start is None:
            start = number
            continue
        before = lines[start - 1].strip() if start > 0 else ""
        found = MARKER.match(before)
        marker = (found.group(1), found.group(2)) if found else None
        out.append(Block(path, start + 1, lines[start][3:].strip(), "\n".join(lines[start + 1:number]), marker))
        start = None
    assert start is None, f"{path}:{start}: a fence is never closed"
    return out


def shell_commands(text: str) -> list[list[str]]:
    """The commands of a shell block (each `&&` step apart), comments dropped; [] unless every one is an `stcon`
    command or a `pip install` set-up step."""
    commands: list[list[str]] = []
    for line in text.split("\n"):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            return []
        if not words:
            continue
        step: list[str] = []
        for word in [*words, "&&"]:
            if word == "&&":
                if step:
                    commands.append(step)
                step = []
            else:
                step.append(word)
    return commands if all(c[0] == "stcon" or is_set_up(c) for c in commands) else []


def is_set_up(command: list[str]) -> bool:
    """A `pip install` step: it sets an environment up, which the test environment already is."""
    return command[:2] == ["pip", "install"]
