"""A prefill/decode-disaggregated bundle (``--pd P:D``): one bundle, a directory per role.

The plan is resolved once, for the request's instance: both roles run the same vllm-ascend tree
(one patch series, one ``apply``), and the catalog's rules name no role, so both roles carry the
plan's recipes. What differs per role is what the release's tutorial makes differ
(``optkit.versions.pd``): the ``--kv-transfer-config`` (the Mooncake connector, ``kv_role``, a
``kv_port`` per instance, both roles' TP and DP), the instance's devices and API port, the
speculative tokens of a prefiller of a model without linear-attention layers (the release's
``speculative`` source: 1 on P, ≥ 1 on D, unless the model's own page's prefill command drafts more; equal on
both for hybrid models such as Qwen3.5), and the
prefiller's eager mode without the plan's graph settings (``optkit.versions.pd_roles``), and, where the
model's own page runs a command for the role of this instance shape, that command's page settings
(``Plan.roles``, built by ``optkit.resolve.role_plans``; the role's drafter is then eager only where its command
says so). The role
READMEs say which of the article's gains describe the role's work (TPOT is the decoder's: a prefiller
answers each request with one token, the proxy's ``max_tokens`` 1).

Files (beside the lock, patches/, apply.sh, build-kernels.sh, expected.json, bench.sh, README.md)::

    prefill/ decode/     serve.sh (--instance I), env.sh, preflight.sh, README.md
    proxy.sh             the tutorial's proxy, run from the vllm-ascend tree
    k8s/                 (--k8s) a StatefulSet + headless Service per role, the proxy's Deployment +
                         Service, the ConfigMap with every script the pods run
"""

from __future__ import annotations

import copy
from typing import Any

from optkit import __version__
from optkit.bundle.launch import NODE_ENV, Launch, compact_json, serve_argv
from optkit.resolve.pd import ROLES, Instance
from optkit.resolve.plan import Plan, Workspace
from optkit.versions.pd import PDRelease, pd_release, reads_shapes
from optkit.versions.pd_roles import graph_setting, prefill_eager_source

KV_PLACEHOLDER = "$KV_TRANSFER_CONFIG"
"""The --kv-transfer-config value in a role's argv: serve.sh sets it to its instance's JSON."""
DECODE_METRICS = ("tpot", "p99_tpot", "throughput")
"""Gains measured on decode steps: the decode role's (a prefiller runs one step per request)."""
LOCAL_HOST = "127.0.0.1"


