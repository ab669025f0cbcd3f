"""``optkit ladder``, ``optkit report`` and ``optkit measure host|accuracy`` (what run-ladder.sh calls)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from optkit.cli.options import request_options


def _ids(ctx, param, value):
    return [part.strip() for item in value for part in item.split(",") if part.strip()] or None


@click.command("ladder")
@request_options
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Write the ladder (step bundles, run-ladder.sh, ladder.json) here.")
@click.option("--from-lock", "from_lock", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Make the ladder of the plan an optkit.lock.json was written for (the catalog must be unchanged).")
@click.option("--order", type=click.Choice(["dependency", "article"]), default="dependency", show_default=True,
              help="Step order: required recipes first, or the article's sequence where it places the recipes.")
@click.option("--leave-one-out", is_flag=True, help="Steps: the whole plan, then the plan minus one recipe each.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Runs (server starts) per step, for a noise estimate across starts.")
@click.option("--recipes", "only", multiple=True, callback=_ids,
              help="Measure only these selected recipes (comma-separated or repeated); the rest stay out.")
@click.option("--k8s", is_flag=True, help="Also write k8s/ladder-job.yaml (an Indexed Job, one index per step).")
@click.option("--capture-profiles", "profile", is_flag=True,
              help="Each step also captures a short profile (a bounded number of engine steps, one request at c1); "
                   "optkit report then says which recipe signatures each step removed (docs/profile.md).")
@click.option("--profile", "profile_alias", is_flag=True, hidden=True,
              help="The former name of --capture-profiles (plan's --profile takes a capture directory).")
@click.option("--prompts-per-concurrency", "prompts_per_concurrency", type=click.IntRange(1, 1000), default=10,
              show_default=True, help="A run's cost: benchmark requests per concurrent slot (also per sweep probe).")
@click.option("--min-prompts", "min_prompts", type=click.IntRange(1, 100000), default=20, show_default=True,
              help="A run's cost: the fewest benchmark requests at any concurrency.")
@click.option("--warmups", type=click.IntRange(0, 100), default=1, show_default=True,
              help="A run's cost: warm-up requests per concurrent slot before each benchmark.")
@click.option("--accuracy-prompts", "accuracy_prompts", type=click.IntRange(1, 4096), default=None,
              help="A run's cost: send only the first N accuracy prompts (default: all of them).")
@click.option("--sweep", is_flag=True, help="Also measure each step's capacity: the highest concurrency meeting --slo "
                                            "(bracketing and bisection on the step's server; see docs/measure.md).")
@click.option("--sweep-min", "sweep_min", type=click.IntRange(1, 100000), default=None,
              help="With --sweep: the lowest concurrency probed (default 1).")
@click.option("--sweep-max", "sweep_max", type=click.IntRange(1, 100000), default=None,
              help="With --sweep: the highest concurrency probed (default 256).")
@click.option("--sweep-resolution", "sweep_resolution", type=click.FloatRange(0, 1), default=None,
              help="With --sweep: stop bisecting when the bracket is within this fraction of the capacity "
                   "(default 0.1; 0: to the exact concurrency).")
def ladder_command(model, request_file, output, from_lock, order, leave_one_out, repeat, only, k8s, profile,
                   profile_alias, prompts_per_concurrency, min_prompts, warmups, accuracy_prompts, sweep, sweep_min,
                   sweep_max, sweep_resolution, **params):
    """The plan as a single-variable ladder: a baseline, then one recipe more per step (or one less)."""
    profile = profile or profile_alias
    from optkit.cli.plan_cmds import _plan, _plan_from_lock
    from optkit.measure.ladder import write_ladder
    from optkit.measure.steps import ladder_steps, load_article_order

    if from_lock is not None:
        workspace, result, _ = _plan_from_lock(from_lock, model, request_file, params)
    else:
        workspace, result = _plan(model, request_file, params)
    from optkit.measure.ladder import StepCost

    cost = StepCost(prompts_per_concurrency, min_prompts, warmups, accuracy_prompts)
    sweep_opts = _sweep_options(result.request, sweep, sweep_min, sweep_max, sweep_resolution)
    if sweep_opts is not None:  # every step's server sized for the sweep's range (optkit.measure.sweep_fit)
        from optkit.measure.sweep_fit import plan_for_sweep

        planned = list(result.request.concurrency)
        result = plan_for_sweep(result, workspace, sweep_opts, from_lock=from_lock is not None)
        if list(result.request.concurrency) != planned:
            click.echo(f"--sweep-max {sweep_opts['high']}: the ladder is planned for concurrency "
                       f"{','.join(map(str, result.request.concurrency))}, so each step's server holds the sweep's "
                       "highest probe (--max-num-seqs × DP, capture sizes); bench.sh also measures that load")
    ladder = ladder_steps(result, workspace.catalog, order=order, leave_one_out=leave_one_out, only=only,
                          article_order=load_article_order(workspace.root))
    write_ladder(result, workspace, ladder, output, repeat=repeat, k8s=k8s, profile=profile, cost=cost,
                 sweep=sweep_opts)
    from optkit.cli.render import ladder_report, show

    show(ladder_report(json.loads((output / "ladder.json").read_text(encoding="utf-8"))))
    click.echo(f"ladder written to {output}; run {output / 'run-ladder.sh'} --tree TREE on the NPU host")


def _sweep_options(request, sweep, low, high, resolution):
    """The capacity sweep's options, or None without --sweep; the SLO is the request's own (``--slo`` or the
    request file's ``slo``, as the plan reads it), parsed by ``optkit.resolve.slo.parse_slo``."""
    from optkit.errors import RequestError

    given = {"--sweep-min": low, "--sweep-max": high, "--sweep-resolution": resolution}
    if not sweep:
        stray = [flag for flag, value in given.items() if value is not None]
        if stray:
            raise RequestError(f"{', '.join(stray)} set the capacity sweep: add --sweep, or drop them")
        return None
    from optkit.measure.ladder import sweep_options
    from optkit.resolve.slo import parse_slo

    text, where = request.slo, "--slo"
    if text is None:
        raise RequestError("--sweep needs an objective to measure capacity against: add --slo, e.g. "
                           "--slo 'tpot_p99<=20ms,ttft_p99<=1s'")
    slo = text if hasattr(text, "bounds") else parse_slo(str(text), where)
    if low is not None and high is not None and low > high:
        raise RequestError(f"--sweep-min {low} is above --sweep-max {high}: the lowest probe must not exceed the highest")
    return sweep_options(slo, low=low, high=high, resolution=resolution)


@click.command("report")
@click.argument("ladder_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Write the report here (default: LADDER_DIR/report).")
@click.option("--results", "results_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The results directory (default: LADDER_DIR/results).")
@click.option("--record", is_flag=True, help="Also write the measurements as a verified-on record in verified/.")
@click.option("--catalog", "catalog_root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="With --record: record into DIR/verified/, DIR a folder of your own as plan's --catalog takes it "
                   "(default: the shipped catalog's verified/).")
def report_command(ladder_dir, output, results_dir, record, catalog_root):
    """Report a ladder's results: per-step table, per-recipe attribution, waterfall, accuracy gate.

    Exits 1 after writing the report when no step has results or the accuracy gate did not pass.
    A tune's directory (tune.json) gets the tune's report: the best, the front, the knobs' importance."""
    if (ladder_dir / "tune.json").is_file():
        return _tune_report(ladder_dir, output, results_dir, record, catalog_root)
    from optkit.measure.report import build_report, outcome_error, write_report

    report = build_report(ladder_dir, results_dir)
    written = write_report(report, output or ladder_dir / "report")
    from optkit.cli.render import report_summary, show

    show(report_summary(report))
    from optkit.measure.step_profiles import write_step_profiles

    rows, profiles = write_step_profiles(report.ladder, results_dir or ladder_dir / "results", output or ladder_dir / "report")
    if rows:
        from optkit.cli.profile_render import step_profiles_table

        show([step_profiles_table(rows)])
    for path in [*written, *profiles]:
        click.echo(f"wrote {path}")
    error = outcome_error(report, ladder_dir)
    if error is not None:
        raise error
    if record:
        from optkit.catalog.loader import load_catalog
        from optkit.catalog.paths import catalog_path, project_root
        from optkit.measure.record import write_record

        catalog = load_catalog(None, catalog_path([catalog_root] if catalog_root else []))
        click.echo(f"recorded {write_record(report, catalog_root or project_root(), catalog)}")


def _tune_report(tune_dir, output, results_dir, record, catalog_root):
    if results_dir is not None:
        raise click.UsageError("--results is a ladder's; a tune's results are its study in the tune directory")
    from optkit.tune.results import write_report

    for path in write_report(tune_dir, output):
        click.echo(f"wrote {path}")
    if record:
        from optkit.catalog.paths import project_root
        from optkit.tune.records import write_tune_record

        click.echo(f"recorded {write_tune_record(tune_dir, catalog_root or project_root())}")


@click.group("measure")
def measure_group():
    """What run-ladder.sh records on the NPU host (host facts, the accuracy prompts, the capacity sweep)."""


@measure_group.command("host")
@click.option("--tree", "tree_dir", required=True, type=click.Path(path_type=Path),
              help="The vllm-ascend tree the server imports.")
@click.option("--python", "python", default="python3", show_default=True,
              help="The Python that serves (its vllm, vllm_ascend, torch, torch_npu versions are recorded).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="host.json")
def host_command(tree_dir, python, output):
    """Record the NPU, driver, CANN, package versions and the tree's pristine digest as JSON."""
    from optkit.catalog.paths import project_root
    from optkit.measure.host import host_facts
    from optkit.resolve.profile_catalog import load_targets
    from optkit.resolve.report import dump_json

    targets = load_targets(project_root() / "targets")
    output.write_text(dump_json(host_facts(tree_dir, python, targets)), encoding="utf-8")


@measure_group.command("accuracy")
@click.option("--url", required=True, help="The server's base URL, e.g. http://127.0.0.1:8000.")
@click.option("--served-name", required=True, help="The served model name.")
@click.option("--prompts", "prompts_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The ladder's accuracy/prompts.json.")
@click.option("--min-tokens", is_flag=True, help="Set min_tokens = max_tokens, as the plan's clients do.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="accuracy.json")
def accuracy_command(url, served_name, prompts_file, min_tokens, output):
    """Send the accuracy prompts at temperature 0 (one at a time) and save the token ids."""
    from optkit.measure.accuracy import load_prompt_set, run_prompts
    from optkit.resolve.report import dump_json

    data = run_prompts(url, served_name, load_prompt_set(prompts_file), min_tokens=min_tokens)
    output.write_text(dump_json(data), encoding="utf-8")


@measure_group.command("sweep")
@click.option("--ladder", "ladder_json", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The ladder's ladder.json (its sweep section: SLO, range, workload).")
@click.option("--model", required=True, help="The tokenizer / checkpoint the server runs (vllm bench serve --model).")
@click.option("--served-name", required=True, help="The served model name.")
@click.option("--host", default="127.0.0.1", show_default=True, help="The server's host.")
@click.option("--port", type=int, default=8000, show_default=True, help="The server's port.")
@click.option("--client", type=click.Choice(["auto", "in-process", "command"]), default="auto", show_default=True,
              help="vLLM's benchmark in this process (one import for every probe) or the vllm command per probe; "
                   "auto: in-process when this Python imports vllm.")
@click.option("--step", default=None, help="The ladder step the server runs: a probe above its scheduler slots "
                                           "(--max-num-seqs × DP) counts as a miss, since requests queue there.")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Write sweep.json and sweep/c<N>.json here.")
def sweep_command(ladder_json, model, served_name, host, port, client, step, output):
    """The highest concurrency at which the running server meets the ladder's SLO (bracketing, then bisection)."""
    from optkit.measure import MeasureError
    from optkit.measure.sweep import command_client, in_process_client, run_sweep

    settings = json.loads(ladder_json.read_text(encoding="utf-8")).get("sweep")
    if settings is None:
        raise MeasureError(f"{ladder_json} has no sweep section: write the ladder with `optkit ladder --sweep --slo …`")
    run = in_process_client() if client != "command" else None
    if run is None and client == "in-process":
        raise MeasureError("--client in-process: this Python cannot import vllm.benchmarks.serve; use --client command")
    name = "in-process" if run is not None else "command"
    sched = None
    if step is not None:
        steps = {s["id"]: s for s in json.loads(ladder_json.read_text(encoding="utf-8"))["steps"]}
        if step not in steps:
            raise MeasureError(f"--step {step}: {ladder_json} has no such step (it has {', '.join(sorted(steps))})")
        sched = steps[step].get("scheduler")
    run_sweep(settings, model=model, served_name=served_name, host=host, port=port, out_dir=output,
              client=run or command_client(), client_name=name, scheduler=sched)


@measure_group.command("tune")
@click.argument("tune_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tree", "tree_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The vllm-ascend tree the server imports: each trial's patches are applied to it (optkit apply) "
                   "and it is reverted at the end. Without it nothing is patched (a tree optkit does not manage).")
@click.option("--model", default=None, help="The checkpoint path or HF id the server loads (default: tune.json's).")
@click.option("--host", default="127.0.0.1", show_default=True, help="The server's host.")
@click.option("--port", type=int, default=8000, show_default=True, help="The server's port.")
@click.option("--budget", type=click.IntRange(1, 10000), default=None, help="Server starts in the whole study (default: tune.json's).")
@click.option("--hours", type=click.FloatRange(0.01, 10000), default=None, help="Stop after this many hours of this run.")
@click.option("--worker", type=click.IntRange(0, 10000), default=0, show_default=True,
              help="This worker's index (the Indexed Job's completion index): a restarted worker resumes its own trial.")
@click.option("--storage", type=click.Choice(["sqlite", "journal"]), default=None,
              help="The study's storage (default: tune.json's; journal on a shared volume).")
@click.option("--health-timeout", "health_timeout", type=click.IntRange(1, 100000), default=1800, show_default=True,
              help="Seconds to wait for /health (static-kernel compiles take tens of minutes).")
@click.option("--client", type=click.Choice(["auto", "in-process", "command"]), default="auto", show_default=True,
              help="vLLM's benchmark in this process or the vllm command per probe (as measure sweep).")
@click.option("--label", default=None, help="What the results say the trials were measured on (default: this host's name).")
def tune_run_command(tune_dir, tree_dir, model, host, port, budget, hours, worker, storage, health_timeout, client, label):
    """Run the tune's trials on this NPU host (run-tune.sh calls this): resumable, one server at a time."""
    import signal

    from optkit.measure import MeasureError
    from optkit.measure.sweep import command_client, in_process_client
    from optkit.resolve.plan import load_workspace
    from optkit.tune.bundle import check_catalog, load_tune
    from optkit.tune.host import HostExecutor
    from optkit.tune.study import run_tune

    data = load_tune(tune_dir)
    workspace = load_workspace()
    check_catalog(data, workspace, tune_dir)
    run = in_process_client() if client != "command" else None
    if run is None and client == "in-process":
        raise MeasureError("--client in-process: this Python cannot import vllm.benchmarks.serve; use --client command")
    executor = HostExecutor(data["sweep"], tree=tree_dir, model=model or data["checkpoint"],
                            served_name=data["served_name"], port=port, host=host, health_timeout=health_timeout,
                            client=run or command_client(), client_name="in-process" if run else "command")

    import socket

    executor.label = label or socket.gethostname()

    def interrupted(signum, frame):  # SIGTERM as Ctrl-C: the running trial's server is stopped on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        run_tune(tune_dir, data, executor, workspace, budget=budget, hours=hours, worker=worker, storage=storage)
    finally:
        if tree_dir is not None:  # a clean tree stays clean: revert is a no-op there
            import subprocess

            subprocess.run([*executor.optkit, "revert", "--tree", str(tree_dir)], check=False)


COMMANDS = [ladder_command, report_command, measure_group]
