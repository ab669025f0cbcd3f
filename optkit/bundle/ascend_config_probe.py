"""Validate an ``--additional-config`` with a vllm-ascend tree's own ``AscendConfig``, in its own process.

    VLLM_TARGET_DEVICE=cpu PYTHONPATH=TREE python ascend_config_probe.py '{"additional_config": {...}, "factory": [...]}'

prints one JSON object on stdout. For the strict releases (0.27.1rc1 on: ``AscendConfig`` is a
pydantic ``@config`` dataclass with ``extra="forbid"``) this constructs the real class from the
tree — type coercion, ranges, unknown keys (nested ones too) — as ``init_ascend_config`` does
after it has taken out the keys it consumes itself (``factory``, read from the tree by
``optkit.versions.knobs``). ``derive_and_validate`` (the cross-config checks that need a whole
``VllmConfig``) is not run. Run with the Python of the vLLM the release pairs with (vllm-ascend
imports vLLM); no NPU is needed: vLLM's platform is pinned to CPU, and the ``_build_info`` module
that a wheel build generates (``setup.py gen_build_info``) is supplied for an A3 build.

Result: ``{"status": "ok"|"failed"|"skipped", "problems": [{"loc": "a.b", "message": ...}],
"reason": ..., "config": {...}}`` (``config``: the validated ``ascend_compilation_config``).
"""

from __future__ import annotations

import json
import sys
import types


def main(argv: list[str]) -> int:
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        result = validate(json.loads(argv[1]))
    finally:
        sys.stdout = real_stdout
    print(json.dumps(result, sort_keys=True, default=str))
    return 0


def validate(request: dict) -> dict:
    try:
        config_class, error_class = _import()
    except Exception as exc:  # noqa: BLE001 - any import failure means "not usable here"
        return {"status": "skipped", "reason": f"cannot import the tree's AscendConfig ({type(exc).__name__}: {exc})"}
    factory = set(request.get("factory", []))
    kwargs = {k: v for k, v in request["additional_config"].items() if k not in factory}
    try:
        config = config_class(sparse_kv_offload_config=None, **kwargs)
    except error_class as exc:
        problems = [{"loc": ".".join(str(p) for p in err["loc"]), "message": f"{err['type']}: {err['msg']}"}
                    for err in exc.errors()]
        return {"status": "failed", "problems": problems}
    except (TypeError, ValueError, AssertionError) as exc:
        return {"status": "failed", "problems": [{"loc": "", "message": f"{type(exc).__name__}: {exc}"}]}
    compilation = getattr(config, "ascend_compilation_config", None)
    return {"status": "ok", "problems": [], "config": vars(compilation) if compilation is not None else {}}


def _import():
    build = types.ModuleType("vllm_ascend._build_info")
    build.__device_type__ = "A3"  # what `SOC_VERSION=ascend910_9391 pip install` writes
    sys.modules["vllm_ascend._build_info"] = build
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms._current_platform = CpuPlatform()
    from pydantic import ValidationError

    from vllm_ascend import ascend_config

    return ascend_config.AscendConfig, ValidationError


if __name__ == "__main__":
    sys.exit(main(sys.argv))
