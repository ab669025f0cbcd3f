"""The JSON files optkit reads back, as schemas validated like recipes.

- ``Lock``: the part of a bundle's ``optkit.lock.json`` that ``optkit apply`` reads (its patches,
  pending patches and the recipes' version ranges); the lock's other sections are carried as
  written, for ``plan --from-lock`` and ``bundle check`` to read.
- ``TreeState``: ``<tree>/.optkit/state.json``, written by a successful apply.
- ``Journal``: ``<tree>/.optkit/journal.json``, present only while an apply runs.

Both records carry a ``digest`` of their content, so that an edit which still reads well is refused too.

``read`` is ``optkit.catalog.jsonio.load_json`` + ``optkit.catalog.loader.parse_model``: a hand
edit or damage is a ``ValidationFailed`` naming ``file:line: field.path: what is wrong``. Every
path a state or journal names is checked as a tree path, since a revert writes and deletes it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from optkit.catalog.jsonio import load_json
from optkit.catalog.loader import parse_model
from optkit.catalog.schema import RecipeId, SpecifierText, TreeFile
from optkit.errors import Problem, ValidationFailed

T = TypeVar("T", bound=BaseModel)


def _plain_name(name: str) -> str:
    if Path(name).name != name or name in ("", ".", "..", "series"):
        raise ValueError(f"{name!r} is not a plain file name")
    return name


TreePath = TreeFile
PlainName = Annotated[str, AfterValidator(_plain_name)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Open(BaseModel):
    # The lock carries more than apply reads (what plan --from-lock and bundle check read, and
    # what later optkits add); those keys are kept as written.
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)


# --------------------------------------------------------------------------- the bundle's lock


class LockPatch(_Strict):
    recipe: RecipeId = Field(description="Id of the recipe the patch belongs to.")
    file: str = Field(description="The patch's file name in its recipe folder.")
    name: PlainName = Field(description="File name in patches/ and in series (NNNN-<recipe>--<file>).")
    sha256: Sha256 = Field(description="sha256 of the patch bytes (lowercase hex).")
    targets: list[str] = Field(default_factory=list, description="Tree files the patch touches, as its recipe declares.")


class LockPending(_Strict):
    recipe: RecipeId = Field(description="Id of a recipe whose patch is declared but not written yet.")
    file: str = Field(description="The pending patch's file name.")


class LockVersions(_Open):
    vllm_ascend: SpecifierText = Field("", description="The recipe's vllm-ascend range (PEP 440; empty: any).")
    vllm: SpecifierText = Field(">=0", description="The recipe's vLLM range (PEP 440).")


class LockRecipe(_Open):
    versions: LockVersions = Field(default_factory=LockVersions, description="The recipe's version ranges.")


class Lock(_Open):
    lock_version: Literal[1] = Field(description="Version of the lock format.")
    recipes: dict[str, LockRecipe] = Field(default_factory=dict, description="Each selected recipe, by id.")
    patches: list[LockPatch] = Field(default_factory=list, description="Patches in apply order.")
    pending_patches: list[LockPending] = Field(default_factory=list, description="Declared patches not yet written.")
    request: dict[str, Any] = Field(default_factory=dict, description="The request (read by plan --from-lock).")
    optkit: dict[str, Any] = Field(default_factory=dict, description="The optkit and catalog the lock came from.")
    launch: dict[str, Any] = Field(default_factory=dict, description="The launch (read by bundle check).")
    versions: dict[str, Any] = Field(default_factory=dict, description="vllm-ascend and vLLM the plan is for.")
    bundle: dict[str, Any] = Field(default_factory=dict, description="How the bundle was written (k8s).")

    @field_validator("patches")
    @classmethod
    def _consistent(cls, patches: list[LockPatch], info: ValidationInfo) -> list[LockPatch]:
        names = [p.name for p in patches]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"the name {twice[0]!r} is listed twice")
        recipes = info.data.get("recipes", {})
        unknown = [(i, p.recipe) for i, p in enumerate(patches) if p.recipe not in recipes]
        if unknown:
            raise ValueError(f"patches[{unknown[0][0]}] belongs to recipe {unknown[0][1]!r}, which is not one "
                             "of the lock's recipes")
        return patches


# --------------------------------------------------------------------------- a tree's records


class StatePatch(_Strict):
    recipe: str = Field(description="Id of the recipe the patch belongs to.")
    name: str = Field(description="The patch's name in the bundle.")
    sha256: Sha256 = Field(description="sha256 of the patch bytes applied.")
    outcome: Literal["applied", "already present"] = Field(description="What apply did with it.")


class StateFile(_Strict):
    before: Optional[Sha256] = Field(description="sha256 before the apply (null: the file did not exist).")
    after: Optional[Sha256] = Field(description="sha256 after the apply (null: the patches deleted it).")


class TreeState(_Strict):
    state_version: Literal[1] = Field(description="Version of the state format.")
    digest: Optional[Sha256] = Field(None, description="sha256 of the rest of the record (see ``digest``).")
    vllm_ascend: str = Field(description="The tree's version when the patches were applied.")
    patches: list[StatePatch] = Field(description="The bundle's patches, in apply order.")
    files: dict[TreePath, StateFile] = Field(description="Every file the patches touch.")
    new_dirs: list[TreePath] = Field(description="Directories the patches created (removed by revert).")


class Journal(_Strict):
    state: Literal["applying"] = Field(description="The only state a journal has: an apply is running.")
    digest: Optional[Sha256] = Field(None, description="sha256 of the rest of the record (see ``digest``).")
    pid: int = Field(description="Process id of the apply.")
    backup: dict[TreePath, Optional[Sha256]] = Field(description="sha256 of each target before (null: absent).")
    new_dirs: list[TreePath] = Field(description="Directories the apply may create.")
    patches: list[str] = Field(description="Names of the patches being applied, in order.")
    done: list[str] = Field(description="Names of the patches applied so far.")


def read(path: Path, model: type[T]) -> T:
    """The JSON file ``path`` validated as ``model``; ``ValidationFailed`` (file:line: field) otherwise.

    A record with a ``digest`` must still have it: a record that reads well but was changed by hand
    (``"before": null`` where a file existed) would make a revert delete or rewrite the wrong files.
    """
    data, lines = load_json(path)
    record = parse_model(model, data, lines)
    stored = getattr(record, "digest", None)
    if stored is not None and stored != digest({k: v for k, v in data.items() if k != "digest"}):
        raise ValidationFailed([Problem(lines.location(("digest",)), "the record was changed after optkit wrote "
                                        "it: its digest does not match its content")])
    return record


def digest(record: dict) -> str:
    """sha256 of a record's canonical JSON (sorted keys, no spaces), without its ``digest``."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
