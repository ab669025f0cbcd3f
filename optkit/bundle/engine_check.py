"""The ``engine`` check of ``optkit bundle check``: the launch evaluated as the paired vLLM evaluates it.

The probe session that runs vLLM's parser on every node's (or PD instance's) argv also runs vLLM's
``create_engine_config`` on it, with the model's ``config.json`` and no weights, on vLLM's CPU platform
(``optkit.bundle.engine_probe``): refusals, and the data-parallel load balancing each node resolves,
surface here; across the nodes of a DP group, the leader's handshake rule on headless workers is
applied to those modes. The check says which parts ran and which cannot run without a device.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optkit.bundle.check import Check

FIXTURE_CONFIGS = {"qwen3.5-35b-a3b": "qwen3_5_moe"}
"""Profiles whose config.json fixture (tests/fixtures/hf/) is not named after the profile id and has no ``CATALOG``
file naming it (``internvl3.5-38b/CATALOG``: internvl3_5-38b; models/*.yaml say which file each profile is derived
from)."""


def model_config_for(lock: dict, given: Path | None = None) -> tuple[str | None, str]:
    """(the config.json the engine configuration is built with, where it came from — or why there is
    none): ``given`` (``--model-config``); else the request's own ``model_config`` when that file is
    here; else, in optkit's source checkout, the config.json fixture of the model's profile."""
    from optkit.catalog.paths import checkout_root

    if given is not None:
        return str(given), f"--model-config {given}"
    request = lock.get("request")
    own = request.get("model_config") if isinstance(request, dict) else None
    if isinstance(own, str) and own and Path(own).is_file():
        return str(own), f"the request's model config {own}"
    profile = lock["launch"]["parameters"].get("SERVED_NAME") or ""
    root = checkout_root()
    folder = FIXTURE_CONFIGS.get(profile, profile)
    if root is not None and (root / "tests/fixtures/hf").is_dir():  # a fixture naming its profile in CATALOG
        folder = next((d.name for d in sorted((root / "tests/fixtures/hf").iterdir()) if (d / "CATALOG").is_file()
                       and (d / "CATALOG").read_text(encoding="utf-8").strip() == profile), folder)
    fixture = f"tests/fixtures/hf/{folder}/config.json"
    if root is not None and (root / fixture).is_file():
        return str(root / fixture), fixture
    return None, ("no config.json for the model: pass --model-config PATH (the checkpoint's config.json; "
                  "no weights are read)")


def engine_requests(requests: list[dict], config: str | None) -> list[dict]:
    """The probe requests with the config.json the engine configuration is built with (None: none)."""
    return [{**request, "model_config": config} for request in requests]


def check_engine(results: list[dict], names: list[str], found: str, who) -> Check:
    """The ``engine`` check from the probe's answers (``names``: whose argv each is, ``probe_names``;
    ``found``: where the config.json came from; ``who``: words for an argv label)."""
    from optkit.bundle.check import Check

    engines = [r.get("engine") for r in results]
    if any(e is None for e in engines):
        return Check("engine", "skipped", [], "skipped: vLLM's parser refused the argv" if any(
            p["check"] != "engine" for r in results for p in r["problems"]) else "skipped: the probe did not run it")
    if not engines[0]["ran"]:
        return Check("engine", "skipped", [], f"skipped: {found}")
    problems = [f"{names[n] + ': ' if names[n] else ''}{', '.join(who(b) for b in p['blame'])}: {p['message']}"
                for n, r in enumerate(results) for p in r["problems"] if p["check"] == "engine"]
    unbuilt = next((n for n in engines[0]["not_run"] if n.startswith("create_engine_config")), None)
    if unbuilt and not problems and "create_engine_config" not in engines[0]["ran"]:
        return Check("engine", "skipped", [], f"skipped: {unbuilt} ({found})")
    return Check("engine", "fail" if problems else "pass", problems, _note(results, names, found))


def _note(results: list[dict], names: list[str], found: str) -> str:
    engines = [r["engine"] for r in results]
    ran = engines[0]["ran"]
    modes = [_mode(name, e["parallel"]) for name, e in zip(names, engines) if e["parallel"] and e["parallel"]["size"] > 1]
    stubbed = sorted({m for e in engines for m in e["stubbed"]})
    note = f"vLLM {results[0]['vllm_version']} ran {' and '.join(ran)} on its CPU platform with {found}"
    note += "".join(f"; {mode}" for mode in modes)
    if stubbed:
        note += (f"; stood in for {', '.join(stubbed)} (absent here: the model class inspected and the quantization "
                 "looked up without them, none read for the configuration)")
    nodes = any(name.startswith("node ") for name in names)  # a PD plan's instances are servers of their own
    not_run = engines[0]["not_run"] + (["the DP handshake (its headless rule applied to the modes above)"]
                                       if nodes and modes else [])
    return note + f"; not run without a device: {', '.join(not_run)}"


def _mode(name: str, parallel: dict) -> str:
    who = name or "the server"
    mode = "headless" if parallel["headless"] else f"{parallel['lb']} load balancing"
    return f"{who}: DP rank {parallel['rank']} of {parallel['size']}, {mode}"
