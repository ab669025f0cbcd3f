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
from optkit.catalog.enums import CHOOSABLE, VERIFICATION_ORDER, Kind, UpstreamStatus, Verification  # noqa: F401 - re-exported
from optkit.catalog.patchfile import path_problem
from optkit.catalog.recipe_records import GainBehaviour, GainRecord, RecipeBehaviour, RecipeRecord
from optkit.errors import ConditionError


def _check_condition(text: str) -> str:
    try:
        compiled(text)
    except ConditionError as exc:
        raise ValueError(exc.render()) from None
    return text


def _check_specifier(text: str) -> str:
    from packaging.specifiers import SpecifierSet  # only validating needs it

    try:
        SpecifierSet(text).contains("0", prereleases=True)  # parses every version in it, not only the syntax
    except ValueError:  # InvalidSpecifier, or a number too long for int()
        raise ValueError(f"{text!r} is not a PEP 440 version specifier (e.g. '>=0.23.0,<0.26')") from None
    return text


def _check_tree_path(text: str) -> str:
    problem = path_problem(text)
    if problem is not None:
        raise ValueError(f"{text!r} is not a file of the vllm-ascend tree: {problem}")
    return text


def _check_regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"{text!r} is not a regular expression: {exc}") from None
    return text


def _check_shell_words(text: str) -> str:
    import shlex

    try:
        words = shlex.split(text)
    except ValueError:  # an unclosed quote, or a backslash with nothing after it
        raise ValueError(f"{text!r} does not split into shell words: a quote is left open or a backslash ends it "
                         "(close the quote, or write the argument's words as a shell command line would)") from None
    if not words:
        raise ValueError(f"{text!r} holds no argument (remove the entry)")
    return text


ConditionText = Annotated[str, AfterValidator(_check_condition)]
ServeArg = Annotated[str, AfterValidator(_check_shell_words)]
TreeFile = Annotated[str, AfterValidator(_check_tree_path)]
SpecifierText = Annotated[str, AfterValidator(_check_specifier)]
RegexText = Annotated[str, AfterValidator(_check_regex)]
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


class Probe(_Strict):
    """A machine-checked marker on a source tree: a file (or glob) and what must or must not be in it."""

    file: str = Field(pattern=r"^[A-Za-z0-9_.*/-]+$",
                      description="Path relative to the tree root, or a glob such as vllm_ascend/**/*.py.")
    present: list[RegexText] = Field(default_factory=list, description="Regexes that must each match the file(s).")
    absent: list[RegexText] = Field(default_factory=list, description="Regexes none of which may match (no file matches none).")
    exists: Optional[bool] = Field(None, description="true: the file must exist; false: it must not (unset: either).")

    @model_validator(mode="after")
    def _checks_something(self) -> "Probe":
        if not self.present and not self.absent and self.exists is None:
            raise ValueError("a probe needs 'present', 'absent' or 'exists'")
        return self


ReleaseStatus = Literal["new", "partly-upstream", "upstream", "superseded", "broken", "absent"]
"""What a release range has of the recipe's change: not upstream (new, partly-upstream), already
there (upstream), the code it changes replaced (superseded), machinery it calls removed (broken),
the code it changes not there yet (absent)."""


class ReleaseRange(_Strict):
    """The recipe on a range of vllm-ascend releases: its upstream status there (proven by probes)
    and the patch set written for that range."""

    versions: SpecifierText = Field(description="The releases this entry covers (PEP 440, pre-releases included).")
    status: ReleaseStatus = Field(description="Upstream status on these releases.")
    msg: str = Field(min_length=4, description="What these releases have or lack, in words (shown in plans).")
    evidence: str = Field("", description="PRs, release notes, file:line in the trees.")
    patches: list[str] = Field(default_factory=list, description="Patch files (declared in 'patches') written for these releases.")
    adds: list[str] = Field(default_factory=list, description="Knobs the patch set adds ('env:NAME', 'additional_config:a.b').")
    knob: Optional[str] = Field(None, description="Upstream: the knob the upstream form needs, if any (shown in plans).")
    note: Optional[str] = Field(None, min_length=4, description=(
        "Shown beside the recipe in plans that select it on these releases: what its patch set leaves out "
        "there, or what upstream already does of it."))
    probe: list[Probe] = Field(min_length=1, description="Markers that hold on every tree of this range (all of them).")


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


