"""Tutorial conformance: optkit's plan for an upstream tutorial's scenario against the tutorial's own command.

For every release in ``tests/conformance/tutorials.yaml`` and every ``vllm serve`` command of the
model tutorials listed there (read by ``tutorial_commands``), the command is either skipped with a
reason (a target optkit does not plan for, a PD shape optkit does not plan, an accuracy server) or
turned into an optkit request (``request_for``: model and quantization from the checkpoint, TP, DP,
MTP and k, prefix caching, async scheduling, FlashComm1, dtype and eager mode from the command; the
concurrency it is sized for, ``--max-num-seqs`` × DP, the tutorial's own rule; the lengths of the
tutorial's ``vllm bench serve``). optkit's launch for that request (``optkit.bundle.launch.Launch``:
serve argv, env, the JSON configs; for a PD role's command, ``role:``, the role's launch of a ``--pd``
plan with its first instance's ``--kv-transfer-config``) and the tutorial's command are flattened into one entry per flag,
JSON key and env variable, normalized (vLLM defaults, values vLLM treats as the same, an
``additional_config`` key and the env var the release reads for it as one knob, deployment details
that are no tuning), and compared.

Every difference is explained either by a recipe optkit adds (the tutorial leaves the entry unset and
a selected recipe sets it: named from the launch's sources) or by an entry of
``tests/conformance/disagreements.yaml`` that states both values and the tutorial line and says why.
``check`` returns what is unexplained, and the disagreement entries that no longer match a
difference (stale), each with the exact edit that would fix the data.

``python tests/conformance_support.py [--write] [--profiles] [--prune]`` prints (or writes into
docs/models.md) the table of the model profiles and, unless ``--profiles``, the table of differences
(which reads the release trees); ``--prune`` first takes out of disagreements.yaml what no longer
holds (``pruned``), the reconciliation after new recipes land.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as a script: the tests folder and the repo are importable
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

from optkit.versions.tutorial_commands import Command, bench_lengths, commands, option_entries, options  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "conformance"
TUTORIALS = "docs/source/tutorials/models"
DOC = REPO / "docs" / "models.md"
BEGIN, END = "<!-- conformance table: begin -->", "<!-- conformance table: end -->"
PROFILES_BEGIN, PROFILES_END = "<!-- profiles table: begin -->", "<!-- profiles table: end -->"
ABSENT = None
CONFIG_PREFIX = {"--additional-config": "additional_config", "--compilation-config": "compilation_config",
                 "--speculative-config": "speculative_config", "--kv-transfer-config": "kv_transfer_config"}


@dataclass(frozen=True)
class Difference:
    """One compared entry where the tutorial and optkit's plan disagree."""

    release: str
    tutorial: str
    where: str
    key: str
    tutorial_value: Any
    optkit_value: Any
    line: int
    """The tutorial line of the entry (of the command when the tutorial leaves it unset)."""
    source: str
    """Who set optkit's value: a recipe id (comma-joined), ``request``, ``optkit``, or '' when unset."""

    @property
    def recipe_added(self) -> bool:
        return self.tutorial_value is ABSENT and self.source not in ("", "request", "optkit") and not self.page_added

    @property
    def page_added(self) -> bool:
        """The command leaves the entry unset and the model's own page sets it in the tuned command optkit follows
        (the plan's page settings, ``optkit.resolve.settings.carry_page_settings``: source ``page:<file>:<line>``)."""
        return self.tutorial_value is ABSENT and self.source.startswith("page:")


@dataclass
class Compared:
    """One tutorial command held against optkit's plan."""

    release: str
    tutorial: str
    command: Command
    entry: dict
    request: dict
    selected: list[str]
    agree: int
    differences: list[Difference] = field(default_factory=list)


