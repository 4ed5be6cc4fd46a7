"""Reply grammars for agent-sized tool lists: stdsl beside llguidance and XGrammar, cold and with one tool changed.

Issue 36's benchmark.  For 8, 32, 128 and 400 random tools (`random_tools.py`: strings, numbers, enums, arrays,
nested objects, optional fields) in the Hermes, Qwen XML and Harmony formats (`tool_choice: auto`, parallel
calls), on the Qwen3.5 vocabulary, one process times (the vocabularies loaded, then `gc.freeze()`d, as a
long-running server would, so that the collector does not walk a quarter million token objects mid-compile):

- stdsl: `build_constraint` of the request's tools spec (the server's compile) and the first token mask
  (`RowCache.token_mask` of the start state); cold = every cache emptied first (`stdsl.caches.clear()`),
  changed = the same list with one tool's schema replaced, right after the cold build;
- llguidance: a Lark grammar with one `%json` per tool, `LLMatcher` and the first mask (it has no cache across
  grammars, so changed is a compile like cold);
- XGrammar: `get_model_structural_tag` (qwen_3, qwen_3_coder, harmony) compiled by a `GrammarCompiler` with its
  cache on (cleared before cold), a `GrammarMatcher` and the first mask.

The machine is shared and noisy: compare the ratios of one run.  Writes benchmarks/results/tool_compile.{md,json}.

    python benchmarks/tool_compile.py                          # everything (about 10 min on 2 cores)
    python benchmarks/tool_compile.py --sizes 8 32 --formats hermes --peers llguidance
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from peers import load_qwen_vocab, version_of  # noqa: E402
from random_tools import random_tool, random_tools, with_references  # noqa: E402

FORMATS = ("hermes", "qwen_xml", "harmony")
XGRAMMAR_MODELS = {"hermes": "qwen_3", "qwen_xml": "qwen_3_coder", "harmony": "harmony"}


def _spec(tools: list[dict[str, Any]], tool_format: str) -> dict[str, Any]:
    entries = [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in tools]
    return {"kind": "tools", "format": tool_format, "tools": entries, "choice": "auto", "parallel": True,
            "content": None}


def _changed(tools: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """`tools` with the middle tool's schema replaced by another random one (same name)."""
    changed = list(tools)
    middle = len(tools) // 2
    other = random_tool(random.Random(seed), middle)
    changed[middle] = {"type": "function", "function": {"name": tools[middle]["function"]["name"],
                                                         "parameters": other["function"]["parameters"]}}
    return changed


class Stdsl:
    """stdsl's server compile (`build_constraint`) and the first mask on the Qwen3.5 vocabulary."""

    def __init__(self) -> None:
        from stdsl.control.special_vocabulary import vocabulary_of
        from stdsl.model_files.tokenizer import Tokenizer

        self.vocab = vocabulary_of(Tokenizer.qwen())

    def run(self, spec: dict[str, Any]) -> dict[str, float]:
        from stdsl.compiler.constraint_spec import build_constraint
        from stdsl.kernels.rows import RowCache

        began, cpu_began = time.perf_counter(), time.process_time()
        constraint = build_constraint(spec, 600)
        compiled, cpu_compiled = time.perf_counter(), time.process_time()
        RowCache(constraint.automaton, self.vocab).token_mask(0)
        masked, cpu_masked = time.perf_counter(), time.process_time()
        return {"compile_s": compiled - began, "first_mask_s": masked - compiled, "total_s": masked - began,
                "cpu_compile_s": cpu_compiled - cpu_began, "cpu_s": cpu_masked - cpu_began,
                "states": constraint.num_states}

    def cold(self, spec: dict[str, Any]) -> dict[str, float]:
        """`run` with every compile cache emptied; the vocabulary's own tables (which the peers keep in their
        tokenizers too) are made again first, untimed, by one mask of a one-byte regex."""
        import stdsl

        stdsl.caches.clear()
        self.run({"kind": "regex", "pattern": "a"})
        return self.run(spec)


def _lark_string(text: str) -> str:
    return json.dumps(text)


