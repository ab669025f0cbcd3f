"""A plan's launch settings: each selected recipe's env, config fragments, serve arguments and derived values
merged into the plan as its release reads them (a clash is an error naming both recipes), and the serve flags
the request itself sets. ``optkit.resolve.plan`` calls ``collect`` once per selected recipe."""

from __future__ import annotations

import re
import shlex
from typing import Any

from optkit.errors import OptkitError, RequestError
from optkit.resolve.facts import Facts
from optkit.resolve.context_length import scaled_overrides
from optkit.resolve.request_record import RequestRecord
from optkit.value import replace, valueclass

_TEMPLATE = re.compile(r"^\$\{([a-z_.]+)\}$")


@valueclass
class Setting:
    """One launch setting and the recipe that set it."""

    key: str
    value: Any
    recipe: str


@valueclass
class Derivation:
    """A launch value a recipe computed from the request (``optkit.catalog.derive``), and why."""

    target: str  # 'serve:--max-num-seqs', 'compilation_config:cudagraph_capture_sizes'
    value: Any
    recipe: str
    how: str  # the evaluation in words, facts and their values included
    why: str  # the rule
    basis: str  # 'rule' (unquantified), 'set' (by the request: --set) or 'measured' (--from-tune)


class ConflictingSettings(OptkitError):
    """Two selected recipes set the same launch setting to different values."""


def substitute(value: Any, facts: Facts, owner: str = "") -> Any:
    """Replace values of the exact form ``${fact.name}`` by the fact's value (recursively); ``owner``, the recipe
    whose value it is, names it when the fact does not exist."""
    if isinstance(value, str):
        match = _TEMPLATE.match(value)
        if match:
            if match.group(1) not in facts.values:  # a user catalog's template (`optkit lint` names it too)
                from optkit.catalog.factspec import unknown_fact_hint

                hint = unknown_fact_hint(match.group(1))
                raise RequestError(f"{owner}: {value}: no fact of that name" + (f"; {hint}" if hint else "")
                                   + "; `optkit facts --list` lists them")
            fact = facts[match.group(1)]
            return str(fact) if type(fact).__name__ == "Version" else fact
        return value
    if isinstance(value, dict):
        return {k: substitute(v, facts, owner) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, facts, owner) for v in value]
    return value


def merge_into(target: dict, fragment: dict, recipe: str, sources: dict[str, str], prefix: str) -> None:
    """Deep-merge ``fragment`` into ``target``; a different value for a set key is an error."""
    for key, value in fragment.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_into(target[key], value, recipe, sources, path)
        elif key in target and target[key] != value:
            raise ConflictingSettings(f"{path}: {sources[path]} sets {target[key]!r} but {recipe} sets {value!r}")
        else:
            target[key] = value
            _record(value, recipe, sources, path)


def _record(value: Any, recipe: str, sources: dict[str, str], path: str) -> None:
    sources[path] = recipe
    if isinstance(value, dict):
        for key, inner in value.items():
            _record(inner, recipe, sources, f"{path}.{key}")


def launch_flags(request: RequestRecord, facts: Facts) -> list[Setting]:
    """The serve flags the request sets (its facts' values; quantized weights: ``optkit.resolve.quantization``), in the
    order the argv carries them; the nodes' own flags of a multi-node layout follow TP and DP there
    (``optkit.bundle.launch.node_options``). Last, the model's own: ``--trust-remote-code`` where the checkpoint
    names its own config class (``model.remote_code``: ``ModelProfile.config_code``), whose source is ``model``."""
    words = [f"--tensor-parallel-size {facts['parallel.tp']}"]
    words += [f"--data-parallel-size {facts['parallel.dp']}"] * (facts["parallel.dp"] > 1)
    words += [f"--prefill-context-parallel-size {facts['parallel.pcp']}"] * (facts["parallel.pcp"] > 1)
    words += [f"--pipeline-parallel-size {facts['parallel.pp']}"] * (facts["parallel.pp"] > 1)
    words += [f"--dtype {facts['runtime.dtype']}"] + [f"--quantization {facts['runtime.quantization_method']}"] * facts["runtime.quantized"]
    words += ["--enable-expert-parallel"] * facts["parallel.ep"]
    words += ["--no-async-scheduling"] * (not facts["workload.async_scheduling"])
    words += ["--enable-prefix-caching" if facts["workload.prefix_caching"] else "--no-enable-prefix-caching"]
    words += ["--enforce-eager"] * facts["runtime.enforce_eager"]
    words += [f"--max-model-len {request.max_model_len}"] * (request.max_model_len is not None)
    return [Setting(word, None, "request") for word in words] + [
        Setting("--trust-remote-code", None, "model")] * bool(facts["model.remote_code"])


