"""The MoE recipes' patches, run on CPU against the real vllm-ascend trees they patch.

Each release design has its own patch set (0.23.x: ``fused_moe_0_23_0.py``; 0.30.x: the
``AscendMoERunner`` / ``AscendSharedExperts`` / ``RoutedMoEMilestones`` design of PR #18122),
and each test runs the patched code, taken out of the patched tree, among the fakes of
``moe_fakes`` (see there). The reference is the same code of the pristine tree run on the same
fakes: the patches must compute exactly what upstream computes (the fake tensors spell every
operation, so equal results mean the shared output is reduced exactly once) and change only
where the work is issued. The mutation tests break the patched logic on purpose in a copy and
check that these same checks catch it.
"""

from __future__ import annotations

import ast
import textwrap
from abc import ABC, abstractmethod
from pathlib import Path
from types import SimpleNamespace

import pytest

from moe_fakes import Case, Dispatcher, Npu, QuantMethod, Source, constant, design, find_def, run_layer
from patched_tree import load_defs, load_module, patched_tree

from compat_support import check_python, pristine, specs, touched_python  # noqa: E402 (tests/ is on the path now)

pytestmark = [pytest.mark.tree]

MOE_RECIPES = [
    "moe-shared-expert-sidestream-ar",
    "moe-skip-dispatch-combine-events",
    "moe-shared-expert-weight-prefetch",
    "moe-fusedmc2-overlap-coexist",
    "mc2-token-capacity-1024",
]
VERSIONS = ["0.23.0", "0.30.0rc2"]


def with_patches(version: str) -> list[str]:
    """The MoE recipes that have a patch written for ``version``."""
    return [rid for rid in MOE_RECIPES if specs([rid], version)]


_TREES: dict[str, Path] = {}


def patched(version: str, tmp_path_factory) -> Path:
    """The ``version`` tree with the MoE patches written for it applied (made once per session)."""
    if version not in _TREES:
        _TREES[version] = patched_tree(tmp_path_factory.mktemp(f"moe-{version}"), with_patches(version), version)
    return _TREES[version]


class Trees(SimpleNamespace):
    version: str
    patched: Source
    pristine: Source

    @property
    def design(self) -> str:
        return design(self.version)

    def run(self, case: Case, src: Source | None = None):
        return run_layer(self.version, src or self.patched, case)

    def reference(self, case: Case):
        return run_layer(self.version, self.pristine, case)


@pytest.fixture(scope="module", params=VERSIONS)
def moe(request, tmp_path_factory) -> Trees:
    version = request.param
    return Trees(version=version, patched=Source(patched(version, tmp_path_factory)), pristine=Source(pristine(version)))


@pytest.fixture(scope="module")
def tree_0_23(tmp_path_factory) -> Path:
    return patched("0.23.0", tmp_path_factory)


@pytest.fixture(scope="module")
def tree_0_30(tmp_path_factory) -> Path:
    return patched("0.30.0rc2", tmp_path_factory)


# --------------------------------------------------------------------------- the checks


def moved_all_reduce_problems(run, ref) -> list[str]:
    """The patched run computes what upstream computes and differs only by the shared expert's
    all-reduce, issued last on the side stream (after the shared MLP) instead of on the default
    stream, with the default stream joining the side stream once, after that all-reduce."""
    (npu, seen), (ref_npu, ref_seen) = run, ref
    problems = []
    if seen.get("result") != ref_seen.get("result"):
        problems.append(f"result {seen.get('result')!r} != upstream's {ref_seen.get('result')!r}")
    work, ref_work = npu.work(), ref_npu.work()
    side = [op for s, op in work if s == "side"]
    ref_side = [op for s, op in ref_work if s == "side"]
    if side != ref_side + ["all_reduce"]:
        problems.append(f"side stream {side}, expected upstream's {ref_side} + the all-reduce")
    main, ref_main = [op for s, op in work if s == "main"], [op for s, op in ref_work if s == "main"]
    if "all_reduce" not in ref_main or main != _without_first(ref_main, "all_reduce"):
        problems.append(f"default stream {main}, expected upstream's {ref_main} without its first all-reduce")
    joins = [i for i, entry in enumerate(npu.log) if entry == ("main", "wait_stream", "side")]
    issued = [i for i, (s, op, _) in enumerate(npu.log) if (s, op) == ("side", "all_reduce")]
    if len(joins) != 1 or not issued or joins[0] < issued[-1]:
        problems.append(f"the default stream must join the side stream once, after its all-reduce (joins at {joins})")
    return problems


