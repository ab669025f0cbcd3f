"""The tune bundle ``optkit tune`` writes, for the NPU host::

    tune.json          the tune as data: request, space, SLO and workload of the sweep, budget, versions
    run-tune.sh        runs the trials on the host (``optkit measure tune``), resumable
    README.md          how to run it, how long it takes, the space
    k8s/tune-job.yaml  with --k8s: an Indexed Job, one pod per NPU host, all on one shared study

Nothing is planned per trial here: the host resolves each point with the same optkit and catalog
(``tune.json`` names the catalog's digest; a host with another catalog is refused), so every point
the search proposes is checked by the resolver before its server starts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from optkit import __version__
from optkit.tune import TuneError

TUNE_VERSION = 1
TUNE_NAME = "tune.json"
SERVER_START_S = 600
"""A server start as the duration estimate counts it: minutes on an NPU (more with static-kernel compiles)."""


def tune_settings(base, workspace, given: dict[str, Any], space, sweep: dict[str, Any], *, budget: int | None,
                  hours: float | None, objective: str, seed: int, storage: str, workers: int, sampler: str = "gp",
                  moves: bool = True, cost: dict[str, int]) -> dict[str, Any]:
    """tune.json: what the host needs (``base``: the rule-based plan, the first trial)."""
    from optkit.bundle.launch import served_checkpoint
    from optkit.bundle.lock import catalog_sha256
    from optkit.bundle.scripts import bench_extra
    from optkit.measure.sweep import max_probes, sweep_settings

    r = base.request
    prefix = r.shared_prefix_len
    client = ["--dataset-name", "random", "--random-input-len", str(r.input_len - prefix),
              *(["--random-prefix-len", str(prefix)] if prefix else []), "--random-output-len", str(r.output_len),
              "--ignore-eos", *bench_extra(r)]
    settings = sweep_settings(sweep["slo"], low=sweep["low"], high=sweep["high"], resolution=sweep["resolution"],
                              prompts_per_concurrency=cost["prompts_per_concurrency"], min_prompts=cost["min_prompts"],
                              warmups=cost["warmups"], client_args=client)
    settings["max_probes"] = max_probes(sweep["low"], sweep["high"], sweep["resolution"])
    data = {
        "tune_version": TUNE_VERSION, "optkit": __version__, "model": base.model.id,
        "checkpoint": served_checkpoint(base), "served_name": base.model.id, "target": base.target.id,
        "versions": {"vllm_ascend": str(base.facts["versions.vllm_ascend"]), "vllm": str(base.facts["versions.vllm"])},
        "catalog_sha256": catalog_sha256(workspace.root), "request": given, "space": space.data(),
        "sweep": settings, "objective": objective, "budget": budget, "hours": hours, "seed": seed,
        "sampler": sampler, "moves": moves,
        "storage": storage, "workers": workers,
        "rule_based": {"summary": base.layout.summary, "selected": list(base.selected)},
    }
    data["duration"] = duration(data, base)
    return data


def duration(data: dict[str, Any], base) -> dict[str, Any]:
    """How long the tune runs, as a ladder's estimate is made (``optkit.measure.duration``): per trial a server start
    and at most ``max_probes`` probes of ⌈requests / c⌉ + warm-up waves of one request latency each."""
    from optkit.measure.duration import ASSUMED_TPOT_MS, _human

    s = data["sweep"]
    known = [e.estimate_ms or e.baseline_ms for e in base.estimates if (e.estimate_ms or e.baseline_ms)]
    tpot_ms = float(min(known)) if known else ASSUMED_TPOT_MS
    latency_s = base.request.output_len * tpot_ms / 1000.0
    per_probe = max(math.ceil(max(s["prompts_per_concurrency"] * c, s["min_prompts"]) / c) + s["warmups"]
                    for c in (s["low"], s["high"]))
    trial_s = SERVER_START_S + s["max_probes"] * per_probe * latency_s
    budget = data["budget"]
    total = None if budget is None else budget * trial_s / max(1, data["workers"])
    basis = (f"{tpot_ms:.1f} ms per token ({'the plan estimate' if known else 'assumed: the plan estimates no TPOT here'}), "
             f"{base.request.output_len} tokens a request, a server start counted as {SERVER_START_S // 60} min")
    if total is None:
        text = f"Each trial takes up to about {_human(trial_s)}; --hours {data['hours']} bounds the run"
    else:
        text = (f"About {_human(total)} at most: {budget} server starts × up to {_human(trial_s)} each"
                + (f" over {data['workers']} hosts" if data["workers"] > 1 else "")
                + "; trials stopped early, reused or refused before starting cost less")
    return {"trial_seconds": round(trial_s), "total_seconds": None if total is None else round(total), "basis": basis,
            "text": f"{text} ({basis})"}


def tune_files(data: dict[str, Any], *, k8s: bool, plan=None) -> dict[str, bytes]:
    from optkit.bundle.render import render

    files = {TUNE_NAME: (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"),
             "run-tune.sh": render("tune/run-tune.sh.j2", version=__version__, data=data).encode("utf-8"),
             "README.md": render("tune/README.md.j2", version=__version__, data=data, k8s=k8s).encode("utf-8")}
    if k8s:
        files["k8s/tune-job.yaml"] = render("tune/tune-job.yaml.j2", **job_data(data, plan)).encode("utf-8")
    return files


def job_data(data: dict[str, Any], plan) -> dict[str, Any]:
    from optkit.bundle.k8s import K8sOptions, device_resource
    from optkit.measure.k8s import SHARED, TREE

    return {"version": __version__, "name": "optkit-tune-" + data["model"].replace(".", "-").replace("_", "-"),
            "workers": data["workers"], "image": "vllm-ascend:v{}".format(data["versions"]["vllm_ascend"]),
            "model": data["checkpoint"], "tree": TREE, "shared": SHARED, "budget": data["budget"],
            "resource": device_resource(K8sOptions().device_plugin, plan.target.device_generation),
            "devices": data["space"]["devices"]}


def write_tune(data: dict[str, Any], out_dir: Path, *, k8s: bool, plan=None) -> list[Path]:
    """Write the bundle at once; a directory holding a study (trials run) is refused, never overwritten."""
    from optkit.bundle.writer import check_replaceable, write_files

    out_dir = Path(out_dir)
    if (out_dir / "study.db").exists() or (out_dir / "study.journal").exists() or (out_dir / "trials").exists():
        raise TuneError(f"{out_dir}: holds a tune's trials (study.db / trials/); write the new tune elsewhere, or "
                        "resume this one with its run-tune.sh")
    check_replaceable(out_dir, TUNE_NAME, {TUNE_NAME, "run-tune.sh", "README.md", "k8s"}, "tune bundle", TuneError)
    return write_files(tune_files(data, k8s=k8s, plan=plan), out_dir)


def load_tune(tune_dir: Path) -> dict[str, Any]:
    path = Path(tune_dir) / TUNE_NAME
    if not path.is_file():
        raise TuneError(f"{tune_dir}: no {TUNE_NAME}: give the directory `optkit tune … -o DIR` wrote")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TuneError(f"{path}: line {exc.lineno}: not JSON ({exc.msg}); write the tune again with optkit tune") from None
    if data.get("tune_version") != TUNE_VERSION:
        raise TuneError(f"{path}: tune_version {data.get('tune_version')!r}; this optkit reads {TUNE_VERSION}: "
                        "write the tune again with this optkit")
    missing = [k for k in ("request", "space", "sweep", "catalog_sha256", "objective") if k not in data]
    if missing:
        raise TuneError(f"{path}: {', '.join(missing)} missing; write the tune again with optkit tune")
    return data


def check_catalog(data: dict[str, Any], workspace, where: Path) -> None:
    from optkit.bundle.lock import catalog_sha256

    here = catalog_sha256(workspace.root)
    if here != data["catalog_sha256"]:
        raise TuneError(f"{where / TUNE_NAME}: written for catalog {data['catalog_sha256'][:12]}, this optkit has "
                        f"{here[:12]}: trials would be resolved against other recipes; install the optkit that wrote "
                        "it, or write the tune again here")


__all__ = ["tune_settings", "tune_files", "write_tune", "load_tune", "check_catalog", "TUNE_NAME", "TUNE_VERSION"]
