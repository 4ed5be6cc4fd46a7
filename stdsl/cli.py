"""The `stcon` command: compile, analyze and run constraints from the shell."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stdsl.compiler.stc.source_file import read_source
from stdsl.errors import SchemaError, StdslError


def _load_spec(args: argparse.Namespace) -> Any:
    from stdsl.compiler.constraint import Regex
    from stdsl.compiler.grammar import Grammar

    schema = getattr(args, "schema", None) or getattr(args, "schema_option", None)
    given = [name for name, value in (("--regex", getattr(args, "regex", None)),
                                      ("--grammar", getattr(args, "grammar", None)), ("a schema", schema))
             if value is not None]
    if len(given) > 1:
        raise StdslError(f"give one constraint, not {' and '.join(given)}")
    if getattr(args, "regex", None) is not None:
        return Regex(args.regex)
    if getattr(args, "grammar", None) is not None:
        path = Path(args.grammar)
        return Grammar(read_source(path), syntax=args.syntax, start=args.start, source=str(path))
    if getattr(args, "schema_option", None) is not None:
        if args.schema is not None:
            raise StdslError("give the schema once: as the positional FILE or as --schema FILE")
        args.schema = args.schema_option
    if getattr(args, "schema", None) is None:
        raise StdslError("give a JSON Schema file, --regex PATTERN or --grammar FILE")
    path = Path(args.schema)
    try:
        return json.loads(read_source(path))
    except json.JSONDecodeError as exc:
        raise StdslError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None


def _vocab_size(name: str) -> int:
    if name == "qwen":
        from stdsl.kernels.vocab_sources import qwen_vocabulary

        return qwen_vocabulary().size
    from stdsl.model_files.tokenizer import Tokenizer
    from stdsl.runtime.model.loading import embedded_gguf_path

    return Tokenizer.from_gguf(embedded_gguf_path()).vocab_size


def forced_byte_share(machine: Any, data: bytes) -> float:
    """Share of `data`'s bytes read in forced states (the bytes the constraint decides alone).

    `machine` is an `Automaton` or a pushdown machine: both index `accepting`, `live_count` and
    `transitions` rows by state (configuration).
    """
    state, forced = 0, 0
    transitions = machine.transitions
    for pos, byte in enumerate(data):
        if not machine.accepting[state] and machine.live_count[state] == 1:
            forced += 1
        state = int(transitions[state][byte])
        if state < 0:
            raise StdslError(f"the example is rejected by the constraint at byte {pos}")
    if not machine.accepting[state]:
        raise StdslError("the example is an incomplete output: the constraint does not accept it")
    return forced / max(1, len(data))


def cmd_compile(args: argparse.Namespace) -> int:
    from stdsl.compiler.constraint import compile as compile_constraint
    from stdsl.compiler.pushdown.constraint import PushdownConstraint

    constraint = compile_constraint(_load_spec(args), max_states=args.max_states, strict=args.strict)
    vocab = _vocab_size(args.vocab)
    report: dict[str, Any] = {
        "kind": constraint.kind,
        "states": constraint.num_states,
        "compile_seconds": round(constraint.compile_seconds, 6),
        "automaton_bytes": constraint.nbytes,
        "vocab": args.vocab,
        "vocab_size": vocab,
        "token_table_bytes": constraint.num_states * vocab * (2 if constraint.num_states <= 32767 else 4),
    }
    machine: Any
    if isinstance(constraint, PushdownConstraint):
        report["nonterminals"] = len(constraint.grammar.names)
        report["max_depth"] = constraint.grammar.max_depth
        machine = constraint.machine
    else:
        report["cut_states"] = int(constraint.automaton.cut_states.sum())
        machine = constraint.automaton
    if args.example:
        example = read_source(args.example).encode("utf-8").strip()
        report["forced_byte_share"] = round(forced_byte_share(machine, example), 4)
    if args.json:
        print(json.dumps(report))
    else:
        width = max(len(k) for k in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from stdsl.compiler.constraint import compile as compile_constraint
    from stdsl.compiler.constraint import compile_embeddable
    from stdsl.compiler.pushdown.constraint import PushdownConstraint
    from stdsl.theory.analyze import analyze_automaton, render_analysis

    spec = _load_spec(args)
    constraint = compile_constraint(spec, strict=args.strict)
    if isinstance(constraint, PushdownConstraint) and isinstance(spec, (dict, bool)):
        try:
            # free-form values as the DFA's bounded value: regular
            constraint = compile_embeddable(spec, strict=args.strict)
        except SchemaError:
            pass  # recursive: refused below
    if isinstance(constraint, PushdownConstraint):
        raise StdslError(
            "analyze works on regular constraints; this one is recursive (a pushdown over "
            f"{len(constraint.grammar.names)} nonterminals), whose walks between cut states are not few-path"
        )
    report = analyze_automaton(constraint.automaton)
    if not args.json:
        print(render_analysis(report))
        return 0
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # the JSON keeps every path count exact, past Python's 4,300-digit default
    try:
        print(json.dumps(report))
    finally:
        sys.set_int_max_str_digits(limit)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    import stdsl

    if args.prompt_file:
        prompt = read_source(args.prompt_file)
    elif args.prompt is not None:
        prompt = args.prompt
    else:
        raise StdslError("give --prompt TEXT or --prompt-file FILE")
    model = stdsl.load(args.model)
    result = stdsl.generate(
        model,
        prompt,
        constraint=_load_spec(args),
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        strict=args.strict,
    )
    value = result.value
    print(json.dumps(value, indent=2, ensure_ascii=False) if not isinstance(value, str) else value)
    if args.stats:
        print(json.dumps(result.stats.as_dict()), file=sys.stderr)
    return 0


def _parse_sets(items: Sequence[str], text_params: Sequence[str] = ()) -> dict[str, Any]:
    """`--set name=value` pairs; a value that parses as JSON (numbers, lists...) is taken as JSON, except for
    the parameters in `text_params` (declared `str`), which take the text as it is (`--set year=2024`)."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise StdslError(f"--set expects name=value, got {item!r}")
        if name in text_params:
            out[name] = value
            continue
        try:
            out[name] = json.loads(value)
        except (ValueError, RecursionError):
            out[name] = value
    return out


