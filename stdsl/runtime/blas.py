"""Bind a real BLAS (MKL's libmkl_rt) for MLX's CPU backend before `mlx.core` loads.

MLX's Linux CPU wheel bundles the reference BLAS (~2 GFLOP/s). Loading `libmkl_rt` with
RTLD_GLOBAL first makes MLX's `sgemm` calls resolve to MKL (~180 GFLOP/s on one thread).
"""
from __future__ import annotations

import ctypes
import importlib.metadata
import os
import platform
import sys
import sysconfig
import warnings
from pathlib import Path

MKL_LIBRARY_NAMES = ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so")

_bound_path: str | None = None
_warned = False


def _candidate_dirs() -> list[Path]:
    """Directories where PyPI `mkl` puts its shared libraries (venv, user and system prefixes)."""
    dirs: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix, sysconfig.get_config_var("userbase")):
        if prefix:
            dirs.append(Path(prefix) / "lib")
    for key in ("data", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.append(Path(path) / "lib")
    return dirs


def find_mkl() -> Path | None:
    """Return the path of `libmkl_rt` from the installed `mkl` distribution, or None if absent."""
    try:
        dist = importlib.metadata.distribution("mkl")
        for entry in dist.files or ():
            if Path(str(entry)).name in MKL_LIBRARY_NAMES:
                located = Path(str(dist.locate_file(entry))).resolve()
                if located.is_file():
                    return located
    except importlib.metadata.PackageNotFoundError:
        pass
    for directory in _candidate_dirs():
        for name in MKL_LIBRARY_NAMES:
            candidate = directory / name
            if candidate.is_file():
                return candidate.resolve()
    return None


def _warn_once(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def bind_blas() -> str | None:
    """Load MKL globally so MLX's CPU matmuls use it; returns the bound library path or None.

    Idempotent. A no-op off Linux x86_64, when `STDSL_NO_BLAS=1`, or when `mlx.core` is
    already imported (then it warns once, since binding after MLX loads has no effect).
    """
    global _bound_path
    if _bound_path is not None:
        return _bound_path
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    if os.environ.get("STDSL_NO_BLAS") == "1":
        return None
    if "mlx.core" in sys.modules:
        _warn_once(
            "stdsl: mlx.core was imported before stdsl.runtime, so MLX keeps its slow reference BLAS; "
            "import stdsl.runtime (or call stdsl.load) first for fast CPU matmuls"
        )
        return None
    library = find_mkl()
    if library is None:
        _warn_once(
            "stdsl: PyPI `mkl` is not installed, so MLX's CPU backend uses its slow reference "
            "BLAS; install it with: pip install mkl"
        )
        return None
    if "MKL_NUM_THREADS" not in os.environ:
        os.environ["MKL_NUM_THREADS"] = "1"
        os.environ.setdefault("MKL_THREADING_LAYER", "SEQUENTIAL")
    os.environ.setdefault("MKL_INTERFACE_LAYER", "LP64")
    try:
        ctypes.CDLL(str(library), mode=os.RTLD_GLOBAL)
    except OSError as error:
        _warn_once(f"stdsl: could not load {library}: {error}; MLX keeps its reference BLAS")
        return None
    _bound_path = str(library)
    return _bound_path


def bound_blas() -> str | None:
    """The library path bound by `bind_blas`, or None if nothing was bound in this process."""
    return _bound_path