def collect(result, recipe, facts: Facts, verdict) -> None:
    """Merge the recipe's settings into the plan, each knob as the release reads it (``verdict``)."""
    sources = result.config_sources
    emitted = {k.knob: k for k in verdict.knobs}
    additional = substitute(recipe.additional_config, facts, recipe.id)
    for env in recipe.env:
        if env.build_time:
            continue
        value = str(substitute(env.value, facts, recipe.id))
        knob = emitted.get(f"env:{env.name}")
        if knob is not None and not knob.emitted.startswith("env:"):
            _set_path(additional, knob.emitted.split(":", 1)[1], _convert(value, knob.convert))
            continue
        name = knob.emitted.split(":", 1)[1] if knob is not None else env.name
        clash = next((s for s in result.env if s.key == name and s.value != value), None)
        if clash:
            raise ConflictingSettings(f"env {name}: {clash.recipe} sets {clash.value!r} but {recipe.id} sets {value!r}")
        result.env.append(Setting(name, value, recipe.id))
    for knob in verdict.knobs:
        if knob.knob.startswith("additional_config:") and knob.emitted != knob.knob:
            old = knob.knob.split(":", 1)[1]
            _set_path(additional, knob.emitted.split(":", 1)[1], _pop_path(additional, old))
    merge_into(result.additional_config, additional, recipe.id, sources, "additional_config")
    merge_into(result.compilation_config, substitute(recipe.compilation_config, facts, recipe.id), recipe.id, sources, "compilation_config")
    merge_into(result.speculative_config, substitute(recipe.speculative_config, facts, recipe.id), recipe.id, sources, "speculative_config")
    result.serve_args.extend(Setting(arg, None, recipe.id) for arg in recipe.serve_args)
    for entry in recipe.derived:
        _derive(result, recipe.id, entry, facts)
        if result.page_advice is not None and (cited := result.page_advice.cite(result.derivations[-1].how)):
            result.derivations[-1] = replace(result.derivations[-1], how=f"{result.derivations[-1].how} ({cited})")


def carry_page_settings(result) -> None:
    """Add the settings of the model's own page's tuned command (``PageAdvice.settings``) that no recipe and no
    request flag set: the page's command is the baseline for its model, tab and release, and optkit's recipes
    stand above it (a recipe's value wins; the difference shows in the conformance table). Each is labelled
    ``page:<file>:<line>``. The advice is already the plan's layout's (``plan._assemble``: ``for_layout``; a role's:
    ``for_role``)."""
    advice = result.page_advice
    if advice is None:
        return
    env_of = dict(result.release.data.knobs.additional_config.env)  # one knob: a key and the env var read for it
    for setting in advice.settings:
        kind, _, key = setting.key.partition(":")
        label = f"page:{setting.source.page.rsplit('/', 1)[-1]}:{setting.source.line}"
        if kind == "layout":
            continue  # the command's layout (its expert parallelism): a fact the request's defaults read, not a flag
        if _set_as_alias(result, kind, key, env_of):
            continue  # a recipe sets this knob under its other name: the recipe's value wins, once
        if kind == "env":
            if not any(s.key == key for s in result.env):
                result.env.append(Setting(key, str(setting.value), label))
        elif kind == "serve":
            taken = {s.key.split()[0] for s in [*result.serve_args, *result.launch_flags]}
            if key == "--max-num-seqs" and _too_few_slots(setting.value, result):
                continue  # the page's command holds fewer sequences than the request's load: vLLM's default holds it
            if key not in taken and f"--no-{key[2:]}" not in taken:
                value, owner = setting.value, label
                if key == "--hf-overrides" and (scaled := scaled_overrides(str(value), result.facts["versions.vllm"])):
                    value, owner = scaled, f"{label},optkit"  # its YaRN length, as the page's vLLM read it
                result.serve_args.append(Setting(_flag(key, value), None, owner))
        elif kind == "pd":
            if _writes_page_connector(result, advice):
                part: dict = {}
                _set_path(part, key, setting.value)
                merge_into(result.kv_transfer, part, label, result.config_sources, "kv_transfer_config")
        elif kind == "speculative_config" and not result.speculative_config:
            continue  # the plan does not speculate: the page's drafter settings have nothing to apply to
        elif kind == "additional_config" and (unread := _unread(result, key)):
            result.page_unread.append(f"--additional-config {key} ({label}): {unread}")
        elif f"{kind}.{key}" not in result.config_sources and not _has_path(getattr(result, kind), key):
            fragment: dict = {}
            _set_path(fragment, key, setting.value)
            merge_into(getattr(result, kind), fragment, label, result.config_sources, kind)


def _set_as_alias(result, kind: str, key: str, env_of: dict[str, str]) -> bool:
    """Whether the plan already sets the page's setting under the knob's other name: an ``additional_config`` key
    the release also reads from an env var (its knob registry, ``knobs.additional_config.env``), or that env var,
    where a recipe sets the other (0.23.0 reads ``enable_fused_mc2`` and ``VLLM_ASCEND_ENABLE_FUSED_MC2`` as one
    switch: ascend_config.py:173-178)."""
    if kind == "additional_config" and key in env_of:
        return any(s.key == env_of[key] for s in result.env)
    if kind == "env":
        keys = [k for k, env in env_of.items() if env == key]
        return any(f"additional_config.{k}" in result.config_sources for k in keys)
    return False


