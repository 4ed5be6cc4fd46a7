"""Grammars (issue 26): stdsl beside llguidance and XGrammar on the real grammars of `../shared/grammars`.

One process measures, per grammar file:
- whether each engine compiles it, and its compile time (median of `--repeats`; stdsl with a fresh `source` per
  repeat so its compile cache never answers, XGrammar with its cache off, llguidance's matcher construction);
- the warm per-token mask time on the Qwen3.5 vocabulary along a valid string (the longest hand-written accepted
  case of `tests/compiler/grammar/shared_grammar_cases.py`): every engine fills a full-vocabulary int32 bitmask
  at each token, the document's token must be allowed, and the second pass over the string is the warm one;
- outputs on the embedded SmolLM2 under `max_tokens` 16, 32, 64, 128: stdsl through `stdsl.generate` (valid under
  every feasible budget), the peers through the shared greedy loop of `decode.py` with their matchers (their
  output at a budget is their unbounded greedy output cut there, and a cut output counts invalid). An output is
  valid when the grammar accepts it (stdsl's exact `accepts`; the peer's own matcher where stdsl refuses the file).

Writes benchmarks/results/grammars.{json,md}.

    python benchmarks/grammars.py                                   # everything (llguidance, xgrammar installed)
    python benchmarks/grammars.py --no-generate --grammars xgr_ids_ignore_ws.lark
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

from stdsl.runtime.platform.blas import bind_blas  # noqa: E402,I001
import stdsl  # noqa: E402
from decode import Driver, LLGuidanceDriver, Run, run_loop, token_text  # noqa: E402
from peers import bitmask_to_bool, load_qwen_vocab, version_of  # noqa: E402
from xgrammar_driver import XGrammarDriver  # noqa: E402

bind_blas()  # MKL for MLX's CPU matmuls before anything is timed (stdsl.load binds it too)

GRAMMARS = BENCH_DIR.parent.parent / "shared" / "grammars"
SUFFIXES = (".lark", ".gbnf", ".ebnf")
BUDGETS = (16, 32, 64, 128)
ENGINES = ("stdsl", "llguidance", "xgrammar")


def syntax_of(path: Path) -> str:
    return "lark" if path.suffix == ".lark" else "gbnf"


def walk_string(name: str) -> str | None:
    """The longest hand-written accepted string of the grammar, if the test cases have one."""
    from tests.compiler.grammar.shared_grammar_cases import CASES

    accepted = CASES.get(name, ([], []))[0]
    return max(accepted, key=len) if accepted else None


def median_s(fn: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    """(last result, median seconds) of `repeats` calls."""
    times, value = [], None
    for _ in range(repeats):
        tick = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - tick)
    return value, statistics.median(times)


def us_stats(times: list[float]) -> dict[str, float]:
    if not times:
        return {}
    arr = np.asarray(times) * 1e6
    return {"p50": float(np.median(arr)), "p95": float(np.percentile(arr, 95)), "max": float(arr.max()),
            "mean": float(arr.mean())}


class QwenEngines:
    """The three engines on the Qwen3.5 vocabulary: compile a grammar, fill bitmasks along token ids."""

    def __init__(self, peers: list[str], errors: list[str]) -> None:
        from stdsl.model_files.tokenizer import Tokenizer

        self.qwen = load_qwen_vocab()
        self.size = len(self.qwen.token_bytes)
        self.tokenizer = Tokenizer.qwen()
        self.bits = np.zeros((1, (self.size + 31) // 32), dtype=np.int32)
        self.row_caches: dict[int, Any] = {}
        self.llg: Any = None
        self.xgr: Any = None
        if "llguidance" in peers:
            try:
                import llguidance
                import llguidance.numpy

                enc = self.qwen.encoding
                self.llg = llguidance
                self.llg_tokenizer = llguidance.LLTokenizer.from_tiktoken(
                    encoder=enc._mergeable_ranks, special_tokens=enc._special_tokens, pattern=enc._pat_str,
                    eos_token=self.qwen.eos_id, n_vocab=self.size)
            except ImportError as error:
                errors.append(f"llguidance: {error}")
        if "xgrammar" in peers:
            try:
                import xgrammar

                self.xgr = xgrammar
                raw = [b if b is not None else b"" for b in self.qwen.token_bytes]
                info = xgrammar.TokenizerInfo(raw, xgrammar.VocabType.RAW, vocab_size=self.size,
                                              stop_token_ids=[self.qwen.eos_id], add_prefix_space=False)
                self.xgr_compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
            except ImportError as error:
                errors.append(f"xgrammar: {error}")

    def compile(self, engine: str, path: Path, text: str, repeat: int) -> Any:
        if engine == "stdsl":
            return stdsl.compile(stdsl.Grammar(text, source=f"{path}#{repeat}"), max_seconds=60)
        if engine == "llguidance":
            grammar = self.llg.grammar_from(syntax_of(path), text)
            matcher = self.llg.LLMatcher(self.llg_tokenizer, grammar, log_level=1)
            if matcher.is_error():
                raise RuntimeError(matcher.get_error())
            return matcher
        grammar = (self.xgr.Grammar.from_lark(text) if syntax_of(path) == "lark"
                   else self.xgr.Grammar.from_ebnf(text))
        return self.xgr.GrammarMatcher(self.xgr_compiler.compile_grammar(grammar))

    def masks(self, engine: str, compiled: Any, ids: list[int]) -> tuple[list[float], list[float]]:
        """Seconds per bitmask fill along ids (then eos): the first pass and the warm second pass."""
        passes = []
        for _ in range(2):
            fill, advance, reset = self._driver(engine, compiled)
            times = []
            for step, token in enumerate(ids + [self.qwen.eos_id]):
                tick = time.perf_counter()
                fill()
                times.append(time.perf_counter() - tick)
                if not bitmask_to_bool(self.bits, self.size)[token]:
                    raise RuntimeError(f"{engine} refuses token {token} at step {step} of the valid string")
                if token != self.qwen.eos_id:
                    advance(token)
            reset()
            passes.append(times)
        return passes[0], passes[1]

    def _driver(self, engine: str, compiled: Any) -> tuple[Callable[[], Any], Callable[[int], Any], Callable[[], Any]]:
        """(fill self.bits, advance by a token, reset) for one engine's compiled grammar."""
        if engine == "llguidance":
            fill_llg = self.llg.numpy.fill_next_token_bitmask
            return (lambda: fill_llg(compiled, self.bits, 0), compiled.consume_token, compiled.reset)
        if engine == "xgrammar":
            return (lambda: compiled.fill_next_token_bitmask(self.bits, 0), compiled.accept_token, compiled.reset)
        return self._stdsl_driver(compiled)

    def _stdsl_driver(self, constraint: Any) -> tuple[Callable[[], Any], Callable[[int], Any], Callable[[], Any]]:
        """stdsl's rows on demand: the cached mask of the current state (configuration) copied into the bitmask, by
        the fill the engine's rows serve (`RowCache.fill_bitmask`, `PushdownRows.fill_bitmask`).  The bitmask's row
        is taken once, outside the timed fill, as the peers get the whole bitmask and an index."""
        from stdsl.control.special_vocabulary import vocabulary_for
        from stdsl.control.tables import Tables
        from stdsl.kernels.rows import RowCache

        vocab = vocabulary_for(self.tokenizer, constraint)  # the engine's: special tokens spelled where used
        out = self.bits[0]
        if hasattr(constraint, "automaton"):
            automaton = constraint.automaton
            if id(automaton) not in self.row_caches:
                rows = max(256, automaton.num_states)
                self.row_caches[id(automaton)] = RowCache(automaton, vocab, max_rows=rows)
            cache = self.row_caches[id(automaton)]
            start = constraint.automaton.start
            state = [start]

            def fill_dfa() -> None:
                cache.fill_bitmask(state[0], out)

            def advance_dfa(token: int) -> None:
                state[0] = int(cache.advance(state[0], token))

            return fill_dfa, advance_dfa, lambda: state.__setitem__(0, start)
        rows = Tables.of(constraint.machine, vocab).rows
        config = [constraint.machine.start]

        def fill_pushdown() -> None:
            rows.fill_bitmask(config[0], out)

        def advance_pushdown(token: int) -> None:
            config[0] = int(rows.next_states(config[0])[token])

        return fill_pushdown, advance_pushdown, lambda: config.__setitem__(0, constraint.machine.start)


