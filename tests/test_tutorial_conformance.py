"""Tutorial conformance: optkit's plan for each upstream tutorial scenario, flag by flag, against the
tutorial's own ``vllm serve`` command (tests/conformance_support.py; data in tests/conformance/).

Every difference is a recipe optkit adds (named) or an entry of tests/conformance/disagreements.yaml;
the test fails on an unexplained difference, on a stale entry, on a tutorial command no entry of
tests/conformance/tutorials.yaml names, and when docs/models.md's table is not the current one.
The parser tests below run without trees: they pin how a page is read.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
import yaml

import conformance_support as cs
from optkit.versions.tutorial_commands import bench_lengths, commands

RELEASES = cs.data()["releases"]


@lru_cache(maxsize=None)
def _release(release: str):
    from compat_support import pristine
    from optkit.resolve.plan import load_workspace

    return cs.run_release(release, pristine(release), load_workspace())


def _differences() -> list[cs.Difference]:
    return [d for release in RELEASES for r in _release(release)[0] for d in r.differences]


@pytest.mark.tree
@pytest.mark.parametrize("release", RELEASES)
def test_every_tutorial_command_is_named(release):
    results, problems = _release(release)
    assert problems == []
    assert results, f"no tutorial command of {release} was compared"


@pytest.mark.tree
def test_every_difference_is_a_recipe_or_a_documented_disagreement():
    problems = cs.check(_differences(), RELEASES)
    assert not problems, "\n".join(problems)


@pytest.mark.tree
def test_every_profile_with_a_tutorial_is_compared_in_the_newest_release():
    from optkit.resolve.profile_catalog import load_models

    newest = RELEASES[-1]
    compared = {r.request["model"] for r in _release(newest)[0]}
    without, awaiting = set(cs.data()["without_tutorial"]), set(cs.data().get("awaiting_comparison", {}))
    models = load_models(cs.REPO / "models")
    assert compared | without | awaiting == set(models)
    assert not compared & without and not compared & awaiting and not without & awaiting
    for model_id, pages in cs.data().get("awaiting_comparison", {}).items():  # named pages are the profile's own
        assert set(pages.split(", ")) <= set(models[model_id].tutorials), model_id


@pytest.mark.tree
def test_recipe_added_entries_name_selected_recipes():
    for release in RELEASES:
        for result in _release(release)[0]:
            for d in result.differences:
                if d.recipe_added:
                    assert set(d.source.split(",")) <= set(result.selected), d


@pytest.mark.tree
def test_docs_table_is_current():
    expected = cs.table([r for release in RELEASES for r in _release(release)[0]])
    assert cs.doc_section(cs.DOC.read_text(encoding="utf-8")) == expected, (
        "docs/models.md's conformance table is out of date: run python tests/conformance_support.py --write")


# --------------------------------------------------------------------------- data checks, no tree


def test_disagreements_are_well_formed():
    required = {"tutorial", "where", "key", "tutorial_value", "optkit_value", "lines", "why"}
    seen = set()
    for n, entry in enumerate(cs.disagreements()):
        assert required <= set(entry) <= required | {"pending"}, (n, sorted(set(entry) ^ required))
        assert entry["tutorial"] in cs.data()["tutorials"], (n, entry["tutorial"])
        assert set(entry["lines"]) <= set(RELEASES), (n, entry["lines"])
        assert entry["why"].strip() and entry["tutorial_value"] != entry["optkit_value"], n
        for release in entry["lines"]:
            key = (entry["tutorial"], entry["where"], entry["key"], release)
            assert key not in seen, f"entry {n} repeats {key}: one entry per command, key and release"
            seen.add(key)


def test_tutorial_entries_are_well_formed():
    known = {"where", "releases", "scenario", "target", "nodes", "node_rank", "shell", "request", "skip", "role"}
    for tutorial, entries in cs.data()["tutorials"].items():
        for entry in entries:
            assert set(entry) <= known, (tutorial, entry["where"], sorted(set(entry) - known))
            if "role" in entry:  # a PD role's command is compared with that role of a --pd plan
                assert entry["role"] in ("prefill", "decode") and "pd" in entry.get("request", {}), \
                    (tutorial, entry["where"])
            assert ("skip" in entry) != ("target" in entry), (tutorial, entry["where"])
            assert ("scenario" in entry) == ("target" in entry), (tutorial, entry["where"])
            assert set(entry.get("releases", RELEASES)) <= set(RELEASES), (tutorial, entry["where"])


# --------------------------------------------------------------------------- the page reader, no tree

MKDOCS = '''\
## 5 Online Service Deployment {: #5-online-service-deployment }

### 5.1 Single-Node Online Deployment

=== "A3"

    === "Model-A"

        ```bash
        export MODEL_PATH=Org/Model-A
        export HCCL_BUFFSIZE=512  # MB
        local_ip="xxxx"
        vllm serve $MODEL_PATH \\
            --tensor-parallel-size 2 \\
            --data-parallel-address $local_ip \\
            --no-enable-prefix-caching \\
            --speculative_config '{"method": "qwen3_5_mtp",
              "num_speculative_tokens": 3}' \\
            --async-scheduling
        ```

    === "Model-B"

        ```shell
        vllm serve Org/Model-B --max-num-seqs=16
        ```

Text after the tabs.

```shell
vllm bench serve --model Org/Model-A --random-input 200 --num-prompts 10
vllm serve Org/Model-A --tensor-parallel-size 4
```
'''

MYST = '''\
## 5 Online Service Deployment

:::::{tab-set}
::::{tab-item} A3 series

```{code-block} bash
   :substitutions:
vllm serve Org/Model-C --tensor-parallel-size 16
```

::::
::::{tab-item} A2 series

```shell
vllm serve Org/Model-C --tensor-parallel-size 8
```

::::
:::::

### 5.2 Multi-Node

```shell
vllm serve Org/Model-C --headless
```
'''


def test_mkdocs_page():
    found = commands(MKDOCS, keep=("local_ip",))
    assert [(c.where, c.line, c.model) for c in found] == [
        ("Single-Node Online Deployment › A3 › Model-A", 13, "Org/Model-A"),
        ("Single-Node Online Deployment › A3 › Model-B", 25, "Org/Model-B"),
        ("Single-Node Online Deployment", 32, "Org/Model-A"),
    ]
    first = found[0]
    assert first.options == {
        "--tensor-parallel-size": ("2", 14), "--data-parallel-address": ("$local_ip", 15),
        "--enable-prefix-caching": (False, 16), "--speculative-config.method": ("qwen3_5_mtp", 17),
        "--speculative-config.num_speculative_tokens": (3, 17), "--async-scheduling": (True, 19)}
    assert first.env == {"MODEL_PATH": ("Org/Model-A", 10), "HCCL_BUFFSIZE": ("512", 11)}
    assert found[1].options == {"--max-num-seqs": ("16", 25)}
    assert bench_lengths(MKDOCS) == (200, None)


def test_myst_page_and_repeated_names():
    found = commands(MYST)
    assert [(c.where, c.line, c.options) for c in found] == [
        ("Online Service Deployment › A3 series", 8, {"--tensor-parallel-size": ("16", 8)}),
        ("Online Service Deployment › A2 series", 15, {"--tensor-parallel-size": ("8", 15)}),
        ("Multi-Node", 24, {"--headless": (True, 24)}),
    ]
    twice = commands("## 7 Accuracy\n\n```shell\nvllm serve A\n```\n\n```bash\nvllm serve B --enforce-eager\n```\n")
    assert [(c.where, c.model) for c in twice] == [("Accuracy", "A"), ("Accuracy #2", "B")]


def test_what_the_shell_or_vllm_could_not_read_is_a_located_problem():
    found = commands("## Deploy\n\n```shell\nvllm serve A --additional-config '{\"a\": x}'\n```\n\n"
                     "```shell\nvllm serve B --x 'open\n```\n")
    assert [(c.where, c.model, c.problems) for c in found] == [
        ("Deploy", "A", ["line 4: --additional-config is not JSON (Expecting value: line 1 column 7 (char 6)); "
                         "compared as its raw text"]),
        ("Deploy #2", "", ["line 8: unterminated quote in command: \"vllm serve B --x 'open\\n\""]),
    ]
    assert found[0].options == {"--additional-config": ('{"a": x}', 4)}


def test_unexplained_and_stale_are_reported(monkeypatch):
    difference = cs.Difference("0.30.0rc2", "Qwen3.6-35B-A3B.md", "Somewhere", "--max-num-seqs", "128", None, 200, "")
    entry = {"tutorial": "Qwen3.6-35B-A3B.md", "where": "Somewhere", "key": "--max-num-seqs",
             "tutorial_value": "128", "optkit_value": None, "lines": {"0.30.0rc2": 200}, "why": "x"}
    monkeypatch.setattr(cs, "disagreements", lambda: [entry])
    assert cs.check([difference], ["0.30.0rc2"]) == []
    # optkit now sets the tutorial's value: the entry is stale
    assert cs.check([], ["0.30.0rc2"]) == [
        "stale: tests/conformance/disagreements.yaml entry 0 (Qwen3.6-35B-A3B.md [Somewhere] --max-num-seqs, "
        "0.30.0rc2): optkit and the tutorial agree now; remove the entry (or its release 0.30.0rc2)"]
    # optkit now sets another value: the entry says what changed
    moved = cs.Difference("0.30.0rc2", "Qwen3.6-35B-A3B.md", "Somewhere", "--max-num-seqs", "128", "64", 201,
                          "scheduling-recipe")
    assert cs.check([moved], ["0.30.0rc2"]) == [
        "stale: tests/conformance/disagreements.yaml entry 0 (Qwen3.6-35B-A3B.md [Somewhere] --max-num-seqs, "
        "0.30.0rc2): now tutorial \"128\" and optkit \"64\" (set by scheduling-recipe), the entry says tutorial "
        "\"128\" and optkit unset: update it or remove it",
        "stale: tests/conformance/disagreements.yaml entry 0 (Qwen3.6-35B-A3B.md [Somewhere] --max-num-seqs, "
        "0.30.0rc2): the tutorial has it at line 201, the entry says 200"]
    monkeypatch.setattr(cs, "disagreements", lambda: [])
    unexplained = cs.check([difference], ["0.30.0rc2"])
    assert len(unexplained) == 1 and unexplained[0].startswith(
        "unexplained: 0.30.0rc2 Qwen3.6-35B-A3B.md:200 [Somewhere] --max-num-seqs: tutorial \"128\", optkit unset")
    assert yaml.safe_load(unexplained[0].split("\n", 1)[1])[0]["lines"] == {"0.30.0rc2": 200}


def test_a_recipe_that_adds_an_entry_explains_it(monkeypatch):
    monkeypatch.setattr(cs, "disagreements", lambda: [])
    added = cs.Difference("0.23.0", "Qwen3.6-35B-A3B.md", "Somewhere", "env.X", None, "1", 10, "some-recipe")
    changed = cs.Difference("0.23.0", "Qwen3.6-35B-A3B.md", "Somewhere", "env.Y", "0", "1", 11, "some-recipe")
    assert [p.split(":")[0] for p in cs.check([added, changed], ["0.23.0"])] == ["unexplained"]


def test_profiles_table_is_current():
    text = cs.DOC.read_text(encoding="utf-8")
    assert cs.doc_section(text, cs.PROFILES_BEGIN, cs.PROFILES_END) == cs.profiles_table(), (
        "docs/models.md's profiles table is out of date: run python tests/conformance_support.py --write --profiles")


def _conditions(node, path=""):
    """Every condition text of a recipe.yaml (``when`` values), with where it stands."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "when" and isinstance(value, str):
                yield f"{path}.when", value
            else:
                yield from _conditions(value, f"{path}.{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from _conditions(value, f"{path}[{n}]")


def test_no_recipe_condition_names_a_model():
    """Rules key on architecture: no condition reads a profile's name or names a checkpoint."""
    from optkit.resolve.profile_catalog import load_models

    names = {n.lower() for m in load_models(cs.REPO / "models").values() for n in [*m.names(), m.hf_id]}
    found = []
    for path in sorted((cs.REPO / "recipes").glob("*/recipe.yaml")):
        for where, condition in _conditions(yaml.safe_load(path.read_text(encoding="utf-8"))):
            lowered = condition.lower()
            if "model.id" in lowered or "model.family" in lowered or any(name in lowered for name in names):
                found.append(f"{path.parent.name}{where}: {condition}")
    assert found == []


def test_prune_takes_out_what_no_longer_holds(monkeypatch):
    """The reconciliation after new recipes land: closed releases leave an entry, moved lines follow, an
    entry whose every release closed goes; a changed value is left for check() to report."""
    def entry(key, lines, optkit=None):
        return {"tutorial": "T.md", "where": "W", "key": key, "tutorial_value": "128", "optkit_value": optkit,
                "lines": lines, "why": "x"}

    entries = [entry("--max-num-seqs", {"0.23.0": 10, "0.30.0rc2": 20}), entry("--max-num-batched-tokens", {"0.23.0": 11}),
               entry("--max-model-len", {"0.23.0": 12, "0.18.0": 5})]
    monkeypatch.setattr(cs, "disagreements", lambda: entries)
    still = [cs.Difference("0.30.0rc2", "T.md", "W", "--max-num-seqs", "128", None, 21, ""),
             cs.Difference("0.23.0", "T.md", "W", "--max-model-len", "128", "64", 12, "scheduling-recipe")]
    assert cs.pruned(still, ["0.23.0", "0.30.0rc2"]) == [
        entry("--max-num-seqs", {"0.30.0rc2": 21}), entry("--max-model-len", {"0.23.0": 12, "0.18.0": 5})]


# the 397B's single-node long-context command (A3) exports FlashComm1 on these releases and not on the others;
# optkit's rule leaves it off for that architecture (recipes/flashcomm1-sequence-parallel: its high-throughput row
# runs no sequence parallelism and its FAQ warns of regressions), and says so in the rule's text
FLASHCOMM1_LONG_CONTEXT_ONLY = {(r, "Qwen3.5-397B-A17B.md") for r in (
    "0.18.0", "0.19.1rc1", "0.20.2rc1", "0.21.0rc1", "0.22.1rc1", "0.23.0rc1", "0.24.0rc1", "0.25.1rc1", "0.26.0rc1")}


@pytest.mark.tree
@pytest.mark.parametrize("release", RELEASES)
def test_the_flashcomm1_rule_left_open_agrees_with_the_tutorial_commands(release):
    """The conformance requests pin FlashComm1 as each command sets it; left open, optkit's rule (keyed to the
    model's page) must choose the same, except where the page's own commands disagree among releases (above)."""
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    workspace = load_workspace()
    found = []
    for r in _release(release)[0]:
        if r.entry.get("role"):
            continue
        open_request = {k: v for k, v in r.request.items() if k != "flashcomm1"}
        chosen = plan(Request(**open_request), workspace).facts["parallel.flashcomm1"]
        if chosen != r.request["flashcomm1"]:
            found.append((release, r.tutorial, r.command.where, r.request["flashcomm1"], chosen))
    expected = [(release, t, w, True, False) for (rel, t, w, *_rest) in found if (rel, t) in FLASHCOMM1_LONG_CONTEXT_ONLY]
    assert found == expected
