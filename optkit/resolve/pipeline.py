"""Pipeline parallelism (PP, ``--pipeline-parallel-size``, request field ``pp``): each DP rank runs TP × PP devices,
the model's layers split into PP consecutive stages, each stage one TP group (vllm-ascend 0.30.0rc2
docs/source/user_guide/feature_guide/pipeline_parallel.md:1-11). optkit plans it only where the request asks
(``--pp``); where the group does not fit a node its stages span the nodes (``optkit.resolve.layout``
``pp-across-nodes``), as the guide's two-node MP deployment (:67-105) and GLM5.md's PD prefiller run it.

What the guide says PP does not stack with, each refused here with its line (0.30.0rc2 pipeline_parallel.md):
prefill context parallelism (:301, :426); EAGLE-3 but on MiniMax-M3 (:298); DFlash (:299); DSpark but on DeepSeek-V4 and GLM-5.2
(:300); a PP decoder in P/D disaggregation (:307, :431: "the Decode node must use PP1"); PP with DP across nodes
for a MoE model (:431-433: MoeDistributeDispatch over RoCE "does not support this combined topology")."""

from __future__ import annotations

from optkit.errors import RequestError

GUIDE = "vllm-ascend 0.30.0rc2 docs/source/user_guide/feature_guide/pipeline_parallel.md"
EAGLE3_FAMILIES = ("minimax_m3",)
"""Model types the guide runs EAGLE-3 with PP on ("Supported only for MiniMax-M3 sparse models", :298)."""
DSPARK_TYPES = ("deepseek_v4", "glm_moe_dsa")
"""Model types (``text_model_type``) the guide runs DSpark with PP on ("DeepSeek-V4 and GLM-5.2 MoE-DSA models",
:300)."""


def pp_problem(request, model, layout_nodes: int) -> str:
    """Why optkit does not plan the request's pipeline-parallel size ('' when it does, or PP is off). A PD plan's
    prefill role is planned as a request of the prefill instances' shape, ``pp`` and ``prefill_pp`` both its PP
    (``optkit.resolve.role_plans.shaped_prefill_plan``)."""
    pp = request.pp or 1
    if pp == 1:
        return ""
    if request.pd is not None and (request.prefill_pp or 1) != pp:
        return (f"with --pd, --pp sizes the decode instances, which run PP 1 ({GUIDE}:307, :431: \"the Decode node "
                "must use PP1\"): give the prefill instances' pipeline with --prefill-pp")
    if (request.pcp or 1) > 1:
        return f"PP cannot be combined with prefill context parallelism ({GUIDE}:301, :426): leave --pcp or --pp out"
    method = request.speculative_method
    kind = model.text_model_type.removesuffix("_text")
    if method == "eagle3" and not kind.startswith(EAGLE3_FAMILIES):
        return f"EAGLE-3 with PP is supported only for MiniMax-M3 ({GUIDE}:298): leave --pp out, or use MTP"
    if method == "dflash":
        return f"DFlash with PP is not supported ({GUIDE}:299): leave --pp out, or use MTP"
    if method == "dspark" and kind not in DSPARK_TYPES:
        return f"DSpark with PP is supported only for DeepSeek-V4 and GLM-5.2 ({GUIDE}:300): leave --pp out"
    if request.dp > 1 and layout_nodes > 1 and model.is_moe:
        return (f"PP and DP together across nodes fail for a MoE model ({GUIDE}:431-433: the MoeDistributeDispatch "
                "path does not support this topology over RoCE): keep --dp 1 or --pp 1")
    return ""


def check_pd_decoders(given, only_role: str | None) -> None:
    """Refuse ``--pp`` on a user's ``--pd`` request: it would size the decode instances, which run PP 1. The prefill
    role's own plan (``only_role`` prefill, ``role_plans.shaped_prefill_plan``) carries the prefillers' pipeline as
    its ``pp``; a user's request gives it as ``--prefill-pp``."""
    if only_role != "prefill" and given.pd is not None and (given.pp or 1) > 1:
        raise RequestError(f"--pp {given.pp} with --pd {given.pd}: --pp would size the decode instances, which run "
                           f"PP 1 ({GUIDE}:307, :431: \"the Decode node must use PP1\"): give the prefill instances' "
                           "pipeline with --prefill-pp alone")


def check_pipeline_parallel(request, model, layout_nodes: int) -> None:
    """Refuse a pipeline-parallel size optkit does not plan (``pp_problem``), naming the flag."""
    problem = pp_problem(request, model, layout_nodes)
    if problem:
        raise RequestError(f"--pp {request.pp} (request field pp): {problem}")


__all__ = ["check_pd_decoders", "check_pipeline_parallel", "pp_problem", "GUIDE"]