def measure_qwen(engines: QwenEngines, path: Path, repeats: int) -> tuple[dict[str, Any], Any]:
    """Compile and mask figures of one grammar on Qwen3.5; returns them and stdsl's constraint (None if refused)."""
    text = path.read_text()
    walk = walk_string(path.name)
    ids = engines.qwen.encode(walk) if walk is not None else None
    row: dict[str, Any] = {"grammar": path.name, "syntax": syntax_of(path), "walk_tokens": len(ids or [])}
    ours = None
    available = ["stdsl"] + [p for p, lib in (("llguidance", engines.llg), ("xgrammar", engines.xgr)) if lib]
    for engine in available:
        cell: dict[str, Any] = {}
        counter = iter(range(1_000_000))
        try:
            compiled, seconds = median_s(lambda: engines.compile(engine, path, text, next(counter)), repeats)
            cell.update(compiles=True, compile_s=seconds)
            if engine == "stdsl":
                ours = compiled
                cell["machine"] = "pushdown" if hasattr(compiled, "machine") else "dfa"
        except Exception as error:  # noqa: BLE001  (a refusal is a result)
            cell.update(compiles=False, error=f"{type(error).__name__}: {str(error)[:300]}")
            row[engine] = cell
            continue
        if ids is not None:
            try:
                first, warm = engines.masks(engine, compiled, ids)
                cell.update(first_mask_us=us_stats(first), warm_mask_us=us_stats(warm))
            except Exception as error:  # noqa: BLE001
                cell["mask_error"] = f"{type(error).__name__}: {str(error)[:300]}"
        row[engine] = cell
    print(f"[grammars] {path.name}: compiled and masked", file=sys.stderr, flush=True)
    return row, ours