def unchanged_problems(run, ref) -> list[str]:
    """The patched run issues the same work on the same streams in the same order as upstream."""
    (npu, seen), (ref_npu, ref_seen) = run, ref
    problems = []
    if seen.get("result") != ref_seen.get("result"):
        problems.append(f"result {seen.get('result')!r} != upstream's {ref_seen.get('result')!r}")
    if npu.work() != ref_npu.work():
        problems.append(f"work {npu.work()} != upstream's {ref_npu.work()}")
    return problems


def _without_first(ops: list[str], op: str) -> list[str]:
    i = ops.index(op)
    return ops[:i] + ops[i + 1:]


# --------------------------------------------------------------------------- moe-shared-expert-sidestream-ar


@pytest.mark.parametrize("comm", ["MC2", "ALLTOALL", "FUSED_MC2"])
def test_the_shared_all_reduce_moves_to_the_side_stream(moe, comm):
    case = Case(comm=comm)
    assert moved_all_reduce_problems(moe.run(case), moe.reference(case)) == []


# Upstream's behaviour the patched layer must match when it moves nothing. Under ACL-graph capture
# the 0.23 patch keeps the article's guard on the whole overlap (so upstream with the overlap off
# is the reference); the 0.30 patch narrows it to the all-reduce, so upstream 0.30's own overlap
# under capture is.
UNCHANGED = {
    "acl-graph-capture": (Case(capturing=True), {"0.23": Case(overlap=False, capturing=True),
                                                 "0.30": Case(capturing=True)}),
    "overlap-off": (Case(overlap=False), {}),
    "allgather": (Case(comm="ALLGATHER"), {}),
    "allgather-overlap-off": (Case(comm="ALLGATHER", overlap=False), {}),
    "shared-expert-dp": (Case(shared_dp=True), {}),
    "flashcomm1-sequence-parallel": (Case(sequence_parallel=True), {"0.23": None}),
}


@pytest.mark.parametrize("name", UNCHANGED)
def test_where_upstream_has_no_all_reduce_to_move_the_work_is_upstreams(moe, name):
    case, references = UNCHANGED[name]
    reference = references.get(moe.design, case)
    if reference is None:
        pytest.skip(f"{name}: no such mode in the {moe.design} design's driver")
    assert unchanged_problems(moe.run(case), moe.reference(reference)) == []


def test_during_capture_the_all_reduce_stays_on_the_default_stream_after_the_join(moe):
    npu, _ = moe.run(Case(capturing=True))
    assert npu.streams_of("all_reduce") == ["main"]
    joins = [i for i, entry in enumerate(npu.log) if entry == ("main", "wait_stream", "side")]
    assert all(i < npu.index("main", "all_reduce") for i in joins)


# --------------------------------------------------------------------------- moe-skip-dispatch-combine-events


@pytest.mark.parametrize("case, skip", [
    pytest.param(Case(), True, id="overlap"),
    pytest.param(Case(capturing=True), True, id="acl-graph-capture"),
    pytest.param(Case(overlap=False), False, id="overlap-off"),
    pytest.param(Case(gate_overlap=True), False, id="0.23-flash-common3-gate-path"),
])
def test_skip_events_flag_is_set_only_around_the_routed_experts(moe, case, skip):
    if case.gate_overlap and moe.design != "0.23":
        pytest.skip("multistream_overlap_gate was removed in 0.26.0rc1 (PR #11956)")
    _, seen = moe.run(case)
    assert seen["skip_during_routed"] is skip
    assert seen["skip_after"] is False