class RoleLaunch(Launch):
    """The launch of one role of a PD plan: the plan's, with the role's KV transfer and speculative tokens."""

    def __init__(self, plan: Plan, workspace: Workspace, role: str):
        self.partition = _layer_partition(plan.roles.get("prefill", plan)) if plan.pd.pipeline("prefill") > 1 else None
        plan = plan.roles.get(role, plan)  # the role's own page settings, where the page runs a command for it
        super().__init__(plan, workspace)
        self.role = role
        self.release: PDRelease = pd_release(str(plan.facts["versions.vllm_ascend"]))
        self.instances: list[Instance] = plan.pd.of(role)
        self.eager = role == "prefill"  # optkit.versions.pd_roles: every tutorial's prefiller runs eager
        own = plan.page_advice is not None and plan.page_advice.role == role  # the model's page runs this role
        if self.eager and self.speculative:
            # with the page's own command for the role, its draft runs eager only where that command says so (carried)
            self.speculative = {**self.speculative, **({} if own else {"enforce_eager": True})}
            stated = _page_tokens(plan) if own else None
            if not plan.facts["model.gdn_layers"]:  # hybrid models: equal on both roles (the connector's Mamba state)
                self.speculative["num_speculative_tokens"] = 1 if stated is None else stated.value
            self.speculative_sources = [*self.speculative_sources, "optkit" if stated is None else
                                        f"page:{stated.source.page.rsplit('/', 1)[-1]}:{stated.source.line}"]
        self.argv, self.sources = serve_argv(plan, self.speculative, self.speculative_sources, eager=self.eager)
        self.argv += ["--kv-transfer-config", KV_PLACEHOLDER]
        carried = sorted({v for k, v in plan.config_sources.items() if k.startswith("kv_transfer_config.")})
        self.sources += ["request", ",".join(["request", *carried])]
        # the PD tutorial's env (its OMP threads), unless the model's own page runs this role: then its command's env
        self.env = [{"name": name, "value": value, "recipe": "optkit", "external": True}
                    for name, value in ([] if own else self.release.env)] + self.env

    @property
    def devices(self) -> int:
        """The devices of one instance of this role."""
        return self.plan.pd.width(self.role)

    @property
    def parameters(self) -> dict[str, str]:
        return {**super().parameters, "PORT": str(self.port(self.instances[0]))}

    def port(self, instance: Instance) -> int:
        return self.release.api_port + instance.rank

    def kv_port(self, instance: Instance) -> int:
        return self.release.kv_port_base(self.plan.target.devices_per_node) + self.release.kv_port_step * instance.rank

    @property
    def connector(self) -> str:
        """The pair's KV connector: the one the model's own page runs its roles with (``Plan.kv_transfer``, one for
        both roles: ``optkit.resolve.role_plans.pair_connector``), else the release's tutorial's."""
        return self.plan.kv_transfer.get("kv_connector", self.release.connector)

    def kv_transfer_config(self, instance: Instance) -> dict[str, Any]:
        """The instance's --kv-transfer-config, as the tutorial writes it (kv_port a string there too): both roles'
        shapes where the connector reads them (``optkit.versions.pd.reads_shapes``), and the page's own keys of the
        role's command (``Plan.kv_transfer``)."""
        pd = self.plan.pd
        shapes = {role: dict(sorted({**dict(zip(("tp_size", "dp_size"), pd.shape(role))),
                                     **({"pp_size": pd.pipeline(role)} if pd.pipeline(role) > 1 else {}),
                                     **({"pp_layer_partition": self.partition}
                                        if role == "prefill" and self.partition else {})}.items()))
                  for role in ("prefill", "decode")}
        page = copy.deepcopy(self.plan.kv_transfer)
        extra = {**(shapes if reads_shapes(self.connector) else {}), **page.pop("kv_connector_extra_config", {})}
        config = {**page, "kv_connector": self.connector, "kv_role": self.release.kv_roles[self.role],
                  "kv_port": str(self.kv_port(instance))}
        return dict(sorted({**config, **({"kv_connector_extra_config": extra} if extra else {})}.items()))

    def instances_data(self) -> list[dict[str, Any]]:
        """The lock's ``launch.roles.<role>.instances``."""
        return [{"index": i.index, "rank": i.rank, "node": i.node, "devices": ",".join(map(str, i.devices)),
                 "port": self.port(i), "kv_port": self.kv_port(i),
                 "kv_transfer_config": compact_json(self.kv_transfer_config(i)),
                 **({"nodes": list(i.nodes)} if len(i.nodes) > 1 else {})} for i in self.instances]


def _layer_partition(prefill: Plan) -> str | None:
    """The prefiller's custom pipeline partition (``VLLM_PP_LAYER_PARTITION`` in its env, as its page command sets
    it), which both roles' connector configs must state as ``prefill.pp_layer_partition`` (vllm-ascend 0.30.0rc2
    pipeline_parallel.md:327-335); None when the prefiller keeps vLLM's even split."""
    return next((str(s.value) for s in prefill.env if s.key == "VLLM_PP_LAYER_PARTITION"), None)


def _page_tokens(plan: Plan):
    """The speculative tokens the page's own command for the plan's role drafts (a ``PageSetting``), or None: the
    release's PD tutorial then has the prefiller of a model without linear-attention layers draft 1."""
    from optkit.resolve.page_values import SPEC_K_SETTING

    return next((s for s in plan.page_advice.settings if s.key == SPEC_K_SETTING), None)


def role_launches(plan: Plan, workspace: Workspace) -> dict[str, RoleLaunch]:
    return {role: RoleLaunch(plan, workspace, role) for role in ROLES}


def role_lock(launch: RoleLaunch, base: dict) -> dict[str, Any]:
    """``launch.roles.<role>`` of the lock: what bundle check compares the role's scripts with and
    gives vLLM's parser, one argv per instance."""
    out = copy.deepcopy(base)
    out.update(role=launch.role, env=launch.env, argv=launch.argv, argv_sources=launch.sources,
               parameters=launch.parameters, effective_speculative_config=launch.speculative,
               instances=launch.instances_data(), node_env=dict(NODE_ENV),
               **({"nodes": launch.nodes} if launch.nodes else {}),
               **({"recipes_left_out": dict(launch.plan.role_left_out)} if launch.plan.role_left_out else {}))
    return out


def pd_lock(launches: dict[str, RoleLaunch]) -> dict[str, Any]:
    """The lock's ``launch.pd``: the shape, the connector, the proxy, and where each value comes from."""
    any_launch = next(iter(launches.values()))
    release, pd = any_launch.release, any_launch.plan.pd
    shapes = {"shapes": {role: {**dict(zip(("tp", "dp"), pd.shape(role))),
                                **({"pp": pd.pipeline(role)} if pd.pipeline(role) > 1 else {})} for role in ROLES}
              } if pd.asymmetric else {}
    return {"prefill": pd.prefill, "decode": pd.decode, "instance_devices": pd.instance_devices, "nodes": pd.nodes,
            **shapes,
            "connector": any_launch.connector,
            "proxy": {"script": release.proxy_script, "port": release.proxy_port},
            "sources": dict(sorted({**release.sources, **_page_connector_source(any_launch)}.items()))}