class LLGuidance:
    """llguidance: one `%json` per tool in a Lark grammar of the format's reply."""

    def __init__(self, vocab: Any) -> None:
        import llguidance
        import llguidance.numpy

        self.llg, self.llg_numpy = llguidance, llguidance.numpy
        enc = vocab.encoding
        self.tokenizer = llguidance.LLTokenizer.from_tiktoken(
            encoder=enc._mergeable_ranks, special_tokens=enc._special_tokens, pattern=enc._pat_str,
            eos_token=vocab.eos_id, n_vocab=len(vocab.token_bytes))
        self.mask = llguidance.numpy.allocate_token_bitmask(1, self.tokenizer.vocab_size)

    @staticmethod
    def grammar(tools: list[dict[str, Any]], tool_format: str) -> str:
        """The reply as Lark: free text, then calls; a call per tool with its arguments as `%json`."""
        rules, calls = [], []
        for index, tool in enumerate(tools):
            name, schema = tool["function"]["name"], tool["function"]["parameters"]
            if tool_format == "qwen_xml":
                parts = [_lark_string(f"<tool_call>\n<function={name}>\n")]
                required = set(schema.get("required", ()))
                for key, value in schema["properties"].items():
                    rule = f"p{index}_{key}"
                    body = ('/[^<]*/' if value.get("type") == "string" and "enum" not in value
                            else f"%json {json.dumps(value)}")
                    rules.append(f"{rule}: {_lark_string(f'<parameter={key}>' + chr(10))} {body} "
                                 f"{_lark_string(chr(10) + '</parameter>' + chr(10))}")
                    parts.append(rule if key in required else f"{rule}?")
                parts.append(_lark_string("</function>\n</tool_call>"))
                rules.append(f"call{index}: " + " ".join(parts))
            else:
                head = (f'<tool_call>\n{{"name": "{name}", "arguments": ' if tool_format == "hermes"
                        else f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>")
                tail = "}\n</tool_call>" if tool_format == "hermes" else "<|call|>"
                rules.append(f"call{index}: {_lark_string(head)} args{index} {_lark_string(tail)}")
                rules.append(f"args{index}: %json {json.dumps(schema)}")
            calls.append(f"call{index}")
        rules.append("call: " + " | ".join(calls))
        if tool_format == "harmony":
            start = 'start: "<|channel|>final<|message|>" /[^<]*/ | call'
        else:
            start = 'start: /[^<]*/ (call ("\\n" call)*)?'
        return "\n".join([start, *rules])

    def run(self, tools: list[dict[str, Any]], tool_format: str) -> dict[str, float]:
        began, cpu_began = time.perf_counter(), time.process_time()
        matcher = self.llg.LLMatcher(self.tokenizer, self.llg.LLMatcher.grammar_from_lark(
            self.grammar(tools, tool_format)), log_level=1)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        self.llg_numpy.fill_next_token_bitmask(matcher, self.mask, 0)
        return {"total_s": time.perf_counter() - began, "cpu_s": time.process_time() - cpu_began}


class XGrammar:
    """XGrammar: the model's structural tag for the tools, compiled with the grammar compiler's cache."""

    def __init__(self, vocab: Any) -> None:
        import xgrammar

        self.xgr = xgrammar
        encoded = [b if b is not None else b"" for b in vocab.token_bytes]
        info = xgrammar.TokenizerInfo(encoded, xgrammar.VocabType.RAW, vocab_size=len(encoded),
                                      stop_token_ids=[vocab.eos_id], add_prefix_space=False)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=2, cache_enabled=True)
        self.mask = xgrammar.allocate_token_bitmask(1, len(encoded))

    def run(self, tools: list[dict[str, Any]], tool_format: str) -> dict[str, float]:
        began, cpu_began = time.perf_counter(), time.process_time()
        tag = self.xgr.get_model_structural_tag(XGRAMMAR_MODELS[tool_format], tools=tools, reasoning=False)
        matcher = self.xgr.GrammarMatcher(self.compiler.compile_structural_tag(tag))
        matcher.fill_next_token_bitmask(self.mask, 0)
        return {"total_s": time.perf_counter() - began, "cpu_s": time.process_time() - cpu_began}

    def cold(self, tools: list[dict[str, Any]], tool_format: str) -> dict[str, float]:
        self.compiler.clear_cache()
        return self.run(tools, tool_format)


