"""Launch values a recipe computes from the request: a small typed expression over facts, never ``eval``.

A recipe's ``derived`` entry sets one launch value (a ``vllm serve`` flag or a config key) to the
value of an expression, e.g. the tutorials' rule ``--max-num-seqs × --data-parallel-size ≥ the
concurrency``::

    derived:
      - set: "serve:--max-num-seqs"
        value: {ceil_div: [workload.concurrency_max, parallel.dp]}
        why: "max-num-seqs × DP ≥ the concurrency, so no request waits for a slot"

An expression is one of

- an integer literal (a bool is none);
- the name of an ``int`` fact (``optkit.catalog.factspec``);
- a mapping with exactly one operator, its operands a list:
  ``add``, ``mul``, ``max``, ``min`` (two or more operands), ``ceil_div: [a, b]`` (⌈a / b⌉),
  ``round_up: [a, m]`` (a rounded up to a multiple of m), ``lcm: [a, b]``, ``if: [condition, a, b]`` (a when the
  condition, in the condition language of ``optkit.catalog.conditions``, holds; else b);
- ``ladder: {up_to: e, rows_per_request: e, multiple_of: e, max_sizes: n}``: the decode batch sizes
  a load of up to ``up_to`` requests runs (``decode_ladder``), a list of ints — only as the whole value.

Expressions are type-checked when the catalog loads (``check_expression``: operators, arity, fact
names and types, conditions) and evaluated on a request's facts by ``evaluate``, which also returns
the evaluation in words for ``optkit explain``. Values are ints from 1 to ``MAX_VALUE``; a result
outside that range is the request's problem (``DerivedValueError``), named with the recipe and key.
"""

from __future__ import annotations

from typing import Any, Mapping

from optkit.errors import ConditionError, RequestError

MAX_VALUE = 1 << 24
"""Largest value a derived launch value may take (vLLM's token and sequence limits are far below)."""
MAX_LADDER_SIZES = 256
"""Most capture sizes a ladder may ask for: a sanity bound on the expression, no upstream number (vLLM 0.23.0's
default list holds at most 51 sizes, 1, 2, 4, every 8 below 256 and every 16 up to 512)."""
_VARIADIC = {"add": sum, "max": max, "min": min}
_BINARY = ("ceil_div", "round_up", "lcm")
_LADDER_KEYS = ("up_to", "rows_per_request", "multiple_of", "max_sizes")
TARGETS = ("serve", "compilation_config", "additional_config")
"""What a ``derived.set`` may name: ``serve:--flag``, or ``compilation_config:a.b`` / ``additional_config:a.b``."""


OPTKIT_FLAGS = frozenset({
    "--served-model-name", "--port", "--tensor-parallel-size", "--data-parallel-size",
    "--prefill-context-parallel-size", "--dtype",
    "--enable-expert-parallel", "--no-async-scheduling", "--enable-prefix-caching", "--no-enable-prefix-caching",
    "--enforce-eager", "--compilation-config", "--speculative-config", "--additional-config",
    "--data-parallel-size-local", "--data-parallel-start-rank", "--data-parallel-address", "--data-parallel-rpc-port",
    "--distributed-executor-backend", "--nnodes", "--node-rank", "--master-addr", "--master-port"})
"""The ``vllm serve`` flags optkit's launch sets from the request itself (``optkit.bundle.launch``; a test
keeps the two in step): a derived value may not set one (the argv would carry it twice)."""


class DerivedValueError(RequestError):
    """A derived launch value out of range for this request (e.g. a division by a zero fact)."""


