"""Where the ranks of a capture are: the ``*_ascend_pt`` folders the Ascend PyTorch Profiler writes.

vLLM + vllm-ascend write one folder per worker into the profiler directory
(``--profiler-config.torch_profiler_dir``; older vLLM read ``VLLM_TORCH_PROFILER_DIR``), named
``{worker}_{YYYYMMDDhhmmssmmm}_ascend_pt`` (vllm-ascend names the worker ``dp0_pp0_tp0_dcp0_ep0_rank0``;
torch_npu's default is ``{host}_{pid}``), each with ``profiler_info_{rank}.json`` (or
``profiler_info.json`` without a process group) and, once the profiler has analysed it,
``ASCEND_PROFILER_OUTPUT/``. The rank is the one ``profiler_info_{rank}.json`` names, else the
folder name's ``rank{N}``, else the folder's place in name order. ``DIR`` may be that directory, one ``*_ascend_pt`` folder, or a
directory one level above them (a ladder step's ``profile/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from optkit.profile import ProfileError

OUTPUT = "ASCEND_PROFILER_OUTPUT"
_FOLDER = re.compile(r"^(?P<worker>.+)_(?P<stamp>\d{17})_ascend_pt$")
_RANK = re.compile(r"(?:^|_)rank(?P<rank>\d+)_\d{17}_ascend_pt$")
_INFO = re.compile(r"^profiler_info(?:_(?P<rank>\d+))?\.json$")


@dataclass(frozen=True)
class RankFolder:
    """One rank's folder: its rank, its capture date and its ``ASCEND_PROFILER_OUTPUT``."""

    rank: int
    folder: Path
    started: str

    @property
    def output(self) -> Path:
        return self.folder / OUTPUT


def rank_folders(directory: Path) -> list[RankFolder]:
    """The rank folders under ``directory``, by rank; a clear error when there is none or one is incomplete."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ProfileError(f"{directory}: not a directory (give the profiler directory of a capture, "
                           "or one of its *_ascend_pt folders)")
    candidates = [directory] if directory.name.endswith("_ascend_pt") else sorted(
        p for p in [*directory.glob("*_ascend_pt"), *directory.glob("*/*_ascend_pt")] if p.is_dir())
    if not candidates:
        raise ProfileError(f"{directory}: no *_ascend_pt folder here or one level down; this is not an Ascend "
                           "PyTorch Profiler capture (vLLM writes one per worker into --profiler-config."
                           "torch_profiler_dir between POST /start_profile and /stop_profile; docs/profile.md)")
    found = [_rank_folder(p, index) for index, p in enumerate(candidates)]
    ranks: dict[int, Path] = {}
    for entry in found:
        if entry.rank in ranks:
            raise ProfileError(f"{directory}: two captures of rank {entry.rank} ({ranks[entry.rank].name}, "
                               f"{entry.folder.name}); give the directory of one capture")
        ranks[entry.rank] = entry.folder
    return sorted(found, key=lambda e: e.rank)


def _rank_folder(folder: Path, index: int) -> RankFolder:
    if not (folder / OUTPUT).is_dir():
        raise ProfileError(f"{folder}: no {OUTPUT}/ folder: the capture has not been analysed yet (the profiler "
                           "writes it when it stops; on the NPU host run "
                           "`python -c \"from torch_npu.profiler.profiler import analyse; analyse('DIR')\"`)")
    infos = sorted(p.name for p in folder.iterdir() if _INFO.match(p.name))
    named = _RANK.search(folder.name)
    rank = int(named["rank"]) if named else index
    if infos:
        match = _INFO.match(infos[0])
        rank = int(match["rank"]) if match["rank"] is not None else 0
    return RankFolder(rank, folder, _started(folder.name))


def _started(name: str) -> str:
    """The capture's start as ``YYYY-MM-DD HH:MM`` from the folder's name (``unknown`` when it has none)."""
    match = _FOLDER.match(name)
    if not match:
        return "unknown"
    s = match["stamp"]
    return f"{s[0:4]}-{s[4:6]}-{s[6:8]} {s[8:10]}:{s[10:12]}"
