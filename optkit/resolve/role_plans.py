"""The plan of each role of a ``--pd`` plan where the model's own tutorial page runs a prefill/decode pair of the
plan's instance shape (``Plan.roles``): the same selection of recipes, its settings collected with that role's
command's page facts (``page.role``, ``page.command_max_num_batched_tokens``, ``page.static_kernel``:
``PageAdvice.for_role``), the command's page settings below them, checked as the plan is (context length, fit).
``optkit.bundle.pd.RoleLaunch`` launches a role's plan; ``optkit explain`` shows its page advice.

Prefill instances of a shape of their own (``--prefill-tp`` / ``--prefill-dp``) are planned for that shape
(``shaped_prefill_plan``): a plan of the request with the prefill instances' TP and DP, whose facts, derived
values and fit are that shape's; one tree serves both roles, so the two shapes must select the same source
patches."""

from __future__ import annotations

import copy
from typing import Any, Callable

from optkit.catalog.conditions import compiled
from optkit.errors import RequestError
from optkit.resolve.facts import Facts
from optkit.resolve.context_length import check_max_model_len
from optkit.resolve.fit import plan_fit, refusal as fit_refusal
from optkit.resolve.pd import ROLES
from optkit.resolve.settings import carry_page_settings

ROLE_FACTS = ("page.static_kernel", "page.npugraph_ex", "page.role", "page.fused_mc2", "page.fused_mc2_level")
"""The page facts a role's own command gives, beside its ``page.command_*`` ones."""


def role_plans(result: Any, collect: Callable[[Any], None], catalog: Any) -> dict[str, Any]:
    """Each role's plan (``result`` a ``Plan`` whose selection is collected; ``collect`` gathers a plan's recipe
    settings from its facts, without the recipes the role leaves out: ``left_out_in_role``): {} when the plan is no
    ``--pd`` plan or the page runs no command of its shape, so both roles carry the plan's own settings."""
    advice = result.page_advice
    if result.pd is None or advice is None or not advice.roles:
        return {}
    roles = {}
    for role in ROLES:
        mine = advice.for_role(role, result.request.tp, result.request.dp, result.request.weight_format,
                               result.request.speculative_method, result.facts["parallel.dcp"])
        if not mine.role:
            continue
        role_plan = copy.copy(result)
        role_facts = {k: v for k, v in mine.facts().items() if k.startswith("page.command") or k in ROLE_FACTS}
        role_plan.facts = Facts({**result.facts.values, **role_facts})
        role_plan.env, role_plan.serve_args, role_plan.derivations = [], [], []
        role_plan.additional_config, role_plan.compilation_config, role_plan.speculative_config = {}, {}, {}
        role_plan.config_sources, role_plan.page_advice, role_plan.roles, role_plan.kv_transfer = {}, mine, {}, {}
        role_plan.page_unread = []
        role_plan.role_left_out = left_out_in_role(result, role_plan.facts, catalog)
        collect(role_plan)
        carry_page_settings(role_plan)
        check_max_model_len(role_plan)
        role_plan.fit = plan_fit(role_plan)
        roles[role] = role_plan
    return roles


def left_out_in_role(result: Any, role_facts: Facts, catalog: Any) -> dict[str, str]:
    """The recipes of ``result``'s selection one role leaves out, each with why: a recipe without source patches or
    kernels (one tree serves both roles) one of whose preconditions or effective_when rules reads a page fact the
    role's own command gives otherwise than the plan's, and fails on the role's facts (the decoder of GLM5.2.md's A2
    PD keeps static kernels off: waterfall-static-kernel's ``page.static_kernel != 'off'``); then any such recipe that
    requires one left out. A recipe the user asked for (``--with``) stays."""
    changed = {name for name, value in role_facts.values.items() if result.facts.values.get(name) != value}
    decisions = result.resolution.decisions
    left: dict[str, str] = {}
    if not changed:
        return left

    def movable(rid: str) -> bool:
        recipe = catalog[rid]
        return not (recipe.patches or recipe.kernels or decisions[rid].forced)

    for rid in result.selected:
        recipe = catalog[rid]
        for rule in (*recipe.preconditions, *recipe.effective_when):
            condition = compiled(rule.when)
            if movable(rid) and changed & set(condition.fact_names()) and not condition.evaluate(role_facts.values):
                left[rid] = f"{_one_line(rule.msg)} ({condition.describe(role_facts.values)})"
                break
    grew = True
    while grew:  # a recipe requiring one the role leaves out goes with it
        grew = False
        for rid in result.selected:
            needs = next((link.recipe for link in catalog[rid].requires if link.recipe in left
                          and (link.when is None or compiled(link.when).evaluate(role_facts.values))), None)
            if needs and rid not in left and movable(rid):
                left[rid], grew = f"it requires {needs}, which this role leaves out", True
    return left


