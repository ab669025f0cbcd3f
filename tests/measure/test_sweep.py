"""The capacity sweep's search, its runner against a fake benchmark client, the ladder's --sweep and
cost options, the report's capacity analysis from probe files, and the record's capacity schema."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.measure import MeasureError
from optkit.measure.capacity import StepCapacity, RunCapacity, capacity_delta, step_capacities
from optkit.measure.results import Run
from optkit.measure.sweep import Probe, Search, max_probes, probe_argv, run_sweep, sweep_settings
from optkit.resolve.slo import parse_slo

SLO = parse_slo("tpot_p99<=20ms,ttft_p99<=1s")


def settings(**kw):
    return sweep_settings(SLO, prompts_per_concurrency=10, min_prompts=20, warmups=1,
                          client_args=["--dataset-name", "random"], **kw)


def search_until_done(search: Search, capacity: int) -> list[int]:
    probed = []
    while (c := search.next()) is not None:
        probed.append(c)
        search.record(Probe(c, c <= capacity, [] if c <= capacity else ["slow"], None))
    return probed


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 8, 13, 37, 100, 255])
def test_the_search_finds_the_capacity_exactly_at_resolution_zero(capacity):
    search = Search(1, 256, 0)
    probed = search_until_done(search, capacity)
    assert search.outcome() == {"status": "found", "capacity": capacity, "upper": capacity + 1,
                                "bracket": f"[{capacity}, {capacity + 1})"}
    assert len(probed) <= max_probes(1, 256, 0)
    assert len(set(probed)) == len(probed)  # never the same load twice


@pytest.mark.parametrize("capacity", [7, 40, 90, 200])
def test_the_search_stops_within_its_resolution(capacity):
    search = Search(1, 256, 0.1)
    search_until_done(search, capacity)
    out = search.outcome()
    assert out["status"] == "found" and out["capacity"] <= capacity < out["upper"]
    assert out["upper"] - out["capacity"] <= max(1, int(0.1 * out["capacity"]))


def test_a_step_that_never_meets_the_slo_has_capacity_zero():
    search = Search(2, 64, 0.1)
    assert search_until_done(search, 0) == [2]
    assert search.outcome() == {"status": "below-lowest", "capacity": 0, "upper": 2, "bracket": "[0, 2)"}


def test_a_step_that_meets_it_at_the_highest_probe_says_at_least():
    search = Search(1, 48, 0.1)
    assert search_until_done(search, 1000) == [1, 2, 4, 8, 16, 32, 48]
    assert search.outcome() == {"status": "at-most-high", "capacity": 48, "upper": None, "bracket": "[48, —)"}


def test_bad_ranges_are_refused():
    with pytest.raises(MeasureError, match="at most the highest"):
        Search(8, 4)
    with pytest.raises(MeasureError, match="resolution"):
        Search(1, 4, -1)


def test_a_probes_argv_carries_the_slos_goodput_and_percentiles():
    s = sweep_settings(parse_slo("tpot_p99.9<=20ms,ttft_p90<=1s"), prompts_per_concurrency=3, min_prompts=5, warmups=2,
                       client_args=["--dataset-name", "random"])
    argv = probe_argv(s, 4, model="m", served_name="s", host="h", port=1, out_dir=Path("out"))
    assert argv[argv.index("--num-prompts") + 1] == "12" and argv[argv.index("--num-warmups") + 1] == "8"
    assert argv[argv.index("--metric-percentiles") + 1] == "50,90,99,99.9"
    assert argv[argv.index("--goodput") + 1:argv.index("--goodput") + 3] == ["ttft:1000", "tpot:20"]
    assert probe_argv(s, 1, model="m", served_name="s", host="h", port=1, out_dir=Path("o"))[
        argv.index("--num-prompts") + 1] == "5"


class _Health:
    """A /health endpoint that can be stopped (the server 'dies')."""

    def __init__(self):
        alive = self.alive = threading.Event()
        self.alive.set()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200 if alive.is_set() else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]


def fake_client(knee: int, health: _Health | None = None, dies_at: int | None = None):
    """A stand-in for vLLM's client: writes a result whose p99 TPOT jumps past ``knee``."""
    def run(argv):
        c = int(argv[argv.index("--max-concurrency") + 1])
        if dies_at is not None and c >= dies_at:
            health.alive.clear()
            raise RuntimeError("connection refused")
        out = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
        tpot = 15.0 if c <= knee else 30.0
        out.write_text(json.dumps({"completed": 10 * c, "failed": 0, "max_concurrency": c, "num_prompts": 10 * c,
                                   "p99_tpot_ms": tpot, "p99_ttft_ms": 100.0, "output_throughput": 50.0 * c,
                                   "request_throughput": c, "request_goodput": c if c <= knee else 0.0}))
    return run