PARALLEL_FIELDS: dict[str, bool | str] = {"auto": "auto", "on": True, "off": False}
"""The values `--parallel-fields` takes (the flag alone means "on")."""


def _parallel_fields(value: str) -> bool | str:
    """`--parallel-fields auto|on|off`."""
    if value not in PARALLEL_FIELDS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(PARALLEL_FIELDS)} or nothing, got {value!r}")
    return PARALLEL_FIELDS[value]


def _bare_flags(argv: Sequence[str]) -> list[str]:
    """`--parallel-fields` followed by anything but one of its values is the flag alone: spelled
    `--parallel-fields=on`, so the program file after it is not read as its value."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--parallel-fields" and (i + 1 == len(out) or out[i + 1] not in PARALLEL_FIELDS):
            out[i] = "--parallel-fields=on"
    return out


def _is_steps_file(spec: str) -> bool:
    return spec.endswith(".py") or ".py:" in spec


def cmd_run(args: argparse.Namespace) -> int:
    import stdsl
    from stdsl.programs import Program

    if _is_steps_file(args.file):
        return _run_steps(args)
    functions = _load_functions(args.functions) if args.functions else None
    prog = Program.from_file(args.file, functions=functions)
    if args.input or args.output:
        return _run_dataset(prog, args)
    text_params = [name for name, declared in prog.param_types.items() if declared.annotation is str]
    arguments = prog.arguments(_parse_sets(args.set, text_params), "cli")
    if prog.plan is not None:
        from stdsl.runtime.program_steps.stc_steps import check_loops

        check_loops(prog.plan, arguments)  # program mistakes are reported before a model is loaded
    else:
        prog.messages(arguments)
        prog.constraint(arguments)  # program mistakes are reported before a model is loaded
    result = prog.run(stdsl.load(args.model), arguments, max_tokens=args.max_tokens,
                      temperature=args.temperature, seed=args.seed, parallel_fields=args.parallel_fields)
    print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=_plain))
    if args.stats:
        print(json.dumps(result.stats.as_dict()), file=sys.stderr)
        from stdsl.runtime.program_steps.record import ProgramRun

        if isinstance(result, ProgramRun):  # a program of steps: a trace, one JSON line per step
            from stdsl.runtime.program_steps.dataset import step_trace

            for line in step_trace(result):
                print(json.dumps(line), file=sys.stderr)
    return 0


def _run_steps(args: argparse.Namespace) -> int:
    """`stcon run FILE.py:NAME`: a Python program of steps, once (`--set`) or on a dataset (`--input/--output`)."""
    import stdsl
    from stdsl.programs import StepsProgram, load_steps_program
    from stdsl.runtime.program_steps.dataset import run_record, trace_text

    program = load_steps_program(args.file)
    assert isinstance(program, StepsProgram)  # a .py file's (a .stc file runs as a Program)
    options = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed,
               "parallel_fields": args.parallel_fields}
    if args.input or args.output:
        return _run_dataset(program, args)
    text_params = [name for name, parameter in list(program.signature.parameters.items())[1:]
                   if parameter.annotation in (str, "str")]
    call_args, call_kwargs = program.bind(_parse_sets(args.set, text_params))  # mistakes before the model
    result = program.run(stdsl.load(args.model), *call_args, **call_kwargs, **options)
    print(json.dumps(run_record(result), indent=2, ensure_ascii=False, default=str))
    if args.stats:
        print(trace_text(result), file=sys.stderr)
    return 0


def _plain(value: Any) -> Any:
    """A value `json` cannot write as itself: a Pydantic instance as its JSON data, anything else as its text."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", by_alias=True) if callable(dump) else str(value)


