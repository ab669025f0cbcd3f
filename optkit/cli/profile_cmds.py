"""``optkit profile``: read an Ascend profiler capture, decompose its decode steps, rank recipes by it."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.cli.options import PROFILE_AT, PROFILE_AT_HELP, build_request, catalog_dirs, catalog_option, request_options


@click.command("profile")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", "model", help="Model id or alias the capture ran: ranks the recipes for the request it makes "
              "with the other request options (their defaults, as plan's: --target 910c, …).")
@request_options(model_argument=False)
@catalog_option
@click.option("--profile-at", "at", type=click.IntRange(1, 4096), default=PROFILE_AT, show_default=True,
              help=PROFILE_AT_HELP)
@click.option("--at", "at_alias", type=click.IntRange(1, 4096), hidden=True)  # the old name of --profile-at
@click.option("--json", "as_json", is_flag=True, help="Print the analysis (and ranking) as JSON.")
@click.option("--chart", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the timeline of one representative decode step here (PNG).")
def profile_command(directory, model, request_file, at, at_alias, as_json, chart, **params):
    """Read the Ascend PyTorch Profiler output in DIRECTORY (vLLM's profiler directory): decompose the
    decode steps, find the recipes' signatures and, with --model, rank the recipes by your own timings."""
    from optkit.resolve.plan import load_workspace
    from optkit.resolve.profiled import analysis_only, profile_report

    workspace = load_workspace(catalogs=catalog_dirs(params.pop("catalogs", ())))
    at = at if at_alias is None else at_alias
    if model or params.get("model_config") or request_file:  # the request as plan makes it: the same defaults
        report = profile_report(build_request(model, request_file, params), directory, workspace, at, str(directory))
    else:
        report = analysis_only(directory, workspace.catalog, params.get("vllm_ascend_version"), str(directory))
    if chart is not None:
        from optkit.profile.timeline import chart as draw

        data = draw(report.analysis)
        try:
            chart.write_bytes(data)
        except OSError as exc:
            from optkit.profile import ProfileError

            raise ProfileError(f"--chart {chart}: cannot write it: {exc.strerror or exc}") from None
    if as_json:
        from optkit.resolve.profiled import report_data
        from optkit.resolve.report import dump_json

        click.echo(dump_json(report_data(report)), nl=False)
        return
    from optkit.cli.profile_render import profile_blocks
    from optkit.cli.render import show

    show(profile_blocks(report))
    if chart is not None:
        click.echo(f"timeline written to {chart}")


COMMANDS = [profile_command]
