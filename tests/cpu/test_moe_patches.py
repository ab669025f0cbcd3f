"""The MoE recipes' patches, run on CPU against the real vllm-ascend 0.23.0 tree they patch.

The patched modules import torch_npu and vLLM, so they cannot be imported here. Instead the
classes and functions the patches change are taken out of the patched files with ``ast`` and
executed among fakes: fake NPU streams only log which operation is issued on which stream, in
issue order, and the tests read that log. This checks the patched control flow (which stream
issues the all-reduce, who waits for whom, when the event flag is set and reset, where the
prefetch is issued and joined); whether the device honours it, and whether anything hangs,
needs an NPU.
"""

from __future__ import annotations

import ast
import textwrap
from abc import ABC, abstractmethod
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import SimpleNamespace

import pytest

from patched_tree import load_defs, load_module, patched_tree

pytestmark = [pytest.mark.tree]

MOE_RECIPES = [
    "moe-shared-expert-sidestream-ar",
    "moe-skip-dispatch-combine-events",
    "moe-shared-expert-weight-prefetch",
    "moe-fusedmc2-overlap-coexist",
    "mc2-token-capacity-1024",
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A 0.23.0 tree with the MoE recipes' patches applied."""
    return patched_tree(tmp_path_factory.mktemp("moe"), MOE_RECIPES)


def find_def(path: Path, qualname: str) -> ast.AST:
    """The class or function ``qualname`` (``Class.method``) of ``path``."""
    node: ast.AST = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    return node


def constant(path: Path, name: str):
    """The value of the module-level constant ``name`` of ``path`` (a literal expression)."""
    node = next(n for n in ast.parse(path.read_text(encoding="utf-8")).body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == name)
    return eval(compile(ast.Expression(node.value), str(path), "eval"), {})


# --------------------------------------------------------------------------- fake NPU


@dataclass(frozen=True)
class Event:
    name: str


class Stream:
    def __init__(self, npu: Npu, name: str):
        self.npu, self.name = npu, name

    def record_event(self) -> Event:
        self.npu.log.append((self.name, "record_event", None))
        return Event(f"evt{len(self.npu.log)}")

    def wait_event(self, event: Event) -> None:
        self.npu.log.append((self.name, "wait_event", event.name))

    def wait_stream(self, other: Stream) -> None:
        self.npu.log.append((self.name, "wait_stream", other.name))


class Npu:
    """Fake ``torch.npu``: a current stream and a log of ``(stream, op, arg)`` in issue order."""

    def __init__(self):
        self.log: list[tuple[str, str, object]] = []
        self.main, self.side = Stream(self, "main"), Stream(self, "side")
        self.current = self.main

    def current_stream(self) -> Stream:
        return self.current

    @contextmanager
    def stream(self, stream: Stream):
        previous, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = previous

    def issue(self, op: str, arg: object = None) -> None:
        self.log.append((self.current.name, op, arg))

    def ops(self, stream: str) -> list[str]:
        return [op for s, op, _ in self.log if s == stream]


class Weight:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes

    def element_size(self) -> int:
        return 2

    def numel(self) -> int:
        return self.nbytes // 2


class Linear:
    def __init__(self, npu: Npu, name: str, nbytes: int, quantized: bool):
        self.npu, self.name, self.weight = npu, name, Weight(nbytes)
        if quantized:
            self.weight_scale = object()

    def __call__(self, x):
        self.npu.issue("matmul", self.name)
        return f"{self.name}({x})", None


# --------------------------------------------------------------------------- fused_moe_0_23_0.py


@dataclass
class Case:
    """One shared_forward_impl run: the layer's switches and the forward context."""

    overlap: bool = True
    capturing: bool = False
    comm: str = "MC2"
    shared_dp: bool = False
    quantized_shared: bool = False
    gate_overlap: bool = False
    routed_raises: bool = False
    weight_bytes: dict = field(default_factory=lambda: {"gate_up": 4 << 20, "down": 2 << 20})


def run_shared_forward(tree: Path, case: Case) -> tuple[Npu, dict]:
    """Run the patched AscendFusedMoE.shared_forward_impl on fakes: the stream log and what it saw."""
    npu = Npu()
    torch = SimpleNamespace(npu=npu, ops=SimpleNamespace(vllm=SimpleNamespace(
        prefetch_preprocess=lambda weight, start_flag, max_weight_size: npu.issue(
            "prefetch_preprocess", max_weight_size),
        prefetch_postprocess=lambda stop_flag: npu.issue("prefetch_postprocess"))))
    vllm_ascend = tree / "vllm_ascend"
    moe_comm_type = load_defs(vllm_ascend / "ascend_forward_context.py", ["MoECommType"], {"Enum": Enum})["MoECommType"]
    quant_type = load_module(vllm_ascend / "quantization" / "quant_type.py").QuantType
    events = load_defs(vllm_ascend / "ops/fused_moe/fused_moe.py", ["FusedMoEEvents"],
                       {"dataclass": dataclass, "field": field, "torch": torch})["FusedMoEEvents"]
    switch = load_defs(vllm_ascend / "utils.py", ["npu_stream_switch"],
                       {"torch": torch, "nullcontext": nullcontext})["npu_stream_switch"]
    max_prefetch = constant(vllm_ascend / "ops" / "weight_prefetch.py", "MAX_PREFETCH_WEIGHT_SIZE")
    ctx = SimpleNamespace(capturing=case.capturing, moe_comm_type=moe_comm_type[case.comm],
                          skip_dispatch_combine_events=False)
    seen: dict = {}

    def all_reduce(x):
        npu.issue("all_reduce")
        return f"ar({x})"

    fakes = {
        "FusedMoE": type("FusedMoE", (), {}), "torch": torch, "torch_npu": None, "F": None,
        "_EXTRA_CTX": ctx, "MoECommType": moe_comm_type, "QuantType": quant_type,
        "FusedMoEEvents": events, "npu_stream_switch": switch,
        "shared_experts_calculation_stream": lambda: npu.side,
        "shared_expert_dp_enabled": lambda: case.shared_dp,
        "tensor_model_parallel_all_reduce": all_reduce,
        "set_flash_common3_context": lambda **kwargs: None,
        "get_flash_common3_context": lambda: SimpleNamespace(shared_out="gate-path shared_out"),
        "MAX_PREFETCH_WEIGHT_SIZE": max_prefetch,
    }
    cls = load_defs(vllm_ascend / "ops/fused_moe/fused_moe_0_23_0.py", ["AscendFusedMoE"], fakes)["AscendFusedMoE"]
    layer = cls.__new__(cls)
    layer.use_overlapped = False  # no internal router
    layer.multistream_overlap_shared_expert = case.overlap
    layer.shared_multistream_overlap_gate = case.gate_overlap
    layer.quant_type = quant_type.NONE
    layer._shared_experts = SimpleNamespace(
        gate_up_proj=Linear(npu, "gate_up", case.weight_bytes["gate_up"], case.quantized_shared),
        down_proj=Linear(npu, "down", case.weight_bytes["down"], case.quantized_shared),
        act_fn=lambda x: (npu.issue("act"), f"act({x})")[1],
        expert_gate=None,
    )

    def routed_experts(hidden_states, router_logits, return_with_event):
        # Stands in for forward_impl -> MoECommMethod.fused_experts (tested on its own below).
        skip = ctx.skip_dispatch_combine_events
        seen["skip_during_routed"] = skip
        npu.issue("routed_experts")
        if case.routed_raises:
            raise RuntimeError("routed experts failed")
        evt = None if skip else npu.current_stream().record_event()
        return SimpleNamespace(routed_out="routed", before_dispatch_evt=evt, before_gmm2_evt=None,
                               before_combine_evt=evt, swiglu_limit=0.0)

    layer.forward_impl = routed_experts
    try:
        seen["result"] = layer.shared_forward_impl("x", "logits")
    except RuntimeError as exc:
        seen["raised"] = exc
    seen["skip_after"] = ctx.skip_dispatch_combine_events
    return npu, seen


def test_shared_expert_and_its_all_reduce_run_on_the_side_stream(tree):
    npu, seen = run_shared_forward(tree, Case())
    side = npu.ops("side")
    assert side[side.index("matmul"):] == ["matmul", "act", "matmul", "all_reduce"]
    assert "all_reduce" not in npu.ops("main")
    # The default stream waits for the side stream after the all-reduce was issued there, once.
    waits = [i for i, entry in enumerate(npu.log) if entry == ("main", "wait_stream", "side")]
    assert len(waits) == 1
    assert waits[0] > max(i for i, (_, op, _) in enumerate(npu.log) if op == "all_reduce")
    assert seen["result"] == ("ar(down(act(gate_up(x))))", "routed")


@pytest.mark.parametrize("case", [
    pytest.param(Case(capturing=True), id="acl-graph-capture"),
    pytest.param(Case(overlap=False), id="overlap-off"),
])
def test_without_overlap_everything_stays_on_the_default_stream_in_upstream_order(tree, case):
    npu, seen = run_shared_forward(tree, case)
    assert npu.ops("side") == []
    main = npu.ops("main")
    assert "wait_stream" not in main
    assert main.index("routed_experts") < main.index("matmul") and main[-1] == "all_reduce"
    assert seen["result"] == ("ar(down(act(gate_up(x))))", "routed")


@pytest.mark.parametrize("case", [
    pytest.param(Case(comm="ALLGATHER"), id="allgather"),
    pytest.param(Case(shared_dp=True), id="shared-expert-dp"),
    pytest.param(Case(comm="ALLGATHER", overlap=False), id="allgather-overlap-off"),
])
def test_no_all_reduce_where_upstream_has_none(tree, case):
    npu, seen = run_shared_forward(tree, case)
    assert [op for _, op, _ in npu.log if op == "all_reduce"] == []
    assert seen["result"] == ("down(act(gate_up(x)))", "routed")


@pytest.mark.parametrize("comm", ["ALLTOALL", "MC2", "FUSED_MC2"])
def test_every_comm_type_with_an_all_reduce_issues_it_on_the_side_stream(tree, comm):
    npu, _ = run_shared_forward(tree, Case(comm=comm))
    assert [s for s, op, _ in npu.log if op == "all_reduce"] == ["side"]


@pytest.mark.parametrize("case, skip", [
    pytest.param(Case(), True, id="overlap"),
    pytest.param(Case(capturing=True), True, id="capture-waits-are-same-stream"),
    pytest.param(Case(overlap=False), False, id="overlap-off"),
    pytest.param(Case(gate_overlap=True), False, id="flash-common3-gate-path"),
])
def test_skip_events_flag_is_set_only_around_the_routed_experts(tree, case, skip):
    _, seen = run_shared_forward(tree, case)
    assert seen["skip_during_routed"] is skip
    assert seen["skip_after"] is False


def test_skip_events_flag_is_reset_when_the_routed_experts_raise(tree):
    _, seen = run_shared_forward(tree, Case(routed_raises=True))
    assert seen["skip_during_routed"] is True and "raised" in seen
    assert seen["skip_after"] is False


def test_with_events_skipped_the_side_stream_still_waits_for_its_input(tree):
    npu, _ = run_shared_forward(tree, Case())
    before_routed = next(i for i, (s, op, _) in enumerate(npu.log) if (s, op) == ("main", "record_event"))
    routed = next(i for i, (_, op, _) in enumerate(npu.log) if op == "routed_experts")
    assert before_routed < routed
    side = [entry for entry in npu.log if entry[0] == "side"]
    assert side[0] == ("side", "wait_event", f"evt{before_routed + 1}")


def test_shared_weights_are_prefetched_before_the_routed_experts_and_joined_before_the_first_matmul(tree):
    max_size = constant(tree / "vllm_ascend/ops/weight_prefetch.py", "MAX_PREFETCH_WEIGHT_SIZE")
    big = Case(weight_bytes={"gate_up": 2 * max_size, "down": 1 << 20})
    npu, _ = run_shared_forward(tree, big)
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
def test_prefetch_is_always_joined_where_it_is_issued(tree, case, joined_on):
    npu, _ = run_shared_forward(tree, case)
    issued = [s for s, op, _ in npu.log if op == "prefetch_preprocess"]
    joined = [s for s, op, _ in npu.log if op == "prefetch_postprocess"]
    assert joined == ([joined_on] if joined_on else [])
    assert len(issued) == (2 if joined_on else 0)


# --------------------------------------------------------------------------- moe_comm_method.py, moe_mlp.py


class Dispatcher:
    def __init__(self, npu: Npu):
        self.npu = npu

    def token_dispatch(self, token_dispatch_input):
        self.npu.issue("dispatch")
        return SimpleNamespace(combine_metadata=None, group_list_type=1, group_list=None)

    def token_combine(self, hidden_states, combine_metadata):
        self.npu.issue("combine")
        return "routed"


@pytest.mark.parametrize("skip", [False, True])
def test_fused_experts_records_dispatch_and_combine_events_unless_skipped(tree, skip):
    npu = Npu()
    torch = SimpleNamespace(npu=npu, float32="f32", float16="f16", bfloat16="bf16", int8="i8",
                            float8_e4m3fn="f8", uint8="u8")
    ctx = SimpleNamespace(moe_comm_method=object(), skip_dispatch_combine_events=skip)
    fakes = {"torch": torch, "_EXTRA_CTX": ctx, "ABC": ABC, "abstractmethod": abstractmethod,
             "build_token_dispatch_input": lambda **kwargs: None,
             "build_mlp_compute_input": lambda **kwargs: None,
             "FusedExpertsResult": SimpleNamespace,
             "QuantType": load_module(tree / "vllm_ascend/quantization/quant_type.py").QuantType}
    method = load_defs(tree / "vllm_ascend/ops/fused_moe/moe_comm_method.py", ["MoECommMethod"], fakes)
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


@pytest.mark.parametrize("skip", [False, True])
def test_before_gmm2_event_is_none_when_skipped(tree, skip):
    npu = Npu()
    ctx = SimpleNamespace(skip_dispatch_combine_events=skip)
    fakes = {"torch": SimpleNamespace(npu=npu), "_EXTRA_CTX": ctx}
    record = load_defs(tree / "vllm_ascend/ops/fused_moe/moe_mlp.py", ["_record_before_gmm2_event"], fakes)
    event = record["_record_before_gmm2_event"]()
    assert (event is None) is skip
    assert npu.ops("main") == ([] if skip else ["record_event"])


def test_all_three_gmm2_sites_use_the_skippable_event(tree):
    body = ast.unparse(find_def(tree / "vllm_ascend/ops/fused_moe/moe_mlp.py", "quant_apply_mlp"))
    assert body.count("before_gmm2_evt = _record_before_gmm2_event()") == 3
    assert "record_event()" not in body


# --------------------------------------------------------------------------- ascend_forward_context.py


def test_flag_is_a_known_extra_attribute_defaulted_per_forward(tree):
    path = tree / "vllm_ascend/ascend_forward_context.py"
    proxy = load_defs(path, ["_ExtraForwardContextProxy"], {"Any": object})["_ExtraForwardContextProxy"]
    assert "skip_dispatch_combine_events" in proxy.extra_attrs
    body = ast.unparse(find_def(path, "set_ascend_forward_context"))
    assert "forward_context.skip_dispatch_combine_events = False" in body


def mc2_capacity(tree: Path, capture_max: int, tp: int) -> int:
    fakes = {"_mc2_tokens_capacity": None,
             "get_ascend_config": lambda: SimpleNamespace(enable_prefill_mc2=False)}
    namespace = load_defs(tree / "vllm_ascend/ascend_forward_context.py", ["set_mc2_tokens_capacity"], fakes)
    config = SimpleNamespace(
        compilation_config=SimpleNamespace(cudagraph_capture_sizes=[capture_max],
                                           max_cudagraph_capture_size=capture_max),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp))
    namespace["set_mc2_tokens_capacity"](config, max_num_reqs=0, uniform_decode_query_len=1)
    return namespace["_mc2_tokens_capacity"]


