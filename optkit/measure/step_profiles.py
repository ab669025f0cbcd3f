"""``ladder --capture-profiles``: a short profiler capture per step, and which signatures each step removed.

With ``--profile`` every step's server starts with vLLM's profiler on (``--profiler-config``: the
torch profiler, which vllm-ascend runs as the Ascend PyTorch Profiler, bounded to
``max_iterations`` engine steps after ``delay_iterations``), and ``run-ladder.sh``, after the
benchmark and the accuracy prompts, sends one request at concurrency 1 between ``/start_profile``
and ``/stop_profile``: the capture lands in ``results/STEP/rN/profile/``. ``optkit report`` reads
the captures (``optkit.profile``) and says, per step, which recipe signatures are present, which
disappeared against the step before (the check that a recipe removed what it claims) and how the
decode step's wall time moved. ladder.json carries the signatures and the model's layer counts,
so the report needs no catalog.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from optkit.measure import MeasureError

MAX_ITERATIONS = 16
"""Engine steps captured per step: enough decode steps for medians, few enough to analyse in minutes."""
DELAY_ITERATIONS = 4
"""Engine steps skipped after /start_profile: the request's prefill and the first decode steps."""
PROFILE_TOKENS = MAX_ITERATIONS + DELAY_ITERATIONS + 4
PROFILE_DIR = "profile"


def profile_data(plan, workspace) -> dict[str, Any]:
    """ladder.json's ``profile``: the capture's bounds, and what the report matches against."""
    from optkit.resolve.profiled import dims_of

    signatures = {r.id: [s.dump(mode="json") for s in r.signatures] for r in workspace.catalog if r.signatures}
    return {"max_iterations": MAX_ITERATIONS, "delay_iterations": DELAY_ITERATIONS, "tokens": PROFILE_TOKENS,
            "concurrency": 1, "dir": PROFILE_DIR, "release": str(plan.facts["versions.vllm_ascend"]),
            "dims": dims_of(plan.model), "signatures": dict(sorted(signatures.items()))}


def serve_args(data: dict[str, Any]) -> list[str]:
    """The `vllm serve` arguments that turn the profiler on (the directory is the run's, added by run-ladder.sh)."""
    return ["--profiler-config.profiler=torch", f"--profiler-config.max_iterations={data['max_iterations']}",
            f"--profiler-config.delay_iterations={data['delay_iterations']}",
            "--profiler-config.ignore_frontend=true", "--profiler-config.torch_profiler_with_stack=false"]


def _recipes(data: dict[str, Any]) -> list:
    from optkit.catalog.schema import Signature

    return [SimpleNamespace(id=rid, signatures=[Signature.model_validate(s) for s in sigs])
            for rid, sigs in sorted(data["signatures"].items())]


def step_profiles(ladder: dict[str, Any], results: Path) -> list[dict[str, Any]]:
    """Per step (ladder order): its capture's decode wall time, the signatures present with their
    saving, what disappeared or appeared against the step before, and the recipes the step added
    whose signatures are still there. A step without a capture says so."""
    from optkit.profile import ProfileError
    from optkit.profile.analysis import analyze

    data = ladder.get("profile")
    if not data:
        return []
    recipes, out, before = _recipes(data), [], None
    for step in ladder["steps"]:
        captures = sorted((results / step["id"]).glob(f"r*/{data['dir']}"), key=lambda p: (len(p.parent.name), p.parent.name))
        row: dict[str, Any] = {"step": step["id"], "recipes": step["recipes"], "capture": None}
        if not captures:
            row["problem"] = "no capture (the step has not run, or ran without --profile)"
        else:
            try:
                result = analyze(captures[0], recipes, data["dims"], data["release"],
                                 display=captures[0].relative_to(results).as_posix())
            except ProfileError as exc:
                row["problem"] = str(exc)
            else:
                row["capture"] = captures[0].relative_to(results).as_posix()
                row["wall_us"] = result.slowest.decode["wall_us"]
                row["present"] = {f.recipe: round(sum(x.saving_us for x in result.finding(f.recipe) if x.present), 3)
                                  for f in result.findings if f.present}
        if before is not None and row["capture"] and before["capture"]:
            row["disappeared"] = sorted(set(before["present"]) - set(row["present"]))
            row["appeared"] = sorted(set(row["present"]) - set(before["present"]))
            row["wall_delta_us"] = round(row["wall_us"] - before["wall_us"], 3)
            added = [r for r in step["recipes"] if r not in before["recipes"]]
            row["still_present"] = sorted(r for r in added if r in row["present"])
        out.append(row)
        before = row if row["capture"] else before
    return out


def profile_markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Step captures: which recipe signatures each step removed", "",
             "From `optkit report` (docs/profile.md): one short capture per step at concurrency 1; savings are "
             "per decode step, from the capture's own durations.", "",
             "| step | decode step | Δ vs step before | signatures present (µs/step) | disappeared | still present "
             "(added here) |", "|---|---|---|---|---|---|"]
    for r in rows:
        if not r["capture"]:
            lines.append(f"| `{r['step']}` | — | — | {r.get('problem', '')} | — | — |")
            continue
        present = ", ".join(f"{k} {v:g}" for k, v in sorted(r["present"].items())) or "none"
        delta = f"{r['wall_delta_us']:+.1f} µs" if "wall_delta_us" in r else "—"
        lines.append(f"| `{r['step']}` | {r['wall_us']:.1f} µs | {delta} | {present} | "
                     f"{', '.join(r.get('disappeared', [])) or '—'} | {', '.join(r.get('still_present', [])) or '—'} |")
    return "\n".join(lines) + "\n"


def write_step_profiles(ladder: dict[str, Any], results: Path, out_dir: Path) -> tuple[list[dict], list[Path]]:
    """profiles.json and profiles.md in the report directory (nothing without ``--profile``)."""
    from optkit.resolve.report import dump_json

    rows = step_profiles(ladder, Path(results))
    if not rows:
        return [], []
    if not any(r["capture"] for r in rows):
        raise MeasureError(f"the ladder was written with --profile but no step has a readable capture in {results}: "
                           + "; ".join(f"{r['step']}: {r['problem']}" for r in rows))
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"profiles.json": dump_json({"steps": rows}), "profiles.md": profile_markdown(rows)}
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8")
    return rows, [out_dir / n for n in files]
