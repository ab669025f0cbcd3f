"""``optkit plan``, ``optkit explain``, ``optkit facts``."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.cli.options import build_request, request_options
from optkit.errors import UnknownName


def _plan(model, request_file, params):
    from optkit.resolve.plan import load_workspace, plan

    workspace = load_workspace()
    return workspace, plan(build_request(model, request_file, params), workspace)


def _plan_from_lock(lock: Path, model, request_file, params):
    """The plan a lock was written for (same request, same catalog) and the lock's bundle options."""
    given = [name for name, value in params.items() if value not in (None, (), [])]
    if model or request_file or given:
        raise click.UsageError("--from-lock takes the request from the lock; give no MODEL, --request or request flags")
    from optkit.bundle.lock import request_from_lock
    from optkit.resolve.plan import load_workspace, plan

    workspace = load_workspace()
    request, options = request_from_lock(lock, workspace)
    return workspace, plan(request, workspace), options


@click.command("plan")
@request_options
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--verbose", "-v", is_flag=True, help="Also list recipes for other versions.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), help="Write a launch bundle here.")
@click.option("--k8s", is_flag=True, help="With -o: also write k8s/deployment.yaml.")
@click.option("--from-lock", "from_lock", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plan the request recorded in an optkit.lock.json again (the catalog must be unchanged).")
def plan_command(model, request_file, as_json, verbose, output, k8s, from_lock, **params):
    """Choose the best valid recipe set for MODEL on a target, and explain it."""
    if from_lock is not None:
        workspace, result, options = _plan_from_lock(from_lock, model, request_file, params)
        k8s = k8s or bool(options.get("k8s"))
    else:
        workspace, result = _plan(model, request_file, params)
    if output is not None:
        from optkit.bundle.writer import write_bundle

        write_bundle(result, workspace, output, k8s=k8s)
    if as_json:
        from optkit.resolve.report import dump_json, plan_data

        click.echo(dump_json(plan_data(result)), nl=False)
        return
    from optkit.cli.render import plan_report, show

    show(plan_report(result, workspace.catalog, verbose))
    if output is not None:
        click.echo(f"bundle written to {output}")


@click.command("explain")
@click.argument("recipe_ids", nargs=-1, required=True)
@request_options
@click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON.")
def explain_command(recipe_ids, model, request_file, as_json, **params):
    """Why each RECIPE_ID is selected or not for a request (MODEL via --request or the flags)."""
    workspace, result = _plan(model, request_file, params)
    for rid in recipe_ids:
        if rid not in result.resolution.decisions:
            raise UnknownName("recipe", rid, sorted(result.resolution.decisions))
    if as_json:
        from optkit.resolve.report import decision_data, dump_json

        click.echo(dump_json({rid: decision_data(result.resolution.decisions[rid]) for rid in recipe_ids}), nl=False)
        return
    from optkit.cli.render import explain_report, show

    show(explain_report(result, workspace.catalog, list(recipe_ids)))


@click.command("facts")
@request_options
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
    from optkit.resolve.facts import compute_facts
    from optkit.resolve.plan import load_workspace, resolve_model
    from optkit.resolve.profile_catalog import find_target
    from optkit.catalog.conditions import format_value

    workspace = load_workspace()
    request = build_request(model, request_file, params)
    facts = compute_facts(request, resolve_model(workspace, request), find_target(workspace.targets, request.target))
    if as_json:
        from optkit.resolve.report import dump_json, facts_json

        click.echo(dump_json(facts_json(facts)), nl=False)
        return
    for name, value in facts.values.items():
        click.echo(f"{name} = {format_value(value)}")


COMMANDS = [plan_command, explain_command, facts_command]
