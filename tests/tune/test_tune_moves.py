"""The tune's own moves (optkit/tune/local.py): sizing a point after its start, then one knob at a time from the
best."""

from __future__ import annotations

import pytest

from optkit.tune.local import Tried, next_move
from optkit.tune.space import Dim, Space

LAYOUTS = ("TP1xDP1", "TP1xDP2", "TP2xDP1", "TP2xDP2", "TP4xDP1", "TP4xDP2", "TP8xDP1")
SPACE = Space((
    Dim("layout", "choice", "TP2xDP1", choices=LAYOUTS),
    Dim("speculative", "choice", "off", choices=("off", "mtp:1", "mtp:2")),
    Dim("flashcomm1", "choice", "on", choices=("off", "on")),
    Dim("max-num-seqs", "int", 256, low=8, high=256, step=8),
    Dim("max-num-batched-tokens", "choice", "4096", choices=("16384", "1024", "4096", "2048")),  # unordered on purpose
    Dim("capture-share", "choice", "1", choices=("0.25", "0.5", "0.75", "1")),
), devices=8)
START = SPACE.start()


def tried(number, state="COMPLETE", *, started=True, objective=0.0, capacity=0, status="measured", reason="", dp=1,
          move=None, **params) -> Tried:
    point = {**START, **{k.replace("_", "-"): v for k, v in params.items()}}
    return Tried(number, point, state, started, objective > 0 and capacity > 0, objective, capacity, status, reason,
                 dp, move or {})


def oom(number, seqs, **params) -> Tried:
    return tried(number, status="failed-start", reason="RuntimeError: NPU out of memory. Tried to allocate 2 GiB",
                 max_num_seqs=seqs, **params)


def move(history):
    out = next_move(SPACE, history)
    return None if out is None else (out[0], out[2])


def test_nothing_to_move_from_before_a_measurement():
    assert next_move(SPACE, []) is None
    assert next_move(SPACE, [tried(0, "RUNNING", started=True)]) is None


def test_one_knob_at_a_time_from_the_best_layout_first():
    point, attrs = move([tried(0, objective=100, capacity=90)])
    assert point == {**START, "layout": "TP4xDP1"} and attrs == {"knob": "layout", "from": "TP2xDP1", "of": 0}


def test_the_neighbours_in_order_then_the_next_knob():
    history = [tried(0, objective=100, capacity=90)]
    seen = []
    while (out := move(history)) is not None:
        point, _ = out
        seen.append({k: v for k, v in point.items() if point[k] != START[k]})
        history.append(Tried(len(history), point, "COMPLETE", True, False, 0.0, 0, "below-lowest"))
    # layout: TP × 2, DP × 2, TP ÷ 2, then the two that keep the devices (TP × 2 with DP ÷ 2 has no DP to halve)
    assert seen == [{"layout": "TP4xDP1"}, {"layout": "TP2xDP2"}, {"layout": "TP1xDP1"}, {"layout": "TP1xDP2"},
                    {"speculative": "mtp:1"},
                    # batched tokens by value, whatever the order of the choices: up, then down
                    {"max-num-batched-tokens": "16384"}, {"max-num-batched-tokens": "2048"},
                    {"flashcomm1": "off"}, {"capture-share": "0.75"}]


def test_a_move_that_won_keeps_its_direction():
    history = [tried(0, objective=100, capacity=90),
               tried(1, objective=120, capacity=90, layout="TP4xDP1", move={"knob": "layout", "from": "TP2xDP1"})]
    point, attrs = move(history)
    assert point["layout"] == "TP8xDP1" and attrs["of"] == 1
    history = [tried(0, objective=100, capacity=90),
               tried(1, objective=120, capacity=90, max_num_batched_tokens="2048",
                     move={"knob": "max-num-batched-tokens", "from": "4096"})]
    assert move(history)[0]["max-num-batched-tokens"] == "1024"
    # where it came from untried here: the way it went still comes first (TP halved: halve again)
    came_down = tried(0, objective=120, capacity=90, move={"knob": "layout", "from": "TP4xDP1"})
    assert move([came_down])[0]["layout"] == "TP1xDP1"
    came_down = tried(0, objective=120, capacity=90, max_num_batched_tokens="2048",
                      move={"knob": "max-num-batched-tokens", "from": "4096"})
    assert move([came_down])[0]["max-num-batched-tokens"] == "1024"


def test_a_point_tried_in_any_state_is_not_moved_to_again():
    for state, started in (("WAITING", False), ("RUNNING", True), ("COMPLETE", False)):  # queued, running, invalid
        history = [tried(0, objective=100, capacity=90), tried(1, state, started=started, layout="TP4xDP1")]
        assert move(history)[0]["layout"] == "TP2xDP2", state


def test_an_out_of_memory_start_is_sized_down_three_quarters_then_half_then_left():
    assert move([oom(0, 256)])[0]["max-num-seqs"] == 192
    assert move([oom(0, 256), oom(1, 192)])[0]["max-num-seqs"] == 96
    # a third one: the point is left (here nothing was measured, so there is no best to move from either)
    assert move([oom(0, 256), oom(1, 192), oom(2, 96)]) is None
    # a failed start that is no out-of-memory says nothing about the sizing
    other = tried(0, status="failed-start", reason="ValueError: unsupported", max_num_seqs=256)
    assert move([other]) is None


