"""Request fields the user left open, filled in by the catalog's rules before resolution.

Three fields may be left open: ``dp`` (``--dp auto``, ``dp: auto``), ``flashcomm1`` (neither
``--flashcomm1`` nor ``--no-flashcomm1``, no ``flashcomm1:`` key) and ``prefix_caching`` (likewise). A recipe's ``choices`` entry says
what such a field becomes, and when (``optkit.catalog.schema.Choice``)::

    choices:
      - field: flashcomm1
        value: true
        when: "objective.goal == 'throughput' and parallel.tp > 1 and …"
        why: "upstream's high-throughput rows run sequence parallelism …"

How a request's open fields are filled in (``choose``):

- in a fixed order, ``dp`` first (FlashComm1's rules read the DP size), each on the facts of the
  request as filled in so far, with the fields still open at their defaults (``dp`` 1, ``flashcomm1`` and
  ``prefix_caching`` false);
- the first entry, in catalog order, of a recipe the request does not leave out (``--without``)
  whose ``when`` holds decides; with none, the field takes its default: what an open field meant
  before these rules existed, so a latency plan is unchanged;
- with ``--pd`` no rule fills FlashComm1 in (0.23.0's PD tutorials turn it on for the prefill node only,
  0.30.0rc2's on neither role, and the plan is one request for both roles: it stays off, and the plan says
  why); ``--dp auto`` is refused there;
- each rule is keyed to the model page and hardware tab it is read on (its ``when`` names the page's
  architecture), and says so; applied beyond them, its text calls it optkit's own generalization;
- a DP size is the expression's value raised to the smallest size the model splits over (experts
  over TP × DP ranks, ``optkit.resolve.sharding``), at most the devices of the request's nodes; a
  load larger than the node holds gets the node's largest size, and says so.

An explicit value always wins (``--dp 2``, ``--no-flashcomm1``): nothing here reads it. The plan
keeps what was chosen and why (``Plan.choices``: ``optkit plan``/``explain`` show it, the lock records
it; a switch left open that no rule turns on is not listed: off, as before these rules); the plan's request is the request as filled in, so the bundle, its lock and ``plan --from-lock``
all see the same values. No rule here rests on a measured number: each is upstream's written advice
or optkit's reading of it, and says so ("unquantified").
"""

from __future__ import annotations

from typing import Any

from optkit.catalog.enums import CHOOSABLE
from optkit.errors import RequestError
from optkit.value import valueclass

ORDER = ("dp", "flashcomm1", "prefix_caching")
"""The order the open fields are filled in: FlashComm1's rules read the DP size."""
DEFAULTS = {"dp": 1, "flashcomm1": False, "prefix_caching": False}
"""What an open field is when no rule applies (what it meant before rules could fill it in)."""
FACT = {"dp": "parallel.dp", "flashcomm1": "parallel.flashcomm1", "prefix_caching": "workload.prefix_caching"}
"""The fact each field sets."""
PD_FLASHCOMM1 = ("no rule chooses it for a prefill/decode pair: vllm-ascend 0.23.0's PD tutorials turn FlashComm1 on for "
                 "the prefill node only (Qwen3.5-27B-Qwen3.6-27B.md:587, Qwen3.5-397B-A17B.md:671 on its 950DT prefill "
                 "node), 0.30.0rc2's on neither role, and the plan is one request for both roles")
"""Why an open FlashComm1 stays off with ``--pd``."""
FLAGS = {"dp": ("--dp auto", "--dp N"), "flashcomm1": ("no --flashcomm1/--no-flashcomm1", "--flashcomm1 / --no-flashcomm1"),
         "prefix_caching": ("no --prefix-caching/--no-prefix-caching", "--prefix-caching / --no-prefix-caching")}
"""How a user leaves each field open, and how they fix it."""


@valueclass
class Chosen:
    """One open request field as filled in: its value, the rule (recipe) that chose it, and how."""

    field: str
    value: Any
    recipe: str  # '' when no rule applied: the default
    why: str  # the rule in words, or why the default
    how: str  # the evaluation: facts read and their values

    def text(self) -> str:
        """One line for ``optkit plan`` and ``explain``."""
        by = f"chosen by {self.recipe}'s rule" if self.recipe else "no rule applies"  # `how` names the default
        fixed = FLAGS[self.field][1]
        return f"{self.field} = {_shown(self.value)} ({by}; {self.how}; {fixed} fixes it): {self.why}"

    def data(self) -> dict[str, Any]:
        return {"field": self.field, "value": self.value, "recipe": self.recipe, "why": self.why, "how": self.how}


def open_fields(request) -> list[str]:
    """The request's fields left open, in the order they are filled in."""
    return [name for name in ORDER if getattr(request, name) == CHOOSABLE[name]]


def at_defaults(request):
    """``request`` with its open fields at the values they take while the rules are read (their defaults)."""
    fields = open_fields(request)
    return with_values(request, **{name: _placeholder(name, request) for name in fields}) if fields else request


