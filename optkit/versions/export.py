"""``optkit export``: recipes' patch sets for one release as an upstream pull request for vllm-ascend.

``export`` writes, into a new directory ``DIR``:

- a git repository: the pristine tree of the release (optkit's cached sdist tree, or a user's own
  clone with ``--tree``) as its base commit, then one commit per patch of each recipe's patch set
  for that release, in the order given. A recipe's upstream unit test (recipe data:
  ``recipes/<id>/upstream/<patch file stem>/`` mirrors the tree, e.g. ``tests/ut/sample/…``) goes
  into the commit of the patch whose code it tests, so every commit of the series passes its own
  test and upstream reviews change and test together;
- ``DIR/patches/``: ``git format-patch`` of those commits (``git am`` applies them to any clone of
  upstream at that release);
- ``DIR/PR.md``: the pull-request text in the form of the tree's
  ``.github/PULL_REQUEST_TEMPLATE.md`` (``optkit.versions.export_pr``).

Commit messages come from the patch's DEP-3 header and the recipe's title, rewritten for upstream
(``optkit.versions.export_words``); author and ``Signed-off-by`` (vllm-ascend requires the DCO)
from ``author`` or git's ``user.name``/``user.email``. Dates are the patches' ``Last-Update`` (the
base commit takes the newest), so the same inputs give the same commits, hashes and files.

``run_tests`` runs the exported tests with a Python that has torch and pytest (checked before
anything is written: ``check_test_prerequisites``), on the base commit (they must fail: the code they test
is not there) and on the series' head (they must pass).

``export_scope`` is what the series is made of without making it (the release, the recipes and
their patch sets there), and ``patch_message`` a commit's message: tests/test_invariants_export.py
checks them for every release a recipe has a patch entry for, without git.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from optkit.catalog.lint import UPSTREAM_DIR
from optkit.catalog.patchfile import parse_dep3
from optkit.errors import OptkitError, PatchError, UnknownName
from optkit.tree.gitops import git, git_apply
from optkit.versions.export_words import article_line, commit_message, optkit_words
from optkit.versions.onrelease import release_view, verdict
from optkit.versions.releases import release_named

EXCLUDED = ("/patches/", "/PR.md")
"""What export writes next to the repository's files, kept out of git (``.git/info/exclude``)."""
TEST_TIMEOUT = 600


class ExportError(OptkitError):
    """An export that cannot be made as asked: the recipe, the release, the directory or the identity."""


@dataclass(frozen=True)
class Identity:
    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


@dataclass(frozen=True)
class Commit:
    """One commit of the series."""

    recipe: str
    patch: str
    """The recipe's patch file."""
    sha: str
    message: str
    tests: tuple[str, ...]
    """Tree paths of the upstream test files added in this commit."""
    file: str = ""
    """Its ``git format-patch`` file, relative to DIR."""


@dataclass(frozen=True)
class TestRun:
    """The exported tests run on one commit."""

    where: str
    """``base`` (the pristine tree) or ``series`` (the head)."""
    returncode: int
    summary: str
    """pytest's verdict line (``summary_line``), its timing dropped (deterministic)."""
    output: str = ""

    @property
    def passed(self) -> bool:
        return self.returncode == 0


@dataclass
class Export:
    """What ``export`` made."""

    out: Path
    version: str
    base: str
    """Where the base commit came from, in words."""
    base_sha: str
    recipes: list = field(default_factory=list)
    """The recipe records, in series order."""
    verdicts: dict = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    runs: list[TestRun] = field(default_factory=list)

    @property
    def tests(self) -> list[str]:
        return [t for c in self.commits for t in c.tests]


def parse_identity(text: str, flag: str = "--author") -> Identity:
    match = re.fullmatch(r"\s*([^<>]*\S)\s*<([^<>\s]+@[^<>\s]+)>\s*", text or "")
    if match is None:
        raise ExportError(f"{flag} {text!r} is not 'Name <mail@example.org>'")
    return Identity(match[1], match[2])


def git_identity(cwd: Path) -> Identity | None:
    """git's ``user.name`` and ``user.email`` as seen from ``cwd`` (None when either is unset)."""
    values = [git(cwd, "config", "--get", key).stdout.decode(errors="replace").strip()
              for key in ("user.name", "user.email")]
    return Identity(*values) if all(values) else None


def export_scope(catalog, recipe_ids: list[str], version: str | None = None, tree: Path | None = None) -> Export:
    """What an export of ``recipe_ids`` on ``version`` (with ``tree``: the tree's own version) is made
    of, before anything is written: the release, the recipes and their verdicts (patch sets) there."""
    version, source = _release(version, tree)
    view = release_view(version, source, catalog if source is not None else None)
    recipes, verdicts = _recipes(catalog, recipe_ids, view)
    return Export(Path(), version, "", "", recipes, verdicts)


