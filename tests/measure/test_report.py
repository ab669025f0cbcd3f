"""optkit report on results written here: each case changes what a run left, the report must say so.

The benchmark files are real ``vllm bench serve`` output (tests/fixtures/vllm-bench/, saved from a
simulated ladder run) with their TPOT numbers set per case; the ladder is a real one (baseline, a
greedy-identical recipe, a tolerance recipe). The end-to-end test feeds the report live results.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from optkit.measure import MeasureError
from optkit.measure.accuracy import load_prompt_set
from optkit.measure.ladder import write_ladder
from optkit.measure.record import record_of
from optkit.measure.report import build_report, report_files
from optkit.measure.steps import ladder_steps
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-bench"
WS = load_workspace()
REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4], "input_len": 32, "output_len": 8,
           "min_tokens": False}  # no min_tokens: with it the sampler fast path has no effect
SAMPLER, HCCL = "sampler-greedy-bf16-fastpath", "waterfall-hccl-aiv"
STEPS = ["00-baseline", f"01-{SAMPLER}", f"02-{HCCL}"]
HOST = {"host_version": 1, "npu": "910C", "target": "910c", "driver": "24.1.rc3", "cann": "9.0.1", "notes": [],
        "packages": {"vllm": "0.23.0", "vllm_ascend": "0.23.0", "torch": "2.10.0", "torch_npu": "2.10.0.post4"},
        "tree": {"digest": "a" * 64, "vllm_ascend": "0.23.0", "files": 3891, "applied": []}}
TPOT = {STEPS[0]: {1: 20.0, 4: 26.0}, STEPS[1]: {1: 18.5, 4: 25.99}, STEPS[2]: {1: 17.0, 4: 27.0}}


class Lab:
    """A written ladder and the results of its runs, made to order."""

    def __init__(self, root: Path, leave_one_out: bool = False):
        self.root = root
        full = plan(Request(**REQUEST), WS)
        self.ladder = root / "ladder"
        write_ladder(full, WS, ladder_steps(full, WS.catalog, only=[SAMPLER, HCCL], leave_one_out=leave_one_out),
                     self.ladder)
        self.steps = [s["id"] for s in json.loads((self.ladder / "ladder.json").read_text())["steps"]]
        self.prompts = load_prompt_set(self.ladder / "accuracy" / "prompts.json")

    def run(self, step: str, repeat: int = 1, tpot: dict | None = None, failed: int = 0, host: dict | None = None,
            outputs: dict | None = None, std: float = 0.3) -> Path:
        out = self.ladder / "results" / step / f"r{repeat}"
        out.mkdir(parents=True)
        for c, value in (tpot or {}).items():
            data = json.loads((FIXTURES / f"c{c}.json").read_text())
            data.update(mean_tpot_ms=value, median_tpot_ms=value, std_tpot_ms=std, failed=failed,
                        completed=data["completed"] - failed)
            (out / f"c{c}.json").write_text(json.dumps(data))
        (out / "host.json").write_text(json.dumps(host or HOST))
        accuracy = {"accuracy_version": 1, "max_tokens": 32, "min_tokens": True, "prompts_sha256": "x",
                    "outputs": [{"id": p.id, "text": f" {p.answer or 'w1'} w2", "token_ids": [int(p.answer or 1), 2],
                                 "finish_reason": "length"} for p in self.prompts.prompts]}
        for pid, change in (outputs or {}).items():
            entry = next(o for o in accuracy["outputs"] if o["id"] == pid)
            entry.update(change)
        (out / "accuracy.json").write_text(json.dumps(accuracy))
        return out

    def all(self, tpot=TPOT, repeats: int = 1, **kwargs):
        for step in self.steps:
            for r in range(1, repeats + 1):
                self.run(step, r, tpot[step], **kwargs)

    def report(self):
        return build_report(self.ladder)


@pytest.fixture
def lab(tmp_path):
    return Lab(tmp_path)


def delta(report, step: str, c: int):
    return next(a for a in report.attributions if a.step == step).deltas[c]


def test_deltas_noise_and_verdicts(lab):
    lab.all()
    report = lab.report()
    gain, flat, regression = delta(report, STEPS[1], 1), delta(report, STEPS[1], 4), delta(report, STEPS[2], 4)
    assert gain.value == pytest.approx(-1.5) and gain.verdict == "gain"
    assert flat.value == pytest.approx(-0.01) and flat.verdict == "no-measurable-effect"
    assert regression.value == pytest.approx(1.01) and regression.verdict == "regression"
    # one repeat: the noise is vLLM's per-request TPOT spread over √(completed / concurrency), for both steps
    assert gain.noise == pytest.approx((2 * (0.3 / 20 ** 0.5) ** 2) ** 0.5)
    assert flat.noise == pytest.approx((2 * (0.3 / (40 / 4) ** 0.5) ** 2) ** 0.5)
    assert report.issues == [] and report.gate.passed
    assert [f for a in report.attributions for f in a.flags] == [f"{HCCL}: regression at c4: +1.01 ± 0.13 ms"]


def test_the_plans_estimate_and_the_articles_number_stand_beside_the_measurement(lab):
    lab.all()
    hccl = next(a for a in lab.report().attributions if a.step == STEPS[2])
    assert hccl.estimate[1] == pytest.approx(-0.9372)
    assert hccl.article[1] == [f"{HCCL}: -6.6 % at c1, MTP off — 「HCCL AIV-6.6%」"] and hccl.article[4] == []
    assert hccl.flags == [f"{HCCL}: regression at c4: +1.01 ± 0.13 ms"]


def test_repeats_give_a_spread_and_the_noise_across_starts(lab):
    for step in lab.steps:
        lab.run(step, 1, {c: v - 0.2 for c, v in TPOT[step].items()}, std=0.01)
        lab.run(step, 2, {c: v + 0.2 for c, v in TPOT[step].items()}, std=0.01)
    report = lab.report()
    cell = report.cells[(STEPS[0], 1)]
    assert cell.repeats == [1, 2] and cell.spread("mean_tpot_ms") == pytest.approx((19.8, 20.2))
    assert cell.noise == pytest.approx(0.4 / 2 ** 0.5 / 2 ** 0.5)  # stdev 0.283 / √2: larger than within-run
    assert report.issues == []


@pytest.mark.parametrize("damage, issue, unavailable", [
    pytest.param(lambda lab: lab.run(STEPS[2], 1, TPOT[STEPS[2]], failed=3), f"{STEPS[2]} r1 c1: 3 of 20 requests failed",
                 "02-waterfall-hccl-aiv has no counted c1 result", id="failed-requests"),
    pytest.param(lambda lab: None, f"{STEPS[2]}: no results (not run yet, or its run failed)",
                 "02-waterfall-hccl-aiv has no counted c1 result", id="missing-step"),
    pytest.param(lambda lab: lab.run(STEPS[2], 1, TPOT[STEPS[2]], host={**HOST, "tree": {**HOST["tree"], "digest": "b" * 64}}),
                 f"{STEPS[2]} r1 c1: ran on tree digest bbbbbbbbbbbb…, the ladder on aaaaaaaaaaaa… (another vllm-ascend source)",
                 "02-waterfall-hccl-aiv has no counted c1 result", id="other-tree"),
    pytest.param(lambda lab: (lab.run(STEPS[2], 1, {1: 17.0}), None), f"{STEPS[2]} r1: c4.json is missing",
                 None, id="missing-file"),
])
def test_bad_data_is_reported_not_averaged_in(lab, damage, issue, unavailable):
    for step in lab.steps[:2]:
        lab.run(step, 1, TPOT[step])
    damage(lab)
    report = lab.report()
    assert issue in report.issues, report.issues
    if unavailable:
        d = delta(report, STEPS[2], 1)
        assert d.value is None and d.why_unavailable == unavailable


def test_outputs_of_another_tree_do_not_count_for_the_gate(lab):
    lab.all()
    shutil.rmtree(lab.ladder / "results" / STEPS[2])
    lab.run(STEPS[2], 1, TPOT[STEPS[2]], host={**HOST, "tree": {**HOST["tree"], "digest": "b" * 64}})
    gate = lab.report().gate
    assert not gate.passed
    assert [c.status for c in gate.checks if c.with_ == STEPS[2]] == ["not-checked", "not-checked"]


def test_another_host_is_reported(lab):
    lab.all()
    shutil.rmtree(lab.ladder / "results" / STEPS[1])
    lab.run(STEPS[1], 1, TPOT[STEPS[1]], host={**HOST, "driver": "25.0.rc1", "packages": {**HOST["packages"], "torch_npu": "x"}})
    assert f"{STEPS[1]} r1: another host than the other runs (driver, package torch_npu differ)" in lab.report().issues


def test_a_host_without_npu_is_reported_and_cannot_be_recorded(lab):
    lab.all(host={**HOST, "npu": None, "target": None})
    report = lab.report()
    assert "the host has no Ascend NPU (npu-smi found none): these are not NPU measurements" in report.issues
    with pytest.raises(MeasureError, match="only measurements from an NPU host can be recorded"):
        record_of(report, WS.catalog)


@pytest.mark.parametrize("outputs, step, failure", [
    pytest.param({"t03": {"token_ids": [1, 3]}}, STEPS[1],
                 f"{STEPS[1]} ({SAMPLER}, claimed greedy-identical) against {STEPS[0]}: prompt 't03' diverges at token 1: "
                 "id 2 without, 3 with", id="identity-broken"),
    pytest.param({f"q{n:02d}": {"text": " 0"} for n in range(1, 4)}, STEPS[2],
                 f"{STEPS[2]} ({HCCL}, tolerance 5 points) against {STEPS[1]}: exact-match accuracy 90.6% is more "
                 "than 5 points below 100.0%", id="tolerance-exceeded"),
])
def test_the_gate_fails_naming_where(lab, outputs, step, failure):
    for s in lab.steps:
        lab.run(s, 1, TPOT[s], outputs=outputs if s == step else None)
    gate = lab.report().gate
    assert failure in gate.failures and not gate.passed
    with pytest.raises(MeasureError, match="the accuracy gate did not pass"):
        record_of(lab.report(), WS.catalog)


def test_a_tolerance_recipe_may_change_tokens_within_its_margin(lab):
    for s in lab.steps:
        lab.run(s, 1, TPOT[s], outputs={"t01": {"token_ids": [1, 9]}, "q01": {"text": " 0"}} if s == STEPS[2] else None)
    gate = lab.report().gate
    assert gate.passed, gate.failures
    assert [(c.with_, c.kind, c.status) for c in gate.checks] == [
        (STEPS[1], "identical", "passed"), (STEPS[2], "tolerance", "passed"), (STEPS[2], "tolerance", "passed")]


def test_repeats_that_disagree_fail_the_gate(lab):
    for s in lab.steps:
        lab.run(s, 1, TPOT[s])
    lab.run(STEPS[0], 2, TPOT[STEPS[0]], outputs={"t02": {"token_ids": [1, 7]}})
    assert (f"{STEPS[0]}: repeat r2 gives other greedy outputs than r1 (prompt 't02' diverges at token 1: id 2 r1, "
            "7 r2): the server is not deterministic at temperature 0, so its outputs cannot be compared") \
        in lab.report().gate.failures


def test_missing_outputs_are_not_checked_and_not_a_pass(lab):
    lab.all()
    (lab.ladder / "results" / STEPS[1] / "r1" / "accuracy.json").unlink()
    report = lab.report()
    assert not report.gate.passed and report.gate.failures == []
    assert f"accuracy gate: {STEPS[1]} against {STEPS[0]} not checked: no accuracy outputs for {STEPS[1]}" in report.issues


def test_leave_one_out_attributes_each_recipe_against_the_whole_plan(tmp_path):
    lab = Lab(tmp_path, leave_one_out=True)
    assert lab.steps == ["00-baseline", "01-full", f"02-without-{SAMPLER}", f"03-without-{HCCL}"]
    tpot = {"00-baseline": {1: 20.0, 4: 26.0}, "01-full": {1: 17.0, 4: 25.0},
            f"02-without-{SAMPLER}": {1: 18.5, 4: 25.0}, f"03-without-{HCCL}": {1: 18.0, 4: 26.0}}
    lab.all(tpot)
    report = lab.report()
    sampler, hccl = report.attributions
    assert (sampler.after, sampler.before) == ("01-full", f"02-without-{SAMPLER}")
    assert sampler.deltas[1].value == pytest.approx(-1.5) and hccl.deltas[4].value == pytest.approx(-1.0)
    assert report.totals[1].value == pytest.approx(-3.0)
    assert report.gate.passed, report.gate.failures


def test_the_report_files_are_deterministic_and_the_html_escapes(lab):
    lab.all()
    (lab.ladder / "results" / "<b>odd").mkdir()
    report = lab.report()
    assert "results/<b>odd is not a step of this ladder (ignored)" in report.issues
    first, second = report_files(report), report_files(lab.report())
    assert first == second
    assert set(first) == {"report.json", "report.md", "report.html", "waterfall.png", "concurrency.png"}
    html = first["report.html"].decode()
    assert "results/&lt;b&gt;odd" in html and "<b>odd" not in html
    assert html.count("data:image/png;base64,") == 2
    assert b"matplotlib" not in first["waterfall.png"]  # no Software metadata: same bytes on every run


def test_a_ladder_dir_without_results_is_refused(lab):
    with pytest.raises(MeasureError, match="no results yet; run .*run-ladder.sh on the NPU host first"):
        lab.report()


def test_matplotlib_is_imported_only_for_the_report(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from optkit.cli.main import cli\n"
            "try:\n    cli(sys.argv[1:], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "print('MPL', 'matplotlib' in sys.modules)")
    for args in (["plan", "qwen3.5-35b", "--mtp"], ["ladder", "qwen3.5-35b", "-o", str(tmp_path / "l")]):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout
        assert "MPL False" in out, args


@pytest.mark.parametrize("blocked, needs", [
    pytest.param("matplotlib", "", id="not-installed"),
    pytest.param("PIL", " (it needs PIL)", id="a-dependency-of-it-missing"),
])
def test_without_matplotlib_the_report_says_what_to_install(lab, blocked, needs):
    import subprocess
    import sys

    lab.all()
    code = (f"import sys; sys.modules[{blocked!r}] = None; sys.argv = ['optkit', 'report', {str(lab.ladder)!r}]\n"
            "from optkit.cli.main import main; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (f"optkit: error: the report's charts need matplotlib, which this Python cannot import{needs}; "
                           f"nothing was written: install it with `{sys.executable} -m pip install matplotlib` and run "
                           "optkit report again\n")
    assert not (lab.ladder / "report").exists()
