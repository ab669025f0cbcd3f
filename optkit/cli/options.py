"""The request options shared by ``plan``, ``explain`` and ``facts``."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.errors import RequestError


def _concurrency(ctx, param, value):
    """``1,4,8``: the request file's grammar (``optkit.resolve.request.parse_levels``); ranges are the Request's."""
    if value is None:
        return None
    from optkit.resolve.request_record import parse_levels

    try:
        return parse_levels(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _dp(ctx, param, value):
    """``--dp N`` or ``--dp auto`` (the Request checks the range)."""
    if value is None or value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give an integer, or 'auto' (sized from the load under the "
                                 "throughput goal)") from None


def _ids(ctx, param, value):
    return [part.strip() for item in value for part in item.split(",") if part.strip()]


PROFILE_AT = 1
"""The concurrency a profile capture is taken at unless told (the article profiled c1 decode)."""
PROFILE_AT_HELP = ("the concurrency the capture was taken at: its savings count there, and are extrapolated "
                   "above it where the article has no number of its own.")

# (option declarations, Request field, click kwargs); values are checked by the Request model, ranges included,
# so a flag and the same key in a request file accept the same values
_OPTIONS = [
    (("--target",), "target", dict(help="Target id or alias (910c, 910b).")),
    (("--variant",), "variant", dict(help="Target hardware variant (910c: 752t, 560t; 910b: 32g; 950: 950pr).")),
    (("--tp",), "tp", dict(type=int, help="Tensor-parallel size (default 2: one 910C card).")),
    (("--dp",), "dp", dict(callback=_dp, metavar="N|auto", help="Data-parallel size (default 1); auto: sized "
                                                               "from the load under the throughput goal.")),
    (("--nodes",), "nodes", dict(type=int, help="Nodes the TP x DP ranks run on (default: the fewest "
                                                "that hold them; more spreads the DP ranks).")),
    (("--pd",), "pd", dict(metavar="P:D", help="Prefill/decode disaggregation: P prefill and D decode instances "
                                                "of TP x DP each (the prefill ones --prefill-tp x --prefill-dp where "
                                                "given), e.g. 1:1 (one bundle, a role per instance).")),
    (("--prefill-tp",), "prefill_tp", dict(type=int, help="With --pd: the prefill instances' TP when it differs "
                                                         "from the decode instances' --tp.")),
    (("--prefill-dp",), "prefill_dp", dict(type=int, help="With --pd: the prefill instances' DP when it differs "
                                                         "from the decode instances' --dp.")),
    (("--prefill-dcp",), "prefill_dcp", dict(type=int, help="With --pd: the prefill instances' decode context "
                                                           "parallel size when it differs from --dcp.")),
    (("--prefill-pp",), "prefill_pp", dict(type=int, help="With --pd: the prefill instances' pipeline-parallel size "
                                                         "(the decode instances run PP 1; default 1).")),
    (("--ep/--no-ep",), "ep", dict(default=None, help="Expert parallelism (default: on for MoE models).")),
    (("--context-parallel/--no-context-parallel",), "context_parallel", dict(default=None, help="Context parallelism in use.")),
    (("--dcp",), "dcp", dict(type=int, help="Decode context parallel size: the KV cache of a sequence split over this "
                                           "many TP ranks (default 1, off).")),
    (("--pcp",), "pcp", dict(type=int, help="Prefill context parallel size: TP × PCP devices per DP rank, a long "
                                           "prompt split over the PCP ranks (default 1, off).")),
    (("--pp",), "pp", dict(type=int, help="Pipeline-parallel size: TP × PP devices per DP rank, the layers split "
                                         "into PP stages, across nodes where they do not fit one (default 1, off).")),
    (("--flashcomm1/--no-flashcomm1",), "flashcomm1", dict(default=None, help="FlashComm1 (sequence parallelism), set by the bundle "
                                                                                 "(default: on under the throughput goal where it applies).")),
    (("--concurrency",), "concurrency", dict(callback=_concurrency, help="Concurrency levels, e.g. 1,4,8 (default).")),
    (("--slo",), "slo", dict(help="Service-level objective, e.g. 'tpot_p99<=20ms,ttft_p99<=1s'.")),
    (("--goal",), "goal", dict(type=click.Choice(["latency", "throughput"]),
                               help="Optimize for latency or throughput under the SLO (default: latency up to c8).")),
    (("--max-model-len",), "max_model_len", dict(type=int, help="The longest sequence the server takes (default: the "
                                                               "model page's tuned value, else the model's context).")),
    (("--input-len",), "input_len", dict(type=int, help="Input tokens per request (default 1024).")),
    (("--output-len",), "output_len", dict(type=int, help="Output tokens per request (default 512).")),
    (("--length-mix",), "length_mix", dict(metavar="IN:OUT[:W],...", help="Several input/output lengths with "
                                            "relative shares, e.g. '1024:256:0.7,8192:512:0.3' (instead of "
                                            "--input-len/--output-len).")),
    (("--sampling",), "sampling", dict(type=click.Choice(["greedy", "sampled"]), help="greedy (default) or sampled (temperature > 0).")),
    (("--logprobs/--no-logprobs",), "logprobs", dict(default=None, help="Requests ask for logprobs.")),
    (("--penalties/--no-penalties",), "penalties", dict(default=None, help="Requests use sampling penalties.")),
    (("--min-tokens/--no-min-tokens",), "min_tokens", dict(default=None, help="Clients set min_tokens (default: yes, as in the article).")),
    (("--structured-output/--no-structured-output",), "structured_output", dict(default=None, help="Requests use structured output.")),
    (("--prefix-caching/--no-prefix-caching",), "prefix_caching", dict(default=None, help="Prefix caching (default: on "
                                                                                            "when prompts share a prefix).")),
    (("--shared-prefix-len",), "shared_prefix_len", dict(type=int, help="Tokens every prompt shares at its start (a "
                                                                        "system prompt; part of --input-len; default 0).")),
    (("--async-scheduling/--no-async-scheduling",), "async_scheduling", dict(default=None, help="Async scheduling (default on, as in vLLM 0.23.0).")),
    (("--mtp/--no-mtp",), "mtp", dict(default=None, help="MTP speculative decoding (the same as --spec-method mtp).")),
    (("--spec-method",), "spec_method", dict(type=click.Choice(["mtp", "eagle3", "suffix", "dspark", "dflash"]), help=(
        "Speculative decoding method: mtp (the checkpoint's MTP head), eagle3 (needs --draft-model), suffix "
        "(needs the arctic-inference package and --no-async-scheduling), dspark (DeepSeek-V4's DSpark draft "
        "weights inside the checkpoint; vllm-ascend 0.24.0rc1 and later) or dflash (needs --draft-model; "
        "vllm-ascend 0.19.1rc1 and later)."))),
    (("--draft-model",), "draft_model", dict(metavar="HF_ID", help="With --spec-method eagle3 or dflash: the "
                                                                   "EAGLE-3 or DFlash draft model (HF repo id or path).")),
    (("--num-speculative-tokens", "-k"), "num_speculative_tokens", dict(type=int, help=(
        "k with speculative decoding (default 4 with MTP, 3 with eagle3 and suffix, 5 with dspark, 15 with "
        "dflash)."))),
    (("--vllm-ascend-version",), "vllm_ascend_version", dict(help="vllm-ascend release (default 0.23.0; see `optkit versions list`).")),
    (("--vllm-version",), "vllm_version", dict(help="vLLM version (default: the one the vllm-ascend release pairs with).")),
    (("--tree",), "tree", dict(type=click.Path(exists=True, file_okay=False, path_type=Path),
                               help="Plan for this vllm-ascend tree: its version, knobs and upstream probes (probes beat the version).")),
    (("--dtype",), "dtype", dict(type=click.Choice(["bfloat16", "float16", "float32"]), help="Serving dtype (default: the target's, bfloat16; float16 on Atlas 300I DUO).")),
    (("--quantization",), "quantization", dict(metavar="FORMAT", help=(
        "Weight format: bf16, w8a8, w8a8c8, w8a8-mxfp8, w4a8, w4a8c8, w4a4, w4a4-mxfp4, w8a8sc (default: the "
        "checkpoint MODEL names, else bf16); every format but bf16 is served with --quantization ascend."))),
    (("--enforce-eager/--no-enforce-eager",), "enforce_eager", dict(default=None, help="No graphs.")),
    (("--lora/--no-lora",), "lora", dict(default=None, help="LoRA adapters enabled.")),
    (("--model-config",), "model_config", dict(type=click.Path(dir_okay=True, path_type=Path), help="HF config.json of your own checkpoint (instead of MODEL).")),
    (("--model-id",), "model_id", dict(help="With --model-config: the model's HF repo id or path (when config.json has no _name_or_path).")),
    (("--with", "with_"), "with", dict(multiple=True, callback=_ids, help="Force a recipe in (repeatable, or comma-separated).")),
    (("--without",), "without", dict(multiple=True, callback=_ids, help="Leave a recipe out (repeatable, or comma-separated).")),
    (("--set", "set_"), "set", dict(multiple=True, metavar="NAME=VALUE", callback=_ids, help=(
        "A launch value over its rule: max-num-seqs (per DP group), max-num-batched-tokens, capture-up-to "
        "(the capture ladder's top, requests per DP group); repeatable, or comma-separated."))),
]
_UNDERSCORED = ("with", "set")
"""Request fields whose click parameter carries a trailing underscore (Python keywords or builtins)."""


def catalog_option(func):
    """``--catalog DIR`` (repeatable): recipe folders layered over the shipped catalog, after the
    ones in ``$OPTKIT_CATALOG_PATH``."""
    return click.option("--catalog", "catalogs", multiple=True, type=click.Path(file_okay=False, path_type=Path),
                        help="A folder of your own recipe folders, layered over the shipped catalog (repeatable; "
                             "also OPTKIT_CATALOG_PATH, separated like PATH).")(func)


def catalog_dirs(catalogs) -> list[Path]:
    """``$OPTKIT_CATALOG_PATH`` then the ``--catalog`` folders."""
    from optkit.catalog.paths import catalog_path

    return catalog_path(catalogs)


def _deprecated_quantized(ctx, param, value):
    """``--quantized``: what it meant before ``--quantization`` (w8a8), said once on stderr."""
    if value:
        click.echo("optkit: --quantized is deprecated: it means --quantization w8a8; give the checkpoint's format "
                   "with --quantization (or name the checkpoint as MODEL)", err=True)
    return value or None


def request_options(func=None, *, model_argument: bool = True):
    """Decorate a command with MODEL (unless ``model_argument`` is false), --request FILE and every
    request flag."""
    if func is None:
        return lambda f: request_options(f, model_argument=model_argument)
    func = click.option("--quantized", "quantized", is_flag=True, default=None, callback=_deprecated_quantized,
                        help="Deprecated: the same as --quantization w8a8.")(func)
    for decls, _, kwargs in reversed(_OPTIONS):
        func = click.option(*decls, **kwargs)(func)
    func = click.option("--request", "request_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        help="YAML request file; flags given on the command line override it.")(func)
    return click.argument("model", required=False)(func) if model_argument else func


def build_request(model: str | None, request_file: Path | None, params: dict):
    """A Request from the file (if any) with the command-line values on top."""
    from optkit.resolve.request_record import load_request, parse_request

    base = load_request(request_file).dump(by_alias=True) if request_file else {}
    _lengths_from_the_command_line(base, params)
    _quantized_as_quantization(params)
    for _, field, _ in _OPTIONS:
        key = field + "_" if field in _UNDERSCORED else field
        value = params.get(key)
        if value is None or (isinstance(value, list) and not value and field in ("with", "without", "set")):
            continue
        base[field] = str(value) if isinstance(value, Path) else value
    if model:
        base["model"] = model
    if base.get("model") and base.get("model_config"):
        raise RequestError("give either MODEL or --model-config, not both")
    from optkit.resolve.request_record import core

    try:
        return parse_request(base)
    except core().ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        flag = _FLAGS.get(first["loc"][0]) if first["loc"] else None
        given = params.get(first["loc"][0] + "_" if first["loc"][0] in _UNDERSCORED else first["loc"][0])
        if flag and given not in (None, [], ()):
            raise click.BadParameter(message, param_hint=f"'{flag}'") from None
        where = ".".join(str(p) for p in first["loc"])
        raise RequestError(f"{where}: {message}") from None


def _quantized_as_quantization(params: dict) -> None:
    """The deprecated ``--quantized`` as ``--quantization w8a8``; with another ``--quantization`` it is refused."""
    if not params.pop("quantized", None):
        return
    if params.get("quantization") not in (None, "w8a8"):
        raise click.BadParameter(f"--quantized means --quantization w8a8, but --quantization "
                                 f"{params['quantization']} is given too; drop --quantized", param_hint="'--quantized'")
    params["quantization"] = "w8a8"


def _lengths_from_the_command_line(base: dict, params: dict) -> None:
    """Flags override the file's lengths as a whole: --input-len/--output-len its length mix, --length-mix its
    input and output lengths (given together on the command line, the request refuses them)."""
    single = params.get("input_len") is not None or params.get("output_len") is not None
    if params.get("length_mix") is not None or (single and base.get("length_mix")):  # a mix's lengths are its own
        base.pop("input_len", None)
        base.pop("output_len", None)
    if single:
        base.pop("length_mix", None)


_FLAGS = {field: decls[0].split("/")[0] for decls, field, _ in _OPTIONS}
