"""A tune's results feed the plan: the best, the front, the importance, the report, --from-tune and tune records.

The study is driven by a small deterministic executor (its objective a known function of the knobs), so
what the results say can be checked against what was measured."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request
from optkit.resolve.tuned import load_tunes
from optkit.tune import TuneError
from optkit.tune.bundle import load_tune
from optkit.tune.results import best, from_tune, importance, pareto, read_trials, summary
from optkit.tune.space import parse_layout
from optkit.tune.study import Outcome, run_tune

SLO = "tpot_p99<=50ms"
REQUEST = ["qwen3.5-35b", "--target", "910c", "--slo", SLO, "--concurrency", "1,4,8", "--sweep-max", "64"]


class Toy:
    """Throughput per card peaks at TP2, 48 sequences and MTP k=1; above 200 sequences the start fails."""

    name, label = "toy", "toy-host"

    def __init__(self):
        self.started = []

    def run(self, candidate, incumbent, trial_dir):
        e = candidate.effective
        self.started.append(dict(e))
        tp, _ = parse_layout(e["layout"])
        if e["max-num-seqs"] > 200:
            return Outcome("failed-start", reason="RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB",
                           seconds=5.0)
        value = 100 * min(e["max-num-seqs"], 48) / 48 - abs(tp - 2) * 10 + (5 if e["speculative"] == "mtp:1" else 0)
        capacity = min(e["max-num-seqs"], 48)
        return Outcome("measured", value, capacity, value * candidate.cards, 20 + e["max-num-seqs"] / 10, 100.0, "",
                       60.0, 5)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    out = root / "tune"
    result = CliRunner().invoke(cli, ["tune", *REQUEST, "-o", str(out), "--budget", "10"])
    assert result.exit_code == 0, result.output
    ws = load_workspace()
    toy = Toy()
    summary_ = run_tune(out, load_tune(out), toy, ws, log=lambda s: None)
    return out, toy, summary_, ws


def test_the_rule_based_plan_is_the_first_trial_and_the_budget_holds(tuned):
    out, toy, run, _ = tuned
    data = load_tune(out)
    rows = read_trials(out, data)
    assert rows[0].rule_based and rows[0].started
    rule = {d["name"]: d["start"] for d in data["space"]["dims"]}
    assert {k: toy.started[0][k] for k in rule} == rule
    assert sum(r.started for r in rows) == 10 == len(toy.started) == run.starts


def test_best_front_and_importance_follow_what_was_measured(tuned):
    out, toy, _, _ = tuned
    data = load_tune(out)
    rows = read_trials(out, data)
    top = best(rows)
    feasible = [r for r in rows if r.feasible]
    assert top.objective == max(r.objective for r in feasible)
    for p in pareto(rows):  # nothing on the front is beaten on both axes
        assert not any(o.objective > p.objective and o.p99_tpot_ms < p.p99_tpot_ms for o in feasible)
    ranked, how = importance(rows, data["space"])
    if len(feasible) >= 6:
        assert ranked and abs(sum(v for _, v in ranked) - 1) < 1e-6 and how == "PED-ANOVA"
    failed = [r for r in rows if r.status == "failed-start"]
    assert all("out of memory" in r.reason for r in failed)
    assert summary(data, rows)["best"]["number"] == top.number


def test_the_report_is_deterministic_and_writes_the_best_bundle(tuned, tmp_path):
    out, *_ = tuned
    first = CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "b")])
    for name in ("report.md", "results.json", "history.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    text = (tmp_path / "a" / "report.md").read_text()
    assert "## Best" in text and "Pareto" in text and "the rule-based plan" in text
    assert (out / "best" / "serve.sh").is_file()


def test_from_tune_plans_the_measured_best_labelled(tuned):
    out, *_ = tuned
    data = load_tune(out)
    top = best(read_trials(out, data))
    request, label, _ = from_tune(out)
    assert label.startswith("measured on toy-host") and f"trial {top.number}" in label
    result = CliRunner().invoke(cli, ["plan", "--from-tune", str(out), "--json"])
    assert result.exit_code == 0, result.output
    derived = {d["set"]: d for d in json.loads(result.output)["launch"]["derived"]}
    assert derived["serve:--max-num-seqs"]["value"] == top.effective["max-num-seqs"]
    assert derived["serve:--max-num-seqs"]["basis"] == "measured"
    refused = CliRunner().invoke(cli, ["plan", "--from-tune", str(out), "qwen3.5-35b"])
    assert refused.exit_code == 2 and "--from-tune" in refused.output


def test_a_tune_record_feeds_a_later_plan_of_the_same_request(tuned, tmp_path):
    out, *_ = tuned
    folder = tmp_path / "mine"
    folder.mkdir()
    result = CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "r"), "--record", "--catalog",
                                      str(folder)])
    assert result.exit_code == 0, result.output
    top = best(read_trials(out, load_tune(out)))
    ws = load_workspace(catalogs=[folder])
    (path, content), = load_tunes(ws)[0]
    tp, dp = parse_layout(top.effective["layout"])
    spec = top.effective["speculative"]
    same = {"model": "qwen3.5-35b", "target": "910c", "slo": SLO, "concurrency": [1, 4, 8], "goal": "throughput",
            "tp": tp, "dp": dp, **({"mtp": True, "num_speculative_tokens": int(spec[4:])} if spec != "off" else {})}
    planned = plan(parse_request(same), ws)
    assert planned.tuned is not None and planned.tuned.applied
    seqs = next(d for d in planned.derivations if d.target == "serve:--max-num-seqs")
    assert seqs.value == top.effective["max-num-seqs"] and seqs.basis == "measured"
    # another workload is another request: the record does not apply
    other = plan(parse_request({**same, "input_len": 4096}), ws)
    assert other.tuned is None
    # a layout the record did not measure keeps the rules and says what was measured
    elsewhere = plan(parse_request({**same, "tp": 4 if tp != 4 else 2, "dp": 1}), ws)
    assert elsewhere.tuned is not None and not elsewhere.tuned.applied and "measured" in elsewhere.tuned.note
    # an edited record no longer matches its name: refused, never used
    content["measured"]["objective"] = 1e9
    path.write_text(json.dumps(content), encoding="utf-8")
    found, refused = load_tunes(ws)
    assert not found and "no longer matches its name" in refused[0][1]
    assert plan(parse_request(same), ws).tuned is None


def test_bad_tune_directories_are_refused_with_the_fix(tuned, tmp_path):
    out, *_ = tuned
    with pytest.raises(TuneError, match="no tune.json"):
        load_tune(tmp_path)
    broken = tmp_path / "broken"
    shutil.copytree(out, broken, ignore=shutil.ignore_patterns("study.db", "trials", "best", "report"))
    with pytest.raises(TuneError, match="no trials yet"):
        read_trials(broken, load_tune(broken))
    (broken / "tune.json").write_text("{", encoding="utf-8")
    with pytest.raises(TuneError, match="line 1"):
        load_tune(broken)
    again = CliRunner().invoke(cli, ["tune", *REQUEST, "-o", str(out)])
    assert again.exit_code != 0 and "holds a tune's trials" in again.output


def test_a_from_tune_bundle_replays_from_its_lock(tuned, tmp_path):
    out, *_ = tuned
    first = CliRunner().invoke(cli, ["plan", "--from-tune", str(out), "-o", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli, ["plan", "--from-lock", str(tmp_path / "a" / "optkit.lock.json"), "-o",
                                     str(tmp_path / "b")])
    assert again.exit_code == 0, again.output
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert "measured on toy-host" in (tmp_path / "a" / "optkit.lock.json").read_text()
