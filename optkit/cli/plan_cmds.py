"""``optkit plan``, ``optkit explain``, ``optkit facts``."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.cli.options import PROFILE_AT, PROFILE_AT_HELP, build_request, catalog_dirs, catalog_option, request_options
from optkit.errors import UnknownName


def _plan(model, request_file, params, profile=None, profile_at=1):
    from optkit.resolve.plan import load_workspace, plan

    workspace = load_workspace(catalogs=catalog_dirs(params.pop("catalogs", ())))
    return workspace, plan(build_request(model, request_file, params), workspace, profile=profile,
                           profile_concurrency=profile_at, profile_display=str(profile) if profile else None)


def _plan_from_lock(lock: Path, model, request_file, params):
    """The plan a lock was written for (same request, same catalog, same inputs) and the lock's bundle options.
    ``--tree`` and ``--catalog`` say where the lock's tree and catalog folders are now (a lock holds them by digest)."""
    tree_at, catalogs_at = params.pop("tree", None), params.pop("catalogs", ())
    given = [name for name, value in params.items() if value not in (None, (), [])]
    if model or request_file or given:
        raise click.UsageError("--from-lock takes the request and the --catalog folders from the lock; give no MODEL, "
                               "--request or request flags (--tree and --catalog only to say where the lock's tree "
                               "and catalog folders are now)")
    from optkit.bundle.lock import lock_catalogs, request_from_lock
    from optkit.resolve.plan import load_workspace, plan

    catalogs = lock_catalogs(lock, [Path(c) for c in catalogs_at])  # the lock's folders, not the environment's
    workspace = load_workspace(catalogs=[Path(c) for c in catalogs])
    request, options, workspace.replay = request_from_lock(lock, workspace, Path(tree_at) if tree_at else None, catalogs)
    if tree_at and not request.tree:
        raise click.UsageError("--tree with --from-lock says where the lock's tree is now; this lock has no tree")
    result = plan(request, workspace)
    if options.get("selection") is not None:  # a ladder step: the same subset of the plan again
        from optkit.resolve.plan import restrict

        result = restrict(result, options["selection"], workspace, options.get("selection_reason", ""))
    return workspace, result, options


@click.command("plan")
@request_options
@catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--verbose", "-v", is_flag=True, help="Also list recipes for other versions.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), help="Write a launch bundle here.")
@click.option("--k8s", is_flag=True, help="With -o: also write the bundle's Kubernetes manifests under k8s/: a Deployment and its "
              "Service on one node; a LeaderWorkerSet, its ConfigMap and Service across nodes; with --pd a "
              "manifest per role, the proxy's and a ConfigMap (docs/bundle.md).")
@click.option("--replicas", type=click.IntRange(1, 1000), help="With --k8s: replicas of the Deployment (default 1).")
@click.option("--k8s-device-plugin", type=click.Choice(["mindcluster", "cce"]),
              help="With --k8s: the device plugin naming the NPUs: mindcluster (Ascend Device Plugin, "
                   "huawei.com/Ascend910; default) or cce (Huawei Cloud CCE AI Suite, huawei.com/ascend-1980).")
