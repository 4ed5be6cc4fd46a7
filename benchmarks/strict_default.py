"""The strict default (objects closed to their declared members) beside the exact language, from the runs below.

Reads the results of the coverage and decode runs listed in RUNS (run them first, with this tree's stdsl first on
the path) and writes benchmarks/results/strict_default.{json,md}: the DFA/pushdown split of the MaskBench sample
and, per extraction task, passes, tokens, forced share and wall time under each setting, and the server benchmark
(server.py) before the default (server.json) and with it (server_strict_default.json).  Passes and tokens are
deterministic (greedy); wall time is not on a shared machine.

    python benchmarks/strict_default.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
COVERAGE = {"exact": "strict_default_maskbench_exact", "strict": "strict_default_maskbench_strict"}
DECODE = {"as written, strict (default)": "strict_default_decode_default",
          "as written, strict=False": "strict_default_decode_exact",
          "additionalProperties: false dropped, strict (default)": "strict_default_decode_open_default",
          "additionalProperties: false dropped, strict=False": "strict_default_decode_open_exact"}
SERVER = {"before the default (exact language)": "server", "strict default": "server_strict_default"}


def _load(stem: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"{stem}.json").read_text())


def split(result: dict[str, Any]) -> dict[str, int]:
    """Schemas by engine (dfa, pushdown) and by outcome, over the sample run."""
    rows = result["rows"].values()
    return {"files": len(result["rows"]), "dfa": sum(r.get("engine") == "dfa" for r in rows),
            "pushdown": sum(r.get("engine") == "pushdown" for r in rows), **result["totals"]}


def decode_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task: output tokens, passes, forced tokens, decode seconds, validity, the text."""
    return [{"task": r["task"], "tokens": r["output_tokens"], "passes": r["passes"], "forced": r["forced_tokens"],
             "seconds": round(r["seconds"], 2), "valid": r["valid"], "finish": r["finish"], "text": r["text"]}
            for r in result["runs"] if r["engine"] == "stdsl"]


def main() -> None:
    coverage = {name: _load(stem) for name, stem in COVERAGE.items()}
    decodes = {name: _load(stem) for name, stem in DECODE.items() if (RESULTS / f"{stem}.json").exists()}
    report = {"split": {name: split(result) for name, result in coverage.items()},
              "coverage_commands": {name: result["command"] for name, result in coverage.items()},
              "decode": {name: decode_rows(result) for name, result in decodes.items()},
              "decode_commands": {name: result["command"] for name, result in decodes.items()}}
    (RESULTS / "strict_default.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    lines = ["# Objects closed by default (strict) beside the exact language", "",
             "Written by `python benchmarks/strict_default.py` from the runs below (commands as run, this tree's "
             "stdsl first on `PYTHONPATH`).", "", "## DFA / pushdown split, MaskBench sample (every 15th file)", "",
             "| language | files | DFA | pushdown | passing | compile error | timeout | validation error | "
             "invalidation error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in report["split"].items():
        lines.append(f"| {name} | {s['files']} | {s['dfa']} | {s['pushdown']} | {s['passing']} | "
                     f"{s['compile error']} | {s['timeout']} | {s['validation error']} | {s['invalidation error']} |")
    lines += ["", *(f"- {name}: `{command}`" for name, command in report["coverage_commands"].items()), "",
              "## Extraction tasks on SmolLM2-135M-Instruct (greedy, stdsl only)", "",
              "| schemas, setting | tokens | passes | passes/token | forced share | decode s | valid |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, rows in report["decode"].items():
        tokens, passes = sum(r["tokens"] for r in rows), sum(r["passes"] for r in rows)
        lines.append(f"| {name} | {tokens} | {passes} | {passes / max(tokens, 1):.3f} | "
                     f"{sum(r['forced'] for r in rows) / max(tokens, 1):.3f} | "
                     f"{sum(r['seconds'] for r in rows):.1f} | {sum(r['valid'] for r in rows)}/{len(rows)} |")
    lines += ["", *(f"- {name}: `{command}`" for name, command in report["decode_commands"].items()), "",
              "decode.py writes its command with the peers' interpreter; these ran as `PYTHONPATH=. python "
              "benchmarks/decode.py ...` (stdsl only, 2 cores shared with other sessions: decode seconds are noisy, "
              "tokens and passes are not).", "",
              "Per task (tokens / passes / decode seconds):", "",
              "| task | " + " | ".join(report["decode"]) + " |", "|---|" + "---:|" * len(report["decode"])]
    tasks = [r["task"] for r in next(iter(report["decode"].values()), [])]
    for task in tasks:
        cells = [next((f"{r['tokens']} / {r['passes']} / {r['seconds']}" for r in rows if r["task"] == task), "–")
                 for rows in report["decode"].values()]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    lines += server_lines({name: _load(stem) for name, stem in SERVER.items() if (RESULTS / f"{stem}.json").exists()})
    (RESULTS / "strict_default.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def server_lines(runs: dict[str, dict[str, Any]]) -> list[str]:
    """The server benchmark's median run of ours beside stock mlx_lm.server, for each setting."""
    if not runs:
        return []
    lines = ["", "## Server: eight tool-calling agents (benchmarks/server.py)", "",
             "| run | output tokens | forced share | typed replies | prompt tokens from cache | tokens/s ours / stock "
             "| wall ours / stock per repeat | load average after |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in runs.items():
        ours = r["stcon"]
        lines.append(f"| {name} | {ours['output_tokens']} | {ours['forced_share']} | {ours['typed_replies']}/"
                     f"{ours['replies']} | {ours['prompt_cache_hit_tokens']}/{ours['prompt_tokens']} | "
                     f"{r['throughput_ratio']:.2f}x | {', '.join(f'{w:.2f}x' for w in r['wall_ratios'])} | "
                     f"{r['load_average_after'][0]} |")
    lines += ["", *(f"- {name}: `{r['command']}`" for name, r in runs.items()), "",
              "The six tools' parameter schemas already close their objects (`additionalProperties: false`), so the "
              "default changes no tool grammar here; the replies differ through the other changes between the two "
              "runs (arguments in each template's `tojson` spacing). Wall and tokens/s are not comparable across "
              "rows when the load differs: each row's ratio is against stock in the same run."]
    return lines


if __name__ == "__main__":
    main()
