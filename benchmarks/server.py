"""Tool-calling agents through the HTTP API: `stcon serve` against stock `mlx_lm.server`, same weights, same run.

Eight concurrent clients (the official `openai` client), three rounds each: every round sends the
conversation so far with the six tools of ../shared/tasks/tools and a new request, answers the
calls with a canned tool result, and goes on.  Reported per server: output tokens/s over the wall
time, the share of replies that carry a tool call whose arguments parse and validate against the
tool's schema, and (ours) the share of output tokens the constraint forced.  Then our server alone
serves sixteen grammars (the six extraction schemas and the 8..96-field schemas) and /metrics
reports the memory above the model.

Both servers load one MLX folder built here from the embedded SmolLM2 GGUF (no download), with a
Hermes-style tool chat template, so stock mlx-lm parses calls with its own `json_tools` parser.
Stock runs with MKL bound the way stdsl binds it (MLX's CPU wheel ships a reference BLAS), so the
comparison is about serving, not BLAS.

    python benchmarks/server.py                # writes benchmarks/results/server.json and .md
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT.parent / "shared" / "tasks"
RESULTS = ROOT / "benchmarks" / "results"
FOLDER = Path.home() / ".cache" / "stdsl" / "smollm2-135m-instruct-mlx"

TOOL_TEMPLATE = """{%- if tools %}<|im_start|>system
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% else %}You are a helpful assistant.{% endif %}


# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for tool_call in message.tool_calls or [] %}\
{% if tool_call.function is defined %}{% set tool_call = tool_call.function %}{% endif %}\
{% if not loop.first or message.content %}
{% endif %}<tool_call>
{"name": "{{ tool_call.name }}", "arguments": \
{{ tool_call.arguments if tool_call.arguments is string else tool_call.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def build_mlx_folder(folder: Path) -> Path:
    """The embedded SmolLM2 GGUF saved as an MLX model folder (float32 weights, tokenizer, tool template)."""
    if (folder / "model.safetensors").exists():
        return folder
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from stdsl.runtime.model.loading import embedded_gguf_path, load_gguf

    model = load_gguf(embedded_gguf_path(), quantized=False)
    folder.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.net.parameters())))
    config = {k: v for k, v in asdict(model.net.args).items() if v is not None}
    tokenizer = model.tokenizer
    config.update(architectures=["LlamaForCausalLM"], eos_token_id=list(tokenizer.eos_ids),
                  bos_token_id=tokenizer.bos_id)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    assert tokenizer.hf is not None
    tokenizer.hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": TOOL_TEMPLATE,
        "bos_token": tokenizer.bos_token, "eos_token": tokenizer.eos_token, "model_max_length": 8192,
        "clean_up_tokenization_spaces": False}, indent=2))
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(kind: str, folder: Path, port: int) -> subprocess.Popen[bytes]:
    """Start one server in its own process (ours: `stcon serve`; stock: `mlx_lm.server` with MKL bound)."""
    if kind == "stcon":
        command = [sys.executable, "-m", "stdsl.cli", "serve", "--model", str(folder), "--port", str(port),
                   "--max-rows", "8"]
    else:
        argv = ["mlx_lm.server", "--model", str(folder), "--port", str(port), "--decode-concurrency", "8",
                "--prompt-concurrency", "8", "--log-level", "ERROR"]
        code = ("from stdsl.runtime.platform.blas import bind_blas; bind_blas(); import sys; "
                f"from mlx_lm.server import main; sys.argv = {argv!r}; main()")
        command = [sys.executable, "-c", code]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"{kind} server did not start")


def typed_calls(message: Any, parameters: dict[str, Any]) -> bool:
    """Whether the reply carries at least one call and every call names a tool and validates against it."""
    calls = message.tool_calls or []
    if not calls:
        return False
    for call in calls:
        if call.function.name not in parameters:
            return False
        try:
            jsonschema.validate(json.loads(call.function.arguments), parameters[call.function.name])
        except (ValueError, jsonschema.ValidationError):
            return False
    return True


def served_model(base: str, kind: str) -> str:
    """The model name a request must carry: stock mlx-lm serves its loaded model as "default_model"; `stcon serve`
    refuses names it does not serve and lists its one model at /v1/models."""
    if kind != "stcon":
        return "default_model"
    return str(httpx.get(base + "/models", timeout=30).json()["data"][0]["id"])


