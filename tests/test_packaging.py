"""The wheel carries the catalog, the bundle and ladder templates and the accuracy prompts: `pip install .`
then `optkit plan` (and `optkit plan -o`, `optkit ladder -o`) works outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_the_catalog_and_plans_outside_the_checkout(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(ROOT), "-w", str(tmp_path / "dist")], check=True, capture_output=True, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("optkit-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for recipe in (ROOT / "recipes").iterdir():
        assert f"optkit/data/recipes/{recipe.name}/recipe.yaml" in names
    for kernel in (ROOT / "kernels").iterdir():
        assert f"optkit/data/kernels/{kernel.name}/kernel.yaml" in names
    assert "optkit/data/models/qwen3.5-35b-a3b.yaml" in names and "optkit/data/targets/910c.yaml" in names
    templates = ROOT / "optkit" / "bundle" / "templates"
    shipped = {f"optkit/bundle/templates/{t.relative_to(templates).as_posix()}" for t in templates.rglob("*.j2")}
    assert "optkit/bundle/templates/serve.sh.j2" in shipped and shipped <= names
    upstream = {f"optkit/data/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "recipes").glob("*/upstream/**/*.py")}
    assert upstream and upstream <= names  # the unit tests `optkit export` sends upstream are catalog data
    assert {"optkit/measure/prompts.yaml", "optkit/data/verified/README.md",
            "optkit/data/models/reference/article-waterfall.yaml"} <= names

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-m", "optkit", "plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--json"],
                         cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert '"mtp-enable-k4"' in run.stdout
    where = subprocess.run([sys.executable, "-c", "import optkit.catalog.paths as c; print(c.project_root())"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where) == site / "optkit" / "data"

    bundle = subprocess.run([sys.executable, "-m", "optkit", "plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--k8s",
                             "-o", "bundle"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert bundle.returncode == 0, bundle.stderr
    example = ROOT / "docs" / "example-bundle"
    for rel in ("serve.sh", "preflight.sh", "README.md", "k8s/deployment.yaml"):
        assert (elsewhere / "bundle" / rel).read_bytes() == (example / rel).read_bytes(), rel

    ladder = subprocess.run([sys.executable, "-m", "optkit", "ladder", "qwen3.5-35b", "--mtp", "-o", "ladder"],
                            cwd=elsewhere, env=env, capture_output=True, text=True)
    assert ladder.returncode == 0, ladder.stderr
    assert (elsewhere / "ladder" / "accuracy" / "prompts.json").is_file()

    for args in (["docs"], ["docs", "--check"]):  # outside a checkout: a clear error, not an internal one
        docs = subprocess.run([sys.executable, "-m", "optkit", *args], cwd=elsewhere, env=env, capture_output=True,
                              text=True)
        assert docs.returncode == 1, docs.stderr
        assert "works on a source checkout" in docs.stderr and "internal error" not in docs.stderr, docs.stderr


@pytest.mark.tree
def test_tree_fetch_works_after_a_plain_pip_install(tmp_path):
    """In a fresh virtualenv (no system packages), `pip install optkit` and nothing else, then
    `optkit tree fetch` of a pre-release: what the sdist download needs came with optkit."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(ROOT), "-w", str(tmp_path / "dist")], check=True, capture_output=True, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("optkit-*.whl"))
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of this checkout is visible
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              str(wheel)], capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-2000:]
    env["OPTKIT_CACHE_DIR"] = str(tmp_path / "cache")
    fetch = subprocess.run([str(venv / "bin" / "optkit"), "tree", "fetch", "0.24.0rc1", str(tmp_path / "tree")],
                           capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert fetch.returncode == 0, fetch.stderr[-2000:]
    assert "downloaded from PyPI" in fetch.stdout
    assert (tmp_path / "tree" / "vllm_ascend" / "_version.py").read_text().count("0.24.0rc1")
