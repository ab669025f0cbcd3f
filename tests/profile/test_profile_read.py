"""Reading Ascend PyTorch Profiler captures: the forms, one rank and two, step cutting, broken input,
the committed fixture being current, and msprof-analyze reading the same fixtures."""

from __future__ import annotations

import filecmp
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import make_fixture
from optkit.catalog.loader import load_catalog
from optkit.profile import ProfileError
from optkit.profile.analysis import analyze, as_dict

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "one-rank"
CATALOG = list(load_catalog())
DIMS = {"num_layers": 40, "gdn_layers": 30, "full_attention_layers": 10, "vocab_size": 248320, "hidden_size": 2048}


def savings(result) -> dict[str, float]:
    return {f.recipe: f.saving_us for f in result.findings if f.present}


@pytest.mark.parametrize("name", ["one-rank", *make_fixture.VARIANTS])
def test_the_committed_fixture_is_what_the_script_writes(tmp_path, name):
    make_fixture.write(tmp_path / name, **make_fixture.VARIANTS.get(name, {}))
    compared = filecmp.dircmp(HERE / "fixtures" / name, tmp_path / name)
    stack, diffs = [compared], []
    while stack:
        node = stack.pop()
        diffs += node.left_only + node.right_only + node.diff_files
        stack += node.subdirs.values()
    assert diffs == [], "run make_fixture.write_all() (tests/profile/make_fixture.py) and commit the fixtures"


@pytest.mark.parametrize("form", [
    pytest.param(dict(), id="text-no-marks"),
    pytest.param(dict(marks=True), id="text-step-marks"),
    pytest.param(dict(db=True), id="db-no-marks"),
    pytest.param(dict(db=True, marks=True), id="db-step-marks"),
    pytest.param(dict(steps=6), id="text-more-steps"),
])
def test_every_form_gives_the_injected_costs(tmp_path, form):
    make_fixture.write(tmp_path, **form)
    result = analyze(tmp_path, CATALOG, DIMS, "0.23.0")
    rank = result.ranks[0]
    assert rank.form == ("db" if form.get("db") else "text")
    assert rank.prefill_steps == 1 and rank.decode_steps >= 2
    assert savings(result) == pytest.approx(make_fixture.INJECTED, rel=0.02)
    gap = rank.gaps[0]
    assert (gap.op, gap.occurrence, gap.of) == make_fixture.UNEXPLAINED_GAP[:2] + (40,)
    assert gap.gap_us == pytest.approx(make_fixture.UNEXPLAINED_GAP[2], rel=0.02)


BLOCKING = [  # fixture → MinTokens saving (None: no instance), blocking copies per decode step
    pytest.param("one-rank", 1601.0, {"count": 2, "us": 1600.0, "device_idle_us": 1601.0}, id="pageable-copies-idle"),
    pytest.param("stalling-copies", make_fixture.STALLING, {"count": 2, "us": 27.0, "device_idle_us": 187.0},
                 id="small-copies-and-nonzero-syncs-stall-the-device"),
    pytest.param("result-copy", None, {"count": 1, "us": make_fixture.RESULT_COPY, "device_idle_us": 0.0},
                 id="step-end-result-copy-waits-for-the-device"),
]


@pytest.mark.parametrize("name, saving, copies", BLOCKING)
def test_a_blocking_copy_costs_the_device_idle_it_causes(name, saving, copies):
    result = analyze(HERE / "fixtures" / name, CATALOG, DIMS, "0.23.0")
    assert savings(result).get("sampler-min-tokens-spec-mask-cache") == (pytest.approx(saving) if saving else None)
    assert result.ranks[0].decode["blocking_copies"] == pytest.approx(copies)


def test_the_cut_fixture_is_refused_naming_both_files():
    with pytest.raises(ProfileError, match=r"kernel_details.csv: 499 ops, but op_statistic.csv counts 1065"):
        analyze(HERE / "fixtures" / "cut-kernel-details", CATALOG, DIMS, "0.23.0")


def test_step_marks_are_used_when_the_capture_has_them(tmp_path):
    make_fixture.write(tmp_path, marks=True)
    assert analyze(tmp_path, CATALOG, DIMS, "0.23.0").ranks[0].steps_found == "the profiler's step marks"
    make_fixture.write(tmp_path, marks=False)
    assert analyze(tmp_path, CATALOG, DIMS, "0.23.0").ranks[0].steps_found.startswith("no step marks: cut before each")


