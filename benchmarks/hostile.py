"""Hostile clients against `stcon serve` (issue 37): each attack beside a normal client, on a fresh server each.

For every attack: its answer (status, seconds), whether the reply quotes a byte of a server file, the peak resident
memory of the server and its compile workers while it runs, the latency of a normal three-field schema request
sent from another address one second in, the tokens/s of a normal stream decoding meanwhile, /health's latency,
and at the end how long SIGTERM takes to end the server. Run it on two checkouts to compare before and after:

    python benchmarks/hostile.py                          # this checkout, the embedded SmolLM2 (~10 min)
    python benchmarks/hostile.py --root ../old --label before --attacks jinja_loops

Writes benchmarks/results/hostile.{json,md} (rows of earlier labels are kept, so both runs share one table).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                                           "city": {"type": "string", "maxLength": 20}},
          "required": ["name", "age", "city"], "additionalProperties": False}
SECRETS = ("root:x:0:0", "PATH=", "HOME=")


def _program(source: str) -> dict[str, Any]:
    return {"program": {"source": source, "arguments": {}}}


def _grammar(text: str) -> dict[str, Any]:
    return {"structured_outputs": {"grammar": text}}


def _alternatives(count: int) -> str:
    words = " | ".join(f'"w{i}"' for i in range(count))
    return f'start: item+\nitem: "(" start ")" | {words}\n'


def _wide(size: int, seed: int) -> str:
    words = " | ".join(f'"k{seed}x{i}y"' for i in range(size // 12))
    return f"start: {words}\n"


ATTACKS: dict[str, list[dict[str, Any]]] = {
    "file_passwd": [_program('output """{x: grammar("/etc/passwd")}"""')],
    "file_environ": [_program('output """{x: grammar("/proc/self/environ")}"""')],
    "file_dev_zero": [_program('output """{x: grammar("/dev/zero")}"""')],
    "huge_int": [_program('output """{x: int(0..' + "9" * 4301 + ')}"""')],
    "deep_record": [_program('output """{x: ' + "{a: " * 200 + "int" + "}" * 200 + '}"""')],
    "jinja_loops": [_program('user """{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}'
                             '{% endfor %}hi"""\noutput """{x: int}"""')],
    "render_20mb": [_program('user """{{ "a" * 20000000 }}"""\noutput """{x: int}"""')],
    "lark_repeat_memory": [_grammar('start: (("a"|"b") ~ 100..200) ~ 100..200')],
    "gbnf_repeat_memory": [_grammar("root ::= ([a-z]{1,100}){1,100}")],
    "deep_rule_chain": [_grammar("".join(f'r{i}: r{i + 1} "a" | "b"\n' for i in range(350))
                                 .replace("r0:", "start:") + 'r350: "c"\n')],
    "alternatives_6000": [_grammar(_alternatives(6000))],
    "two_550kb_grammars": [_grammar(_wide(550_000, 1)), _grammar(_wide(550_000, 2))],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _body(extra: dict[str, Any], max_tokens: int = 32) -> dict[str, Any]:
    return {"model": "default", "messages": [{"role": "user", "content": "Ann Lee, 34, lives in Oslo."}],
            "max_tokens": max_tokens, "temperature": 0, **extra}


