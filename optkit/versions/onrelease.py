"""A recipe on one release: its upstream status there, its patch set, and each knob it sets.

``release_view`` gives the release a plan is made for: a known release's data
(``versions/<version>.yaml``), or — with ``--tree DIR`` — the tree itself, scanned on the spot and
probed (probes beat the version number). ``verdict`` then says, for one recipe:

- the release entry that applies (by probe on a tree, else by version) and what it means:
  ``upstream`` (present, nothing to apply), ``superseded`` / ``broken`` / ``absent`` (left out,
  with the entry's words), ``no-patch`` (still new there, but no patch set was written for it);
  a ``partly-upstream`` entry's words become a note of the recipe's decision;
- every knob the recipe sets: present (emitted), renamed or moved (emitted in its new form, said
  in the plan), added by the recipe's own patch set, or missing — removed (with the release that
  removed it), rejected at start-up by a strict release, or silently ignored by a lenient one.
  A recipe with a missing knob is left out (``knob-missing``): a plan never emits a knob its
  release would reject or ignore.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from optkit.value import field, valueclass
from optkit.versions.releases import known_versions, load_moves, load_release

if TYPE_CHECKING:  # the run-time holds their records (optkit.catalog.frozen)
    from optkit.catalog.schema import Recipe, ReleaseRange
    from optkit.versions.probes import RecipeOnTree  # probes are read on a tree only
    from optkit.versions.schema import ConfigSection, KnobMove, Knobs, ReleaseData

LEFT_OUT = ("superseded", "broken", "absent")


@valueclass
class ReleaseView:
    """The release a plan is for: its data, and (for a tree) where it came from and its probes."""

    data: ReleaseData
    tree: Path | None = None
    probes: dict[str, RecipeOnTree] = field(default_factory=dict)
    shown: str | None = None
    """The tree as the request gives it (what the plan's words name: no machine path the user did not write)."""
    applied: dict[str, list[str]] = field(default_factory=dict)
    """For a tree optkit patched: recipe → its patches applied there (``.optkit/state.json``); the probes
    and knobs above are read on the tree without them (``optkit.tree.journal.pristine_base``)."""

    @property
    def version(self) -> Version:
        return Version(self.data.version)

    @property
    def label(self) -> str:
        shown = self.shown or self.tree
        return f"the tree {shown} (vllm-ascend {self.version})" if self.tree else f"vllm-ascend {self.version}"


def release_view(version: str | Version, tree: Path | None = None, catalog=None, shown: str | None = None) -> ReleaseView:
    """The release of a plan: the data of ``version``, or the tree ``tree`` read and probed (``shown``: the
    tree as the request names it, where it differs from where it is now)."""
    if tree is None:
        return ReleaseView(load_release(version))
    from optkit.catalog.frozen import freeze
    from optkit.tree.inspect import inspect_tree
    from optkit.tree.journal import applied_recipes, pristine_base
    from optkit.versions.scan import scan_tree
    from optkit.versions.schema import RECORDS, ReleaseData

    root = inspect_tree(Path(tree)).root
    with pristine_base(root) as base:  # optkit's own patches on the tree are judged as its recipes, not upstream
        data = freeze(ReleaseData.model_validate(scan_tree(base)), RECORDS)
        view = ReleaseView(data, root, shown=shown or str(tree), applied=applied_recipes(root))
        if catalog is not None:
            from optkit.versions.probes import recipe_on_tree

            view.probes = {r.id: recipe_on_tree(r, base, view.version, patch_dir=catalog.folders.get(r.id))
                           for r in catalog if r.releases}
    return view


# --------------------------------------------------------------------------- knobs


@valueclass(frozen=True)
class KnobVerdict:
    """One knob a recipe sets, on one release."""

    knob: str
    """As the recipe names it: ``env:NAME`` or ``additional_config:a.b``."""
    state: str
    """present, added-by-patch, renamed, moved, removed, rejected or ignored."""
    emitted: str | None
    """The knob the plan emits (None: not emitted)."""
    convert: str = "same"
    note: str = ""

    @property
    def missing(self) -> bool:
        return self.emitted is None


def config_state(section: ConfigSection, path: list[str]) -> tuple[bool, str]:
    """(known, the unknown_keys policy of the deepest level reached) for a key path."""
    for depth, key in enumerate(path):
        value = section.keys.get(key)
        if value is None:
            return False, section.unknown_keys
        if isinstance(value, str) or depth == len(path) - 1:
            return True, section.unknown_keys  # a plain key holds its whole value
        section = value
    return True, section.unknown_keys


def has_knob(knobs: Knobs, knob: str) -> bool:
    kind, name = knob.split(":", 1)
    if kind == "env":
        return name in knobs.env or name in knobs.env_read
    return config_state(knobs.additional_config, name.split("."))[0]


def _history(knob: str, before: Version) -> tuple[Version | None, Version | None]:
    """(the last release before ``before`` that had the knob, the first release after it)."""
    earlier = [v for v in known_versions() if v < before]
    had = [v for v in earlier if has_knob(load_release(v).knobs, knob)]
    if not had:
        return None, None
    last = had[-1]
    after = next(v for v in known_versions() if v > last)
    return last, after


def knob_verdict(knob: str, view: ReleaseView, adds: list[str], moves: list[KnobMove]) -> KnobVerdict:
    knobs = view.data.knobs
    if has_knob(knobs, knob):
        return KnobVerdict(knob, "present", knob)
    if knob in adds:
        return KnobVerdict(knob, "added-by-patch", knob, note=f"{knob.split(':', 1)[1]} is added by the recipe's patch")
    move = next((m for m in moves if m.old == knob and view.version >= Version(m.since)), None)
    if move is not None and has_knob(knobs, move.new):
        state = "moved" if move.old.split(":")[0] != move.new.split(":")[0] else "renamed"
        words = f"{_words(move.old)} is {'replaced by' if state == 'moved' else 'renamed to'} {_words(move.new)} from {move.since}"
        return KnobVerdict(knob, state, move.new, move.value, words + (f"; {move.note}" if move.note else ""))
    return _missing(knob, view)


def _missing(knob: str, view: ReleaseView) -> KnobVerdict:
    kind, name = knob.split(":", 1)
    last, removed_in = _history(knob, view.version)
    gone = (f"removed in {removed_in} (last in {last})" if last else "unknown to every known release before it")
    if kind == "env":
        return KnobVerdict(knob, "removed" if last else "ignored", None,
                           note=f"{_words(knob)} is not read by {view.label}: {gone}; exporting it would do nothing")
    _, policy = config_state(view.data.knobs.additional_config, name.split("."))
    if policy == "rejected":
        return KnobVerdict(knob, "rejected", None, note=(
            f"{_words(knob)} is not a key of {view.label} ({gone}), which rejects unknown keys: "
            "the server would stop at start-up"))
    return KnobVerdict(knob, "removed" if last else "ignored", None, note=(
        f"{_words(knob)} is not read by {view.label} ({gone}), which ignores unknown keys: setting it would do nothing"))


def _words(knob: str) -> str:
    kind, name = knob.split(":", 1)
    return f"env var {name}" if kind == "env" else f"additional_config key {name}"


def recipe_knobs(recipe: Recipe) -> list[str]:
    """Every vllm-ascend knob the recipe sets (not CANN/HCCL/PyTorch ones, not build-time ones)."""
    out = [f"env:{e.name}" for e in recipe.env if not e.external and not e.build_time]
    return out + [f"additional_config:{p}" for p in _leaf_paths(recipe.additional_config)]


def _leaf_paths(fragment: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in fragment.items():
        path = f"{prefix}{key}"
        out += _leaf_paths(value, path + ".") if isinstance(value, dict) and value else [path]
    return out


# --------------------------------------------------------------------------- verdicts


@valueclass(frozen=True)
class Verdict:
    """Where a recipe stands on one release, before the request's facts are looked at."""

    status: str
    """ok, upstream, superseded, broken, absent, no-patch, knob-missing or undeclared."""
    reason: str = ""
    patches: tuple[str, ...] = ()
    """The patch files for this release (status ok), pending ones included."""
    patch_versions: str = ""
    """The releases those patches were written for."""
    knobs: tuple[KnobVerdict, ...] = ()
    notes: tuple[str, ...] = ()
    entry: ReleaseRange | None = None


def verdict(recipe: Recipe, view: ReleaseView, moves: list[KnobMove] | None = None) -> Verdict:
    """The recipe on the release ``view`` (see the module docstring)."""
    moves = load_moves() if moves is None else moves
    entry, notes = _entry(recipe, view)
    early = _by_entry(recipe, entry, view.version, view.label, notes)
    if early is not None:
        return early
    adds = list(entry.adds) if entry else []
    knobs = tuple(knob_verdict(k, view, adds, moves) for k in recipe_knobs(recipe))
    missing = [k for k in knobs if k.missing]
    if missing:
        return Verdict("knob-missing", "; ".join(k.note for k in missing), knobs=knobs, entry=entry, notes=tuple(notes))
    notes += [k.note for k in knobs if k.state in ("renamed", "moved")]
    if entry is not None and entry.note:
        notes.append(f"{view.label}: {entry.note}")
    elif entry is not None and entry.status == "partly-upstream":
        notes.append(f"partly upstream in {view.label}: {entry.msg}")
    patches, _ = _patch_set(recipe, entry)
    return Verdict("ok", "", tuple(patches), entry.versions if entry else recipe.versions.vllm_ascend, knobs,
                   tuple(notes), entry)


def _by_entry(recipe: Recipe, entry: ReleaseRange | None, version: Version, label: str,
              notes: list[str]) -> Verdict | None:
    """The verdict the release entry alone decides (upstream, left out, no patch), else None."""
    if recipe.releases and entry is None:
        return Verdict("undeclared", f"no release entry of this recipe covers {version}", notes=tuple(notes))
    if entry is not None and entry.status == "upstream":
        knob = f" (needs {entry.knob})" if entry.knob else ""
        return Verdict("upstream", f"{label}: {entry.msg}{knob}", entry=entry, notes=tuple(notes))
    if entry is not None and entry.status in LEFT_OUT:
        return Verdict(entry.status, f"{label}: {entry.msg}", entry=entry, notes=tuple(notes))
    patches, written_for = _patch_set(recipe, entry)
    if recipe.patches and not patches:
        return Verdict("no-patch", f"no patch for {version} (written for {written_for})"
                       + (f"; {entry.msg}" if entry else ""), entry=entry, notes=tuple(notes))
    return None


def _entry(recipe: Recipe, view: ReleaseView) -> tuple[ReleaseRange | None, list[str]]:
    """The entry for this release: the probed one on a tree (saying so when it is not the one its
    version declares), else the declared one."""
    probed = view.probes.get(recipe.id)
    if probed is None:
        return recipe.release_entry(view.version), []
    if probed.entry is None:
        return probed.declared, [f"no probe of this recipe holds on {view.shown or view.tree}; using the entry for {view.version}"]
    if probed.declared is not None and probed.entry is not probed.declared:
        return probed.entry, [f"probes on {view.tree} show '{probed.entry.status}' ({probed.entry.versions}), "
                              f"not '{probed.declared.status}' as declared for {view.version}"]
    return probed.entry, []


def _patch_set(recipe: Recipe, entry: ReleaseRange | None) -> tuple[list[str], str]:
    """The patch files for the entry (written or still pending), and the release ranges patches
    were written for."""
    written = [e.versions for e in recipe.releases if e.patches]
    words = ", ".join(_range_words(w) for w in written) or recipe.versions.vllm_ascend
    if not recipe.releases:
        return [p.file for p in recipe.patches], words
    return list(entry.patches) if entry else [], words


def _range_words(spec: str) -> str:
    """``>=0.23.0,<0.24`` → ``0.23.x``; anything else as written."""
    parts = sorted("".join(part.split()) for part in spec.split(",") if part.strip())  # as SpecifierSet writes them
    if len(parts) == 2 and parts[0].startswith("<") and parts[1].startswith(">="):
        upper, lower = Version(parts[0][1:]), Version(parts[1][2:])
        if upper.release[:2] == (lower.major, lower.minor + 1) and len(upper.release) == 2:
            return f"{lower.major}.{lower.minor}.x"
    return spec


def declared_verdicts(catalog, version: Version) -> dict[str, Verdict]:
    """Verdicts by version alone (knobs not checked: no release data needed), e.g. for a catalog
    made up in a test."""
    out = {}
    for recipe in catalog:
        entry = recipe.release_entry(version)
        early = _by_entry(recipe, entry, version, f"vllm-ascend {version}", [])
        patches, _ = _patch_set(recipe, entry)
        out[recipe.id] = early or Verdict("ok", "", tuple(patches), entry.versions if entry else recipe.versions.vllm_ascend,
                                          entry=entry)
    return out