def test_skip_events_flag_is_reset_when_the_routed_experts_raise(moe):
    _, seen = moe.run(Case(routed_raises=True))
    assert seen["skip_during_routed"] is True and "raised" in seen
    assert seen["skip_after"] is False


FIRST_ROUTED_OP = {"0.23": "routed_experts", "0.30": "dispatch"}


@pytest.mark.parametrize("comm", ["MC2", "ALLTOALL"])
def test_with_events_skipped_the_side_stream_waits_only_for_its_input(moe, comm):
    npu, _ = moe.run(Case(comm=comm))
    side = [(i, op, arg) for i, (s, op, arg) in enumerate(npu.log) if s == "side"]
    first_matmul = next(n for n, (_, op, _) in enumerate(side) if op == "matmul")
    # (0.23.x: moe-shared-expert-weight-prefetch's join of the prefetch stream comes in between)
    waits = [entry for entry in side[:first_matmul] if entry[1] != "prefetch_postprocess"]
    routed = npu.index("main", FIRST_ROUTED_OP[moe.design])
    assert waits and all(op == "wait_event" for _, op, _ in waits)
    for _, _, event in waits:  # its inputs: recorded on the default stream before the routed experts
        assert npu.log[npu.recorded_at(event)][0] == "main" and npu.recorded_at(event) < routed
    assert [op for _, op, _ in side[first_matmul:] if op == "wait_event"] == []
    # Upstream paces the shared expert with the routed stage events: the skip removes those waits.
    ref_npu, _ = moe.reference(Case(comm=comm))
    ref_side = [op for s, op, _ in ref_npu.log if s == "side"]
    assert "wait_event" in ref_side[ref_side.index("matmul"):]


@pytest.mark.parametrize("comm, stage_records", [("MC2", 4), ("ALLTOALL", 4), ("ALLGATHER", 3), ("FUSED_MC2", 0)])
def test_0_30_skipping_saves_every_routed_stage_record(tree_0_30, comm, stage_records):
    """dispatch, activation-overlap start (MC2/ALLTOALL only), gmm2 and combine; FUSED_MC2 records none."""
    case = Case(comm=comm)
    records = [run_layer("0.30.0rc2", src, case)[0].ops("main").count("record_event")
               for src in (Source(tree_0_30), Source(pristine("0.30.0rc2")))]
    assert records[1] - records[0] == stage_records


# --------------------------------------------------------------------------- moe_comm_method.py, moe_mlp.py


@pytest.mark.parametrize("skip", [False, True])
def test_0_23_fused_experts_records_dispatch_and_combine_events_unless_skipped(tree_0_23, skip):
    npu = Npu()
    torch = SimpleNamespace(npu=npu, float32="f32", float16="f16", bfloat16="bf16", int8="i8",
                            float8_e4m3fn="f8", uint8="u8")
    ctx = SimpleNamespace(moe_comm_method=object(), skip_dispatch_combine_events=skip)
    fakes = {"torch": torch, "_EXTRA_CTX": ctx, "ABC": ABC, "abstractmethod": abstractmethod,
             "build_token_dispatch_input": lambda **kwargs: None,
             "build_mlp_compute_input": lambda **kwargs: None,
             "FusedExpertsResult": SimpleNamespace,
             "QuantType": load_module(tree_0_23 / "vllm_ascend/quantization/quant_type.py").QuantType}
    method = load_defs(tree_0_23 / "vllm_ascend/ops/fused_moe/moe_comm_method.py", ["MoECommMethod"], fakes)
    fused_experts = method["MoECommMethod"].fused_experts
    layer = SimpleNamespace(token_dispatcher=Dispatcher(npu), use_fusion_ops=False,
                            _apply_mlp=lambda mlp_input: (npu.issue("mlp"), ("mlp_out", None))[1])
    given = SimpleNamespace(hidden_states=SimpleNamespace(dtype="bf16"), topk_ids="ids",
                            routing=SimpleNamespace(log2phy=None), swiglu_limit=0.0)
    result = fused_experts(layer, given)
    if skip:
        assert npu.ops("main") == ["dispatch", "mlp", "combine"]
        assert result.before_dispatch_evt is None and result.before_combine_evt is None
    else:
        assert npu.ops("main") == ["record_event", "dispatch", "mlp", "record_event", "combine"]
        assert result.before_dispatch_evt is not None and result.before_combine_evt is not None


