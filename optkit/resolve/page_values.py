"""What one tutorial page's command says, as page rules read it: where a value is written (``PageSource``), the
knobs a command sets (``command_values``), and the settings of its tuned command a plan carries below its recipes
(``command_settings``; ``optkit.resolve.settings.carry_page_settings`` applies them). The data
is the committed tutorial extraction (``optkit.versions.tutorial_data``); ``optkit.resolve.page_rules`` chooses the
page, row and command."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from optkit.resolve.page_commands import command_weights
from optkit.value import valueclass

PAGE_DIR = "models/"
"""Where model pages sit in the data (paths relative to docs/source/tutorials/)."""


OPTIONS = {"--max-num-seqs": "max_num_seqs", "--max-num-batched-tokens": "max_num_batched_tokens",
            "--max-model-len": "max_model_len", "--tensor-parallel-size": "tensor_parallel_size",
            "--data-parallel-size": "data_parallel_size", "--enable-expert-parallel": "expert_parallel",
            "--speculative-config.method": "speculative_method",
            "--speculative-config.num_speculative_tokens": "num_speculative_tokens",
            "--async-scheduling": "async_scheduling", "--no-async-scheduling": "async_scheduling",
            "--enable-prefix-caching": "prefix_caching", "--no-enable-prefix-caching": "prefix_caching",
            "--compilation-config.cudagraph_capture_sizes": "cudagraph_capture_sizes",
            "--gpu-memory-utilization": "gpu_memory_utilization",
            "--additional-config.enable_flashcomm1": "sequence_parallel"}
"""A command's options (as the data flattens them) → the knob they set."""


@valueclass(frozen=True)
class PageSource:
    """Where a value is written: a release's tutorial page and line."""

    release: str
    page: str  # 'models/Qwen3.5-397B-A17B.md'
    line: int

    def text(self) -> str:
        return f"{self.page.removeprefix(PAGE_DIR)}:{self.line} (vllm-ascend {self.release})"


@valueclass(frozen=True)
class PageValue:
    """One knob as the page states it: the value optkit reads, the words the page writes, and where."""

    knob: str  # 'max_num_seqs', 'sequence_parallel', …
    value: Any  # int, bool or str; None when the page's words give no single value ('Tune by concurrency')
    written: str
    source: PageSource


@valueclass(frozen=True)
class PageSetting:
    """One setting of the page's tuned command that the plan carries: an env var, an ``--additional-config`` key
    or a serve flag, as the page writes it."""

    key: str  # 'env:HCCL_BUFFSIZE', 'additional_config:enable_mlapo', 'serve:--max-model-len'
    value: Any
    source: PageSource


def command_layout(command: Mapping) -> tuple[int, int, int]:
    """(TP, DP, nodes) a command runs (launch_online_dp.py's --tp-size / --dp-size too)."""
    options = command.get("options", {})
    wrapper = command.get("launcher_options", {})
    tp = leading_int(str((options.get("--tensor-parallel-size") or wrapper.get("--tp-size") or {}).get("value", "1")))
    dp = leading_int(str((options.get("--data-parallel-size") or wrapper.get("--dp-size") or {}).get("value", "1")))
    return tp or 1, dp or 1, command.get("nodes") or 1


def command_values(command: Mapping, release: str, page: str) -> dict[str, PageValue]:
    values: dict[str, PageValue] = {}
    options = command.get("options", {})
    for option in sorted(options):
        knob = OPTIONS.get(option)
        if knob is None:
            continue
        entry = options[option]
        value = option_value(option, entry.get("value"))
        written = option if entry.get("value") in (True, None, "") else f"{option} {entry.get('value')}"
        values[knob] = PageValue(knob, value, written,
                                 PageSource(release, page, entry.get("line", command["line"])))
    flashcomm = command.get("env", {}).get("VLLM_ASCEND_ENABLE_FLASHCOMM1")
    if flashcomm is not None and "sequence_parallel" not in values:
        values["sequence_parallel"] = PageValue("sequence_parallel", str(flashcomm.get("value")) == "1",
                                                f"VLLM_ASCEND_ENABLE_FLASHCOMM1={flashcomm.get('value')}",
                                                PageSource(release, page, flashcomm.get("line", command["line"])))
    return values


CARRIED_FLAGS = ("--max-model-len", "--max-num-batched-tokens", "--max-num-seqs", "--gpu-memory-utilization",
                 "--block-size", "--hf-overrides", "--kv-cache-dtype", "--mamba-ssm-cache-dtype",
                 "--attention-config.indexer_kv_dtype", "--disable-hybrid-kv-cache-manager", "--mamba-cache-mode",
                 "--long-prefill-token-threshold", "--skip-mm-profiling", "--engram-config", "--enable-ep-weight-filter")
