"""Verified-on records: measurements from an NPU host, kept as catalog data in ``verified/<name>.yaml``.

``optkit report LADDER --record`` writes one record per ladder run: the host (NPU, driver, CANN,
package versions), the release and tree digest it ran on, model, target and workload, and per
recipe the TPOT change its ladder step made at each concurrency (with the noise estimate, the
verdict and the sha256 of the recipe's patches then), plus the sha256 of every raw ``vllm bench
serve`` result file. A record's file name is the first 16 hex digits of the sha256 of its content
(``record_digest``), so an edited record no longer matches its name. It is written as indented JSON
(which is YAML: the ``.yaml`` files read either way), because JSON parses fast. The schema is
``optkit.catalog.record_schema`` (pydantic, imported to validate a file); what the files hold is
kept frozen in the catalog cache, so a plan reads the records without pydantic.

``load_records`` checks each record against the catalog: a record that fails its schema or its
digest is refused whole; an entry for a recipe the catalog does not have, or whose patches are not
the ones measured (changed since, or a different set), is refused alone. Refusals carry the reason;
nothing refused is used. Accepted entries are what the resolver prefers over the article's numbers
(``optkit.resolve.objective``) and the only way a recipe reaches ``hardware-verified``
(``effective_level``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from optkit.catalog.cache import cached
from optkit.catalog.enums import Verification
from optkit.value import field, valueclass

RECORD_VERSION = 1
RECORDS_DIR = "verified"
NAME_DIGITS = 16
_SCHEMA = ("Record", "RecordHost", "RecordRelease", "RecordWorkload", "RecipeMeasurement", "Verdict", "RecordCapacity",
           "StepCapacity")


def __getattr__(name: str) -> Any:
    """The record schema (``optkit.catalog.record_schema``, pydantic), imported when asked for:
    planning reads frozen records from the catalog cache."""
    if name in _SCHEMA:
        from optkit.catalog import record_schema

        return getattr(record_schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record_digest(record) -> str:
    """sha256 of the record's canonical JSON (a validated ``Record`` or its frozen form): its name
    is the first NAME_DIGITS hex digits."""
    text = json.dumps(_dump(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


OPTIONAL_KEYS = ("capacity",)
"""Record keys added after version 1's first form: left out of the content when empty, so the
digest (and name) of a record written before them does not change."""
OPTIONAL_ENTRY_KEYS = ("capacity_delta", "capacity_verdict")


def _dump(record) -> dict:
    data = record.model_dump(mode="json") if hasattr(record, "model_dump") else record.dump(mode="json")
    for key in OPTIONAL_KEYS:
        if data.get(key) is None:
            data.pop(key, None)
    for entry in data.get("recipes", {}).values():
        for key in OPTIONAL_ENTRY_KEYS:
            if entry.get(key) is None:
                entry.pop(key, None)
    return data


def record_file(record) -> tuple[str, str]:
    """The file name (``<digest>.yaml``) and text of a record: indented JSON, which is YAML too and
    parses fast (see ``_read_fast``); the digest in the name covers the content, so do not edit it."""
    text = json.dumps(_dump(record), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return f"{record_digest(record)[:NAME_DIGITS]}.yaml", text


@valueclass(frozen=True)
class Entry:
    """An accepted measurement of one recipe, with the record it comes from."""

    name: str
    record: Any  # a frozen record_schema.Record
    measurement: Any  # its frozen RecipeMeasurement of the recipe

    @property
    def label(self) -> str:
        """Where it was measured, in words: ``measured on 910C (CANN 9.0.1), vllm-ascend 0.23.0, record …``."""
        host = self.record.host
        details = ", ".join(x for x in (f"driver {host.driver}" if host.driver else "",
                                        f"CANN {host.cann}" if host.cann else "") if x)
        return (f"measured on {host.npu}" + (f" ({details})" if details else "")
                + f", vllm-ascend {self.record.release.vllm_ascend}, record {self.name}")


@valueclass(frozen=True)
class Refusal:
    """A record (``recipe`` None) or one of its entries that is not used, and why."""

    file: str
    recipe: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: " + (f"recipes.{self.recipe}: " if self.recipe else "") + self.reason


@valueclass
class Records:
    """The accepted entries by recipe id (sorted by record name) and every refusal."""

    entries: dict[str, list[Entry]] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)

    def of(self, recipe_id: str) -> list[Entry]:
        return self.entries.get(recipe_id, [])


def load_records(root: Path, catalog) -> Records:
    """Every ``verified/*.yaml`` under ``root``, then under each folder layered over it (``catalog.extra``:
    ``--catalog DIR`` / ``$OPTKIT_CATALOG_PATH``, in their order), checked against ``catalog`` (see the
    module docstring). A user's measurements live in their own folder, never in the installed package.

    What the files hold (each record validated and frozen, or the reason it is refused) is kept in
    the catalog cache, one entry per folder keyed by its content; the checks against the catalog run every time.
    """
    records = Records()
    hashes: dict[str, dict[str, str]] = {}  # each recipe's patches are hashed once, however many records
    for folder, shown, entry in record_folders(root, catalog):
        if not (folder.is_dir() and any(folder.glob("*.yaml"))):
            continue
        for name, record, why in cached(entry, folder, lambda: _read_all(folder)):
            display = f"{shown}/{name}.yaml"
            if record is None:
                records.refused.append(Refusal(display, None, why))
                continue
            for rid, measurement in sorted(record.recipes.items()):
                why = entry_problem(catalog, rid, measurement, hashes)
                if why:
                    records.refused.append(Refusal(display, rid, why))
                else:
                    records.entries.setdefault(rid, []).append(Entry(name, record, measurement))
    return records


def record_folders(root: Path, catalog) -> list[tuple[Path, str, str]]:
    """(folder, its name in messages, its catalog cache entry) of the shipped ``verified/`` and of each
    layered folder's, in the order their records count."""
    folders = [(Path(root) / RECORDS_DIR, RECORDS_DIR, RECORDS_DIR)]
    for extra in getattr(catalog, "extra", ()):
        where = hashlib.sha256(str(Path(extra).resolve()).encode(errors="surrogateescape")).hexdigest()[:16]
        folders.append((Path(extra) / RECORDS_DIR, f"{extra}/{RECORDS_DIR}", f"{RECORDS_DIR}-{where}"))
    return folders


def _read_all(folder: Path) -> list[tuple[str, Any, str]]:
    """(name, the record frozen or None, why not) of every record file in ``folder``."""
    from optkit.catalog.frozen import freeze

    found = []
    for path in sorted(folder.glob("*.yaml")):
        record, why = _read(path, f"{RECORDS_DIR}/{path.name}")
        found.append((path.stem, None if record is None else freeze(record, {}), why))
    return found


def _read(path: Path, display: str) -> tuple[Any, str]:
    record = _read_fast(path)
    return (record, "") if record is not None else _read_located(path, display)


def _read_fast(path: Path):
    """A record as ``record_file`` writes it: JSON (which YAML reads too), parsed ~40× faster than
    YAML so that records cost planning little; None when it is anything else, or invalid."""
    from pydantic import ValidationError

    from optkit.catalog.record_schema import Record

    try:
        record = Record.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError):
        return None
    return record if path.stem == record_digest(record)[:NAME_DIGITS] else None


def _read_located(path: Path, display: str) -> tuple[Any, str]:
    """Any other record, as YAML with line numbers: the refusal says where and why."""
    from optkit.catalog.loader import parse_model
    from optkit.catalog.record_schema import Record
    from optkit.catalog.yamlio import load_yaml
    from optkit.errors import ValidationFailed

    try:
        data, lines = load_yaml(path, display)
        record = parse_model(Record, data, lines)
    except ValidationFailed as exc:
        return None, "not a valid record: " + "; ".join(
            (f"line {p.location.line}: " if p.location.line else "") + (f"{p.location.path}: " if p.location.path else "")
            + p.message for p in exc.problems)
    digest = record_digest(record)
    if path.stem != digest[:NAME_DIGITS]:
        return None, (f"its content has digest {digest[:NAME_DIGITS]}, not the {path.stem} of its name: it was "
                      "edited after it was written; record the ladder again (`optkit report LADDER --record`) "
                      "or delete it")
    return record, ""


def entry_problem(catalog, recipe_id: str, measurement, cache: dict | None = None) -> str:
    """Why a measurement of ``recipe_id`` does not describe the catalog's recipe (empty: it does);
    ``cache`` keeps the recipes' patch hashes between calls."""
    from optkit.errors import did_you_mean

    if recipe_id not in catalog:
        hint = did_you_mean(recipe_id, catalog.recipes)
        return f"unknown recipe {recipe_id!r}" + (f" ({hint})" if hint else "")
    cache = {} if cache is None else cache
    now = cache.get(recipe_id) or cache.setdefault(recipe_id, patch_hashes(catalog, recipe_id))
    if now == measurement.patches:
        return ""
    changed = sorted(f for f in set(now) & set(measurement.patches) if now[f] != measurement.patches[f])
    if changed:
        return (f"patch {changed[0]} has sha256 {now[changed[0]][:12]}… in the catalog but "
                f"{measurement.patches[changed[0]][:12]}… when measured: the recipe changed since, so the "
                "measurement is not of it; measure it again")
    return (f"the recipe's patches are {sorted(now) or 'none'} but the measurement was of "
            f"{sorted(measurement.patches) or 'none'}; measure it again")


def patch_hashes(catalog, recipe_id: str) -> dict[str, str]:
    """The written patch files of a recipe and their sha256."""
    return {p.file: hashlib.sha256(catalog.patch_path(recipe_id, p.file).read_bytes()).hexdigest()
            for p in catalog[recipe_id].patches if p.status == "present"}


def effective_level(recipe, records: Records | None) -> Verification:
    """The recipe's verification level: hardware-verified when an accepted record measured it."""
    if records is not None and records.of(recipe.id):
        return Verification.hardware_verified
    return recipe.verification.level


__all__ = ["Records", "Entry", "Refusal", "load_records", "record_folders", "record_digest", "record_file", "effective_level",
           "entry_problem", "patch_hashes", "RECORDS_DIR", "NAME_DIGITS"]
