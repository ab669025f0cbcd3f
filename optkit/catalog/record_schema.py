"""The schema of a verified-on record (``verified/<name>.yaml``): what ``optkit report --record``
writes and ``optkit.catalog.records`` checks. pydantic validates a record file once; planning holds
it frozen (``optkit.catalog.frozen``), from the catalog cache.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from optkit.catalog.schema import RecipeId

Verdict = Literal["gain", "no-measurable-effect", "regression"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordHost(_Strict):
    npu: str = Field(description="NPU name as `npu-smi info` prints it (e.g. '910C', 'Ascend910').")
    target: str = Field(description="The optkit target whose npu-smi name pattern matches it (e.g. '910c').")
    driver: Optional[str] = Field(None, description="NPU driver version (npu-smi / driver version.info).")
    cann: Optional[str] = Field(None, description="CANN toolkit version (ascend_toolkit_install.info).")
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of vllm, vllm_ascend, torch and "
                                     "torch_npu in the Python that served.")


class RecordRelease(_Strict):
    vllm_ascend: str = Field(description="vllm-ascend version of the tree that served.")
    vllm: str = Field(description="vLLM version the plan was made for.")


class RecordWorkload(_Strict):
    concurrency: list[int] = Field(min_length=1, description="Concurrencies measured (vllm bench serve --max-concurrency).")
    input_len: int = Field(ge=1, description="Random dataset input length.")
    output_len: int = Field(ge=1, description="Random dataset output length.")
    mtp: bool = Field(description="MTP speculative decoding on.")
    num_speculative_tokens: int = Field(ge=0, description="k (0 without MTP).")
    tp: int = Field(ge=1, description="Tensor-parallel size that served.")
    dp: int = Field(ge=1, description="Data-parallel size that served.")
    ep: bool = Field(description="Expert parallelism on (--enable-expert-parallel).")
    sampling: Literal["greedy", "sampled"] = Field(description="Sampling of the benchmark requests.")
    min_tokens: bool = Field(description="Requests set min_tokens.")
    dataset: Literal["random"] = Field("random", description="vllm bench serve dataset.")


class RecipeMeasurement(_Strict):
    step: str = Field(description="The ladder step that measured it.")
    together_with: list[RecipeId] = Field(default_factory=list, description="Recipes the same step added (they "
                                          "require each other); the change is theirs together.")
    patches: dict[str, str] = Field(default_factory=dict, description="The recipe's patch files and their sha256 "
                                    "when measured.")
    tpot_delta_ms: dict[int, float] = Field(description="Mean TPOT change per concurrency, ms (negative = faster).")
    noise_ms: dict[int, float] = Field(description="Noise estimate of that change (one standard error), ms.")
    verdict: dict[int, Verdict] = Field(description="gain, no-measurable-effect or regression, per concurrency.")
    reference_tpot_ms: dict[int, float] = Field(description="Mean TPOT of the step it was compared with, ms.")
    repeats: int = Field(ge=1, description="Repeats (server starts) behind each mean.")


class Record(_Strict):
    """One ladder run on an NPU host, as data."""

    record_version: Literal[1] = Field(description="Format version of this record.")
    target: str = Field(description="Target id of the plan (targets/).")
    model: str = Field(description="Model id of the plan (models/).")
    release: RecordRelease = Field(description="Versions that served.")
    tree_digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="Pristine digest of the vllm-ascend tree.")
    host: RecordHost = Field(description="The NPU host.")
    workload: RecordWorkload = Field(description="The benchmark workload.")
    ladder: Literal["incremental", "leave-one-out"] = Field(description="How the steps were formed.")
    accuracy_gate: Literal["passed"] = Field(description="The ladder's accuracy gate result (only passed runs are "
                                             "recorded).")
    recipes: dict[RecipeId, RecipeMeasurement] = Field(min_length=1, description="Per recipe, what its step changed.")
    results: dict[str, str] = Field(min_length=1, description="Raw vllm bench serve result files (relative to the "
                                    "ladder's results/) and their sha256.")
