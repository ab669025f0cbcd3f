"""The serve command of a plan: ``vllm serve`` argv (who set each token), env, speculative config.

``Launch`` is derived once per bundle and read by every file that starts the server: the lock
(``launch.argv``), serve.sh, env.sh, bench.sh, build-kernels.sh and the k8s Deployment.
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
PLACEHOLDERS = ("$MODEL", "$SERVED_NAME", "$PORT")
"""serve.sh's own parameters as they stand in ``launch.argv``; the script expands them at run time."""


def compact_json(data: Any) -> str:
    """JSON for command-line values: one line, sorted keys."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Launch:
    """What serving needs, derived once from a plan: the argv (with who set each part) and env."""

    def __init__(self, plan: Plan, workspace: Workspace):
        self.plan = plan
        self.catalog = workspace.catalog
        self.recipes: list[RecipeRecord] = [workspace.catalog[rid] for rid in plan.selected]
        self.model_default = plan.model.hf_id
        self.served_name = plan.model.id
        self.speculative, self.speculative_sources = speculative_config(plan)
        self.argv, self.sources = serve_argv(plan, self.speculative, self.speculative_sources)
        self.env = [{"name": s.key, "value": s.value, "recipe": s.recipe,
                     "external": self._env_var(s.recipe, s.key).external} for s in plan.env]
        self.build_env = [(e, r.id) for r in self.recipes for e in r.env if e.build_time]
        self.kernels = [(kernel, r.id) for r in self.recipes for kernel in r.kernels]

    def _env_var(self, rid: str, name: str):
        return next(e for e in self.catalog[rid].env if e.name == name)

    @property
    def devices(self) -> int:
        return self.plan.request.tp * self.plan.request.dp

    @property
    def parameters(self) -> dict[str, str]:
        return {"MODEL": self.model_default, "SERVED_NAME": self.served_name, "PORT": DEFAULT_PORT}


def speculative_config(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """The --speculative-config: MTP from the request (k tokens), then recipes' fragments on top."""
    config: dict[str, Any] = {}
    sources: list[str] = []
    if plan.request.mtp:
        config = {"method": "mtp", "num_speculative_tokens": plan.request.k}
        sources.append("request")
    if plan.speculative_config:
        config.update(plan.speculative_config)
        sources.extend(_sources(plan, "speculative_config"))
    return config, sources


def _sources(plan: Plan, prefix: str) -> list[str]:
    """Recipes that set anything under ``prefix`` (selected order)."""
    owners = {r for key, r in plan.config_sources.items() if key.startswith(prefix + ".")}
    return [rid for rid in plan.selected if rid in owners]


def serve_argv(plan: Plan, speculative: dict, speculative_sources: list[str]) -> tuple[list[str], list[str]]:
    """``vllm serve`` argv (``$MODEL``/``$SERVED_NAME``/``$PORT`` stand for serve.sh's parameters)
    and, per token, who put it there (``optkit``, ``request`` or comma-joined recipe ids)."""
    request, facts = plan.request, plan.facts
    parts: list[tuple[list[str], str]] = [
        (["vllm", "serve", "$MODEL", "--served-model-name", "$SERVED_NAME", "--port", "$PORT"], "optkit"),
        (["--tensor-parallel-size", str(request.tp)], "request"),
    ]
    if request.dp > 1:
        parts.append((["--data-parallel-size", str(request.dp)], "request"))
    parts.append((["--dtype", request.dtype], "request"))
    if facts["parallel.ep"]:
        parts.append((["--enable-expert-parallel"], "request"))
    if not request.async_scheduling:
        parts.append((["--no-async-scheduling"], "request"))
    parts.append((["--enable-prefix-caching" if request.prefix_caching else "--no-enable-prefix-caching"], "request"))
    if request.enforce_eager:
        parts.append((["--enforce-eager"], "request"))
    for flag, value, owners in [
        ("--compilation-config", plan.compilation_config, _sources(plan, "compilation_config")),
        ("--speculative-config", speculative, speculative_sources),
        ("--additional-config", plan.additional_config, _sources(plan, "additional_config")),
    ]:
        if value:
            parts.append(([flag, compact_json(value)], ",".join(owners)))
    for setting in plan.serve_args:
        parts.append((shlex.split(setting.key), setting.recipe))
    argv = [token for tokens, _ in parts for token in tokens]
    sources = [owner for tokens, owner in parts for _ in tokens]
    return argv, sources


__all__ = ["Launch", "serve_argv", "speculative_config", "compact_json"]
