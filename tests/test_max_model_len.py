"""``--max-model-len``: the request's context length, decided once (over a page's tuned value), checked against the
workload and the model's context as vLLM checks it, and offered by the fit as a smallest change."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from optkit.errors import RequestError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.resolve.request_record import parse_request

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="module")
def ws():
    return load_workspace()


def _flags(result, flag):
    return [s for s in [*result.serve_args, *result.launch_flags] if s.key.split()[0] == flag]


def test_the_flag_is_on_the_serve_line_once_and_the_fit_reads_it(ws):
    result = plan(parse_request({"model": "qwen3.5-35b", "concurrency": [64], "max_model_len": 32768}), ws)
    (flag,) = _flags(result, "--max-model-len")
    assert flag.key == "--max-model-len 32768" and flag.recipe == "request"
    assert result.fit.inputs.max_model_len == 32768 and "--max-model-len 32768" in result.fit.line()
    from optkit.bundle.writer import bundle_files

    files = bundle_files(result, ws)
    assert files["serve.sh"].decode().count("--max-model-len") == 1
    assert json.loads(files["optkit.lock.json"])["request"]["max_model_len"] == 32768


def test_the_request_wins_over_the_pages_tuned_value(ws):
    import conformance_catalog as cc

    row = next(r for r in cc.release_rows("0.30.0rc2") if r.page == "models/Qwen3-235B-A22B.md" and r.command["line"] == 837)
    paged = plan(Request(**row.request), ws)
    assert [s.key for s in _flags(paged, "--max-model-len")] == ["--max-model-len 135000"]
    mine = plan(Request(**{**row.request, "max_model_len": 131072}), ws)
    assert [(s.key, s.recipe) for s in _flags(mine, "--max-model-len")] == [("--max-model-len 131072", "request")]


def test_what_vllm_would_refuse_is_refused_with_the_fix(ws):
    with pytest.raises(RequestError, match="below the workload's longest request \\(1536 tokens"):
        plan(parse_request({"model": "qwen3.5-35b", "max_model_len": 1000}), ws)
    with pytest.raises(RequestError, match="above qwen3.5-35b-a3b's context .*use at most 262144"):
        plan(parse_request({"model": "qwen3.5-35b", "max_model_len": 300000}), ws)


def test_the_fit_offers_a_shorter_context_when_that_is_what_fits(ws):
    from optkit.resolve.fit import measure, smallest_changes
    from optkit.value import replace

    result = plan(parse_request({"model": "qwen3.5-35b", "concurrency": [8]}), ws)
    inputs = replace(result.fit.inputs, max_model_len=262144 * 16)  # a context no KV cache holds in one sequence
    assert not measure(result.model, result.target, inputs).fits
    changes = smallest_changes(result.model, result.target, inputs)
    assert any(c.startswith("--max-model-len 2048 (the workload's longest request is 1536 tokens") for c in changes)


def _overrides(result) -> dict:
    (flag,) = _flags(result, "--hf-overrides")
    return flag, json.loads(flag.key.split(" ", 1)[1].strip("'"))


@pytest.mark.parametrize("release, line, scaled", [("0.30.0rc2", 837, 524288), ("0.23.0", 871, None)])
def test_a_yarn_override_keeps_its_length_under_the_vllm_that_reads_it_unscaled(ws, release, line, scaled):
    """Qwen3-235B-A22B.md's long-context command (0.30.0rc2 :837, 0.23.0 :871) overrides YaRN factor 4 of 131072
    and serves 135000 tokens. vLLM 0.30.0 takes a YaRN config's max_position_embeddings as already scaled (40960
    here: it would refuse 135000), so optkit adds max_position_embeddings = original × factor, labelled its own;
    under vLLM 0.23.0, which scales the original length itself, the page's override is carried as written."""
    import conformance_catalog as cc

    row = next(r for r in cc.release_rows(release) if r.page == "models/Qwen3-235B-A22B.md"
               and r.command["line"] == line)
    result = plan(Request(**row.request), ws)
    flag, given = _overrides(result)
    assert given["rope_parameters"]["rope_type"] == "yarn"
    assert given.get("max_position_embeddings") == scaled
    assert flag.recipe.endswith(",optkit") == (scaled is not None), flag.recipe


def test_the_context_limit_follows_the_vllm_the_release_pairs_with(ws):
    from optkit.resolve.context_length import context_limit, scaled_overrides, yarn_unscaled

    assert yarn_unscaled("0.30.0") and not yarn_unscaled("0.29.0") and not yarn_unscaled("0.23.0")
    yarn = '{"rope_parameters": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32768}}'
    assert json.loads(scaled_overrides(yarn, "0.30.0"))["max_position_embeddings"] == 131072
    assert scaled_overrides(yarn, "0.23.0") is None  # vLLM 0.23.0 scales the original length itself
    assert scaled_overrides('{"max_position_embeddings": 9, "rope_parameters": {"rope_type": "yarn", "factor": 2, '
                            '"original_max_position_embeddings": 4}}', "0.30.0") is None  # the page's own length
    assert scaled_overrides('{"rope_parameters": {"rope_type": "linear", "factor": 2}}', "0.30.0") is None
    result = plan(parse_request({"model": "qwen3.5-35b", "concurrency": [8]}), ws)
    for vllm, overrides, limit in [("0.30.0", yarn, 262144), ("0.23.0", yarn, 131072),
                                   ("0.30.0", '{"rope_parameters": {"rope_type": "linear", "factor": 2}}', 524288)]:
        result.facts = type(result.facts)({**result.facts.values, "versions.vllm": vllm})
        result.serve_args = [s for s in result.serve_args if not s.key.startswith("--hf-overrides")]
        from optkit.resolve.settings import Setting

        result.serve_args.append(Setting(f"--hf-overrides '{overrides}'", None, "test"))
        assert context_limit(result)[0] == limit, (vllm, overrides)
