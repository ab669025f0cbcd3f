"""Launch values a request sets over the rules (``--set NAME=VALUE``, a request file's ``set:``).

Under the throughput goal three launch values are derived by recipes' rules, each labelled "a rule,
unquantified": the scheduler's ``--max-num-seqs`` and ``--max-num-batched-tokens``
(sched-capacity-for-load) and the graph capture range (cudagraph-capture-sizes-for-load). A request
may set them instead; ``optkit tune`` does, once per trial, and ``optkit plan --from-tune`` does with
the values it measured best. The value replaces the rule's in the one place the plan derives it
(``optkit.resolve.settings``), so plan, explain, lock, README and bundle all show it, labelled with
where it came from (``set_source``: the tune and host that measured it, else "set by the request").

KNOBS, by name:

- ``max-num-seqs``: ``--max-num-seqs``, sequences per DP group;
- ``max-num-batched-tokens``: ``--max-num-batched-tokens``, tokens per scheduler step;
- ``capture-up-to``: the capture ladder's top, in requests per DP group (the ladder's rows per request and
  its multiples stay the recipe's: ``optkit.catalog.derive``'s ``ladder``).

A set value with no selected recipe deriving it is refused (nothing would read it), and so is a pair vLLM
refuses at start: ``max_num_batched_tokens`` below ``max_num_seqs`` (vllm/config/scheduler.py:273 in vLLM
0.23.0: "must be greater than or equal to max_num_seqs").
"""

from __future__ import annotations

import re
from typing import Any, Callable

from optkit.errors import RequestError
from optkit.value import valueclass


def _whole(expression: Any, value: int) -> Any:
    return value


def _ladder_top(expression: Any, value: int) -> Any:
    if not (isinstance(expression, dict) and "ladder" in expression):
        raise RequestError("capture-up-to: the recipe's capture sizes are not a ladder; set them with --with/--without")
    return {"ladder": {**expression["ladder"], "up_to": value}}


@valueclass
class Knob:
    name: str
    target: str  # the derived launch value it replaces ('serve:--max-num-seqs', …)
    low: int
    high: int
    apply: Callable[[Any, int], Any]  # the recipe's expression with the set value in
    means: str


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("max-num-seqs", "serve:--max-num-seqs", 1, 4096, _whole, "sequences per DP group (--max-num-seqs)"),
    Knob("max-num-batched-tokens", "serve:--max-num-batched-tokens", 16, 1 << 20, _whole,
         "tokens per scheduler step (--max-num-batched-tokens)"),
    Knob("capture-up-to", "compilation_config:cudagraph_capture_sizes", 1, 4096, _ladder_top,
         "the graph capture ladder's top, in requests per DP group"),
)}
_ITEM = re.compile(r"\s*([a-z-]+)\s*=\s*(\S+)\s*")
VLLM_BATCH_RULE = "vllm/config/scheduler.py:273 in vLLM 0.23.0"


def parse_set(text: str | None) -> dict[str, int]:
    """``name=value,…`` (canonical text, as ``canonical_set`` writes it) as a mapping."""
    if not text:
        return {}
    return {name: int(value) for name, _, value in (item.partition("=") for item in text.split(","))}


def canonical_set(value: Any) -> str | None:
    """``--set`` values (``a=1,b=2``, a list of such, or a request file's mapping) in canonical text: sorted by
    name, each value an integer in its knob's range. Raises ValueError naming the item and the fix."""
    if value is None:
        return None
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, (str, list, tuple)):
        texts = [value] if isinstance(value, str) else list(value)
        items = []
        for text in texts:
            if not isinstance(text, str):
                raise ValueError(f"expected NAME=VALUE text, got {text!r}")
            for part in filter(str.strip, text.split(",")):
                match = _ITEM.fullmatch(part)
                if not match:
                    raise ValueError(f"{part.strip()!r}: give NAME=VALUE, e.g. max-num-seqs=48")
                items.append((match.group(1), match.group(2)))
    else:
        raise ValueError(f"expected NAME=VALUE text (a list of them, or a mapping of names to integers), got {value!r}")
    out: dict[str, int] = {}
    for name, raw in items:
        knob = KNOBS.get(name)
        if knob is None:
            raise ValueError(f"{name!r} is no knob a request sets; known: {', '.join(sorted(KNOBS))}")
        if isinstance(raw, bool) or not (isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit())):
            raise ValueError(f"{name}={raw}: give an integer from {knob.low} to {knob.high}")
        number = int(raw)
        if not knob.low <= number <= knob.high:
            raise ValueError(f"{name}={number} is out of range: give an integer from {knob.low} to {knob.high}")
        if name in out and out[name] != number:
            raise ValueError(f"{name} is set twice ({out[name]} and {number}): keep one")
        out[name] = number
    return ",".join(f"{k}={out[k]}" for k in sorted(out)) or None


def by_target(text: str | None) -> dict[str, tuple[Knob, int]]:
    """The set knobs keyed by the derived value they replace."""
    return {KNOBS[name].target: (KNOBS[name], value) for name, value in parse_set(text).items()}


def source_label(source: str | None) -> str:
    return source or "set by the request (--set)"


def check_set(result) -> None:
    """After the plan's settings are collected: every set knob replaced a derived value, and vLLM would take the
    scheduler pair. ``result``: the plan."""
    values = parse_set(result.request.set_values)
    if not values:
        return
    derived = {d.target for d in result.derivations}
    for name, value in sorted(values.items()):
        knob = KNOBS[name]
        if knob.target not in derived:
            owner = {"serve:--max-num-seqs": "sched-capacity-for-load", "serve:--max-num-batched-tokens":
                     "sched-capacity-for-load"}.get(knob.target, "cudagraph-capture-sizes-for-load")
            decision = result.resolution.decisions.get(owner)
            why = f" ({owner} is {decision.status.value}: {decision.reason})" if decision is not None else ""
            raise RequestError(f"--set {name}={value}: no selected recipe derives {knob.target.split(':', 1)[1]} in "
                               f"this plan{why}; --goal throughput selects it, or drop the --set")
    from optkit.resolve.fit import serve_int

    seqs, tokens = serve_int(result, "--max-num-seqs"), serve_int(result, "--max-num-batched-tokens")
    if seqs is not None and tokens is not None and tokens < seqs:
        raise RequestError(f"--max-num-batched-tokens {tokens} is below --max-num-seqs {seqs}: vLLM refuses to start "
                           f"({VLLM_BATCH_RULE}: max_num_batched_tokens must be greater than or equal to "
                           "max_num_seqs); raise max-num-batched-tokens or lower max-num-seqs")


__all__ = ["KNOBS", "Knob", "parse_set", "canonical_set", "by_target", "check_set", "source_label"]
