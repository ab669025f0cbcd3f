"""A simulated OpenAI-compatible vLLM server for the ladder tests (tests only; stdlib only).

Started by the test's stand-in ``vllm`` executable with the argv a step's real ``serve.sh`` gave
``vllm serve``: ``python sim_server.py MODEL --served-model-name S --port N --additional-config …``.
The profile (JSON, path in ``$SIM_PROFILE``, read at every start) says how each simulated recipe
shows itself and what it does:

    {"base_ms": {"1": 20, "4": 26}, "ttft_ms": 25, "noise_ms": 0.4, "startup_s": 0.3,
     "tree": TREE, "kernels_file": FILE, "log": FILE, "seed": 7,
     "recipes": {ID: {"env": {NAME: VALUE}, "config": ["additional_config.a.b"], "tree": [[PATH, MARKER]],
                      "kernels": [SPEC], "delta_ms": {"1": -2.0, "4": 1.5}}},
     "diverge": {"recipe": ID, "prompt": TEXT, "token": N}, "wrong": {"recipe": ID, "prompts": [TEXT]},
     "crash": ID, "load": {"knee": 8, "steep": 0.5, "batch_ms": 0.2, "slots": 64, "die_above": null}}

Load (``load``, optional; a profile without it behaves as before): latency grows with the number
``n`` of requests being decoded together. Batching: each token interval grows by ``batch_ms`` per
request beyond the first. A knee at ``knee`` requests: beyond it the decode step is compute-bound
and every interval is multiplied by ``1 + steep × (n − knee)``. Queueing: at most ``slots``
requests decode at once; the others wait for a slot before their first token (so their TTFT
grows). As vLLM's scheduler, the server also runs at most ``--max-num-seqs`` requests at once (256,
vLLM's default, without the flag) and queues the rest the same way, whatever the profile says. ``die_above``: the server exits (as a crash) when more than that many decode at once. Per
step, a recipe's ``"load": {"knee": +4, "die_above": 6}`` moves the knee by its value and sets
``die_above`` while it is active, so different steps have different knees.

A recipe is active when every sign it declares is there: the environment variables serve.sh
exported (env.sh), the keys its JSON flags carry, the marker strings its patches put in the real
tree, the kernel specs the (stubbed) build last built. Streaming completions emit ``max_tokens``
tokens; each token interval is the base delay of the current number of streaming requests (the
largest profile concurrency not above it) plus the active recipes' deltas plus per-request Gaussian
noise, on absolute deadlines so sleep overshoot does not add up. Non-streaming completions (the
accuracy prompts) answer at once: arithmetic questions correctly, other prompts with deterministic
filler; ``diverge`` changes one token while its recipe is active, ``wrong`` answers the questions
containing one of its texts wrongly. Each start appends ``{"argv", "active"}`` to the log as one JSON line.

Knobs (``knobs``, optional; a profile without it behaves as before), for ``optkit tune``: latency and memory
follow the launch the argv describes. The ``n`` streaming requests spread over the ``--data-parallel-size``
ranks (``r = ⌈n / DP⌉`` each; the scheduler runs ``--max-num-seqs`` per rank); a decode step of a rank costs
the base delay at ``r`` ÷ ``TP ** tp_gain``, plus ``tokens_ms`` × log2(``--max-num-batched-tokens`` / 1024)
(larger prefill chunks ride along), plus ``eager_ms`` when its ``r × (1 + k)`` rows exceed the largest
``cudagraph_capture_sizes`` of ``--compilation-config`` (eager), plus ``spec_ms × k`` for the
``num_speculative_tokens`` k of ``--speculative-config``, and yields ``1 + accept × k`` tokens; ``load`` then
applies at ``r``. Memory per device: ``weights_gib / TP + seq_gib × max-num-seqs × (1 + k) / TP +
act_gib × batched tokens / 1024``; above ``hbm_gib`` the server exits at start as vLLM does when the NPU runs
out of memory (a traceback whose error line is ``RuntimeError: NPU out of memory. Tried to allocate …``, then
the engine's ``Engine core initialization failed`` line)::

    "knobs": {"tp_gain": 0.5, "tokens_ms": 0.5, "eager_ms": 6.0, "spec_ms": 2.0, "accept": 0.7,
              "hbm_gib": 48, "weights_gib": 70, "seq_gib": 1.0, "act_gib": 0.25}

``launch(args)`` is that reading of the argv and ``oom_gib(knobs, launch)`` the memory over the limit
(None: it fits), for a test to predict what a start does.

With ``--profiler-config.torch_profiler_dir=DIR`` (``optkit ladder --capture-profiles``) ``POST /start_profile``
and ``/stop_profile`` answer, and ``/stop_profile`` writes an Ascend PyTorch Profiler capture into
DIR (tests/profile/make_fixture.py: the text form, vllm-ascend's worker folder name) whose recipe
signatures are those of ``profile["signatures"]`` (default: every one the generator injects) less
the active recipes': a step that turns a recipe on shows its ops gone.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

VLLM_MAX_NUM_SEQS = 256
"""vLLM's --max-num-seqs when serve.sh does not pass one (its default for the API server)."""
VLLM_MAX_NUM_BATCHED_TOKENS = 8192
"""--max-num-batched-tokens without the flag (as the simulation counts it)."""
QUESTION = re.compile(r"What is (\d+) (plus|minus|times) (\d+)\?")