def check_target(text: str) -> str:
    """``serve:--flag`` or ``<config>:key.path``; raises ValueError with the fix."""
    kind, _, rest = text.partition(":")
    if kind not in TARGETS or not rest:
        raise ValueError(f"{text!r}: write serve:--flag, compilation_config:key or additional_config:key")
    if kind == "serve" and not (rest.startswith("--") and rest[2:].replace("-", "").isalnum()):
        raise ValueError(f"{text!r}: a serve target is one long flag, e.g. serve:--max-num-seqs")
    if kind == "serve" and rest in OPTKIT_FLAGS:
        raise ValueError(f"{text!r}: optkit sets {rest} from the request (its flag or the node layout); "
                         "a recipe cannot derive it")
    if kind != "serve" and not all(part.replace("_", "").isalnum() for part in rest.split(".")):
        raise ValueError(f"{text!r}: a config key is a dotted path of names, e.g. compilation_config:cudagraph_capture_sizes")
    return text


def check_expression(expr: Any, facts: Mapping[str, Any]) -> str:
    """The type of ``expr`` ('int' or 'list[int]'), given ``facts`` (name → FactSpec); ValueError if ill-typed."""
    if isinstance(expr, dict) and list(expr) == ["ladder"]:
        spec = expr["ladder"]
        if not isinstance(spec, dict) or sorted(spec) != sorted(_LADDER_KEYS):
            raise ValueError(f"ladder takes exactly {', '.join(_LADDER_KEYS)}")
        for key in _LADDER_KEYS[:3]:
            _scalar(spec[key], facts, f"ladder.{key}")
        limit = spec["max_sizes"]
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LADDER_SIZES:
            raise ValueError(f"ladder.max_sizes: an integer literal from 1 to {MAX_LADDER_SIZES}")
        return "list[int]"
    _scalar(expr, facts, "value")
    return "int"


def _scalar(expr: Any, facts: Mapping[str, Any], where: str) -> None:
    if isinstance(expr, bool):
        raise ValueError(f"{where}: {str(expr).lower()} is no integer")
    if isinstance(expr, int):
        if not 0 <= expr <= MAX_VALUE:
            raise ValueError(f"{where}: {expr} is out of range 0..{MAX_VALUE}")
        return
    if isinstance(expr, str):
        spec = facts.get(expr)
        if spec is None:
            from optkit.catalog.factspec import unknown_fact_hint

            near = unknown_fact_hint(expr, facts)
            raise ValueError(f"{where}: unknown fact {expr!r}" + (f"; {near}" if near else ""))
        if spec.type != "int":
            raise ValueError(f"{where}: fact {expr} is a {spec.type}, not an int")
        return
    if not isinstance(expr, dict) or len(expr) != 1:
        raise ValueError(f"{where}: expected an integer, an int fact's name or one operator "
                         f"({', '.join([*_VARIADIC, 'mul', *_BINARY, 'if'])}), got {expr!r}")
    (op, args), = expr.items()
    if op == "ladder":
        raise ValueError(f"{where}: a ladder is a list of sizes, only a whole value (not an operand) may be one")
    if not isinstance(args, list):
        raise ValueError(f"{where}.{op}: the operands are a list")
    if op in (*_VARIADIC, "mul"):
        if len(args) < 2:
            raise ValueError(f"{where}.{op}: takes two or more operands")
    elif op in _BINARY:
        if len(args) != 2:
            raise ValueError(f"{where}.{op}: takes exactly two operands")
    elif op == "if":
        if len(args) != 3 or not isinstance(args[0], str):
            raise ValueError(f"{where}.if: takes [condition, then, else]")
        from optkit.catalog.conditions import compiled

        try:
            compiled(args[0])
        except ConditionError as exc:
            raise ValueError(f"{where}.if: {exc.render()}") from None
        args = args[1:]
    else:
        raise ValueError(f"{where}: unknown operator {op!r}; known: {', '.join([*_VARIADIC, 'mul', *_BINARY, 'if', 'ladder'])}")
    for i, arg in enumerate(args):
        _scalar(arg, facts, f"{where}.{op}[{i}]")


