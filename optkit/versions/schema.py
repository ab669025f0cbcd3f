"""The shape of ``versions/<version>.yaml`` (written by ``optkit versions scan``) and of the
declared knob moves (``versions/moves.yaml``), checked once at load (pydantic v2, no extra keys)."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sourced(_Strict):
    value: str = Field(description="The value as the release states it.")
    source: str = Field(description="file:line in the release's tree it was read from.")


class CannStatement(Sourced):
    says: str = Field(description="Which statement this is (op package requirement, Docker image, release notes).")


class Cann(_Strict):
    minimum: Optional[str] = Field(description="Highest CANN any of the statements names (None: the release states none).")
    statements: list[CannStatement] = Field(description="Every statement of the release about its CANN.")


class ConfigSection(_Strict):
    source: str = Field(description="file:line of the class or code that reads this level.")
    unknown_keys: Literal["ignored", "rejected"] = Field(
        description="What the release does with a key it does not know at this level.")
    keys: dict[str, Union[str, "ConfigSection"]] = Field(
        description="Known keys: file:line where each is read, or a nested section.")
    env: dict[str, str] = Field(default_factory=dict, description="Keys that fall back to an env var (key → env var).")
    factory: list[str] = Field(default_factory=list, description="Keys the factory consumes before validation.")


class Knobs(_Strict):
    env: dict[str, str] = Field(description="vllm_ascend/envs.py entries: name → file:line.")
    env_read: dict[str, str] = Field(description="Env vars read directly elsewhere in vllm_ascend/: name → file:line.")
    additional_config: ConfigSection = Field(description="The --additional-config keys, nested ones too.")


class ReleaseData(_Strict):
    """One vllm-ascend release, as ``optkit versions scan`` read it from the release's tree."""

    schema_: int = Field(alias="schema", description="Layout version of this file.")
    version: str = Field(description="The release (PEP 440).")
    commit: Optional[str] = Field(description="The release commit (_version.py __commit_id__).")
    release_date: Optional[str] = Field(description="Date of this version's release-notes heading, if the tree has one.")
    vllm: Optional[Sourced] = Field(description="The paired vLLM (the A3 Dockerfile's VLLM_TAG).")
    pins: dict[str, Sourced] = Field(description="torch / torch_npu / triton_ascend pins (requirements.txt).")
    cann: Cann = Field(description="The CANN the release needs.")
    knobs: Knobs = Field(description="Env vars and additional_config keys the release knows.")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

KnobKind = Literal["env", "additional_config"]


class KnobMove(_Strict):
    """A knob renamed or moved by upstream, declared with its evidence."""

    old: str = Field(pattern=r"^(env|additional_config):[A-Za-z_][A-Za-z0-9_.]*$",
                     description="The knob before, as 'env:NAME' or 'additional_config:a.b'.")
    new: str = Field(pattern=r"^(env|additional_config):[A-Za-z_][A-Za-z0-9_.]*$",
                     description="The knob after.")
    since: str = Field(description="First release with the new form (and without the old one).")
    value: Literal["same", "int", "bool"] = Field(
        "same", description="How the value converts: unchanged, or an env string to int or to bool ('1' → true).")
    note: str = Field("", description="What else changed (semantics), shown in the plan.")
    evidence: str = Field(min_length=4, description="Where the trees, release notes or PRs show the move.")


class KnobMoves(_Strict):
    moves: list[KnobMove] = Field(description="Every declared rename or move, oldest first.")


ConfigSection.model_rebuild()
RECORDS: dict = {}  # what freeze() makes of these models: plain records (none has behaviour)
__all__ = ["ReleaseData", "KnobMove", "KnobMoves", "ConfigSection", "RECORDS"]
