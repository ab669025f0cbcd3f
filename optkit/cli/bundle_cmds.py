"""``optkit bundle check``: verify a launch bundle written by ``optkit plan -o DIR``."""

from __future__ import annotations

import json
from pathlib import Path

import click

_MARK = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP"}


@click.group("bundle")
def bundle():
    """Launch bundles written by `optkit plan -o DIR`."""


@bundle.command("check")
@click.argument("bundle_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tree", "tree_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="vllm-ascend tree to check keys and env vars against (default: the cached pristine tree).")
@click.option("--no-vllm", is_flag=True, help="Do not run vLLM's parser (then a missing vLLM is no failure).")
@click.option("--vllm-python", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Python with the vLLM the bundle's release pairs with (default: this one if it matches, "
                   "else a virtualenv of that vLLM under the optkit cache dir, venvs/vllm-VERSION, which a source "
                   "checkout's scripts/vllm-venv VERSION builds; without one the vLLM checks say SKIP).")
@click.option("--model-config", type=click.Path(exists=True, path_type=Path),
              help="The model's config.json (or its folder) to build vLLM's engine configuration with, no weights "
                   "(default: the request's own, else the profile's fixture in optkit's source checkout).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def check_command(bundle_dir, tree_dir, no_vllm, vllm_python, model_config, as_json):
    """Check BUNDLE_DIR against the parser and the engine configuration of the vLLM its release pairs
    with, the tree's config keys (and, on strict releases, its own AscendConfig) and env vars, and shellcheck.

    Exits 1 on any problem, and when that vLLM is not available (unless --no-vllm)."""
    from optkit.bundle.check import check_bundle
    from optkit.errors import BundleError

    report = check_bundle(bundle_dir, tree=tree_dir, use_vllm=not no_vllm, vllm_python=vllm_python,
                          model_config=model_config)
    if as_json:
        click.echo(json.dumps([c.__dict__ for c in report.checks], indent=2, sort_keys=True))
    else:
        for check in report.checks:
            click.echo(f"{_MARK[check.status]}  {check.name}" + (f"  ({check.note})" if check.note else ""))
            for problem in check.problems:
                click.echo(f"      - {problem}")
    vllm_skipped = not no_vllm and any(c.name == "vllm" for c in report.skipped)
    if report.problems or vllm_skipped:
        what = [f"{len(report.problems)} problem(s), listed above"] if report.problems else []
        what += [f"the vllm and engine checks did not run: no vLLM {_probe_version(bundle_dir)} here (its SKIP line "
                 "says how to get it); pass --no-vllm to check without it"] if vllm_skipped else []
        raise BundleError([f"bundle {bundle_dir}: {'; '.join(what)}"])


def _probe_version(bundle_dir: Path) -> str:
    from optkit.bundle.check import read_lock

    return read_lock(bundle_dir)["versions"]["vllm"]


COMMANDS = [bundle]
