"""Write docs/example-tune/: a simulated `optkit tune` run and its report.

    PYTHONPATH=. python tests/tune/make_example.py      # about a minute

It runs what a host runs, but against a simulated server: `optkit tune` writes the tune for the request of the
landscape "35B MoE throughput" (tests/tune/landscapes.py: a cost model with a known optimum, every point
through the real resolver, the real sweep search and stop rule), `optkit.tune.study.run_tune` runs 24 trials
with the landscape's executor in place of the host's, and `optkit report` writes the report. It copies the
tune bundle (tune.json, run-tune.sh, README.md) and report/ into docs/example-tune/. The numbers come from the
simulation, not from an NPU; the report says "measured on simulated …".
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from click.testing import CliRunner  # noqa: E402
from landscapes import LandscapeExecutor, landscape  # noqa: E402

from optkit.cli.main import cli  # noqa: E402
from optkit.tune.bundle import load_tune  # noqa: E402
from optkit.tune.results import write_report  # noqa: E402
from optkit.tune.study import run_tune  # noqa: E402

EXAMPLE = HERE.parents[1] / "docs" / "example-tune"
NAME = "35B MoE throughput"
BUDGET = 24


def main(example: Path = EXAMPLE) -> list[str]:
    land = landscape(NAME)
    g = land.given
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tune"
        args = ["tune", g["model"], "--target", g["target"], "--slo", g["slo"], "--concurrency",
                ",".join(map(str, g["concurrency"])), "--sweep-max", str(land.high), "--sweep-resolution", "0",
                "--budget", str(BUDGET), "-o", str(out)]
        result = CliRunner().invoke(cli, args)
        if result.exit_code != 0:
            raise SystemExit(result.output)
        executor = LandscapeExecutor(land)
        executor.label = f"simulated ({NAME}, tests/tune/landscapes.py)"
        run_tune(out, load_tune(out), executor, land.workspace)
        write_report(out)
        if example.exists():
            shutil.rmtree(example)
        example.mkdir(parents=True)
        for name in ("tune.json", "run-tune.sh", "README.md"):
            shutil.copy2(out / name, example / name)
        shutil.copytree(out / "report", example / "report")
    return args


if __name__ == "__main__":
    used = main()
    print(f"wrote {EXAMPLE}: optkit {' '.join(used[:-2])} -o DIR")
