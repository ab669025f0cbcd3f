"""Apply a bundle's patches to a vllm-ascend tree: checked first, journaled, reversible.

``apply`` runs every check first (``optkit.tree.checks``), then the journaled apply
(``optkit.tree.journal``) under the tree lock (``optkit.tree.lock``); ``revert`` puts the
pristine bytes back; ``status`` reads what optkit has done to a tree and never writes. Nothing
is written before every check passed; an interrupted apply is rolled back by the next command.
"""

from __future__ import annotations

import re
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optkit.errors import PatchError, TreeError
from optkit.tree import checks, journal
from optkit.tree.inspect import inspect_tree, tree_checksum
from optkit.tree.journal import Recovery
from optkit.tree.lock import alive, lock_pid, locked
from optkit.tree.patchset import PatchSpec, targets_of
from optkit.tree.safety import HOME, state_home

if TYPE_CHECKING:
    from optkit.tree.schema import TreeState

Outcome = Literal["applied", "already present", "would apply", "already applied"]

APPLY_SH_RECORD = "apply-sh.done"
"""What a bundle's apply.sh keeps in ``.optkit/``: the names of the patches it applied, one a line
(it writes no state.json: bash has no journal, and it records no checksums)."""


@dataclass(frozen=True)
class PatchOutcome:
    """What happened to one patch."""

    recipe: str
    name: str
    outcome: Outcome


@dataclass(frozen=True)
class Drift:
    """A file that changed since optkit applied its patches."""

    path: str
    expected: str | None
    """sha256 recorded after the apply (None: the patches deleted it)."""
    actual: str | None
    """sha256 now (None: the file is gone)."""


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply`` did, or with ``dry_run`` would do."""

    root: Path
    version: str
    outcomes: list[PatchOutcome]
    dry_run: bool = False
    already_applied: bool = False
    """The tree already had exactly these patches, unchanged: nothing was done."""
    recovered: Recovery | None = None
    notes: list[str] = field(default_factory=list)
    check_seconds: float = 0.0
    apply_seconds: float = 0.0


@dataclass(frozen=True)
class RevertResult:
    """What ``revert`` did."""

    root: Path
    reverted: list[PatchOutcome]
    """The patches recorded by the apply that was undone (empty: nothing was applied)."""
    restored: list[str]
    """Files put back to their pristine bytes (rewritten or deleted)."""
    overwritten: list[Drift] = field(default_factory=list)
    """Files changed since the apply whose changes ``force`` discarded."""
    recovered: Recovery | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Interrupted:
    """An apply that has not finished: still running, or killed (then it must be rolled back)."""

    done: list[str]
    pending: list[str]
    pid: int | None
    running: bool


@dataclass(frozen=True)
class TreeStatus:
    """A tree as optkit sees it: version, applied patches, drift, an unfinished apply."""

    root: Path
    version: str
    is_git: bool
    patches: list[PatchOutcome]
    files: list[str]
    """Files changed by the applied patches."""
    drift: list[Drift]
    interrupted: Interrupted | None
    lock_pid: int | None
    applied_by: str = ""
    """Who applied ``patches``: 'optkit apply', 'apply.sh' (no checksums: no ``files``, no drift) or ''."""


def apply(tree: Path, patches: list[PatchSpec], *, force: bool = False, dry_run: bool = False) -> ApplyResult:
    """Apply ``patches`` (in order) to the vllm-ascend tree ``tree``, all or nothing.

    Refuses, before touching anything, a tree whose version is outside any patch's range
    (``TreeError`` listing every such recipe), unsafe paths, uncommitted changes of the targets
    in a git checkout (unless ``force``) and patches that do not apply, alone or together
    (``PatchError``). An interrupted earlier apply is rolled back first. Applying the same
    patches again is a no-op. With ``dry_run`` only the checks run and nothing is written.
    """
    started = time.monotonic()
    info = inspect_tree(tree)
    root = info.root
    checks.refuse_cache_tree(root)
    state_home(root)
    checks.check_versions(info, patches)
    checks.check_paths(root, patches)
    checks.check_writable(root, targets_of(patches))
    data = {spec.name: spec.read_verified() for spec in patches}
    with nullcontext([]) if dry_run else locked(root) as notes:
        if dry_run:
            journal.refuse_unfinished(root)
        recovered = None if dry_run else journal.recover(root)
        state = journal.read_state(root)
        _refuse_apply_sh(root, ", then apply again")
        if state is not None:
            outcomes = _already_applied(root, patches, state)
            return ApplyResult(root, str(info.version), outcomes, dry_run, True, recovered, notes)
        if info.is_git and not force:
            checks.check_committed(root, targets_of(patches))
        to_apply, present = checks.classify(root, patches, data)
        checks.check_together(root, to_apply, data)
        checked = time.monotonic()
        if to_apply and not dry_run:
            journal.apply_journaled(root, info, patches, to_apply, data)
        applied = "would apply" if dry_run else "applied"
        outcomes = [PatchOutcome(p.recipe, p.name, "already present" if p in present else applied)
                    for p in patches]
        return ApplyResult(root, str(info.version), outcomes, dry_run, False, recovered, notes,
                           checked - started, time.monotonic() - checked)


def revert(tree: Path, *, force: bool = False) -> RevertResult:
    """Put the tree back to its bytes before ``apply`` and remove ``.optkit/``.

    An interrupted apply is rolled back instead. Files changed since the apply (drift) are
    refused with ``TreeError`` listing them, unless ``force`` (their changes are then lost).
    """
    root = inspect_tree(tree).root
    home = state_home(root)
    with locked(root) as notes:
        recovered = journal.recover(root)
        state = journal.read_state(root)
        if state is None:
            _refuse_apply_sh(root)
            journal.clear(root)
            return RevertResult(root, [], list(recovered.restored) if recovered else [], [], recovered, notes)
        drift = _drift(root, state, pristine_ok=True)  # pristine: a revert killed midway
        if drift and not force:
            raise TreeError(_drift_message(root, drift, "revert would discard these changes",
                                           "pass --force to discard them"))
        before = {rel: f.before for rel, f in state.files.items()}
        restored = journal.restore(root, before, state.new_dirs, [home / "pristine"])
        journal.clear(root)
        return RevertResult(root, _recorded(state), restored, drift, None, notes)


def status(tree: Path) -> TreeStatus:
    """What optkit has done to ``tree``; reads only, never recovers (an apply may be running)."""
    info = inspect_tree(tree)
    root = info.root
    holder = lock_pid(state_home(root) / "lock")
    unfinished = journal.read_journal(root)
    interrupted = None
    if unfinished is not None:
        done, pid = list(unfinished.done), unfinished.pid
        running = pid == holder and alive(pid)
        interrupted = Interrupted(done, [n for n in unfinished.patches if n not in done], pid, running)
    state = journal.read_state(root) if unfinished is None else None
    if state is None:
        by_script = apply_sh_patches(root)
        return TreeStatus(root, str(info.version), info.is_git, by_script, [], [], interrupted, holder,
                          "apply.sh" if by_script else "")
    return TreeStatus(root, str(info.version), info.is_git, _recorded(state), sorted(state.files),
                      _drift(root, state), interrupted, holder, "optkit apply")


def apply_sh_patches(root: Path) -> list[PatchOutcome]:
    """The patches a bundle's apply.sh records as applied (``.optkit/apply-sh.done``), in order; the
    recipe is read from the bundle's patch name, ``NNNN-<recipe>--<file>``."""
    path = root / HOME / APPLY_SH_RECORD
    if not path.is_file():
        return []
    names = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return [PatchOutcome(m.group(1) if (m := re.match(r"\d+-(.+?)--", name)) else "unknown", name, "applied")
            for name in names]


