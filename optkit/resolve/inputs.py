"""A plan's inputs beyond the shipped data, held by content digest: what a lock records of them so that
``plan --from-lock`` gives the same bundle byte for byte from any directory, and what it refuses.

- ``--model-config``: the config.json's text and its sha256. A replay plans from the lock's text.
- ``--profile DIR``: the sha256 of each file of the capture, the concurrency it was taken at, and the
  savings per decode step the plan counted from it (all the resolver reads of a capture). A replay
  plans from those numbers.
- ``--tree``: the tree's pristine digest (``optkit.tree.digest``: its sources without optkit's patches)
  and version. A tree cannot be held in a lock: a replay needs it, at its path or where ``--tree``
  says it is now, and refuses another tree.

An input found at its path (from the current directory) with other content than the lock's is refused
(``InputChanged``: which input, what changed, what to do); one not found is replayed from the lock
(the tree excepted). The ``--catalog`` folders are held by ``optkit.bundle.lock`` (``layered_sha256``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from optkit.errors import InputChanged
from optkit.value import valueclass

FIX = "restore it, or plan again without --from-lock (the bundle would differ)"
SHOWN_CHANGES = 5


@valueclass
class Replay:
    """What a lock supplies to the plan it replays (``Workspace.replay``): the inputs it holds."""

    model_config: dict | None = None
    """The lock's ``inputs.model_config`` record, checked (None: the request has none)."""
    profile: dict | None = None
    """The lock's ``inputs.profile`` record (None: planned without --profile)."""
    tree_at: Path | None = None
    """Where the request's --tree is now (None: the request has none)."""
    catalogs: dict[str, str] | None = None
    """Each ``--catalog`` folder where it is now → as the lock names it (None: where the lock names them)."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def config_file(given: str) -> Path:
    """The config.json ``--model-config`` names: the file, or the checkpoint folder's config.json."""
    path = Path(given)
    return path / "config.json" if path.is_dir() else path


def model_config_record(given: str) -> dict[str, Any]:
    """The lock's record of a --model-config: as given, the file read (a folder's config.json), its text
    and sha256."""
    from optkit.catalog.textfile import read_text

    path = config_file(given)
    text = read_text(path)  # as the plan read it (optkit.resolve.hf_config)
    return {"path": given, "file": path.as_posix(), "sha256": sha256_text(text), "text": text}


def capture_files(directory: Path) -> dict[str, str]:
    """sha256 of every file of a capture, by POSIX path inside it, sorted."""
    root = Path(directory)
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def profile_record(directory: Path, given: str, concurrency: int, table: dict) -> dict[str, Any]:
    """The lock's record of a --profile: as given, its files' sha256, the concurrency it counts at, and per
    recipe the saving per decode step and its basis (``optkit.resolve.profiled.ProfileSaving``)."""
    return {"path": given, "concurrency": concurrency, "files": capture_files(directory),
            "savings": {rid: {"saving_us": s.saving_us, "basis": s.basis} for rid, s in sorted(table.items())}}


def profile_table(record: dict) -> dict:
    """The savings a lock's profile record holds, as the resolver reads them (``profile_lookup``)."""
    from optkit.resolve.profiled import ProfileSaving

    return {rid: ProfileSaving(rid, entry["saving_us"], [], [], entry["basis"]) for rid, entry in record["savings"].items()}


def tree_record(given: str, located: Path) -> dict[str, Any]:
    """The lock's record of a --tree: as given, its version and pristine digest (the same with or without
    optkit's patches applied, which the plan judges without them)."""
    from optkit.tree.digest import pristine_digest

    found = pristine_digest(located)
    return {"path": given, "version": found.version, "pristine_sha256": found.digest}


def input_records(request, replay: Replay | None, profile: dict | None) -> dict[str, Any]:
    """The ``inputs`` section of a lock for a plan of ``request`` (as given); ``profile``: the plan's record."""
    replay = replay or Replay()
    inputs: dict[str, Any] = {}
    if request.model_config_path:
        inputs["model_config"] = replay.model_config or model_config_record(request.model_config_path)
    if profile is not None:
        inputs["profile"] = profile
    if request.tree:
        inputs["tree"] = tree_record(request.tree, replay.tree_at or Path(request.tree))
    return inputs


def replay_inputs(inputs: dict[str, Any], request, tree_at: Path | None = None,
                  catalogs: dict[str, str] | None = None) -> Replay:
    """The lock's ``inputs`` checked against what is found from here, as a ``Replay``; raises
    ``InputChanged`` for an input whose content is not the lock's. ``tree_at``: where ``--tree`` is now;
    ``catalogs``: where the lock's ``--catalog`` folders are now (their digests are checked by the lock)."""
    text = _model_config(inputs.get("model_config"), request)
    profile = inputs.get("profile")
    if profile is not None:
        _check_capture(profile)
    located = None
    if request.tree:
        located = _check_tree(inputs.get("tree"), request.tree, tree_at)
    return Replay(text, profile, located, catalogs)


