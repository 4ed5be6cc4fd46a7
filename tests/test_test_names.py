"""Test modules have distinct basenames: pytest's default import mode puts each
test folder on sys.path, so two ``test_x.py`` in two folders stop collection."""

from collections import defaultdict
from pathlib import Path


def test_test_module_basenames_are_unique() -> None:
    seen: dict[str, list[Path]] = defaultdict(list)
    root = Path(__file__).parent
    for path in root.rglob("test_*.py"):
        seen[path.name].append(path.relative_to(root))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a basename: {clashes}"
