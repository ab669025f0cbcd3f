"""Fakes for running vllm-ascend's MoE layer code on CPU, and one driver per code design.

The patched modules import torch_npu and vLLM, so they cannot be imported here. The classes and
functions a patch changes are taken out of the tree with ``ast`` (``patched_tree.load_defs``) and
executed among fakes: fake NPU streams only log which operation is issued on which stream, in
issue order, and tensors are strings that spell how they were computed (``ar(down(act(...)))``),
so two runs compute the same thing exactly when their results are equal. Whether the device
honours the order, and whether anything hangs, needs an NPU.

Two drivers, one per shared-expert design:

- ``run_0_23``: ``AscendFusedMoE.shared_forward_impl`` of ``fused_moe_0_23_0.py`` (0.23.x), the
  routed experts faked (``MoECommMethod.fused_experts`` is tested on its own);
- ``run_0_30``: ``AscendMoERunner.forward`` of ``fused_moe.py`` (0.30.x, PR #18122) with the
  real ``AscendSharedExperts``, the real ``MoECommMethod.fused_experts`` and ``apply_moe_mlp``
  behind a fake routed-experts ``forward_impl`` (which builds ``RoutedMoEMilestones`` as
  ``routed_experts.py`` does), and the real ``maybe_all_reduce_*`` custom-op bodies.

Both return ``(npu, seen)``: the stream log and what the run saw (``result``, the skip-events
flag during and after the routed experts, the exception if one was raised). A ``Source`` reads
the tree's files, with an optional overlay of mutated copies (the mutation tests).
"""

from __future__ import annotations

import ast
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from enum import Enum, auto
from pathlib import Path
from types import SimpleNamespace

from patched_tree import load_defs, load_module


class Source:
    """A tree's files, with mutated copies in ``overlay`` taking precedence."""

    def __init__(self, root: Path, overlay: Path | None = None):
        self.root, self.overlay = root, overlay

    def __truediv__(self, rel: str) -> Path:
        if self.overlay is not None and (self.overlay / rel).is_file():
            return self.overlay / rel
        return self.root / rel

    def mutated(self, overlay: Path, rel: str, old: str, new: str) -> Source:
        """A Source whose ``rel`` has ``old`` replaced by ``new`` (which must occur once)."""
        text = (self / rel).read_text(encoding="utf-8")
        assert text.count(old) == 1, f"mutation anchor not found once in {rel}: {old!r}"
        target = overlay / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace(old, new), encoding="utf-8")
        return Source(self.root, overlay)


def constant(path: Path, name: str):
    """The value of the module-level constant ``name`` of ``path`` (an arithmetic expression of
    literals, such as ``18 * 1024 * 1024``; nothing else is in scope)."""
    node = next(n for n in ast.parse(path.read_text(encoding="utf-8")).body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == name)
    return eval(compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}})


def find_def(path: Path, qualname: str) -> ast.AST:
    """The class or function ``qualname`` (``Class.method``) of ``path``."""
    node: ast.AST = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    return node


# --------------------------------------------------------------------------- fake NPU and tensors


BOOKKEEPING = ("record_event", "wait_event", "wait_stream", "prefetch_preprocess", "prefetch_postprocess")


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

    def streams_of(self, op: str) -> list[str]:
        return [s for s, o, _ in self.log if o == op]

    def index(self, stream: str, op: str, arg: object = None) -> int:
        """Log position of the first ``op`` on ``stream`` (with ``arg`` when given)."""
        return next(i for i, (s, o, a) in enumerate(self.log) if (s, o) == (stream, op) and arg in (None, a))

    def work(self) -> list[tuple[str, str]]:
        """Which compute/collective op ran on which stream: the log without stream bookkeeping
        (events, joins) and without L2 prefetch hints (moe-shared-expert-weight-prefetch's, which
        compute nothing and are tested on their own)."""
        return [(s, op) for s, op, _ in self.log if op not in BOOKKEEPING]

    def recorded_at(self, event_name: str) -> int:
        """Log position of the record_event that made ``event_name``."""
        return int(event_name.removeprefix("evt")) - 1