def parse_argv(argv: list[str]) -> dict:
    """The parts of a ``vllm serve`` argv the simulation reads (model, name, port, JSON configs)."""
    out = {"model": argv[0], "served": argv[0], "port": 8000, "configs": {}, "max_num_seqs": VLLM_MAX_NUM_SEQS,
           "max_num_batched_tokens": VLLM_MAX_NUM_BATCHED_TOKENS, "tp": 1, "dp": 1}
    i = 1
    while i < len(argv):
        flag = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
        if flag == "--served-model-name":
            out["served"] = value
        elif flag == "--port":
            out["port"] = int(value)
        elif flag == "--max-num-seqs":
            out["max_num_seqs"] = int(value)
        elif flag == "--max-num-batched-tokens":
            out["max_num_batched_tokens"] = int(value)
        elif flag == "--tensor-parallel-size":
            out["tp"] = int(value)
        elif flag == "--data-parallel-size":
            out["dp"] = int(value)
        elif flag.endswith("-config") and value is not None:
            out["configs"][flag[2:].replace("-", "_")] = json.loads(value)
        i += 2 if value is not None else 1
    return out


def launch(args: dict) -> dict:
    """What the knob mode reads of a start: TP, DP, max-num-seqs, batched tokens, the largest capture size
    (None: no sizes given, every batch captured) and the speculative k (0: off)."""
    sizes = (args["configs"].get("compilation_config") or {}).get("cudagraph_capture_sizes")
    k = (args["configs"].get("speculative_config") or {}).get("num_speculative_tokens") or 0
    return {"tp": args["tp"], "dp": args["dp"], "max_num_seqs": args["max_num_seqs"],
            "max_num_batched_tokens": args["max_num_batched_tokens"], "capture": max(sizes) if sizes else None,
            "k": int(k)}


def oom_gib(knobs: dict, start: dict) -> float | None:
    """GiB per device that the start needs above ``hbm_gib`` (None: it fits, or the profile sets no limit)."""
    if "hbm_gib" not in knobs:
        return None
    need = (knobs.get("weights_gib", 0.0) / start["tp"]
            + knobs.get("seq_gib", 0.0) * start["max_num_seqs"] * (1 + start["k"]) / start["tp"]
            + knobs.get("act_gib", 0.0) * start["max_num_batched_tokens"] / 1024)
    return round(need - knobs["hbm_gib"], 2) if need > knobs["hbm_gib"] else None


def knob_ms(ms: float, per_rank: int, knobs: dict, start: dict) -> float:
    """A token interval in the knob mode: the step at ``per_rank`` requests per DP rank (module docstring)."""
    step = ms / start["tp"] ** knobs.get("tp_gain", 0.0)
    step += knobs.get("tokens_ms", 0.0) * math.log2(max(start["max_num_batched_tokens"], 1024) / 1024)
    if start["capture"] is not None and per_rank * (1 + start["k"]) > start["capture"]:
        step += knobs.get("eager_ms", 0.0)
    step += knobs.get("spec_ms", 0.0) * start["k"]
    return step / (1 + knobs.get("accept", 0.0) * start["k"])


def _config_value(configs: dict, dotted: str):
    node = configs
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def active_recipes(profile: dict, args: dict, env: dict) -> list[str]:
    """The simulated recipes whose every sign is present for this start."""
    built = set()
    kernels_file = Path(profile.get("kernels_file", "/nonexistent"))
    if kernels_file.is_file():
        built = set(kernels_file.read_text().split())
    tree = Path(profile["tree"])
    active = []
    for rid, signs in sorted(profile["recipes"].items()):
        ok = all(env.get(k) == v for k, v in signs.get("env", {}).items())
        ok = ok and all(_config_value(args["configs"], key) not in (None, False) for key in signs.get("config", []))
        ok = ok and all((tree / rel).is_file() and marker in (tree / rel).read_text(errors="replace")
                        for rel, marker in signs.get("tree", []))
        ok = ok and set(signs.get("kernels", [])) <= built
        if ok:
            active.append(rid)
    return active


