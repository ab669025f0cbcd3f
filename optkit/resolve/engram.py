"""DeepSeek-V4.1's Engram on Ascend: the layouts vllm-ascend serves it on.

vllm-ascend 0.30.0rc1 and 0.30.0rc2 turn Engram on for every ``DeepseekV41ForCausalLM`` whose config declares
``engram_layer_ids`` (DeepSeek-V4.1-Flash's does: tests/fixtures/hf/deepseek-v4.1-flash/config.json) and refuse it
at start-up outside TP 1, 2, 4 or 8 with PP and DCP 1 (vllm_ascend/platform.py ``_validate_engram_config``,
:1615-1621 in 0.30.0rc2: "Ascend Engram requires TP=1/2/4/8 with PP=DCP=1."). A plan asking for another layout is
refused here, before a bundle is written, with that line. Releases before 0.30.0rc1 have no such check (their
trees do not name Engram), and nothing is refused there."""

from __future__ import annotations

from packaging.version import Version

from optkit.errors import RequestError

ARCHITECTURE = "DeepseekV41ForCausalLM"
SINCE = "0.30.0rc1"
SOURCE = "vllm-ascend 0.30.0rc2 vllm_ascend/platform.py:1615-1621"
TP_SIZES = (1, 2, 4, 8)


def tp_sizes(model, release) -> tuple[int, ...] | None:
    """The TP sizes a plan of ``model`` may take on ``release`` where Engram bounds them (``TP_SIZES``), else None:
    the fit's smallest changes offer no other (``optkit.resolve.fit.smallest_changes``)."""
    if model.architecture != ARCHITECTURE or Version(str(release)) < Version(SINCE):
        return None
    return TP_SIZES


def check_engram(request, model, release) -> None:
    """Refuse a layout vllm-ascend refuses for DeepSeek-V4.1's Engram (module docstring), naming the flag."""
    if model.architecture != ARCHITECTURE or Version(str(release)) < Version(SINCE):
        return
    asked = [(flag, value) for flag, value, fits in (
        ("--tp", request.tp, request.tp in TP_SIZES),
        ("--pp", request.pp or 1, (request.pp or 1) == 1),
        ("--dcp", request.dcp or 1, (request.dcp or 1) == 1)) if not fits]
    if asked:
        flag, value = asked[0]
        raise RequestError(f"{flag} {value}: {model.id} serves with Engram, which vllm-ascend {release} runs only "
                           f"at TP 1, 2, 4 or 8 with PP and DCP 1 ({SOURCE}: \"Ascend Engram requires TP=1/2/4/8 "
                           "with PP=DCP=1.\"): choose a layout within that")


__all__ = ["check_engram", "tp_sizes"]