def test_the_decode_step_decomposition(tmp_path):
    make_fixture.write(tmp_path, marks=True)
    d = analyze(tmp_path, CATALOG, DIMS, "0.23.0").ranks[0].decode
    assert d["blocking_copies"] == {"count": 2, "us": 1600.0, "device_idle_us": 1601.0}  # the relaunch after: 1 µs
    assert d["syncs"] == {"AscendCL@aclrtSynchronizeStream": {"count": 1, "us": 6.0}}
    assert d["streams_us"]["3"] == pytest.approx(40 * 6.0)  # the shared expert's side stream
    assert d["overlap_us"] == pytest.approx(40 * 6.0)  # entirely under the routed experts
    assert d["busy_us"] + d["free_us"] == pytest.approx(d["wall_us"])
    rows = {r.op: r for r in analyze(tmp_path, CATALOG, DIMS, "0.23.0").ranks[0].ops}
    assert rows["l2norm_fwd_kernel2_loop"].layers == "2 per gdn layer (x30)"
    assert rows["FusedInferAttentionScore"].layers == "1 per full-attention layer (x10)"
    assert rows["GroupedMatmul"].layers == "1 per layer (x40)"


def test_two_ranks_are_combined_and_the_slowest_named(tmp_path):
    make_fixture.write(tmp_path, ranks=2)
    result = analyze(tmp_path, CATALOG, DIMS, "0.23.0")
    assert [r.rank for r in result.ranks] == [0, 1]
    assert result.slowest_rank == 1  # the generator makes rank 1 2 % slower
    per_rank = [{f.recipe: f.saving_us for f in r.findings if f.present} for r in result.ranks]
    for recipe, combined in savings(result).items():
        low, high = sorted(p[recipe] for p in per_rank)
        assert low <= combined <= high


def test_a_clean_capture_shows_no_signature_but_still_the_gap(tmp_path):
    make_fixture.write(tmp_path, inject=set())
    result = analyze(tmp_path, CATALOG, DIMS, "0.23.0")
    assert savings(result) == {}
    assert result.ranks[0].gaps[0].op == "AddRmsNorm"


def test_signatures_follow_the_release(tmp_path):
    make_fixture.write(tmp_path, marks=True)
    # on 0.30 the min-tokens mask goes through aclrtMemcpyAsync (pinned), which the capture has 1 of per step
    on_030 = savings(analyze(tmp_path, CATALOG, DIMS, "0.30.0rc2"))
    assert on_030["sampler-min-tokens-spec-mask-cache"] == pytest.approx(5.0)
    on_018 = savings(analyze(tmp_path, CATALOG, DIMS, "0.18.0"))
    assert "blocktable-slot-mapping-cpu-fastpath" not in on_018  # 0.18.0 has no such kernel to look for


def test_without_the_model_layer_counts_every_instance_counts(tmp_path):
    make_fixture.write(tmp_path)
    result = analyze(tmp_path, CATALOG, None, None)
    l2norm = next(f for f in result.findings if f.recipe == "gdn-l2norm-fused-recurrent-kernel")
    assert (l2norm.per_step, l2norm.expected, l2norm.attributed) == (60, None, 60)
    assert "sampler-greedy-bf16-fastpath" not in savings(result)  # 'a vocab_size input' needs the model


def test_json_form_is_deterministic(tmp_path):
    make_fixture.write(tmp_path)
    one = json.dumps(as_dict(analyze(tmp_path, CATALOG, DIMS, "0.23.0", display="x")), sort_keys=True)
    two = json.dumps(as_dict(analyze(tmp_path, CATALOG, DIMS, "0.23.0", display="x")), sort_keys=True)
    assert one == two