class T(str):
    """A fake tensor: its value spells how it was computed; shape and slicing keep it as is."""

    shape = (4, 8)
    dtype = "bf16"

    def __getitem__(self, item) -> T:
        return self

    def __mul__(self, other) -> T:
        return T(f"{self}*{other}")


class Weight:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes

    def element_size(self) -> int:
        return 2

    def numel(self) -> int:
        return self.nbytes // 2


class Linear:
    def __init__(self, npu: Npu, name: str, nbytes: int = 1 << 20, quantized: bool = False):
        self.npu, self.name, self.weight = npu, name, Weight(nbytes)
        if quantized:
            self.weight_scale = object()

    def __call__(self, x):
        self.npu.issue("matmul", self.name)
        return T(f"{self.name}({x})"), None


class Group:
    """A fake TP group: its collectives are logged on the current stream."""

    def __init__(self, npu: Npu, world_size: int = 2, rank_in_group: int = 0):
        self.npu, self.world_size, self.rank_in_group = npu, world_size, rank_in_group

    def all_gather(self, x, dim=0):
        self.npu.issue("all_gather")
        return T(f"ag({x})")


def collectives(npu: Npu) -> dict:
    """vLLM's tensor-model-parallel collectives, logged on the current stream."""
    def op(name, spelled):
        def run(x, *args, **kwargs):
            npu.issue(name)
            return T(f"{spelled}({x})")
        return run
    return {"tensor_model_parallel_all_reduce": op("all_reduce", "ar"),
            "tensor_model_parallel_all_gather": op("all_gather", "ag"),
            "tensor_model_parallel_reduce_scatter": op("reduce_scatter", "rs")}


@dataclass
class Case:
    """One MoE layer forward: the switches of the layer and of the forward context."""

    overlap: bool = True
    capturing: bool = False
    comm: str = "MC2"
    shared_dp: bool = False
    sequence_parallel: bool = False  # FlashComm1 (0.30: SP MoE)
    quantized_shared: bool = False  # 0.23 only
    gate_overlap: bool = False  # 0.23 only: multistream_overlap_gate (removed in 0.26)
    routed_raises: bool = False
    weight_bytes: dict = field(default_factory=lambda: {"gate_up": 4 << 20, "down": 2 << 20})


# --------------------------------------------------------------------------- 0.23.x


def run_0_23(src: Source, case: Case) -> tuple[Npu, dict]:
    """Run AscendFusedMoE.shared_forward_impl of fused_moe_0_23_0.py on fakes."""
    npu = Npu()
    torch = SimpleNamespace(npu=npu, ops=SimpleNamespace(vllm=SimpleNamespace(
        prefetch_preprocess=lambda weight, start_flag, max_weight_size: npu.issue(
            "prefetch_preprocess", max_weight_size),
        prefetch_postprocess=lambda stop_flag: npu.issue("prefetch_postprocess"))))
    moe_comm_type = load_defs(src / "vllm_ascend/ascend_forward_context.py", ["MoECommType"], {"Enum": Enum})["MoECommType"]
    quant_type = load_module(src / "vllm_ascend/quantization/quant_type.py").QuantType
    events = load_defs(src / "vllm_ascend/ops/fused_moe/fused_moe.py", ["FusedMoEEvents"],
                       {"dataclass": dataclass, "field": field, "torch": torch})["FusedMoEEvents"]
    switch = load_defs(src / "vllm_ascend/utils.py", ["npu_stream_switch"],
                       {"torch": torch, "nullcontext": nullcontext})["npu_stream_switch"]
    prefetch_file = src / "vllm_ascend/ops/weight_prefetch.py"
    ctx = SimpleNamespace(capturing=case.capturing, moe_comm_type=moe_comm_type[case.comm],
                          skip_dispatch_combine_events=False)
    seen: dict = {}
    fakes = {
        "FusedMoE": type("FusedMoE", (), {}), "torch": torch, "torch_npu": None, "F": None,
        "_EXTRA_CTX": ctx, "MoECommType": moe_comm_type, "QuantType": quant_type,
        "FusedMoEEvents": events, "npu_stream_switch": switch,
        "shared_experts_calculation_stream": lambda: npu.side,
        "shared_expert_dp_enabled": lambda: case.shared_dp,
        "tensor_model_parallel_all_reduce": collectives(npu)["tensor_model_parallel_all_reduce"],
        "set_flash_common3_context": lambda **kwargs: None,
        "get_flash_common3_context": lambda: SimpleNamespace(shared_out="gate-path shared_out"),
        "MAX_PREFETCH_WEIGHT_SIZE": constant(prefetch_file, "MAX_PREFETCH_WEIGHT_SIZE"),
    }
    cls = load_defs(src / "vllm_ascend/ops/fused_moe/fused_moe_0_23_0.py", ["AscendFusedMoE"], fakes)["AscendFusedMoE"]
    layer = cls.__new__(cls)
    layer.use_overlapped = False  # no internal router
    layer.multistream_overlap_shared_expert = case.overlap
    layer.shared_multistream_overlap_gate = case.gate_overlap
    layer.quant_type = quant_type.NONE
    layer._shared_experts = SimpleNamespace(
        gate_up_proj=Linear(npu, "gate_up", case.weight_bytes["gate_up"], case.quantized_shared),
        down_proj=Linear(npu, "down", case.weight_bytes["down"], case.quantized_shared),
        act_fn=lambda x: (npu.issue("act"), T(f"act({x})"))[1],
        expert_gate=None,
    )

    def routed_experts(hidden_states, router_logits, return_with_event):
        # Stands in for forward_impl -> MoECommMethod.fused_experts (tested on its own).
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
        seen["result"] = layer.shared_forward_impl(T("x"), "logits")
    except RuntimeError as exc:
        seen["raised"] = exc
    seen["skip_after"] = ctx.skip_dispatch_combine_events
    return npu, seen