def test_the_sizing_of_a_neighbour_comes_before_the_next_neighbour():
    history = [tried(0, objective=100, capacity=90), oom(1, 256, speculative="mtp:1")]
    point, attrs = move(history)
    assert point == {**START, "speculative": "mtp:1", "max-num-seqs": 192}
    assert attrs == {"knob": "max-num-seqs", "from": "256", "of": 1}


def test_a_capacity_held_by_the_slots_gets_more_sequences_halfway_to_the_memory_limit():
    held = tried(0, objective=100, capacity=64, max_num_seqs=64)
    assert move([held])[0]["max-num-seqs"] == 128  # no limit known: twice as many
    assert move([oom(0, 256), tried(1, objective=100, capacity=192, max_num_seqs=192)])[0]["max-num-seqs"] == 224
    # DP: the slots are max-num-seqs × DP
    held_dp = tried(0, objective=100, capacity=128, max_num_seqs=64, layout="TP2xDP2", dp=2)
    assert move([held_dp])[0]["max-num-seqs"] == 128
    # the top is the knob's
    assert move([tried(0, objective=100, capacity=200, max_num_seqs=200)])[0]["max-num-seqs"] == 256


@pytest.mark.parametrize("case", ["slo-held", "not-promising", "at-the-top", "next-to-the-limit"])
def test_no_more_sequences_where_they_cannot_pay(case):
    best = tried(0, objective=100, capacity=90, layout="TP4xDP1")
    history = {
        "slo-held": [tried(1, objective=100, capacity=64, max_num_seqs=64),
                     tried(2, objective=99, capacity=40, max_num_seqs=48)],  # a full sweep the SLO held below 48
        "not-promising": [best, tried(1, objective=80, capacity=64, max_num_seqs=64)],
        "at-the-top": [tried(1, objective=100, capacity=256, max_num_seqs=256)],
        "next-to-the-limit": [oom(1, 200), tried(2, objective=100, capacity=192, max_num_seqs=192)],
    }[case]
    out = move(history)
    assert out is None or out[1]["knob"] != "max-num-seqs", out


def test_a_stopped_early_sweep_is_no_evidence_that_the_slo_held():
    history = [tried(0, objective=100, capacity=64, max_num_seqs=64),
               tried(1, objective=98, capacity=30, max_num_seqs=48, status="stopped-early")]
    assert move(history)[0]["max-num-seqs"] == 128


def test_every_neighbour_tried_leaves_the_rest_to_the_sampler():
    history = [tried(0, objective=100, capacity=90)]
    while (out := move(history)) is not None:
        history.append(Tried(len(history), out[0], "COMPLETE", True, True, 50.0, 40, "measured"))
    assert len(history) == 10 and next_move(SPACE, history) is None


class Peak:
    """Throughput grows with max-num-seqs up to 48; above 200 sequences the start runs out of memory."""

    name, label = "peak", "peak-host"

    def __init__(self):
        self.started = []

    def run(self, candidate, incumbent, trial_dir):
        from optkit.tune.study import Outcome

        seqs = candidate.effective["max-num-seqs"]
        self.started.append(seqs)
        if seqs > 200:
            return Outcome("failed-start", reason="RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB",
                           seconds=5.0)
        value = 100.0 * min(seqs, 48) / 48
        return Outcome("measured", value, min(seqs, 48), value * candidate.cards, 30.0, 100.0, "", 60.0, 5)


@pytest.mark.parametrize("moves", [True, False])
def test_the_study_takes_the_moves_unless_told_not_to(tmp_path, moves):
    from click.testing import CliRunner

    from optkit.cli.main import cli
    from optkit.resolve.plan import load_workspace
    from optkit.tune.bundle import load_tune
    from optkit.tune.results import read_trials
    from optkit.tune.study import run_tune

    out = tmp_path / "tune"
    args = ["tune", "qwen3.5-35b", "--target", "910c", "--slo", "tpot_p99<=50ms", "--concurrency", "1,4,8",
            "--sweep-max", "64", "-o", str(out), "--budget", "3", *([] if moves else ["--no-moves"])]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = load_tune(out)
    assert data["moves"] is moves
    lines = []
    peak = Peak()
    run_tune(out, data, peak, load_workspace(), log=lines.append)
    rows = read_trials(out, data)
    assert rows[0].rule_based and not rows[0].why
    if moves:  # the rule-based plan's capacity (48) is the SLO's, not its 64 slots': one knob from it next
        assert "one knob from the best so far, trial 0" in rows[1].why
        changed = [k for k in rows[0].params if rows[1].params.get(k) != rows[0].params[k]]
        assert len(changed) == 1 and rows[1].why.startswith(changed[0])
        assert f"tune: next, {rows[1].why}" in lines
    else:
        assert not any(r.why for r in rows) and not any(line.startswith("tune: next") for line in lines)
