"""``optkit tune``: write the tune bundle (docs/tune.md); ``optkit measure tune`` runs it on the host."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.cli.options import catalog_option, request_options


def _pairs(flag: str, items, sep: str = "=") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, found, value = item.partition(sep)
        if not found or not name.strip() or not value.strip():
            raise click.BadParameter(f"{item!r}: write NAME{sep}VALUE", param_hint=f"'{flag}'")
        if name.strip() in out:
            raise click.BadParameter(f"{name.strip()} is given twice", param_hint=f"'{flag}'")
        out[name.strip()] = value.strip()
    return out


@click.command("tune")
@request_options
@catalog_option
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Write the tune bundle here (tune.json, run-tune.sh, README.md).")
@click.option("--budget", type=click.IntRange(1, 10000), default=None,
              help="Server starts the search may spend, over every worker (default 30 unless --hours).")
@click.option("--hours", type=click.FloatRange(0.01, 10000), default=None, help="Or: stop after this many hours.")
@click.option("--devices", type=click.IntRange(1, 4096), default=None,
              help="NPUs a trial may use (default: the target's per node × the request's nodes).")
@click.option("--fix", "fix", multiple=True, metavar="KNOB=VALUE", help="Fix a knob (repeatable): layout, speculative, "
              "flashcomm1, prefix-caching, max-num-seqs, max-num-batched-tokens, capture-up-to.")
@click.option("--range", "ranges", multiple=True, metavar="KNOB=LOW:HIGH", help="An integer knob's range (repeatable).")
@click.option("--choices", "choices", multiple=True, metavar="KNOB=A,B", help="A knob's choices (repeatable).")
@click.option("--pareto", is_flag=True, help="Two objectives: throughput per card and p99 TPOT at the capacity.")
@click.option("--seed", type=int, default=0, show_default=True, help="The sampler's seed.")
@click.option("--sampler", type=click.Choice(["gp", "tpe"]), default="gp", show_default=True,
              help="Optuna's Gaussian-process sampler (fewer starts to a good launch; needs torch and scipy, which an "
                   "NPU host running vLLM has) or TPE (no dependency beyond Optuna).")
@click.option("--no-moves", "no_moves", is_flag=True,
              help="Let the sampler propose every point: no one-knob moves from the best, no sizing of max-num-seqs "
                   "after a start (docs/tune.md, 'The moves').")
@click.option("--sweep-min", "sweep_min", type=click.IntRange(1, 100000), default=None,
              help="The sweep's lowest probe (default 1).")
@click.option("--sweep-max", "sweep_max", type=click.IntRange(1, 100000), default=None,
              help="The sweep's highest probe (default 256).")
@click.option("--sweep-resolution", "sweep_resolution", type=click.FloatRange(0, 1), default=None,
              help="Capacity to within this fraction (default 0.1).")
@click.option("--prompts-per-concurrency", "prompts_per_concurrency", type=click.IntRange(1, 1000), default=10,
              show_default=True, help="Requests per concurrent slot in a probe.")
@click.option("--min-prompts", "min_prompts", type=click.IntRange(1, 100000), default=20, show_default=True,
              help="The fewest requests in a probe.")
@click.option("--warmups", type=click.IntRange(0, 100), default=1, show_default=True, help="Warm-up requests per slot.")
@click.option("--k8s", is_flag=True, help="Also write k8s/tune-job.yaml: an Indexed Job, one worker per NPU host, one study.")
@click.option("--workers", type=click.IntRange(1, 256), default=None, help="With --k8s: NPU hosts (default 2).")
def tune_command(model, request_file, output, budget, hours, devices, fix, ranges, choices, pareto, seed, sampler,
                 no_moves, sweep_min, sweep_max, sweep_resolution, prompts_per_concurrency, min_prompts, warmups, k8s,
                 workers, **params):
    """A search over the plan's open knobs for the best launch under --slo, to run on the NPU host."""
    if workers is not None and not k8s:
        raise click.UsageError("--workers goes with --k8s (one host runs one worker)")
    if params.get("goal") == "latency":
        raise click.UsageError("optkit tune searches for throughput under the SLO: drop --goal latency")
    explicit = {k: v for k, v in params.items() if v not in (None, (), [])}
    if request_file is not None:
        from optkit.resolve.request_record import load_request

        explicit = {**{k: v for k, v in load_request(request_file).dump().items() if v not in (None, (), [])
                       and k in _file_keys(request_file)}, **explicit}
    from optkit.cli.plan_cmds import _plan
    from optkit.cli.measure_cmds import _sweep_options
    from optkit.resolve.plan import plan as make_plan
    from optkit.resolve.request import Request
    from optkit.tune.bundle import tune_settings, write_tune
    from optkit.tune.space import build_space

    params["goal"] = "throughput"
    workspace, first = _plan(model, request_file, params)
    if first.request.slo is None:  # before the sweep's options, whose refusal names --sweep (a ladder's flag)
        raise click.UsageError("optkit tune searches for the best throughput under an SLO: add --slo, e.g. "
                               "--slo 'tpot_p99<=20ms,ttft_p99<=1s' (or slo: in the request file)")
    sweep = _sweep_options(first.request, True, sweep_min, sweep_max, sweep_resolution)
    given = first.given.dump(mode="json", by_alias=True)
    levels = sorted({*first.request.concurrency, sweep["high"]})
    given = {k: v for k, v in {**given, "concurrency": levels, "goal": "throughput"}.items() if v not in (None, [])}
    base = make_plan(Request(**given), workspace)
    space = build_space(base, explicit, high=sweep["high"], devices=devices, fix=_pairs("--fix", fix),
                        ranges=_pairs("--range", ranges), choices=_pairs("--choices", choices))
    from optkit.tune import TuneError
    from optkit.tune.candidate import Invalid, resolve_point

    first_point = resolve_point(given, space.start(), workspace)
    if isinstance(first_point, Invalid):  # the first trial: with --fix/--choices, every point may be refused
        pinned = [d.source for d in space.dims if d.fixed and d.source.startswith(("--fix", "--choices"))]
        raise TuneError(f"the first trial ({', '.join(f'{k}={v}' for k, v in space.start().items())}) is refused by the "
                        f"resolver: {first_point.reason}" + (f"; it follows {', '.join(pinned)}: change them" if pinned
                                                             else ""))
    if budget is None and hours is None:
        budget = 30
    data = tune_settings(base, workspace, given, space, sweep, budget=budget, hours=hours,
                         objective="pareto" if pareto else "throughput", seed=seed, sampler=sampler, moves=not no_moves,
                         storage="journal" if k8s else "sqlite", workers=(workers or 2) if k8s else 1,
                         cost={"prompts_per_concurrency": prompts_per_concurrency, "min_prompts": min_prompts,
                               "warmups": warmups})
    write_tune(data, output, k8s=k8s, plan=base)
    click.echo(f"tune of {base.model.id} on {base.target.id} under {data['sweep']['slo']}:")
    for d in space.dims:
        click.echo(f"  {d.text()}")
    click.echo(data["duration"]["text"])
    click.echo(f"tune written to {output}; run {output / 'run-tune.sh'} --tree TREE --model MODEL on the NPU host")


def _file_keys(path: Path) -> set[str]:
    import yaml

    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(k).replace("-", "_") for k in loaded} if isinstance(loaded, dict) else set()


COMMANDS = [tune_command]