@lru_cache(maxsize=None)
def data() -> dict:
    return yaml.safe_load((DATA / "tutorials.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def disagreements() -> list[dict]:
    return yaml.safe_load((DATA / "disagreements.yaml").read_text(encoding="utf-8")) or []


# --------------------------------------------------------------------------- matching commands to entries


def keep_variables() -> tuple[str, ...]:
    """Shell variables kept as ``$name`` (the per-node values of multi-node commands)."""
    return tuple(sorted({name for entries in data()["tutorials"].values() for e in entries
                         for name in e.get("shell", {})}))


def entries_for(release: str, tutorial: str) -> list[dict]:
    return [e for e in data()["tutorials"][tutorial] if release in e.get("releases", data()["releases"])]


def match_commands(release: str, tutorial: str, found: list[Command]) -> tuple[list[tuple[Command, dict]], list[str]]:
    """Each command with its entry, and the problems: a command no entry names, an entry that names none."""
    entries = {e["where"]: e for e in entries_for(release, tutorial)}
    pairs, problems = [], []
    for command in found:
        entry = entries.pop(command.where, None)
        if entry is None:
            problems.append(f"{release} {tutorial}:{command.line}: command {command.where!r} ({command.model}) is in "
                            "no entry of tests/conformance/tutorials.yaml: add one (a request, or skip: why)")
        else:
            pairs.append((command, entry))
    problems += [f"{release} {tutorial}: tests/conformance/tutorials.yaml names {where!r}, which the tutorial no "
                 "longer has: rename or remove the entry" for where in entries]
    return pairs, problems


# --------------------------------------------------------------------------- the request


def request_for(release: str, tutorial_text: str, command: Command, entry: dict) -> dict:
    """The optkit request for a tutorial command (module docstring: what comes from where)."""
    opts = {k: v for k, (v, _) in command.options.items()}
    checkpoint = data()["checkpoints"][command.model]
    speculative = {k.split(".", 1)[1]: v for k, v in opts.items() if k.startswith("--speculative-config.")}
    dp = int(opts.get("--data-parallel-size", "1"))
    seqs = opts.get("--max-num-seqs")
    input_len, output_len = bench_lengths(tutorial_text)
    request = {
        "model": checkpoint["model"], "target": entry["target"], "vllm_ascend_version": release,
        "tp": int(opts["--tensor-parallel-size"]), "dp": dp,
        "mtp": bool(speculative), "prefix_caching": bool(opts.get("--enable-prefix-caching", False)),
        "async_scheduling": bool(opts.get("--async-scheduling", True)), "enforce_eager": bool(opts.get("--enforce-eager", False)),
        "input_len": input_len or data()["bench_defaults"]["random_input_len"]["value"],
        "output_len": output_len or data()["bench_defaults"]["random_output_len"]["value"],
    }
    if checkpoint.get("quantized"):  # the pages' quantized checkpoints are W8A8 (their names say so)
        request["quantization"] = "w8a8"
    if speculative.get("num_speculative_tokens"):
        request["num_speculative_tokens"] = int(speculative["num_speculative_tokens"])
    # the tutorial's command fixes the layout: FlashComm1 as it sets it, never left for optkit's choice rule
    request["flashcomm1"] = bool(opts.get("--additional-config.enable_flashcomm1")
                                 or command.env.get("VLLM_ASCEND_ENABLE_FLASHCOMM1", ("",))[0] == "1")
    if "--dtype" in opts:
        request["dtype"] = opts["--dtype"]
    if seqs:
        request["concurrency"] = [int(seqs) * dp]
    if entry.get("nodes"):
        request["nodes"] = entry["nodes"]
    request.update(entry.get("request", {}))
    return request


# --------------------------------------------------------------------------- the two sides


def tutorial_side(command: Command, entry: dict) -> dict[str, tuple[Any, int]]:
    """The tutorial command's entries → (value, line), normalized."""
    shell = {f"${name}": f"${value}" for name, value in entry.get("shell", {}).items()}
    side = {k: (_canonical(k, _placeholders(v, shell)), line) for k, (v, line) in command.options.items()}
    side.update({f"env.{k}": (_placeholders(v, shell), line) for k, (v, line) in command.env.items()})
    return _normalized(side)


def optkit_side(plan, launch, entry: dict) -> dict[str, tuple[Any, str]]:
    """optkit's launch as entries → (value, who set it), normalized like the tutorial's."""
    rank = entry.get("node_rank", 0)
    argv, sources = _node_argv(launch, rank)
    side: dict[str, tuple[Any, str]] = {}
    for flag, value, index in options(argv):
        for key, inner in option_entries(flag, value).items():
            side[key] = (_canonical(key, inner), _json_source(plan, launch, key) or sources[index])
    for env in launch.env:
        side[f"env.{env['name']}"] = (env["value"], env["recipe"])
    for name, variable in ((launch.nodes or {}).get("env") or {}).items():
        side[f"env.{name}"] = (f"${variable}", "optkit")
    if getattr(launch, "role", None):  # what a PD role's serve.sh exports: its devices, this node's network
        from optkit.bundle.launch import NODE_ENV

        side["env.ASCEND_RT_VISIBLE_DEVICES"] = (launch.instances_data()[0]["devices"], "optkit")
        side.update({f"env.{name}": (f"${variable}", "optkit") for name, variable in NODE_ENV.items()})
    return _normalized(side)


def _node_argv(launch, rank: int) -> tuple[list[str], list[str]]:
    """The argv one node runs: serve.sh's node placeholders filled in, the worker's arguments added."""
    from optkit.bundle.launch import worker_args

    layout = launch.plan.layout
    values = {"$NODE_RANK": str(rank), "$DP_START_RANK": str(rank * (layout.dp_local or 1)),
              "$RPC_PORT": launch.parameters.get("RPC_PORT", ""), "$LEADER_IP": "$LOCAL_IP" if rank == 0 else "$LEADER_IP"}
    role = getattr(launch, "role", None)
    if role:  # a PD role: its first instance's --kv-transfer-config in place of serve.sh's variable
        from optkit.bundle.pd import KV_PLACEHOLDER

        values[KV_PLACEHOLDER] = launch.instances_data()[0]["kv_transfer_config"]
    added = worker_args(layout) if rank > 0 else []
    argv = [values.get(token, token) for token in launch.argv + added]
    return argv, list(launch.sources) + ["optkit"] * len(added)


def _json_source(plan, launch, key: str) -> str:
    flag, _, path = key.partition(".")
    prefix = CONFIG_PREFIX.get(flag)
    if not prefix or not path:
        return ""
    owner = launch.plan.config_sources.get(f"{prefix}.{path}")  # a PD role's own plan (its page command's keys)
    if owner:
        return owner
    return "request" if prefix == "speculative_config" and "request" in launch.speculative_sources else ""


def _placeholders(value: Any, shell: dict[str, str]) -> Any:
    if not isinstance(value, str):
        return value
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", lambda m: shell.get(m.group(0).replace("{", "").replace("}", ""),
                                                                        m.group(0)), value)


