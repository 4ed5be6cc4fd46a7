"""docs/scale.md's CPU section cannot drift from what runs: every shell command it shows is a command of
benchmarks/vllm_setup.sh (which runs them in order), and every Python excerpt is text of the example it names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "scale.md"
SCRIPT = ROOT / "benchmarks" / "vllm_setup.sh"
SECTION = "### vLLM on this machine (CPU)"


def commands(text: str) -> list[str]:
    """Shell commands of `text`: backslash continuations joined, blank and comment lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def cpu_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start)
    return text[start:end]


def blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_every_shell_command_of_the_cpu_section_is_run_by_the_setup_script_in_order() -> None:
    script = commands(SCRIPT.read_text(encoding="utf-8"))
    shown = [command for block in blocks(cpu_section(), "sh") for command in commands(block)]
    assert len(shown) >= 8
    positions = []
    for command in shown:
        assert command in script, f"docs/scale.md shows a command the setup script does not run: {command}"
        positions.append(script.index(command))
    assert positions == sorted(positions), "the setup script runs the doc's commands in another order"


def test_every_python_excerpt_is_text_of_the_example_it_names() -> None:
    excerpts = blocks(cpu_section(), "python")
    assert excerpts
    for excerpt in excerpts:
        header, *lines = excerpt.splitlines()
        name = re.fullmatch(r"# (examples/\S+\.py) \(excerpt\)", header)
        assert name, f"a Python block must start with '# examples/NAME.py (excerpt)': {header}"
        source = (ROOT / name.group(1)).read_text(encoding="utf-8")
        assert "\n".join(lines) in source, f"the excerpt of {name.group(1)} is not its text"