class LLGuidanceGrammarDriver(LLGuidanceDriver):
    """llguidance on SmolLM2's tokenizer, compiling a grammar file instead of a schema (masks only)."""

    def compile_grammar(self, text: str, syntax: str) -> None:
        grammar = self.llg.grammar_from(syntax, text)
        self.matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=1)
        self._check("compile")


class XGrammarGrammarDriver(XGrammarDriver):
    """XGrammar on SmolLM2's tokenizer, compiling a grammar file instead of a schema (masks only)."""

    def compile_grammar(self, text: str, syntax: str) -> None:
        grammar = self.xgr.Grammar.from_lark(text) if syntax == "lark" else self.xgr.Grammar.from_ebnf(text)
        self.compiled = self.compiler.compile_grammar(grammar)
        self.matcher = self.xgr.GrammarMatcher(self.compiled)


def prompt_for(path: Path) -> str:
    return ("Write one short example of text in the language of this grammar, and nothing else.\n\n"
            + path.read_text())


def generate_all(model: Any, path: Path, ours: Any, drivers: dict[str, Driver], budgets: tuple[int, ...]
                 ) -> dict[str, Any]:
    """Outputs per engine and budget: text, tokens, finish, valid."""
    from stdsl.runtime.batch.requests import prompt_tokens

    text, prompt = path.read_text(), prompt_for(path)
    out: dict[str, Any] = {}
    if ours is not None:
        runs = []
        for budget in budgets:
            try:
                result = stdsl.generate(model, prompt, constraint=stdsl.Grammar(text, source=str(path)),
                                        max_tokens=budget)
                runs.append({"max_tokens": budget, "text": result.text, "tokens": result.stats.emitted_tokens,
                             "finish": result.finish_reason, "valid": bool(ours.accepts(result.text))})
            except stdsl.BudgetError as error:
                runs.append({"max_tokens": budget, "infeasible": str(error)[:200], "valid": None})
            except stdsl.CompileError as error:  # e.g. a special token SmolLM2's tokenizer lacks: not applicable
                runs.append({"max_tokens": budget, "refused": f"{type(error).__name__}: {error}"[:300], "valid": None})
            except stdsl.StdslError as error:
                runs.append({"max_tokens": budget, "error": f"{type(error).__name__}: {error}"[:300], "valid": False})
        out["stdsl"] = runs
    ids = prompt_tokens(model, prompt)
    for name, driver in drivers.items():
        try:
            driver.compile_grammar(text, syntax_of(path))  # type: ignore[attr-defined]
            run = Run(path.name, name)
            emitted = run_loop(model, ids, driver, max(budgets), run)
            whole = token_text(model, emitted)
            ended = run.finish in ("eos", "stop")
            grammar_says = bool(ours.accepts(whole)) if ours is not None else True  # else: the peer's mask let eos in
            out[name] = [{"max_tokens": budget, "text": token_text(model, emitted[:budget]),
                          "tokens": min(len(emitted), budget), "finish": run.finish if len(emitted) <= budget
                          else "length", "valid": ended and len(emitted) <= budget and grammar_says}
                         for budget in budgets]
        except Exception as error:  # noqa: BLE001
            out[name] = [{"max_tokens": b, "error": f"{type(error).__name__}: {error}"[:300], "valid": False}
                         for b in budgets]
    print(f"[grammars] {path.name}: generated", file=sys.stderr, flush=True)
    return out


