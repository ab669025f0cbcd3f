"""Write docs/example-ladder/: a simulated ladder run whose report `optkit docs` generates.

    PYTHONPATH=. python tests/measure/make_example.py      # minutes: every step is served and benchmarked

It runs the same machinery as the end-to-end test (the real run-ladder.sh and `vllm bench serve`,
real `optkit apply` on a copy of the real 0.23.0 tree, the simulated server), for a ladder of five
recipes (one run each) and an injected regression, with the capacity sweep (`--sweep --slo
'tpot_p90<=38ms' --sweep-max 16`; the simulated server's knee moves per recipe: KNEES), then copies what the report
reads: ladder.json, the prompts and the runs' results (vLLM's JSON, accuracy.json, host.json,
sweep.json and the sweep's probes; not the logs) into docs/example-ladder/.
Those are inputs and stay as they are; `optkit docs` writes docs/example-ladder/report/ from them
and `optkit docs --check` keeps that current. Timings come from the simulation, not from an NPU.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from compat_support import scratch_tree  # noqa: E402
from simhost import REPO, SimHost  # noqa: E402
from test_ladder_e2e import SIGNS, INJECTED, L2NORM, SAMPLER, STATIC, profile  # noqa: E402

from optkit.measure.ladder import sweep_options, write_ladder  # noqa: E402
from optkit.measure.steps import ladder_steps  # noqa: E402
from optkit.measure.sweep_fit import plan_for_sweep  # noqa: E402
from optkit.resolve.plan import load_workspace, plan  # noqa: E402
from optkit.resolve.request import Request  # noqa: E402
from optkit.resolve.slo import parse_slo  # noqa: E402

HCCL, SUPER = "waterfall-hccl-aiv", "compile-super-kernel"
EXAMPLE = REPO / "docs" / "example-ladder"
REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4], "input_len": 32, "output_len": 8,
           "goal": "throughput", "min_tokens": False, "with": [L2NORM]}
"""A request `optkit ladder --sweep` accepts: the throughput goal, so the sweep's range is planned for
(``plan_for_sweep``: concurrency 1,4,16, --max-num-seqs and capture sizes for c16); clients without
min_tokens, so the greedy bf16 fast path applies; the L2Norm kernel forced in (``--with``; the plan
estimates it regresses at c16) to show a flagged regression."""
SWEEP_MAX = 16
KEPT = ("c1.json", "c4.json", "c16.json", "accuracy.json", "host.json", "sweep.json")
SLO = "tpot_p90<=38ms"
BASE_KNEE = 6
KNEES = {L2NORM: -1, SAMPLER: 0, HCCL: 2, STATIC: 4, SUPER: 1}
"""How each recipe moves the simulated server's knee (concurrent requests before decode turns compute-bound)."""


def main() -> int:
    SIGNS[HCCL] = {"env": {"HCCL_OP_EXPANSION_MODE": "AIV"}}
    SIGNS[SUPER] = {"config": ["additional_config.ascend_compilation_config.enable_super_kernel"],
                    "tree": [["vllm_ascend/compilation/compiler_interface.py", "super_kernel_optimize"]]}
    INJECTED.update({HCCL: {1: -2.5, 4: -2.0}, SUPER: {1: -1.0, 4: -0.8}})
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        workspace = load_workspace()
        sweep = sweep_options(parse_slo(SLO), low=1, high=SWEEP_MAX)
        full = plan_for_sweep(plan(Request(**REQUEST), workspace), workspace, sweep)
        ladder = ladder_steps(full, workspace.catalog, only=[L2NORM, SAMPLER, HCCL, STATIC, SUPER])
        write_ladder(full, workspace, ladder, base / "ladder", repeat=1,
                     sweep=sweep)
        loaded = profile(diverge=False)
        loaded["load"] = {"knee": BASE_KNEE, "steep": 0.6, "batch_ms": 0.1}
        for rid, move in KNEES.items():
            loaded["recipes"][rid]["load"] = {"knee": move}
        host = SimHost(base / "host", scratch_tree(base), loaded)
        proc = subprocess.run(["bash", str(base / "ladder" / "run-ladder.sh"), "--tree", str(host.tree)],
                              cwd=host.root, env=host.env())
        if proc.returncode != 0:
            return proc.returncode
        if EXAMPLE.exists():
            shutil.rmtree(EXAMPLE)
        for name in ("ladder.json", "accuracy/prompts.json"):  # what the report reads besides results/
            (EXAMPLE / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / "ladder" / name, EXAMPLE / name)
        for path in sorted((base / "ladder" / "results").rglob("*")):
            if (path.name in KEPT or path.parent.name == "sweep") and path.is_file() and ".partial" not in path.as_posix():
                dest = EXAMPLE / "results" / path.relative_to(base / "ladder" / "results")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest)
    print(f"wrote {EXAMPLE}; now run `optkit docs`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