# --------------------------------------------------------------------------- 0.30.x


class _FakeMoERunner:
    """vLLM 0.30.0's MoERunner, for a layer without routed transforms (moe_runner.py:359-545)."""

    routed_input_transform = None
    routed_output_transform = None

    def apply_routed_input_transform(self, hidden_states):
        return hidden_states, hidden_states if self._shared_experts is not None else None

    def apply_routed_output_transform(self, fused_output):
        return fused_output

    def _maybe_pad_hidden_states(self, shared_experts_input, hidden_states):
        return hidden_states, None, None

    def _maybe_apply_routed_scale_to_output(self, shared_output, fused_output):
        return shared_output, fused_output

    def _maybe_add_zero_expert_output(self, result):
        return result

    def _encode_layer_name(self):
        return self.layer_name

    def _sequence_parallel_context(self):
        return nullcontext()


def _loaded_0_30(src: Source, npu: Npu, ctx, case: Case) -> dict:
    """The 0.30 classes and functions the runner path needs, loaded from ``src`` among fakes."""
    vllm_ascend = "vllm_ascend"
    torch = SimpleNamespace(npu=npu, float32="f32", float16="f16", bfloat16="bf16", int8="i8",
                            float8_e4m3fn="f8", uint8="u8",
                            tensor_split=lambda x, n, dim=0: [T(f"shard{i}({x})") for i in range(n)])
    moe_comm_type = load_defs(src / f"{vllm_ascend}/ascend_forward_context.py", ["MoECommType"], {"Enum": Enum})["MoECommType"]
    quant_type = load_module(src / f"{vllm_ascend}/quantization/quant_type.py").QuantType
    switch = load_defs(src / f"{vllm_ascend}/utils.py", ["npu_stream_switch"],
                       {"torch": torch, "nullcontext": nullcontext})["npu_stream_switch"]
    dataclasses_ = load_defs(src / f"{vllm_ascend}/ops/fused_moe/dataclass/shared_experts.py",
                             ["RoutedMoEMilestones", "PreparedSharedExpertInput"],
                             {"dataclass": dataclass, "torch": torch})
    comm = collectives(npu)
    shared = load_defs(
        src / f"{vllm_ascend}/ops/fused_moe/shared_experts.py",
        ["SharedExpertParallelMode", "SharedExpertMLPPath", "PreparedSharedExpertExecution",
         "SubmittedSharedExpertGateUp", "AscendSharedExperts"],
        {"dataclass": dataclass, "Enum": Enum, "auto": auto, "torch": torch, "torch_npu": None,
         "F": SimpleNamespace(sigmoid=lambda x: T(f"sig({x})"), pad=lambda x, pad: T(f"pad({x})")),
         "_EXTRA_CTX": ctx, "QuantType": quant_type, "npu_stream_switch": switch,
         "shared_experts_calculation_stream": lambda: npu.side, "has_lora": lambda context: False,
         "_pad_tokens_with_cat": lambda x, n: T(f"padded({x})"), "LinearInput": object,
         **comm, **dataclasses_})
    mlp = load_defs(src / f"{vllm_ascend}/ops/fused_moe/moe_mlp.py", ["apply_moe_mlp"], {"torch": torch})
    method = load_defs(src / f"{vllm_ascend}/ops/fused_moe/moe_comm_method.py", ["FusedExpertsResult", "MoECommMethod"],
                       {"torch": torch, "_EXTRA_CTX": ctx, "ABC": object, "abstractmethod": lambda f: f,
                        "dataclass": dataclass, "build_token_dispatch_input": lambda **kwargs: None,
                        "build_mlp_compute_input": lambda **kwargs: SimpleNamespace(
                            quant=SimpleNamespace(is_quant=False), lora_context=None, activation="silu"),
                        "apply_moe_mlp": mlp["apply_moe_mlp"], "QuantType": quant_type})
    runners: dict[str, object] = {}
    ops = load_defs(src / f"{vllm_ascend}/ops/register_custom_ops.py",
                    ["_routed_output_is_reduced", "_maybe_all_reduce_tensor_model_parallel_impl",
                     "_maybe_all_reduce_shared_expert_impl"],
                    {"get_forward_context": lambda: SimpleNamespace(no_compile_layers=runners),
                     "_EXTRA_CTX": ctx, "MoECommType": moe_comm_type, **comm})
    torch.ops = SimpleNamespace(vllm=SimpleNamespace(
        maybe_all_reduce_shared_expert=ops["_maybe_all_reduce_shared_expert_impl"],
        maybe_all_reduce_tensor_model_parallel=ops["_maybe_all_reduce_tensor_model_parallel_impl"]))
    torch._foreach_add = lambda xs, ys: [T(f"{x}+{y}") for x, y in zip(xs, ys)]
    runner_ns = load_defs(src / f"{vllm_ascend}/ops/fused_moe/fused_moe.py", ["AscendMoERunner"], {
        "MoERunner": _FakeMoERunner, "torch": torch, "F": None, "_EXTRA_CTX": ctx, "MoECommType": moe_comm_type,
        "_unpack": lambda result: result if isinstance(result, tuple) else (None, result),
        "tensor_model_parallel_all_reduce": comm["tensor_model_parallel_all_reduce"],
        "SharedExpertParallelMode": shared["SharedExpertParallelMode"], **dataclasses_})
    return {"torch": torch, "MoECommType": moe_comm_type, "QuantType": quant_type, "runners": runners,
            "AscendMoERunner": runner_ns["AscendMoERunner"], "AscendSharedExperts": shared["AscendSharedExperts"],
            "MoECommMethod": method["MoECommMethod"], **dataclasses_}


