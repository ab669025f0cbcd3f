"""``optkit apply``, ``revert``, ``status`` and ``tree fetch``: operations on a vllm-ascend tree."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

_TREE = click.option("--tree", "tree_dir", required=True, type=click.Path(path_type=Path),
                     help="Root of the vllm-ascend source tree (the directory holding vllm_ascend/).")


@click.command("apply")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@_TREE
@click.option("--force", is_flag=True, help="Patch over uncommitted changes of the target files (git checkout).")
@click.option("--allow-pending", is_flag=True, help="Apply a lock whose recipes still have unwritten patches.")
@click.option("--dry-run", is_flag=True, help="Run every check, change nothing.")
def apply_command(source, tree_dir, force, allow_pending, dry_run):
    """Apply the patches of a bundle (directory or optkit.lock.json) to a tree, all or nothing."""
    from optkit.tree.apply import apply
    from optkit.tree.patchset import load

    result = apply(tree_dir, load(source, allow_pending=allow_pending), force=force, dry_run=dry_run)
    _recovery_lines(result.recovered, result.notes)
    for o in result.outcomes:
        click.echo(f"{o.outcome:<16} {o.name}  (recipe {o.recipe})")
    click.echo(_apply_summary(result))


def _apply_summary(result) -> str:
    where = f"vllm-ascend {result.version} at {result.root}"
    if not result.outcomes:
        return f"the bundle has no patches; nothing to do for {where}"
    if result.already_applied:
        return f"already applied, nothing to do: {where}"
    counts = {}
    for o in result.outcomes:
        counts[o.outcome] = counts.get(o.outcome, 0) + 1
    done = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    verb = "dry run, nothing changed" if result.dry_run else "done"
    return (f"{verb}: {done} ({where}); checks {result.check_seconds:.2f}s, "
            f"apply {result.apply_seconds:.2f}s")


def _recovery_lines(recovered, notes) -> None:
    for note in notes:
        click.echo(f"note: {note}")
    if recovered is not None:
        click.echo(f"rolled back an interrupted apply ({len(recovered.done)} patch(es) had been "
                   f"applied): restored {len(recovered.restored)} file(s)")


@click.command("revert")
@_TREE
@click.option("--force", is_flag=True, help="Also discard changes made to patched files since the apply.")
def revert_command(tree_dir, force):
    """Put a tree back to its exact bytes before `optkit apply`."""
    from optkit.tree.apply import revert

    result = revert(tree_dir, force=force)
    _recovery_lines(result.recovered, result.notes)
    for d in result.overwritten:
        click.echo(f"discarded changes to {d.path}")
    if result.reverted:
        click.echo(f"reverted {len(result.reverted)} patch(es), restored {len(result.restored)} "
                   f"file(s): {result.root} is pristine again")
    elif result.recovered is None:
        click.echo(f"nothing to revert: optkit has applied no patches to {result.root}")


@click.command("status")
@_TREE
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def status_command(tree_dir, as_json):
    """A tree's version, applied patches, drift, and any unfinished apply."""
    from optkit.tree.apply import status

    result = status(tree_dir)
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(result), indent=2, sort_keys=True, default=str))
        return
    kind = "git checkout" if result.is_git else "source tree"
    click.echo(f"tree      {result.root} (vllm-ascend {result.version}, {kind})")
    if result.interrupted is not None:
        click.echo(_interrupted_line(result))
    elif result.lock_pid is not None:
        click.echo(f"lock      held by pid {result.lock_pid} (an apply/revert runs, or one was killed)")
    if not result.patches:
        click.echo("patches   none applied by optkit or apply.sh")
    elif result.applied_by == "apply.sh":
        click.echo(f"patches   applied by apply.sh (.optkit/apply-sh.done, no checksums: drift is not checked); "
                   f"undo with `apply.sh --revert {result.root}` from its bundle")
    for o in result.patches:
        click.echo(f"patch     {o.outcome:<16} {o.name}  (recipe {o.recipe})")
    for d in result.drift:
        click.echo(f"drift     {d.path}: expected sha256 {_short(d.expected)}, found {_short(d.actual)}")
    if result.patches and not result.drift and result.applied_by != "apply.sh":
        click.echo(f"files     {len(result.files)} patched file(s), unchanged since the apply")