def _load_functions(path: str) -> dict[str, Any]:
    """The functions a Python file defines at its top level (what `call` steps of the program may call)."""
    import runpy

    source = Path(path)
    if not source.is_file():
        raise StdslError(f"--functions {path}: no such file")
    names = runpy.run_path(str(source))
    return {name: value for name, value in names.items()
            if callable(value) and not name.startswith("_") and getattr(value, "__module__", None) == "<run_path>"}


def _run_dataset(prog: Any, args: argparse.Namespace) -> int:
    """`stcon run FILE --input data.jsonl --output results.jsonl`: one record per line, resumable."""
    import stdsl
    from stdsl.runtime.dataset_files import check_output, finished_lines, input_lines
    from stdsl.runtime.program_runs import Progress, run_dataset

    if not (args.input and args.output):
        raise StdslError("--input and --output go together: stcon run FILE.stc --input data.jsonl "
                         "--output results.jsonl")
    if args.set:
        raise StdslError("--set cannot be combined with --input: each input line holds the program's arguments")
    source, output = Path(args.input), Path(args.output)
    if not source.is_file():
        raise StdslError(f"--input {source}: no such file")
    check_output(source, output)
    done = finished_lines(output)
    left = sum(1 for number, _ in input_lines(source) if number not in done)
    skipped = len(done)
    if not left:  # a finished run's rerun: nothing to decode, so no model to load
        print(f"0 lines written to {args.output} ({skipped} already there, 0 errors)", file=sys.stderr)
        return 0
    progress = Progress(left)
    options = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed,
               "parallel_fields": args.parallel_fields}
    if _is_steps_file(args.file) or prog.plan is not None:
        from stdsl.programs import StcStepsProgram
        from stdsl.runtime.program_steps.dataset import run_steps_dataset

        steps = prog if _is_steps_file(args.file) else StcStepsProgram(prog)
        model = stdsl.load(args.model)

        def run(arguments: dict[str, Any]) -> Any:
            call_args, call_kwargs = (steps.bind(arguments, "dataset") if isinstance(steps, StcStepsProgram)
                                      else steps.bind(arguments))
            return steps.run(model, *call_args, **call_kwargs, **{**steps.defaults, **options})

        written, _ = run_steps_dataset(run, model, source, args.output, progress=progress.update, trace=args.stats)
    else:
        written, _ = run_dataset(prog, stdsl.load(args.model), source, args.output, progress=progress.update,
                                 **options)
    progress.close()
    print(f"{written} lines written to {args.output} ({skipped} already there, {progress.errors} errors)",
          file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from stdsl.extras import require_extra

    require_extra("serve")  # a missing fastapi or uvicorn is one line naming the pip install, not a traceback
    from stdsl.server.http.serve import serve

    limits = {name: getattr(args, name) for name, _ in SERVE_LIMITS if getattr(args, name) is not None}
    serve(args.model, host=args.host, port=args.port, max_rows=args.max_rows, api_key=args.api_key,
          limits=limits, aliases=tuple(args.model_alias), shutdown_seconds=args.shutdown_seconds,
          tool_format=args.tool_format, max_compile_bytes=args.max_compile_bytes, program_dir=args.program_dir,
          quiet=args.quiet, steps_programs=tuple(args.steps_program),
          functions=_load_functions(args.functions) if args.functions else None)
    return 0


SERVE_LIMITS = (
    ("max_body_bytes", "largest request body in bytes, refused with 413 before parsing (default 4194304)"),
    ("max_request_rows", "prompts x n in one request (default 64)"),
    ("max_prompt_bytes", "UTF-8 bytes of one request's messages and tools, or prompts (default 1048576)"),
    ("max_request_tokens", "rows x max_tokens of one request (default 65536)"),
    ("max_client_rows", "rows in flight per API key, or per client address without one; past it 429 (default 64)"),
    ("max_client_tokens", "max_tokens summed over a client's rows in flight; past it 429 (default 262144)"),
)


def _add_spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("schema", nargs="?", help="a JSON Schema file")
    parser.add_argument("--schema", dest="schema_option", metavar="FILE",
                        help="a JSON Schema file (same as the positional)")
    parser.add_argument("--regex", help="a regular expression instead of a schema")
    parser.add_argument("--grammar", metavar="FILE", help="a grammar file (Lark, GBNF or EBNF) instead of a schema")
    parser.add_argument("--syntax", choices=["auto", "lark", "gbnf", "ebnf"], default="auto",
                        help="the grammar's syntax (auto: a line with '::=' is GBNF/EBNF, else Lark)")
    parser.add_argument("--start", default=None, help="the grammar's start rule (default: start, or root for GBNF)")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=True,
                        help="close a schema's objects to their declared members (the default); --no-strict: the "
                             "schema's exact language, undeclared members allowed (docs/json_schema.md)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `stcon` (exposed for the tests and for `--help`)."""
    parser = argparse.ArgumentParser(prog="stcon", description="Structured programs on language models.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compile", help="compile a schema or regex and report its automaton")
    _add_spec_args(p)
    p.add_argument("--vocab", choices=["qwen", "smollm2"], default="qwen", help="vocabulary for token_table_bytes")
    p.add_argument("--example", help="a valid output, to measure the share of forced bytes")
    p.add_argument("--max-states", type=int, default=200_000)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("analyze", help="report cut states, forced chains and branch points")
    _add_spec_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("generate", help="generate under a constraint with a model")
    _add_spec_args(p)
    p.add_argument("--model", default=None, help="GGUF file, MLX folder or cached HF id (default: embedded SmolLM2)")
    p.add_argument("--prompt")
    p.add_argument("--prompt-file")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stats", action="store_true", help="print decoding statistics to stderr")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("run", help="run a .stc program, or a Python program of steps, and print its typed result "
                                   "as JSON")
    p.add_argument("file", help="a .stc program, or FILE.py:NAME: the steps program NAME of a Python file "
                                "(docs/programs.md)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a program argument")
    p.add_argument("--functions", metavar="FILE.py", default=None,
                   help="a Python file whose top-level functions the program's call steps may call")
    p.add_argument("--model", default=None, help="GGUF file, MLX folder or cached HF id (default: embedded SmolLM2)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stats", action="store_true", help="print decoding statistics to stderr (a steps program: a "
                   "trace of its steps, one line each; a dataset run of one: each line's steps in its record)")
    p.add_argument("--input", metavar="DATA.jsonl", help="run once per line (a JSON object of arguments)")
    p.add_argument("--output", metavar="RESULTS.jsonl", help="one record per input line, appended as each finishes; "
                   "a rerun skips the lines already there")
    p.add_argument("--parallel-fields", nargs="?", const=True, default=False, type=_parallel_fields,
                   metavar="auto|on|off", help="certified parallel drafts of independent fields (the flag alone: on); "
                   "'auto': only where this machine's measured pass cost says they are faster")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("serve", help="serve a model through an OpenAI-compatible HTTP API (docs/serving.md)")
    p.add_argument("--model", default=None, help="GGUF file, MLX folder or cached HF id (default: embedded SmolLM2)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: local only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-rows", type=int, default=8, help="requests decoded together in the running batch")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every request")
    p.add_argument("--quiet", action="store_true",
                   help="log warnings and errors only (default: 'listening on' and one access line per request)")
    p.add_argument("--model-alias", action="append", default=[], metavar="NAME",
                   help="another name requests may give as `model` (repeatable)")
    p.add_argument("--shutdown-seconds", type=int, default=10, metavar="N",
                   help="on SIGTERM or SIGINT, seconds the requests in flight may take to finish before they are "
                        "cancelled (a second signal exits at once; default 10)")
    from stdsl.compiler.tools.formats import FORMATS
    from stdsl.server.constraints.compile_pool import MAX_COMPILE_BYTES

    p.add_argument("--max-compile-bytes", type=int, default=MAX_COMPILE_BYTES, metavar="N",
                   help="memory one constraint's compile may take in its worker beyond the worker's own; past it the "
                        f"request is a 400 and the worker is replaced (default {MAX_COMPILE_BYTES}: "
                        f"{MAX_COMPILE_BYTES >> 20} MiB)")

    p.add_argument("--program-dir", default=None, metavar="DIR",
                   help="the directory whose files a client's program may name (grammar(\"file.lark\"), relative "
                        "paths inside it only); default: programs read no files")
    p.add_argument("--steps-program", action="append", default=[], metavar="FILE.py:NAME|FILE.stc",
                   help="a Python steps program, or a .stc program of steps (named by its file's stem), requests "
                        "may run by name (program: {\"name\": NAME}; repeatable)")
    p.add_argument("--functions", metavar="FILE.py", default=None,
                   help="a Python file whose top-level functions the served .stc programs' call steps may call")
    p.add_argument("--tool-format", choices=sorted(FORMATS), default=None, metavar="NAME",
                   help=f"the tool-call format replies are written in: {', '.join(sorted(FORMATS))} (default: the "
                        "one the model's chat template writes, else hermes; a request's tool_format overrides it)")
    for name, text in SERVE_LIMITS:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, metavar="N", help=text)
    p.set_defaults(func=cmd_serve)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line `argv` (without the program name) parsed; SystemExit with argparse's message if it is bad."""
    return build_parser().parse_args(_bare_flags(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `stcon` console script."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader left (`stcon analyze ... | head`): stop quietly, as Python's docs advise, pointing stdout at
        # /dev/null so that the interpreter's final flush raises nothing either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except StdslError as exc:
        print(f"stcon: error: {exc}", file=sys.stderr)
        return 2
    except RecursionError:
        # A last resort: the compilers locate nesting they cannot build; anything that still runs past Python's
        # stack is the input's depth, so it is answered like any other bad input, not with a traceback.
        print("stcon: error: the input nests too deeply to compile (expressions, rules or types inside one "
              "another); flatten it", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