def test_the_runner_writes_every_probe_and_the_search(tmp_path):
    health = _Health()
    data = run_sweep(settings(low=1, high=64, resolution=0), model="m", served_name="s", host="127.0.0.1",
                     port=health.port, out_dir=tmp_path, client=fake_client(11), client_name="fake", log=lambda s: None)
    assert (data["status"], data["capacity"], data["bracket"]) == ("found", 11, "[11, 12)")
    assert json.loads((tmp_path / "sweep.json").read_text())["capacity"] == 11
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir()) == sorted(f"c{p['concurrency']}.json" for p in data["probes"])


def test_a_server_that_dies_mid_sweep_ends_it_with_what_was_met(tmp_path):
    health = _Health()
    data = run_sweep(settings(low=1, high=64, resolution=0), model="m", served_name="s", host="127.0.0.1",
                     port=health.port, out_dir=tmp_path, client=fake_client(20, health, dies_at=8), client_name="fake",
                     log=lambda s: None)
    assert (data["status"], data["capacity"], data["died_at"], data["bracket"]) == ("server-died", 4, 8, "[4, 8)")
    assert [p["concurrency"] for p in data["probes"]] == [1, 2, 4]


def test_failed_requests_miss_the_slo(tmp_path):
    health = _Health()

    def client(argv):
        fake_client(100)(argv)
        out = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
        data = json.loads(out.read_text())
        c = data["max_concurrency"]
        data["failed"] = 0 if c <= 2 else 3
        out.write_text(json.dumps(data))

    data = run_sweep(settings(low=1, high=16, resolution=0), model="m", served_name="s", host="127.0.0.1",
                     port=health.port, out_dir=tmp_path, client=client, client_name="fake", log=lambda s: None)
    assert data["capacity"] == 2
    assert "3 of 43 requests failed" in data["probes"][-1]["violations"][0] or any(
        "requests failed" in v for p in data["probes"] for v in p["violations"])


def test_a_probes_verdict_is_the_slos_own_check_plus_the_requests_that_failed():
    from optkit.measure.sweep import violations

    result = {"completed": 40, "failed": 3, "p99_tpot_ms": 20.5, "p99_ttft_ms": 10.0}
    assert violations(settings(), result) == ["3 of 43 requests failed", *SLO.violations(result)]
    assert violations(settings(), {"completed": 40, "p99_tpot_ms": 19.0, "p99_ttft_ms": 999.0}) == []
    assert violations(settings(), {"completed": 0}) == ["no request completed", *SLO.violations({})]


def test_a_hand_edited_slo_is_refused_before_the_first_probe(tmp_path):
    from optkit.resolve.slo import SloError

    probed = []
    with pytest.raises(SloError, match="ladder.json: sweep.slo"):
        run_sweep({**settings(), "slo": "tpot_p99<=fast"}, model="m", served_name="s", host="127.0.0.1", port=1,
                  out_dir=tmp_path, client=probed.append, client_name="fake", log=lambda s: None)
    assert probed == []


def _run_with(probes: dict[int, float], died_at=None, repeat=1) -> Run:
    run = Run("s", repeat)
    run.sweep = {"status": "x", "capacity": -1, "died_at": died_at}
    run.probes = {c: {"completed": 10, "failed": 0, "p99_tpot_ms": t, "p99_ttft_ms": 1.0, "output_throughput": c * 10.0,
                      "request_throughput": 1.0, "request_goodput": 1.0} for c, t in probes.items()}
    return run


def test_the_report_recomputes_capacity_from_the_probes_and_says_where_sweep_json_disagrees():
    caps, issues = step_capacities(settings(), {"a": [_run_with({1: 10, 2: 10, 4: 30, 3: 10})]})
    assert (caps["a"].status, caps["a"].capacity, caps["a"].upper) == ("found", 3, 4)
    assert any("sweep.json says x c-1, its probes say found c3" in i for i in issues)
    caps, issues = step_capacities(settings(), {"a": [_run_with({1: 10, 2: 30, 4: 10})]})
    assert caps["a"].capacity == 1 and any("not monotone" in i for i in issues)
    caps, _ = step_capacities(settings(), {"a": [_run_with({1: 30})]})
    assert (caps["a"].status, caps["a"].capacity, caps["a"].upper) == ("below-lowest", 0, 1)


def test_capacity_verdicts_come_from_the_brackets():
    def cap(c, upper, status="found"):
        return StepCapacity("s", [RunCapacity(1, status, c, upper)])

    assert capacity_delta(cap(8, 9), cap(4, 5)).verdict == "gain"
    assert capacity_delta(cap(4, 5), cap(8, 9)).verdict == "regression"
    assert capacity_delta(cap(5, 8), cap(4, 6)).verdict == "no-measurable-effect"
    assert capacity_delta(cap(0, 1, "below-lowest"), cap(0, 1, "below-lowest")).value == 0
    assert capacity_delta(cap(4, 5), None).verdict == "unavailable"