"""Serve flags of the page's tuned command the plan carries as the page writes them: context length and its rope
scaling, the scheduler's step and slots (where no recipe sizes them: ``sched-capacity-for-load`` does under the
throughput goal; slots fewer than the request's concurrency are not carried), memory share, block size, cache
dtypes, the hybrid KV cache manager as the command sets it (DeepSeek-V4's PD roles keep it on with their hybrid
connector, ``--no-disable-hybrid-kv-cache-manager``), the Mamba cache mode (Kimi-K3's ``align``), the long-prefill
threshold of the scheduler (MiniMax-M3's 4096), the multimodal memory profile skipped at start-up (Kimi-K3,
GLM5.3-Flash), DeepSeek-V4.1's engram offload (``--engram-config``) and the expert-parallel weight filter that loads
only a rank's own experts (Hy3-preview.md's "recommended", ``--enable-ep-weight-filter``, vLLM 0.23.0
arg_utils.py:1067); the layout flags are the request's; the
rest describe the deployment or the client: ports, parsers, model paths, the modalities served)."""


_DEPLOYMENT_ENV = re.compile(r"IFNAME|(^|_)IP($|_)|ADDRESS|HOST|PORT|NIC|VISIBLE_DEVICES|^MODEL_|MODELSCOPE|_RANK|"
                             r"^LD_LIBRARY_PATH$|^PATH$|^PYTHONPATH$|^VLLM_USE_V1$|^LD_PRELOAD$")
"""Env vars that name this host's devices, network, paths or ports (MODEL_PATH, not VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS):
a deployment detail, never carried."""


_PLACEHOLDER = re.compile(r"\$|<[^<>]*>|\bx{2,}\b|\.xx\.", re.I)


def command_settings(command: Mapping, release: str, page: str, checkpoints: Iterable[Mapping] = ()) -> tuple:
    """The settings of the page's tuned command a plan carries below its recipes (``optkit.resolve.settings``): its
    env (deployment details and placeholders left out), its ``--additional-config`` keys, ``CARRIED_FLAGS`` and, for
    a PD role's command, its connector's ``--kv-transfer-config`` keys (kind ``pd:``, ``_pd_key``);
    and, not carried (kind ``layout:``, what the command runs rather than a setting to copy), its expert
    parallelism (``EP_SETTING``), the weights it serves (``WEIGHTS_SETTING``, read with the page's weights table
    ``checkpoints``), its speculative tokens (``SPEC_K_SETTING``) and its decode and prefill context parallel sizes
    (``DCP_SETTING``, ``PCP_SETTING``)."""
    found: list[PageSetting] = []
    for name, entry in sorted(command.get("env", {}).items()):
        value = str(entry.get("value", ""))
        if name in _ENV_KNOBS or _DEPLOYMENT_ENV.search(name) or _PLACEHOLDER.search(value) or not value:
            continue
        found.append(PageSetting(f"env:{name}", value, PageSource(release, page, entry.get("line", command["line"]))))
    for option, entry in sorted(command.get("options", {}).items()):
        value = entry.get("value")
        if isinstance(value, str) and _PLACEHOLDER.search(value):
            continue
        if option.startswith("--additional-config.") and option.removeprefix("--additional-config.") not in _CONFIG_KNOBS:
            key = f"additional_config:{option.removeprefix('--additional-config.')}"
        elif option.startswith("--speculative-config.") and option.split(".", 1)[1] in CARRIED_SPECULATIVE:
            key = f"speculative_config:{option.split('.', 1)[1]}"
        elif option in ("--compilation-config.cudagraph_mode", "--compilation-config.cudagraph_capture_sizes"):
            key = f"compilation_config:{option.split('.', 1)[1]}"
        elif option in CARRIED_FLAGS:
            key = f"serve:{option}"
        elif (pd_key := _pd_key(option)) is not None:
            key, value = f"pd:{pd_key}", _registered_name(command) if pd_key == "kv_connector" else value
        else:
            continue
        found.append(PageSetting(key, plain(value), PageSource(release, page, entry.get("line", command["line"]))))
    ep = command.get("options", {}).get("--enable-expert-parallel")  # the layout's expert parallelism, as written
    found.append(PageSetting(EP_SETTING, option_value("--enable-expert-parallel", ep["value"]) if ep else False,
                             PageSource(release, page, ep["line"] if ep else command["line"])))
    weights, _ = command_weights(command, checkpoints)
    found.append(PageSetting(WEIGHTS_SETTING, weights, PageSource(release, page, command["line"])))
    method = command.get("options", {}).get("--speculative-config.method")
    if method is not None and isinstance(method.get("value"), str):
        said = method["value"].lower()
        found.append(PageSetting(SPEC_METHOD_SETTING, "mtp" if "mtp" in said else said,
                                 PageSource(release, page, method.get("line", command["line"]))))
    k = command.get("options", {}).get("--speculative-config.num_speculative_tokens")
    if k is not None and isinstance(option_value("", k.get("value")), int):
        found.append(PageSetting(SPEC_K_SETTING, option_value("", k["value"]),
                                 PageSource(release, page, k.get("line", command["line"]))))
    dcp = command.get("options", {}).get("--decode-context-parallel-size")
    found.append(PageSetting(DCP_SETTING, leading_int(str(dcp["value"])) or 1 if dcp else 1,
                             PageSource(release, page, dcp["line"] if dcp else command["line"])))
    for flag, key in (("--prefill-context-parallel-size", PCP_SETTING), ("--pipeline-parallel-size", PP_SETTING)):
        size = command.get("options", {}).get(flag)
        if size is not None and (leading_int(str(size["value"])) or 1) > 1:
            found.append(PageSetting(key, leading_int(str(size["value"])), PageSource(release, page, size["line"])))
    return tuple(found)


