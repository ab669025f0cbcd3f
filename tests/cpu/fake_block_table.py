"""Run a patched ``vllm_ascend/worker/block_table.py`` on CPU among fakes of the names it imports.

block_table.py imports vLLM's parallel groups, KV-cache spec helpers, ``CpuGpuBuffer`` and a Triton
``_compute_slot_mapping_kernel``: vLLM's own up to 0.25.1rc1 (``vllm.v1.worker.block_table``),
vllm-ascend's Ascend-tuned one from 0.26.0rc1 (``vllm_ascend.ops.triton.compute_slot_mapping``,
which also brings the fused multi-group launch). Here the groups have one rank, a ``CpuGpuBuffer``
keeps its "device" half on the CPU, each kernel is a numpy port of its Triton source, and the fused
launch is recorded, so the patched ``BlockTable`` of either release runs unchanged and its host and
kernel slot-mapping paths can be compared. Patched helper modules (``vllm_ascend.worker.*``) are
loaded from the same tree by path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import torch

from patched_tree import load_defs

PAD_SLOT_ID = -1  # vllm-0.23.0 and vllm-0.30.0 vllm/v1/attention/backends/utils.py
ASCEND_KERNEL = "vllm_ascend/ops/triton/compute_slot_mapping.py"


def compute_slot_mapping_kernel_port(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: np.ndarray,
    positions: np.ndarray,
    block_table: np.ndarray,
    block_table_stride: int,
    block_size: int,
    slot_mapping: np.ndarray,
    *,
    total_cp_world_size: int = 1,
    total_cp_rank: int = 0,
    cp_kv_cache_interleave_size: int = 1,
    pad_id: int = PAD_SLOT_ID,
) -> None:
    """Numpy port of vLLM's ``_compute_slot_mapping_kernel``, vllm-0.23.0 vllm/v1/worker/block_table.py:325-380.

    One loop iteration per Triton program (the grid is ``len(query_start_loc)`` = num_reqs + 1);
    the last program pads ``slot_mapping[num_tokens:max_num_tokens]`` (:343-352), the others map
    their request's tokens (:354-380). ``block_table`` is the flat table the kernel indexes.
    """
    num_programs = len(query_start_loc)
    for req_idx in range(num_programs):
        if req_idx == num_programs - 1:
            slot_mapping[num_tokens:max_num_tokens] = pad_id
            continue
        start_idx = int(query_start_loc[req_idx])
        end_idx = int(query_start_loc[req_idx + 1])
        virtual_block_size = block_size * total_cp_world_size
        row_offset = req_idx * block_table_stride
        for i in range(start_idx, end_idx):
            pos = int(positions[i])
            block_indices = pos // virtual_block_size
            block_numbers = int(block_table[row_offset + block_indices])
            virtual_block_offsets = pos - block_indices * virtual_block_size
            is_local = (virtual_block_offsets // cp_kv_cache_interleave_size) % total_cp_world_size == total_cp_rank
            local_block_offsets = (
                virtual_block_offsets // (total_cp_world_size * cp_kv_cache_interleave_size)
            ) * cp_kv_cache_interleave_size + virtual_block_offsets % cp_kv_cache_interleave_size
            slot_ids = block_numbers * block_size + local_block_offsets
            slot_mapping[i] = slot_ids if is_local else pad_id


INT32_MAX = 2147483647


def ascend_slot_mapping_kernel_port(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: np.ndarray,
    positions: np.ndarray,
    block_table: np.ndarray,
    block_table_stride: int,
    block_size: int,
    slot_mapping: np.ndarray,
    *,
    TOTAL_CP_WORLD_SIZE: int,
    PAD_ID: int,
    TILE_BLOCK_SIZE: int,
    BLOCK_TABLE_WINDOW_SIZE: int,
    IS_CIRCULAR: bool = False,
    **cp_only,
) -> None:
    """Numpy port of vllm-ascend's ``_compute_slot_mapping_kernel``, 0.30.0rc2
    vllm_ascend/ops/triton/compute_slot_mapping.py:11-95, without context parallelism.

    Per program: the last pads ``[num_tokens, max_num_tokens)`` (:33-42); the others walk their
    request in tiles of TILE_BLOCK_SIZE tokens (:49), load int32 positions (:52), take block index
    and offset (:53-58), load a window of BLOCK_TABLE_WINDOW_SIZE table entries from the tile's
    smallest block index as float32 (:72-80) and gather from it (:81-85). A gather outside the
    window, undefined in Triton, raises IndexError here. ``cp_only`` are the CP-branch constants
    (:62-70), unused with one rank.
    """
    assert TOTAL_CP_WORLD_SIZE == 1, "the fakes have one rank; the CP branch is not ported"
    num_programs = len(query_start_loc)
    window = np.arange(BLOCK_TABLE_WINDOW_SIZE)
    for req_idx in range(num_programs):
        if req_idx == num_programs - 1:
            slot_mapping[num_tokens:max_num_tokens] = PAD_ID
            continue
        start_idx, end_idx = int(query_start_loc[req_idx]), int(query_start_loc[req_idx + 1])
        row_offset = req_idx * block_table_stride
        for i in range(start_idx, end_idx, TILE_BLOCK_SIZE):
            offsets = i + np.arange(TILE_BLOCK_SIZE)
            mask = offsets < end_idx
            pos = np.zeros(TILE_BLOCK_SIZE, dtype=np.int32)
            pos[mask] = positions[offsets[mask]]
            if IS_CIRCULAR:
                block_indices = np.zeros(TILE_BLOCK_SIZE, dtype=np.int32)
                slot_offsets = pos % block_size
            else:
                block_indices = pos // block_size
                slot_offsets = pos - block_indices * block_size
            block_idx_base = np.where(mask, block_indices, INT32_MAX).min()
            window_offsets = block_idx_base + window
            inside = window_offsets < block_table_stride
            block_table_window = np.zeros(BLOCK_TABLE_WINDOW_SIZE, dtype=np.float32)
            block_table_window[inside] = block_table[row_offset + window_offsets[inside]]
            relative = np.where(mask, block_indices - block_idx_base, 0)
            block_numbers = block_table_window[relative].astype(np.int32)
            slot_ids = block_numbers * block_size + slot_offsets
            if IS_CIRCULAR:
                slot_ids = np.where(pos >= 0, slot_ids, PAD_ID)
            slot_mapping[offsets[mask]] = slot_ids[mask]


class KernelLaunches:
    """Stands in for the Triton kernel: ``kernel[grid](*args, **constexprs)`` runs the port of the
    kernel the constexprs belong to (vLLM's: BLOCK_SIZE; vllm-ascend's: TILE_BLOCK_SIZE) and is logged."""

    def __init__(self) -> None:
        self.grids: list[tuple[int, ...]] = []
        self.fused: list[tuple[int, int]] = []

    def __getitem__(self, grid):
        def launch(num_tokens, max_num_tokens, query_start_loc, positions, block_table, stride, block_size,
                   slot_mapping, **constexprs):
            self.grids.append(tuple(grid))
            assert grid[0] == len(query_start_loc)
            args = (num_tokens, max_num_tokens, query_start_loc.numpy(), positions.numpy(),
                    block_table.reshape(-1).numpy(), stride, block_size, slot_mapping.numpy())
            if "TILE_BLOCK_SIZE" in constexprs:
                ascend_slot_mapping_kernel_port(*args, **constexprs)
            else:
                compute_slot_mapping_kernel_port(
                    *args, total_cp_world_size=constexprs["TOTAL_CP_WORLD_SIZE"],
                    total_cp_rank=constexprs["TOTAL_CP_RANK"],
                    cp_kv_cache_interleave_size=constexprs["CP_KV_CACHE_INTERLEAVE_SIZE"],
                    pad_id=constexprs["PAD_ID"])

        return launch

    def fused_groups(self, group_count, num_reqs, *args, **kwargs) -> None:
        """vllm-ascend's compute_slot_mapping_fused_groups (one launch for every attention group): logged."""
        self.fused.append((group_count, num_reqs))


