"""vLLM's own engine-argument resolution for one node's argv, run in the paired vLLM's Python by
``vllm_probe`` (a sibling imported by path: nothing of optkit is imported here).

For each argv the parser accepted, ``resolve`` runs what ``vllm serve`` runs before it starts an
engine: ``AsyncEngineArgs.from_cli_args`` and ``create_engine_config`` (``headless=True`` on a
``--headless`` node, as ``vllm serve --headless`` does), with the model's ``config.json`` and no
weights, on vLLM's CPU platform (``vllm_probe`` pins it). What it cannot run here is said in each
answer's ``not_run``: the NPU platform's own config updates (vllm-ascend's ``check_and_update_config``),
the engines and, across the nodes, the DP handshake, whose headless rule ``handshake`` applies to the
load-balancing mode vLLM resolved on the leader.

vLLM inspects the model's class (``ModelRegistry.inspect_model_cls``) in a subprocess that imports
the model's module; on a CPU Python that module's vision and quantization imports (``STUBBED``) may
be missing, so the class is inspected in this process with those modules, only when absent, as empty
stand-ins: the interface flags vLLM reads (hybrid, multimodal, pipeline support ...) are the real class's.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import types

STUBBED = ("einops", "torchvision", "compressed_tensors")
"""Packages a model module imports at its top that a CPU-only vLLM environment may lack; none is used
to decide a configuration (einops: tensor reshapes, torchvision: image transforms, compressed_tensors:
a quantization format)."""
NOT_RUN = ["the NPU platform's config updates (vllm-ascend's check_and_update_config)", "the engines"]
HANDSHAKE_SOURCE = "vllm/v1/engine/utils.py"
PLUGIN_QUANTIZATIONS = {
    "ascend": "vllm-ascend's ModelSlim quantization config (--quantization ascend is registered here as its plugin "
              "registers it, with a stand-in that reads no quant_model_description.json)",
    "mxfp8": "vllm-ascend's ModelOpt MXFP8 config (AscendModelOptMxFp8Config replaces vLLM's mxfp8 at start-up from "
             "0.27.1rc1; registered here as a stand-in that reads no hf_quant_config.json)",
}
"""The --quantization names vllm-ascend registers for its checkpoints (vllm_ascend/utils.py
ASCEND_QUANTIZATION_METHOD; quantization/configs/modelopt_mxfp8_config.py; optkit.resolve.quantization cites them
per release), each with what the probe's stand-in does not do."""