def _short(sha256: str | None) -> str:
    return sha256[:12] if sha256 else "no file"


def _interrupted_line(result) -> str:
    run = result.interrupted
    progress = f"{len(run.done)} of {len(run.done) + len(run.pending)} patch(es) applied"
    if run.running:
        return f"running   an apply is in progress (pid {run.pid}): {progress}"
    return (f"interrupted an apply was killed ({progress}); `optkit revert --tree {result.root}` "
            "or the next `optkit apply` restores the tree")


@click.group("tree")
def tree_group():
    """Pristine vllm-ascend source trees."""


@tree_group.command("fetch")
@click.argument("version")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--package", default="vllm-ascend", show_default=True, help="PyPI project (vllm-ascend or vllm).")
@click.option("--force", is_flag=True, help="Download and unpack again even if cached.")
def fetch_command(version, dest, package, force):
    """Copy the pristine tree of PACKAGE==VERSION (from its PyPI sdist, cached) to DEST. VERSION is
    matched as PEP 440 does (0.23 is 0.23.0, not 0.23.0.post1), so a release optkit does not know yet
    is fetched too."""
    from optkit.tree.fetch import fetch

    def downloading(package, version):
        click.echo(f"downloading the sdist of {package} {version} from PyPI (pip builds its metadata: a minute "
                   "or two, once; later fetches use the cache)", err=True)

    result = fetch(version, dest, package=package, force=force, on_download=downloading)
    click.echo(f"release   {result.package} {result.version}")
    click.echo(f"path      {result.path}")
    click.echo(f"sdist     {result.sdist.name} sha256 {result.sha256}")
    click.echo(f"source    {'cache' if result.from_cache else 'downloaded from PyPI'}")


@tree_group.command("inspect")
@click.argument("tree_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def inspect_command(tree_dir, as_json):
    """Run every recipe's upstream probes on TREE_DIR: which recipes are upstream, superseded,
    broken, absent or still new there (and whether that is what its version declares)."""
    from optkit.catalog.loader import load_catalog
    from optkit.versions.probes import inspect_tree_recipes

    report = inspect_tree_recipes(tree_dir, load_catalog())
    rows = [{"recipe": r.recipe, "status": r.status, "range": r.entry.versions if r.entry else "",
             "declared": r.declared.status if r.declared else "", "agrees": r.agrees,
             "why": "" if r.agrees else "; ".join(p.why for p in r.declared_results if not p.holds),
             **({"applied_by_optkit": report.applied[r.recipe]} if r.recipe in report.applied else {})}
            for r in report.recipes]
    if as_json:
        from optkit.resolve.report import dump_json

        click.echo(dump_json({"tree": str(report.root), "version": str(report.version),
                              "version_source": report.version_source, "recipes": rows}), nl=False)
        return
    click.echo(f"tree      {report.root} (vllm-ascend {report.version}, from {report.version_source})")
    if report.applied:
        click.echo(f"applied   by optkit: {len(report.applied)} recipe(s) (.optkit/state.json); every status below "
                   "is the tree's without them")
    for row in rows:
        mark = "" if row["agrees"] else f"  (declared {row['declared'] or 'nothing'} for {report.version}: {row['why']})"
        if "applied_by_optkit" in row:
            mark += f"  [applied by optkit: {len(row['applied_by_optkit'])} patch(es)]"
        click.echo(f"{row['status']:<16} {row['recipe']}{mark}")
    counts = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    click.echo("totals    " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


COMMANDS = [apply_command, revert_command, status_command, tree_group]