@pytest.mark.parametrize("capture_max, tp", [(40, 2), (1000, 2), (2048, 2), (4096, 2), (4097, 4), (3000, 1)])
def test_mc2_capacity_is_capped_at_1024_tokens_per_tp_rank(tree, capture_max, tp):
    per_rank = -(-capture_max // tp)
    assert mc2_capacity(tree, capture_max, tp) == min(per_rank, 1024) * tp


# --------------------------------------------------------------------------- ascend_config.py


def test_fused_mc2_keeps_the_overlap_and_warns_about_the_deadlock(tree):
    path = tree / "vllm_ascend/ascend_config.py"
    init = find_def(path, "AscendConfig.__init__")
    guard = next(node for node in ast.walk(init) if isinstance(node, ast.If)
                 and "enable_fused_mc2 == 1" in ast.unparse(node.test))
    warnings = []
    namespace = {"logger": SimpleNamespace(warning_once=warnings.append, warning=warnings.append)}
    exec("def guard(self):\n" + textwrap.indent(ast.unparse(guard), "    "), namespace)
    config = SimpleNamespace(enable_fused_mc2=1, multistream_overlap_shared_expert=True)
    namespace["guard"](config)
    assert config.multistream_overlap_shared_expert is True
    assert len(warnings) == 1
    assert "#12237" in warnings[0] and "moe-fusedmc2-overlap-coexist" in warnings[0]
    assert "deadlock" in warnings[0]
