"""A simulated NPU host for the ladder tests: what run-ladder.sh finds on PATH and in its environment.

- ``vllm``: a stand-in that runs ``sim_server.py`` for ``vllm serve`` (with the argv serve.sh gave it)
  and the REAL vLLM 0.23.0 CLI for everything else (``vllm bench serve``, vLLM's own client);
- ``optkit``: this checkout's optkit (``python -m optkit``), so ``optkit apply``/``revert`` run for
  real on a copy of the real vllm-ascend 0.23.0 tree;
- ``npu-smi``: prints a 910C device table (the host facts need one);
- ``build-kernels-stub``: KERNEL_BUILD_CMD; AscendC kernels cannot be built here, so it records
  which kernel specs the step's lock names (the simulation reads them) and counts the builds;
- a tiny HF tokenizer, built with the ``tokenizers`` package and saved locally (nothing from a hub):
  ``vllm bench serve`` needs one for the random dataset; with a config.json beside it, since
  run-ladder.sh takes a model directory only with one.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIM = Path(__file__).resolve().parent / "sim_server.py"
TOKENIZER = "tiny-tokenizer"
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512}

VLLM = """#!/usr/bin/env bash
if [ "${{1:-}}" = serve ]; then
  shift
  exec {python} {sim} "$@"
fi
exec {python} -m vllm.entrypoints.cli.main "$@"
"""
OPTKIT = """#!/usr/bin/env bash
exec {python} -m optkit "$@"
"""
NPU_SMI = """#!/bin/sh
echo "| npu-smi 24.1.rc3                 Version: 24.1.rc3                                             |"
echo "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
echo "| 0     910C                | OK            | 176.5       39                0    / 0             |"
echo "| 0                         | 0000:9D:00.0  | 0           0    / 0          3380 / 65536         |"
"""
BUILD_STUB = """#!/usr/bin/env bash
# build-kernels-stub STEP_DIR TREE: record the kernel specs of the step's lock instead of building them
{python} -c 'import json, sys; print(" ".join(k["spec"] for k in json.load(open(sys.argv[1]))["kernels"]))' \\
  "$1/optkit.lock.json" > {kernels}
echo "$(basename "$1")" >> {builds}
"""


def tiny_tokenizer(dest: Path) -> Path:
    """A word-level tokenizer of 512 tokens (w0 … w508 and three specials), saved as a HF tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i + 3 for i in range(509)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(str(dest))
    (dest / "config.json").write_text(json.dumps(CONFIG))  # a checkpoint directory, as run-ladder.sh checks
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


class SimHost:
    """The directory ``root`` with bin/, the tokenizer, the simulation profile and its logs."""

    def __init__(self, root: Path, tree: Path, profile: dict):
        self.root, self.tree = root, tree
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.profile_path, self.log = root / "sim-profile.json", root / "sim-starts.jsonl"
        self.kernels, self.builds = root / "sim-kernels-built", root / "kernel-builds.log"
        python = sys.executable
        _script(self.bin / "vllm", VLLM.format(python=python, sim=SIM))
        _script(self.bin / "optkit", OPTKIT.format(python=python))
        _script(self.bin / "npu-smi", NPU_SMI)
        _script(self.bin / "build-kernels-stub", BUILD_STUB.format(python=python, kernels=self.kernels,
                                                                   builds=self.builds))
        tiny_tokenizer(root / TOKENIZER)
        self.port = free_port()
        self.write_profile(profile)

    def write_profile(self, profile: dict) -> None:
        full = {**profile, "tree": str(self.tree), "kernels_file": str(self.kernels), "log": str(self.log)}
        self.profile_path.write_text(json.dumps(full, indent=1))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HCCL_"))}
        env.update(PATH=f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}", PYTHONPATH=str(REPO),
                   PYTHON=sys.executable, MODEL=TOKENIZER, PORT=str(self.port), HEALTH_TIMEOUT="120",
                   SIM_PROFILE=str(self.profile_path), KERNEL_BUILD_CMD=str(self.bin / "build-kernels-stub"),
                   ASCEND_TOOLKIT_HOME=str(self.root / "toolkit"), TOKENIZERS_PARALLELISM="false",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        toolkit = self.root / "toolkit" / "x86_64-linux"
        toolkit.mkdir(parents=True, exist_ok=True)
        (toolkit / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann-toolkit\nversion=9.0.1\n")
        return env

    def starts(self) -> list[dict]:
        """Every simulated server start so far: its argv and the recipes it found active."""
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.is_file() else []

    def builds_done(self) -> list[str]:
        return self.builds.read_text().split() if self.builds.is_file() else []
