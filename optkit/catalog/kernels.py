"""Kernel build specs: ``kernels/<id>/kernel.yaml`` (and the patches beside it).

A kernel spec says what a kernel recipe changes in vllm-ascend's ``csrc/`` (op dirs, the
``build_aclnn.sh`` op list, ``AddConfig`` lines, the torch binding), how it is built, what a
rebuild touches, where the op source comes from, and which CPU reference checks its numerics.
``load_kernel`` validates one file into a record; loading them all (through the catalog cache)
and ``kernel_ready``, which says whether the source is really here, are in
``optkit.catalog.kernel_catalog``; ``lint_kernels`` audits all specs against the catalog (the
lint pass calls it). Nothing here needs a tree, CANN or an NPU.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from optkit.catalog.enums import VERIFICATION_ORDER, Verification
from optkit.catalog.frozen import freeze
from optkit.catalog.kernel_catalog import KERNEL_FILE, Kernels, kernel_ready, load_kernels
from optkit.catalog.linemap import LineMap
from optkit.catalog.loader import Catalog, parse_model
from optkit.catalog.patchfile import parse_dep3, patch_paths
from optkit.catalog.recipe_records import KernelSpecRecord
from optkit.catalog.schema import RecipeId
from optkit.catalog.yamlio import load_yaml
from optkit.errors import Problem, ValidationFailed, did_you_mean

DEP3_FIELDS = ("Description", "Origin", "Forwarded", "Last-Update", "Recipe")

# Family names as build_aclnn.sh matches them, with the full name to use instead. setup.py's
# gen_build_info (vllm-ascend 0.23.0 setup.py:153-184) maps only full names (and the aliases
# 910b/910c/310p) to a device type and asserts on anything else.
SOC_FAMILIES = {"ascend910_93": "ascend910_9391", "ascend910b": "ascend910b1", "ascend310p": "ascend310p1"}
SOC_ALIASES = {"910b": "ascend910b1", "910c": "ascend910_9392", "310p": "ascend310p1"}
_SOC_NAME = re.compile(r"^ascend[0-9a-z_-]+$")
_SOC_IN_COMMAND = re.compile(r"\bSOC_VERSION=(\S+)")


def _check_soc(name: str) -> str:
    if name in SOC_FAMILIES:
        raise ValueError(f"{name!r} is the SoC family, not a full SoC name: setup.py's gen_build_info asserts on "
                         f"it; use a full name such as {SOC_FAMILIES[name]!r}")
    if name in SOC_ALIASES:
        raise ValueError(f"{name!r} is setup.py's alias of {SOC_ALIASES[name]!r}; write the full name")
    if not _SOC_NAME.match(name):
        raise ValueError(f"{name!r} is not a SoC name such as 'ascend910_9391'")
    return name


def _check_relative(path: str) -> str:
    parts = Path(path).parts
    if not path or path.startswith(("/", "~")) or ".." in parts:
        raise ValueError(f"{path!r} must be a relative path without '..' (no machine paths)")
    return path


SocVersion = Annotated[str, AfterValidator(_check_soc)]
RelPath = Annotated[str, AfterValidator(_check_relative)]


class _Strict(BaseModel):
    # defer_build: a model's validator is built when it first validates, so importing is cheap
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class CsrcOp(_Strict):
    dir: RelPath = Field(description="Op directory in the vllm-ascend tree, e.g. 'csrc/attention/recurrent_gated_delta_rule'.")
    change: Literal["modified", "added"] = Field(description="'modified': the op exists upstream; 'added': a new op dir.")


class BuildListChange(_Strict):
    file: RelPath = Field("csrc/build_aclnn.sh", description="The script that holds the per-SoC op lists.")
    soc_family: str = Field(description="The SoC branch whose CUSTOM_OPS_ARRAY gains the op, e.g. 'ascend910_93'.")
    add: str = Field(pattern=r"^[a-z0-9_]+$", description="The op name to add to that CUSTOM_OPS_ARRAY.")


class AddConfig(_Strict):
    file: RelPath = Field(description="The op_host/*_def.cpp that registers the op.")
    soc_family: str = Field(description="SoC family of the line `this->AICore().AddConfig(\"<family>\", ...)`.")
    state: Literal["present", "to-add"] = Field(
        description="'present': the line is already in the 0.23.0 tree; 'to-add': the op source must add it.")


class TorchBinding(_Strict):
    op: str = Field(pattern=r"^[a-z0-9_]+$", description="Op name under torch.ops._C_ascend.")
    signature: str = Field(min_length=8, description="The op schema string registered by ops.def (after the change).")
    change: Literal["modified", "added"] = Field(description="Whether the schema exists upstream or is new.")
    schema_file: RelPath = Field("csrc/torch_binding.cpp", description="Where ops.def/ops.impl register the op.")
    meta_file: RelPath = Field(
        "csrc/torch_binding_meta.cpp", description="Where the meta (fake) impl lives; graph capture needs it.")
    adapter: Optional[RelPath] = Field(None, description="The *_torch_adpt.h calling EXEC_NPU_CMD, if any.")


class RebuildScope(_Strict):
    package: str = Field(description="What `build_aclnn.sh` produces and installs (one .run per SoC family).")
    op_list: str = Field(description="Which op list is built, e.g. the ascend910_93 CUSTOM_OPS_ARRAY.")
    op_count: int = Field(gt=0, description="Ops in that list (all rebuilt on any csrc change).")
    install_dir: RelPath = Field(description="Tree-relative directory the package is installed into.")
    wiped: bool = Field(description="Whether install_dir is emptied before the new package is installed.")
    per_op_install: Literal[False] = Field(
        False, description="Always false: vllm-ascend has no per-op build or install.")
    binding: str = Field(description="What happens to the vllm_ascend_C torch binding module.")


class Source(_Strict):
    kind: Literal["patches", "external", "patches-in-recipe"] = Field(
        description="'patches': diffs in this kernel dir; 'patches-in-recipe': the recipe's own patches; "
                    "'external': the op source is not in this repo.")
    description: str = Field(min_length=10, description="Where the source comes from, in words.")
    recipe_patches: list[RelPath] = Field(
        default_factory=list, description="patches-in-recipe only: root-relative paths of the recipe patches.")
    missing: list[RelPath] = Field(
        default_factory=list, description="external only: tree paths the op source must provide.")

    @model_validator(mode="after")
    def _lists_match_kind(self) -> "Source":
        if self.kind == "patches-in-recipe" and not self.recipe_patches:
            raise ValueError("kind patches-in-recipe needs 'recipe_patches'")
        if self.kind == "external" and not self.missing:
            raise ValueError("kind external needs 'missing': the tree paths the op source must provide")
        if self.kind != "patches-in-recipe" and self.recipe_patches:
            raise ValueError(f"'recipe_patches' is only meaningful with kind patches-in-recipe, not {self.kind}")
        if self.kind != "external" and self.missing:
            raise ValueError(f"'missing' is only meaningful with kind external, not {self.kind}")
        return self


class Tolerance(_Strict):
    compares: str = Field(min_length=4, description="What is compared with what.")
    atol: float = Field(ge=0, description="Absolute tolerance (torch.testing.assert_close atol).")
    rtol: float = Field(ge=0, description="Relative tolerance (torch.testing.assert_close rtol).")
    measured: str = Field("", description="Largest error measured on CPU, and on which inputs.")


class Reference(_Strict):
    module: RelPath = Field(description="Repo-relative path of the CPU (torch) reference module.")
    tests: list[RelPath] = Field(min_length=1, description="Repo-relative test files that use the reference.")
    tolerances: dict[str, Tolerance] = Field(
        default_factory=dict, description="Named tolerances; the tests read them from here.")
    notes: str = Field("", description="What the reference does and does not establish.")


class KernelSpec(_Strict):
    """One kernel change as data: what it touches, how it is built, where its source is."""

    id: RecipeId = Field(description="Stable kebab-case id; the folder name under kernels/.")
    title: str = Field(min_length=3, description="One-line title.")
    recipe: RecipeId = Field(description="The recipe whose `kernels:` lists this spec.")
    soc_versions: list[SocVersion] = Field(
        min_length=1, description="Full SoC names (SOC_VERSION values) the change is meant for.")
    csrc_ops: list[CsrcOp] = Field(default_factory=list, description="Op dirs touched or added.")
    build_list_change: Optional[BuildListChange] = Field(
        None, description="The build_aclnn.sh CUSTOM_OPS_ARRAY entry to add, if the op is not built yet.")
    add_config: list[AddConfig] = Field(
        default_factory=list, description="AddConfig lines the op registration needs for these SoCs.")
    torch_binding: Optional[TorchBinding] = Field(None, description="Torch binding change, if any.")
    build_command: str = Field(description="The command that rebuilds ops and binding, with a full SOC_VERSION.")
    rebuild_scope: RebuildScope = Field(description="What a rebuild touches besides this op.")
    source: Source = Field(description="Where the op source comes from.")
    contract: str = Field("", validate_default=True,
                          description="What the op computes, its inputs, outputs and limits (external sources).")
    patches: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+\.patch$")]] = Field(
        default_factory=list, validate_default=True, description="Patch files in this kernel dir (source kind 'patches'), in order.")
    reference: Optional[Reference] = Field(None, description="CPU numerics reference and its tolerances.")
    status: Literal["ready", "source-missing"] = Field(
        description="'ready' only if every source is present (see kernel_ready); else 'source-missing'.")
    notes: str = Field("", description="What is verified where, and what needs an NPU.")

    @field_validator("build_command")
    @classmethod
    def _full_soc_build(cls, command: str, info: ValidationInfo) -> str:
        socs = _SOC_IN_COMMAND.findall(command)
        if len(socs) != 1:
            raise ValueError("must set SOC_VERSION=<full SoC name> exactly once")
        _check_soc(socs[0])
        listed = info.data.get("soc_versions")
        if listed is not None and socs[0] not in listed:
            raise ValueError(f"builds for {socs[0]!r}, which is not in soc_versions")
        if "COMPILE_CUSTOM_KERNELS=1" not in command:
            raise ValueError("must set COMPILE_CUSTOM_KERNELS=1 (else the op package is not rebuilt)")
        if "setup.py build_ext" not in command and "pip install -e" not in command:
            raise ValueError("must run `python3 setup.py build_ext --inplace` or `pip install -e`")
        return command

    @field_validator("contract")
    @classmethod
    def _external_needs_contract(cls, contract: str, info: ValidationInfo) -> str:
        source = info.data.get("source")
        if source is not None and source.kind == "external" and len(contract.strip()) < 20:
            raise ValueError("an external source needs the op's contract: inputs, outputs, limits")
        return contract

    @field_validator("patches")
    @classmethod
    def _patches_match_source(cls, patches: list[str], info: ValidationInfo) -> list[str]:
        source = info.data.get("source")
        if source is not None and source.kind == "patches" and not patches:
            raise ValueError("source kind 'patches' needs at least one patch file here")
        if source is not None and source.kind != "patches" and patches:
            raise ValueError(f"lists files in this kernel dir, but the source kind is {source.kind!r}")
        return patches

    @field_validator("status")
    @classmethod
    def _ready_needs_source(cls, status: str, info: ValidationInfo) -> str:
        source = info.data.get("source")
        if status == "ready" and source is not None and source.kind == "external":
            raise ValueError("'ready' with an external source: the op source is not in this repo")
        return status


RECORDS = {KernelSpec: KernelSpecRecord}  # what freeze() makes of each model; the others become plain records


# --------------------------------------------------------------------------- loading


def load_kernel(folder: Path, display: str | None = None) -> tuple[KernelSpecRecord, LineMap]:
    """Validate one ``kernel.yaml`` (its ``id`` must equal its folder name); the spec as a record."""
    data, lines = load_yaml(folder / KERNEL_FILE, display or f"kernels/{folder.name}/{KERNEL_FILE}")
    spec = freeze(parse_model(KernelSpec, data, lines), RECORDS)
    if spec.id != folder.name:
        raise ValidationFailed([Problem(lines.location(("id",)),
                                        f"id {spec.id!r} differs from its folder name {folder.name!r}",
                                        "rename one of them")])
    return spec, lines


# --------------------------------------------------------------------------- lint


def lint_kernels(catalog: Catalog) -> list[Problem]:
    """Every problem of the kernel specs under ``catalog.root``, checked against the catalog."""
    try:
        kernels = load_kernels(catalog.root)
    except ValidationFailed as exc:
        return exc.problems
    known_socs = _target_soc_versions(catalog.root)
    problems: list[Problem] = []
    for kid, spec in kernels.specs.items():
        problems += _recipe_link(kernels, kid, spec, catalog)
        problems += _readiness(kernels, kid, spec, catalog)
        problems += _patch_files(kernels, kid, spec)
        problems += _references(kernels, kid, spec)
        problems += [Problem(kernels.location(kid, ("soc_versions", i)), f"{soc!r} is in no target's soc_versions",
                             did_you_mean(soc, known_socs))
                     for i, soc in enumerate(spec.soc_versions) if known_socs and soc not in known_socs]
    return sorted(problems, key=lambda p: (p.location.file, p.location.line or 0, p.message))


def _target_soc_versions(root: Path) -> set[str]:
    """The SoC names the targets list (read plainly: target files are validated by the resolve stage)."""
    socs: set[str] = set()
    for path in sorted((root / "targets").glob("*.yaml")):
        try:
            data, _ = load_yaml(path)
        except ValidationFailed:
            return set()  # target files have their own validation; do not report them twice
        listed = data.get("soc_versions") if isinstance(data, dict) else None
        socs.update(s for s in listed if isinstance(s, str)) if isinstance(listed, list) else None
    return socs


def _recipe_link(kernels: Kernels, kid: str, spec: KernelSpecRecord, catalog: Catalog) -> list[Problem]:
    where = kernels.location(kid, ("recipe",))
    if spec.recipe not in catalog:
        return [Problem(where, f"unknown recipe {spec.recipe!r}", did_you_mean(spec.recipe, catalog.recipes))]
    if kid not in catalog[spec.recipe].kernels:
        return [Problem(where, f"recipe {spec.recipe} does not list kernel {kid!r} in its kernels")]
    return []


def _readiness(kernels: Kernels, kid: str, spec: KernelSpecRecord, catalog: Catalog) -> list[Problem]:
    ready, reasons = kernel_ready(spec, kernels.root)
    where = kernels.location(kid, ("status",))
    if spec.status == "ready" and not ready:
        return [Problem(where, f"status ready, but {reason}") for reason in reasons]
    if spec.status == "source-missing" and ready:
        return [Problem(where, "every source is present; mark it status: ready")]
    if not ready and spec.recipe in catalog:
        recipe = catalog[spec.recipe]
        if VERIFICATION_ORDER.index(recipe.verification.level) >= VERIFICATION_ORDER.index(Verification.applies):
            return [Problem(catalog.location(spec.recipe, ("verification", "level")),
                            f"level {recipe.verification.level.value}, but kernel {kid} is {spec.status}")]
    return []


def _patch_files(kernels: Kernels, kid: str, spec: KernelSpecRecord) -> list[Problem]:
    folder = kernels.folders[kid]
    out = [Problem(kernels.location(kid, ("patches",)), f"{stray} is in the folder but not declared")
           for stray in sorted(p.name for p in folder.glob("*.patch") if p.name not in spec.patches)]
    allowed = _declared_targets(spec)
    for i, name in enumerate(spec.patches):
        path = folder / name
        if not path.is_file():
            continue  # reported by _readiness
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        where = kernels.location(kid, ("patches", i))
        header = parse_dep3(text)
        missing = [key for key in DEP3_FIELDS if key not in header]
        if missing:
            out.append(Problem(where, f"{name}: DEP-3 header lacks {', '.join(missing)}"))
        elif header["Recipe"] != spec.recipe:
            out.append(Problem(where, f"{name} says `Recipe: {header['Recipe']}` but the spec's recipe is {spec.recipe}"))
        out += [Problem(where, f"{name} touches {target}, which is outside csrc_ops and torch_binding")
                for target in patch_paths(text) if not target.startswith(allowed)]
    return out


def _declared_targets(spec: KernelSpecRecord) -> tuple[str, ...]:
    prefixes = [op.dir.rstrip("/") + "/" for op in spec.csrc_ops]
    if spec.torch_binding:
        binding = spec.torch_binding
        prefixes += [binding.schema_file, binding.meta_file] + ([binding.adapter] if binding.adapter else [])
    return tuple(prefixes)


def _references(kernels: Kernels, kid: str, spec: KernelSpecRecord) -> list[Problem]:
    # References live in tests/, which only a source checkout has (an installed wheel ships none).
    if spec.reference is None or not (kernels.root / "tests").is_dir():
        return []
    files = [(spec.reference.module, ("reference", "module"))]
    files += [(test, ("reference", "tests", i)) for i, test in enumerate(spec.reference.tests)]
    return [Problem(kernels.location(kid, path), f"{file} does not exist")
            for file, path in files if not (kernels.root / file).is_file()]