def export(catalog, recipe_ids: list[str], out: Path, version: str | None = None, *, tree: Path | None = None,
           author: str | None = None, signoff: bool = True, run_tests: bool = False,
           python: str | None = None) -> Export:
    """Write the series, ``patches/`` and ``PR.md`` of ``recipe_ids`` on ``version`` (with ``tree``:
    the tree's own version; one of them is needed) into the new directory ``out``."""
    from optkit.versions.export_pr import pr_markdown

    result = export_scope(catalog, recipe_ids, version, tree)
    identity = parse_identity(author) if author else git_identity(Path(tree or Path.cwd()).resolve())
    if identity is None:
        raise ExportError("no author for the commits: pass --author 'Name <mail>' or set git's user.name and "
                          "user.email (git config --global user.name …)")
    if run_tests:
        check_test_prerequisites(python)
    out = result.out = _fresh_dir(Path(out))
    patches = [(r, p) for r in result.recipes for p in result.verdicts[r.id].patches]
    dates = {p: _date(catalog.patch_path(r.id, p)) for r, p in patches}
    base_date = max(dates.values())
    try:
        result.base = _base(out, result.version, tree, identity, base_date)
        result.base_sha = _head(out)
        for recipe, patch in patches:
            message = patch_message(catalog, recipe, patch, result.verdicts[recipe.id].patches,
                                    str(identity) if signoff else None)
            result.commits.append(_commit(catalog, recipe, patch, out, message, identity, dates[patch]))
        _format_patches(out, result)
        if run_tests and result.tests:
            result.runs = run_exported_tests(out, result.base_sha, result.tests, python)
        (out / "PR.md").write_text(pr_markdown(catalog, result), encoding="utf-8")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-made is left behind
        raise
    return result


def _release(version: str | None, tree: Path | None) -> tuple[str, Path | None]:
    """(the release, the root of ``tree``): ``version``, else the tree's."""
    wanted = release_named(Version(_version_text(version)), flag="--release", hint="") if version else None
    if tree is None:
        if wanted is None:
            raise ExportError("name the release to export for (--release) or give a tree (--tree)")
        return wanted, None
    from optkit.tree.inspect import inspect_tree

    info = inspect_tree(Path(tree))
    if wanted is not None and info.version != Version(wanted):
        raise ExportError(f"--tree {tree} is vllm-ascend {info.version} ({info.version_source}), not --release {wanted}; "
                          "drop --release or give a tree of that release")
    return str(info.version), info.root


def _version_text(text: str) -> str:
    try:
        return str(Version(text))
    except ValueError:
        raise ExportError(f"--release {text!r} is not a release version (e.g. 0.30.0rc2)") from None


def _recipes(catalog, recipe_ids: list[str], view) -> tuple[list, dict]:
    if not recipe_ids:
        raise ExportError("name at least one recipe to export")
    recipes, verdicts = [], {}
    for rid in dict.fromkeys(recipe_ids):
        if rid not in catalog:
            raise UnknownName("recipe", rid, [r.id for r in catalog])
        recipe = catalog[rid]
        if not recipe.patches:
            raise ExportError(f"{rid} has no source patch: there is no code to send upstream (its knobs are set "
                              "by the plan's launch bundle)")
        found = verdict(recipe, view)
        if found.status == "upstream":
            raise ExportError(f"{rid} is already upstream: {found.reason}; nothing to export")
        if found.status != "ok" or not found.patches:
            raise ExportError(f"{rid} has no patch for {view.label} ({found.status}: {found.reason}); "
                              f"port one first (optkit port {rid} --to {view.version}) or export to a release it has one for")
        pending = [p.file for p in recipe.patches if p.file in found.patches and p.status != "present"]
        if pending:
            raise ExportError(f"{rid}: {', '.join(pending)} is not written yet (status pending); nothing to export")
        recipes.append(recipe)
        verdicts[rid] = found
    return recipes, verdicts


def _fresh_dir(out: Path) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"-o {out} exists and is not empty: give a new or empty directory (the export writes a whole "
                          "git repository there)")
    out.mkdir(parents=True, exist_ok=True)
    return out.resolve()


def _date(patch: Path) -> str:
    """The patch's DEP-3 Last-Update as a git date (midnight UTC), or a fixed date without one."""
    day = parse_dep3(patch.read_text(encoding="utf-8", errors="replace")).get("Last-Update", "").strip()
    return f"{day}T00:00:00+0000" if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) else "2000-01-01T00:00:00+0000"


def _env(identity: Identity, date: str) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": identity.name, "GIT_AUTHOR_EMAIL": identity.email, "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": identity.name, "GIT_COMMITTER_EMAIL": identity.email, "GIT_COMMITTER_DATE": date}


