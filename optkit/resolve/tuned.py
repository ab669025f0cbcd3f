"""Tune records: the launch ``optkit tune`` measured best for a request, used by later plans of that request.

``optkit report TUNE_DIR --record`` writes ``verified/tunes/<digest>.json`` (in the shipped data, or in a
``--catalog`` folder: a user's measurements live in their own folder). A record names the request it was
measured for (model, target, release, SLO, workload) and the best point's knobs with what it measured
(capacity, output tokens per second per card, the host, the trial). Its file name is the first 16 hex
digits of the sha256 of its canonical JSON, so a record edited by hand no longer matches its name and is
refused (``Refused``: the reason, shown by ``optkit plan`` when it matters).

A plan under the throughput goal with an SLO whose request matches a record (``matching``) uses it over the
rules (``apply``):

- the request's open fields (``--dp auto``, no ``--[no-]flashcomm1``, no ``--[no-]prefix-caching``) take the
  record's values instead of the rules' choices, where the record's TP equals the request's;
- if the plan's layout, speculative decoding, FlashComm1 and prefix caching are then the record's, its
  ``--set`` values (max-num-seqs, max-num-batched-tokens, capture-up-to) are the record's, labelled
  "measured on …"; a request that sets any of them itself keeps its own;
- otherwise the plan keeps its rules and says which launch the record measured best (``Tuned.note``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from optkit.value import valueclass

TUNES_DIR = "verified/tunes"
RECORD_KIND = "optkit-tune-record"
RECORD_VERSION = 1
NAME_DIGITS = 16
WORKLOAD_KEYS = ("input_len", "output_len", "length_mix", "shared_prefix_len", "sampling", "logprobs", "penalties",
                 "min_tokens", "structured_output", "quantization", "dtype", "async_scheduling", "lora",
                 "enforce_eager")
"""The request fields a measurement depends on besides the knobs: a record applies only where they are equal."""
KNOB_SET = ("capture-up-to", "max-num-batched-tokens", "max-num-seqs")


@valueclass
class Tuned:
    """What a tune record did to a plan: ``applied`` (its values are the plan's), the fields it filled, its label,
    and a note when it measured another launch than the plan's."""

    label: str
    applied: bool
    fields: list
    note: str
    file: str


def record_digest(content: dict[str, Any]) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_key(request, model_id: str, target_id: str, release: str) -> dict[str, Any]:
    """What a record must equal to apply to ``request`` (a RequestRecord, filled in)."""
    return {"model": model_id, "target": target_id, "vllm_ascend": str(release), "slo": request.slo,
            "workload": {k: getattr(request, k) for k in WORKLOAD_KEYS}}


def tune_folders(ws) -> list[Path]:
    return [Path(ws.root) / TUNES_DIR] + [Path(folder) / TUNES_DIR for folder in getattr(ws.catalog, "extra", ())]


def load_tunes(ws) -> tuple[list[tuple[Path, dict]], list[tuple[Path, str]]]:
    """Every tune record (path, content) and every refused file (path, reason)."""
    found, refused = [], []
    for folder in tune_folders(ws):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            try:
                content = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                refused.append((path, f"not JSON: {exc}"))
                continue
            if not isinstance(content, dict) or content.get("kind") != RECORD_KIND:
                refused.append((path, f"not a tune record (kind {content.get('kind') if isinstance(content, dict) else None!r})"))
            elif content.get("record_version") != RECORD_VERSION:
                refused.append((path, f"record_version {content.get('record_version')!r}, this optkit reads {RECORD_VERSION}"))
            elif record_digest(content)[:NAME_DIGITS] != path.stem:
                refused.append((path, "its content no longer matches its name (edited by hand?)"))
            elif not all(k in content for k in ("key", "best", "measured")):
                refused.append((path, "key, best or measured missing"))
            else:
                found.append((path, content))
    return found, refused


def matching(ws, request, model_id: str, target_id: str, release: str) -> tuple[Path, dict] | None:
    """The record measured for this request (the best measured objective when several are), else None."""
    if request.objective_goal != "throughput" or not request.slo or request.pd is not None:
        return None
    key = record_key(request, model_id, target_id, release)
    found = [(p, c) for p, c in load_tunes(ws)[0] if c["key"] == key]
    if not found:
        return None
    return max(found, key=lambda pc: (pc[1]["measured"]["objective"], pc[0].name))


def label_of(path: Path, content: dict) -> str:
    m = content["measured"]
    return (f"measured on {m.get('measured_on') or 'the tune host'} by optkit tune (record {path.name}, trial "
            f"{m.get('trial')}): capacity c{m.get('capacity')} under {content['key']['slo']}, "
            f"{float(m.get('objective') or 0):.1f} output tok/s per card")


def point_fields(best: dict[str, Any]) -> dict[str, Any]:
    """A record's point as request fields (tp, dp, mtp / k, flashcomm1, prefix_caching)."""
    tp, _, dp = str(best["layout"]).removeprefix("TP").partition("xDP")
    spec = str(best["speculative"])
    return {"tp": int(tp), "dp": int(dp), "k": int(spec[4:]) if spec.startswith("mtp:") else 0,
            "flashcomm1": best["flashcomm1"] == "on", "prefix_caching": best["prefix-caching"] == "on"}


def apply(given, filled, ws, model_id: str, target_id: str, release: str, refill) -> tuple[Any, Tuned | None]:
    """A matching record's values in the plan's request (module docstring). ``given``: the request as given;
    ``filled``: ``filled_request``'s tuple for it; ``refill(request)``: that tuple for another request. Returns the
    tuple to plan with and what the record did (None: no record applies)."""
    from optkit.resolve.choices import with_values

    request = filled[0]
    if request.set_source:  # --from-tune: the tune's own values already
        return filled, None
    found = matching(ws, request, model_id, target_id, release)
    if found is None:
        return filled, None
    path, content = found
    point, label = point_fields(content["best"]), label_of(path, content)
    opened = {}
    if given.dp == "auto" and point["tp"] == request.tp:
        opened["dp"] = point["dp"]
    if given.flashcomm1 is None:
        opened["flashcomm1"] = point["flashcomm1"]
    if given.prefix_caching is None:
        opened["prefix_caching"] = point["prefix_caching"]
    tried = refill(with_values(given, **opened)) if opened else filled
    r = tried[0]
    spec_same = (r.speculative_method is None and point["k"] == 0) or (r.speculative_method == "mtp" and r.k == point["k"])
    same = (r.tp, r.dp, r.flashcomm1, r.prefix_caching) == (point["tp"], point["dp"], point["flashcomm1"],
                                                           point["prefix_caching"]) and spec_same
    knobs = " ".join(f"{k}={content['best'][k]}" for k in ("layout", "speculative", "flashcomm1", "prefix-caching",
                                                            *KNOB_SET))
    if not same:
        return filled, Tuned(label, False, [], f"optkit tune measured {knobs} best for this request ({label}); this "
                             "plan's layout, speculative decoding, FlashComm1 or prefix caching differ, so it keeps the "
                             "rules: plan the measured launch with those flags, or optkit plan --from-tune", path.name)
    fields = sorted(opened)
    if r.set_values is None:
        values = ",".join(f"{k}={int(content['best'][k])}" for k in KNOB_SET)
        r = with_values(r, set_values=values, set_source=label)
        fields += list(KNOB_SET)
    return (r, *tried[1:]), Tuned(label, True, fields, "", path.name)


__all__ = ["Tuned", "apply", "TUNES_DIR", "RECORD_KIND", "RECORD_VERSION", "record_key", "record_digest", "load_tunes",
           "matching", "label_of", "point_fields"]
