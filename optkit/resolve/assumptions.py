"""The workload a plan assumes: the request fields that decide which sampler, scheduler and kernel paths a
recipe meets (sampling, min_tokens, logprobs, penalties, structured output, lengths), each with its value in
words, whether it is optkit's default, and the flag that changes it.

Decided once per plan (``workload_assumptions``) and carried in it: ``Plan.assumptions`` for the plan's
header, ``--json``, the lock and the bundle's README; ``Decision.assumes`` names the defaults a decision
rests on (the request fields the deciding rules read, at their defaults), which the table shows beside the
reason with the flag that changes each. A value equal to optkit's default reads as the default whether or
not a flag spelled it: the request carries values, not how they were given, so ``--from-lock`` replays the
same words.
"""

from __future__ import annotations

from typing import Any

from optkit.value import valueclass

DEFAULT_LENGTHS = (1024, 512)
"""The default input and output lengths (``optkit.resolve.request.Request``; a test checks they agree)."""
DEFAULTS = {"sampling": "greedy", "min_tokens": True, "logprobs": False, "penalties": False, "structured_output": False}
"""The defaults of the request's switch-like workload fields (a test checks them against ``Request``)."""
_LENGTH_FACTS = ("workload.input_len", "workload.output_len", "workload.length_mix", "workload.length_classes",
                 "workload.input_len_max", "workload.output_len_max", "workload.total_len_max",
                 "workload.input_len_mean", "workload.output_len_mean", "workload.prefill_step_tokens_max")
FACTS = {"sampling": ("workload.greedy",), "min_tokens": ("workload.min_tokens",),
         "logprobs": ("workload.logprobs",), "penalties": ("workload.penalties",),
         "structured_output": ("workload.structured_output",), "lengths": _LENGTH_FACTS}
"""The facts each assumption sets (a rule that reads one of them rests on the assumption)."""
_WORDS = {  # field → value → (the value in words, in short, the flag that changes it)
    "sampling": {"greedy": ("greedy sampling, temperature 0", "greedy", "--sampling sampled"),
                 "sampled": ("sampling with temperature > 0", "sampled", "--sampling greedy")},
    "min_tokens": {True: ("min_tokens set by clients, bench.sh sending the output length", "min_tokens set",
                          "--no-min-tokens"),
                   False: ("no min_tokens", "no min_tokens", "--min-tokens")},
    "logprobs": {False: ("no logprobs", "no logprobs", "--logprobs"), True: ("logprobs requested", "logprobs", "--no-logprobs")},
    "penalties": {False: ("no sampling penalties", "no penalties", "--penalties"),
                  True: ("sampling penalties", "penalties", "--no-penalties")},
    "structured_output": {False: ("no structured output", "no structured output", "--structured-output"),
                          True: ("structured output", "structured output", "--no-structured-output")},
}


@valueclass(frozen=True)
class Assumption:
    """One workload assumption of a plan."""

    field: str  # a request field, or 'lengths' (input_len, output_len, length_mix)
    value: str  # in words
    short: str  # in a word or two, for a table row
    default: bool  # optkit's default, not a value the request changed
    change: str  # the flag that changes it

    def text(self) -> str:
        """``greedy sampling, temperature 0 (the default; --sampling sampled changes it)``."""
        return f"{self.value} ({'the default' if self.default else 'as requested'}; {self.change} changes it)"

    def data(self) -> dict[str, Any]:
        return {"field": self.field, "value": self.value, "short": self.short, "default": self.default,
                "change": self.change}


def _lengths(request) -> Assumption:
    if request.length_mix:
        return Assumption("lengths", f"the length mix {request.length_mix} (tokens in:out:share)",
                          request.length_mix, False, "--length-mix / --input-len / --output-len")
    default = (request.input_len, request.output_len) == DEFAULT_LENGTHS
    short = f"{request.input_len} in / {request.output_len} out"
    return Assumption("lengths", f"{request.input_len} tokens in / {request.output_len} out", short, default,
                      "--input-len / --output-len / --length-mix")


def workload_assumptions(request) -> list[Assumption]:
    """The request's workload assumptions, in a fixed order (sampling first, lengths last)."""
    result = []
    for name, default in DEFAULTS.items():
        value = getattr(request, name)
        words, short, change = _WORDS[name][value]
        result.append(Assumption(name, words, short, value == default, change))
    return [*result, _lengths(request)]


def rests_on(assumptions: list[Assumption], fact_names) -> list[str]:
    """The fields of ``assumptions`` at their defaults that set any of ``fact_names``."""
    names = set(fact_names)
    return [a.field for a in assumptions if a.default and names & set(FACTS[a.field])]


def mark_decisions(assumptions: list[Assumption], decisions: dict, catalog, facts) -> None:
    """Set ``Decision.assumes`` on each decision that rests on a default: a selected recipe on every rule
    that holds for it (preconditions, effective_when), one left out on the rule that left it out."""
    from optkit.catalog.conditions import compiled
    from optkit.resolve.decision import Status

    for rid, d in decisions.items():
        if d.status is Status.selected:
            recipe = catalog[rid]
            rules = [compiled(r.when) for r in (*recipe.preconditions, *recipe.effective_when)]
            read = {n for rule in rules if rule.evaluate(facts.values) for n in rule.fact_names()}
        else:
            read = set(d.facts) if d.rule else set()
        d.assumes = rests_on(assumptions, read)


def assumes_note(assumptions: list[Assumption], names: list[str]) -> str:
    """What a decision resting on defaults says, each with the flag that changes it:
    ``assumes, by default: greedy (--sampling sampled), min_tokens set (--no-min-tokens)``; '' for none."""
    known = {a.field: a for a in assumptions}
    shown = [f"{known[n].short} ({known[n].change})" for n in names]
    return f"assumes, by default: {', '.join(shown)}" if shown else ""
