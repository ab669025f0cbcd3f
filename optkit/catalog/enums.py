"""The catalog's enumerations, in a module of their own: the run-time uses them without pydantic.

``optkit.catalog.schema`` re-exports them for the models that validate them.
"""

from __future__ import annotations

from enum import Enum


class Kind(str, Enum):
    """What a recipe changes."""

    config = "config"  # additional_config / vLLM config keys only
    env = "env"  # environment variables only
    source_patch = "source-patch"  # patches to the vllm-ascend tree
    kernel = "kernel"  # AscendC op changes + op-package rebuild
    compile = "compile"  # compilation / graph options
    launch = "launch"  # how vllm serve is launched (version, speculative decoding, …)
    host = "host"  # a host setting outside vllm serve (kernel, CPU): preflight.sh checks it


class UpstreamStatus(str, Enum):
    new = "new"
    partly_upstream = "partly-upstream"
    upstream = "upstream"


class Verification(str, Enum):
    """How far a recipe has been verified, weakest first."""

    declared = "declared"  # catalog entry only
    config_checked = "config-checked"  # its keys/env vars exist in the real tree
    applies = "applies"  # its patches apply to the real tree
    compiles = "compiles"  # patched Python compiles and passes pyflakes
    cpu_reference = "cpu-reference"  # its logic is tested on CPU against a reference
    hardware_verified = "hardware-verified"  # measured on an Ascend NPU


VERIFICATION_ORDER = list(Verification)


CHOOSABLE = {"dp": "auto", "flashcomm1": None, "prefix_caching": None}
"""Request fields a recipe's ``choices`` may fill in, and the value that leaves each open (``optkit.resolve.choices``)."""