class Simulation:
    def __init__(self, profile: dict, args: dict, active: list[str]):
        self.profile, self.args, self.active = profile, args, active
        self.rng = random.Random(profile.get("seed", 0) * 1_000_003 + os.getpid())
        self.lock = threading.Lock()
        self.streaming = 0
        self.ready_at = time.monotonic() + profile.get("startup_s", 0.3)
        self.levels = sorted(int(c) for c in profile["base_ms"])
        self.load = load_model(profile, active)
        self.knobs = profile.get("knobs")
        self.start = launch(args)
        slots = decode_slots(self.load, args)
        self.slots = threading.BoundedSemaphore(slots * args["dp"] if self.knobs is not None else slots)

    def delay_s(self, noise: float) -> float:
        """The next token interval at the current number of streaming requests."""
        with self.lock:
            n = max(self.streaming, 1)
        if self.knobs is not None:  # the requests spread over the DP ranks: a rank decodes its share
            n = -(-n // self.args["dp"])
        level = str(max([c for c in self.levels if c <= n] or self.levels[:1]))
        ms = self.profile["base_ms"][level] + noise
        ms += sum(self.profile["recipes"][rid].get("delta_ms", {}).get(level, 0.0) for rid in self.active)
        if self.knobs is not None:
            ms = knob_ms(ms, n, self.knobs, self.start)
        if self.load:
            ms = loaded_ms(ms, n, self.load)
        return max(ms, 0.1) / 1000.0

    def completion(self, prompt: str, max_tokens: int) -> tuple[str, list[int]]:
        """Deterministic greedy output: the answer of an arithmetic question, then filler tokens."""
        words, ids = [], []
        question = QUESTION.search(prompt)
        if question:
            a, op, b = int(question.group(1)), question.group(2), int(question.group(3))
            answer = {"plus": a + b, "minus": a - b, "times": a * b}[op]
            wrong = self.profile.get("wrong")
            if wrong and wrong["recipe"] in self.active and any(p in prompt for p in wrong["prompts"]):
                answer += 1
            words.append(f" {answer}")
            ids.append(1000 + answer)
        seed = hashlib.sha256(prompt.encode()).digest()
        while len(ids) < max_tokens:
            token = seed[len(ids) % len(seed)] + 3
            words.append(f" w{token}")
            ids.append(token)
        diverge = self.profile.get("diverge")
        if diverge and diverge["recipe"] in self.active and diverge["prompt"] in prompt:
            t = diverge["token"]
            ids[t] += 1
            words[t] = f" w{ids[t]}"
        return "".join(words[:max_tokens]), ids[:max_tokens]


def profiler_dir(argv: list[str]) -> str | None:
    """The capture directory ``--profiler-config.torch_profiler_dir=DIR`` names (None: profiling off)."""
    prefix = "--profiler-config.torch_profiler_dir="
    return next((a[len(prefix):] for a in argv if a.startswith(prefix)), None)


def write_capture(sim: Simulation, directory: str) -> None:
    """The capture of this start: the generator's injected signatures minus the active recipes'."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "profile"))
    import make_fixture

    shown = set(sim.profile.get("signatures", make_fixture.INJECTED)) - set(sim.active)
    make_fixture.write(Path(directory), inject=shown)


def load_model(profile: dict, active: list[str]) -> dict:
    """The load model of this start: the profile's ``load`` with the active recipes' knee moves and
    ``die_above`` (empty without a ``load``: the simulation then ignores load, as before)."""
    if "load" not in profile:
        return {}
    load = dict(profile["load"])
    for rid in active:
        change = profile["recipes"][rid].get("load", {})
        load["knee"] = load.get("knee", 1 << 30) + change.get("knee", 0)
        if change.get("die_above") is not None:
            load["die_above"] = change["die_above"]
    return load


def decode_slots(load: dict, args: dict) -> int:
    """How many requests decode at once: vLLM's scheduler runs at most --max-num-seqs (its default
    without the flag) and queues the rest; a profile's ``slots`` can lower it further."""
    return min(args["max_num_seqs"], load.get("slots") or args["max_num_seqs"])


def loaded_ms(ms: float, n: int, load: dict) -> float:
    """A token interval of ``ms`` at one request, with ``n`` decoding together: batching, then the knee."""
    ms += load.get("batch_ms", 0.0) * (n - 1)
    knee = load.get("knee")
    if knee is not None and n > knee:
        ms *= 1.0 + load.get("steep", 0.5) * (n - knee)
    return ms


