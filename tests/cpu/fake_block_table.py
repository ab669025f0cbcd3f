"""Run a patched ``vllm_ascend/worker/block_table.py`` on CPU among fakes of the vLLM names it imports.

block_table.py imports vLLM's parallel groups, ``CpuGpuBuffer`` and the Triton
``_compute_slot_mapping_kernel``. Here the groups have one rank, a ``CpuGpuBuffer`` keeps its
"device" half on the CPU, and the kernel is a numpy port of its Triton source, so the patched
``BlockTable`` runs unchanged and its host and kernel slot-mapping paths can be compared.
Patched helper modules (``vllm_ascend.worker.*``) are loaded from the same tree by path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import torch
from compat_support import scratch_tree, specs

from optkit.tree.apply import apply

PAD_SLOT_ID = -1  # vllm-0.23.0 vllm/v1/attention/backends/utils.py:44


def patched_tree(tmp_path_factory, recipe_id: str) -> Path:
    """A scratch vllm-ascend 0.23.0 tree with the patches of ``recipe_id`` applied."""
    root = scratch_tree(tmp_path_factory.mktemp(recipe_id))
    result = apply(root, specs([recipe_id]))
    assert [o.outcome for o in result.outcomes] == ["applied"] * len(result.outcomes), result.outcomes
    return root


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
    """Numpy port of ``_compute_slot_mapping_kernel``, vllm-0.23.0 vllm/v1/worker/block_table.py:325-380.

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


class KernelLaunches:
    """Stands in for the Triton kernel: ``kernel[grid](*args, **constexprs)`` runs the port and is logged."""

    def __init__(self) -> None:
        self.grids: list[tuple[int, ...]] = []

    def __getitem__(self, grid):
        def launch(num_tokens, max_num_tokens, query_start_loc, positions, block_table, stride, block_size,
                   slot_mapping, *, TOTAL_CP_WORLD_SIZE, TOTAL_CP_RANK, CP_KV_CACHE_INTERLEAVE_SIZE, PAD_ID,
                   BLOCK_SIZE):
            self.grids.append(tuple(grid))
            assert grid[0] == len(query_start_loc)
            compute_slot_mapping_kernel_port(
                num_tokens, max_num_tokens, query_start_loc.numpy(), positions.numpy(),
                block_table.reshape(-1).numpy(), stride, block_size, slot_mapping.numpy(),
                total_cp_world_size=TOTAL_CP_WORLD_SIZE, total_cp_rank=TOTAL_CP_RANK,
                cp_kv_cache_interleave_size=CP_KV_CACHE_INTERLEAVE_SIZE, pad_id=PAD_ID,
            )

        return launch


class CpuGpuBuffer:
    """vLLM's ``CpuGpuBuffer`` (vllm/v1/utils.py:109) with the device half on the CPU."""

    def __init__(self, *size, dtype, device, pin_memory, with_numpy=True):
        self.cpu = torch.zeros(*size, dtype=dtype)
        self.gpu = torch.zeros_like(self.cpu)
        if with_numpy:
            self.np = self.cpu.numpy()

    def copy_to_gpu(self, n=None):
        if n is None:
            return self.gpu.copy_(self.cpu)
        return self.gpu[:n].copy_(self.cpu[:n])


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


def load_block_table(tree: Path, monkeypatch) -> tuple[ModuleType, KernelLaunches]:
    """The tree's block_table module and the fake kernel it launches (sys.modules restored by ``monkeypatch``)."""
    one_rank = SimpleNamespace(world_size=1, rank_in_group=0)
    kernel = KernelLaunches()
    fakes = {
        "vllm.distributed": _module("vllm.distributed", get_dcp_group=lambda: one_rank, get_pcp_group=lambda: one_rank),
        "vllm.utils.math_utils": _module("vllm.utils.math_utils", cdiv=lambda a, b: -(-a // b)),
        "vllm.v1.attention.backends.utils": _module("vllm.v1.attention.backends.utils", PAD_SLOT_ID=PAD_SLOT_ID),
        "vllm.v1.kv_cache_interface": _module(
            "vllm.v1.kv_cache_interface",
            KVCacheGroupSpec=type("KVCacheGroupSpec", (), {}),
            MambaSpec=type("MambaSpec", (), {}),
            UniformTypeKVCacheSpecs=type("UniformTypeKVCacheSpecs", (), {}),
        ),
        "vllm.v1.utils": _module("vllm.v1.utils", CpuGpuBuffer=CpuGpuBuffer),
        "vllm.v1.worker.block_table": _module("vllm.v1.worker.block_table", _compute_slot_mapping_kernel=kernel),
        "vllm.v1.worker.cp_utils": _module("vllm.v1.worker.cp_utils", get_total_cp_world_size=lambda: 1),
    }
    for name in ("vllm", "vllm.utils", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.backends",
                 "vllm.v1.worker", "vllm_ascend", "vllm_ascend.worker"):
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