def _one_line(text: str) -> str:
    return " ".join(text.split())


def pair_connector(result: Any) -> None:
    """Give both roles of a PD plan one KV connector, decided once: the one the page's role commands carry
    (``Plan.kv_transfer``), else the release's. A role the page runs no command for takes its partner's, labelled
    with that command's line; role commands naming different connectors are refused (the two ends of a transfer
    must be one connector)."""
    if result.pd is None:
        return
    plans = {role: result.roles.get(role, result) for role in ROLES}
    named = {role: p.kv_transfer["kv_connector"] for role, p in plans.items() if "kv_connector" in p.kv_transfer}
    if not named:
        return
    if len(set(named.values())) > 1:
        lines = ", ".join(f"the {role} role's {plans[role].config_sources['kv_transfer_config.kv_connector']} "
                          f"names {name}" for role, name in named.items())
        raise RequestError(f"--pd: the page's role commands name different KV connectors ({lines}); the two roles of "
                           "a transfer run one connector: plan a layout the page runs with one")
    role, name = next(iter(named.items()))
    source = plans[role].config_sources["kv_transfer_config.kv_connector"]
    for plan in {id(p): p for p in (result, *result.roles.values())}.values():  # a role without a plan runs result's
        if "kv_connector" not in plan.kv_transfer:
            plan.kv_transfer = {**plan.kv_transfer, "kv_connector": name}
            plan.config_sources = {**plan.config_sources, "kv_transfer_config.kv_connector": source}


def check_role_fit(result: Any, only_role: str | None = None) -> None:
    """Refuse a plan one of whose roles (``only_role``: that one) does not fit, naming the role and its page
    command's line."""
    for role, role_plan in result.roles.items():
        if not role_plan.fit.fits and only_role in (None, role):
            raise RequestError(f"the {role} role, with its page command's settings "
                               f"(:{role_plan.page_advice.layout_line}): "
                               + fit_refusal(role_plan.fit, result.model.id, result.target.id))


def shaped_prefill_plan(result: Any, plan_for: Callable[[Any], Any], has_patches: Callable[[str], bool]) -> Any:
    """The prefill role's plan of an asymmetric PD plan (``result``: the decode shape's): the request planned with
    the prefill instances' TP and DP (``plan_for``: a request record's plan), that plan's own prefill role plan where
    the page runs one, placed on ``result``'s instances (``has_patches``: whether a recipe ships source patches).
    Refused, naming the recipes, when the two shapes select different source patches (one ``optkit apply`` serves
    both roles)."""
    from optkit.resolve.request import Request

    given = result.given or result.request
    tp, dp = result.pd.shape("prefill")
    pp = result.pd.pipeline("prefill")  # the shape's own pipeline: pp and prefill_pp both (optkit.resolve.pipeline)
    dcp = given.prefill_dcp if given.prefill_dcp is not None else given.dcp
    fields = {**given.dump(mode="json", by_alias=True), "tp": tp, "dp": dp, "pp": pp if pp > 1 else None,
              "dcp": dcp, "prefill_tp": None, "prefill_dp": None, "prefill_pp": pp if pp > 1 else None,
              "prefill_dcp": None}
    other = plan_for(Request(**fields))
    patched = [{rid for rid in plan.selected if has_patches(rid)} for plan in (result, other)]
    if patched[0] != patched[1]:
        only = sorted(patched[1] - patched[0]) or sorted(patched[0] - patched[1])
        which = "prefill" if patched[1] - patched[0] else "decode"
        raise RequestError(f"--prefill-tp {tp} × --prefill-dp {dp}: the {which} shape selects source patches the other "
                           f"does not ({', '.join(only)}), and one vllm-ascend tree serves both roles; give both roles "
                           "one shape, or a prefill shape whose plan selects the same recipes")
    role = copy.copy(other.roles.get("prefill", other))
    role.pd = result.pd
    return role
