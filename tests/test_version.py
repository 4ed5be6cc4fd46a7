"""``stdsl.__version__`` is the installed distribution's version, the one pyproject.toml declares."""

import tomllib
from pathlib import Path

import stdsl


def test_version_matches_pyproject() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert stdsl.__version__ == pyproject["project"]["version"]
