"""Whether the written key complement (`name_complement`) leaves every byte mask as the name trie's IR made it.

Each MaskBench schema named (or every k-th file) is compiled twice in this process, `strict=False`: with an open
object's undeclared key lowered from the name trie's IR (as before `name_complement`) and with it written out.  The
two pushdown machines then walk the same random byte paths (`--walks` per schema, up to `--steps` bytes, each byte
drawn from those the first allows, letters and structure most often); at every step both must allow the same bytes
and agree on whether the output may end there.  Their tables may differ (a schema may flip between the plain and
the outlined grammar, a body DFA may keep or merge a state the other merges or keeps); their masks may not.

    python benchmarks/complement_masks.py --every 10 --out benchmarks/results/complement_masks_kube66

With `--compare quoted-keys` the two compiles are instead a body's subset construction over its whole NFA (as
before `pushdown.quoted_keys`) and its quoted keys laid out as tries (kube75); with `--compare subsumed-literals` a
body's subset construction with and without the quoted literals that a quoted text beside them reads
(`pushdown.subsumed_literals`, bodies85).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema.scalars import strings
from stdsl.compiler.pushdown import grammar
from stdsl.errors import StdslError

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = np.ones(256)
WEIGHTS[[ord(c) for c in 'abcdefghijklmnopqrstuvwxyzACDIKNPSTV{}[],:"']] = 30.0
"""How often each allowed byte is drawn, relatively: names' lowercase letters and structure far more often than the
rest, so that walks spell prefixes of declared keys as well as undeclared ones."""


def compiled(schema: dict, written: bool, compare: str = "complement") -> object:
    """The schema's constraint (or its error's type name) with the complement written out or from the trie (with
    `compare` "quoted-keys": with the keys laid out as tries or by the subset construction)."""
    stdsl.caches.clear()
    strings._string_not_in.cache_clear()
    original, keyed, dropped = strings.name_complement, grammar.keyed_body_dfa, grammar.without_subsumed_literals
    if not written and compare == "subsumed-literals":
        grammar.without_subsumed_literals = lambda node, memo: node  # type: ignore[assignment]
    if not written and compare == "complement":
        strings.name_complement = lambda names: None  # type: ignore[assignment]
    if not written and compare == "quoted-keys":
        grammar.keyed_body_dfa = lambda *args: None  # type: ignore[assignment]
    try:
        return compile_constraint(schema, max_states=100_000, max_seconds=60, strict=False)
    except StdslError as error:
        return type(error).__name__
    finally:
        strings.name_complement, grammar.keyed_body_dfa = original, keyed
        grammar.without_subsumed_literals = dropped
        strings._string_not_in.cache_clear()
        stdsl.caches.clear()


def allowed(machine: object, config: int) -> list[int]:
    """The bytes a machine may read at a configuration."""
    step = machine.step_byte  # type: ignore[attr-defined]
    return [byte for byte in range(256) if step(config, byte) >= 0]


def walks_agree(first: object, second: object, walks: int, steps: int, rng: np.random.Generator) -> tuple[int, str]:
    """Steps compared on random walks, and the first disagreement ('' when none)."""
    a, b = first.machine, second.machine  # type: ignore[attr-defined]
    compared = 0
    for _ in range(walks):
        ca, cb, path = a.start, b.start, b""
        for _ in range(steps):
            here = allowed(a, ca)
            compared += 1
            if here != allowed(b, cb) or a.config_accepts(ca) != b.config_accepts(cb):
                return compared, repr(path[-60:])
            if not here:
                break
            weights = WEIGHTS[here]
            byte = int(rng.choice(here, p=weights / weights.sum()))
            ca, cb, path = a.step_byte(ca, byte), b.step_byte(cb, byte), path + bytes([byte])
    return compared, ""


def main(argv: list[str] | None = None) -> int:
    """Compare the masks of both lowerings on each schema; write the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="MaskBench file names (default: every k-th file)")
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--walks", type=int, default=20)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--compare", choices=["complement", "quoted-keys", "subsumed-literals"], default="complement")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "complement_masks"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    folder = Path(args.folder).resolve()
    files = [folder / name for name in args.names] or sorted(folder.glob("*.json"))[::args.every]
    rng = np.random.default_rng(0)
    rows = {}
    for path in files:
        schema = json.loads(path.read_text())["schema"]
        first, second = compiled(schema, False, args.compare), compiled(schema, True, args.compare)
        if isinstance(first, str) or isinstance(second, str):
            rows[path.name] = {"outcomes": [str(first) if isinstance(first, str) else "ok",
                                            str(second) if isinstance(second, str) else "ok"]}
            continue
        states = [int(getattr(first, "num_states", 0)), int(getattr(second, "num_states", 0))]
        if not hasattr(first, "machine") or not hasattr(second, "machine"):
            rows[path.name] = {"outcomes": ["ok", "ok"], "states": states, "walked": False}
            continue
        compared, differs = walks_agree(first, second, args.walks, args.steps, rng)
        rows[path.name] = {"outcomes": ["ok", "ok"], "states": states, "steps": compared, "differs": differs}
    walked = {name: row for name, row in rows.items() if "steps" in row}
    command = "python benchmarks/complement_masks.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command,
              "schemas": len(rows), "walked": len(walked), "steps": sum(row["steps"] for row in walked.values()),
              "outcome_changed": [name for name, row in rows.items() if row["outcomes"][0] != row["outcomes"][1]],
              "mask_differs": {name: row["differs"] for name, row in walked.items() if row["differs"]},
              "states_changed": {name: row["states"] for name, row in rows.items()
                                 if "states" in row and row["states"][0] != row["states"][1]},
              "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    title = {"complement": "the key complement from the name trie and written out",
             "quoted-keys": "body DFAs by the subset construction and with quoted keys laid out as tries",
             "subsumed-literals": "body DFAs with and without the quoted literals a quoted text beside them reads"
             }[args.compare]
    lines = [f"# Byte masks with {title}\n",
             f"Command: `{result['command']}`\n",
             f"{result['schemas']} schemas; {result['walked']} pushdown constraints walked ({result['steps']:,} steps "
             f"compared); outcomes changed: {result['outcome_changed'] or 'none'}; masks differ: "
             f"{result['mask_differs'] or 'none'}.\n",
             "Constraints whose states changed (first / second):\n"]
    lines += [f"- `{name}` {before:,} / {after:,}" for name, (before, after) in result["states_changed"].items()]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