class HostCheck(_Strict):
    """A host setting the recipe needs outside `vllm serve`: preflight.sh reads ``file`` and, where it does not
    hold, prints ``fix`` (run as root). optkit never changes the host itself."""

    name: str = Field(min_length=3, description="What preflight.sh calls it, e.g. 'kernel.numa_balancing'.")
    file: str = Field(pattern=r"^/[A-Za-z0-9_./-]+$", description="Absolute path of the file that holds the setting "
                      "(a /proc/sys or /sys file, or a library that must exist).")
    want: Optional[str] = Field(None, min_length=1, description="Its content when the setting holds; absent: the "
                                "file must exist.")
    fix: str = Field(min_length=3, description="The command that sets it, as the cited source writes it.")


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


def _check_derived_value(value: Any) -> Any:
    from optkit.catalog.derive import check_expression
    from optkit.catalog.factspec import FACTS

    check_expression(value, FACTS)
    return value


def _check_derived_target(text: str) -> str:
    from optkit.catalog.derive import check_target

    return check_target(text)


class Derived(_Strict):
    """One launch value computed from the request's facts (``optkit.catalog.derive``: typed, never eval'd)."""

    set: Annotated[str, AfterValidator(_check_derived_target)] = Field(
        description="What it sets: 'serve:--flag' (a vllm serve flag and its value) or "
        "'compilation_config:key.path' / 'additional_config:key.path'.")
    value: Annotated[Any, AfterValidator(_check_derived_value)] = Field(
        description="An expression over int facts (optkit.catalog.derive): an integer, a fact name, or one "
        "operator (add, mul, max, min, ceil_div, round_up, if, ladder) with its operands.")
    why: str = Field(min_length=8, description="The rule the value follows, in words (shown by optkit explain).")
    basis: Literal["rule", "measured"] = Field(
        "rule", description="'rule': the value follows a written rule, no measured number backs it (plans say "
        "'unquantified'); 'measured': a number measured for it exists (name it in 'why').")


class Choice(_Strict):
    """A rule that fills in a request field the user left open (``--dp auto``, no ``--[no-]flashcomm1``)."""

    field: Literal[tuple(CHOOSABLE)] = Field(description="The request field: dp, flashcomm1 or prefix_caching.")
    value: Any = Field(description="What it becomes: true/false for flashcomm1 and prefix_caching; for dp an expression over int facts "
                       "(optkit.catalog.derive), evaluated on the request's facts with the field at its default.")
    when: ConditionText = Field(description="The rule applies only when this holds (on the facts with the open "
                                "fields at their defaults: dp 1, flashcomm1 and prefix_caching false).")
    why: str = Field(min_length=8, description="The rule, in words (shown by optkit plan and explain).")

    @model_validator(mode="after")
    def _value_fits_the_field(self) -> "Choice":
        if self.field != "dp" and not isinstance(self.value, bool):
            raise ValueError(f"value: {self.field} takes true or false, not {self.value!r}")
        if self.field == "dp":
            _check_derived_value(self.value)
        return self


class TutorialRef(_Strict):
    """A line of upstream's own tuning guide in one release's tree, checked by ``optkit lint --trees``."""

    release: str = Field(pattern=r"^\d+\.\d+\.\d+(rc\d+|\.post\d+)?$",
                         description="The vllm-ascend release whose tree holds the line (e.g. 0.30.0rc2).")
    file: str = Field(pattern=r"^docs/source/(tutorials/(models|features)|developer_guide/performance_and_debug|"
                      r"user_guide/(feature_guide|configuration))/[A-Za-z0-9._-]+\.md$",
                      description="The tutorial (or the tuning, feature or configuration guide), relative to the "
                      "tree root.")
    line: int = Field(ge=1, description="1-based line number in that release's file.")
    quote: str = Field(min_length=8, description="Exact text of that line (a part of it; spaces as in the file).")
    supports: str = Field(min_length=4, description="What the recipe takes from it (the rule or value).")


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
    versions: Optional[SpecifierText] = Field(
        None, description="The vllm-ascend releases the number holds on (absent: every release the recipe applies to); "
        "on another release it is not used for the estimate, which is then unquantified there unless another "
        "gain holds.")

    @model_validator(mode="after")
    def _has_numbers(self) -> "Gain":
        if self.delta is None and (self.before is None or self.after is None):
            raise ValueError("give either 'before' and 'after', or 'delta'")
        return self


