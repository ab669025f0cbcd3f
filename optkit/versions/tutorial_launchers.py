"""``python launch_online_dp.py`` runs and the ``run_dp_template.sh`` scripts they start.

vllm-ascend's ``examples/external_online_dp/launch_online_dp.py`` starts ``run_dp_template.sh`` once per local DP
rank, passing ``$1``…``$7``; a page writes one template per role and node (or one per tab) and then the runs. Each
run is read as the command it starts on its first local rank, its template's flags filled in; which template a run
starts is decided here (``paired_runs``, ``template``)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from optkit.versions.tutorial_commands import SEPARATOR, Block, Command, TextLine, command_tokens, options
from optkit.versions.tutorial_context import as_int, command_data, comment_above, context, pd_role
from optkit.versions.tutorial_shell import ASSIGN, expand, shell_word

LAUNCHER = re.compile(r"^python3?\s+(\S*/)?launch_online_dp\.py\b")


SCRIPT_RUN = re.compile(r"^(?:(?:ba)?sh\s+|\./)(\S*/)?run_dp_template\.sh\s*$")
"""``bash run_dp_template.sh``: a node runs its script itself, with no launcher (GLM5.2.md 0.30.0rc2 :695): the
script is started, and starts no command beyond the script's own ``vllm serve``."""


_SAVED_AS = re.compile(r"\bsave\b[^`]*`(?:\./)?([\w.-]+\.sh)`", re.IGNORECASE)
"""The name the page saves a block under: ``save the following script as `run_p.sh` ``, ``Save the following
`run_p0.sh` on P0`` (GLM5.3-Flash.md 0.30.0rc2 :352, :632), read off the text just above the block."""


_EXEC_SCRIPT = re.compile(r'^(?:exec\s+)?(?:ba)?sh\s+(?:\./)?([\w.-]+\.sh)\s+"\$@"\s*$')
"""A wrapper's last line: it runs another saved script with its own arguments (``exec bash ./run_p.sh "$@"``)."""


TEMPLATE_POSITIONS = {"$2": "--vllm-start-port", "$3": "--dp-size", "$4": "--dp-rank-start", "$5": "--dp-address",
                       "$6": "--dp-rpc-port", "$7": "--tp-size", "$8": "--pp-size"}
"""run_dp_template.sh's arguments as launch_online_dp.py passes them (examples/external_online_dp/
launch_online_dp.py, run_command): devices, engine port, dp size, dp rank, dp address, rpc port, tp size;
the first local rank's values (rank dp-rank-start, port vllm-start-port). A page's own launcher may add pipeline
parallelism as the eighth (MiniMax-M3.md in 0.30.0rc2, :435 and :505-527: ``--pp-size``, default 1)."""


def paired_runs(blocks: list[Block], read_of: dict[int, dict[int, Command]]) -> dict[int, int]:
    """{launch line: template line} where a page writes one ``run_dp_template.sh`` per node and then as many
    ``launch_online_dp.py`` runs of their PD role and family, in page order: the templates of a role and family
    written since its last run, and the runs after them, pair in order when they count alike (GLM5.2.md in
    0.30.0rc2: decode node 0's script, :588, and node 1's, :649, started by :708 and :715; its 1M section's two
    more, :1383 and :1446, by :1510 and :1517). A node that runs its script itself (``SCRIPT_RUN``) counts as a run:
    GLM5.2.md's first prefill scripts, :463 and :526, run by :695 and :701, are no part of the 1M section's set."""
    sets: dict[tuple, list[tuple[list[int], list[int]]]] = {}
    for block in blocks:
        read = read_of.get(block.start, {})
        for offset, raw in enumerate(block.lines):
            number = block.start + offset
            if number in read and any(value in TEMPLATE_POSITIONS for value, _ in read[number].options.values()
                                      if isinstance(value, str)):
                said = context(block, read[number], comment_above(block, offset))
                groups = sets.setdefault((said["pd_role"], said["hardware"]), [])
                if not groups or groups[-1][1]:  # the first template after runs starts a new set
                    groups.append(([], []))
                groups[-1][0].append(number)
            elif LAUNCHER.match(raw.strip()) or SCRIPT_RUN.match(raw.strip()):
                groups = sets.setdefault(launch_key(block, offset), [])
                if groups:
                    groups[-1][1].append(number)
    return {run: template for groups in sets.values() for templates, runs in groups
            if len(templates) > 1 and len(templates) == len(runs) for template, run in zip(templates, runs)}