def _flag(key: str, value) -> str:
    """A serve flag as the page writes it: bare when true, ``--no-…`` when false, else with its value. A dotted flag's
    field keeps its underscores (``--attention-config.indexer_kv_dtype``): vLLM passes the part after the dot to the
    config class as written (vllm/utils/argparse_utils.py:422-436 in vLLM 0.30.0); the tutorial data keeps a dotted
    flag's fields as the page writes them (``tutorial_commands.options``), and a field written with dashes is
    written back with underscores, as the config class names it."""
    head, dot, field = key.partition(".")
    key = head + dot + field.replace("-", "_")
    if value is True:
        return key
    if value is False:
        return f"--no-{key[2:]}"
    return f"{key} {shlex.quote(str(value))}"


def _writes_page_connector(result, advice) -> bool:
    """Whether a PD plan carries its page command's ``--kv-transfer-config`` keys (kind ``pd:``,
    ``page_values._pd_key``): where the command names no connector or one optkit writes as the page does
    (``optkit.versions.pd.PAGE_CONNECTORS``); a connector optkit does not write takes its settings with it."""
    from optkit.versions.pd import PAGE_CONNECTORS

    connector = next((s.value for s in advice.settings if s.key == "pd:kv_connector"), None)
    return result.pd is not None and (connector is None or connector in PAGE_CONNECTORS)


def _unread(result, dotted: str) -> str:
    """Why the plan's release does not take the page's ``additional_config`` key ``dotted`` ('' it reads it): a key
    the release does not read there stops a strict release at start-up and changes nothing on a lenient one, so a
    page that still writes it (a key moved or renamed since) is not followed there."""
    from optkit.versions.knobs import unread_at

    found = unread_at(result.release.data.knobs.additional_config, dotted)
    if found is None:
        return ""
    depth, section = found
    where = "at the top" if depth == 0 else f"under {'.'.join(dotted.split('.')[:depth])}"
    effect = ("and rejects unknown keys there: the page's command would stop at start-up"
              if section.unknown_keys == "rejected" else "and ignores unknown keys there: it would change nothing")
    return f"{result.release.label} does not read it {where}, {effect}; not carried"


def _too_few_slots(value, result) -> bool:
    """Whether ``value`` sequences per DP group hold fewer than the request's highest concurrency."""
    try:
        return int(str(value)) * result.request.dp < result.facts["workload.concurrency_max"]
    except ValueError:
        return True


def _has_path(fragment: dict, dotted: str) -> bool:
    for key in dotted.split("."):
        if not isinstance(fragment, dict) or key not in fragment:
            return False
        fragment = fragment[key]
    return True


def _derive(result, rid: str, entry, facts: Facts) -> None:
    """Set one derived launch value (``optkit.catalog.derive``) and record how it was computed."""
    from optkit.catalog.derive import DerivedValueError, evaluate

    from optkit.resolve.overrides import by_target, source_label

    chosen = by_target(result.request.set_values).get(entry.set)
    expression = entry.value if chosen is None else chosen[0].apply(entry.value, chosen[1])
    try:
        value, how = evaluate(expression, facts.values)
    except DerivedValueError as exc:
        raise DerivedValueError(f"{rid}: {entry.set}: {exc}") from None
    basis = entry.basis
    if chosen is not None:  # the request's value over the rule (optkit.resolve.overrides), labelled with its source
        source = result.request.set_source
        how = f"{chosen[0].name}={chosen[1]}, {source_label(source)}" + ("" if how == str(value) else f": {how}")
        basis = "measured" if source else "set"
    kind, _, key = entry.set.partition(":")
    if kind == "serve":
        clash = next((s for s in result.serve_args if s.key.split()[0] == key), None)
        if clash:
            raise ConflictingSettings(f"serve argument {key}: {clash.recipe} sets it and {rid} derives {value}")
        result.serve_args.append(Setting(f"{key} {value}", None, rid))
    else:
        fragment: dict = {}
        _set_path(fragment, key, value)
        merge_into(getattr(result, kind), fragment, rid, result.config_sources, kind)
    result.derivations.append(Derivation(entry.set, value, rid, how, " ".join(entry.why.split()), basis))


def _convert(value: str, how: str) -> Any:
    """An env var's string as the config key that replaced it takes it."""
    if how == "int":
        return int(value)
    if how == "bool":
        return value.strip().lower() in ("1", "true", "yes")
    return value


def _set_path(fragment: dict, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        fragment = fragment.setdefault(key, {})
    fragment[last] = value


def _pop_path(fragment: dict, dotted: str) -> Any:
    *parents, last = dotted.split(".")
    chain = [fragment]
    for key in parents:
        chain.append(chain[-1][key])
    value = chain[-1].pop(last)
    for key, parent in zip(reversed(parents), reversed(chain[:-1])):
        if not parent[key]:
            del parent[key]
    return value