def resolve(vllm, args, labels: list[str], argv: list[str], model_config: str | None) -> dict:
    """The engine configuration vLLM builds from the parsed ``args`` of one node: ``{"ran", "not_run",
    "parallel", "problems"}`` (``parallel``: the data-parallel load balancing vLLM resolved)."""
    if not model_config:
        return {"ran": [], "not_run": ["create_engine_config (no config.json for the model)"], "parallel": None,
                "problems": [], "stubbed": []}
    headless = bool(getattr(args, "headless", False))
    finder = _AbsentFinder()
    not_run = list(NOT_RUN)
    if getattr(args, "quantization", None) in PLUGIN_QUANTIZATIONS:
        not_run.append(_register_plugin_quantization(args.quantization))
    speculative = getattr(args, "speculative_config", None) or {}
    if speculative.get("method") == "suffix" and importlib.util.find_spec("arctic_inference") is None:
        not_run.append("the speculative config (suffix decoding needs the arctic-inference package, not installed "
                       "here; preflight.sh checks the host for it; the configuration is built without "
                       "--speculative-config, whose keys the vllm check parsed)")
        args.speculative_config = None
    if getattr(args, "engram_config", None) is not None:
        not_run.append("the Engram config's model check (vLLM's requires CUDA and the checkpoint's n-gram layer ids; "
                       "vllm-ascend replaces it at start-up, patch/platform/patch_engram_config.py in 0.30.0rc2; the "
                       "configuration is built without --engram-config, whose keys the vllm check parsed)")
        args.engram_config = None
    draft = speculative.get("model")
    if draft and not os.path.isdir(draft):  # a Hub id: its config.json is not on this machine, nor fetched
        not_run.append(f"the speculative config (its draft model {draft} is not here to read; the configuration is "
                       "built without --speculative-config, whose keys the vllm check parsed)")
        args.speculative_config = None
    if (skipped := _config_code_absent(model_config, args)) is not None:
        return {"ran": ["AsyncEngineArgs.from_cli_args"], "not_run": [*not_run, skipped], "parallel": None,
                "problems": [], "stubbed": []}
    with _model_dir(model_config, args, not_run) as model_dir, _inspected_here(vllm, finder), _npu_caching(not_run), \
            _ascend_config_looked_up(args, finder):
        args.model = model_dir
        try:
            with _stood_in(finder):
                config = _engine_config(vllm, args, headless, not_run)
        except Exception as exc:  # noqa: BLE001 - vLLM refuses with many types
            # the stand-ins, not the launch (an earlier argv of this process may have put them in place already)
            stood = finder.stubbed | {name for name in STUBBED if isinstance(sys.modules.get(name), _Absent)}
            if "failed to be inspected" in str(exc) and stood:
                skipped = (f"create_engine_config (vLLM could not inspect the model class here: its module uses "
                           f"{', '.join(sorted(stood))} beyond importing it, absent on this CPU Python; "
                           "installed beside the paired vLLM, the check runs)")
                return {"ran": ["AsyncEngineArgs.from_cli_args"], "not_run": [*not_run, skipped], "parallel": None,
                        "problems": [], "stubbed": sorted(stood)}
            message = f"vLLM {vllm.version} refuses it in create_engine_config: {type(exc).__name__}: {_first_line(exc)}"
            return {"ran": ["AsyncEngineArgs.from_cli_args"], "not_run": not_run, "parallel": None,
                    "problems": [{"check": "engine", "message": message, "blame": _named(str(exc), argv, labels)}],
                    "stubbed": sorted(finder.stubbed)}
    return {"ran": ["AsyncEngineArgs.from_cli_args", "create_engine_config"], "not_run": not_run,
            "parallel": _parallel(config.parallel_config, headless), "problems": [], "stubbed": sorted(finder.stubbed)}


def _register_plugin_quantization(name: str) -> str:
    """Register ``name`` (one of ``PLUGIN_QUANTIZATIONS``) as vllm-ascend's plugin does at start-up
    (``@register_quantization_config`` on its config, which also makes the platform accept it), with a stand-in
    config that answers what ``create_engine_config`` asks as the real one does: no config file for vLLM to look
    up (the real ModelSlim ``get_config_filenames`` returns [] and reads quant_model_description.json itself,
    later) and int8, float16 and bfloat16 activations (``get_supported_act_dtypes``). What the stand-in does not
    do is returned for ``not_run``."""
    import torch
    from vllm.model_executor.layers import quantization
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

    registered = getattr(quantization, "_CUSTOMIZED_METHOD_TO_QUANT_CONFIG", {}).get(name)
    if registered is None or not getattr(registered, "optkit_stand_in", False):
        class PluginQuantizationStandIn(QuantizationConfig):
            optkit_stand_in = True

            def get_name(self):
                return name

            @classmethod
            def get_supported_act_dtypes(cls):
                return [torch.int8, torch.float16, torch.bfloat16]

            @classmethod
            def get_min_capability(cls):
                return 0

            @staticmethod
            def get_config_filenames():
                return []

            @classmethod
            def from_config(cls, config):
                return cls()

            def get_quant_method(self, layer, prefix):
                return None

        quantization.register_quantization_config(name)(PluginQuantizationStandIn)
    return PLUGIN_QUANTIZATIONS[name]


@contextlib.contextmanager
def _ascend_config_looked_up(args, finder: "_AbsentFinder"):
    """With a ``PLUGIN_QUANTIZATIONS`` ``--quantization``: ``get_quant_config`` (vllm/model_executor/model_loader/weight_utils.py)
    gives the registered stand-in as vLLM's own does for a config with no file to read (``quant_cls()``),
    without importing first every other method's module (compressed_tensors' among them, whose module-level code
    an empty stand-in cannot run); ``STUBBED`` modules stand in, when absent, for the imports of weight_utils."""
    name = getattr(args, "quantization", None)
    if name not in PLUGIN_QUANTIZATIONS:
        yield
        return
    sys.meta_path.append(finder)
    try:
        from vllm.model_executor.layers import quantization
        from vllm.model_executor.model_loader import weight_utils

        real = weight_utils.get_quant_config
        registered = quantization._CUSTOMIZED_METHOD_TO_QUANT_CONFIG[name]
        weight_utils.get_quant_config = lambda model_config, load_config: (
            registered() if model_config.quantization == name else real(model_config, load_config))
        try:
            yield
        finally:
            weight_utils.get_quant_config = real
    finally:
        sys.meta_path.remove(finder)