class Risk(_Strict):
    severity: Literal["low", "medium", "high"] = Field(description="How bad it is if it bites.")
    text: str = Field(min_length=4, description="What can go wrong.")
    when: Optional[ConditionText] = Field(None, description="Only under this condition (always if absent).")


class Patch(_Strict):
    file: str = Field(pattern=r"^[A-Za-z0-9._-]+\.patch$", description="Patch file name inside recipes/<id>/.")
    description: str = Field(min_length=4, description="DEP-3 Description: what the patch changes and why.")
    origin: str = Field(description="DEP-3 Origin, e.g. 'vendor, article part 2' or 'backport, PR #15074'.")
    forwarded: str = Field("no", description="DEP-3 Forwarded: no, not-needed, or a URL.")
    applied_upstream: Optional[str] = Field(None, description="DEP-3 Applied-Upstream: version/commit, if landed.")
    last_update: _dt.date = Field(description="DEP-3 Last-Update (YYYY-MM-DD).")
    targets: list[TreeFile] = Field(min_length=1, description="Tree files the patch touches (relative paths, inside the tree).")
    status: Literal["pending", "present"] = Field(
        "pending", description="'present' once the file exists; 'pending' marks a declared, unwritten patch.")
    summary: Optional[str] = Field(None, min_length=4, description=(
        "What the change does and why, in upstream's words, on the releases this patch is written for, saying what "
        "those releases already have (the pull request's what/why: optkit export); absent: the recipe's summary."))
    evidence: str = Field("", description=(
        "What is known of the change's effect on these releases beyond the numbers in 'gains' (shown beside them "
        "in the pull request)."))
    gains: Optional[list[Gain]] = Field(None, description=(
        "The numbers that hold for these releases (the pull request quotes them); absent: the recipe's gains; "
        "empty: none of them holds here (say why in 'evidence')."))
    risks: Optional[list[Risk]] = Field(None, description=(
        "What can go wrong with this patch on these releases (the pull request's risks); absent: the recipe's risks."))


class VerificationInfo(_Strict):
    level: Verification = Field(description="Strongest verification that tests in this repo back "
                                "(hardware-verified is not declared: only a record in verified/ reaches it).")
    needs_npu: bool = Field(description="Whether full verification still needs an Ascend NPU.")
    notes: str = Field("", description="What was verified, how, and what remains.")

    @model_validator(mode="after")
    def _not_hardware_verified(self) -> "VerificationInfo":
        if self.level is Verification.hardware_verified:
            raise ValueError("level: hardware-verified is reached only through a measurement record in verified/ "
                             "(`optkit report LADDER --record`), not declared; give the strongest level the tests back")
        return self


class Accuracy(_Strict):
    """What a recipe claims about the model's outputs; the ladder's accuracy gate checks it."""

    check: Literal["greedy-identical", "tolerance"] = Field(
        description="'greedy-identical': at temperature 0 every output token equals the one without the recipe "
        "(checked on every prompt of the shipped set); 'tolerance': numerics may change, so only the exact-match "
        "accuracy on the shipped questions is checked, within `margin`.")
    margin: Optional[float] = Field(
        None, gt=0, le=100, description="tolerance only: percentage points of exact-match accuracy the recipe may "
        "lose against the same stack without it.")
    why: str = Field(min_length=4, description="Why the claim holds, or why the numerics may change.")

    @model_validator(mode="after")
    def _margin_only_for_tolerance(self) -> "Accuracy":
        if self.check == "tolerance" and self.margin is None:
            raise ValueError("a tolerance check needs 'margin' (percentage points of exact-match accuracy)")
        if self.check == "greedy-identical" and self.margin is not None:
            raise ValueError("'margin' is only meaningful with check: tolerance (greedy-identical allows no change)")
        return self


