"""Run a ``vllm serve`` argument list through the real vLLM parser, in its own process.

    python vllm_probe.py '{"argv": [...], "labels": [...], "vllm": "0.23.0"}'
    python vllm_probe.py '{"batch": [{"argv": ...}, ...]}'     (→ {"results": [...]})
    python vllm_probe.py -      (a session: one request a line on stdin, one answer a line on stdout)

prints one JSON object on stdout. optkit never imports vLLM itself (the import takes seconds and
pulls in torch); ``optkit.bundle.check`` runs ONE session per check (``optkit.bundle.probe.ProbeSession``):
it imports vLLM before it reads its first request, so the import overlaps optkit's own work, and
answers ``{"kind": "vllm", ...}`` requests here and ``{"kind": "ascend-config", "tree": ..., ...}``
ones with ``ascend_config_probe`` (the tree put on ``sys.path``), all with that one import. ``argv`` is what follows
``vllm serve``; ``labels`` names, per token, who put it there, so a rejected argument is blamed on
the recipe that added it. What is checked, in vLLM's own code:

1. the parser of ``vllm serve`` (``make_arg_parser``) accepts the argv, then
   ``validate_parsed_serve_args`` and ``AsyncEngineArgs.from_cli_args`` accept the result
   (``--compilation-config`` becomes a ``CompilationConfig`` there);
2. the ``--speculative-config`` keys are ``SpeculativeConfig`` fields and its method is one vLLM
   knows (the config itself needs the target model's config, so it cannot be built here);
3. the capture sizes survive ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`` (vLLM's
   own method), applied as ``VllmConfig._set_cudagraph_sizes`` and
   ``resolve_cudagraph_mode_and_sizes`` do: under a FULL decode mode with k speculative tokens,
   sizes are rounded up to multiples of 1 + k and those above the largest are dropped;
4. given ``model_config`` (a config.json, or null when there is none), the engine configuration vLLM
   builds from the arguments (``engine_probe.resolve``: ``create_engine_config`` on the CPU platform),
   and across a batch's nodes the DP handshake's headless rule (``engine_probe.handshake``).

Before parsing, the release's widenings of vLLM's validation (``widen``: what its platform patches add to a config
field's ``Literal``, ``optkit.versions.parser_patches``) are applied as the patch does, and the answer names them
(``widened``).

Result: ``{"status": "ok"|"failed"|"skipped", "vllm_version", "problems": [{"check", "message",
"blame": [label, ...]}], "capture_sizes": {"given", "effective"}, "engine": {"ran", "not_run", "parallel",
"stubbed"} or null, "widened": [...] (when any)}``.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import sys
import typing
from typing import Any

EXPECTED_VLLM = "0.23.0"


def main(argv: list[str]) -> int:
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # vLLM may log to stdout; only the results go there
    try:
        if argv[1:] == ["-"]:
            return session(sys.stdin, real_stdout)
        result = answer(json.loads(argv[1]) if len(argv) > 1 else json.load(sys.stdin))
    finally:
        sys.stdout = real_stdout
    print(json.dumps(result, sort_keys=True))
    return 0


def session(requests: typing.TextIO, out: typing.TextIO) -> int:
    """Import vLLM, then answer each request line with one line (a failed import: each vLLM answer
    says skipped, as ``probe`` does)."""
    with contextlib.suppress(Exception):
        _import_vllm()
    for line in requests:
        if line.strip():
            request = json.loads(line)
            result = _ascend_config(request) if request.pop("kind", "vllm") == "ascend-config" else answer(request)
            out.write(json.dumps(result, sort_keys=True, default=str) + "\n")
            out.flush()
    return 0


def answer(request: dict) -> dict:
    if "batch" in request:  # several argvs, one import
        results = [probe(item) for item in request["batch"]]
        groups: dict = {}  # the nodes of one DP group: a server's, or one PD instance's (its "group")
        for item, result in zip(request["batch"], results):
            items, found = groups.setdefault(item.get("group", ""), ([], []))
            items.append(item)
            found.append(result)
        for items, found in groups.values():
            _engine_probe().handshake(items, found)
        return {"results": results}
    return probe(request)


def _engine_probe():
    if __package__:
        from . import engine_probe
    else:  # run by path: this directory is sys.path[0]
        import engine_probe
    return engine_probe


def _ascend_config(request: dict) -> dict:
    """``ascend_config_probe.validate`` with the tree ``request["tree"]`` first on ``sys.path``."""
    if __package__:
        from . import ascend_config_probe
    else:  # run by path: this directory is sys.path[0]
        import ascend_config_probe
    sys.path.insert(0, request["tree"])
    try:
        return ascend_config_probe.validate(request)
    finally:
        sys.path.remove(request["tree"])


def probe(request: dict) -> dict:
    wanted = request.get("vllm", EXPECTED_VLLM)
    try:
        vllm = _import_vllm()
    except Exception as exc:  # noqa: BLE001 - any import failure means "not usable here"
        return {"status": "skipped", "reason": f"vLLM {wanted} not installed ({type(exc).__name__}: {exc})"}
    if vllm.version != wanted:
        return {"status": "skipped", "reason": f"vLLM {vllm.version} is installed, the bundle is for {wanted}"}
    problems: list[dict] = []
    argv, labels = list(request["argv"]), list(request["labels"])
    widened = [_widen(w) for w in request.get("widen", ())]
    vllm.choices = list(request.get("widen", ()))  # for this request's parsers
    args = _parse(vllm, argv, labels, problems)
    sizes = engine = None
    if args is not None:
        _speculative_keys(vllm, args, labels, argv, problems)
        sizes = _capture_sizes(vllm, args, problems, _owner(argv, labels, "--compilation-config"))
        if "model_config" in request:  # 4. the engine configuration (engine_probe)
            engine = _engine_probe().resolve(vllm, args, labels, argv, request["model_config"])
            problems += engine.pop("problems")
    return {"status": "failed" if problems else "ok", "vllm_version": vllm.version,
            "problems": problems, "capture_sizes": sizes, "engine": engine,
            **({"widened": widened} if widened else {})}


def _widen(widening: dict) -> str:
    """Apply one of the release's parser widenings (``optkit.versions.parser_patches``) as its platform patch does:
    the values added to the ``Literal`` of the class's field (its dataclass field type and annotation), pydantic's
    schema rebuilt; idempotent. Returns what was widened and where the release does it."""
    import importlib

    import pydantic.dataclasses

    cls = getattr(importlib.import_module(widening["module"]), widening["class"])
    field = cls.__dataclass_fields__[widening["field"]]
    present = typing.get_args(field.type)
    missing = [value for value in widening["added"] if value not in present]
    if missing:
        wider = typing.Literal[tuple([*present, *missing])]  # type: ignore[valid-type]
        field.type = cls.__annotations__[widening["field"]] = wider
        pydantic.dataclasses.rebuild_dataclass(cls, force=True, raise_errors=True)
    choices = widening.get("choices_source")
    also = f"; its {widening['option']} choices too, {choices}" if choices else ""
    return f"{widening['class']}.{widening['field']} + {', '.join(widening['added'])} ({widening['source']}{also})"


class _Vllm:
    """The few vLLM entry points the probe uses."""

    def __init__(self):
        import vllm
        import vllm.platforms
        from vllm.platforms.cpu import CpuPlatform

        # No accelerator here: pin the platform so nothing probes for CUDA/NPU.
        platform = CpuPlatform()
        vllm.platforms._current_platform = platform
        vllm.platforms.current_platform = platform
        from vllm.config import CompilationConfig, SpeculativeConfig
        from vllm.config.compilation import CUDAGraphMode
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        try:  # vLLM <= 0.2x
            from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
        except ModuleNotFoundError:  # vLLM 0.30 moved the serve parser
            from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args

        self.version = vllm.__version__
        self.choices: list[dict] = []  # the request's widenings: its parsers' choices follow them (_with_choices)
        self.make_parser = lambda: _with_choices(make_arg_parser(FlexibleArgumentParser(prog="vllm serve")),
                                                 self.choices)
        self.validate = validate_parsed_serve_args
        self.engine_args = AsyncEngineArgs
        self.CompilationConfig = CompilationConfig
        self.SpeculativeConfig = SpeculativeConfig
        self.CUDAGraphMode = CUDAGraphMode


def _with_choices(parser, widenings: list[dict]):
    """``parser`` with its options' choices as the release's server has them. vLLM builds the parser before the
    platform patches widen a field, so an option's choices are the upstream ``Literal``'s: a release that appends the
    widened values to them (``choices_source``: ``pre_register_and_update``) has them, one that does not has not
    (here the field is widened before the parser is built, so those values are taken out again)."""
    import importlib

    for widening in widenings:
        action = parser._option_string_actions.get(widening.get("option", ""))
        if action is None or not action.choices:
            continue
        if not widening.get("choices_source"):
            action.choices = [value for value in action.choices if value not in widening["added"]]
            continue
        cls = getattr(importlib.import_module(widening["module"]), widening["class"])
        for value in typing.get_args(cls.__dataclass_fields__[widening["field"]].type):
            if value not in action.choices:
                action.choices.append(value)
    return parser


def _import_vllm() -> _Vllm:
    return _Vllm()


# --------------------------------------------------------------------------- 1. parse


def _try_parse(vllm: _Vllm, argv: list[str]) -> tuple[Any, str | None]:
    """(namespace, None) if vLLM accepts ``argv``, else (None, vLLM's message)."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = vllm.make_parser().parse_args(argv)
        args.model = args.model_tag
        vllm.validate(args)
        vllm.engine_args.from_cli_args(args)
    except SystemExit:
        lines = [line for line in stderr.getvalue().splitlines() if "error:" in line]
        return None, (lines[-1].split("error:", 1)[1].strip() if lines else stderr.getvalue().strip())
    except Exception as exc:  # noqa: BLE001 - vLLM raises many types for bad values
        return None, f"{type(exc).__name__}: {exc}"
    return args, None


def _parse(vllm: _Vllm, argv: list[str], labels: list[str], problems: list[dict]):
    args, error = _try_parse(vllm, argv)
    if error is None:
        return args
    problems.append({"check": "vllm-parser", "message": error, "blame": _blame(vllm, argv, labels, error)})
    return None


def _blame(vllm: _Vllm, argv: list[str], labels: list[str], message: str = "") -> list[str]:
    """The labels whose tokens, left out, make vLLM accept the argv; if none, the owner of the option
    vLLM's message names (``argument --kv-transfer-config: …``); else all recipe labels."""
    candidates = [label for label in dict.fromkeys(labels) if label not in ("optkit", "request", "model")]
    culprits = []
    for label in candidates:
        kept = [token for token, owner in zip(argv, labels) if owner != label]
        if _try_parse(vllm, kept)[1] is None:
            culprits.append(label)
    named = re.match(r"argument (--[\w-]+)", message)
    if not culprits and named and named.group(1) in argv:
        return [labels[argv.index(named.group(1))]]
    return culprits or candidates or ["optkit"]


def _owner(argv: list[str], labels: list[str], flag: str) -> list[str]:
    if flag not in argv:
        return []
    return [label for label in labels[argv.index(flag)].split(",") if label]


# --------------------------------------------------------------------------- 2. speculative


def _speculative_keys(vllm: _Vllm, args, labels: list[str], argv: list[str], problems: list[dict]) -> None:
    config = args.speculative_config
    if not config:
        return
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(vllm.SpeculativeConfig)}
    blame = _owner(argv, labels, "--speculative-config")
    for key in sorted(set(config) - set(fields)):
        problems.append({"check": "speculative-config", "blame": blame,
                         "message": f"--speculative-config key {key!r} is not a SpeculativeConfig field"})
    methods = _literal_values(fields["method"].type)
    method = config.get("method")
    if method is not None and methods and method not in methods:
        problems.append({"check": "speculative-config", "blame": blame,
                         "message": f"--speculative-config method {method!r} is not one vLLM knows"})