def fused_experts_0_30(tree: Path, skip: bool, overlaps_gmm1: bool, mlp_event: bool | None):
    """MoECommMethod.fused_experts of the 0.30 tree; ``mlp_event``: None runs the real apply_moe_mlp,
    True/False a legacy ``_apply_mlp`` that returns an event or not (LoRA/310P MLPs)."""
    npu = Npu()
    torch = SimpleNamespace(npu=npu, float32="f32", float16="f16", bfloat16="bf16", int8="i8",
                            float8_e4m3fn="f8", uint8="u8")
    ctx = SimpleNamespace(moe_comm_method=object(), skip_dispatch_combine_events=skip)
    mlp = load_defs(tree / "vllm_ascend/ops/fused_moe/moe_mlp.py", ["apply_moe_mlp"], {"torch": torch})
    fakes = {"torch": torch, "_EXTRA_CTX": ctx, "ABC": ABC, "abstractmethod": abstractmethod,
             "build_token_dispatch_input": lambda **kwargs: None,
             "build_mlp_compute_input": lambda **kwargs: SimpleNamespace(quant=SimpleNamespace(is_quant=False), activation="silu"),
             "FusedExpertsResult": SimpleNamespace, "apply_moe_mlp": mlp["apply_moe_mlp"],
             "QuantType": load_module(tree / "vllm_ascend/quantization/quant_type.py").QuantType}
    method = load_defs(tree / "vllm_ascend/ops/fused_moe/moe_comm_method.py", ["MoECommMethod"], fakes)["MoECommMethod"]
    layer = SimpleNamespace(token_dispatcher=Dispatcher(npu), moe_config=None, shared_activation_overlaps_routed_gmm1=overlaps_gmm1,
                            _apply_mlp=lambda mlp_input: (npu.issue("mlp"), ("mlp_out", npu.main.record_event()
                                                                             if mlp_event else None))[1])
    quant = None if mlp_event is not None else QuantMethod(npu)
    result = method.fused_experts(layer, SimpleNamespace(hidden_states=SimpleNamespace(dtype="bf16")), quant)
    return npu, result


STAGE_EVENTS = ("before_dispatch_evt", "shared_activation_overlap_start_evt", "before_gmm2_evt", "before_combine_evt")


@pytest.mark.parametrize("overlaps_gmm1", [True, False], ids=["mc2-alltoall", "allgather"])
@pytest.mark.parametrize("mlp_event", [None, True], ids=["apply-moe-mlp", "mlp-with-its-own-event"])
def test_0_30_fused_experts_records_no_stage_event_while_skipping(tree_0_30, overlaps_gmm1, mlp_event):
    npu, result = fused_experts_0_30(tree_0_30, True, overlaps_gmm1, mlp_event)
    assert [getattr(result, name) for name in STAGE_EVENTS] == [None] * 4
    assert npu.ops("main").count("record_event") == (1 if mlp_event else 0)  # the legacy MLP's own record


@pytest.mark.parametrize("overlaps_gmm1", [True, False], ids=["mc2-alltoall", "allgather"])
def test_0_30_fused_experts_records_every_stage_event_otherwise(tree_0_30, overlaps_gmm1):
    npu, result = fused_experts_0_30(tree_0_30, False, overlaps_gmm1, None)
    expected = (["record_event", "dispatch"] + (["record_event"] if overlaps_gmm1 else [])
                + ["gmm1", "record_event", "gmm2", "record_event", "combine"])
    assert npu.ops("main") == expected
    assert all(getattr(result, name) is not None for name in STAGE_EVENTS)