SIGNATURE_LAYERS = ("all", "gdn", "full_attention")
"""Which of the model's layers a per-layer signature repeats over (the model profile's num_layers,
gdn_layers, full_attention_layers)."""


class Signature(_Strict):
    """What a recipe removes or shrinks in an Ascend profile of one decode step (``optkit profile``).

    A signature names device ops (rows of ``kernel_details.csv``, the ``Ascend Hardware`` events of
    ``trace_view.json``) or host calls (the ``CANN`` / ``AscendCL@…`` events of ``trace_view.json``)
    and how many of them one decode step has; docs/profile.md says what each form reads.
    """

    what: Literal["kernel", "host-call"] = Field(
        "kernel", description="kernel: a device op (its Name, or Type with 'type'); host-call: a host API event "
        "(e.g. 'AscendCL@aclrtMemcpy', a blocking copy from pageable memory).")
    name: Optional[RegexText] = Field(
        None, description="Regex that must match the op's (or host event's) whole name; a kernel may give 'type' instead.")
    type: Optional[RegexText] = Field(
        None, description="Kernels only: regex that must match the op's whole Type column (e.g. 'ConcatD').")
    count: int = Field(1, ge=1, le=1000, description="How many one decode step has (per layer with per: layer).")
    per: Literal["step", "layer"] = Field("step", description="count is per decode step, or per layer of 'layers'.")
    layers: Optional[Literal[SIGNATURE_LAYERS]] = Field(
        None, description="With per: layer, which layers: all, gdn or full_attention (the model profile's counts).")
    input_dim: Optional[Literal["vocab_size", "hidden_size"]] = Field(
        None, description="Kernels only: one of the op's input shapes has this model dimension (e.g. the "
        "full-vocabulary Cast: vocab_size).")
    versions: SpecifierText = Field(">=0", description="vllm-ascend releases whose profiles show it under this name "
                                    "(PEP 440; names differ between releases).")
    effect: Literal["removes", "shrinks"] = Field(
        "removes", description="removes: the recipe takes these ops out of the step; shrinks: it makes them cheaper.")
    when: Optional[ConditionText] = Field(
        None, description="The recipe removes it only when this holds for the request (e.g. 'not spec.mtp'); "
        "otherwise the ops are reported as present but not this recipe's to remove.")
    msg: str = Field(min_length=4, description="What it is and why the recipe removes it, in words (shown in reports).")

    @model_validator(mode="after")
    def _consistent(self) -> "Signature":
        if self.name is None and (self.type is None or self.what == "host-call"):
            raise ValueError("a signature needs 'name' (or, for a kernel, 'type')")
        for key in ("name", "type"):
            if getattr(self, key) is not None and re.fullmatch(getattr(self, key), ""):
                raise ValueError(f"{key} {getattr(self, key)!r} matches an empty {key}, so it would match every op: "
                                 "name the op")
        if (self.per == "layer") != (self.layers is not None):
            raise ValueError("per: layer needs 'layers' (all, gdn or full_attention), and 'layers' needs per: layer")
        if self.what == "host-call" and (self.type is not None or self.input_dim is not None):
            raise ValueError("'type' and 'input_dim' describe kernels: a host-call signature has neither")
        return self


