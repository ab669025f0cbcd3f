"""The longest ``--max-model-len`` vLLM starts a plan with, and a request's own ``--max-model-len`` held to it.

vLLM takes at most the model's ``max_position_embeddings`` (the one a ``--hf-overrides`` sets, if any) times the
RoPE factor that override gives, and refuses to start beyond it; YaRN's meaning changed in vLLM 0.30.0
(``YARN_UNSCALED_FROM``), so a page's override written for an older vLLM gets its length stated
(``scaled_overrides``). Used by the plan (``check_max_model_len``) and by the page settings it carries.
"""

from __future__ import annotations

from optkit.resolve.fit import serve_value

VLLM_MAX_LEN_RULE = "vllm/config/model.py:2229 in vLLM 0.23.0 (_get_and_verify_max_len)"


YARN_UNSCALED_FROM = "0.30.0"
"""From this vLLM, YaRN leaves ``max_position_embeddings`` as the config states it ("YaRN variants leave
max_position_embeddings already scaled", vllm/config/model.py:2468-2481 in vLLM 0.30.0); up to 0.29.0 the longest
``--max-model-len`` of a YaRN model is its ``original_max_position_embeddings`` × factor (model.py:2185-2186 in
0.23.0, the same lines in the 0.24.0 to 0.29.0 sdists)."""


def yarn_unscaled(vllm) -> bool:
    """Whether vLLM ``vllm`` reads a YaRN config's ``max_position_embeddings`` as already scaled."""
    from packaging.version import Version

    return Version(str(vllm)) >= Version(YARN_UNSCALED_FROM)


def scaled_overrides(value: str, vllm) -> str | None:
    """A ``--hf-overrides`` JSON (a page's, as written) that sets YaRN RoPE without ``max_position_embeddings``, with
    ``max_position_embeddings`` its original length × factor added, for a vLLM that reads it as already scaled
    (``yarn_unscaled``): what the override means under the vLLM the page was written for, and what vLLM then takes
    as the model's longest context. None when nothing is to add."""
    import json

    try:
        given = json.loads(value.strip("'"))
    except json.JSONDecodeError:
        return None
    rope = (given.get("rope_scaling") or given.get("rope_parameters")) if isinstance(given, dict) else None
    if not (isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) == "yarn" and rope.get("factor")
            and rope.get("original_max_position_embeddings")) or "max_position_embeddings" in given \
            or not yarn_unscaled(vllm):
        return None
    scaled = int(int(rope["original_max_position_embeddings"]) * float(rope["factor"]))
    return json.dumps({**given, "max_position_embeddings": scaled}, separators=(",", ":"))


def context_limit(plan) -> tuple[int, str] | None:
    """The longest --max-model-len vLLM takes for the plan's model: its ``max_position_embeddings`` (the one a
    ``--hf-overrides`` on the plan's serve line sets, if any), times the RoPE scaling factor that override gives
    (YaRN: of its original length, up to vLLM 0.29.0; from 0.30.0 YaRN scales nothing, ``YARN_UNSCALED_FROM``);
    None when the profile does not say."""
    import json

    limit = plan.model.max_position_embeddings
    overrides = serve_value(plan, "--hf-overrides")
    try:
        given = json.loads(overrides.strip("'")) if overrides else {}
    except json.JSONDecodeError:
        given = {}
    given = given if isinstance(given, dict) else {}
    limit = given.get("max_position_embeddings") or limit
    if not limit:
        return None
    rope = given.get("rope_scaling") or given.get("rope_parameters")
    if isinstance(rope, dict) and rope.get("factor"):
        yarn = rope.get("rope_type", rope.get("type")) == "yarn"
        if yarn and yarn_unscaled(plan.facts["versions.vllm"]):
            return int(limit), (f"max_position_embeddings {limit} (--hf-overrides; YaRN scales nothing from vLLM "
                                f"{YARN_UNSCALED_FROM}, vllm/config/model.py:2468-2481)")
        base = int(rope.get("original_max_position_embeddings") or limit)
        return int(base * float(rope["factor"])), f"{base} × RoPE factor {rope['factor']} (--hf-overrides)"
    return int(limit), f"max_position_embeddings {limit}"


def check_max_model_len(plan) -> None:
    """A ``--max-model-len`` the request sets holds the workload's longest request and is one vLLM starts with."""
    from optkit.errors import RequestError

    wanted = plan.request.max_model_len
    if wanted is None:
        return
    longest = plan.facts["workload.total_len_max"]
    if wanted < longest:
        raise RequestError(f"--max-model-len {wanted} is below the workload's longest request ({longest} tokens in and "
                           f"out): vLLM refuses those prompts; raise it to at least {longest} or shorten --input-len / "
                           "--output-len / --length-mix")
    limit = context_limit(plan)
    if limit is not None and wanted > limit[0]:
        raise RequestError(f"--max-model-len {wanted} is above {plan.model.id}'s context ({limit[1]}): vLLM refuses to "
                           f"start ({VLLM_MAX_LEN_RULE}: unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which it warns may give "
                           f"wrong outputs); use at most {limit[0]}")


__all__ = ["VLLM_MAX_LEN_RULE", "YARN_UNSCALED_FROM", "yarn_unscaled", "scaled_overrides", "context_limit",
           "check_max_model_len"]