def _registered_name(command: Mapping) -> str:
    """The command's KV connector as its release's registry names it (``optkit.versions.pd.BY_MODULE``: a class the
    command names with its module path)."""
    from optkit.versions.pd import BY_MODULE

    options = command["options"]
    name = options["--kv-transfer-config.kv_connector"]["value"]
    module = options.get("--kv-transfer-config.kv_connector_module_path", {}).get("value")
    return BY_MODULE.get((name, module), name) if module else name


def _pd_key(option: str) -> str | None:
    """The ``--kv-transfer-config`` key a PD role's command carries (``optkit.versions.pd.PAGE_CONNECTOR_KEYS`` and
    its connector's own ``kv_connector_extra_config`` keys: not the roles' shapes, which the plan's layout gives, nor
    keys no release reads), or None."""
    from optkit.versions.pd import INERT_EXTRA_KEYS, PAGE_CONNECTOR_KEYS

    key = option.removeprefix("--kv-transfer-config.")
    if key == option:
        return None
    if key in PAGE_CONNECTOR_KEYS:
        return key
    extra = key.removeprefix("kv_connector_extra_config.")
    if extra != key and "." not in extra and extra not in ("prefill", "decode", "connectors", *INERT_EXTRA_KEYS):
        return key
    return None


EP_SETTING = "layout:--enable-expert-parallel"
"""Whether the command runs expert parallelism (its flag, or its absence: off): not carried as a setting, read as
the fact ``page.expert_parallel`` (a request without ``--ep``/``--no-ep`` follows it)."""


WEIGHTS_SETTING = "layout:weights"
"""The weight format the command serves (``optkit.resolve.page_commands.command_weights``): not carried; the fit
takes the command as evidence only for a plan of the same weights (``optkit.resolve.fit``)."""


SPEC_METHOD_SETTING = "layout:speculative_method"
"""The speculative method the command drafts with, as a request names it (``deepseek_mtp`` → mtp): not carried (the
request's method is the plan's); of a layout's commands, ``PageAdvice.for_layout`` takes the one of the request's
method first (DeepSeek-V4-Pro.md's "A3 series with DSpark" beside its MTP command of the same layout)."""


SPEC_K_SETTING = "layout:num_speculative_tokens"
"""The tokens the command drafts per step, where it says: not carried (the request's k is the plan's); a PD
prefiller's own command gives its role's (``optkit.bundle.pd.RoleLaunch``)."""


DCP_SETTING = "layout:--decode-context-parallel-size"
"""The command's decode context parallel size (1 without the flag): not carried (the request's ``--dcp`` sets it);
the fit takes the command as evidence only for a plan that splits the KV cache the same way."""
PCP_SETTING = "layout:--prefill-context-parallel-size"
"""The command's prefill context parallel size, where it sets one above 1: not carried (the request's ``--pcp``
sets it); the fit takes the command as evidence only for a plan of the same PCP."""
PP_SETTING = "layout:--pipeline-parallel-size"
"""The command's pipeline-parallel size, where it sets one above 1: not carried (the request's ``--pp`` sets it);
a command of another PP runs another number of ranks, so it is not the plan's layout."""


CARRIED_SPECULATIVE = ("enforce_eager", "disable_padded_drafter_batch", "kv_cache_dtype")
"""``--speculative-config`` keys beside the method and k (which the request sets) that the page's command carries:
they apply where the plan speculates at all (``optkit.resolve.settings.carry_page_settings``). ``kv_cache_dtype``
is the drafter's own KV cache dtype (vLLM 0.30.0 config/speculative.py:416-418; unset, the drafter inherits the
target's --kv-cache-dtype): MiniMax-M3.md's 950DT commands keep the eagle3 drafter's in bf16 beside an fp8 target
cache (0.30.0rc2 :261, :790)."""


_ENV_KNOBS = ("VLLM_ASCEND_ENABLE_FLASHCOMM1",)
"""Env vars the page values read already (``sequence_parallel``): the plan sets them through its recipes."""


_CONFIG_KNOBS = ("enable_flashcomm1",)
"""``--additional-config`` keys the page values read already."""


def option_value(option: str, value: Any) -> Any:
    if option.startswith("--no-"):
        return False
    if option in ("--enable-expert-parallel", "--async-scheduling", "--enable-prefix-caching"):
        return str(value).lower() not in ("false", "0")  # a bare flag is True; the data reads `--no-X` as X False
    if isinstance(value, str) and re.fullmatch(r"\d+", value):
        return int(value)
    return value


def leading_int(text: str) -> int | None:
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else None


def plain(value: Any) -> Any:
    """The loader's pages (read-only mappings and tuples) as plain mappings and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