class Recipe(RecipeBehaviour, _Strict):
    """One optimization as data."""

    id: RecipeId = Field(description="Stable kebab-case id; the folder name under recipes/.")
    title: str = Field(min_length=3, description="One-line title.")
    summary: str = Field(min_length=10, description="What it does and why it helps, in a few sentences.")
    kind: Kind = Field(description="What it changes.")
    provenance: Provenance = Field(description="Article passage, seed-map section and upstream status.")
    versions: Versions = Field(description="Versions the recipe applies to.")
    releases: list[ReleaseRange] = Field(
        default_factory=list, description="Per release range: upstream status (with probes) and the patch set for it.")
    implied_by: Optional[ConditionText] = Field(
        None, description="Selected whenever this holds: the request itself asks for it (e.g. spec.mtp).")
    preconditions: list[Rule] = Field(default_factory=list, description="Must hold for correctness.")
    effective_when: list[Rule] = Field(default_factory=list, description="Must hold for the recipe to pay off.")
    requires: list[Link] = Field(default_factory=list, description="Recipes that must be selected with it.")
    conflicts: list[Link] = Field(default_factory=list, description="Recipes that must not be selected with it.")
    env: list[EnvVar] = Field(default_factory=list, description="Environment variables to export.")
    host: list[HostCheck] = Field(
        default_factory=list, description="Host settings outside `vllm serve` it needs; preflight.sh checks them "
        "(a FAIL when the recipe is selected, a WARN naming it when a host recipe is not).")
    additional_config: dict[str, Any] = Field(default_factory=dict, description="vllm-ascend --additional-config fragment.")
    compilation_config: dict[str, Any] = Field(default_factory=dict, description="vLLM --compilation-config fragment.")
    speculative_config: dict[str, Any] = Field(default_factory=dict, description="vLLM --speculative-config fragment.")
    serve_args: list[ServeArg] = Field(
        default_factory=list, description="Extra `vllm serve` arguments, each entry one or more shell words "
        "(`--max-num-seqs 64`; quoted as a shell command line would quote them).")
    derived: list[Derived] = Field(
        default_factory=list, description="Launch values computed from the request (e.g. --max-num-seqs from the "
        "concurrency and DP), each with its rule.")
    choices: list[Choice] = Field(
        default_factory=list, description="Request fields left open that this recipe's rules fill in, before "
        "resolution (optkit.resolve.choices); --without RECIPE leaves them unmade.")
    tutorials: list[TutorialRef] = Field(
        default_factory=list, description="Lines of upstream's tutorials, per release, that the recipe follows.")
    patches: list[Patch] = Field(default_factory=list, description="Source patches, applied in order.")
    kernels: list[RecipeId] = Field(default_factory=list, description="Kernel build specs under kernels/.")
    gains: list[Gain] = Field(default_factory=list, description="Reported gains (and regressions).")
    risks: list[Risk] = Field(default_factory=list, description="What can go wrong.")
    signatures: list[Signature] = Field(
        default_factory=list, description="What it removes or shrinks in an Ascend profile of a decode step, per "
        "release where names differ (read by `optkit profile`; docs/profile.md).")
    accuracy: Optional[Accuracy] = Field(
        None, description="Its claim about outputs (greedy-identical or a tolerance), checked by the ladder's "
        "accuracy gate; absent: no claim (output changes are reported, not gated).")
    verification: VerificationInfo = Field(description="How far it has been verified.")
    replaces_shipped: bool = Field(
        False, description="In a catalog given with --catalog: true to replace the shipped recipe of the same id "
        "(without it, reusing a shipped id is an error).")

    @model_validator(mode="after")
    def _unless_only_on_conflicts(self) -> "Recipe":
        for index, link in enumerate(self.requires):
            if link.unless:
                raise ValueError(f"requires[{index}].unless: 'unless' is only meaningful on conflicts")
        return self

    @model_validator(mode="after")
    def _release_patches_declared(self) -> "Recipe":
        declared = [p.file for p in self.patches]
        owners: dict[str, int] = {}
        for index, entry in enumerate(self.releases):
            for name in entry.patches:
                if name not in declared:
                    raise ValueError(f"releases[{index}].patches: {name!r} is not declared in 'patches'")
                if name in owners:
                    raise ValueError(f"releases[{index}].patches: {name!r} is already in releases[{owners[name]}]")
                owners[name] = index
        return self

    @model_validator(mode="after")
    def _kind_matches_content(self) -> "Recipe":
        if self.kind is Kind.source_patch and not self.patches:
            raise ValueError("a source-patch recipe needs at least one entry in 'patches'")
        if self.kind is Kind.kernel and not self.kernels:
            raise ValueError("a kernel recipe needs at least one entry in 'kernels'")
        if self.kind is Kind.host and not self.host:
            raise ValueError("a host recipe needs at least one entry in 'host'")
        return self


# The record class each model is frozen into (``optkit.catalog.frozen``); the others become plain records.
RECORDS = {Recipe: RecipeRecord, Gain: GainRecord}
