"""The weights a request serves: the checkpoint MODEL names and its format (bf16 or a quantization).

MODEL may name a published checkpoint of a catalog profile (its ``checkpoints:``, the weight table of the
model's tutorial page, e.g. ``Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp``): the plan is the profile's, the
quantization is the checkpoint's, and the bundle serves that checkpoint id. ``--quantization`` that
contradicts the checkpoint is refused; on a profile, a quantization none of its checkpoints has is allowed
with a warning (the user's own weights), and with ``--model-config`` it is the user's say.

Every format but bf16 is launched with ``--quantization ascend``: the name vllm-ascend registers for
msModelSlim checkpoints (``ASCEND_QUANTIZATION_METHOD = "ascend"``, vllm_ascend/utils.py:48 in 0.18.0, :49 in
0.23.0 and :56 in 0.30.0rc2; ``@register_quantization_config(ASCEND_QUANTIZATION_METHOD)``,
vllm_ascend/quantization/modelslim_config.py:355 in 0.18.0, :456 in 0.23.0,
quantization/configs/modelslim_config.py:356 in 0.30.0rc2), appended to ``vllm serve``'s ``--quantization``
choices by the platform plugin (vllm_ascend/platform.py:190-197 in 0.23.0, :322-328 in 0.30.0rc2); the
tutorials pass it for W8A8 and W4A8 alike and for the A5 microscaling checkpoints ("needs `--quantization
ascend`", Qwen3.5-397B-A17B.md:182 in 0.30.0rc2). ``--dtype`` stays: the ModelSlim config takes int8,
float16 and bfloat16 activations (``get_supported_act_dtypes``, modelslim_config.py:482 in 0.23.0,
configs/modelslim_config.py:395 in 0.30.0rc2).

KV-cache quantization (the c8 formats) needs no flag in any release from 0.18.0: the checkpoint's
quant_model_description.json says ``"kv_cache_type": "C8"`` and the ModelSlim config turns the int8 KV cache
on from it (modelslim_config.py:494 in 0.18.0; ``self.enable_c8_quant = kv_quant_type == "C8"``,
modelslim_config.py:942 in 0.23.0, configs/modelslim_config.py:1054 in 0.30.0rc2), so no release is refused.
The ``--kv-cache-dtype int8`` of the GLM-5.x pages (GLM5.md:385 in 0.30.0rc2) belongs to those pages'
sparse-attention MLA models (vLLM 0.23.0 has no int8 cache dtype; vllm-ascend 0.30.0rc2 adds it,
patch/platform/patch_kv_cache_dtype.py) and is not generalized here.
"""

from __future__ import annotations

from typing import Any

from optkit.errors import RequestError
from optkit.value import valueclass

QUANTIZATION_METHOD = "ascend"
"""``vllm serve --quantization`` for every non-bf16 format (module docstring)."""
KV_CACHE_QUANTIZED = ("w8a8c8", "w4a8c8")
"""The formats whose checkpoints carry an int8 KV cache (C8) besides quantized weights."""


@valueclass(frozen=True)
class Weights:
    """What a plan serves: its weight format, the catalog checkpoint MODEL named (if any), and a warning to show."""

    quantization: str
    checkpoint: Any = None
    """The profile's ``Checkpoint`` record MODEL named (its ``id``, ``quantization``, ``source``), else None."""
    warning: str = ""


def find_checkpoint(models: dict, name: str) -> tuple[Any, Any] | None:
    """The profile and checkpoint whose id is ``name`` (``profile_catalog.find_checkpoint``), else None: a name that
    is a profile's id, alias or Hub id with no checkpoint of that id, or no model's name at all."""
    from optkit.errors import UnknownName
    from optkit.resolve.profile_catalog import find_checkpoint as find

    try:
        profile, checkpoint = find(models, name)
    except UnknownName:
        return None
    return (profile, checkpoint) if checkpoint is not None else None