def _engine_config(vllm, args, headless: bool, not_run: list[str]):
    """``create_engine_config``; a KV connector vLLM does not know (vllm-ascend's plugin registers its own,
    and vLLM loads the connector's class to build the config) is left out, and ``not_run`` says so."""
    try:
        return vllm.engine_args.from_cli_args(args).create_engine_config(headless=headless)
    except ValueError as exc:
        connector = re.search(r"Unsupported connector type: (\S+)", str(exc))
        if connector is None or args.kv_transfer_config is None:
            raise
    not_run.append(f"the KV connector {connector.group(1)} (vllm-ascend's: its class is not loaded here, "
                   "the configuration is built without --kv-transfer-config)")
    args.kv_transfer_config = None
    return vllm.engine_args.from_cli_args(args).create_engine_config(headless=headless)


def _parallel(parallel, headless: bool) -> dict:
    mode = "external" if parallel.data_parallel_external_lb else "hybrid" if parallel.data_parallel_hybrid_lb else "internal"
    return {"lb": mode, "rank": parallel.data_parallel_rank, "size": parallel.data_parallel_size,
            "size_local": parallel.data_parallel_size_local, "headless": headless}


def handshake(requests: list[dict], results: list[dict]) -> None:
    """Across the nodes of one DP group (``requests`` numbered by ``node``): the leader's handshake requires a remote engine to be
    headless exactly when the leader resolved internal load balancing (``remote_should_be_headless``
    in ``HANDSHAKE_SOURCE``, 0.23.0 and 0.30.0 alike). A refusal is added to the leader's problems,
    blamed on the owner of the flag that made the leader's mode."""
    if len(results) < 2 or any("node" not in request for request in requests):  # PD instances: servers of their own
        return
    parallels = [(r.get("engine") or {}).get("parallel") for r in results]
    if parallels[0] is None or parallels[0]["headless"]:
        return
    should_be_headless = parallels[0]["lb"] == "internal"
    leader = requests[0]
    for node, parallel in enumerate(parallels[1:], start=1):
        if parallel is None or parallel["headless"] == should_be_headless:
            continue
        rule = ("must not use --headless in external or hybrid dp lb mode" if parallel["headless"]
                else "must use --headless unless in external or hybrid dp lb mode")
        blame = _owners(leader, "--data-parallel-start-rank") or _owners(leader, "--data-parallel-size-local") or ["optkit"]
        results[0]["problems"].append({"check": "engine", "blame": blame, "message": (
            f"vLLM {results[0]['vllm_version']} resolves {parallels[0]['lb']} DP load balancing on the leader "
            f"(create_engine_config), so its handshake would refuse node {node}: \"Remote engine {parallel['rank']} "
            f"{rule}\" (the handshake's rule in {HANDSHAKE_SOURCE}, applied to the modes vLLM resolved: the handshake "
            "itself needs the engines)")})
        results[0]["status"] = "failed"


def _owners(request: dict, flag: str) -> list[str]:
    argv, labels = request["argv"], request["labels"]
    return [part for part in labels[argv.index(flag)].split(",") if part] if flag in argv else []


def _named(message: str, argv: list[str], labels: list[str]) -> list[str]:
    """The owners of the options vLLM's message names (``--data-parallel-size-local`` ...), else optkit."""
    flags = [flag for flag in dict.fromkeys(re.findall(r"--[a-z][\w-]*", message)) if flag in argv]
    owners = [part for flag in flags for part in labels[argv.index(flag)].split(",") if part]
    return list(dict.fromkeys(owners)) or ["optkit"]


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:3])[:400]


def _auto_config(data) -> str | None:
    """The checkpoint's own config class a config.json names (``auto_map.AutoConfig``), or None."""
    named = (data.get("auto_map") or {}).get("AutoConfig") if isinstance(data, dict) else None
    named = named[0] if isinstance(named, list) and named else named
    return named if isinstance(named, str) and named else None


