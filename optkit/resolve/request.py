"""A plan request: what the user asks for, from CLI flags or a YAML file.

Defaults follow the article's setup: Qwen3.5-35B-A3B on one 910C card (TP2, bf16), expert
parallelism on for MoE models, concurrency 1/4/8, random dataset 1024 in / 512 out, greedy,
min_tokens set by clients (the article's production workload), async scheduling on (vLLM 0.23.0's
default), MTP with k = 4 when asked.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from optkit.catalog.yamlio import load_yaml

DEFAULT_VLLM_ASCEND = "0.23.0"


class Request(BaseModel):
    """Everything a plan depends on besides the catalog."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, protected_namespaces=())

    model: Optional[str] = Field(None, description="Model id or alias from models/ (or use model_config).")
    model_config_path: Optional[str] = Field(
        None, alias="model_config", description="Path to a Hugging Face config.json for a user checkpoint.")
    model_id: Optional[str] = Field(
        None, min_length=1, description="With model_config: the model's name (HF repo id or the path vllm "
        "serve loads; also the served name), when config.json has no _name_or_path.")
    target: str = Field("910c", description="Target id or alias from targets/.")
    variant: Optional[str] = Field(None, description="Hardware variant of the target (e.g. 752t, 560t).")
    tp: int = Field(2, ge=1, description="Tensor-parallel size (910C: one card = two dies = TP2).")
    dp: int = Field(1, ge=1, description="Data-parallel size.")
    nodes: Optional[int] = Field(
        None, ge=1, description="Nodes the TP × DP ranks run on; default: the fewest that hold them "
        "(optkit.resolve.layout names the layouts).")
    ep: Optional[bool] = Field(None, description="Expert parallelism; default on for MoE models.")
    context_parallel: bool = Field(False, description="Prefill/decode context parallelism in use.")
    concurrency: list[int] = Field([1, 4, 8], min_length=1, description="Concurrency levels to optimize for.")
    input_len: int = Field(1024, ge=1, description="Input tokens per request.")
    output_len: int = Field(512, ge=1, description="Output tokens per request.")
    sampling: Literal["greedy", "sampled"] = Field("greedy", description="greedy (temperature 0) or sampled.")
    logprobs: bool = Field(False, description="Requests ask for logprobs.")
    penalties: bool = Field(False, description="Requests use presence/frequency/repetition penalties.")
    min_tokens: bool = Field(True, description="Clients set min_tokens (the article's production workload does).")
    structured_output: bool = Field(False, description="Requests use structured output.")
    prefix_caching: bool = Field(False, description="Prefix caching on (vLLM defaults it off for hybrid models).")
    async_scheduling: bool = Field(True, description="Async scheduling (vLLM 0.23.0 turns it on by default).")
    mtp: bool = Field(False, description="MTP speculative decoding.")
    num_speculative_tokens: Optional[int] = Field(None, ge=1, le=16, description="k; default 4 with MTP.")
    vllm_ascend_version: Optional[str] = Field(
        None, description="vllm-ascend release on the host (default 0.23.0, or the version of --tree).")
    vllm_version: Optional[str] = Field(None, description="vLLM version; default: the one the vllm-ascend release pairs with.")
    tree: Optional[str] = Field(None, description="A vllm-ascend source tree to plan for: knobs and probes read from it.")
    dtype: Literal["bfloat16", "float16", "float32"] = Field("bfloat16", description="Serving dtype.")
    quantized: bool = Field(False, description="Quantized weights (w8a8 etc.).")
    enforce_eager: bool = Field(False, description="Run without graphs (--enforce-eager).")
    lora: bool = Field(False, description="LoRA adapters enabled.")
    with_recipes: list[str] = Field([], alias="with", description="Recipe ids to force in.")
    without_recipes: list[str] = Field([], alias="without", description="Recipe ids to leave out.")

    @field_validator("concurrency", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        """``1,4,8`` as the command line takes it, or one level alone, besides a list."""
        if isinstance(value, str):
            return parse_levels(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        return value

    @field_validator("concurrency")
    @classmethod
    def _positive_sorted(cls, value: list[int]) -> list[int]:
        if any(c < 1 for c in value):
            raise ValueError("concurrency levels must be ≥ 1")
        return sorted(set(value))

    @property
    def k(self) -> int:
        """Speculative tokens per step (0 without MTP)."""
        return (self.num_speculative_tokens or 4) if self.mtp else 0


def parse_levels(text: str) -> list[int]:
    """Concurrency levels written ``1,4,8`` (the flag and a request file take the same form)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(re.fullmatch(r"\d+", part) for part in parts):
        raise ValueError(f"{text!r}: give comma-separated integers, e.g. 1,4,8")
    return [int(part) for part in parts]


def load_request(path: Path) -> Request:
    """Read a YAML request file (the same fields as the CLI flags)."""
    from optkit.catalog.loader import parse_model

    data, lines = load_yaml(path)
    return parse_model(Request, data, lines)
