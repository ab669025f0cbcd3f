"""The length mix (--length-mix, length_mix:): its grammar, canonical text, facts, lock round-trip, and what
the measure side does with it (bench.sh runs each class; a ladder refuses a mix)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from optkit.bundle.writer import bundle_files
from optkit.cli.main import cli
from optkit.errors import OptkitError
from optkit.measure.ladder import ladder_files
from optkit.resolve.length_mix import LengthMixError, parse_length_mix
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _plan(workspace, **fields):
    return plan(parse_request({"model": "qwen3.5-35b", "target": "910c", **fields}), workspace)


@pytest.mark.parametrize("text, canonical", [
    ("1024:256:0.7,8192:512:0.3", "1024:256:7,8192:512:3"),
    ("8192:512:3, 1024:256:7", "1024:256:7,8192:512:3"),
    ("1024:256:70,8192:512:30", "1024:256:7,8192:512:3"),
    ("1024:256,4096:128", "1024:256:1,4096:128:1"),
    ("2048:64", "2048:64:1"),
], ids=["decimals", "reordered", "scaled", "default-weights", "one-class"])
def test_two_spellings_of_one_mix_are_one_canonical_text(text, canonical):
    assert parse_length_mix(text).text() == canonical
    assert parse_length_mix(canonical).text() == canonical


@pytest.mark.parametrize("text, message", [
    ("", "empty length mix"),
    ("1024:256,", "class 2 is empty"),
    ("1024", "class 1 '1024' is not INPUT:OUTPUT[:WEIGHT]"),
    ("1024:256:0.7:1", "is not INPUT:OUTPUT[:WEIGHT]"),
    ("0:256", "the input length '0' is not an integer from 1 to"),
    ("1024:x", "the output length 'x' is not an integer"),
    ("1024:256:0", "the weight '0' is not a number above 0"),
    ("1024:256:-1", "the weight '-1' is not a number above 0"),
    ("1024:256:1e3", "the weight '1e3'"),
    ("1024:256:1,1024:256:2", "1024:256 is given twice"),
    (",".join(f"{n}:1" for n in range(1, 18)), "17 classes; a length mix holds at most 16"),
], ids=["empty", "stray-comma", "no-output", "four-parts", "zero-input", "bad-output", "zero-weight",
        "negative-weight", "exponent", "twice", "too-many"])
def test_a_bad_mix_is_refused_naming_the_class(text, message):
    with pytest.raises(LengthMixError) as exc:
        parse_length_mix(text)
    assert message in str(exc.value) and str(exc.value).startswith("--length-mix: ")


def test_the_facts_of_a_mix(workspace):
    facts = _plan(workspace, concurrency=64, length_mix="1024:256:0.7,8192:512:0.3").facts
    assert {k: facts[f"workload.{k}"] for k in ("length_mix", "length_classes", "input_len_max", "output_len_max",
                                                 "total_len_max", "input_len_mean", "output_len_mean",
                                                 "input_len", "output_len", "prefill_step_tokens_max")} == {
        "length_mix": "1024:256:7,8192:512:3", "length_classes": 2, "input_len_max": 8192, "output_len_max": 512,
        "total_len_max": 8704, "input_len_mean": 3175, "output_len_mean": 333,  # ⌈0.7·1024 + 0.3·8192⌉, ⌈0.7·256 + 0.3·512⌉
        "input_len": 8192, "output_len": 512, "prefill_step_tokens_max": 8192 + 64}


def test_the_longest_request_is_one_class_not_the_longest_input_plus_the_longest_output(workspace):
    facts = _plan(workspace, length_mix="8192:16,1024:4096").facts
    assert facts["workload.total_len_max"] == 8208
    assert facts["workload.input_len_max"] + facts["workload.output_len_max"] == 12288


def test_one_length_has_the_facts_of_a_one_class_mix(workspace):
    facts = _plan(workspace, input_len=2000, output_len=100).facts
    assert (facts["workload.length_mix"], facts["workload.length_classes"], facts["workload.input_len_mean"],
            facts["workload.total_len_max"]) == ("", 1, 2000, 2100)


def test_two_spellings_plan_and_lock_alike(workspace):
    a = bundle_files(_plan(workspace, concurrency=64, length_mix="1024:256:0.7,8192:512:0.3"), workspace)
    b = bundle_files(_plan(workspace, concurrency=64, length_mix="8192:512:30, 1024:256:70"), workspace)
    assert a == b


def test_a_mix_round_trips_through_its_lock(workspace):
    request = parse_request({"model": "qwen3.5-35b", "length_mix": "1024:256:7,8192:512:3"})
    assert parse_request(request.dump(mode="json", by_alias=True)) == request
    lock = json.loads(bundle_files(plan(request, workspace), workspace)["optkit.lock.json"])
    assert lock["request"]["length_mix"] == "1024:256:7,8192:512:3"
    assert parse_request(lock["request"]) == request


def test_a_mix_and_a_length_together_are_refused_naming_the_flag():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--length-mix", "1024:256", "--input-len", "2048"])
    assert result.exit_code == 2
    assert "Invalid value for '--length-mix': a length mix holds the input and output lengths; drop input_len 2048" \
        in result.output


def test_a_bad_mix_flag_is_a_usage_error():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--length-mix", "1024:256:x"])
    assert result.exit_code == 2
    assert "Invalid value for '--length-mix': class 1 '1024:256:x': the weight 'x'" in result.output


@pytest.mark.parametrize("body, line, message", [
    ("length_mix: '1024:256:x'\n", 3, "the weight 'x'"),
    ("input_len: 2048\nlength_mix: '1024:256'\n", 4, "drop input_len 2048"),
    ("length_mix: 1024\n", 3, "Input should be a valid string"),  # pydantic strict: YAML reads 1024 as an int
], ids=["bad-weight", "with-input-len", "not-text"])
def test_a_bad_mix_in_a_request_file_names_file_line_and_field(tmp_path, body, line, message):
    path = tmp_path / "request.yaml"
    path.write_text("model: qwen3.5-35b\nconcurrency: 64\n" + body, encoding="utf-8")
    result = CliRunner().invoke(cli, ["facts", "--request", str(path)])
    assert result.exit_code == 1
    assert f"{path}:{line}: length_mix: " in result.output and message in result.output


def test_flags_override_the_files_lengths_as_a_whole(tmp_path):
    path = tmp_path / "request.yaml"
    path.write_text("model: qwen3.5-35b\nlength_mix: '1024:256,4096:128'\n", encoding="utf-8")
    from optkit.cli.options import build_request

    single = build_request(None, path, {"input_len": 100})
    assert (single.length_mix, single.input_len, single.output_len) == (None, 100, 512)
    path.write_text("model: qwen3.5-35b\ninput_len: 2048\n", encoding="utf-8")
    mixed = build_request(None, path, {"length_mix": "512:64"})
    assert (mixed.length_mix, mixed.input_len, mixed.output_len) == ("512:64:1", 512, 64)


def test_bench_sh_runs_each_class_and_one_length_keeps_todays_script(workspace):
    bench = bundle_files(_plan(workspace, concurrency=[4, 64], length_mix="1024:256:0.7,8192:512:0.3"),
                         workspace)["bench.sh"]
    text = bench.decode() if isinstance(bench, bytes) else bench
    assert "run 4 40 1024 256 --temperature 0 --extra-body '{\"min_tokens\":256}'  # weight 7" in text
    assert "run 64 640 8192 512 --temperature 0 --extra-body '{\"min_tokens\":512}'  # weight 3" in text
    assert "these runs bound the classes, not the mix" in text
    single = bundle_files(_plan(workspace), workspace)["bench.sh"]
    single = single.decode() if isinstance(single, bytes) else single
    assert "length mix" not in single and "run 1 20\n" in single


def test_a_ladder_refuses_a_mix(workspace):
    p = _plan(workspace, length_mix="1024:256,4096:128")
    with pytest.raises(OptkitError, match="--length-mix 1024:256:1,4096:128:1: a ladder measures one input and one "
                                          "output length"):
        ladder_files(p, workspace, None)  # refused before the steps are read


def test_a_mix_matches_no_record_measured_at_one_length(workspace):
    from optkit.resolve.objective import _record_matches

    class Workload:
        input_len, output_len, mtp, num_speculative_tokens, sampling, min_tokens, tp, dp, ep, shared_prefix_len = \
            8192, 512, False, 0, "greedy", True, 2, 1, True, 0

    class Record:
        target, model, workload = "910c", "qwen3.5-35b-a3b", Workload

        class release:
            vllm_ascend = "0.23.0"

    single = _plan(workspace, input_len=8192, output_len=512).facts
    mixed = _plan(workspace, length_mix="1024:256,8192:512").facts
    assert _record_matches("qwen3.5-35b-a3b", "910c", single)(Record)
    assert not _record_matches("qwen3.5-35b-a3b", "910c", mixed)(Record)
