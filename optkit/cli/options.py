"""The request options shared by ``plan``, ``explain`` and ``facts``."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.errors import RequestError


def _concurrency(ctx, param, value):
    if value is None:
        return None
    try:
        levels = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: give comma-separated integers, e.g. 1,4,8") from None
    if not levels or any(c < 1 for c in levels):
        raise click.BadParameter(f"{value!r}: concurrency levels must be integers ≥ 1")
    return levels


def _ids(ctx, param, value):
    return [part.strip() for item in value for part in item.split(",") if part.strip()]


# (option declarations, Request field, click kwargs)
_OPTIONS = [
    (("--target",), "target", dict(help="Target id or alias (910c, 910b).")),
    (("--variant",), "variant", dict(help="Target hardware variant (910c: 752t, 560t).")),
    (("--tp",), "tp", dict(type=click.IntRange(1), help="Tensor-parallel size (default 2: one 910C card).")),
    (("--dp",), "dp", dict(type=click.IntRange(1), help="Data-parallel size (default 1).")),
    (("--ep/--no-ep",), "ep", dict(default=None, help="Expert parallelism (default: on for MoE models).")),
    (("--context-parallel/--no-context-parallel",), "context_parallel", dict(default=None, help="Context parallelism in use.")),
    (("--concurrency",), "concurrency", dict(callback=_concurrency, help="Concurrency levels, e.g. 1,4,8 (default).")),
    (("--input-len",), "input_len", dict(type=click.IntRange(1), help="Input tokens per request (default 1024).")),
    (("--output-len",), "output_len", dict(type=click.IntRange(1), help="Output tokens per request (default 512).")),
    (("--sampling",), "sampling", dict(type=click.Choice(["greedy", "sampled"]), help="greedy (default) or sampled (temperature > 0).")),
    (("--logprobs/--no-logprobs",), "logprobs", dict(default=None, help="Requests ask for logprobs.")),
    (("--penalties/--no-penalties",), "penalties", dict(default=None, help="Requests use sampling penalties.")),
    (("--min-tokens/--no-min-tokens",), "min_tokens", dict(default=None, help="Clients set min_tokens (default: yes, as in the article).")),
    (("--structured-output/--no-structured-output",), "structured_output", dict(default=None, help="Requests use structured output.")),
    (("--prefix-caching/--no-prefix-caching",), "prefix_caching", dict(default=None, help="Prefix caching on (default off).")),
    (("--async-scheduling/--no-async-scheduling",), "async_scheduling", dict(default=None, help="Async scheduling (default on, as in vLLM 0.23.0).")),
    (("--mtp/--no-mtp",), "mtp", dict(default=None, help="MTP speculative decoding.")),
    (("--num-speculative-tokens", "-k"), "num_speculative_tokens", dict(type=click.IntRange(1, 16), help="k with --mtp (default 4).")),
    (("--vllm-ascend-version",), "vllm_ascend_version", dict(help="vllm-ascend version (default 0.23.0).")),
    (("--vllm-version",), "vllm_version", dict(help="vLLM version (default: the one vllm-ascend pins).")),
    (("--dtype",), "dtype", dict(type=click.Choice(["bfloat16", "float16", "float32"]), help="Serving dtype (default bfloat16).")),
    (("--quantized/--no-quantized",), "quantized", dict(default=None, help="Quantized weights.")),
    (("--enforce-eager/--no-enforce-eager",), "enforce_eager", dict(default=None, help="No graphs.")),
    (("--lora/--no-lora",), "lora", dict(default=None, help="LoRA adapters enabled.")),
    (("--model-config",), "model_config", dict(type=click.Path(dir_okay=True, path_type=Path), help="HF config.json of your own checkpoint (instead of MODEL).")),
    (("--with", "with_"), "with", dict(multiple=True, callback=_ids, help="Force a recipe in (repeatable, or comma-separated).")),
    (("--without",), "without", dict(multiple=True, callback=_ids, help="Leave a recipe out (repeatable, or comma-separated).")),
]


def request_options(func):
    """Decorate a command with MODEL, --request FILE and every request flag."""
    for decls, _, kwargs in reversed(_OPTIONS):
        func = click.option(*decls, **kwargs)(func)
    func = click.option("--request", "request_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        help="YAML request file; flags given on the command line override it.")(func)
    return click.argument("model", required=False)(func)


def build_request(model: str | None, request_file: Path | None, params: dict):
    """A Request from the file (if any) with the command-line values on top."""
    from optkit.resolve.request_record import load_request, parse_request

    base = load_request(request_file).dump(by_alias=True) if request_file else {}
    for _, field, _ in _OPTIONS:
        key = field if field != "with" else "with_"
        value = params.get(key)
        if value is None or (isinstance(value, list) and not value and field in ("with", "without")):
            continue
        base[field] = str(value) if isinstance(value, Path) else value
    if model:
        base["model"] = model
    if base.get("model") and base.get("model_config"):
        raise RequestError("give either MODEL or --model-config, not both")
    from pydantic_core import ValidationError

    try:
        return parse_request(base)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RequestError(f"{where}: {first['msg']}") from None