def _canonical(key: str, value: Any) -> Any:
    """A value in the form both sides are compared in: numbers as numbers, vLLM's aliases resolved."""
    aliases = data()["equivalent_values"].get(key, {})
    if isinstance(value, str) and value in aliases.get("values", {}):
        value = aliases["values"][value]
    if isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value):
        number = float(value)
        return str(int(number)) if number.is_integer() and "." not in value else repr(number)
    return value


def _normalized(side: dict) -> dict:
    """A side without the entries that describe the deployment, not its tuning (``ignored:``)."""
    ignored = data()["ignored"]
    return {k: v for k, v in side.items() if k not in ignored}


def _one_knob(side: dict, env_of: dict[str, str]) -> dict:
    """An ``additional_config`` key the release also reads from an env var (its knob registry,
    ``versions/<release>.yaml`` knobs.additional_config.env) compared as one knob under the key, with
    switch values read as numbers (vllm-ascend takes ``1``, ``true`` and ``"1"`` alike there)."""
    key_of = {f"env.{env}": f"--additional-config.{key}" for key, env in env_of.items()}
    out = {}
    for key, (value, where) in side.items():
        if key in key_of or key.removeprefix("--additional-config.") in env_of:
            key = key_of.get(key, key)
            value = {"true": 1, "false": 0, True: 1, False: 0}.get(value, value) if isinstance(value, (str, bool)) else value
            value = int(value) if isinstance(value, str) and value.isdigit() else value
        out[key] = (value, where)
    return out


def compare(release: str, tutorial: str, command: Command, entry: dict, plan, launch) -> tuple[int, list[Difference]]:
    """How many entries agree, and the differences, in key order."""
    from optkit.versions.releases import load_release

    env_of = dict(load_release(release).knobs.additional_config.env)
    theirs = _one_knob(tutorial_side(command, entry), env_of)
    ours = _one_knob(optkit_side(plan, launch, entry), env_of)
    defaults = {k: _canonical(k, _default(d, str(plan.facts["versions.vllm"]), plan.request.quantized))
                for k, d in data()["defaults"].items()}
    agree, found = 0, []
    for key in sorted(set(theirs) | set(ours)):
        their_value, line = theirs.get(key, (defaults.get(key, ABSENT), command.line))
        our_value, source = ours.get(key, (defaults.get(key, ABSENT), ""))
        if _same(their_value, our_value):
            agree += 1
            continue
        found.append(Difference(release, tutorial, command.where, key, their_value, our_value, line, source))
    return agree, found


