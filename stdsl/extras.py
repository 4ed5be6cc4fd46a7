"""The optional parts of stdsl and the `pip install` that brings each: a missing one is a one-line
`MissingExtraError` naming the command to run, never a `ModuleNotFoundError` traceback from deep inside."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from stdsl.errors import MissingExtraError


@dataclass(frozen=True)
class Extra:
    """One optional part: what uses it, the modules it needs, and how to install them."""

    user: str
    modules: tuple[str, ...]
    install: str
    stdsl_extra: str | None = None


EXTRAS = {
    "serve": Extra("stcon serve", ("fastapi", "uvicorn"), "pip install 'stdsl[serve]'", "serve"),
    "vllm": Extra("stdsl.integrations.vllm", ("torch", "vllm"), "pip install vllm"),
    "transformers": Extra("stdsl.integrations.transformers", ("torch", "transformers"),
                          "pip install torch transformers"),
}


def missing_extra(name: str, error: ImportError) -> MissingExtraError:
    """The error for extra `name` when importing it failed with `error` (its message names the module missing)."""
    extra = EXTRAS[name]
    command = extra.install
    checkout = Path(__file__).resolve().parents[1]
    if extra.stdsl_extra is not None and (checkout / "pyproject.toml").is_file():
        command += f" (from this checkout: pip install -e '{checkout}[{extra.stdsl_extra}]')"
    missing = error.name or ", ".join(extra.modules)
    return MissingExtraError(name, f"{extra.user} needs {missing}, which is not installed; run: {command}")


def require_extra(name: str) -> None:
    """Import the modules extra `name` needs, or raise its MissingExtraError."""
    try:
        for module in EXTRAS[name].modules:
            importlib.import_module(module)
    except ImportError as error:
        raise missing_extra(name, error) from None