class CpuGpuBuffer:
    """vLLM's ``CpuGpuBuffer`` (vllm/v1/utils.py) with the device half on the CPU."""

    def __init__(self, *size, dtype, device, pin_memory, with_numpy=True):
        self.cpu = torch.zeros(*size, dtype=dtype)
        self.gpu = torch.zeros_like(self.cpu)
        if with_numpy:
            self.np = self.cpu.numpy()

    def copy_to_gpu(self, n=None):
        if n is None:
            return self.gpu.copy_(self.cpu)
        return self.gpu[:n].copy_(self.cpu[:n])


class AttentionSpec:
    """A KV-cache spec that is neither Mamba nor circular."""


class MambaSpec:
    """Stands in for vLLM's MambaSpec (0.23 tests isinstance, 0.30 asks get_kv_cache_spec_kind)."""


class CircularSpec:
    """A circular tail cache (vLLM 0.30 CircularBufferSpec): one ring block per request."""

    is_circular = True


def kv_cache_group(spec) -> SimpleNamespace:
    return SimpleNamespace(kv_cache_spec=spec)


def _module(name: str, **attrs) -> ModuleType:
    module = ModuleType(name)
    module.__dict__.update(attrs)
    return module


def _load(name: str, path: Path, monkeypatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _fakes(tree: Path, kernel: KernelLaunches) -> dict[str, ModuleType]:
    one_rank = SimpleNamespace(world_size=1, rank_in_group=0)
    kind = SimpleNamespace(MAMBA="mamba", ATTENTION="attention")
    ascend_kernel = {"_compute_slot_mapping_kernel": kernel, "compute_slot_mapping_fused_groups": kernel.fused_groups}
    if (tree / ASCEND_KERNEL).is_file():  # its plain-Python helper, as the release has it
        ascend_kernel["_next_power_of_2"] = load_defs(tree / ASCEND_KERNEL, ["_next_power_of_2"], {})["_next_power_of_2"]
    return {
        "vllm.distributed": _module("vllm.distributed", get_dcp_group=lambda: one_rank, get_pcp_group=lambda: one_rank),
        "vllm.utils.math_utils": _module("vllm.utils.math_utils", cdiv=lambda a, b: -(-a // b)),
        "vllm.v1.attention.backends.utils": _module("vllm.v1.attention.backends.utils", PAD_SLOT_ID=PAD_SLOT_ID),
        "vllm.v1.kv_cache_interface": _module(
            "vllm.v1.kv_cache_interface",
            KVCacheGroupSpec=type("KVCacheGroupSpec", (), {}),
            MambaSpec=MambaSpec,
            UniformTypeKVCacheSpecs=type("UniformTypeKVCacheSpecs", (), {}),
            KVCacheSpecKind=kind,
            get_kv_cache_spec_kind=lambda spec: kind.MAMBA if isinstance(spec, MambaSpec) else kind.ATTENTION,
        ),
        "vllm.v1.utils": _module("vllm.v1.utils", CpuGpuBuffer=CpuGpuBuffer),
        "vllm.v1.worker.block_table": _module("vllm.v1.worker.block_table", _compute_slot_mapping_kernel=kernel),
        "vllm.v1.worker.cp_utils": _module("vllm.v1.worker.cp_utils", get_total_cp_world_size=lambda: 1),
        "vllm_ascend.core.kv_cache_interface": _module(
            "vllm_ascend.core.kv_cache_interface",
            is_circular_kv_cache_spec=lambda spec: getattr(spec, "is_circular", False)),
        "vllm_ascend.distributed.utils": _module(
            "vllm_ascend.distributed.utils", get_decode_context_model_parallel_world_size=lambda: 1),
        "vllm_ascend.ops.triton.compute_slot_mapping": _module(
            "vllm_ascend.ops.triton.compute_slot_mapping", **ascend_kernel),
    }


def load_block_table(tree: Path, monkeypatch) -> tuple[ModuleType, KernelLaunches]:
    """The tree's block_table module and the fake kernel it launches (sys.modules restored by ``monkeypatch``)."""
    kernel = KernelLaunches()
    fakes = _fakes(tree, kernel)
    for name in ("vllm", "vllm.utils", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.backends",
                 "vllm.v1.worker", "vllm_ascend", "vllm_ascend.core", "vllm_ascend.distributed", "vllm_ascend.ops",
                 "vllm_ascend.ops.triton", "vllm_ascend.worker"):
        fakes[name] = _module(name, __path__=[])
    for name, module in fakes.items():
        monkeypatch.setitem(sys.modules, name, module)
    # No accelerator here, so nothing can be page-locked: pinning is the identity.
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, device=None: self)
    worker = tree / "vllm_ascend" / "worker"
    for helper in ("slot_mapping_cpu", "host_state_tracker"):
        if (worker / f"{helper}.py").is_file():
            _load(f"vllm_ascend.worker.{helper}", worker / f"{helper}.py", monkeypatch)
    return _load("patched_block_table", worker / "block_table.py", monkeypatch), kernel


def load_helper(tree: Path, name: str, monkeypatch) -> ModuleType:
    """The patched, numpy-only helper module ``vllm_ascend/worker/<name>.py`` of ``tree``, loaded by path."""
    return _load(f"patched_{name}", tree / "vllm_ascend" / "worker" / f"{name}.py", monkeypatch)