def run_agents(base: str, model: str, tools: list[dict], requests: list[dict], clients: int, rounds: int,
               max_tokens: int, session: int = 0) -> dict[str, Any]:
    """`clients` concurrent conversations of `rounds` rounds; wall time, tokens and typed-call share. The system
    prompt names the `session`, so a repeat starts new conversations that no prompt cache has seen (replaying
    the last repeat's conversations would let a server serve them from its cache)."""
    parameters = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    replies: list[dict[str, Any]] = []
    lock = threading.Lock()

    def agent(index: int) -> None:
        client = openai.OpenAI(base_url=base, api_key="bench", max_retries=0, timeout=600)
        messages: list[dict[str, Any]] = [{"role": "system",
                                           "content": f"Session {session}. You are an agent. Use the tools."}]
        for round_ in range(rounds):
            request = requests[(index + clients * round_) % len(requests)]
            messages.append({"role": "user", "content": request["request"]})
            began = time.perf_counter()
            try:
                reply = client.chat.completions.create(model=model, messages=messages, tools=tools,
                                                       tool_choice="required", max_tokens=max_tokens,
                                                       temperature=0)
            except openai.APIError as error:
                with lock:
                    replies.append({"round": round_, "ok": False, "typed": False, "tokens": 0,
                                    "error": str(error)[:200], "seconds": time.perf_counter() - began})
                messages.append({"role": "assistant", "content": ""})
                continue
            message = reply.choices[0].message
            typed = typed_calls(message, parameters)
            with lock:
                replies.append({"round": round_, "ok": True, "typed": typed,
                                "tokens": reply.usage.completion_tokens if reply.usage else 0,
                                "calls": len(message.tool_calls or ()), "seconds": time.perf_counter() - began})
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or ():
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"ok": True})})

    began = time.perf_counter()
    threads = [threading.Thread(target=agent, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    tokens = sum(r["tokens"] for r in replies)
    return {"wall_seconds": round(wall, 2), "output_tokens": tokens, "tokens_per_second": round(tokens / wall, 1),
            "replies": len(replies), "typed_replies": sum(r["typed"] for r in replies),
            "typed_share": round(sum(r["typed"] for r in replies) / max(1, len(replies)), 3),
            "errors": [r["error"] for r in replies if not r["ok"]][:3]}


def metrics(base: str) -> dict[str, float]:
    text = httpx.get(base.removesuffix("/v1") + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line.startswith("stdsl_") and "{" not in line:
            name, value = line.split()
            out[name.removeprefix("stdsl_")] = float(value)
    return out


def sixteen_grammars() -> list[dict[str, Any]]:
    """The paper's sixteen grammars: six extraction schemas, then the 8..96-field schemas."""
    schemas = [json.loads(p.read_text())["schema"] for p in sorted((TASKS / "extraction").glob("*.json"))]
    sizes = [8, 12, 16, 24, 32, 40, 48, 64, 80, 96]
    schemas += [json.loads((TASKS / "fields" / f"fields_{n}.json").read_text())["schema"] for n in sizes]
    return schemas


def serve_grammars(base: str, model: str) -> dict[str, Any]:
    """Start one streamed request per grammar and leave after a few chunks (the grammar is compiled and its
    tables built); memory above the model before and after, as /metrics reports it."""
    client = openai.OpenAI(base_url=base, api_key="bench", max_retries=0, timeout=600)
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=8)
    before = metrics(base)
    served = 0
    for schema in sixteen_grammars():
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Fill in the form."}], max_tokens=4000,
            temperature=0, stream=True,
            response_format={"type": "json_schema", "json_schema": {"name": "form", "schema": schema}})
        for count, _ in enumerate(stream):
            if count >= 3:
                break
        stream.close()
        served += 1
    time.sleep(1.0)
    after = metrics(base)

    def grown(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    return {"grammars_served": served,
            "resident_above_model_mb": round(grown("process_resident_bytes") / 2**20, 1),
            "mlx_active_above_model_mb": round(grown("mlx_active_bytes") / 2**20, 1),
            "grammar_bytes_mb": round(after["grammar_bytes"] / 2**20, 2),
            "grammars_held": int(after["grammars_compiled"]),
            "compile_seconds": round(grown("grammar_compile_seconds_total"), 2)}


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (the machine is shared: runs are interleaved and repeated)."""
    return sorted(runs, key=lambda r: r["tokens_per_second"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per server; the median is reported")
    parser.add_argument("--out", default=str(RESULTS / "server"))
    args = parser.parse_args()
    tools = json.loads((TASKS / "tools" / "tools.json").read_text())
    requests = json.loads((TASKS / "tools" / "requests.json").read_text())
    folder = build_mlx_folder(FOLDER)
    results: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "model": "SmolLM2-135M-Instruct (GGUF -> "
                               "MLX folder, float32)", "clients": args.clients, "rounds": args.rounds,
                               "max_tokens": args.max_tokens, "repeats": args.repeats,
                               "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    kinds = ("stcon", "stock")
    ports = {kind: free_port() for kind in kinds}
    processes = {kind: start(kind, folder, ports[kind]) for kind in kinds}
    bases = {kind: f"http://127.0.0.1:{ports[kind]}/v1" for kind in kinds}
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    try:
        models = {kind: served_model(bases[kind], kind) for kind in kinds}
        for kind in kinds:
            results[kind + "_warmup"] = run_agents(bases[kind], models[kind], tools, requests[:1], 1, 1,
                                                   args.max_tokens)
        for repeat in range(args.repeats):
            for kind in kinds if repeat % 2 == 0 else kinds[::-1]:
                before = metrics(bases[kind]) if kind == "stcon" else {}
                run = run_agents(bases[kind], models[kind], tools, requests, args.clients, args.rounds, args.max_tokens,
                                 session=1 + repeat)
                if kind == "stcon":
                    after = metrics(bases[kind])
                    forced = after["completion_forced_tokens_total"] - before["completion_forced_tokens_total"]
                    returned = after["completion_tokens_total"] - before["completion_tokens_total"]
                    run["forced_share"] = round(forced / max(1.0, returned), 3)
                    run["prompt_cache_hit_tokens"] = int(after["prompt_cache_hit_tokens_total"]
                                                         - before["prompt_cache_hit_tokens_total"])
                    run["prompt_tokens"] = int(after["prompt_tokens_total"] - before["prompt_tokens_total"])
                runs[kind].append(run)
        results["grammars"] = serve_grammars(bases["stcon"], models["stcon"])
    finally:
        for process in processes.values():
            process.terminate()
            process.wait(timeout=60)
    for kind in kinds:
        results[kind] = _median_run(runs[kind])
        results[kind + "_runs"] = runs[kind]
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    ours, stock = results["stcon"], results["stock"]
    results["throughput_ratio"] = round(ours["tokens_per_second"] / max(0.1, stock["tokens_per_second"]), 2)
    results["wall_ratios"] = [round(a["wall_seconds"] / b["wall_seconds"], 2)
                              for a, b in zip(runs["stcon"], runs["stock"])]
    Path(args.out + ".json").write_text(json.dumps(results, indent=2) + "\n")
    Path(args.out + ".md").write_text(report(results))
    print(report(results))


def _row(name: str, run: dict[str, Any]) -> str:
    forced = run.get("forced_share", "—")
    return (f"| {name} | {run['wall_seconds']} s | {run['output_tokens']} | {run['tokens_per_second']} "
            f"| {run['typed_replies']}/{run['replies']} | {forced} |")


def report(r: dict[str, Any]) -> str:
    """The results as markdown: median runs, every run, the sixteen grammars."""
    ours, grammars = r["stcon"], r["grammars"]
    runs = "\n".join(_row(f"{kind} run {i + 1}", run) for kind in ("stcon", "stock")
                     for i, run in enumerate(r[kind + "_runs"]))
    return f"""# Server: tool-calling agents through the OpenAI API

`{r['command']}`

{r['model']}; {r['clients']} concurrent clients × {r['rounds']} rounds with the six tools of
`../shared/tasks/tools`, `tool_choice: required`, greedy, `max_tokens` {r['max_tokens']}. Both servers run in
their own process on the same MLX folder and chat template, started together; their runs are interleaved
({r['repeats']} each) and the median run by throughput is reported. Warm-up (one request each, ours compiles
the tool grammar then): ours {r['stcon_warmup']['wall_seconds']} s, stock {r['stock_warmup']['wall_seconds']} s.
The machine is shared (load average {r['load_average_before']} before, {r['load_average_after']} after).

| server (median run) | wall | output tokens | tokens/s | replies with typed calls | forced share |
|---|---|---|---|---|---|
{_row("stcon serve", ours)}
{_row("mlx_lm.server (stock, json_tools parser)", r["stock"])}

Throughput ratio (ours / stock): **{r['throughput_ratio']}×**. Wall time, ours / stock, per repeat (each repeat
is new conversations, the same for both servers): {', '.join(f'{x}×' for x in r['wall_ratios'])}.
Prompt cache (ours, median run; it also serves the forced start of each reply, so it can pass the prompt count):
{ours['prompt_cache_hit_tokens']} of {ours['prompt_tokens']} prompt tokens served from cached prefixes.

Every run:

| run | wall | output tokens | tokens/s | replies with typed calls | forced share |
|---|---|---|---|---|---|
{runs}

Sixteen grammars (the six extraction schemas, then the 8–96-field schemas), served by our server after the
agents: {grammars['grammars_served']}/16 served, {grammars['grammars_held']} held in the grammar cache
({grammars['grammar_bytes_mb']} MB of automata), {grammars['compile_seconds']} s compiling off the decode loop.
Resident memory above the model grew by {grammars['resident_above_model_mb']} MB over the sixteen
(MLX active memory by {grammars['mlx_active_above_model_mb']} MB).
"""


if __name__ == "__main__":
    main()