def render(report: dict[str, Any]) -> str:
    """The markdown tables."""
    lines = [f"# Grammars (issue 26): stdsl, llguidance {report['versions']['llguidance']}, XGrammar "
             f"{report['versions']['xgrammar']}", "", f"Generated {report['generated_utc']} on {report['machine']}; "
             f"Qwen3.5 vocabulary ({report['vocab_size']} tokens) for compile and masks, SmolLM2-135M-Instruct "
             "(greedy) for outputs.", "", "## Compile and warm masks (Qwen3.5)", "",
             "| grammar | stdsl | compile ms stdsl / llg / xgr | stdsl ÷ llg | warm mask p50 µs stdsl / llg / xgr | "
             "walk tokens |", "|---|---|---|---|---|---|"]

    def ms(cell: dict[str, Any]) -> str:
        return f"{1000 * cell['compile_s']:.1f}" if cell.get("compiles") else "refused"

    def mask(cell: dict[str, Any]) -> str:
        if "warm_mask_us" in cell:
            return f"{cell['warm_mask_us']['p50']:.0f}"
        return "err" if "mask_error" in cell else "–"

    for row in report["rows"]:
        cells = [row.get(e, {}) for e in ENGINES]
        ratio = (f"{row['stdsl']['compile_s'] / row['llguidance']['compile_s']:.1f}x"
                 if cells[0].get("compiles") and cells[1].get("compiles") else "–")
        kind = row["stdsl"].get("machine", "refused")
        lines.append(f"| {row['grammar']} | {kind} | {' / '.join(ms(c) for c in cells)} | {ratio} | "
                     f"{' / '.join(mask(c) for c in cells)} | {row['walk_tokens']} |")
    lines += ["", "Refusals and errors:", ""]
    for row in report["rows"]:
        for engine in ENGINES:
            cell = row.get(engine, {})
            for key in ("error", "mask_error"):
                if key in cell:
                    lines.append(f"- {row['grammar']} / {engine} ({key}): {cell[key].splitlines()[0][:200]}")
    if report.get("generation"):
        lines += ["", "## Outputs valid on SmolLM2 (valid / feasible runs; a cut output counts invalid)", "",
                  "| grammar | " + " | ".join(f"{e} @{b}" for e in ENGINES for b in report["budgets"]) + " |",
                  "|---|" + "---|" * (len(ENGINES) * len(report["budgets"]))]
        for name, per_engine in report["generation"].items():
            marks = []
            for engine in ENGINES:
                for run in per_engine.get(engine, [{}] * len(report["budgets"])):
                    valid = run.get("valid")
                    marks.append("✓" if valid else "n/a" if valid is None and "infeasible" in run
                                 else "–" if not run else "✗")
            lines.append(f"| {name} | " + " | ".join(marks) + " |")
        lines += ["", "Totals (valid / runs): " + ", ".join(
            f"{e} {t['valid']}/{t['runs']}" for e, t in report["generation_totals"].items()), ""]
    lines += ["## Targets", ""] + [f"- {t}" for t in report["targets"]] + ["", f"Command: `{report['command']}`", ""]
    return "\n".join(lines)


