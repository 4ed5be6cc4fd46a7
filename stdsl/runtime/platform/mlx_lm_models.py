"""mlx-lm's model and cache code without its package start-up, leaving `import mlx_lm` to whoever wants it.

`mlx_lm/__init__.py` imports the converter and tokenizer utilities, so `from mlx_lm.models.llama import Model`
loads transformers and torch: seconds of start-up, and a process that decoded on the runner thread could then
abort at exit ("terminate called without an active exception"). The model modules need none of it, so while
`mlx_lm` is not imported its submodule (`mlx_lm.models`, `mlx_lm.sample_utils`) is loaded on its own from
mlx-lm's folder and entered in `sys.modules` under its real name; then `from mlx_lm.models.llama import Model`
works anywhere with no parent package. `sys.modules["mlx_lm"]` is never written: a later `import mlx_lm` runs
the real package start-up, shares these modules (the same classes), and finds them as its attributes
(`mlx_lm.models`) as a plain import would have left them.

It is also where mlx-lm's model code is overridden, and only one thing is here: Gated DeltaNet's CPU recurrence
(`gated_delta_ops`) is routed so that the engine's own passes (`chunked_recurrences`) solve long feeds in chunks;
everyone else, mlx-lm's own generators included, gets mlx-lm's step-by-step loop unchanged. The other override,
Llama 4's per-row chunk masks, is `llama4_rows.py`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import TYPE_CHECKING, Any

import mlx.core as mx

from stdsl.errors import UnsupportedModelError
from stdsl.kernels.gated_delta_chunks import gated_delta_chunked

_lock = threading.Lock()


class _ChildrenAttached(importlib.abc.Loader):
    """The package's own loader, which first attaches the submodules already in `sys.modules` to the package (and
    retires the finder that made it: the package is imported from then on)."""

    def __init__(self, loader: importlib.abc.Loader, finder: _ParentFinder) -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        prefix = module.__name__ + "."
        for name, child in list(sys.modules.items()):
            if name.startswith(prefix) and "." not in name[len(prefix):] and child is not None:
                setattr(module, name[len(prefix):], child)
        self.loader.exec_module(module)


class _ParentFinder(importlib.abc.MetaPathFinder):
    """Finds the real package with a loader that attaches its loaded parts; leaves `sys.meta_path` once it loads."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ChildrenAttached(spec.loader, self)
        return spec


def import_without_package_init(name: str) -> ModuleType:
    """Import module `name` (`package.part[.more]`) without running `package/__init__.py` if the package is not
    imported yet: `package.part` is loaded from the package's folder on its own, the rest imported under it.

    Raises UnsupportedModelError when the package or the part is not installed.
    """
    package, _, rest = name.partition(".")
    part = rest.partition(".")[0]
    first = f"{package}.{part}"
    with _lock:
        if package not in sys.modules and part and first not in sys.modules:
            _load_alone(package, part)
    return importlib.import_module(name)


def _load_alone(package: str, part: str) -> None:
    """Enter `package.part` in `sys.modules`, executed from the package's folder with no package module."""
    package_spec = importlib.util.find_spec(package)
    if package_spec is None or not package_spec.submodule_search_locations:
        raise UnsupportedModelError(f"{package}.{part} needs the {package} package; install it with: "
                                    f"pip install {package}")
    spec = importlib.machinery.PathFinder.find_spec(f"{package}.{part}", list(package_spec.submodule_search_locations))
    if spec is None or spec.loader is None:
        raise UnsupportedModelError(f"{package} has no module {part!r} (found {package_spec.origin})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    if not any(isinstance(finder, _ParentFinder) and finder.package == package for finder in sys.meta_path):
        sys.meta_path.insert(0, _ParentFinder(package))


if TYPE_CHECKING:
    from mlx_lm.models import cache, llama, qwen2, qwen3
else:
    cache, llama, qwen2, qwen3 = (import_without_package_init(f"mlx_lm.models.{name}")
                                  for name in ("cache", "llama", "qwen2", "qwen3"))
KVCache = cache.KVCache
make_prompt_cache = cache.make_prompt_cache

CHUNKED_FROM = 8
"""Feeds of at least this many positions run Gated DeltaNet's recurrence in chunks inside `chunked_recurrences`;
shorter ones (decode steps, short forced spans) keep mlx-lm's own step, which costs less there."""

_chunked = ContextVar("stdsl_chunked_recurrences", default=False)


def _with_chunks(original: Any) -> Any:
    """mlx-lm's `gated_delta_ops` (its CPU path for the gated delta rule), run in chunks where `_chunked` is set."""

    def gated_delta_ops(q: mx.array, k: mx.array, v: mx.array, g: mx.array, beta: mx.array,
                        state: mx.array | None = None, mask: mx.array | None = None) -> tuple[mx.array, mx.array]:
        if _chunked.get() and q.shape[1] >= CHUNKED_FROM and g.ndim == 3:
            if state is None:
                state = mx.zeros((q.shape[0], v.shape[2], v.shape[3], q.shape[3]), dtype=mx.float32)
            return gated_delta_chunked(q, k, v, g, beta, state, mask)
        return original(q, k, v, g, beta, state, mask)

    gated_delta_ops.stdsl_original = original  # type: ignore[attr-defined]
    return gated_delta_ops


def _install_chunks() -> None:
    """Route mlx-lm's `gated_delta_ops` through `_with_chunks` once (every hybrid model calls it by module
    attribute, so Qwen3.5, Qwen3-Next and Kimi Linear all take it); outside `chunked_recurrences` it is mlx-lm's."""
    try:
        module = import_without_package_init("mlx_lm.models.gated_delta")
    except ImportError:  # an mlx-lm without Gated DeltaNet: nothing to route
        return
    original = getattr(module, "gated_delta_ops", None)
    if original is not None and not hasattr(original, "stdsl_original"):
        setattr(module, "gated_delta_ops", _with_chunks(original))  # noqa: B010 (a module mypy sees typed)


@contextmanager
def chunked_recurrences() -> Iterator[None]:
    """Within this block (on this thread), Gated DeltaNet layers fed `CHUNKED_FROM` or more positions solve the
    recurrence a chunk at a time (`stdsl.kernels.gated_delta_chunks`, equal to mlx-lm's step-by-step loop up to
    float rounding) instead of one Python-level step per position."""
    token = _chunked.set(True)
    try:
        yield
    finally:
        _chunked.reset(token)


_install_chunks()


__all__ = ["KVCache", "cache", "chunked_recurrences", "import_without_package_init", "llama", "make_prompt_cache",
           "qwen2", "qwen3"]