@pytest.mark.parametrize("skip", [False, True])
def test_0_23_before_gmm2_event_is_none_when_skipped(tree_0_23, skip):
    npu = Npu()
    ctx = SimpleNamespace(skip_dispatch_combine_events=skip)
    fakes = {"torch": SimpleNamespace(npu=npu), "_EXTRA_CTX": ctx}
    record = load_defs(tree_0_23 / "vllm_ascend/ops/fused_moe/moe_mlp.py", ["_record_before_gmm2_event"], fakes)
    event = record["_record_before_gmm2_event"]()
    assert (event is None) is skip
    assert npu.ops("main") == ([] if skip else ["record_event"])


def test_0_23_all_three_gmm2_sites_use_the_skippable_event(tree_0_23):
    body = ast.unparse(find_def(tree_0_23 / "vllm_ascend/ops/fused_moe/moe_mlp.py", "quant_apply_mlp"))
    assert body.count("before_gmm2_evt = _record_before_gmm2_event()") == 3
    assert "record_event()" not in body


def test_flag_is_a_known_extra_attribute_defaulted_per_forward(moe):
    path = moe.patched / "vllm_ascend/ascend_forward_context.py"
    proxy = load_defs(path, ["_ExtraForwardContextProxy"], {"Any": object})["_ExtraForwardContextProxy"]
    assert "skip_dispatch_combine_events" in proxy.extra_attrs
    body = ast.unparse(find_def(path, "set_ascend_forward_context"))
    assert "forward_context.skip_dispatch_combine_events = False" in body


# --------------------------------------------------------------------------- moe-shared-expert-weight-prefetch (0.23.x)


def test_shared_weights_are_prefetched_before_the_routed_experts_and_joined_before_the_first_matmul(tree_0_23):
    max_size = constant(tree_0_23 / "vllm_ascend/ops/weight_prefetch.py", "MAX_PREFETCH_WEIGHT_SIZE")
    big = Case(weight_bytes={"gate_up": 2 * max_size, "down": 1 << 20})
    npu, _ = run_layer("0.23.0", Source(tree_0_23), big)
    main = [(op, arg) for s, op, arg in npu.log if s == "main"]
    assert main[:2] == [("prefetch_preprocess", max_size), ("prefetch_preprocess", 1 << 20)]
    assert [op for op, _ in main].index("routed_experts") > 1
    side = npu.ops("side")
    assert side.index("prefetch_postprocess") == side.index("matmul") - 1


@pytest.mark.parametrize("case, joined_on", [
    pytest.param(Case(overlap=False), None, id="overlap-off"),
    pytest.param(Case(quantized_shared=True), None, id="quantized-shared-expert"),
    pytest.param(Case(gate_overlap=True), None, id="flash-common3-gate-path"),
    pytest.param(Case(capturing=True), "main", id="capture-joins-on-the-capture-stream"),
])
def test_prefetch_is_always_joined_where_it_is_issued(tree_0_23, case, joined_on):
    npu, _ = run_layer("0.23.0", Source(tree_0_23), case)
    assert npu.streams_of("prefetch_postprocess") == ([joined_on] if joined_on else [])
    assert len(npu.streams_of("prefetch_preprocess")) == (2 if joined_on else 0)


# --------------------------------------------------------------------------- mc2-token-capacity-1024