def _literal_values(annotation) -> list:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [value for arg in typing.get_args(annotation) for value in _literal_values(arg)]


# --------------------------------------------------------------------------- 3. capture sizes


def effective_capture_sizes(vllm: _Vllm, compilation, k: int, tp: int, max_num_batched_tokens: int | None) -> list[int]:
    """The capture sizes vLLM ends up with (``VllmConfig._set_cudagraph_sizes`` for user-given
    sizes, then ``resolve_cudagraph_mode_and_sizes``'s spec-decode rounding, vLLM's own method)."""
    config = copy.deepcopy(compilation)
    sizes = sorted(set(config.cudagraph_capture_sizes))
    if max_num_batched_tokens is not None:
        sizes = [size for size in sizes if size <= max_num_batched_tokens]
    if config.max_cudagraph_capture_size is not None and sizes and config.max_cudagraph_capture_size != sizes[-1]:
        raise ValueError(f"customized max_cudagraph_capture_size(={config.max_cudagraph_capture_size}) should be "
                         f"consistent with the max value of cudagraph_capture_sizes(={sizes[-1]})")
    config.cudagraph_capture_sizes = sizes
    config.max_cudagraph_capture_size = sizes[-1] if sizes else 0
    # No mode given: vLLM's default (FULL_AND_PIECEWISE) also has a FULL decode mode.
    mode = config.cudagraph_mode if config.cudagraph_mode is not None else vllm.CUDAGraphMode.FULL_AND_PIECEWISE
    if mode.decode_mode() == vllm.CUDAGraphMode.FULL and k > 0:
        config.adjust_cudagraph_sizes_for_spec_decode(1 + k, tp)
    return list(config.cudagraph_capture_sizes)


def _capture_sizes(vllm: _Vllm, args, problems: list[dict], blame: list[str]) -> dict | None:
    compilation = args.compilation_config
    if args.enforce_eager or not compilation.cudagraph_capture_sizes:
        return None
    k = int((args.speculative_config or {}).get("num_speculative_tokens") or 0)
    given = list(compilation.cudagraph_capture_sizes)
    try:
        effective = effective_capture_sizes(vllm, compilation, k, args.tensor_parallel_size, args.max_num_batched_tokens)
    except ValueError as exc:
        problems.append({"check": "capture-sizes", "blame": blame, "message": str(exc)})
        return {"given": given, "effective": None}
    if effective != sorted(set(given)):
        lost = sorted(set(given) - set(effective))
        problems.append({"check": "capture-sizes", "blame": blame, "message": (
            f"vLLM {vllm.version} turns cudagraph_capture_sizes {given} into {effective} with {k} speculative "
            f"token(s) (rounded up to multiples of {1 + k}, sizes above the largest dropped): {lost} "
            "would not be captured as given, and decode steps of those token counts may run eager")})
    return {"given": given, "effective": effective}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