def _run(out: Path, *args: str, stdin: bytes | None = None, env: dict | None = None) -> str:
    proc = git(out, *args, stdin=stdin, env=env)
    if proc.returncode:
        raise ExportError(f"`git {' '.join(args)}` failed in {out}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode(errors="replace")


def _base(out: Path, version: str, tree: Path | None, identity: Identity, date: str) -> str:
    """Make the base commit in ``out``; the words for where it came from."""
    if tree is not None and (Path(tree) / ".git").exists():
        _run(out.parent, "clone", "--quiet", "--no-hardlinks", str(Path(tree).resolve()), str(out))
        _run(out, "checkout", "--quiet", "-b", f"export-{version}")
        words = f"the clone {tree} at {_head(out)[:12]}"
    else:
        if tree is None:
            from optkit.tree.fetch import fetch

            tree, words = fetch(version).path, f"the pristine vllm-ascend {version} tree (its PyPI sdist)"
        else:
            words = f"the tree {tree}"
        shutil.copytree(tree, out, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".optkit"))
        _run(out, "init", "--quiet", "--initial-branch", "main")
        _run(out, "add", "-A")
        _run(out, "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "-m", f"vllm-ascend {version}", env=_env(identity, date))
    with (out / ".git" / "info" / "exclude").open("a", encoding="utf-8") as excluded:
        excluded.write("".join(f"{p}\n" for p in EXCLUDED))
    return words


def _head(out: Path) -> str:
    return _run(out, "rev-parse", "HEAD").strip()


def patch_message(catalog, recipe, patch: str, series: tuple[str, ...], signoff: str | None) -> str:
    """The commit message of ``patch`` (one of ``recipe``'s patch set ``series``): its patch entry's
    description rewritten for upstream, the DEP-3 header's ``Bug``; ``signoff``: ``Name <mail>`` or
    None. Refused when the rewrite leaves optkit-only words."""
    path = catalog.patch_path(recipe.id, patch)
    titles = {r.id: r.title for r in catalog}
    header = parse_dep3(path.read_text(encoding="utf-8", errors="replace"))
    entry = next(p for p in recipe.patches if p.file == patch)
    number = f" ({series.index(patch) + 1}/{len(series)})" if len(series) > 1 else ""
    subject = f"{recipe.title}{number}"  # the [Class] prefix is the PR title's (PR.md): `git am` strips it
    message = commit_message(subject, entry.description, article_line(recipe.provenance), header.get("Bug", ""),
                             signoff, titles)
    leftover = optkit_words(message, titles)
    if leftover:
        raise ExportError(f"{path}: the commit message would still say {', '.join(leftover)} after the rewrite for "
                          "upstream; reword the patch's Description")
    return message


def _commit(catalog, recipe, patch: str, out: Path, message: str, identity: Identity, date: str) -> Commit:
    data = catalog.patch_path(recipe.id, patch).read_bytes()
    why = git_apply(out, data)
    if why is not None:
        raise PatchError(f"{recipe.id}/{patch} does not apply to the export's base ({out}):\n{why}")
    tests = _add_upstream_files(catalog, out, recipe.id, patch)
    _run(out, "add", "-A")
    _run(out, "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "-F", "-", stdin=message.encode("utf-8"), env=_env(identity, date))
    return Commit(recipe.id, patch, _head(out), message, tests)


def upstream_files(catalog, recipe_id: str, patch: str) -> list[tuple[Path, str]]:
    """(file, its tree path) of the upstream test files that go into ``patch``'s commit
    (``recipes/<id>/upstream/<patch file stem>/``), in order."""
    folder = catalog.folders[recipe_id] / UPSTREAM_DIR / Path(patch).stem
    if not folder.is_dir():
        return []
    return [(source, source.relative_to(folder).as_posix())
            for source in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)]


def planned_commits(catalog, scope: Export) -> list[Commit]:
    """The commits an export of ``scope`` makes, without git (no hashes, no sign-off): what
    tests/test_invariants_export.py checks PR.md and the messages against."""
    return [Commit(r.id, p, "", patch_message(catalog, r, p, scope.verdicts[r.id].patches, None),
                   tuple(rel for _, rel in upstream_files(catalog, r.id, p)))
            for r in scope.recipes for p in scope.verdicts[r.id].patches]


def _add_upstream_files(catalog, out: Path, recipe_id: str, patch: str) -> tuple[str, ...]:
    """Copy the patch's upstream files into the tree (refusing to overwrite one of upstream's); their tree paths."""
    added = []
    for source, rel in upstream_files(catalog, recipe_id, patch):
        target = out / rel
        if target.exists():
            raise ExportError(f"{source}: {rel} is already in the tree; the exported test of {recipe_id}/{patch} "
                              "must be a new file")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        added.append(rel)
    return tuple(added)


def _format_patches(out: Path, result: Export) -> None:
    listed = _run(out, "format-patch", "--quiet", "--no-signature", "--output-directory", "patches",
                  f"{result.base_sha}..HEAD")
    files = sorted(p.relative_to(out).as_posix() for p in (out / "patches").glob("*.patch"))
    if len(files) != len(result.commits):
        raise ExportError(f"git format-patch wrote {len(files)} patches for {len(result.commits)} commits: {listed}")
    result.commits = [Commit(c.recipe, c.patch, c.sha, c.message, c.tests, f) for c, f in zip(result.commits, files)]


# --------------------------------------------------------------------------- the exported tests


def check_test_prerequisites(python: str | None = None) -> None:
    """Refuse ``--run-tests`` when the Python that would run the exported tests lacks what they need
    (pytest and torch; numpy comes with torch): a clear error naming what is missing and how to fix
    it, before anything is written, instead of a test run that fails for the wrong reason."""
    import sys

    python = python or sys.executable
    probe = ("import importlib.util as u; "
             "print(' '.join(m for m in ('pytest', 'torch', 'numpy') if u.find_spec(m) is None))")
    try:
        proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120,
                              env=test_env(dict(os.environ)))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ExportError(f"--run-tests: cannot run {python} ({error}); drop --run-tests or run optkit with a Python "
                          "that has pytest and torch") from None
    missing = proc.stdout.split() if proc.returncode == 0 else ["a working interpreter"]
    if missing:
        raise ExportError(f"--run-tests needs {', '.join(missing)} in the Python that runs the exported tests ({python}); "
                          "install them there (pip install pytest torch --index-url https://download.pytorch.org/whl/cpu "
                          "--extra-index-url https://pypi.org/simple) or drop --run-tests (PR.md then gives the command "
                          "without a result)")


