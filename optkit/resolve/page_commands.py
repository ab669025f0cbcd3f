"""Whose command it is: which catalog model a tutorial page's ``vllm serve`` command serves, and in which weight
format, read from the command's model path as the pages write it.

A page about several models (Qwen3.5-27B-Qwen3.6-27B.md) runs commands for each; the model path names which
(``.../Qwen3.6-27B``, ``Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp``). Page rules give a model only its own commands
(``optkit.resolve.page_rules``), the fit takes a page's command as evidence only for the weights it serves
(``optkit.resolve.fit``), and the catalog conformance harness compares each command with the plan of the model
and weights it names: all three read them here, the same way.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

QUANT_WORDS = (("w8a8-mxfp8", "w8a8-mxfp8"), ("mxfp8", "w8a8-mxfp8"), ("w4a4-mxfp4", "w4a4-mxfp4"),
               ("mxfp4", "w4a4-mxfp4"), ("w8a8c8", "w8a8c8"), ("w4a8c8", "w4a8c8"), ("w8a8sc", "w8a8sc"),
               ("w4a8", "w4a8"), ("w4a4", "w4a4"), ("w8a8", "w8a8"), ("int8", "w8a8"))
"""Words of a model path that name its weight format (longest first), as the tutorials' checkpoints spell them."""


def model_path(command: Mapping) -> str:
    """What a command names as its model: its model path, or, where the path is one the reader fills in
    (``your_model_path``, ``$MODEL_PATH``, ``<MODEL_PATH>``), the label the page writes above its block when that is
    one name (Qwen3-Dense.md's "Qwen3-32B-W8A8:" above ``vllm serve your_model_path``)."""
    path = str(command.get("model") or "")
    label = re.sub(r"<[^<>]*>|[*`]", "", str(command.get("label") or "")).strip().rstrip(":").strip()
    if (_placeholder_path(path) or _FILL_IN.fullmatch(path_tail(path))) and label and not re.search(r"\s", label):
        return label
    return path


_FILL_IN = re.compile(r"(your[_-]?)?model[_-]?(path|dir|name)")
"""A model path's last component that only says where the reader's model goes (``your_model_path``)."""


def path_tail(path: str | None) -> str:
    """The last component of a model path or Hub id, lower case (``Eco-Tech/Qwen3.5-27B-w8a8``:
    ``qwen3.5-27b-w8a8``)."""
    return str(path or "").rstrip("/").rsplit("/", 1)[-1].lower()


def model_names(model: Any) -> list[str]:
    """The names a model path may end with for ``model``: its id, aliases, Hub id and checkpoints' ids (tails)."""
    checkpoints = [getattr(c, "id", "") for c in getattr(model, "checkpoints", ())]
    found = [getattr(model, "id", ""), *getattr(model, "aliases", ()), getattr(model, "hf_id", ""), *checkpoints]
    return [path_tail(n) for n in found if n]


def _match(tail: str, names: Iterable[str]) -> int:
    """How well a model path's tail names a model: the longest of its names the tail starts with (0: none)."""
    return max((len(n) for n in names if n and tail.startswith(n)), default=0)


def best_owners(command: Mapping, owners: Iterable[Any]) -> list[Any]:
    """Of the models a page is about (``owners``), those the command's model path names best: the longest name it
    starts with. Where it names none of them (a placeholder path such as ``your_model_path``): the one owner with a
    checkpoint of the quantized format the command serves (``command_weights``), where one alone has one —
    Qwen3-Dense.md's tuned commands serve ``your_model_path`` with ``--quantization ascend`` under "Weight Version
    W8A8", and of its six models only Qwen3-32B has a W8A8 checkpoint (0.30.0rc2 :33) — else every owner."""
    owners = list(owners)
    tail = path_tail(model_path(command))
    scores = [(_match(tail, model_names(m)), m) for m in owners]
    top = max((score for score, _ in scores), default=0)
    if top == 0 and len(owners) > 1:
        held = {m.id: {getattr(c, "quantization", None) for c in getattr(m, "checkpoints", ())} for m in owners}
        checkpoints = [{"id": c.id, "quantization": getattr(c, "quantization", None)}
                       for m in owners for c in getattr(m, "checkpoints", ())]
        served, _ = command_weights(command, checkpoints)
        holders = [m for m in owners if served in held[m.id]]
        if served != "bf16" and len(holders) == 1:
            return holders
    return [m for score, m in scores if score == top]


def serves(command: Mapping, model: Any, owners: Iterable[Any]) -> bool:
    """Whether the command serves ``model`` among the models its page is about (``owners``, ``model`` included or
    not): no other owner's name is a better match for its model path."""
    owners = [m for m in owners if getattr(m, "id", "") != getattr(model, "id", "")]
    return not owners or model in best_owners(command, [model, *owners])


def _placeholder_path(model) -> bool:
    """A model path the page leaves to the reader: a shell variable or an angle-bracketed name."""
    text = str(model or "").strip("'\"")
    return text.startswith(("$", "<")) or not text


METHOD_FORMATS = {"mxfp8": "w8a8-mxfp8"}
"""``--quantization`` methods that name their weight format (``Checkpoint.method``): MiniMax-M3.md's MXFP8 weights
"use --quantization mxfp8" (0.30.0rc2 :152)."""


def command_weights(command: Mapping, checkpoints: Iterable[Mapping] = ()) -> tuple[str, str]:
    """The weight format the command serves and how it was read: the checkpoint (``{"id", "quantization"}``, from
    the page's weights table or the profile) its model path names, else a format word in its path, else the format
    the prose above a placeholder path states (``stated_weights``, the extraction's, where ``--quantization`` agrees:
    given for a quantized format, absent for bf16), else, for a
    placeholder path (``$MODEL_PATH``, ``<KIMI_K3_MODEL_PATH>``), the one format all those checkpoints share
    (Kimi-K3.md in 0.23.0 serves only its W4A8 weights, without ``--quantization``), else a ``--quantization``
    method that names a format (``METHOD_FORMATS``), else ``--quantization`` with an unnamed checkpoint read as
    W8A8, else bf16."""
    tail = path_tail(model_path(command))
    for checkpoint in checkpoints:
        if checkpoint.get("quantization") and tail and tail == path_tail(checkpoint.get("id")):
            return checkpoint["quantization"], f"checkpoint {checkpoint['id']}"
    for word, quantization in QUANT_WORDS:
        if word in tail:
            return quantization, f"the model path says {word}"
    stated = command.get("stated_weights")
    quantized = "--quantization" in command.get("options", {})
    if stated and (stated["quantization"] != "bf16") == quantized:  # the prose's format, as the flags agree with it
        return stated["quantization"], f"the page states {stated['quantization']} weights above it (:{stated['line']})"
    formats = sorted({c["quantization"] for c in checkpoints if c.get("quantization")})
    if _placeholder_path(command.get("model")) and len(formats) == 1:
        return formats[0], f"the model path is a placeholder and the page's weights are {formats[0]} alone"
    method = (command.get("options", {}).get("--quantization") or {}).get("value")
    if method in METHOD_FORMATS:
        return METHOD_FORMATS[method], f"--quantization {method} names the format"
    if method is not None:
        return "w8a8", "--quantization ascend with an unnamed checkpoint: read as W8A8"
    return "bf16", "no quantization named"


__all__ = ["QUANT_WORDS", "METHOD_FORMATS", "model_path", "path_tail", "model_names", "best_owners", "serves", "command_weights"]