def served_weights(request, model, checkpoint=None) -> Weights:
    """The weights ``request`` serves on ``model`` (a profile), MODEL having named ``checkpoint`` (or none). A
    quantization without a named checkpoint serves the profile's checkpoint of that format (the first its page
    lists, with a warning, when there are several); a catalog profile that lists none is served the user's own
    weights, with a warning."""
    asked = request.quantization
    if checkpoint is not None:
        if asked is not None and asked != checkpoint.quantization:
            raise RequestError(f"--quantization {asked} but MODEL {checkpoint.id} is a {checkpoint.quantization} "
                               f"checkpoint ({checkpoint.source}); drop --quantization, or name the "
                               f"{model.id} checkpoint of that format ({_listed(model)})")
        return Weights(checkpoint.quantization, checkpoint)
    quantization = asked or "bf16"
    if quantization == "bf16" or not model.checkpoints:
        return Weights(quantization)
    published = [c for c in model.checkpoints if c.quantization == quantization]
    drafting = [c for c in published if c.draft == "dspark"]
    if request.speculative_method == "dspark" and len(drafting) == 1:  # the one of the format that can draft
        return Weights(quantization, drafting[0])
    if len(published) > 1:
        return Weights(quantization, published[0], warning=(
            f"{model.id} lists several {quantization} checkpoints ({', '.join(c.id for c in published)}): the plan "
            f"serves the first its page lists, {published[0].id}; name another as MODEL to serve it"))
    if published:
        return Weights(quantization, published[0])
    return Weights(quantization, warning=(
        f"{model.id} lists no {quantization} checkpoint ({_listed(model)}): the plan assumes your own {quantization} "
        f"weights; serve.sh loads {model.hf_id} unless given their path as MODEL"))


METHOD_SINCE = {"mxfp8": "0.27.1rc1"}
"""The first vllm-ascend release that registers each ``--quantization`` method besides 'ascend' (``mxfp8``:
vllm_ascend/quantization/configs/modelopt_mxfp8_config.py, absent before 0.27.1rc1)."""


def quantization_method(weights: Weights) -> str:
    """The ``runtime.quantization_method`` fact: what ``--quantization`` loads ``weights`` with ('' for bf16): the
    checkpoint's own method (``Checkpoint.method``), else 'ascend' (msModelSlim weights)."""
    if weights.quantization == "bf16":
        return ""
    return weights.checkpoint.method if weights.checkpoint is not None else QUANTIZATION_METHOD


def check_method(weights: Weights, release) -> None:
    """Refuse weights whose ``--quantization`` method the release does not register (``METHOD_SINCE``)."""
    from packaging.version import Version

    method = quantization_method(weights)
    since = METHOD_SINCE.get(method)
    if since and Version(str(release)) < Version(since):
        raise RequestError(
            f"{weights.checkpoint.id} loads with --quantization {method} ({weights.checkpoint.method_source}), which "
            f"vllm-ascend registers from {since} on, not in {release}: use --vllm-ascend-version {since} or later, "
            "or serve another checkpoint of the model")


def dspark_weights(weights: Weights, model) -> str:
    """The ``spec.dspark_weights`` fact of ``weights`` served on ``model``: 'present' where the checkpoint ships DSpark
    draft stages (``Checkpoint.draft``) or, without a checkpoint, the profile's own config declares them
    (``dspark_block_size``, the weights as published); 'absent' for a listed checkpoint without them or a profile
    whose config declares none; 'unknown' for the user's own quantized weights of a format the profile lists none of."""
    if weights.checkpoint is not None:
        return "present" if weights.checkpoint.draft == "dspark" else "absent"
    if weights.quantization == "bf16":
        return "present" if model.dspark_block_size else "absent"
    return "present" if model.dspark_block_size else "unknown"


def _listed(model) -> str:
    return ", ".join(f"{c.id} ({c.quantization})" for c in model.checkpoints or ()) or "none listed"


def kv_cache_quantized(quantization: str) -> bool:
    """The format's checkpoints carry an int8 KV cache (C8), turned on by the checkpoint itself (module docstring)."""
    return quantization in KV_CACHE_QUANTIZED