def test_command(tests: list[str], python: str = "python") -> list[str]:
    """How the exported tests are run on CPU: pytest from the tree's root, without upstream's
    ``tests/ut/conftest.py`` (it imports vLLM and the package's NPU-side modules; the exported tests
    import only torch, numpy and the module under test, and stub nothing the conftest would)."""
    return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", *tests]


def run_exported_tests(out: Path, base_sha: str, tests: list[str], python: str | None = None) -> list[TestRun]:
    """The exported tests on the base commit (a scratch checkout of it, the tests copied in) and on
    the series' head (``out`` itself, left as it was)."""
    import sys

    python = python or sys.executable
    with tempfile.TemporaryDirectory(prefix="optkit-export-base-") as scratch:
        base = Path(scratch) / "base"
        _run(out, "worktree", "add", "--quiet", "--detach", str(base), base_sha)
        try:
            for rel in tests:
                (base / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(out / rel, base / rel)
            before = _pytest(base, "base", tests, python)
        finally:
            _run(out, "worktree", "remove", "--force", str(base))
            _run(out, "worktree", "prune")
    return [before, _pytest(out, "series", tests, python)]


def test_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment the exported tests run in: this one without what would change pytest itself.
    The plugins installed beside it are not loaded (an exported test needs none, and one that warns
    or fails at start-up would be read as the test's verdict), nor the caller's ``PYTEST_ADDOPTS``,
    ``PYTEST_PLUGINS``, pytest-xdist worker variables or ``PYTHONPATH``."""
    env = {k: v for k, v in environ.items()
           if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_CURRENT_TEST")
           and not k.startswith("PYTEST_XDIST")}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return env


_OUTCOME = r"\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
_SUMMARY = re.compile(rf"^=*\s*((?:{_OUTCOME})(?:, {_OUTCOME})*|no tests ran)(?: in [\d.]+s\b.*)?\s*=*\s*$", re.M)


def summary_line(output: str) -> str:
    """pytest's verdict line in OUTPUT (``2 passed``, ``1 failed, 3 passed``, ``1 error``), its timing
    dropped, wherever it stands: a plugin or an interpreter warning may print after it. The last
    non-empty line when there is none (pytest did not get that far)."""
    found = _SUMMARY.findall(output)
    if found:
        return found[-1]
    return next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")


def _pytest(root: Path, where: str, tests: list[str], python: str) -> TestRun:
    try:
        proc = subprocess.run(test_command(tests, python), cwd=root, capture_output=True, text=True,
                              env=test_env(dict(os.environ)), timeout=TEST_TIMEOUT)
    except subprocess.TimeoutExpired:
        return TestRun(where, -1, f"timed out after {TEST_TIMEOUT}s")
    output = proc.stdout + proc.stderr
    summary = summary_line(output)
    error = next((m[1] for m in re.finditer(r"^E\s+((?:ModuleNotFound|Import|Attribute)Error: .*)$", output, re.M)), "")
    return TestRun(where, proc.returncode, f"{summary}: {error}" if error and proc.returncode else summary, output)