def _output(root: Path) -> Path:
    return next(root.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"


def _replace(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


def _drop_table(db: Path, table: str) -> None:
    con = sqlite3.connect(db)
    con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()


def _bad_duration(root: Path) -> None:
    """Row 6 of kernel_details.csv with 'fast' as its Duration(us)."""
    import csv
    import io

    path = _output(root) / "kernel_details.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    rows[5][rows[0].index("Duration(us)")] = "fast"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())


def _cut_kernel_details(root: Path, lines: int | None = None, chars: int | None = None) -> None:
    """kernel_details.csv cut as a partial copy leaves it: after ``lines`` whole lines, or mid-line at ``chars``."""
    path = _output(root) / "kernel_details.csv"
    text = path.read_text()
    path.write_text("".join(text.splitlines(keepends=True)[:lines]) if lines else text[:chars])


def _cut_mid_row(root: Path) -> None:
    """Line 501 of kernel_details.csv cut after its fourth field (then the file goes on: a corrupt copy)."""
    path = _output(root) / "kernel_details.csv"
    lines = path.read_text().splitlines(keepends=True)
    lines[500] = ",".join(lines[500].split(",")[:4]) + "\n"
    path.write_text("".join(lines))


def _elsewhere(root: Path) -> Path:
    (root / "other").mkdir()
    (root / "other" / "notes.txt").write_text("hi")
    return root / "other"


BROKEN = [
    ("not-a-capture", _elsewhere, "no *_ascend_pt folder here or one level down"),
    ("not-analysed", lambda r: shutil.rmtree(_output(r)), "no ASCEND_PROFILER_OUTPUT/ folder: the capture has not "
                                                          "been analysed yet"),
    ("empty-output", lambda r: [p.unlink() for p in _output(r).iterdir()] and None,
     "holds neither trace_view.json / kernel_details.csv nor an ascend_pytorch_profiler*.db"),
    ("truncated-trace", lambda r: (_output(r) / "trace_view.json").write_text('[{"ph": "M",') and None,
     "trace_view.json:1: not valid JSON"),
    ("foreign-json", lambda r: (_output(r) / "trace_view.json").write_text('{"hello": 1}') and None,
     "not a Chrome trace"),
    ("no-process-names", lambda r: (_output(r) / "trace_view.json").write_text(
        '[{"ph": "X", "name": "a", "ts": "1", "dur": 1}]') and None, "no process_name metadata events"),
    ("kernel-column-missing", lambda r: _replace(_output(r) / "kernel_details.csv", "Duration(us)", "Dur"),
     "kernel_details.csv:1: no column 'Duration(us)' in the header"),
    ("kernel-bad-number", _bad_duration, "kernel_details.csv:6: column 'Duration(us)' is 'fast', not a number"),
    ("kernel-cut-at-a-line-boundary", lambda r: _cut_kernel_details(r, lines=500),
     "kernel_details.csv: 499 ops, but op_statistic.csv counts 1065; the files disagree on 13 op types"),
    ("kernel-cut-mid-line", lambda r: _cut_kernel_details(r, chars=40000),
     "the last line has no line end: the file is cut mid-line"),
    ("kernel-row-cut-short", _cut_mid_row,
     "kernel_details.csv:501: this row has 4 fields where the header has 12: the file is cut (or corrupt) here"),
    ("op-statistic-from-another-capture", lambda r: _replace(_output(r) / "op_statistic.csv", "AddRmsNorm,AI_VECTOR_CORE,120",
                                                           "AddRmsNorm,AI_VECTOR_CORE,121"),
     "the files disagree on 1 op type (AddRmsNorm 120 vs 121)"),
    ("only-kernel-details", lambda r: (_output(r) / "trace_view.json").unlink(),
     "kernel_details.csv without trace_view.json"),
    ("broken-profiler-info", lambda r: next(r.glob("*_ascend_pt/profiler_info_0.json")).write_text("{") and None,
     "profiler_info_0.json: not valid JSON"),
    ("same-rank-twice", lambda r: shutil.copytree(next(r.glob("*_ascend_pt")),
                                                  r / "dp0_pp0_tp0_dcp0_ep0_rank0_20251202000100000_ascend_pt") and None,
     "two captures of rank 0"),
]


@pytest.mark.parametrize("name, breaks, message", BROKEN, ids=[c[0] for c in BROKEN])
def test_broken_captures_say_what_is_wrong(tmp_path, name, breaks, message):
    make_fixture.write(tmp_path)
    target = breaks(tmp_path) or tmp_path
    with pytest.raises(ProfileError) as info:
        analyze(target, CATALOG, DIMS, "0.23.0")
    assert message in str(info.value)


def test_a_database_without_its_tables_is_refused(tmp_path):
    make_fixture.write(tmp_path, db=True)
    _drop_table(next(_output(tmp_path).glob("*.db")), "CANN_API")
    with pytest.raises(ProfileError, match="no table CANN_API: not an Ascend PyTorch Profiler database"):
        analyze(tmp_path, CATALOG, DIMS, "0.23.0")


def test_a_capture_without_device_ops_is_refused(tmp_path):
    make_fixture.write(tmp_path)
    path = _output(tmp_path) / "kernel_details.csv"
    path.write_text(path.read_text().splitlines()[0] + "\n")
    with pytest.raises(ProfileError, match="no device ops in the text form"):
        analyze(tmp_path, CATALOG, DIMS, "0.23.0")


def _advisor() -> str | None:
    found = shutil.which("msprof-analyze")
    if found is None and (Path(sys.executable).parent / "msprof-analyze").is_file():
        found = str(Path(sys.executable).parent / "msprof-analyze")
    return found


@pytest.mark.skipif(_advisor() is None, reason="msprof-analyze is not installed (pip install optkit[profile]; "
                                               "scripts/test installs it)")
@pytest.mark.parametrize("form", [pytest.param({}, id="text"), pytest.param({"db": True}, id="db")])
def test_msprof_analyze_reads_the_fixtures(tmp_path, form):
    """MindStudio's own advisor runs on the fixture without an error and reads its device time."""
    if form:
        make_fixture.write(tmp_path / "capture", **form)
        folder = next((tmp_path / "capture").glob("*_ascend_pt"))
    else:
        folder = next(FIXTURE.glob("*_ascend_pt"))
    run = subprocess.run([_advisor(), "advisor", "all", "-d", str(folder), "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "[ERROR]" not in log and "Traceback" not in log, log[-3000:]
    assert list((tmp_path / "out").glob("mstt_advisor_*.html")), log[-3000:]
