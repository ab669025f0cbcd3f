"""A capacity sweep measures a server sized for the sweep's range, and says where requests queue.

A step's server is built for the plan's concurrency: under the throughput goal its scheduler holds
``--max-num-seqs`` × DP requests at once (``sched-capacity-for-load``: ⌈c_max / DP⌉) and its graphs
are captured up to the plan's largest decode batch. A sweep probing above that measures the queue:
vLLM's scheduler decodes at most max-num-seqs requests per DP engine and the rest wait for a slot
(their wait counts in TTFT, not in TPOT, so a TPOT-only SLO still "holds" while throughput is flat).

``plan_for_sweep`` therefore plans the ladder for the sweep's range: under the throughput goal the
request's concurrency levels plus ``--sweep-max`` (so every step's scheduler and capture sizes cover
the highest probe, and bench.sh also measures that load); under the latency goal (servers built for
the article's c ≤ 8 shapes) a sweep above the plan's largest concurrency is refused with the fix.

``scheduler`` reads a step's slots off its launch argv (ladder.json ``steps[].scheduler``); the
sweep and the report then count a probe above them as a miss ("requests queue"), never as met.
"""

from __future__ import annotations

from typing import Any

from optkit.measure import MeasureError

VLLM_DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's ``max_num_seqs`` for the API server when ``--max-num-seqs`` is not given (0.23.0 and 0.30.0)."""


def _flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def scheduler(argv: list[str]) -> dict[str, Any]:
    """How many requests a launch decodes at once: ``--max-num-seqs`` (vLLM's default without it) per DP
    engine × ``--data-parallel-size``, and how that was read."""
    given, dp_text = _flag(argv, "--max-num-seqs"), _flag(argv, "--data-parallel-size")
    seqs = int(given) if given is not None else VLLM_DEFAULT_MAX_NUM_SEQS
    dp = int(dp_text) if dp_text is not None else 1
    source = f"--max-num-seqs {seqs}" if given is not None else f"vLLM's default max-num-seqs {seqs}"
    return {"max_num_seqs": seqs, "dp": dp, "slots": seqs * dp,
            "text": f"{source} × DP {dp}" if dp > 1 else source}


def queue_violation(concurrency: int, sched: dict | None) -> str | None:
    """Why a probe at ``concurrency`` is no measurement of concurrent decoding (None when it fits)."""
    if not sched or concurrency <= sched["slots"]:
        return None
    return (f"requests queue: c{concurrency} is above the server's {sched['slots']} scheduler slots "
            f"({sched['text']}), so the load beyond them waits for a slot")


def plan_for_sweep(plan, workspace, sweep: dict, *, from_lock: bool = False):
    """The plan whose servers hold the sweep's highest probe (see the module docstring)."""
    high, levels = sweep["high"], list(plan.request.concurrency)
    top = max(levels)
    if high <= top:
        return plan
    if plan.request.objective_goal != "throughput":
        sizes = plan.compilation_config.get("cudagraph_capture_sizes")  # what serve.sh captures
        built = f"capture sizes {sizes}, vLLM's default scheduler" if sizes else "vLLM's default scheduler"
        raise MeasureError(
            f"--sweep probes up to c{high} (--sweep-max), and this latency plan's servers are built for c <= {top} "
            f"({built}): above it the sweep measures servers the plan never sized for that load. Plan for load with "
            f"--goal throughput (the ladder then sizes --max-num-seqs and the capture sizes for c <= {high}), or "
            f"sweep within the plan with --sweep-max {top}")
    if from_lock or plan.given is None:
        raise MeasureError(
            f"--sweep probes up to c{high} (--sweep-max), and the lock's plan sizes its servers for c <= {top} "
            f"(--max-num-seqs × DP, capture sizes): beyond it requests queue. Re-plan with --concurrency "
            f"{','.join(map(str, [*levels, high]))}, or sweep within the plan with --sweep-max {top}")
    from optkit.resolve.plan import plan as make_plan
    from optkit.resolve.request import Request

    given = plan.given.dump(mode="json", by_alias=True)
    request = Request(**{**given, "concurrency": [*levels, high], "goal": "throughput"})
    return make_plan(request, workspace)


__all__ = ["scheduler", "queue_violation", "plan_for_sweep", "VLLM_DEFAULT_MAX_NUM_SEQS"]