def targets(report: dict[str, Any]) -> list[str]:
    """The issue's targets, each stated with the measured figure."""
    rows = report["rows"]
    peer_only = [r["grammar"] for r in rows if not r["stdsl"].get("compiles")
                 and any(r.get(p, {}).get("compiles") for p in ("llguidance", "xgrammar"))]
    ratios = [r["stdsl"]["compile_s"] / r["llguidance"]["compile_s"] for r in rows
              if r["stdsl"].get("compiles") and r.get("llguidance", {}).get("compiles")]
    nan = [float("nan")]
    llg_p50 = statistics.median([r["llguidance"]["compile_s"] for r in rows if r.get("llguidance", {}).get("compiles")]
                                or nan)
    ours_p50 = statistics.median([r["stdsl"]["compile_s"] for r in rows if r["stdsl"].get("compiles")] or nan)
    slower = [r["grammar"] for r in rows if "warm_mask_us" in r["stdsl"] and any(
        "warm_mask_us" in r.get(p, {}) and r["stdsl"]["warm_mask_us"]["p50"] > r[p]["warm_mask_us"]["p50"]
        for p in ("llguidance", "xgrammar"))]
    out = [f"every grammar a peer compiles compiles here: {'yes' if not peer_only else 'no, ' + ', '.join(peer_only)}",
           f"compile p50 {1000 * ours_p50:.1f} ms vs llguidance p50 {1000 * llg_p50:.1f} ms "
           f"({ours_p50 / llg_p50:.1f}x; target within 5x); per grammar {min(ratios or [0]):.1f}x-"
           f"{max(ratios or [0]):.1f}x",
           "warm masks no slower than the peers' (p50 per grammar): "
           + ("yes" if not slower else "slower on " + ", ".join(slower))]
    totals = report.get("generation_totals", {})
    if "stdsl" in totals:
        t = totals["stdsl"]
        out.append(f"stdsl invalid outputs: {t['runs'] - t['valid']} of {t['runs']} feasible runs")
    return out


def generation_totals(generation: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Valid outputs and feasible runs per engine (infeasible budgets and refused grammars are not runs)."""
    totals: dict[str, dict[str, int]] = {}
    for per_engine in generation.values():
        for engine, runs in per_engine.items():
            t = totals.setdefault(engine, {"valid": 0, "runs": 0})
            for run in runs:
                if run.get("valid") is not None:
                    t["runs"] += 1
                    t["valid"] += int(bool(run["valid"]))
    return totals


def rerender(out: Path) -> None:
    """Rewrite the Markdown (and the totals and targets) of a saved run, reading a stdsl refusal as not a run."""
    report = json.loads(out.with_suffix(".json").read_text())
    for per_engine in report.get("generation", {}).values():
        for run in per_engine.get("stdsl", []):
            if str(run.get("error", "")).startswith(("CompileError", "GrammarError")):
                run["refused"] = run.pop("error")
                run["valid"] = None
    if "generation" in report:
        report["generation_totals"] = generation_totals(report["generation"])
    report["targets"] = targets(report)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(render(report))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default="llguidance,xgrammar")
    ap.add_argument("--grammars", default="", help="comma list of file names (default: every file)")
    ap.add_argument("--repeats", type=int, default=5, help="compiles per engine and grammar (median)")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--no-generate", action="store_true", help="skip the outputs on SmolLM2")
    ap.add_argument("--out", default=str(BENCH_DIR / "results" / "grammars"))
    ap.add_argument("--rerender", action="store_true", help="rewrite the Markdown of the saved run, measure nothing")
    args = ap.parse_args()
    if args.rerender:
        rerender(Path(args.out))
        return
    began = time.perf_counter()
    errors: list[str] = []
    peers = [p for p in args.peers.split(",") if p]
    budgets = tuple(int(b) for b in args.budgets.split(","))
    paths = sorted(p for p in GRAMMARS.iterdir() if p.suffix in SUFFIXES)
    if args.grammars:
        paths = [p for p in paths if p.name in args.grammars.split(",")]
    engines = QwenEngines(peers, errors)
    measured = [measure_qwen(engines, path, args.repeats) for path in paths]
    report: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/grammars.py", *sys.argv[1:]]),
        "generated_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {platform.python_version()}",
        "versions": {d: version_of(d) for d in ("stdsl", "llguidance", "xgrammar", "lark", "mlx")},
        "vocab_size": engines.size, "budgets": list(budgets), "rows": [row for row, _ in measured],
        "errors": errors,
    }
    if not args.no_generate:
        model = stdsl.load()
        drivers: dict[str, Driver] = {}
        if "llguidance" in peers:
            drivers["llguidance"] = LLGuidanceGrammarDriver(model, fast_forward=False)
        if "xgrammar" in peers:
            drivers["xgrammar"] = XGrammarGrammarDriver(model, fast_forward=False)
        report["generation"] = {path.name: generate_all(model, path, ours, drivers, budgets)
                                for path, (_, ours) in zip(paths, measured, strict=True)}
        report["generation_totals"] = generation_totals(report["generation"])
    report["targets"] = targets(report)
    report["wall_s"] = time.perf_counter() - began
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    markdown = render(report)
    out.with_suffix(".md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