def _default(entry: dict, vllm: str, quantized: bool) -> Any:
    """A ``defaults:`` value: one for every vLLM, or the one of the paired vLLM's range (``by_vllm``, none outside
    every range: a default not proved there); none for unquantized weights where it holds for quantized ones only
    (``quantized_only``)."""
    if entry.get("quantized_only") and not quantized:
        return ABSENT
    if "value" in entry:
        return entry["value"]
    from packaging.specifiers import SpecifierSet

    return next((d["value"] for d in entry["by_vllm"] if SpecifierSet(d["versions"]).contains(vllm)), ABSENT)


def _same(a: Any, b: Any) -> bool:
    """Equal as compared: a number and its digits are one value (a dotted flag writes ``1`` where the JSON form
    has 1; vLLM json-loads a dotted flag's value, vllm/utils/argparse_utils.py:424 in vLLM 0.30.0)."""
    return json.dumps(_number(a), sort_keys=True) == json.dumps(_number(b), sort_keys=True)


def _number(value: Any) -> Any:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


# --------------------------------------------------------------------------- running it all


def run_release(release: str, tree: Path, workspace) -> tuple[list[Compared], list[str]]:
    """Every tutorial command of one release compared (or skipped), and the data problems found on the way."""
    from optkit.bundle.launch import Launch
    from optkit.bundle.pd import RoleLaunch
    from optkit.resolve.plan import plan
    from optkit.resolve.request import Request

    results, problems = [], []
    for tutorial in data()["tutorials"]:
        path = tree / TUTORIALS / tutorial
        if not path.is_file():
            if entries_for(release, tutorial):
                problems.append(f"{release}: {TUTORIALS}/{tutorial} is not in the tree; restrict its entries' releases")
            continue
        text = path.read_text(encoding="utf-8")
        pairs, found = match_commands(release, tutorial, commands(text, keep_variables()))
        problems += found
        for command, entry in pairs:
            if "skip" in entry:
                continue
            if command.problems:
                problems += [f"{release} {tutorial} [{command.where}]: {p}" for p in command.problems]
                continue
            if command.model not in data()["checkpoints"]:
                problems.append(f"{release} {tutorial}:{command.line} [{command.where}]: model path {command.model!r} "
                                "is not in tests/conformance/tutorials.yaml checkpoints: name its profile there")
                continue
            request = request_for(release, text, command, entry)
            result = plan(Request(**request), workspace)
            launch = RoleLaunch(result, workspace, entry["role"]) if entry.get("role") else Launch(result, workspace)
            agree, differences = compare(release, tutorial, command, entry, result, launch)
            results.append(Compared(release, tutorial, command, entry, request, list(result.selected), agree,
                                    differences))
    return results, problems


def check(differences: list[Difference], releases: list[str]) -> list[str]:
    """The unexplained differences and the stale disagreement entries, each with the fix."""
    problems = []
    by_key = {(d.tutorial, d.where, d.key, d.release): d for d in differences}
    claimed = set()
    for n, entry in enumerate(disagreements()):
        for release, line in sorted(entry["lines"].items()):
            if release not in releases:
                continue
            key = (entry["tutorial"], entry["where"], entry["key"], release)
            claimed.add(key)
            problems += _stale(n, entry, release, line, by_key.get(key))
    for key, d in sorted(by_key.items()):
        if key not in claimed and not d.recipe_added and not d.page_added:
            problems.append(f"unexplained: {d.release} {d.tutorial}:{d.line} [{d.where}] {d.key}: tutorial "
                            f"{_shown(d.tutorial_value)}, optkit {_shown(d.optkit_value)} (set by {d.source or 'nobody'}); "
                            f"add to tests/conformance/disagreements.yaml:\n{skeleton(d)}")
    return problems