def with_values(request, **values):
    """``request`` (a ``RequestRecord``) with ``values`` in place of its own."""
    return type(request)(request._shape, {**request.__dict__, **values})


def choose(request, model, target, release, catalog, weights=None) -> tuple[Any, list[Chosen]]:
    """``request`` with its open fields filled in (module docstring), and what was chosen, field by field, for the
    ``weights`` the plan serves."""
    from optkit.resolve.facts import compute_facts

    fields = open_fields(request)
    if not fields:
        return request, []
    if request.dp == "auto" and request.pd is not None:
        raise RequestError(f"--dp auto with --pd {request.pd}: give each instance's DP size (--dp N); the load rule "
                           "sizes one server's DP groups, not a prefill/decode pair's")
    current = at_defaults(request)
    made: list[Chosen] = []
    for name in fields:
        facts = compute_facts(current, model, target, release, weights)
        if name == "flashcomm1" and request.pd is not None:
            made.append(Chosen(name, False, "", PD_FLASHCOMM1, "the default false"))
            continue
        chosen = _cited(_rule_for(name, facts, catalog, request.without_recipes), model, target, facts)
        if name == "dp" and chosen.recipe:
            chosen = _fit_dp(chosen, current, model, target, facts)
        current = with_values(current, **{name: chosen.value})
        if chosen.recipe or name == "dp":  # an open switch no rule fills is what it always meant (off): not shown
            made.append(chosen)
    return current, made


def _cited(chosen: Chosen, model, target, facts) -> Chosen:
    """``chosen`` with the page lines of the ``page.*`` values its rule read (``optkit.resolve.page_rules``)."""
    from optkit.resolve.page_rules import plan_advice

    cited = plan_advice(model, target, facts["versions.vllm_ascend"], facts["objective.goal"]).cite(chosen.how)
    return Chosen(chosen.field, chosen.value, chosen.recipe, chosen.why, f"{chosen.how} ({cited})") if cited else chosen


def _placeholder(name: str, request) -> Any:
    """An open field's value while the rules are read: its default (one DP group per node on several nodes,
    the smallest layout they take)."""
    return (request.nodes or 1) if name == "dp" else DEFAULTS[name]


def _rule_for(name: str, facts, catalog, without) -> Chosen:
    from optkit.catalog.conditions import compiled, format_value
    from optkit.catalog.derive import evaluate

    for recipe in catalog:
        if recipe.id in without:
            continue
        for entry in recipe.choices:
            if entry.field != name or not compiled(entry.when).evaluate(facts.values):
                continue
            read = ", ".join(f"{n} = {format_value(facts[n])}" for n in compiled(entry.when).fact_names())
            if name == "dp":
                value, how = evaluate(entry.value, facts.values)
                return Chosen(name, value, recipe.id, " ".join(entry.why.split()), f"{how}, as {read}")
            return Chosen(name, entry.value, recipe.id, " ".join(entry.why.split()), f"as {read}")
    open_as = FLAGS[name][0]
    default = facts[FACT[name]]  # the placeholder: the default, or one DP group per node
    return Chosen(name, default, "", f"{open_as} and no rule of the catalog applies to this request",
                  f"the default {_shown(default)}")


def _fit_dp(chosen: Chosen, request, model, target, facts) -> Chosen:
    """The rule's DP size raised to the smallest one the model splits over, within the request's nodes."""
    from optkit.resolve.layout import layout_problem
    from optkit.resolve.sharding import check_sharding

    tp, ep = request.tp, facts["parallel.ep"]
    nodes = request.nodes or 1
    most = nodes * target.devices_per_node // tp
    on = f"{nodes} node{'s' if nodes > 1 else ''} of {target.devices_per_node} devices"

    def splits(dp: int) -> bool:
        if layout_problem(tp, dp, nodes, target.devices_per_node):
            return False
        try:
            check_sharding(model, tp, dp, ep)
        except RequestError:
            return False
        return True

    fitting = [dp for dp in range(1, most + 1) if splits(dp)]
    if not fitting:
        raise RequestError(f"--dp auto: no DP size with --tp {tp} fits {on} and splits {model.id}'s experts; "
                           "give --dp N, another --nodes, or a smaller --tp")
    want = max(1, chosen.value)
    above = [dp for dp in fitting if dp >= want]
    if above:
        dp = above[0]
        how = chosen.how + (f"; raised to {dp}, the smallest DP the model's experts split over" if dp != want else "")
    else:
        dp = fitting[-1]
        how = (chosen.how + f"; capped at {dp}: TP {tp} × DP {dp} is the most {on} hold (the load would want "
               f"DP {want}: give --nodes to spread it, or accept more sequences per DP group)")
    return Chosen(chosen.field, dp, chosen.recipe, chosen.why, how)


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


__all__ = ["Chosen", "choose", "open_fields", "ORDER", "DEFAULTS"]