def _registered(model_type) -> str:
    """Who registers a config class for ``model_type`` here: 'vLLM' (its own config registry, consulted first by
    get_config), 'transformers', or ''."""
    from transformers import CONFIG_MAPPING

    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
    except ImportError:  # a release that moved it: only transformers' is known
        _CONFIG_REGISTRY = {}
    return "vLLM" if model_type in _CONFIG_REGISTRY else "transformers" if model_type in CONFIG_MAPPING else ""


def _config_code_absent(config: str, args) -> str | None:
    """Why ``create_engine_config`` cannot run here, or None: with ``--trust-remote-code``, a config.json whose own
    config class (``auto_map.AutoConfig``) is what vLLM would load — no config class of vLLM's or transformers'
    for its ``model_type`` — and whose code file is not beside it (a config.json alone, as optkit's fixtures are)."""
    import json

    path = os.path.join(config, "config.json") if os.path.isdir(config) else config
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    named = _auto_config(data)
    if not named or not getattr(args, "trust_remote_code", False) or _registered(data.get("model_type")):
        return None
    if os.path.isfile(os.path.join(os.path.dirname(path), named.split(".")[0] + ".py")):
        return None
    return (f"create_engine_config (the model's config class is the checkpoint's own code, {named}, for model_type "
            f"{data.get('model_type')!r}, which neither vLLM nor transformers registers; its .py file is not beside "
            "this config.json: pass the checkpoint's folder with --model-config to run it)")


@contextlib.contextmanager
def _model_dir(config: str, args, not_run: list[str]):
    """A directory holding only ``config`` as ``config.json`` (vLLM reads a model directory; no weights), as the
    served checkpoint's would be where ``config`` cannot say (each adjustment added to ``not_run``):

    - a vllm-ascend checkpoint (``--quantization ascend`` or ``mxfp8``) of a model whose ``config`` carries another
      method's ``quantization_config`` (the original weights', e.g. DeepSeek's fp8; under ``text_config`` for
      Kimi-K3's mxfp4): that block is left out, since
      vLLM would compare it with the served method and the served checkpoint's own config.json is not here;
    - a ``config`` that states no ``max_position_embeddings`` (a reconstruction that could not find it): vLLM would
      take its config class's default as the model's context, so ``--max-model-len`` is not checked against it."""
    import json

    path = os.path.join(config, "config.json") if os.path.isdir(config) else config
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    served = getattr(args, "quantization", None)
    for key in (None, "text_config", "llm_config"):  # a multimodal config keeps its language model's (Kimi-K3)
        scope = data if key is None else data.get(key)
        method = (scope.get("quantization_config") or {}).get("quant_method") if isinstance(scope, dict) else None
        if served in PLUGIN_QUANTIZATIONS and method and method != served:
            scope = {k: v for k, v in scope.items() if k != "quantization_config"}
            data = scope if key is None else {**data, key: scope}
            not_run.append(f"the config.json's {key + '.' if key else ''}quantization_config ({method}: the original "
                           f"weights'; the checkpoint --quantization {served} serves has its own config.json, not "
                           "here: pass it with --model-config to check it)")
    stated = [c for c in (data, data.get("text_config"), data.get("llm_config")) if isinstance(c, dict)
              and "max_position_embeddings" in c]
    if not stated and getattr(args, "max_model_len", None):
        not_run.append(f"--max-model-len {args.max_model_len} against the model's context (this config.json states "
                       "no max_position_embeddings: pass the checkpoint's with --model-config to check it)")
        args.max_model_len = None
    named = _auto_config(data)
    if named and getattr(args, "trust_remote_code", False) and (known := _registered(data.get("model_type"))):
        data = {k: v for k, v in data.items() if k != "auto_map"}
        not_run.append(f"the checkpoint's own config class {named} ({known}'s config class for model_type "
                       f"{data.get('model_type')!r} stands in: with --trust-remote-code, "
                       + ("vLLM loads its own class first)" if known == "vLLM" else
                          "transformers would run the checkpoint's code, which is not here)"))
    with tempfile.TemporaryDirectory(prefix="optkit-engine-") as tmp:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        if named and getattr(args, "trust_remote_code", False) and "auto_map" in data:  # its code is beside it
            source = os.path.dirname(path)
            for name in os.listdir(source):
                if name.endswith(".py"):
                    shutil.copy(os.path.join(source, name), tmp)
        yield tmp