def _stale(n: int, entry: dict, release: str, line: int, found: Difference | None) -> list[str]:
    where = f"tests/conformance/disagreements.yaml entry {n} ({entry['tutorial']} [{entry['where']}] {entry['key']}, {release})"
    if found is None:
        return [f"stale: {where}: optkit and the tutorial agree now; remove the entry (or its release {release})"]
    out = []
    if not _same(found.tutorial_value, entry["tutorial_value"]) or not _same(found.optkit_value, entry["optkit_value"]):
        out.append(f"stale: {where}: now tutorial {_shown(found.tutorial_value)} and optkit {_shown(found.optkit_value)} "
                   f"(set by {found.source or 'nobody'}), the entry says tutorial {_shown(entry['tutorial_value'])} and "
                   f"optkit {_shown(entry['optkit_value'])}: update it or remove it")
    if found.line != line:
        out.append(f"stale: {where}: the tutorial has it at line {found.line}, the entry says {line}")
    if found.recipe_added or found.page_added:
        who = f"recipe {found.source}" if found.recipe_added else f"the page's tuned command ({found.source})"
        out.append(f"stale: {where}: {who} sets it and the tutorial leaves it unset, which explains itself: remove "
                   "the entry")
    return out


def pruned(differences: list[Difference], releases: list[str]) -> list[dict]:
    """The disagreement entries with what no longer holds taken out: a release whose difference is gone
    (or now explained by a recipe) leaves the entry's ``lines``, a moved tutorial line is updated, an
    entry without releases left is dropped. Changed values are left for a person (the ``why`` may no
    longer hold): ``check`` reports them."""
    by_key = {(d.tutorial, d.where, d.key, d.release): d for d in differences}
    kept = []
    for entry in disagreements():
        lines = {}
        for release, line in entry["lines"].items():
            found = by_key.get((entry["tutorial"], entry["where"], entry["key"], release))
            if release not in releases:
                lines[release] = line
            elif found is not None and not found.recipe_added and not found.page_added:
                lines[release] = found.line
        if lines:
            kept.append({**entry, "lines": lines})
    return kept


