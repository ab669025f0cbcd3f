"""The serve command of a plan: ``vllm serve`` argv (who set each token), env, speculative config.

``Launch`` is derived once per bundle and read by every file that starts the server: the lock
(``launch.argv``), serve.sh, env.sh, bench.sh, build-kernels.sh and the k8s manifests.

A plan on several nodes (``optkit.resolve.layout``) runs the same argv on every node, with this
node's values as serve.sh variables (``NODE_PLACEHOLDERS``), and the worker nodes add
``WORKER_ARGS``; serve.sh takes the node's rank and the leader's address from the environment a
LeaderWorkerSet gives its pods, and binds HCCL, Gloo and TP sockets to this node's network
(``NODE_ENV``).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from optkit.catalog.recipe_records import RecipeRecord
from optkit.resolve.plan import Plan, Workspace

DEFAULT_PORT = "8000"
EXTRA_ARGS = '${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}'
"""The last line of serve.sh's command (written in ``templates/serve.sh.j2``): the arguments given
after ``--``; ``optkit bundle check`` finds the end of the command by it."""
ROLE_ARGS = '${ROLE_ARGS[@]+"${ROLE_ARGS[@]}"}'
"""The line before EXTRA_ARGS in a multi-node serve.sh: ``WORKER_ARGS`` on a worker node, nothing on the leader."""
NODE_PLACEHOLDERS = ("$LEADER_IP", "$NODE_RANK", "$DP_START_RANK", "$RPC_PORT")
"""This node's values in a multi-node argv, set by serve.sh at run time: the leader's IP address, this
node's rank (0 = leader), its first DP rank (rank × DP ranks per node), the leader's RPC port."""
PLACEHOLDERS = ("$MODEL", "$SERVED_NAME", "$PORT", *NODE_PLACEHOLDERS, "$KV_TRANSFER_CONFIG")
"""serve.sh's own parameters as they stand in ``launch.argv``; the script expands them at run time
(``$KV_TRANSFER_CONFIG``: a PD role's instance's, ``optkit.bundle.pd``)."""
WORKER_ARGS = ["--headless"]
"""What the nodes other than the leader add: no API server there, the leader's serves the whole group
(vllm-ascend 0.23.0 Qwen3.5-397B-A17B.md §5.2; 0.30.0rc2 pipeline_parallel.md)."""
DP_WORKER_ARGS = ["--data-parallel-start-rank", "$DP_START_RANK"]
"""What the workers of a ``dp-across-nodes`` plan add besides ``WORKER_ARGS``: their first DP rank. The
leader leaves it out, as the tutorials' node 0 does: vLLM 0.23.0 reads a start rank of 0 as none
(``if self.data_parallel_start_rank``, engine/arg_utils.py:1888), but 0.30.0 tests ``is not None`` (:2262),
so a leader passing 0 infers hybrid load balancing, with one local DP rank switches to external
(:2266-2274), and its handshake then refuses the --headless workers (v1/engine/utils.py:1349-1356)."""
RPC_PORTS = {"dp-across-nodes": "13389", "tp-across-nodes": "29501", "pp-across-nodes": "29501"}
"""serve.sh's default RPC_PORT per layout: the DP RPC port of vllm-ascend's multi-node DP tutorial
(Qwen3.5-397B-A17B.md §5.2), and vLLM's own default master port (ParallelConfig.master_port) for a group spanning
nodes (TP, or a pipeline's stages: the same multiprocessing launch)."""
NODE_ENV = {"HCCL_IF_IP": "LOCAL_IP", "GLOO_SOCKET_IFNAME": "NIC_NAME", "TP_SOCKET_IFNAME": "NIC_NAME",
            "HCCL_SOCKET_IFNAME": "NIC_NAME"}
"""The variables vllm-ascend's multi-node tutorials export on every node (Qwen3.5-397B-A17B.md §5.2:
"bind HCCL, Gloo, and TP communication to the selected network"), and the serve.sh variable each
takes its value from: this node's IP address and the network interface that carries it, found at run
time (or given as LOCAL_IP / NIC_NAME). A value already in the environment is kept."""


def compact_json(data: Any) -> str:
    """JSON for command-line values: one line, sorted keys."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Launch:
    """What serving needs, derived once from a plan: the argv (with who set each part) and env."""

    def __init__(self, plan: Plan, workspace: Workspace):
        self.plan = plan
        self.catalog = workspace.catalog
        self.recipes: list[RecipeRecord] = [workspace.catalog[rid] for rid in plan.selected]
        self.model_default = served_checkpoint(plan)
        self.served_name = plan.model.id
        self.speculative, self.speculative_sources = speculative_config(plan)
        self.argv, self.sources = serve_argv(plan, self.speculative, self.speculative_sources)
        self.env = [{"name": s.key, "value": s.value, "recipe": s.recipe,
                     "external": self._env_var(s.recipe, s.key).external} for s in plan.env]
        self.build_env = [(e, r.id) for r in self.recipes for e in r.env if e.build_time]
        self.kernels = [(kernel, r.id) for r in self.recipes for kernel in r.kernels]
        self.host_checks = host_checks(self.catalog, plan.selected)

    def _env_var(self, rid: str, name: str):
        if rid.startswith("page:"):  # the model's own tutorial page sets it: upstream's tuned command, not envs.py's
            return _PageEnv()
        return next(e for e in self.catalog[rid].env if e.name == name)

    @property
    def devices(self) -> int:
        """NPU devices of one node (all of them on a single-node plan)."""
        return self.plan.layout.node_devices

    @property
    def parameters(self) -> dict[str, str]:
        params = {"MODEL": self.model_default, "SERVED_NAME": self.served_name, "PORT": DEFAULT_PORT}
        if self.plan.layout.nodes > 1:
            params["RPC_PORT"] = RPC_PORTS[self.plan.layout.kind]
        return params

    @property
    def nodes(self) -> dict[str, Any] | None:
        """The lock's ``launch.nodes`` of a multi-node plan (None on one node)."""
        layout = self.plan.layout
        if layout.nodes == 1:
            return None
        return {"count": layout.nodes, "layout": layout.kind, "node_devices": layout.node_devices,
                "dp_local": layout.dp_local, "worker_args": worker_args(layout), "env": dict(NODE_ENV)}


class _PageEnv:
    """An env var carried from the model's tutorial page: outside vllm-ascend's envs.py as the page's HCCL and
    OpenMP settings are (``bundle check`` takes it as external)."""

    external = True


def host_checks(catalog, selected: list[str]) -> list[dict[str, Any]]:
    """What preflight.sh checks on the host: every host setting of a selected recipe (level 'fail': a FAIL when
    it does not hold), then those of the host recipes left out (level 'warn': advice naming the recipe), by id."""
    chosen = set(selected)
    advised = [r for r in catalog if r.kind.value == "host" and r.id not in chosen]
    return [{"name": h.name, "file": h.file, "want": h.want or "", "fix": h.fix, "recipe": r.id,
             "level": "fail" if r.id in chosen else "warn"}
            for r in sorted([catalog[rid] for rid in selected], key=lambda r: r.id) + sorted(advised, key=lambda r: r.id)
            for h in r.host]


def worker_args(layout) -> list[str]:
    """What the nodes other than the leader add to the argv every node runs (``WORKER_ARGS``, and on a
    ``dp-across-nodes`` plan ``DP_WORKER_ARGS``)."""
    return WORKER_ARGS + (DP_WORKER_ARGS if layout.kind == "dp-across-nodes" else [])


def node_options(layout) -> list[str]:
    """The options every node of a multi-node plan passes (``optkit.resolve.layout`` cites the launches)."""
    if layout.kind == "dp-across-nodes":
        return ["--data-parallel-size-local", str(layout.dp_local),
                "--data-parallel-address", "$LEADER_IP", "--data-parallel-rpc-port", "$RPC_PORT"]
    if layout.kind in ("tp-across-nodes", "pp-across-nodes"):
        return ["--distributed-executor-backend", "mp", "--nnodes", str(layout.nodes), "--node-rank", "$NODE_RANK",
                "--master-addr", "$LEADER_IP", "--master-port", "$RPC_PORT"]
    return []


def served_checkpoint(plan: Plan) -> str:
    """What serve.sh loads unless told (``MODEL``): the checkpoint the plan's weights name (``optkit.resolve.quantization``),
    else the profile's Hub id."""
    checkpoint = plan.weights.checkpoint if plan.weights is not None else None
    return checkpoint.id if checkpoint is not None else plan.model.hf_id


def speculative_config(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """The --speculative-config: the plan's (``optkit.resolve.plan``: the method from the request, recipes'
    fragments on top), and who set it."""
    owners = ["request"] if plan.request.speculative_method else []
    return dict(plan.speculative_config), owners + [rid for rid in _sources(plan, "speculative_config")]


def _sources(plan: Plan, prefix: str, eager: bool = False) -> list[str]:
    """Recipes that set anything under ``prefix`` (selected order); with ``eager``, but for graph settings."""
    from optkit.versions.pd_roles import graph_setting

    owners = {r for key, r in plan.config_sources.items()
              if key.startswith(prefix + ".") and not (eager and graph_setting(key))}
    return [rid for rid in plan.selected if rid in owners]


def serve_argv(plan: Plan, speculative: dict, speculative_sources: list[str], *,
               eager: bool = False) -> tuple[list[str], list[str]]:
    """``vllm serve`` argv (``$MODEL``/``$SERVED_NAME``/``$PORT`` stand for serve.sh's parameters)
    and, per token, who put it there (``optkit``, ``request`` or comma-joined recipe ids).

    ``eager``: the argv of a PD prefiller (``optkit.versions.pd_roles``): ``--enforce-eager`` (optkit's,
    unless the request asked for it), without the plan's graph settings (``--compilation-config`` and the
    graph keys of ``--additional-config``)."""
    from optkit.versions.pd_roles import graph_setting

    parts: list[tuple[list[str], str]] = [
        (["vllm", "serve", "$MODEL", "--served-model-name", "$SERVED_NAME", "--port", "$PORT"], "optkit")]
    flags = [(shlex.split(s.key), s.recipe) for s in plan.launch_flags]  # the plan's, in argv order
    parallel = sum(words[0] in ("--tensor-parallel-size", "--data-parallel-size") for words, _ in flags)
    parts += flags[:parallel] + [(node_options(plan.layout), "request")] * (plan.layout.nodes > 1) + flags[parallel:]
    if eager and not plan.facts["runtime.enforce_eager"]:
        parts.append((["--enforce-eager"], "optkit"))
    compilation = {} if eager else plan.compilation_config
    additional = {k: v for k, v in plan.additional_config.items()
                  if not (eager and graph_setting(f"additional_config.{k}"))}
    for flag, value, owners in [
        ("--compilation-config", compilation, _sources(plan, "compilation_config", eager)),
        ("--speculative-config", speculative, speculative_sources),
        ("--additional-config", additional, _sources(plan, "additional_config", eager)),
    ]:
        if value:
            parts.append(([flag, compact_json(value)], ",".join(owners)))
    for setting in plan.serve_args:
        parts.append((shlex.split(setting.key), setting.recipe))
    argv = [token for tokens, _ in parts for token in tokens]
    sources = [owner for tokens, owner in parts for _ in tokens]
    return argv, sources


__all__ = ["Launch", "served_checkpoint", "serve_argv", "node_options", "worker_args", "speculative_config", "compact_json"]