def evaluate(expr: Any, facts: Mapping[str, Any]) -> tuple[Any, str]:
    """``(value, how)``: the value of a checked expression on ``facts`` and its evaluation in words.

    ``facts`` maps fact names to values (a request's facts). A value outside 1..MAX_VALUE raises
    ``DerivedValueError``."""
    value, how = _evaluate(expr, facts)
    for n in value if isinstance(value, list) else [value]:
        if not 1 <= n <= MAX_VALUE:
            raise DerivedValueError(f"the value {n} is out of range 1..{MAX_VALUE}: {how}")
    return value, how


def _evaluate(expr: Any, facts: Mapping[str, Any]) -> tuple[Any, str]:
    if isinstance(expr, dict) and "ladder" in expr:
        spec = expr["ladder"]
        parts = {key: _eval(spec[key], facts) for key in _LADDER_KEYS[:3]}
        sizes = decode_ladder(parts["up_to"][0], parts["rows_per_request"][0], parts["multiple_of"][0],
                              spec["max_sizes"])
        how = ", ".join(f"{key} {text}" for key, (_, text) in parts.items())
        return sizes, f"ladder({how}, max_sizes {spec['max_sizes']})"
    return _eval(expr, facts)


def _eval(expr: Any, facts: Mapping[str, Any]) -> tuple[int, str]:
    if isinstance(expr, int):
        return expr, str(expr)
    if isinstance(expr, str):
        return int(facts[expr]), f"{expr} = {facts[expr]}"
    (op, args), = expr.items()
    if op == "if":
        from optkit.catalog.conditions import compiled

        holds = bool(compiled(args[0]).evaluate(facts))
        value, text = _eval(args[1] if holds else args[2], facts)
        return value, f"({text}, as {args[0]} {'holds' if holds else 'does not hold'})"
    values = [_eval(arg, facts) for arg in args]
    result = _apply(op, [v for v, _ in values], ", ".join(t for _, t in values))
    return result, f"{op}({', '.join(t for _, t in values)}) = {result}"


def _apply(op: str, nums: list[int], shown: str) -> int:
    if op == "mul":
        result = 1
        for n in nums:
            result *= n
        return result
    if op in _VARIADIC:
        return _VARIADIC[op](nums)
    a, b = nums
    if b <= 0 or (op == "lcm" and a <= 0):
        raise DerivedValueError(f"{op}({shown}): the operands must be above zero")
    if op == "lcm":
        from math import lcm

        return lcm(a, b)
    quotient = -(-a // b)  # ⌈a / b⌉ in integers
    return quotient * b if op == "round_up" else quotient


def decode_ladder(up_to: int, rows_per_request: int, multiple_of: int, max_sizes: int) -> list[int]:
    """The token counts decode steps run at a load of up to ``up_to`` concurrent requests.

    Request counts 1, 2, 4, then every multiple of 8 up to ``up_to``, and ``up_to`` itself (a
    load ramps up and drains, so every batch size up to it occurs; vLLM pads a step to the next
    captured size, so the steps between the sizes run padded, not eager); each count × the rows a
    request runs per step (1 + k with MTP), rounded up to a multiple of ``multiple_of`` (TP under
    sequence parallelism). More than ``max_sizes`` sizes are thinned evenly, always keeping the
    smallest and the largest, so capture time and graph memory stay bounded.
    """
    if min(up_to, rows_per_request, multiple_of) <= 0:
        raise DerivedValueError(f"ladder: up_to {up_to}, rows_per_request {rows_per_request} and multiple_of "
                                f"{multiple_of} must all be above zero")
    counts = sorted({n for n in (1, 2, 4) if n <= up_to} | set(range(8, up_to + 1, 8)) | {up_to})
    sizes = sorted({-(-n * rows_per_request // multiple_of) * multiple_of for n in counts})
    if len(sizes) > max_sizes:
        if max_sizes == 1:
            return [sizes[-1]]
        step = (len(sizes) - 1) / (max_sizes - 1)
        sizes = sorted({sizes[round(i * step)] for i in range(max_sizes)})
    return sizes


__all__ = ["check_expression", "check_target", "evaluate", "decode_ladder", "DerivedValueError", "MAX_VALUE"]