def test_the_ladder_takes_sweep_and_cost_options(tmp_path):
    out = tmp_path / "l"
    result = CliRunner().invoke(cli, ["ladder", "qwen3.5-35b", "--target", "910c", "--concurrency", "1,4",
                                      "--goal", "throughput", "--recipes", "waterfall-hccl-aiv", "--sweep", "--slo",
                                      "TPOT_P99 <= 0.02s", "--sweep-max", "8", "--prompts-per-concurrency", "3", "--warmups", "0",
                                      "--accuracy-prompts", "5", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "ladder.json").read_text())
    assert data["sweep"]["slo"] == "tpot_p99<=20ms" and data["sweep"]["high"] == 8
    assert data["workload"]["num_prompts"] == {"1": 20, "4": 20, "8": 24}  # 3 per slot, at least 20
    assert data["accuracy"]["prompts_count"] == 5
    script = (out / "run-ladder.sh").read_text()
    assert 'capacity_sweep "$step"\n' in script and "PROMPTS_PER_CONCURRENCY=3" in script and "WARMUPS_PER_CONCURRENCY=0" in script


def test_a_ladder_without_sweep_is_unchanged_by_the_new_options(tmp_path):
    args = ["ladder", "qwen3.5-35b", "--target", "910c", "--recipes", "waterfall-hccl-aiv"]
    assert CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "a")]).exit_code == 0
    data = json.loads((tmp_path / "a" / "ladder.json").read_text())
    assert "sweep" not in data and "bench" not in data
    assert "capacity_sweep" not in (tmp_path / "a" / "run-ladder.sh").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--sweep"], "--sweep needs an objective"),
    (["--sweep-max", "64"], "--sweep-max set the capacity sweep: add --sweep"),
    (["--sweep", "--slo", "tpot_p99>=20ms"], "'--slo': term 1"),
    (["--sweep", "--slo", "tpot_p99<=20ms", "--sweep-min", "9", "--sweep-max", "4"], "--sweep-min 9 is above --sweep-max 4"),
])
def test_bad_sweep_options_name_the_flag(tmp_path, extra, message):
    """(--slo alone is no sweep option: it is the request's objective, which the plan reads too.)"""
    result = CliRunner().invoke(cli, ["ladder", "qwen3.5-35b", "--target", "910c", *extra, "-o", str(tmp_path / "x")])
    assert result.exit_code != 0 and message in result.output, result.output
    assert not (tmp_path / "x").exists()


def _capacity(**steps):
    return {"slo": "tpot_p99<=20ms", "variable": "concurrency", "low": 1, "high": 64, "resolution": 0.1,
            "prompts_per_concurrency": 10, "steps": steps}


def _step(**kw):
    return {"recipes": ["waterfall-hccl-aiv"], "capacity": 8, "upper": 9, "status": "found", "repeats": 1, **kw}


@pytest.mark.parametrize("step, message", [
    (_step(upper=8), "must be above capacity"),
    (_step(status="at-most-high"), "at-most-high has no upper bound"),
    (_step(status="below-lowest"), "below-lowest means capacity 0"),
    (_step(capacity=0, upper=1), "capacity 0 is status below-lowest"),
    (_step(upper=None), "needs upper"),
    (_step(capacity=80, upper=90), "outside the probed range"),
])
def test_the_records_capacity_is_validated(step, message):
    from pydantic import ValidationError

    from optkit.catalog.record_schema import RecordCapacity

    RecordCapacity.model_validate(_capacity(a=_step()))
    with pytest.raises(ValidationError, match=message):
        RecordCapacity.model_validate(_capacity(a=step))
    with pytest.raises(ValidationError, match="slo"):
        RecordCapacity.model_validate({**_capacity(a=_step()), "slo": "tpot_p99>=20ms"})


def test_a_record_without_capacity_keeps_its_digest():
    from optkit.catalog.records import _dump

    class Fake:
        def model_dump(self, mode):
            return {"a": 1, "capacity": None, "recipes": {"r": {"x": 1, "capacity_delta": None, "capacity_verdict": None}}}

    assert _dump(Fake()) == {"a": 1, "recipes": {"r": {"x": 1}}}


def test_a_client_that_fails_while_the_server_is_up_is_an_error_not_a_miss(tmp_path):
    health = _Health()

    def broken(argv):
        raise SystemExit(2)  # argparse: a flag this vLLM does not take

    with pytest.raises(MeasureError, match="failed at c1 without a result while the server was up"):
        run_sweep(settings(low=1, high=8), model="m", served_name="s", host="127.0.0.1", port=health.port,
                  out_dir=tmp_path, client=broken, client_name="fake", log=lambda s: None)
    assert json.loads((tmp_path / "sweep.json").read_text())["status"] == "client-failed"


def test_a_sweep_ladders_run_ladder_passes_bash_n_and_shellcheck(tmp_path):
    import shutil
    import subprocess

    out = tmp_path / "l"
    result = CliRunner().invoke(cli, ["ladder", "qwen3.5-35b", "--target", "910c", "--recipes", "waterfall-hccl-aiv",
                                      "--sweep", "--slo", "tpot_p99<=20ms", "--sweep-max", "8", "--warmups", "0",
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Capacity sweep per run: the highest concurrency meeting tpot_p99<=20ms" in result.output
    assert subprocess.run(["bash", "-n", str(out / "run-ladder.sh")]).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run(["shellcheck", "-x", "run-ladder.sh", "steps/00-baseline/bench.sh"], cwd=out,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
