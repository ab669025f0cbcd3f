"""The paired vLLM's Python in tests: found, skipped or, under CI, a failure."""

from __future__ import annotations

import os

import pytest

from optkit.bundle.probe import find_vllm_python

CI = os.environ.get("CI") == "true"
SUITE_VLLMS = ("0.23.0", "0.30.0")
"""The vLLMs the README's test command provides (scripts/test: vLLM 0.23.0 in its environment, the 0.30.0
virtualenv): under CI a test that needs one of them must not skip."""


def paired_python(vllm: str) -> str:
    """The Python with vLLM ``vllm``; when there is none, a skip, or under CI a failure if the test command
    installs that vLLM (another release's vLLM is not built here, so its tests skip)."""
    python, why = find_vllm_python(vllm)
    if python is None:
        pytest.fail(why) if CI and vllm in SUITE_VLLMS else pytest.skip(why)
    return python