class Server:
    """`stcon serve` from checkout `root` in its own process group, on a free port."""

    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stdsl.cli", "serve", "--port", str(self.port), "--model-alias", "default",
             "--shutdown-seconds", "5"], cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the server did not start")

    def resident(self) -> int:
        try:
            parent = psutil.Process(self.process.pid)
            return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])
        except psutil.Error:
            return 0

    def stop(self) -> float:
        """SIGTERM, then seconds until the process group is gone (killed after 60 s)."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            return float("inf")
        return time.monotonic() - began


def _post(url: str, body: dict[str, Any], timeout: float, address: str = "127.0.0.1") -> tuple[int | str, float, str]:
    began = time.monotonic()
    transport = httpx.HTTPTransport(local_address=address)
    try:
        with httpx.Client(transport=transport, timeout=timeout) as client:
            reply = client.post(url + "/v1/chat/completions", json=body)
        return reply.status_code, time.monotonic() - began, reply.text
    except httpx.TimeoutException:
        return "timeout", time.monotonic() - began, ""
    except httpx.HTTPError as error:
        return type(error).__name__, time.monotonic() - began, ""


def _stream_rate(url: str, stop: threading.Event, out: dict[str, float]) -> None:
    """Tokens/s of normal streams decoded back to back until `stop` (from 127.0.0.3)."""
    tokens, began = 0, time.monotonic()
    transport = httpx.HTTPTransport(local_address="127.0.0.3")
    with httpx.Client(transport=transport, timeout=120) as client:
        while not stop.is_set():
            body = _body({}, max_tokens=24)
            try:
                reply = client.post(url + "/v1/chat/completions", json=body).json()
                tokens += int(reply.get("usage", {}).get("completion_tokens", 0))
            except (httpx.HTTPError, ValueError):
                break
    out["tokens_per_second"] = tokens / max(time.monotonic() - began, 1e-9)


def run_attack(root: Path, name: str, timeout: float) -> dict[str, Any]:
    server = Server(root)
    peak = [server.resident()]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], server.resident())
            time.sleep(0.05)

    stream: dict[str, float] = {}
    stop_stream = threading.Event()
    threads = [threading.Thread(target=watch), threading.Thread(target=_stream_rate, args=(server.url, stop_stream,
                                                                                          stream))]
    answers: list[tuple[int | str, float, str]] = []
    attackers = [threading.Thread(target=lambda b=b: answers.append(_post(server.url, _body(b), timeout)))
                 for b in ATTACKS[name]]
    for thread in threads + attackers:
        thread.start()
    time.sleep(1.0)
    normal = _post(server.url, _body({"response_format": {"type": "json_schema", "json_schema": {
        "name": "person", "schema": PERSON, "strict": True}}}), timeout, address="127.0.0.2")
    began = time.monotonic()
    try:
        health = httpx.get(server.url + "/health", timeout=timeout).status_code == 200 and time.monotonic() - began
    except httpx.HTTPError:
        health = None
    for thread in attackers:
        thread.join()
    stop_stream.set()
    done.set()
    for thread in threads:
        thread.join()
    row = {"attack": name, "status": [a[0] for a in answers], "seconds": max(a[1] for a in answers),
           "leaks_a_file_byte": any(secret in a[2] for a in answers for secret in SECRETS),
           "reply": answers[0][2][:200],
           "peak_mb": peak[0] / 1e6, "normal_status": normal[0], "normal_seconds": normal[1],
           "health_seconds": health, "stream_tokens_per_second": stream.get("tokens_per_second"),
           "sigterm_seconds": server.stop()}
    print(json.dumps(row), flush=True)
    return row


def write(rows: list[dict[str, Any]], label: str, command: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "hostile.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    report[label] = {"command": command, "rows": rows}
    path.write_text(json.dumps(report, indent=1))
    lines = ["# Hostile clients against stcon serve (embedded SmolLM2, CPU; a fresh server per attack)", ""]
    for name, run in report.items():
        lines += [f"## {name}", "", f"Command: `{run['command']}`", "",
                  "| attack | status | seconds | file byte in reply | peak MB (server + workers) | normal request "
                  "(status, s) | /health s | normal stream tok/s | SIGTERM to exit s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in run["rows"]:
            health = r["health_seconds"]
            health = f"{health:.2f}" if isinstance(health, float) else str(health)
            rate = r["stream_tokens_per_second"]
            lines.append(f"| {r['attack']} | {', '.join(map(str, r['status']))} | {r['seconds']:.1f} | "
                         f"{'yes' if r['leaks_a_file_byte'] else 'no'} | {r['peak_mb']:.0f} | {r['normal_status']}, "
                         f"{r['normal_seconds']:.2f} | {health} | {rate:.1f} | {r['sigterm_seconds']:.1f} |"
                         if rate is not None else f"| {r['attack']} | {r['status']} | ... |")
        lines.append("")
    (RESULTS / "hostile.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose stcon serve is attacked")
    parser.add_argument("--label", default="after")
    parser.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=list(ATTACKS))
    parser.add_argument("--timeout", type=float, default=45.0, help="seconds a client waits for an answer")
    args = parser.parse_args()
    rows = [run_attack(args.root.resolve(), name, args.timeout) for name in args.attacks]
    write(rows, args.label, "python benchmarks/hostile.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