class Dispatcher:
    def __init__(self, npu: Npu):
        self.npu = npu

    def token_dispatch(self, token_dispatch_input):
        self.npu.issue("dispatch")
        return SimpleNamespace(combine_metadata=None, group_list_type=1, group_list=None)

    def token_combine(self, hidden_states, combine_metadata):
        self.npu.issue("combine")
        return T("routed")


class QuantMethod:
    """The unquantized MoE method as apply_moe_mlp sees it (fused GMM1 + activation)."""

    def __init__(self, npu: Npu):
        self.npu = npu

    def supports_fused_activation(self, activation):
        return True

    def apply_gmm1_act_quant(self, mlp_compute_input):
        self.npu.issue("gmm1")
        return T("h1"), None

    def apply_gmm2(self, mlp_compute_input, hidden_states, act_out_scale):
        self.npu.issue("gmm2")
        return T("h2")


def run_0_30(src: Source, case: Case) -> tuple[Npu, dict]:
    """Run AscendMoERunner.forward of the 0.30 fused_moe.py on fakes (see the module docstring)."""
    npu = Npu()
    ctx = SimpleNamespace(capturing=case.capturing, moe_comm_method=object(), num_tokens=4,
                          skip_dispatch_combine_events=False)
    mods = _loaded_0_30(src, npu, ctx, case)
    ctx.moe_comm_type = mods["MoECommType"][case.comm]
    tp_group = Group(npu)
    moe_config = SimpleNamespace(tp_group=tp_group, is_sequence_parallel=case.sequence_parallel,
                                 tp_size=1, ep_size=2)
    shared_layer = SimpleNamespace(gate_up_proj=Linear(npu, "gate_up"), down_proj=Linear(npu, "down"),
                                   act_fn=lambda x: (npu.issue("act"), T(f"act({x})"))[1],
                                   expert_gate=lambda x: (npu.issue("matmul", "expert_gate"), (T(f"g({x})"), None))[1])
    shared_cls = mods["AscendSharedExperts"]
    shared = shared_cls.__new__(shared_cls)
    shared.layer, shared.moe_config, shared.quant_type = shared_layer, moe_config, mods["QuantType"].NONE
    shared.lora_context, shared.multistream_overlap, shared.weights_replicated = None, case.overlap, case.shared_dp
    shared.situ_activation = None

    comm_method = mods["MoECommMethod"].__new__(mods["MoECommMethod"])
    comm_method.token_dispatcher, comm_method.moe_config = Dispatcher(npu), moe_config
    comm_method.shared_activation_overlaps_routed_gmm1 = case.comm in ("MC2", "ALLTOALL")
    seen: dict = {}
    milestones_cls = mods["RoutedMoEMilestones"]

    class RoutedExperts:
        """AscendRoutedExperts.forward_impl, reduced to what the shared expert sees
        (routed_experts.py:711-796): the comm method's fused_experts, finalize, the milestones."""

        def forward_impl(self, hidden_states, router_logits, input_ids=None):
            seen["skip_during_routed"] = ctx.skip_dispatch_combine_events
            if case.routed_raises:
                raise RuntimeError("routed experts failed")
            if case.comm == "FUSED_MC2":  # FusedMC2CommImpl.fused_experts: one operator, no events
                npu.issue("fused_mc2")
                result = SimpleNamespace(routed_out=T("routed"), before_dispatch_evt=None,
                                         shared_activation_overlap_start_evt=None, before_combine_evt=None)
            else:
                given = SimpleNamespace(hidden_states=T("x"))
                result = comm_method.fused_experts(given, quant_method=QuantMethod(npu))
            npu.issue("finalize")
            return result.routed_out, milestones_cls(
                routed_dispatch_start=result.before_dispatch_evt,
                shared_activation_overlap_start=result.shared_activation_overlap_start_evt,
                routed_combine_start=result.before_combine_evt,
            )

    runner_cls = mods["AscendMoERunner"]
    runner = runner_cls.__new__(runner_cls)
    runner.layer_name = "model.layers.0.mlp.experts"
    runner.moe_config = moe_config
    runner._shared_experts = shared_layer
    runner.ascend_shared_experts = shared
    runner.routed_experts = RoutedExperts()
    runner.gate = lambda x: (npu.issue("router"), T("logits"))[1]  # Qwen3.5: internal router
    runner._quant_method = SimpleNamespace(has_unpadded_output=False)
    runner._forward_entry = lambda h, logits, shared_in, ids, name, unpadded: runner._forward_impl(h, logits, shared_in, ids)
    mods["runners"][runner.layer_name] = runner
    try:
        seen["result"] = runner.forward(T("x"), T("x"))
    except RuntimeError as exc:
        seen["raised"] = exc
    seen["skip_after"] = ctx.skip_dispatch_combine_events
    return npu, seen


DRIVERS = {"0.23": run_0_23, "0.30": run_0_30}


def design(version: str) -> str:
    """The shared-expert design of a release: '0.23' or '0.30'."""
    return "0.23" if version.startswith("0.23") else "0.30"


def run_layer(version: str, src: Source, case: Case) -> tuple[Npu, dict]:
    return DRIVERS[design(version)](src, case)