def _refuse_apply_sh(root: Path, then: str = "") -> None:
    """optkit does not undo what apply.sh did (it kept no backup): that is apply.sh --revert's job."""
    applied = apply_sh_patches(root)
    if applied:
        raise TreeError(f"{root} has {len(applied)} patch(es) applied by a bundle's apply.sh (recorded in "
                        f"{HOME}/{APPLY_SH_RECORD}; optkit kept no backup of them): undo them with "
                        f"`BUNDLE/apply.sh --revert {root}`, BUNDLE the bundle that applied them{then}; "
                        "nothing was changed")


def _already_applied(root: Path, patches: list[PatchSpec], state: TreeState) -> list[PatchOutcome]:
    requested = [(p.name, p.sha256) for p in patches]
    recorded = [(p.name, p.sha256) for p in state.patches]
    if requested != recorded:
        recipes = ", ".join(dict.fromkeys(p.recipe for p in state.patches))
        raise PatchError(f"{root} already has other optkit patches applied (recipes {recipes}); "
                         f"run `optkit revert --tree {root}` first, then apply this bundle")
    drift = _drift(root, state)
    if drift:
        raise TreeError(_drift_message(root, drift, "these patches are applied, but files changed since",
                                       "`optkit revert --force` discards the changes"))
    return [PatchOutcome(o.recipe, o.name, "already applied" if o.outcome == "applied" else o.outcome)
            for o in _recorded(state)]


def _drift(root: Path, state: TreeState, *, pristine_ok: bool = False) -> list[Drift]:
    """Files whose sha256 is not the one recorded after the apply (nor, if ``pristine_ok``, before)."""
    files = state.files
    current = tree_checksum(root, list(files))
    return [Drift(rel, f.after, current.get(rel)) for rel, f in sorted(files.items())
            if current.get(rel) != f.after and not (pristine_ok and current.get(rel) == f.before)]


def _drift_message(root: Path, drift: list[Drift], what: str, fix: str) -> str:
    lines = "\n".join(f"  - {d.path}: expected {d.expected or 'no file'}, found {d.actual or 'no file'}"
                      for d in drift)
    return f"{root}: {what}:\n{lines}\n{fix}"


def _recorded(state: TreeState) -> list[PatchOutcome]:
    return [PatchOutcome(p.recipe, p.name, p.outcome) for p in state.patches]
