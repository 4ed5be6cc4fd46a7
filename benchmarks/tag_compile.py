"""Structural tags and `%json` grammars for agent-sized tool lists: stdsl beside XGrammar and llguidance, cold and
with one tool changed.

Issue 36 asks that a tool list with one tool changed cost one tool's compile, for tool lists and "the same for
structural tags and grammars with many `%json` alternatives".  For 8, 32, 128 and 400 random tools
(`random_tools.py`), on the Qwen3.5 vocabulary, one process times (vocabularies loaded, then `gc.freeze()`d):

- `tag:MODEL`: XGrammar's own tool-calling structural tag (`get_model_structural_tag`, e.g. qwen_3's
  `triggered_tags`), compiled by stdsl as a `structural_tag` response format (`build_constraint`, the server's
  compile, and the first token mask) and by XGrammar's `GrammarCompiler` (its cache on, cleared before cold) with
  its first mask;
- `%json`: the Hermes reply as a Lark grammar with one `%json` per tool (`tool_compile.py`'s llguidance grammar),
  compiled by stdsl as a grammar response format and by llguidance (`LLMatcher` and the first mask; it keeps
  nothing across grammars, so its changed is a compile like cold).

cold = every cache emptied first; changed = the same list with the middle tool's schema replaced, right after the
cold build.  A model whose tag stdsl refuses is reported with the refusal.  Writes
benchmarks/results/tag_compile.{md,json}; the machine is shared and noisy: compare the ratios of one run.

    python benchmarks/tag_compile.py
    python benchmarks/tag_compile.py --sizes 8 128 --models qwen_3 --peers xgrammar
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from peers import load_qwen_vocab, version_of  # noqa: E402
from random_tools import random_tools  # noqa: E402
from tool_compile import LLGuidance, Stdsl, XGrammar, _changed  # noqa: E402

MODELS = ("qwen_3", "llama", "qwen_3_coder", "harmony", "kimi", "deepseek_r1")


def _tag(xgrammar: Any, tools: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """XGrammar's structural tag for the tools as the JSON a client sends."""
    tag = xgrammar.get_model_structural_tag(model, tools=tools, reasoning=False)
    return dict(json.loads(tag.model_dump_json()))


class XGrammarTag(XGrammar):
    """XGrammar compiling a structural tag's JSON with its compiler's cache."""

    def run_tag(self, tag: dict[str, Any]) -> dict[str, float]:
        began, cpu_began = time.perf_counter(), time.process_time()
        matcher = self.xgr.GrammarMatcher(self.compiler.compile_structural_tag(json.dumps(tag)))
        matcher.fill_next_token_bitmask(self.mask, 0)
        return {"total_s": time.perf_counter() - began, "cpu_s": time.process_time() - cpu_began}

    def cold_tag(self, tag: dict[str, Any]) -> dict[str, float]:
        self.compiler.clear_cache()
        return self.run_tag(tag)


def _attempt(run: Any, *args: Any) -> dict[str, Any]:
    try:
        return dict(run(*args))
    except Exception as error:  # noqa: BLE001 - a refusal is reported, not fatal
        return {"error": f"{type(error).__name__}: {str(error)[:200]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128, 400])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--peers", nargs="*", default=["llguidance", "xgrammar"])
    parser.add_argument("--no-json-grammar", action="store_true", help="leave out the %%json grammar rows")
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tag_compile"))
    args = parser.parse_args()
    import xgrammar

    ours = Stdsl()
    vocab = load_qwen_vocab()
    xgr = XGrammarTag(vocab) if "xgrammar" in args.peers else None
    llg = LLGuidance(vocab) if "llguidance" in args.peers else None
    gc.collect()
    gc.freeze()
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        tools = random_tools(size, seed=size)
        changed = _changed(tools, seed=size + 1)
        for model in args.models:
            tag, changed_tag = _tag(xgrammar, tools, model), _tag(xgrammar, changed, model)
            row: dict[str, Any] = {"tools": size, "what": f"tag:{model}"}
            row["stdsl_cold"] = _attempt(ours.cold, {"kind": "structural_tag", "tag": tag})
            row["stdsl_changed"] = _attempt(ours.run, {"kind": "structural_tag", "tag": changed_tag})
            if xgr is not None:
                row["peer"] = "xgrammar"
                row["peer_cold"] = _attempt(xgr.cold_tag, tag)
                row["peer_changed"] = _attempt(xgr.run_tag, changed_tag)
            rows.append(row)
            print(json.dumps(row), flush=True)
        if not args.no_json_grammar:
            text, changed_text = LLGuidance.grammar(tools, "hermes"), LLGuidance.grammar(changed, "hermes")
            row = {"tools": size, "what": "%json"}
            row["stdsl_cold"] = _attempt(ours.cold, {"kind": "grammar", "text": text, "syntax": "lark"})
            row["stdsl_changed"] = _attempt(ours.run, {"kind": "grammar", "text": changed_text, "syntax": "lark"})
            if llg is not None:
                row["peer"] = "llguidance"
                row["peer_cold"] = _attempt(llg.run, tools, "hermes")
                row["peer_changed"] = _attempt(llg.run, changed, "hermes")
            rows.append(row)
            print(json.dumps(row), flush=True)
    command = "python benchmarks/tag_compile.py " + " ".join(sys.argv[1:])
    versions = {name: version_of(name) for name in ("xgrammar", "llguidance") if name in args.peers}
    result = {"command": command.strip(), "machine": platform.platform(), "load": os.getloadavg(),
              "versions": versions, "rows": rows}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result))


def _cell(run: dict[str, Any] | None, key: str) -> str:
    if run is None:
        return "–"
    return "refused" if "error" in run else f"{run[key]:.3f}"


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# Structural tags and %json grammars for many tools: compile + first mask (process CPU seconds)", "",
             f"Command: `{result['command']}`  ",
             f"Machine: {result['machine']}, load average {', '.join(f'{x:.2f}' for x in result['load'])} at the end "
             "(shared, noisy: read the ratios)  ", f"Peers: {result['versions']}", "",
             "cold empties every cache first; changed is the same list with one tool's schema replaced, built right "
             "after.  stdsl is `build_constraint` (the server's compile) and the first token mask.", "",
             "| tools | what | stdsl cold | stdsl changed | peer | peer cold | peer changed | stdsl/peer cold "
             "| stdsl/peer changed |", "|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        ours, ours_changed = row["stdsl_cold"], row["stdsl_changed"]
        peer, peer_changed = row.get("peer_cold"), row.get("peer_changed")

        def ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
            if not a or not b or "error" in a or "error" in b:
                return "–"
            return f"{a['cpu_s'] / b['cpu_s']:.2f}×"

        lines.append(f"| {row['tools']} | {row['what']} | {_cell(ours, 'cpu_s')} | {_cell(ours_changed, 'cpu_s')} | "
                     f"{row.get('peer', '–')} | {_cell(peer, 'cpu_s')} | {_cell(peer_changed, 'cpu_s')} | "
                     f"{ratio(ours, peer)} | {ratio(ours_changed, peer_changed)} |")
    refusals = sorted({(row["what"], run["error"]) for row in result["rows"] for key, run in row.items()
                       if key.startswith("stdsl") and isinstance(run, dict) and "error" in run})
    if refusals:
        lines += ["", "stdsl refusals:", ""] + [f"- {what}: {error}" for what, error in refusals]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