def _peers(names: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    vocab = load_qwen_vocab()
    found: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name, make in (("llguidance", LLGuidance), ("xgrammar", XGrammar)):
        if name not in names:
            continue
        try:
            found[name] = make(vocab)
        except ImportError as error:
            skipped[name] = f"not importable here: {error}"
    return found, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128, 400])
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--peers", nargs="*", default=["llguidance", "xgrammar"])
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tool_compile"))
    parser.add_argument("--references", action="store_true",
                        help="enum and object members moved into each tool's $defs and referred to (Pydantic's shape)")
    args = parser.parse_args()
    ours = Stdsl()
    peers, skipped = _peers(args.peers)
    gc.collect()
    gc.freeze()
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        tools = random_tools(size, seed=size)
        changed = _changed(tools, seed=size + 1)
        if args.references:
            tools, changed = with_references(tools), with_references(changed)
        for tool_format in args.formats:
            row: dict[str, Any] = {"tools": size, "format": tool_format}
            row["stdsl_cold"] = ours.cold(_spec(tools, tool_format))
            row["stdsl_changed"] = ours.run(_spec(changed, tool_format))
            for name, peer in peers.items():
                try:
                    row[f"{name}_cold"] = peer.cold(tools, tool_format) if hasattr(peer, "cold") else \
                        peer.run(tools, tool_format)
                    row[f"{name}_changed"] = peer.run(changed, tool_format)
                except Exception as error:  # noqa: BLE001  (a peer's refusal is reported, not fatal)
                    row[f"{name}_error"] = f"{type(error).__name__}: {str(error)[:200]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    command = "python benchmarks/tool_compile.py " + " ".join(sys.argv[1:])
    versions = {name: version_of(name) for name in peers}
    result = {"command": command.strip(), "machine": platform.platform(), "versions": versions,
              "skipped": skipped, "rows": rows}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result))


def _seconds(row: dict[str, Any], key: str, measure: str = "total_s") -> float | None:
    found = row.get(key)
    return None if found is None else float(found[measure])


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ratio(ours: float | None, theirs: float | None) -> str:
    return "—" if ours is None or theirs is None else f"{ours / theirs:.2f}"


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# Reply grammars for many tools: compile + first mask (seconds)", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']} (shared, noisy: read the ratios)  ",
             f"Peers: {result['versions']}; skipped: {result['skipped'] or 'none'}", "",
             "stdsl compile is `build_constraint` (the server's compile), mask the first token mask; cold empties "
             "every cache first, changed is the same list with one tool's schema replaced, built after it.  Wall "
             "seconds, then the process CPU seconds of the same runs (`time.process_time`, all the process's threads: "
             "what a loaded machine inflates least).", "",
             "| tools | format | stdsl cold (compile / mask) | stdsl changed | llguidance cold | llguidance changed "
             "| xgrammar cold | xgrammar changed | stdsl/llg cold | stdsl/llg changed | CPU: stdsl cold "
             "| stdsl changed | llguidance cold | xgrammar cold | stdsl/llg cold |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        cold, changed = row["stdsl_cold"], row["stdsl_changed"]
        llg_cold, llg_changed = _seconds(row, "llguidance_cold"), _seconds(row, "llguidance_changed")
        lines.append(
            f"| {row['tools']} | {row['format']} | {cold['total_s']:.3f} ({cold['compile_s']:.3f} / "
            f"{cold['first_mask_s']:.3f}) | {changed['total_s']:.3f} | {_cell(llg_cold)} | {_cell(llg_changed)} | "
            f"{_cell(_seconds(row, 'xgrammar_cold'))} | {_cell(_seconds(row, 'xgrammar_changed'))} | "
            f"{_ratio(cold['total_s'], llg_cold)} | {_ratio(changed['total_s'], llg_changed)} | "
            f"{cold['cpu_s']:.3f} | {changed['cpu_s']:.3f} | {_cell(_seconds(row, 'llguidance_cold', 'cpu_s'))} | "
            f"{_cell(_seconds(row, 'xgrammar_cold', 'cpu_s'))} | "
            f"{_ratio(cold['cpu_s'], _seconds(row, 'llguidance_cold', 'cpu_s'))} |")
    errors = [(row["tools"], row["format"], key, value) for row in result["rows"] for key, value in row.items()
              if key.endswith("_error")]
    if errors:
        lines += ["", "Peer errors:", ""] + [f"- {n} tools, {f}, {k}: {v}" for n, f, k, v in errors]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