def locate_catalogs(given: list[str], now: list[Path]) -> dict[str, str]:
    """The lock's ``--catalog`` folders (``given``) where they are now: ``now`` (``--catalog`` with
    ``--from-lock``, in the lock's order) or, when none is given, where the lock names them; a folder
    not found is refused naming it (a catalog is held by digest only)."""
    if now and len(now) != len(given):
        raise InputChanged("--catalog", ", ".join(given) or "(none)", f"is what the lock was planned with "
                           f"({len(given)} folder(s)); {len(now)} given with --from-lock",
                           "give --catalog once per folder of the lock, in its order, to say where each is now")
    located = {str(folder): name for folder, name in zip(now, given)} if now else {name: name for name in given}
    for folder, name in located.items():
        if not Path(folder).is_dir():
            raise InputChanged("--catalog", name, "is not found from here (a catalog is held in the lock by its "
                               "digest only)", "give --catalog DIR with --from-lock, once per folder of the lock "
                               "in its order, to say where it is now")
    return located


def _model_config(record: dict | None, request) -> dict | None:
    given = request.model_config_path
    if not given or record is None:
        return None
    if sha256_text(record["text"]) != record["sha256"]:
        raise InputChanged("--model-config", given, "is held in the lock with a text whose sha256 is not the "
                           "lock's (the lock was edited)", "write the bundle again (`optkit plan ... -o DIR`)")
    path = Path(record["file"])
    if not path.is_file():
        return record  # not here: the lock holds it
    from optkit.catalog.textfile import read_text

    now = read_text(path)
    if sha256_text(now) != record["sha256"]:
        raise InputChanged("--model-config", given, f"changed since the lock was written: {_json_changes(record['text'], now)} "
                           f"(sha256 {record['sha256'][:12]}… in the lock, {sha256_text(now)[:12]}… now)", FIX)
    return record


def _json_changes(then: str, now: str) -> str:
    """The keys whose values differ between two JSON texts, ``a.b 4096 → 2048``; else 'its text differs'."""
    try:
        old, new = _flat(json.loads(then)), _flat(json.loads(now))
    except ValueError:
        return "its text differs"
    keys = sorted(k for k in set(old) | set(new) if old.get(k, _GONE) != new.get(k, _GONE))
    shown = [f"{k} {_shown(old.get(k, _GONE))} → {_shown(new.get(k, _GONE))}" for k in keys[:SHOWN_CHANGES]]
    more = f" and {len(keys) - SHOWN_CHANGES} more" if len(keys) > SHOWN_CHANGES else ""
    return ", ".join(shown) + more if shown else "its text differs (the same values)"


_GONE = object()


def _shown(value: Any) -> str:
    return "(absent)" if value is _GONE else json.dumps(value)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        return {k: v for key, value in data.items() for k, v in _flat(value, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): data}


def _check_capture(record: dict) -> None:
    given = record["path"]
    if not Path(given).is_dir():
        return  # not here: the lock holds its numbers
    now, then = capture_files(Path(given)), record["files"]
    changed = [f"{rel} changed" for rel in sorted(set(now) & set(then)) if now[rel] != then[rel]]
    changed += [f"{rel} added" for rel in sorted(set(now) - set(then))]
    changed += [f"{rel} removed" for rel in sorted(set(then) - set(now))]
    if changed:
        more = f" and {len(changed) - SHOWN_CHANGES} more" if len(changed) > SHOWN_CHANGES else ""
        raise InputChanged("--profile", given, f"changed since the lock was written: {'; '.join(changed[:SHOWN_CHANGES])}"
                           f"{more}", FIX)


def _check_tree(record: dict | None, given: str, tree_at: Path | None) -> Path | None:
    if record is None and tree_at is None:
        return None  # a lock from before trees were held: the tree at its path, as then
    located = Path(tree_at) if tree_at is not None else Path(given)
    if not located.is_dir():
        raise InputChanged("--tree", given, "is not found from here (a tree cannot be held in a lock)",
                           f"give --tree DIR with --from-lock to say where it is now (run `optkit tree fetch "
                           f"{record['version'] if record else 'VERSION'} DIR` for a fresh copy)")
    if record is None:
        return located
    now = tree_record(given, located)
    if now["pristine_sha256"] != record["pristine_sha256"]:
        where = given if tree_at is None else f"{given} (given as {tree_at})"
        raise InputChanged("--tree", where, f"is another tree than the lock's: vllm-ascend {now['version']}, pristine "
                           f"sha256 {now['pristine_sha256'][:12]}… (the lock's: vllm-ascend {record['version']}, "
                           f"{record['pristine_sha256'][:12]}…)", FIX)
    return located