def mc2_capacity(tree: Path, capture_max: int, tp: int, fused_mc2: int = 0) -> int:
    """set_mc2_tokens_capacity of ``tree`` (0.23.x: one cap; 0.28.0rc1+: the named caps, with
    enable_fused_mc2 taking the fused operator's), for a request with capture sizes up to ``capture_max``."""
    path = tree / "vllm_ascend/ascend_forward_context.py"
    module = ast.parse(path.read_text(encoding="utf-8"))
    caps = {node.targets[0].id: ast.literal_eval(node.value) for node in module.body
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "").endswith("_TOKENS_PER_RANK_LIMIT")}
    fakes = {"_mc2_tokens_capacity": None, **caps,
             "get_ascend_config": lambda: SimpleNamespace(enable_prefill_mc2=False, enable_fused_mc2=fused_mc2),
             "use_cann_megamoe": lambda config: False, "_is_decode_only_node": lambda config: False}
    namespace = load_defs(path, ["set_mc2_tokens_capacity"], fakes)
    config = SimpleNamespace(
        compilation_config=SimpleNamespace(cudagraph_capture_sizes=[capture_max],
                                           max_cudagraph_capture_size=capture_max),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp))
    namespace["set_mc2_tokens_capacity"](config, max_num_reqs=0, uniform_decode_query_len=1)
    return namespace["_mc2_tokens_capacity"]


