"""Request fields left open, filled in by the catalog's rules (optkit.resolve.choices): FlashComm1 under the
throughput goal where the release, the layout and the model's own page have it (flashcomm1-sequence-parallel), DP
from the load with --dp auto (sched-capacity-for-load: the sequences per DP group of the model's page, 32 on the
35B and 27B pages, 16 on the 397B's); each rule keyed to the page and hardware tab it is read on, and labelled
optkit's own generalization elsewhere; an explicit value always wins, the latency goal is untouched, the lock keeps
the request as given and replays the choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from optkit.bundle.writer import bundle_files
from optkit.cli.main import cli
from optkit.errors import RequestError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _plan(workspace, **fields):
    return plan(parse_request({"model": "qwen3.5-35b", "target": "910c", **fields}), workspace)


def _chosen(result) -> dict:
    return {c.field: (c.value, c.recipe) for c in result.choices}


# --------------------------------------------------------------------------- FlashComm1


@pytest.mark.parametrize("fields, on", [
    (dict(concurrency=64), True),  # 0.23.0: sequence-parallel MoE with any DP
    (dict(concurrency=64, vllm_ascend_version="0.18.0"), True),  # the environment variable's releases
    (dict(concurrency=64, vllm_ascend_version="0.30.0rc2"), False),  # from 0.27.1rc1: needs DP > 1
    (dict(concurrency=64, vllm_ascend_version="0.30.0rc2", dp=4), True),
    (dict(concurrency=64, vllm_ascend_version="0.30.0rc2", dp=4, ep=False), False),  # vLLM's SP MoE needs EP
    (dict(concurrency=64, model="qwen3.6-27b"), False),  # dense: no single-server row runs it
    (dict(concurrency=64, tp=1, quantization="w8a8"), False),  # no TP communication (W8A8: BF16 35B does not fit one die)
    (dict(concurrency=64, context_parallel=True), False),
    (dict(concurrency=8), False),  # the latency goal (the default up to c8)
    (dict(concurrency=64, goal="latency"), False),
], ids=["0.23.0", "0.18.0", "0.30-dp1", "0.30-dp4", "0.30-no-ep", "dense", "tp1", "context-parallel", "c8",
        "asked-latency"])
def test_flashcomm1_left_open_is_chosen_under_the_throughput_goal_where_it_applies(workspace, fields, on):
    result = _plan(workspace, **fields)
    assert result.facts["parallel.flashcomm1"] is on
    assert result.request.flashcomm1 is on
    assert _chosen(result).get("flashcomm1") == ((True, "flashcomm1-sequence-parallel") if on else None)
    assert (result.resolution.decisions["flashcomm1-sequence-parallel"].status.value == "selected") is on


def test_a_chosen_flashcomm1_is_turned_on_by_the_bundle_and_shapes_the_values(workspace):
    result = _plan(workspace, concurrency=64, mtp=True)
    assert [(s.key, s.value) for s in result.env if "FLASHCOMM1" in s.key] == [("VLLM_ASCEND_ENABLE_FLASHCOMM1", "1")]
    sizes = result.compilation_config["cudagraph_capture_sizes"]
    assert sizes and all(size % 10 == 0 for size in sizes)  # multiples of lcm(TP 2, 1 + k = 5)
    assert result.resolution.decisions["moe-shared-expert-sidestream-ar"].status.value != "selected"
    files = bundle_files(result, workspace)
    assert b"export VLLM_ASCEND_ENABLE_FLASHCOMM1=1" in files["env.sh"]


@pytest.mark.parametrize("fields", [dict(flashcomm1=False), dict(without=["flashcomm1-sequence-parallel"])],
                         ids=["no-flashcomm1", "without-the-recipe"])
def test_an_explicit_flashcomm1_or_leaving_the_recipe_out_wins(workspace, fields):
    result = _plan(workspace, concurrency=64, **fields)
    assert result.facts["parallel.flashcomm1"] is False and "flashcomm1" not in _chosen(result)
    assert not any("FLASHCOMM1" in s.key for s in result.env)


def test_an_explicit_flashcomm1_is_turned_on_under_the_latency_goal_too(workspace):
    """--flashcomm1 says the deployment runs it: the bundle sets it rather than leave the user to."""
    result = _plan(workspace, flashcomm1=True)
    assert result.choices == [] and result.facts["parallel.flashcomm1"] is True
    assert ("VLLM_ASCEND_ENABLE_FLASHCOMM1", "1") in [(s.key, s.value) for s in result.env]


def test_the_latency_plan_is_unchanged_by_leaving_the_fields_open(workspace):
    open_ = bundle_files(_plan(workspace), workspace)
    fixed = bundle_files(_plan(workspace, flashcomm1=False, dp=1), workspace)
    for name in ("serve.sh", "env.sh", "README.md"):
        assert open_[name] == fixed[name], name
    assert _plan(workspace).choices == []


# --------------------------------------------------------------------------- DP from the load


@pytest.mark.parametrize("fields, dp, note", [
    (dict(concurrency=64), 2, ""),  # ⌈64 / 32⌉
    (dict(concurrency=96), 4, "raised to 4"),  # ⌈96 / 32⌉ = 3, but 256 experts do not split over 6 EP ranks
    (dict(concurrency=200), 8, "raised to 8"),
    (dict(concurrency=4096), 8, "capped at 8"),  # one node of 16 dies holds TP 2 × DP 8
    (dict(concurrency=4096, nodes=2), 16, "capped at 16"),
    (dict(concurrency=32), 1, ""),
    (dict(concurrency=64, goal="latency"), 1, "the default 1"),
    (dict(concurrency=64, model="qwen3.6-27b"), 2, ""),  # dense: upstream's 27B rows run 32 per DP group too
], ids=["c64", "c96-experts", "c200", "c4096-one-node", "c4096-two-nodes", "c32", "latency", "dense"])
def test_dp_auto_is_sized_from_the_load(workspace, fields, dp, note):
    result = _plan(workspace, dp="auto", **fields)
    assert result.request.dp == dp and result.facts["parallel.dp"] == dp
    chosen = next(c for c in result.choices if c.field == "dp")
    assert chosen.value == dp and note in chosen.how
    assert chosen.recipe == ("" if fields.get("goal") == "latency" else "sched-capacity-for-load")
    if chosen.recipe:
        seqs = next(s.key for s in result.serve_args if s.key.startswith("--max-num-seqs"))
        assert int(seqs.split()[1]) * dp >= max(result.request.concurrency)


def test_an_explicit_dp_is_not_chosen(workspace):
    result = _plan(workspace, concurrency=200, dp=2)
    assert result.request.dp == 2 and "dp" not in _chosen(result)


def test_flashcomm1_is_not_chosen_for_a_pd_pair(workspace):
    result = _plan(workspace, concurrency=64, pd="1:1")
    assert result.facts["parallel.flashcomm1"] is False
    assert [(c.field, c.value, c.recipe) for c in result.choices] == [("flashcomm1", False, "")]
    assert "prefill node only" in result.choices[0].why


def test_dp_auto_with_pd_is_refused(workspace):
    with pytest.raises(RequestError, match=r"--dp auto with --pd 1:1: give each instance's DP size"):
        _plan(workspace, concurrency=64, dp="auto", pd="1:1", vllm_ascend_version="0.30.0rc2")


def test_dp_auto_with_nothing_that_splits_is_refused_naming_the_way_out(workspace, monkeypatch):
    import optkit.resolve.sharding as sharding

    def never(model, tp, dp, ep):
        raise RequestError("does not split")

    monkeypatch.setattr(sharding, "check_sharding", never)  # what _fit_dp asks; the facts' own check is not this one
    with pytest.raises(RequestError, match=r"--dp auto: no DP size with --tp 2 fits 1 node of 16 devices .* give "
                                           r"--dp N, another --nodes, or a smaller --tp"):
        _plan(workspace, concurrency=64, dp="auto")


# --------------------------------------------------------------------------- the request, the CLI, the lock


@pytest.mark.parametrize("value, ok", [("auto", True), (4, True), ("4", False), ("Auto", False), (True, False), (0, False)])
def test_the_request_takes_dp_auto_or_an_integer(value, ok):
    from pydantic_core import ValidationError

    if ok:
        assert parse_request({"dp": value}).dp == value
    else:
        with pytest.raises(ValidationError):
            parse_request({"dp": value})


def test_the_cli_takes_dp_auto_and_names_a_bad_value():
    bad = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--dp", "some"])
    assert bad.exit_code == 2 and "--dp" in bad.output and "'auto'" in bad.output
    good = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--dp", "auto", "--concurrency", "64"])
    assert good.exit_code == 0, good.output
    assert "Chosen for the fields the request left open" in good.output
    assert "dp = 2 (chosen by sched-capacity-for-load's rule" in good.output
    assert "flashcomm1 = true (chosen by flashcomm1-sequence-parallel's rule" in good.output


def test_facts_shows_the_chosen_values():
    result = CliRunner().invoke(cli, ["facts", "qwen3.5-35b", "--dp", "auto", "--concurrency", "200"])
    assert result.exit_code == 0, result.output
    assert "parallel.dp = 8" in result.output and "parallel.flashcomm1 = true" in result.output


def test_the_lock_keeps_the_request_as_given_and_replays_the_choice(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    made = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--dp", "auto", "--concurrency", "200", "-o", str(first)])
    assert made.exit_code == 0, made.output
    lock = json.loads((first / "optkit.lock.json").read_text())
    assert lock["request"]["dp"] == "auto" and lock["request"]["flashcomm1"] is None
    assert [(c["field"], c["value"], c["recipe"]) for c in lock["choices"]] == [
        ("dp", 8, "sched-capacity-for-load"), ("flashcomm1", True, "flashcomm1-sequence-parallel")]
    assert lock["facts"]["parallel.dp"] == 8
    again = CliRunner().invoke(cli, ["plan", "--from-lock", str(first / "optkit.lock.json"), "-o", str(second)])
    assert again.exit_code == 0, again.output
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert names and all((first / n).read_bytes() == (second / n).read_bytes() for n in names)
    assert "--data-parallel-size 8" in (first / "serve.sh").read_text()
    readme = (first / "README.md").read_text()
    assert "Chosen for the fields the request left open" in readme and "- dp = 8 (chosen by sched-capacity-for-load" in readme


# --------------------------------------------------------------------------- the catalog's rules


def _catalog_with(tmp_path: Path, choice: dict) -> Path:
    root = tmp_path / "cat"
    folder = root / "my-choice"
    folder.mkdir(parents=True)
    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / "flashcomm1-sequence-parallel" /
                             "recipe.yaml").read_text())
    recipe.update(id="my-choice", choices=[choice], tutorials=[])
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))
    return root


@pytest.mark.parametrize("choice, problem", [
    ({"field": "flashcomm1", "value": 3, "when": "parallel.tp > 1", "why": "a number is no switch"},
     "flashcomm1 takes true or false"),
    ({"field": "tp", "value": 2, "when": "parallel.tp > 1", "why": "tp is not left open"}, "choices[0].field"),
    ({"field": "dp", "value": {"ceil_div": ["workload.concurrency_maxx", 32]}, "when": "parallel.tp > 1",
      "why": "a misspelt fact"}, "workload.concurrency_max"),
    ({"field": "dp", "value": 2, "when": "parallel.tpp > 1", "why": "a misspelt fact"}, "parallel.tp"),
], ids=["bool-field-number", "not-choosable", "bad-expression", "bad-condition"])
def test_a_bad_choice_is_refused_at_its_file_and_field(tmp_path, choice, problem):
    result = CliRunner().invoke(cli, ["lint", str(_catalog_with(tmp_path, choice))])
    assert result.exit_code != 0
    assert "my-choice/recipe.yaml" in result.output and problem in result.output, result.output


# --------------------------------------------------------------------------- prefix caching by workload


def test_a_shared_prefix_chooses_prefix_caching_and_bench_sends_it(workspace):
    result = _plan(workspace, concurrency=64, input_len=1024, shared_prefix_len=256)
    assert _chosen(result)["prefix_caching"] == (True, "sched-capacity-for-load")
    assert result.facts["workload.prefix_caching"] is True and result.facts["workload.shared_prefix_len"] == 256
    files = bundle_files(result, workspace)
    assert b"--enable-prefix-caching" in files["serve.sh"]
    bench = files["bench.sh"].decode()
    assert "--random-input-len 768 --random-prefix-len 256" in bench  # 256 shared + 768 own = the 1024 asked for
    assert "a shared prefix shorter than one block is not reused" in files["README.md"].decode()  # the hybrid caveat


def test_a_shared_prefix_chooses_prefix_caching_under_the_latency_goal_too(workspace):
    result = _plan(workspace, shared_prefix_len=100)
    assert result.request.prefix_caching is True and _chosen(result)["prefix_caching"][0] is True


@pytest.mark.parametrize("fields", [dict(), dict(shared_prefix_len=256, prefix_caching=False),
                                    dict(shared_prefix_len=256, without=["sched-capacity-for-load"])],
                         ids=["no-prefix", "explicit-off", "without-the-recipe"])
def test_prefix_caching_stays_off_without_a_prefix_or_when_fixed(workspace, fields):
    result = _plan(workspace, concurrency=64, **fields)
    assert result.request.prefix_caching is False and "prefix_caching" not in _chosen(result)
    assert b"--no-enable-prefix-caching" in bundle_files(result, workspace)["serve.sh"]


def test_a_mix_with_a_shared_prefix_sends_each_class_its_own_tokens(workspace):
    result = _plan(workspace, concurrency=64, length_mix="1024:256:7,8192:512:3", shared_prefix_len=512)
    bench = bundle_files(result, workspace)["bench.sh"].decode()
    assert '--random-input-len "$((input - 512))" --random-prefix-len 512' in bench
    assert "run 64 640 1024 256" in bench and "run 64 640 8192 512" in bench


@pytest.mark.parametrize("fields, shortest", [(dict(input_len=256, shared_prefix_len=256), 256),
                                              (dict(length_mix="300:10,4096:10", shared_prefix_len=300), 300)],
                         ids=["equal-to-the-input", "the-mix's-shortest"])
def test_a_prefix_as_long_as_an_input_is_refused(workspace, fields, shortest):
    with pytest.raises(RequestError, match=rf"--shared-prefix-len .*shorter than the shortest input \({shortest} "
                                           rf"tokens\); give at most {shortest - 1}"):
        _plan(workspace, **fields)


def test_the_sweep_client_sends_the_shared_prefix(tmp_path, workspace):
    from optkit.measure.ladder import StepCost, write_ladder
    from optkit.measure.steps import ladder_steps

    full = _plan(workspace, concurrency=[1], input_len=64, output_len=8, shared_prefix_len=16)
    ladder = ladder_steps(full, workspace.catalog, only=["waterfall-hccl-aiv"])
    from optkit.resolve.slo import parse_slo

    write_ladder(full, workspace, ladder, tmp_path / "l", cost=StepCost(),
                 sweep={"slo": parse_slo("tpot_p99<=25ms"), "low": 1, "high": 8, "resolution": 1})
    client = json.loads((tmp_path / "l" / "ladder.json").read_text())["sweep"]["client_args"]
    assert client[client.index("--random-input-len") + 1] == "48" and client[client.index("--random-prefix-len") + 1] == "16"


def test_a_record_measured_without_the_prefix_does_not_match_a_prefix_workload():
    from optkit.resolve.objective import _record_matches
    from types import SimpleNamespace

    facts = {"workload.input_len": 1024, "workload.output_len": 512, "spec.mtp": False, "spec.num_speculative_tokens": 0,
             "workload.greedy": True, "workload.min_tokens": True, "parallel.tp": 2, "parallel.dp": 1, "parallel.ep": True,
             "versions.vllm_ascend": "0.23.0", "workload.length_mix": "", "workload.shared_prefix_len": 0}
    workload = SimpleNamespace(input_len=1024, output_len=512, mtp=False, num_speculative_tokens=0, sampling="greedy",
                               min_tokens=True, tp=2, dp=1, ep=True, shared_prefix_len=0)
    record = SimpleNamespace(target="910c", model="m", release=SimpleNamespace(vllm_ascend="0.23.0"), workload=workload)
    assert _record_matches("m", "910c", facts)(record)
    assert not _record_matches("m", "910c", {**facts, "workload.shared_prefix_len": 256})(record)


# --------------------------------------------------------------------------- rules keyed to their page (issue 25)


def _mtp_risks(workspace, result) -> list[str]:
    from optkit.resolve.classify import risks_that_hold

    recipe = next(r for r in workspace.catalog if r.id == "mtp-enable-k4")
    return [" ".join(r.text.split()) for r in risks_that_hold(recipe, result.facts)]


@pytest.mark.parametrize("fields, value, recipe, says", [
    # the 35B page's "may not help low-concurrency workloads": not at c1 even with --dp auto
    (dict(concurrency=1, goal="throughput", dp="auto"), None, None, None),
    (dict(concurrency=8, goal="throughput"), None, None, None),
    (dict(concurrency=16, goal="throughput"), True, "flashcomm1-sequence-parallel", "Qwen3.6-35B-A3B.md"),
    # the 397B page's high-throughput row runs no sequence parallelism, its FAQ warns of regressions
    (dict(model="qwen3.5-397b", quantization="w8a8", target="910b", tp=8, dp=2, concurrency=32, goal="throughput"), False,
     "flashcomm1-sequence-parallel", "no sequence parallelism"),
], ids=["35b-c1-dp-auto", "35b-c8-throughput", "35b-c16-throughput", "397b-multi-node"])
def test_flashcomm1_rule_holds_only_where_its_page_says(workspace, fields, value, recipe, says):
    result = _plan(workspace, **fields)
    chosen = [c for c in result.choices if c.field == "flashcomm1"]
    assert result.facts["parallel.flashcomm1"] is bool(value)
    if value is None:
        assert chosen == []
    else:
        assert (chosen[0].value, chosen[0].recipe) == (value, recipe)
        assert says in chosen[0].text()


@pytest.mark.parametrize("fields, dp, says", [
    (dict(model="qwen3.5-397b", quantization="w8a8", target="910b", tp=8, nodes=2, concurrency=32), 2, "16 per DP"),
    (dict(model="qwen3.5-397b", quantization="w8a8", target="910c", tp=8, concurrency=32), 2, "generalization"),
    (dict(concurrency=64), 2, "Qwen3.6-35B-A3B.md"),
    (dict(model="qwen3.6-27b", concurrency=64), 2, "Qwen3.5-27B-Qwen3.6-27B.md"),
], ids=["397b-a2", "397b-a3", "35b", "27b"])
def test_dp_auto_takes_the_group_size_of_the_models_own_page(workspace, fields, dp, says):
    result = _plan(workspace, goal="throughput", dp="auto", **fields)
    (chosen,) = [c for c in result.choices if c.field == "dp"]
    assert (chosen.value, chosen.recipe) == (dp, "sched-capacity-for-load")
    assert says in chosen.text()


@pytest.mark.parametrize("fields, tokens", [
    (dict(model="qwen3.5-397b", quantization="w8a8", target="910b", tp=8, dp=2, concurrency=32), 4096),  # Qwen3.5-397B-A17B.md:881
    (dict(concurrency=64, flashcomm1=False), 8192),  # Qwen3.6-35B-A3B.md's high-throughput row
], ids=["397b", "35b"])
def test_batched_tokens_follow_the_models_page(workspace, fields, tokens):
    result = _plan(workspace, goal="throughput", **fields)
    assert [d.value for d in result.derivations if d.target == "serve:--max-num-batched-tokens"] == [tokens]


@pytest.mark.parametrize("fields, present, absent", [
    # the 300I DUO tab's "fewer than two concurrent requests": on 910C only as optkit's own generalization
    (dict(concurrency=64, goal="throughput"), ["optkit's own generalization of a line read on another hardware tab"],
     ["disable speculative decoding by default"]),
    # the 35B low-latency row (:344, :350 in 0.30.0rc2) is cited where the plan runs MTP at low latency
    (dict(concurrency="1,4,8"), ["disable speculative decoding by default"], ["fewer than two", "below two"]),
    # the 397B page runs MTP 3 in every A2/A3 command and says start with 3: no "below two" risk
    (dict(model="qwen3.5-397b", quantization="w8a8", target="910b", tp=8, dp=2, concurrency=32, goal="throughput"),
     ["Start with num_speculative_tokens set to 3"], ["below two", "disable speculative decoding"]),
], ids=["35b-throughput", "35b-latency", "397b"])
def test_mtp_risks_come_from_the_models_own_page_and_tab(workspace, fields, present, absent):
    risks = " | ".join(_mtp_risks(workspace, _plan(workspace, mtp=True, **fields)))
    assert all(p in risks for p in present), risks
    assert not any(a in risks for a in absent), risks