def _page_connector_source(launch: RoleLaunch) -> dict[str, str]:
    """The lock's ``pd.sources.connector`` where the model's own page names the pair's connector."""
    source = launch.plan.config_sources.get("kv_transfer_config.kv_connector")
    return {"connector": f"{source} (the model's own page, for its role commands)"} if source else {}


def lock_view(lock: dict, role: str) -> dict:
    """The lock as one role's scripts see it: ``launch`` is the role's."""
    return {**lock, "launch": lock["launch"]["roles"][role]}


# --------------------------------------------------------------------------- template data


def _header(plan: Plan) -> dict[str, Any]:
    return {"version": __version__, "model_id": plan.model.id, "target_id": plan.target.id}


def role_serve_data(launch: RoleLaunch, lock: dict) -> dict[str, Any]:
    """``pd/serve.sh.j2``: the role's instances (devices, ports, KV configs) and its argv."""
    from optkit.bundle.scripts import serve_data

    data = serve_data(launch, lock)
    instances = launch.instances_data()
    return {**data, "role": launch.role, "shape": launch.plan.pd.summary, "count": len(instances),
            "ports": [i["port"] for i in instances], "device_lists": [i["devices"] for i in instances],
            "kv_configs": [i["kv_transfer_config"] for i in instances],
            "node_env": [{"name": k, "source": v} for k, v in NODE_ENV.items()],
            "loopback_ok": launch.plan.pd.nodes == 1}


def role_preflight_data(launch: RoleLaunch, lock: dict) -> dict[str, Any]:
    """preflight.sh of a role: the common checks, the devices its instances use, Mooncake."""
    from optkit.bundle.scripts import preflight_data

    data = preflight_data(launch, lock)
    highest = max(d for i in launch.instances for d in i.devices)
    return {**data, "devices": highest + 1, "layout": f"the {launch.role} instances of {launch.plan.pd.summary}",
            "mooncake": {"module": launch.release.mooncake_module, "source": launch.release.sources["mooncake"]}}


def role_readme_data(launch: RoleLaunch, lock: dict) -> dict[str, Any]:
    """The role's README: its instances, its KV transfer, what it runs and which gains are its."""
    plan = launch.plan
    decode = launch.role == "decode"
    recipes = []
    for rid in plan.selected:
        recipe = launch.catalog[rid]
        gains = [g for g in recipe.gains if (g.metric in DECODE_METRICS) == decode]
        recipes.append({"id": rid, "title": recipe.title, "gains": [f"{g.metric}: “{g.quote}”" for g in gains],
                        "left_out": left_out(plan, rid) if launch.eager else []})
    return {**_header(plan), "role": launch.role, "shape": plan.pd.summary, "instances": launch.instances_data(),
            "connector": launch.release.connector, "kv_role": launch.release.kv_roles[launch.role],
            "sources": launch.release.sources, "speculative": launch.speculative, "env": launch.env,
            "recipes": recipes, "versions": lock["versions"], "decode_metrics": ", ".join(DECODE_METRICS),
            "max_tokens_line": f"{launch.release.proxy_script}:{launch.release.max_tokens_line}",
            "eager": launch.eager, "eager_source": prefill_eager_source(launch.release.version)}


def left_out(plan: Plan, rid: str) -> list[str]:
    """The settings of recipe ``rid`` an eager role leaves out (its graph settings), as config keys."""
    keys = [key for key, owner in plan.config_sources.items() if owner == rid and graph_setting(key)]
    return sorted(key for key in keys if not any(other.startswith(key + ".") for other in keys))  # the leaves


def proxy_data(launches: dict[str, RoleLaunch], lock: dict) -> dict[str, Any]:
    """proxy.sh: the tutorial's proxy script in the tree, each instance's node and port."""
    decode = launches["decode"]
    release, pd = decode.release, decode.plan.pd
    return {**_header(decode.plan), "script": release.proxy_script, "port": release.proxy_port, "nodes": pd.nodes,
            "prefill_nodes": [i.node for i in pd.of("prefill")], "decode_nodes": [i.node for i in pd.of("decode")],
            "prefill_ports": [launches["prefill"].port(i) for i in pd.of("prefill")],
            "decode_ports": [decode.port(i) for i in pd.of("decode")], "source": release.sources["proxy"].replace(";", "").split()}


__all__ = ["RoleLaunch", "role_launches", "role_lock", "pd_lock", "lock_view", "KV_PLACEHOLDER"]