def make_handler(sim: Simulation):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            # Each token is one small write: without TCP_NODELAY, Nagle's algorithm holds it back
            # until the previous one is acknowledged (delayed ACKs: tens of ms), as vLLM's server does not.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _send(self, code: int, body: dict | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._send(200 if time.monotonic() >= sim.ready_at else 503)
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": sim.args["served"], "object": "model",
                                                              "root": sim.args["model"], "owned_by": "sim"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path in ("/start_profile", "/stop_profile"):
                return self._profile(self.path == "/stop_profile")
            if self.path != "/v1/completions":
                return self._send(404, {"error": "not found"})
            if body.get("model") != sim.args["served"]:
                return self._send(404, {"error": f"model {body.get('model')!r} is not served"})
            prompt = body["prompt"] if isinstance(body["prompt"], str) else str(body["prompt"])
            n = int(body.get("max_tokens") or 16)
            if not body.get("stream"):
                text, ids = sim.completion(prompt, n)
                choice = {"index": 0, "text": text, "finish_reason": "length", "logprobs": None}
                if body.get("return_token_ids"):
                    choice["token_ids"] = ids
                return self._send(200, {"id": "cmpl-sim", "object": "text_completion", "model": sim.args["served"],
                                        "choices": [choice], "usage": {"prompt_tokens": len(prompt.split()),
                                                                       "completion_tokens": n}})
            self._stream(prompt, n)

        def _profile(self, stop: bool) -> None:
            directory = profiler_dir(sim.argv)
            if directory is None:  # as vLLM: the profiler endpoints need --profiler-config
                return self._send(404, {"error": "profiling is not enabled"})
            if stop:
                write_capture(sim, directory)
            self._send(200)

        def _chunk(self, data: dict | str) -> None:
            text = "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
            raw = text.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()

        def _stream(self, prompt: str, n: int) -> None:
            sim.slots.acquire()  # queueing: wait for a decode slot before the first token
            with sim.lock:
                sim.streaming += 1
                dies = sim.load.get("die_above") is not None and sim.streaming > sim.load["die_above"]
            if dies:
                print(f"sim: {sim.streaming} requests at once, above die_above {sim.load['die_above']}: "
                      "the server dies (injected)", file=sys.stderr, flush=True)
                os._exit(3)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                noise = sim.rng.gauss(0.0, sim.profile.get("noise_ms", 0.0))
                deadline = time.perf_counter() + sim.profile.get("ttft_ms", 20.0) / 1000.0
                for i in range(n):
                    pause = deadline - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    self._chunk({"id": "cmpl-sim", "object": "text_completion", "model": sim.args["served"],
                                 "choices": [{"index": 0, "text": f" w{i % 500}", "logprobs": None,
                                              "finish_reason": "length" if i == n - 1 else None}]})
                    deadline += sim.delay_s(noise)
                self._chunk({"id": "cmpl-sim", "object": "text_completion", "model": sim.args["served"], "choices": [],
                             "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n,
                                       "total_tokens": len(prompt.split()) + n}})
                self._chunk("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            finally:
                with sim.lock:
                    sim.streaming -= 1
                sim.slots.release()

    return Handler


def main(argv: list[str]) -> int:
    profile = json.loads(Path(os.environ["SIM_PROFILE"]).read_text())
    args = parse_argv(argv)
    active = active_recipes(profile, args, dict(os.environ))
    with open(profile["log"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": argv, "active": active}) + "\n")
    if profile.get("crash") in active:
        print(f"sim: {profile['crash']} makes the server crash at start (injected)", file=sys.stderr)
        return 1
    over = oom_gib(profile["knobs"], launch(args)) if "knobs" in profile else None
    if over is not None:  # as vLLM: the engine core's traceback, then the API server's summary
        print("ERROR [core.py] EngineCore failed to start.\nTraceback (most recent call last):\n"
              '  File "vllm/v1/engine/core.py", line 498, in run_engine_core\n'
              f"RuntimeError: NPU out of memory. Tried to allocate {over:.2f} GiB (NPU 0; "
              f"{profile['knobs']['hbm_gib']} GiB total capacity)\n"
              "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
              file=sys.stderr, flush=True)
        return 1
    sim = Simulation(profile, args, active)
    sim.argv = argv
    server = ThreadingHTTPServer(("127.0.0.1", args["port"]), make_handler(sim))
    server.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"sim: serving {args['served']} on port {args['port']} with {active}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
