"""Model and target profiles: the facts a plan is computed from.

A ``ModelProfile`` describes one checkpoint's architecture (layers, GDN/full-attention split,
MoE shape, MTP, vision tower); a ``Target`` describes one Ascend NPU generation (SoC names,
dies per card, devices per node). Both come from the YAML catalogs in ``models/`` and
``targets/``; a model profile can also be derived from a user's own Hugging Face
``config.json`` (``optkit.resolve.hf_config``). ``facts()`` turns either into the flat
``name -> value`` mapping that recipe conditions read.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from optkit.catalog.cache import cached
from optkit.catalog.loader import parse_model
from optkit.catalog.yamlio import LineMap, load_yaml
from optkit.errors import Location, Problem, UnknownName, ValidationFailed

_CODE = ("resolve/profiles.py",)  # what validates model and target files, besides optkit/catalog/
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
Name = typing.Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class ModelProfile(BaseModel):
    """Architecture facts of one model checkpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(pattern=NAME_PATTERN, description="Catalog id, lowercase, e.g. 'qwen3.5-35b-a3b'.")
    aliases: list[Name] = Field(default_factory=list, description="Other accepted names (lowercase).")
    hf_id: str = Field(
        default="", description="What `vllm serve` loads: the Hugging Face repo id (e.g. 'Qwen/Qwen3.5-35B-A3B') "
        "or, for a profile derived from config.json, the name given with --model-id or in the config.")
    hf_model_type: str = Field(description="Top-level `model_type` of config.json, e.g. 'qwen3_5_moe'.")
    text_model_type: str = Field(
        description="`model_type` of the language model (text_config); equals hf_model_type for text-only configs."
    )
    architecture: str = Field(description="First entry of config.json `architectures`.")
    family: str = Field(pattern=NAME_PATTERN, description="Recipe family: 'qwen3.5-moe', 'qwen3.6-dense', 'custom'.")
    num_layers: int = Field(gt=0, description="Decoder layers (`num_hidden_layers`), MTP layers excluded.")
    gdn_layers: int = Field(ge=0, description="Layers whose token mixer is Gated DeltaNet (`linear_attention`).")
    full_attention_layers: int = Field(ge=0, description="Layers with softmax full attention (`full_attention`).")
    hidden_size: int = Field(gt=0, description="Model (residual stream) width.")
    vocab_size: int = Field(gt=0, description="Vocabulary size (rows of the embedding / lm_head).")
    num_attention_heads: int = Field(gt=0, description="Query heads of the full-attention layers.")
    num_kv_heads: int = Field(gt=0, description="Key/value heads of the full-attention layers (GQA).")
    head_dim: int = Field(gt=0, description="Per-head dimension of the full-attention layers.")
    is_moe: bool = Field(description="True if the FFN is a routed mixture of experts.")
    num_experts: int = Field(ge=0, description="Routed experts per MoE layer; 0 for dense models.")
    experts_per_token: int = Field(ge=0, description="Routed experts each token activates (top-k); 0 for dense.")
    shared_experts: bool = Field(description="True if each MoE layer also has an always-on shared expert.")
    mtp_layers: Optional[int] = Field(
        ge=0, description="Multi-token-prediction layers the checkpoint ships, counted as vLLM counts them "
        "(`mtp_num_hidden_layers`, `num_nextn_predict_layers`); 0 if none; null if config.json cannot tell.")
    is_vl: bool = Field(description="Config carries `vision_config` (makes vllm-ascend's is_vl_model() True).")
    dtype: str = Field(description="Checkpoint dtype (`torch_dtype`/`dtype`), e.g. 'bfloat16'; 'unknown' if unset.")
    source: Literal["catalog", "config.json"] = Field(
        default="catalog", description="Where the profile came from: the YAML catalog or a user's config.json."
    )
    sources: list[str] = Field(
        default_factory=list, description="Provenance of the numbers, one note each; uncertain ones say so."
    )

    @field_validator("full_attention_layers")
    @classmethod
    def _layers_fit(cls, value: int, info: ValidationInfo) -> int:
        layers, gdn = info.data.get("num_layers"), info.data.get("gdn_layers")
        if layers is not None and gdn is not None and gdn + value > layers:
            raise ValueError(f"gdn_layers + full_attention_layers = {gdn + value} exceeds num_layers {layers}")
        return value

    @field_validator("num_experts")
    @classmethod
    def _experts_match_moe(cls, value: int, info: ValidationInfo) -> int:
        is_moe = info.data.get("is_moe")
        if is_moe is not None and is_moe != (value > 0):
            raise ValueError(f"must be > 0 exactly when is_moe is true (is_moe is {str(is_moe).lower()})")
        return value

    @field_validator("experts_per_token")
    @classmethod
    def _top_k_fits(cls, value: int, info: ValidationInfo) -> int:
        experts = info.data.get("num_experts")
        if experts is not None and value > experts:
            raise ValueError(f"exceeds num_experts ({experts})")
        return value

    @field_validator("shared_experts")
    @classmethod
    def _shared_needs_moe(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("is_moe") is False:
            raise ValueError("a shared expert needs is_moe: true")
        return value

    def names(self) -> list[str]:
        """The id and every alias."""
        return [self.id, *self.aliases]

    def facts(self) -> dict[str, object]:
        """The model facts recipe conditions may read, keyed by fact name."""
        return {
            "model.id": self.id,
            "model.family": self.family,
            "model.hf_model_type": self.hf_model_type,
            "model.text_model_type": self.text_model_type,
            "model.architecture": self.architecture,
            "model.num_layers": self.num_layers,
            "model.gdn_layers": self.gdn_layers,
            "model.full_attention_layers": self.full_attention_layers,
            "model.hidden_size": self.hidden_size,
            "model.vocab_size": self.vocab_size,
            "model.is_moe": self.is_moe,
            "model.num_experts": self.num_experts,
            "model.moe.shared_experts": self.shared_experts,
            "model.mtp_head": mtp_head(self.mtp_layers),
            "model.is_vl": self.is_vl,
            "model.dtype": self.dtype,
        }


def mtp_head(mtp_layers: int | None) -> str:
    """The ``model.mtp_head`` fact: 'present', 'absent', or 'unknown' (config.json cannot tell)."""
    if mtp_layers is None:
        return "unknown"
    return "present" if mtp_layers > 0 else "absent"


class TargetVariant(BaseModel):
    """One named SKU of a target (same SoC family, different bin or clocks)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(pattern=NAME_PATTERN, description="Variant id, lowercase, e.g. '752t'.")
    description: str = Field(description="What the variant is and where it is referenced.")


class Target(BaseModel):
    """One Ascend NPU generation that plans are made for."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(pattern=NAME_PATTERN, description="Target id, lowercase, e.g. '910c'.")
    aliases: list[Name] = Field(default_factory=list, description="Other accepted names (lowercase).")
    title: str = Field(description="Human-readable name of the hardware.")
    soc_family: str = Field(description="SoC family used by build_aclnn.sh, e.g. 'ascend910_93'.")
    soc_versions: list[str] = Field(min_length=1, description="Full SoC names valid as SOC_VERSION for builds.")
    default_soc_version: str = Field(description="SOC_VERSION to build with when none is detected.")
    dies_per_card: int = Field(gt=0, description="NPU dies (devices seen by torch_npu) per physical card.")
    devices_per_node: int = Field(gt=0, description="NPU devices (dies) in one standard server node.")
    variants: list[TargetVariant] = Field(default_factory=list, description="Named SKUs of this target.")
    device_generation: Literal["A2", "A3"] = Field(description="vllm-ascend device type: 'A2' (910B), 'A3' (910C).")
    hbm_gib_per_device: int = Field(gt=0, description="HBM per device (die) in GiB.")
    npu_smi_name_pattern: str = Field(description="Regex searched in `npu-smi info` chip names to detect the target.")

    @field_validator("npu_smi_name_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @field_validator("default_soc_version")
    @classmethod
    def _default_is_listed(cls, value: str, info: ValidationInfo) -> str:
        listed = info.data.get("soc_versions")
        if listed is not None and value not in listed:
            raise ValueError(f"{value!r} is not one of soc_versions")
        return value

    @field_validator("variants")
    @classmethod
    def _unique_variants(cls, value: list[TargetVariant]) -> list[TargetVariant]:
        ids = [v.id for v in value]
        if len(ids) != len(set(ids)):
            raise ValueError("variant ids must be unique")
        return value

    def names(self) -> list[str]:
        """The id and every alias."""
        return [self.id, *self.aliases]

    def variant(self, name: str) -> TargetVariant:
        """The variant called ``name`` (case-insensitive); ``UnknownName`` otherwise."""
        for variant in self.variants:
            if variant.id == name.lower():
                return variant
        raise UnknownName(f"variant of target {self.id}", name, [v.id for v in self.variants])

    def facts(self, variant: str | None = None) -> dict[str, object]:
        """The target facts recipe conditions may read; ``target.variant`` is '' if not given."""
        return {
            "target.id": self.id,
            "target.soc_family": self.soc_family,
            "target.soc_version": self.default_soc_version,
            "target.generation": self.device_generation,
            "target.dies_per_card": self.dies_per_card,
            "target.devices_per_node": self.devices_per_node,
            "target.variant": self.variant(variant).id if variant else "",
        }


# --- catalogs ------------------------------------------------------------------------------


def load_models(directory: Path) -> dict[str, ModelProfile]:
    """Every ``*.yaml`` in ``directory`` as a ModelProfile, keyed by id."""
    return _load_catalog(directory, ModelProfile, "model")


def load_targets(directory: Path) -> dict[str, Target]:
    """Every ``*.yaml`` in ``directory`` as a Target, keyed by id."""
    return _load_catalog(directory, Target, "target")


def find_model(models: dict[str, ModelProfile], name: str) -> ModelProfile:
    """The model whose id or alias is ``name`` (case-insensitive); ``UnknownName`` otherwise."""
    return _find(models, name, "model")


def find_target(targets: dict[str, Target], name: str) -> Target:
    """The target whose id or alias is ``name`` (case-insensitive); ``UnknownName`` otherwise."""
    return _find(targets, name, "target")


def _find(entries: dict, name: str, kind: str):
    wanted = name.lower()
    for entry in entries.values():
        if wanted in entry.names():
            return entry
    raise UnknownName(kind, name, sorted(n for entry in entries.values() for n in entry.names()))


def _load_catalog(directory: Path, schema: type[BaseModel], kind: str) -> dict:
    if not directory.is_dir():
        raise ValidationFailed([Problem(Location(str(directory)), f"{kind} catalog directory not found")])
    return cached(f"{kind}s", directory, lambda: _validate_catalog(directory, schema, kind), code=_CODE)


def _validate_catalog(directory: Path, schema: type[BaseModel], kind: str) -> dict:
    entries: dict[str, tuple[BaseModel, LineMap]] = {}
    problems: list[Problem] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            entry, lines = _load_entry(path, schema)
        except ValidationFailed as exc:
            problems.extend(exc.problems)
            continue
        problems.extend(_duplicate_names(entry, lines, entries, kind))
        entries.setdefault(entry.id, (entry, lines))
    if problems:
        raise ValidationFailed(problems)
    return {entry_id: entry for entry_id, (entry, _) in entries.items()}


def _load_entry(path: Path, schema: type[BaseModel]) -> tuple[BaseModel, LineMap]:
    data, lines = load_yaml(path)
    return parse_model(schema, data, lines), lines


def _duplicate_names(entry: Any, lines: LineMap, seen: dict, kind: str) -> list[Problem]:
    """Names of ``entry`` already taken by an entry in ``seen`` (or earlier in ``entry`` itself)."""
    taken = {name: (other, other_lines) for other, other_lines in seen.values() for name in other.names()}
    problems = []
    for index, name in enumerate(entry.names()):
        if name in taken:
            other, other_lines = taken[name]
            where = other_lines.location(_name_loc(other, other.names().index(name)))
            message = f"{kind} name {name!r} is already used by {kind} {other.id!r} in {where.file}:{where.line}"
            hint = "names must be unique across the catalog"
            problems.append(Problem(lines.location(_name_loc(entry, index)), message, hint))
        taken[name] = (entry, lines)
    return problems


def _name_loc(entry: Any, index: int) -> tuple:
    """Field path of ``entry.names()[index]``: the id, then the aliases."""
    return ("id",) if index == 0 else ("aliases", index - 1)