def write_disagreements(entries: list[dict]) -> None:
    """tests/conformance/disagreements.yaml with ``entries``, its header comment kept."""
    path = DATA / "disagreements.yaml"
    header = "".join(line for line in path.read_text(encoding="utf-8").splitlines(True) if line.startswith("#"))
    path.write_text(header + yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")


def _shown(value: Any) -> str:
    return "unset" if value is ABSENT else json.dumps(value)


def skeleton(d: Difference) -> str:
    return yaml.safe_dump([{"tutorial": d.tutorial, "where": d.where, "key": d.key, "tutorial_value": d.tutorial_value,
                            "optkit_value": d.optkit_value, "lines": {d.release: d.line}, "why": "…"}],
                          sort_keys=False, allow_unicode=True, width=120)


# --------------------------------------------------------------------------- the doc table


def _entry_for(d: Difference) -> dict | None:
    for entry in disagreements():
        if (entry["tutorial"], entry["where"], entry["key"]) == (d.tutorial, d.where, d.key) and d.release in entry["lines"]:
            return entry
    return None


def table(results: list[Compared]) -> str:
    """The markdown of docs/models.md's conformance section: the commands compared, every difference
    (grouped over the releases where it holds) with what explains it, and the reasons, numbered."""
    reasons: list[str] = []
    rows = [*_commands_rows(results), "", *_difference_rows(results, reasons), ""]
    rows += [f"- **R{n}.** {text}" for n, text in enumerate(reasons, 1)]
    return "\n".join(rows) + "\n"


def _commands_rows(results: list[Compared]) -> list[str]:
    rows = ["| release | tutorial command | optkit request (besides model, target, TP, DP) | recipes selected | "
            "entries agreeing | differences |", "| --- | --- | --- | --- | --- | --- |"]
    shown = ("concurrency", "mtp", "num_speculative_tokens", "prefix_caching", "quantization", "flashcomm1", "nodes",
             "pd", "input_len", "output_len")
    for r in results:
        asked = ", ".join(f"{k} {json.dumps(r.request[k])}" for k in shown if k in r.request)
        what = f"{r.request['model']} on {r.request['target']}, TP{r.request['tp']} DP{r.request['dp']}" + \
            (f", its {r.entry['role']} role" if r.entry.get("role") else "")
        rows.append(f"| {r.release} | {r.tutorial}:{r.command.line} {r.command.where} — {r.entry['scenario']} "
                    f"({what}) | {asked} | {len(r.selected)} | {r.agree} | {len(r.differences)} |")
    return rows


def _difference_rows(results: list[Compared], reasons: list[str]) -> list[str]:
    """One row per difference and explanation, its releases as runs; each disagreement's ``why`` is
    added to ``reasons`` once and cited by number."""
    grouped: dict[tuple, list[tuple[str, int]]] = {}
    for d in (d for r in results for d in r.differences):
        row = (f"{d.tutorial} {d.where}", d.key, _shown(d.tutorial_value), _shown(d.optkit_value),
               _explained(d, reasons))
        grouped.setdefault(row, []).append((d.release, d.line))
    rows = ["| tutorial command | entry | tutorial | optkit | release:line | explained by |",
            "| --- | --- | --- | --- | --- | --- |"]
    for (where, key, theirs, ours, why), releases in grouped.items():
        rows.append(f"| {where} | `{key}` | `{theirs}` | `{ours}` | {_runs(releases)} | {why} |")
    return rows


def _explained(d: Difference, reasons: list[str]) -> str:
    if d.recipe_added:
        return f"recipe `{d.source}`"
    if d.page_added:
        return f"the page's tuned command (`{d.source}`)"
    entry = _entry_for(d)
    if entry is None:
        return "**unexplained**"
    text = entry["why"].strip()
    if text not in reasons:
        reasons.append(text)
    return f"[R{reasons.index(text) + 1}]" + (f" pending: {entry['pending']}" if entry.get("pending") else "")


def _runs(found: list[tuple[str, int]]) -> str:
    """(release, line) pairs as runs of neighbouring releases (``releases:`` order) on the same line:
    ``0.28.0rc1…0.30.0rc2:200``."""
    order = data()["releases"]
    runs: list[list] = []
    for release, line in sorted(found, key=lambda f: order.index(f[0])):
        last = runs[-1] if runs else None
        if last and last[2] == line and order.index(last[1]) + 1 == order.index(release):
            last[1] = release
        else:
            runs.append([release, release, line])
    return ", ".join(f"{a}:{line}" if a == b else f"{a}…{b}:{line}" for a, b, line in runs)


def all_results() -> list[Compared]:
    from compat_support import pristine
    from optkit.resolve.plan import load_workspace

    workspace = load_workspace()
    results = []
    for release in data()["releases"]:
        found, problems = run_release(release, pristine(release), workspace)
        if problems:
            raise SystemExit("\n".join(problems))
        results += found
    return results


def profiles_table() -> str:
    """docs/models.md's table of the model profiles and, per profile, where its values came from."""
    from optkit.resolve.profile_catalog import load_models

    rows = ["| profile | aliases | checkpoint | model_type | layers (GDN + full) | hidden | attention heads (KV) | "
            "MoE experts (top-k, shared) | MTP layers | vision |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes = []
    for model in sorted(load_models(REPO / "models").values(), key=lambda m: m.id):
        moe = f"{model.num_experts} ({model.experts_per_token}, {'yes' if model.shared_experts else 'no'})" \
            if model.is_moe else "dense"
        rows.append(f"| `{model.id}` | {', '.join(model.aliases)} | {model.hf_id} | {model.hf_model_type} | "
                    f"{model.num_layers} ({model.gdn_layers} + {model.full_attention_layers}) | {model.hidden_size} | "
                    f"{model.num_attention_heads} ({model.num_kv_heads}) | {moe} | {model.mtp_layers} | "
                    f"{'yes' if model.is_vl else 'no'} |")
        notes += ["", f"`{model.id}` (models/{model.id}.yaml):", ""] + [f"- {source}" for source in model.sources]
    return "\n".join(rows + notes) + "\n"


def doc_section(text: str, begin: str = BEGIN, end: str = END) -> str:
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[start:stop].strip("\n") + "\n"


def _replace(text: str, begin: str, end: str, rendered: str) -> str:
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + rendered + text[stop:]


def main(argv: list[str]) -> int:
    profiles = profiles_table()
    results = [] if "--profiles" in argv else all_results()
    if "--prune" in argv:
        write_disagreements(pruned([d for r in results for d in r.differences], data()["releases"]))
        disagreements.cache_clear()
    conformance = table(results) if results else ""
    if "--write" in argv:
        text = _replace(DOC.read_text(encoding="utf-8"), PROFILES_BEGIN, PROFILES_END, profiles)
        if conformance:
            text = _replace(text, BEGIN, END, conformance)
        DOC.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(profiles + "\n" + conformance)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
