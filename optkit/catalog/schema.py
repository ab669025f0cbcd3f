"""The typed recipe schema (pydantic v2).

One recipe = one optimization from the article, as data: what it changes (env, config
fragments, serve args, patches, kernels), when it is *correct* (``preconditions``), when it
*pays off* (``effective_when``), what it needs or excludes (``requires``/``conflicts``, each
conditional and with a message), what it gains (with the article's exact words), what it risks,
and how far it has been verified. Every condition is compiled and type-checked on load.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from optkit.catalog.conditions import compiled
from optkit.catalog.enums import VERIFICATION_ORDER, Kind, UpstreamStatus, Verification  # noqa: F401 - re-exported
from optkit.catalog.recipe_records import GainBehaviour, GainRecord, RecipeRecord
from optkit.errors import ConditionError


def _check_condition(text: str) -> str:
    try:
        compiled(text)
    except ConditionError as exc:
        raise ValueError(exc.render()) from None
    return text


def _check_specifier(text: str) -> str:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # only validating needs it

    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(f"{text!r} is not a PEP 440 version specifier (e.g. '>=0.23.0,<0.26')") from None
    return text


ConditionText = Annotated[str, AfterValidator(_check_condition)]
SpecifierText = Annotated[str, AfterValidator(_check_specifier)]
RecipeId = Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class _Strict(BaseModel):
    # defer_build: a model's validator is built when it first validates, so importing is cheap
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ArticleRef(_Strict):
    part: Literal[1, 2] = Field(description="Article part: 1 (image upgrade, tuning) or 2 (source, ops, MTP).")
    section: str = Field(description="Section heading the optimization appears under.")
    quote: str = Field(min_length=4, description="Short exact quote from the article (Chinese).")


class Upstream(_Strict):
    status: UpstreamStatus = Field(description="Status in vllm-ascend 0.23.0: new, partly-upstream, or upstream.")
    since: Optional[str] = Field(None, description="Version where it is (or becomes) upstream, if any.")
    evidence: str = Field(min_length=4, description="Where the real tree shows this (file:line, PR, release note).")


class Provenance(_Strict):
    article: ArticleRef = Field(description="Where the article describes it.")
    seed_map: str = Field(description="Section of the seed map (research/seed-map-0.23.0.md), e.g. 'B.7'.")
    upstream: Upstream = Field(description="Upstream status, with evidence from the real tree.")


class Versions(_Strict):
    vllm_ascend: SpecifierText = Field(description="vllm-ascend versions the recipe applies to (PEP 440).")
    vllm: SpecifierText = Field(">=0", description="vLLM versions the recipe applies to (PEP 440).")


class Rule(_Strict):
    when: ConditionText = Field(description="Condition over named facts that must hold.")
    msg: str = Field(min_length=3, description="Why, in words a user understands.")


class Link(_Strict):
    recipe: RecipeId = Field(description="The other recipe's id.")
    when: Optional[ConditionText] = Field(None, description="Only when this condition holds (always if absent).")
    unless: list[RecipeId] = Field(
        default_factory=list, description="Conflicts only: the conflict is lifted when any of these is selected.")
    msg: str = Field(min_length=3, description="Why the link exists.")


class EnvVar(_Strict):
    name: str = Field(description="Variable name.")
    value: str = Field(description="Value to export (a string; may be '${fact.name}').")
    external: bool = Field(False, description="Defined outside vllm-ascend's envs.py (CANN, HCCL, PyTorch).")
    build_time: bool = Field(False, description="Used when building kernels, not when serving.")

    @model_validator(mode="after")
    def _name_shape(self) -> "EnvVar":
        if not _ENV_NAME.match(self.name):
            raise ValueError(f"{self.name!r} is not an environment variable name (A-Z, 0-9, _)")
        return self


class Patch(_Strict):
    file: str = Field(pattern=r"^[A-Za-z0-9._-]+\.patch$", description="Patch file name inside recipes/<id>/.")
    description: str = Field(min_length=4, description="DEP-3 Description: what the patch changes and why.")
    origin: str = Field(description="DEP-3 Origin, e.g. 'vendor, article part 2' or 'backport, PR #15074'.")
    forwarded: str = Field("no", description="DEP-3 Forwarded: no, not-needed, or a URL.")
    applied_upstream: Optional[str] = Field(None, description="DEP-3 Applied-Upstream: version/commit, if landed.")
    last_update: _dt.date = Field(description="DEP-3 Last-Update (YYYY-MM-DD).")
    targets: list[str] = Field(min_length=1, description="Tree files the patch touches (relative paths).")
    status: Literal["pending", "present"] = Field(
        "pending", description="'present' once the file exists; 'pending' marks a declared, unwritten patch.")


Metric = Literal["tpot", "p99_tpot", "ttft", "e2e_latency", "throughput", "host_time", "comm_volume",
                 "compile_success", "capture_success"]


class Gain(GainBehaviour, _Strict):
    metric: Metric = Field(description="What was measured.")
    concurrency: Optional[int] = Field(None, ge=1, description="Concurrency of the measurement (absent: any).")
    mtp: Optional[bool] = Field(None, description="Measured with MTP on (true), off (false), or unspecified.")
    before: Optional[float] = Field(None, description="Value before the change.")
    after: Optional[float] = Field(None, description="Value after the change.")
    delta: Optional[float] = Field(None, description="Change (after - before) when only the change is given.")
    unit: Literal["ms", "%", "tok/s", "us/step", "x", "ops", "s"] = Field(description="Unit of the values.")
    dataset: Literal["random", "real", "gsm8k", "unspecified"] = Field("random", description="Benchmark dataset.")
    scope: Literal["this-change", "regression-fix", "whole-stack"] = Field(
        "this-change", description="What the number measures: this change on top of the previous state; the "
        "fix of a misconfiguration ('before' is a broken setup: counts for selection, not for the TPOT "
        "estimate); or the whole optimization stack (informational only).")
    quote: str = Field(min_length=2, description="The article's exact words for this number.")

    @model_validator(mode="after")
    def _has_numbers(self) -> "Gain":
        if self.delta is None and (self.before is None or self.after is None):
            raise ValueError("give either 'before' and 'after', or 'delta'")
        return self


class Risk(_Strict):
    severity: Literal["low", "medium", "high"] = Field(description="How bad it is if it bites.")
    text: str = Field(min_length=4, description="What can go wrong.")
    when: Optional[ConditionText] = Field(None, description="Only under this condition (always if absent).")


class VerificationInfo(_Strict):
    level: Verification = Field(description="Strongest verification that tests in this repo back.")
    needs_npu: bool = Field(description="Whether full verification still needs an Ascend NPU.")
    notes: str = Field("", description="What was verified, how, and what remains.")


class Recipe(_Strict):
    """One optimization as data."""

    id: RecipeId = Field(description="Stable kebab-case id; the folder name under recipes/.")
    title: str = Field(min_length=3, description="One-line title.")
    summary: str = Field(min_length=10, description="What it does and why it helps, in a few sentences.")
    kind: Kind = Field(description="What it changes.")
    provenance: Provenance = Field(description="Article passage, seed-map section and upstream status.")
    versions: Versions = Field(description="Versions the recipe applies to.")
    upstream_in: Optional[SpecifierText] = Field(
        None, description="vllm-ascend versions where the change is already upstream (recipe is then a no-op).")
    implied_by: Optional[ConditionText] = Field(
        None, description="Selected whenever this holds: the request itself asks for it (e.g. spec.mtp).")
    preconditions: list[Rule] = Field(default_factory=list, description="Must hold for correctness.")
    effective_when: list[Rule] = Field(default_factory=list, description="Must hold for the recipe to pay off.")
    requires: list[Link] = Field(default_factory=list, description="Recipes that must be selected with it.")
    conflicts: list[Link] = Field(default_factory=list, description="Recipes that must not be selected with it.")
    env: list[EnvVar] = Field(default_factory=list, description="Environment variables to export.")
    additional_config: dict[str, Any] = Field(default_factory=dict, description="vllm-ascend --additional-config fragment.")
    compilation_config: dict[str, Any] = Field(default_factory=dict, description="vLLM --compilation-config fragment.")
    speculative_config: dict[str, Any] = Field(default_factory=dict, description="vLLM --speculative-config fragment.")
    serve_args: list[str] = Field(default_factory=list, description="Extra `vllm serve` arguments.")
    patches: list[Patch] = Field(default_factory=list, description="Source patches, applied in order.")
    kernels: list[RecipeId] = Field(default_factory=list, description="Kernel build specs under kernels/.")
    gains: list[Gain] = Field(default_factory=list, description="Reported gains (and regressions).")
    risks: list[Risk] = Field(default_factory=list, description="What can go wrong.")
    verification: VerificationInfo = Field(description="How far it has been verified.")

    @model_validator(mode="after")
    def _unless_only_on_conflicts(self) -> "Recipe":
        for index, link in enumerate(self.requires):
            if link.unless:
                raise ValueError(f"requires[{index}].unless: 'unless' is only meaningful on conflicts")
        return self

    @model_validator(mode="after")
    def _kind_matches_content(self) -> "Recipe":
        if self.kind is Kind.source_patch and not self.patches:
            raise ValueError("a source-patch recipe needs at least one entry in 'patches'")
        if self.kind is Kind.kernel and not self.kernels:
            raise ValueError("a kernel recipe needs at least one entry in 'kernels'")
        return self


# The record class each model is frozen into (``optkit.catalog.frozen``); the others become plain records.
RECORDS = {Recipe: RecipeRecord, Gain: GainRecord}