def launch_key(block: Block, offset: int) -> tuple[str | None, str | None]:
    """(PD role, hardware family) of the ``launch_online_dp.py`` run at ``offset``, as its words place it: the
    templates it may start are those of its role and family."""
    number, comment = block.start + offset, comment_above(block, offset)
    return (pd_role(block, Command(block.where, number, ""), comment),
            context(block, Command(block.where, number, ""), comment)["hardware"])


def launcher(block: Block, offset: int, earlier: list[dict], runs: Counter, paired: int | None = None,
             scripts: Scripts | None = None) -> dict:
    """A ``python launch_online_dp.py`` run as the command it starts on its first local DP rank (``runs``: the
    page's runs per ``launch_key``, which pair with its templates in order where they count as many). A run whose
    ``--template`` names a script the page saves (``scripts``) starts that script, read through its wrapper where it
    is one (``Scripts.started``); a template's problems are the run's, unless the wrapper's variables resolve them."""
    number = block.start + offset
    words, used = command_tokens(block.lines, offset)
    span = block.lines[offset:offset + used]
    args = {}
    for flag, value, _ in options(words):
        args[flag] = {"value": value, "line": number + next((i for i, line in enumerate(span) if flag in line), 0)}
    comment = comment_above(block, offset)
    role, hardware = launch_key(block, offset)
    named, wrapper = (None, None)
    if scripts is not None and paired is None and "--template" in args:
        named, wrapper = scripts.started(str(args["--template"]["value"]), block)
    template = next((c for c in earlier if c["line"] == paired), None) if paired else named
    template = template or _template(earlier, role, hardware, runs[(role, hardware)])
    command = Command(block.where, number, template["model"] if template else "")
    if template is None:
        command.problems.append(f"line {number}: launch_online_dp.py runs run_dp_template.sh, but no `vllm serve` "
                                "with $1…$7 arguments stands before it on the page")
    else:
        for flag, entry in template["options"].items():
            value, line = entry["value"], entry["line"]
            if isinstance(value, str) and value in TEMPLATE_POSITIONS:
                source = args.get(TEMPLATE_POSITIONS[value])
                value, line = (source["value"], source["line"]) if source else (value, line)
            command.options[flag] = (value, line)
        command.env = {name: (entry["value"], entry["line"]) for name, entry in template["env"].items()}
        command.problems += template["problems"]
    data = command_data(block, command, comment, launcher="launch_online_dp.py")
    data["launcher_options"] = args
    data["template_line"] = template["line"] if template else None
    if wrapper:
        data["wrapper"] = wrapper
    size, local = (as_int((args.get(f) or {}).get("value")) for f in ("--dp-size", "--dp-size-local"))
    local = local or size  # launch_online_dp.py: --dp-size-local defaults to --dp-size
    if size and local:
        start = as_int((args.get("--dp-rank-start") or {}).get("value")) or 0
        data["nodes"], data["node_rank"] = -(-size // local), start // local
        data["deployment"] = "pd" if data["pd_role"] else ("multi-node" if size > local else "single-node")
    return data


def _template(earlier: list[dict], role: str | None, hardware: str | None, runs: int) -> dict | None:
    """The page's run_dp_template.sh ``vllm serve`` the launcher runs: of the templates before it taking
    ``$1``…``$7``, of the launcher's PD role and hardware family where it has them and a template matches, the one
    in the launcher's place where the page runs as many launchers of that role and hardware (``runs``) as it writes
    templates (DeepSeek-V3.2.md's "Node 0(Prefill)" and "Node 1(Prefill)" scripts, started by its first and second
    prefill launch lines), else the last."""
    templates = [c for c in earlier if c["launcher"] == "vllm serve"
                 and any(isinstance(e["value"], str) and e["value"] in TEMPLATE_POSITIONS for e in c["options"].values())]
    for key, wanted in (("pd_role", role), ("hardware", hardware)):
        fitting = [c for c in templates if wanted is not None and c[key] == wanted]
        templates = fitting or templates
    if len(templates) > 1 and len(templates) == runs:
        lines = {t["line"] for t in templates}
        place = sum(1 for c in earlier if c["launcher"] == "launch_online_dp.py" and c.get("template_line") in lines)
        return templates[min(place, runs - 1)]
    return (templates or [None])[-1]


_REUSES = re.compile(r"\b(?:reuse|same)\b[^.]*?\bSection (\d+(?:\.\d+)*)[^.]*?launch_online_dp\.py"
                     r"|\b(?:reuse|same)\b[^.]*?launch_online_dp\.py[^.]*?\bSection (\d+(?:\.\d+)*)", re.IGNORECASE)
"""A section saying its scripts run with another section's launch lines: ``Reuse Section 5.3
`launch_online_dp.py`.`` (MiniMax-M3.md 0.30.0rc2 :1069, above its KV-pool scripts)."""


def alternatives(commands: list[dict], placed: dict[int, tuple[Block, int]],
                 text: list[TextLine]) -> list[tuple[int, int, str]]:
    """(run line, template line, why) for every template no run starts, by each run the page says starts it too:

    - **a tab alternative.** A run outside a tab group that starts one tab's template starts the template in the
      same place of each sibling tab (DeepSeek-V4-Flash.md 0.30.0rc2: one prefill and one decode run, :809 and
      :816, after an "A3 series" and an "A3 series with dspark" tab of scripts; Kimi-K3.md 0.23.0: one run, :527,
      after a Prefill and a Decode tab), where its own words name no other role or family;
    - **a reused section.** A section that says its scripts run with Section N's ``launch_online_dp.py``
      (``_REUSES``) is started by Section N's runs of the script's role and family.

    ``placed``: each run's block and offset; ``text``: the page's lines outside code blocks. A template is one whose
    flags take ``$2``…``$8``."""
    def is_template(c: dict) -> bool:
        return c["launcher"] == "vllm serve" and any(isinstance(e["value"], str) and e["value"] in TEMPLATE_POSITIONS
                                                     for e in c["options"].values())

    templates = {c["line"]: c for c in commands if is_template(c)}
    runs = [c for c in commands if c["launcher"] == "launch_online_dp.py" and c.get("template_line") in templates]
    started = {r["template_line"] for r in runs}
    blocks = {line: block for line, (block, _) in placed.items()}
    found: list[tuple[int, int, str]] = []
    for template in templates.values():
        if template["line"] in started:
            continue
        for run in runs:
            block, offset = placed[run["line"]]
            role, hardware = launch_key(block, offset)
            if role not in (None, template["pd_role"]) or hardware not in (None, template["hardware"]):
                continue
            if _siblings(templates, templates[run["template_line"]], template) and \
                    list(block.tabs) == template["tabs"][:len(block.tabs)] and len(block.tabs) < len(template["tabs"]):
                found.append((run["line"], template["line"], f"a tab alternative of :{run['template_line']}"))
            elif reused := _reused_section(template, run, blocks, text):
                found.append((run["line"], template["line"], reused))
    return sorted(found)


def _siblings(templates: dict[int, dict], started: dict, template: dict) -> bool:
    """Whether ``template`` stands in a sibling tab of ``started``'s, in the same place among its tab's templates,
    and the tabs are alternatives, not nodes."""
    a, b = started["tabs"], template["tabs"]
    if not a or len(a) != len(b) or a[:-1] != b[:-1] or a[-1] == b[-1] or started["heading"] != template["heading"]:
        return False
    if any(re.search(r"\bnode\b", tab, re.IGNORECASE) for tab in (a[-1], b[-1])):
        return False  # one script per node ("Prefiller node 1", "Node 0(Prefill)"): each node runs its own
    def place(c: dict) -> int:
        return [t["line"] for t in templates.values() if t["tabs"] == c["tabs"] and t["heading"] == c["heading"]
                ].index(c["line"])
    return place(started) == place(template)


def _reused_section(template: dict, run: dict, blocks: dict[int, Block], text: list[TextLine]) -> str:
    """Why ``run`` starts ``template`` by a reuse statement of the template's section before it, or ''."""
    said = next((line for line in reversed(text) if line.number < template["line"] and _REUSES.search(line.text)
                 and SEPARATOR.join(line.headings) == template["heading"]
                 and list(line.tabs) == template["tabs"][:len(line.tabs)]), None)  # not another tab's statement
    if said is None or run["pd_role"] != template["pd_role"] or run["hardware"] != template["hardware"]:
        return ""
    match = _REUSES.search(said.text)
    number, line = match.group(1) or match.group(2), said.number
    within = any(n == number or n.startswith(number + ".") for n in blocks[run["line"]].numbers)
    return f"Section {number}'s run, as :{line} says" if within else ""


class Scripts:
    """The scripts a page saves by name (``_SAVED_AS``), for the runs whose ``--template`` names one.

    A **wrapper** is a saved script that only sets variables and then runs another saved script with its own
    arguments (GLM5.3-Flash.md 0.30.0rc2: ``run_p0.sh`` exports ``LOCAL_IP``, ``NIC_NAME``, ``MODEL_PATH`` and
    ``SERVER_ROLE_ARGS="--api-server-count 1"``, then ``exec bash ./run_p.sh "$@"``, :636-641). A run of a wrapper
    starts the wrapped template read with the wrapper's variables, so that ``${SERVER_ROLE_ARGS:-}`` at :617 is
    ``--api-server-count 1`` on P0 and ``--headless`` on P1. The wrapper's variables are the script's plumbing (the
    template reads them); they are not added to the command's environment, which is the template's own exports.

    ``read``: a block's commands read with variables set before its own (the template's section's and the
    wrapper's)."""

    def __init__(self, blocks: list[Block], read: Callable[[Block, dict[str, str]], list[Command]]) -> None:
        self._blocks = blocks
        self._read = read

    def started(self, template: str, run: Block) -> tuple[dict | None, dict | None]:
        """(the template command data, the wrapper ``{line, script}`` or None) the run in ``run`` starts with
        ``--template template``: the nearest block before it saved under that name, in its tab or around it; None
        where the page saves no such script, or it is neither a template nor a wrapper of one."""
        script = self._saved(template.rsplit("/", 1)[-1], run)
        if script is None:
            return None, None
        variables, wrapper = {}, None
        if wrapped := _wrapper(script):
            variables, name = wrapped
            wrapper = {"line": script.start, "script": template.rsplit("/", 1)[-1]}
            script = self._saved(name, script)
            if script is None:
                return None, None
        for command in self._read(script, variables):
            if any(isinstance(value, str) and value in TEMPLATE_POSITIONS for value, _ in command.options.values()):
                offset = command.line - script.start
                return command_data(script, command, comment_above(script, offset)), wrapper
        return None, None

    def _saved(self, name: str, before: Block) -> Block | None:
        return next((b for b in reversed(self._blocks) if b.start < before.start and saved_as(b) == name
                     and before.tabs[:len(b.tabs)] == b.tabs), None)


def saved_as(block: Block) -> str:
    """The script name the text just above ``block`` saves it under (``_SAVED_AS``), or ''."""
    match = _SAVED_AS.search(" ".join(block.lead))
    return match.group(1) if match else ""


def _wrapper(block: Block) -> tuple[dict[str, str], str] | None:
    """(variables it sets, the script it runs) of a wrapper block (``Scripts``), else None."""
    variables: dict[str, str] = {}
    lines = [line.strip() for line in block.lines if line.strip() and not line.strip().startswith("#")]
    if not lines or not (runs := _EXEC_SCRIPT.match(lines[-1])):
        return None
    for line in lines[:-1]:
        match = ASSIGN.match(line)
        if not match:
            return None
        variables[match.group(2)] = expand(shell_word(match.group(3)), variables)
    return variables, runs.group(1)