CAPTURES = [(40, 2), (1000, 2), (2048, 2), (4096, 2), (4097, 4), (3000, 1)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("capture_max, tp", CAPTURES)
def test_mc2_capacity_is_capped_at_1024_tokens_per_tp_rank(version, capture_max, tp, tmp_path_factory):
    per_rank = -(-capture_max // tp)
    assert mc2_capacity(patched(version, tmp_path_factory), capture_max, tp) == min(per_rank, 1024) * tp
    assert mc2_capacity(pristine(version), capture_max, tp) == min(per_rank, 512) * tp


@pytest.mark.parametrize("capture_max, tp", CAPTURES)
def test_0_30_the_fused_operators_own_cap_stays_512(tree_0_30, capture_max, tp):
    assert mc2_capacity(tree_0_30, capture_max, tp, fused_mc2=1) == min(-(-capture_max // tp), 512) * tp


# --------------------------------------------------------------------------- moe-fusedmc2-overlap-coexist


def run_fused_mc2_guard(tree: Path) -> tuple[SimpleNamespace, list[str]]:
    """The `if enable_fused_mc2 == 1 and multistream_overlap_shared_expert` block of AscendConfig
    (in __init__ on 0.23.x, in derive_and_validate from 0.27.1rc1), run on both switches on."""
    config_class = find_def(tree / "vllm_ascend/ascend_config.py", "AscendConfig")
    guard = next(node for node in ast.walk(config_class) if isinstance(node, ast.If)
                 and "enable_fused_mc2 == 1" in ast.unparse(node.test)
                 and "multistream_overlap_shared_expert" in ast.unparse(node.test))
    warnings: list[str] = []
    namespace = {"logger": SimpleNamespace(warning_once=warnings.append, warning=warnings.append)}
    exec("def guard(self):\n" + textwrap.indent(ast.unparse(guard), "    "), namespace)
    config = SimpleNamespace(enable_fused_mc2=1, multistream_overlap_shared_expert=True)
    namespace["guard"](config)
    return config, warnings


def test_fused_mc2_keeps_the_overlap_and_warns_about_the_deadlock(moe):
    config, warnings = run_fused_mc2_guard(moe.patched.root)
    assert config.multistream_overlap_shared_expert is True
    assert len(warnings) == 1
    assert "#12237" in warnings[0] and "moe-fusedmc2-overlap-coexist" in warnings[0]
    assert "deadlock" in warnings[0]
    upstream, _ = run_fused_mc2_guard(moe.pristine.root)
    assert upstream.multistream_overlap_shared_expert is False


# --------------------------------------------------------------------------- the patch sets themselves


@pytest.mark.parametrize("version", VERSIONS)
def test_each_patch_set_compiles_and_passes_pyflakes(version, tmp_path_factory):
    tree = patched(version, tmp_path_factory)
    assert check_python(touched_python(tree, specs(with_patches(version), version))) == []


def test_post1_has_the_same_moe_files_as_0_23_0():
    """0.23.0.post1 changed none of the files the 0.23.x MoE patches touch, so the 0.23.0 runs
    above hold for it unchanged (the patches apply there exactly: tests/test_compat.py)."""
    touched = sorted({t for s in specs(with_patches("0.23.0"), "0.23.0") for t in s.targets}
                     | {"vllm_ascend/ops/fused_moe/fused_moe.py", "vllm_ascend/ops/weight_prefetch.py",
                        "vllm_ascend/utils.py", "vllm_ascend/quantization/quant_type.py"})
    base, post1 = pristine("0.23.0"), pristine("0.23.0.post1")
    assert [rel for rel in touched if (base / rel).read_bytes() != (post1 / rel).read_bytes()] == []


# --------------------------------------------------------------------------- mutation checks


MUTATIONS = {
    # 0.30: the reduce op still reduces: the shared output is all-reduced twice.
    "0.30-double-all-reduce": ("0.30.0rc2", "vllm_ascend/ops/register_custom_ops.py",
                               "if runner._reduce_shared_output_on_shared_stream():", "if False:", Case(), "moved"),
    # 0.30: the shared expert never reduces on the side stream: the output is not reduced at all.
    "0.30-no-side-all-reduce": ("0.30.0rc2", "vllm_ascend/ops/fused_moe/shared_experts.py",
                                "elif reduce_on_shared_stream:", "elif False:", Case(), "moved"),
    # 0.30: the all-reduce is issued after the join instead of inside the overlap.
    "0.30-all-reduce-after-join": (
        "0.30.0rc2", "vllm_ascend/ops/fused_moe/shared_experts.py",
        "            self.wait_for_output()\n",
        "            self.wait_for_output()\n            if reduce_on_shared_stream:\n"
        "                shared_out = tensor_model_parallel_all_reduce(shared_out)\n", Case(), "moved"),
    # 0.30: the article's capture guard is dropped: captured graphs get the side-stream all-reduce.
    "0.30-no-capture-guard": ("0.30.0rc2", "vllm_ascend/ops/fused_moe/fused_moe.py",
                              "            and not _EXTRA_CTX.capturing\n", "", Case(capturing=True), "unchanged"),
    # 0.30: the side-stream all-reduce also where upstream reduces nothing separately.
    "0.30-all-reduce-under-allgather": ("0.30.0rc2", "vllm_ascend/ops/fused_moe/fused_moe.py",
                                        "{MoECommType.ALLTOALL, MoECommType.MC2, MoECommType.FUSED_MC2}",
                                        "set(MoECommType)", Case(comm="ALLGATHER"), "unchanged"),
    # 0.30: FUSED_MC2 forgotten: its all-reduce stays on the default stream.
    "0.30-fused-mc2-forgotten": ("0.30.0rc2", "vllm_ascend/ops/fused_moe/fused_moe.py",
                                 "MoECommType.MC2, MoECommType.FUSED_MC2}", "MoECommType.MC2}",
                                 Case(comm="FUSED_MC2"), "moved"),
    # 0.30: the flag is not reset: every later MoE layer runs without events.
    "0.30-flag-not-reset": ("0.30.0rc2", "vllm_ascend/ops/fused_moe/fused_moe.py",
                            "                if skip_events:\n                    _EXTRA_CTX.skip_dispatch_combine_events = False\n",
                            "                pass\n", Case(routed_raises=True), "flag-reset"),
    # 0.30: one stage event still recorded: a partial set, the shared expert fails fast.
    "0.30-partial-event-set": ("0.30.0rc2", "vllm_ascend/ops/fused_moe/moe_comm_method.py",
                               "before_combine_evt = None if skip_shared_expert_events else ",
                               "before_combine_evt = ", Case(), "runs"),
    # 0.23: the reduce on the default stream is kept as well: reduced twice.
    "0.23-double-all-reduce": ("0.23.0", "vllm_ascend/ops/fused_moe/fused_moe_0_23_0.py",
                               "        elif need_all_reduce:\n", "        if need_all_reduce:\n", Case(), "moved"),
    # 0.23: the flag is not reset.
    "0.23-flag-not-reset": ("0.23.0", "vllm_ascend/ops/fused_moe/fused_moe_0_23_0.py",
                            "            if skip_events:\n                _EXTRA_CTX.skip_dispatch_combine_events = False\n",
                            "            pass\n", Case(routed_raises=True), "flag-reset"),
}


def caught(check: str, trees: Trees, src: Source, case: Case) -> bool:
    """Whether the check the normal tests run for ``case`` fails on ``src``."""
    try:
        run = trees.run(case, src)
    except Exception:  # the mutated code does not even run
        return True
    if check == "runs":
        return "raised" in run[1]
    if check == "flag-reset":
        return run[1]["skip_after"] is not False
    if check == "moved":
        return bool(moved_all_reduce_problems(run, trees.reference(case)))
    return bool(unchanged_problems(run, trees.reference(case)))


@pytest.mark.parametrize("name", MUTATIONS)
def test_the_checks_catch_a_broken_patch(name, tmp_path, tmp_path_factory):
    version, rel, old, new, case, check = MUTATIONS[name]
    trees = Trees(version=version, patched=Source(patched(version, tmp_path_factory)), pristine=Source(pristine(version)))
    assert not caught(check, trees, trees.patched, case), "the check fails on the unbroken patch"
    assert caught(check, trees, trees.patched.mutated(tmp_path, rel, old, new), case)


# --------------------------------------------------------------------------- the release entries

RELEASE_RECIPES = MOE_RECIPES + ["attn-weight-prefetch-next-layer"]


@pytest.mark.parametrize("recipe_id", RELEASE_RECIPES)
def test_every_release_is_what_its_entry_says(recipe_id):
    """On every known release tree, the probes of the entry that covers its version hold."""
    from compat_support import CATALOG, release_trees
    from optkit.versions.probes import recipe_on_tree
    from packaging.version import Version

    wrong = {}
    for version, root in release_trees().items():
        found = recipe_on_tree(CATALOG[recipe_id], root, Version(version))
        if found.declared is None or found.entry is not found.declared:
            failing = [r.why for rs in found.results for r in rs if not r.holds]
            wrong[version] = (found.declared.versions if found.declared else None, failing)
    assert wrong == {}


# The releases each patch written in the port applies to, no fuzz (what the entries' evidence
# says); the 0.23.x patches are only required to apply to every release of their range: some apply
# textually to neighbours too (0.23.0rc1; the prefetch patch even to 0.24.0rc1, where what it calls
# is gone), which the entries leave out on purpose.
PORTED = {
    "0001-shared-expert-ar-on-side-stream-0.30.patch": {"0.30.0rc1", "0.30.0rc2"},
    "0001-skip-dispatch-combine-events-0.30.patch": {"0.30.0rc1", "0.30.0rc2"},
    "0001-drop-fusedmc2-overlap-exclusion-0.30.patch": {"0.29.0rc1", "0.30.0rc1", "0.30.0rc2"},
    "0001-mc2-token-capacity-1024-0.30.patch": {"0.28.0rc1", "0.29.0rc1", "0.30.0rc1", "0.30.0rc2"},
}


@pytest.mark.parametrize("recipe_id", RELEASE_RECIPES)
def test_each_patch_applies_exactly_to_every_release_of_its_entry(recipe_id):
    """`git apply --check` (no fuzz) on every known release: each patch applies to all the releases
    its entry covers, and a ported patch to exactly those."""
    import subprocess

    from compat_support import CATALOG, release_trees
    from packaging.specifiers import SpecifierSet

    recipe = CATALOG[recipe_id]
    for patch in recipe.patches:
        path = CATALOG.patch_path(recipe_id, patch.file)
        covered = {v for v in release_trees() if v in SpecifierSet(recipe.patch_versions(patch.file), prereleases=True)}
        applies = {v for v, root in release_trees().items()
                   if subprocess.run(["git", "apply", "--check", str(path)], cwd=root, capture_output=True).returncode == 0}
        assert covered <= applies, (patch.file, sorted(covered - applies))
        if patch.file in PORTED:
            assert applies == covered == PORTED[patch.file], patch.file
