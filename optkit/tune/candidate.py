"""A point of the tune's space as a plan: resolved before anything starts, so an invalid one never starts.

``resolve_point(tune, params, workspace)`` turns the knob values into the tune's request with those
fields and ``--set`` values (``optkit.resolve.overrides``), plans it with the same resolver as
``optkit plan`` and returns either a ``Candidate`` (its bundle files and its launch key) or an
``Invalid`` with the resolver's own reason. The space's ``capture-share`` becomes ``capture-up-to``
(⌈share × max-num-seqs⌉; a capture above max-num-seqs is clamped to it: vllm-ascend captures at most
max_num_seqs × (1 + k) rows), and two points that launch the same server share one key and one
measurement (``Candidate.key``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from optkit.errors import OptkitError
from optkit.tune.space import parse_layout

LAUNCH_FILES = ("serve.sh", "env.sh", "build-kernels.sh", "patches/")
"""The bundle files that decide what a trial's server is (README, lock and bench.sh do not)."""


@dataclass
class Candidate:
    params: dict[str, Any]  # the knob values as the space names them
    effective: dict[str, Any]  # after clamping capture-up-to to max-num-seqs
    request: dict[str, Any]  # the request planned (by alias)
    plan: Any
    files: dict[str, bytes]
    key: str  # sha256 of the launch files: equal keys start equal servers
    cards: float  # NPU cards the launch uses (TP × DP ÷ dies per card)

    @property
    def patch_key(self) -> str:
        return _digest({k: v for k, v in self.files.items() if k.startswith("patches/")})

    @property
    def kernel_key(self) -> str:
        """The custom ops it needs: build-kernels.sh (its kernel specs) and the patches that touch csrc/."""
        return _digest({k: v for k, v in self.files.items()
                        if k == "build-kernels.sh" or (k.startswith("patches/") and b"csrc/" in v)})


@dataclass
class Invalid:
    params: dict[str, Any]
    reason: str
    effective: dict[str, Any] = field(default_factory=dict)


def effective_params(params: dict[str, Any]) -> dict[str, Any]:
    """The point as launched: ``capture-up-to`` from ``capture-share`` (⌈share × max-num-seqs⌉), at most max-num-seqs."""
    out = dict(params)
    if "capture-share" in out and "max-num-seqs" in out:
        out["capture-up-to"] = max(1, math.ceil(float(out["capture-share"]) * int(out["max-num-seqs"])))
    if "capture-up-to" in out and "max-num-seqs" in out:
        out["capture-up-to"] = min(int(out["capture-up-to"]), int(out["max-num-seqs"]))
    return out


def point_request(request: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The tune's request (by alias) with the knob values in (``params`` already effective)."""
    out = {k: v for k, v in request.items() if k not in ("set", "set_values")}
    tp, dp = parse_layout(str(params["layout"]))
    out["tp"], out["dp"] = tp, dp
    spec = str(params["speculative"])
    if spec == "off":
        out["mtp"], out["spec_method"], out["num_speculative_tokens"] = False, None, None
    elif spec.startswith("mtp:"):
        out["mtp"], out["spec_method"], out["num_speculative_tokens"] = True, None, int(spec[4:])
    out["flashcomm1"] = params["flashcomm1"] == "on"
    out["prefix_caching"] = params["prefix-caching"] == "on"
    out["set"] = ",".join(f"{name}={int(params[name])}" for name in ("capture-up-to", "max-num-batched-tokens",
                                                                      "max-num-seqs"))
    return {k: v for k, v in out.items() if v is not None}


def resolve_point(request: dict[str, Any], params: dict[str, Any], workspace) -> Candidate | Invalid:
    """Plan the point; an ``OptkitError`` of the request, resolver or fit is the point's reason to be invalid."""
    from optkit.bundle.writer import bundle_files
    from optkit.resolve.plan import plan
    from optkit.resolve.request_record import parse_request

    effective = effective_params(params)
    asked = point_request(request, effective)
    try:
        result = plan(parse_request(asked), workspace)
        files = bundle_files(result, workspace)
    except OptkitError as exc:
        return Invalid(dict(params), " ".join(str(exc).split()), effective)
    except ValueError as exc:  # the request validator's own refusal (pydantic-core)
        return Invalid(dict(params), " ".join(str(exc).split()), effective)
    launch = {k: v for k, v in files.items() if any(k == f or (f.endswith("/") and k.startswith(f)) for f in LAUNCH_FILES)}
    dies = result.target.dies_per_card or 1
    return Candidate(dict(params), effective, asked, result, files, _digest(launch),
                     result.layout.nodes * result.layout.node_devices / dies)


def _digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).hexdigest().encode() + b"\n")
    return h.hexdigest()


def params_text(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


__all__ = ["Candidate", "Invalid", "resolve_point", "point_request", "effective_params", "params_text"]