@click.option("--from-lock", "from_lock", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plan the request recorded in an optkit.lock.json again (the catalog must be unchanged).")
@click.option("--from-tune", "from_tune", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Plan the best launch an `optkit tune` run measured (its directory): its knob values, labelled "
                   "with where they were measured.")
@click.option("--profile", "profile", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="An Ascend profiler capture of this deployment (docs/profile.md): its savings per decode step "
                   "count over the article's numbers, below measured records.")
@click.option("--profile-at", "profile_at", type=click.IntRange(1, 4096), default=PROFILE_AT, show_default=True,
              help="With --profile: " + PROFILE_AT_HELP)
def plan_command(model, request_file, as_json, verbose, output, k8s, replicas, k8s_device_plugin, from_lock,
                 from_tune, profile, profile_at, **params):
    """Choose the best valid recipe set for MODEL on a target, and explain it."""
    if from_tune is not None:
        if from_lock is not None or model or request_file or any(v not in (None, (), []) for k, v in params.items()
                                                                  if k != "catalogs"):
            raise click.UsageError("--from-tune plans the tune's request with its measured best; give no MODEL, "
                                   "--request, request flags or --from-lock")
        from optkit.tune.results import from_tune as tune_request

        request, _, _ = tune_request(from_tune)
        from optkit.resolve.plan import load_workspace, plan
        from optkit.resolve.request_record import parse_request

        workspace = load_workspace(catalogs=catalog_dirs(params.pop("catalogs", ())))
        result = plan(parse_request(request), workspace)
        _show_plan(result, workspace, output, k8s, {"replicas": replicas, "device_plugin": k8s_device_plugin},
                   as_json, verbose, profile_at)
        return
    if k8s and output is None:
        raise click.UsageError("--k8s writes k8s/ into a bundle: give -o DIR too")
    if from_lock is not None and profile is not None:
        raise click.UsageError("--from-lock plans the lock's request again; give --profile without it")
    given = {"replicas": replicas, "device_plugin": k8s_device_plugin}
    if from_lock is not None:
        workspace, result, options = _plan_from_lock(from_lock, model, request_file, params)
        k8s = k8s or bool(options.get("k8s"))
        given = {**options.get("k8s_options", {}), **{k: v for k, v in given.items() if v is not None}}
    else:
        workspace, result = _plan(model, request_file, params, profile, profile_at)
    _show_plan(result, workspace, output, k8s, given, as_json, verbose, profile_at)


def _show_plan(result, workspace, output, k8s, given, as_json, verbose, profile_at):
    if k8s and output is None:
        raise click.UsageError("--k8s writes k8s/ into a bundle: give -o DIR too")
    if not k8s and any(v is not None for v in given.values()):
        raise click.UsageError("--replicas and --k8s-device-plugin go with --k8s")
    if output is not None:
        from optkit.bundle.k8s import K8sOptions
        from optkit.bundle.writer import write_bundle

        write_bundle(result, workspace, output,
                     k8s=K8sOptions(**{k: v for k, v in given.items() if v is not None}) if k8s else False)
    if as_json:
        from optkit.resolve.report import dump_json, plan_data

        click.echo(dump_json(plan_data(result)), nl=False)
        return
    from optkit.cli.render import plan_report, show

    show(plan_report(result, workspace.catalog, verbose, workspace.records))
    if result.profile is not None:
        counted = sorted(rid for rid, s in result.profile_savings.items() if s.present)
        click.echo(f"profile: {result.profile.directory} (captured {result.profile.started}) counts at c{profile_at} "
                   f"for {', '.join(counted) or 'no recipe: none of their signatures is in it'}; "
                   f"{result.profile.release_check}")
    if output is not None:
        click.echo(f"bundle written to {output}")


@click.command("explain")
@click.argument("words", nargs=-1, required=True, metavar="RECIPE_ID... [MODEL]")
@request_options(model_argument=False)
@catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON.")
def explain_command(words, request_file, as_json, **params):
    """Why each RECIPE_ID is selected or not for a request: MODEL last, or --model-config, or --request."""
    from optkit.resolve.plan import load_workspace, plan

    workspace = load_workspace(catalogs=catalog_dirs(params.pop("catalogs", ())))
    recipe_ids, model = split_explain_words(list(words), workspace.catalog, bool(params.get("model_config")))
    for rid in recipe_ids:
        if rid not in workspace.catalog:
            raise UnknownName("recipe", rid, sorted(workspace.catalog.recipes))
    result = plan(build_request(model, request_file, params), workspace)
    if as_json:
        from optkit.resolve.report import decision_data, dump_json

        data = {rid: decision_data(result, rid) for rid in recipe_ids}
        for d in result.derivations:  # the launch values a recipe derived, with how and why
            if d.recipe in data:
                data[d.recipe].setdefault("derived", []).append(
                    {"set": d.target, "value": d.value, "how": d.how, "why": d.why, "basis": d.basis})
        click.echo(dump_json(data), nl=False)
        return
    from optkit.cli.render import explain_report, show

    show(explain_report(result, workspace.catalog, recipe_ids))


def split_explain_words(words: list[str], catalog, model_config: bool) -> tuple[list[str], str | None]:
    """``RECIPE_ID... [MODEL]``: the last word is MODEL when it is no recipe id and --model-config
    does not name the model already (then every word is a recipe id, and a typo gets a did-you-mean)."""
    if len(words) > 1 and not model_config and words[-1] not in catalog:
        return words[:-1], words[-1]
    if len(words) == 1 and words[0] not in catalog and not model_config:
        raise click.UsageError(f"{words[0]!r} is no recipe id: explain takes RECIPE_ID... then MODEL "
                               f"(e.g. `optkit explain mtp-enable-k4 {words[0]}`); `optkit recipes` lists the "
                               f"recipe ids, `optkit models` the models")
    return words, None


@click.command("facts")
@request_options
@catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@click.option("--list", "list_names", is_flag=True, help="List every fact name, its type and meaning.")
def facts_command(model, request_file, as_json, list_names, **params):
    """The facts a request is judged on, derived ones included."""
    if list_names:
        from optkit.catalog.factspec import FACTS

        for spec in FACTS.values():
            choices = f" ({', '.join(spec.choices)})" if spec.choices else ""
            click.echo(f"{spec.name}  {spec.type}{choices}  {spec.description}")
        return
    from optkit.catalog.conditions import format_value
    from optkit.resolve.plan import load_workspace, request_facts

    workspace = load_workspace(catalogs=catalog_dirs(params.pop("catalogs", ())))
    facts = request_facts(build_request(model, request_file, params), workspace)  # the facts a plan is judged on
    if as_json:
        from optkit.resolve.report import dump_json, facts_json

        click.echo(dump_json(facts_json(facts)), nl=False)
        return
    for name, value in facts.values.items():
        click.echo(f"{name} = {format_value(value)}")


COMMANDS = [plan_command, explain_command, facts_command]