@contextlib.contextmanager
def _stood_in(finder: "_AbsentFinder"):
    """``STUBBED`` modules stand in, when absent, for the whole of ``create_engine_config``, not only the class's
    inspection: vLLM's quantization lookup imports every method's config, compressed-tensors' among them, to find
    the one a checkpoint names (DeepSeek's fp8 weights served as published)."""
    added = finder not in sys.meta_path
    if added:
        sys.meta_path.append(finder)
    try:
        yield
    finally:
        if added:
            sys.meta_path.remove(finder)


@contextlib.contextmanager
def _npu_caching(not_run: list[str]):
    """vLLM's CPU platform switches prefix caching and chunked prefill off for an MLA model and raises the step to
    the model's length (``CpuPlatform.check_and_update_config``: "MLA is enabled on a non-GPU platform"), which the
    NPU platform does not: the argv's prefix caching, chunked prefill and step are kept through it, so that the
    checks after it see the launch's (Kimi-K3's ``--mamba-block-size`` needs the prefix caching the argv turns on).
    ``not_run`` says so where it changed anything."""
    from vllm.platforms import current_platform

    platform = type(current_platform)
    own = vars(platform).get("check_and_update_config")  # the descriptor to put back (None: inherited)
    real = platform.check_and_update_config

    def kept(cls, vllm_config):
        cache, scheduler = vllm_config.cache_config, vllm_config.scheduler_config
        before = (cache.enable_prefix_caching, scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens)
        real.__func__(cls, vllm_config)
        model = vllm_config.model_config
        after = (cache.enable_prefix_caching, scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens)
        if model is not None and getattr(model, "use_mla", False) and after != before:
            cache.enable_prefix_caching, scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens = before
            note = ("the CPU platform's switch-off of prefix caching and chunked prefill for MLA models (an NPU "
                    "keeps them: the argv's are kept)")
            if note not in not_run:
                not_run.append(note)

    platform.check_and_update_config = classmethod(kept)
    try:
        yield
    finally:
        if own is None:
            del platform.check_and_update_config
        else:
            platform.check_and_update_config = own


@contextlib.contextmanager
def _inspected_here(vllm, finder: "_AbsentFinder"):
    """vLLM's model-class inspection in this process, ``STUBBED`` modules standing in when absent, and
    vLLM's inspection cache neither read nor written (a stand-in must not leave a record behind)."""
    from vllm.model_executor.models import registry

    lazy = getattr(registry, "_LazyRegisteredModel", None)
    if not all(hasattr(owner, name) for owner, name in ((registry, "_run_in_subprocess"), (lazy, "_load_modelinfo_from_cache"),
                                                         (lazy, "_save_modelinfo_to_cache"))):
        yield  # another vLLM's registry: its own inspection runs (a class it cannot import is its refusal)
        return
    saved = registry._run_in_subprocess
    cache = lazy._load_modelinfo_from_cache, lazy._save_modelinfo_to_cache

    def in_process(fn):
        sys.meta_path.append(finder)
        try:
            return fn()
        finally:
            sys.meta_path.remove(finder)

    registry._run_in_subprocess = in_process
    lazy._load_modelinfo_from_cache, lazy._save_modelinfo_to_cache = (lambda *a: None), (lambda *a: None)
    try:
        yield
    finally:
        registry._run_in_subprocess = saved
        lazy._load_modelinfo_from_cache, lazy._save_modelinfo_to_cache = cache


class _StandIn(type):
    """The type of an absent module's classes: any class attribute asked for (an enum member such as
    compressed_tensors' ``QuantizationStrategy.BLOCK``, read at a model module's import) is another stand-in class."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _StandIn(name, (), {"__init__": lambda self, *a, **k: None})
        setattr(cls, name, value)
        return value


class _Absent(types.ModuleType):
    """An absent module: any name it is asked for is an empty class (importable, callable, subclassable)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _StandIn(name, (), {"__init__": lambda self, *a, **k: None})
        setattr(self, name, value)
        return value


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``STUBBED`` packages (and their submodules) that nothing else on ``sys.path`` provides."""

    def __init__(self):
        self.stubbed: set[str] = set()

    def find_spec(self, fullname, path, target=None):
        root = fullname.split(".")[0]
        if root not in STUBBED or (root not in self.stubbed and importlib.machinery.PathFinder.find_spec(root)):
            return None
        self.stubbed.add(root)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _Absent(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass
