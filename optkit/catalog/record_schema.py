"""The schema of a verified-on record (``verified/<name>.yaml``): what ``optkit report --record``
writes and ``optkit.catalog.records`` checks. pydantic validates a record file once; planning holds
it frozen (``optkit.catalog.frozen``), from the catalog cache.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
    shared_prefix_len: int = Field(0, ge=0, description="Tokens at the start of every prompt that all prompts shared "
                                   "(vllm bench serve --random-prefix-len; part of input_len).")
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
    capacity_delta: Optional[int] = Field(None, description="With a capacity sweep: the step's capacity minus the "
                                          "one it was compared with, in concurrent requests under the record's SLO.")
    capacity_verdict: Optional[Verdict] = Field(None, description="gain or regression when the two capacity "
                                                "brackets do not overlap, else no-measurable-effect.")

    @model_validator(mode="after")
    def _capacity_pair(self):
        if (self.capacity_delta is None) != (self.capacity_verdict is None):
            raise ValueError("capacity_delta and capacity_verdict go together: give both or neither")
        return self


SLO_TEXT = r"^(ttft|tpot|itl|e2el)_(mean|median|p[0-9.]+)<=[0-9.]+(us|ms|s)(,(ttft|tpot|itl|e2el)_(mean|median|p[0-9.]+)<=[0-9.]+(us|ms|s))*$"
"""The shape of an SLO's canonical text (``optkit.resolve.slo``)."""
CapacityStatus = Literal["found", "below-lowest", "at-most-high"]


class StepCapacity(_Strict):
    recipes: list[RecipeId] = Field(description="The selection the step served (its recipes, in the plan's order).")
    capacity: int = Field(ge=0, description="The highest concurrency that met the SLO (0: not even the lowest probe).")
    upper: Optional[int] = Field(description="The lowest concurrency that missed it (None: the highest probe still met it).")
    status: CapacityStatus = Field(description="found; below-lowest (capacity 0); at-most-high (capacity >= high).")
    output_throughput: Optional[float] = Field(None, ge=0, description="Output tok/s at the capacity (mean over runs).")
    request_goodput: Optional[float] = Field(None, ge=0, description="vLLM's request_goodput at the capacity, req/s.")
    repeats: int = Field(ge=1, description="Runs (server starts) behind it; the capacity is the smallest of theirs.")

    @model_validator(mode="after")
    def _bracket(self):
        if self.status == "at-most-high" and self.upper is not None:
            raise ValueError("status at-most-high has no upper bound: upper must be null")
        if self.status != "at-most-high" and self.upper is None:
            raise ValueError(f"status {self.status} needs upper: the lowest concurrency that missed the SLO")
        if self.upper is not None and self.upper <= self.capacity:
            raise ValueError(f"upper {self.upper} must be above capacity {self.capacity} (the bracket is [capacity, upper))")
        if self.status == "below-lowest" and self.capacity != 0:
            raise ValueError(f"status below-lowest means capacity 0, not {self.capacity}")
        if self.status != "below-lowest" and self.capacity == 0:
            raise ValueError("capacity 0 is status below-lowest")
        return self


class RecordCapacity(_Strict):
    """The capacity sweep of the run: per step, the highest load meeting the SLO."""

    slo: str = Field(pattern=SLO_TEXT, description="The SLO in its canonical text, e.g. 'tpot_p99<=20ms' (written by "
                     "optkit.resolve.slo.Slo.text(); the resolver parses it with parse_slo: the catalog stage cannot).")
    variable: Literal["concurrency"] = Field(description="What the sweep searched over (vllm bench serve --max-concurrency).")
    low: int = Field(ge=1, description="The lowest concurrency probed.")
    high: int = Field(ge=1, description="The highest concurrency probed.")
    resolution: float = Field(ge=0, le=1, description="Bisection stopped within this fraction of the capacity (0: exact).")
    prompts_per_concurrency: int = Field(ge=1, description="Requests per concurrent slot of each probe.")
    steps: dict[str, StepCapacity] = Field(min_length=1, description="Per ladder step id, its capacity.")

    @model_validator(mode="after")
    def _range(self):
        if self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}")
        for step, cap in self.steps.items():
            if cap.capacity > self.high or (cap.upper is not None and not self.low <= cap.upper <= self.high):
                raise ValueError(f"steps.{step}: its bracket [{cap.capacity}, {cap.upper}) is outside the probed "
                                 f"range {self.low}…{self.high}")
            if cap.status == "at-most-high" and cap.capacity != self.high:
                raise ValueError(f"steps.{step}: at-most-high means the highest probe {self.high} met the SLO")
        return self


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
    capacity: Optional[RecordCapacity] = Field(None, description="With a capacity sweep (optkit ladder --sweep): per "
                                               "step, the highest concurrency that met the SLO.")
