"""Issue 17's done-means, end to end through the CLI: a throughput plan under an SLO for Qwen3.6-35B-A3B
at c64 — one server, local DP groups (--dp 4, and --dp auto: sized from the load), prefill/decode disaggregation (--pd 1:1) — on 0.23.0 and
0.30.0rc2 writes bundles that `optkit bundle check` passes with the paired vLLM's parser (every role's
argv), and whose scheduling values satisfy the tutorial's rules (Qwen3.6-35B-A3B.md: max-num-seqs × DP
≥ the concurrency; the low-latency row's batched-token range when TPOT is bounded; captured sizes cover
the decode batch)."""

from __future__ import annotations

import json
import shlex

import pytest
from click.testing import CliRunner

from argv_support import flag_value
from optkit.cli.main import cli
from vllm_support import paired_python

CONCURRENCY = 64
SHAPES = {"one-server": [], "dp4": ["--dp", "4"], "dp-auto": ["--dp", "auto"], "pd1:1": ["--pd", "1:1"]}


def _argvs(lock: dict) -> dict[str, list[str]]:
    roles = lock["launch"].get("roles") or {}
    return {role: data["argv"] for role, data in roles.items()} if roles else {"serve": lock["launch"]["argv"]}


@pytest.mark.vllm
@pytest.mark.tree
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("release", ["0.23.0", "0.30.0rc2"])
def test_a_throughput_plan_under_an_slo_passes_the_paired_parser_and_the_tutorial_rules(tmp_path, release, shape):
    out = tmp_path / "b"
    args = ["plan", "qwen3.6-35b", "--target", "910c", "--concurrency", str(CONCURRENCY), "--slo", "tpot_p99<=25ms",
            "--goal", "throughput", "--vllm-ascend-version", release, *SHAPES[shape], "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lock = json.loads((out / "optkit.lock.json").read_text())
    dp = lock["facts"]["parallel.dp"]  # --dp auto: the lock keeps the request as given, the facts the DP chosen
    assert lock["request"]["dp"] == ("auto" if shape == "dp-auto" else dp)
    assert lock["request"]["slo"] == "tpot_p99<=25ms" and lock["request"]["goal"] == "throughput"
    for role, argv in _argvs(lock).items():
        seqs = int(flag_value(argv, "--max-num-seqs"))
        assert seqs * dp >= CONCURRENCY, (role, shlex.join(argv))  # the tutorial's max-num-seqs × DP ≥ concurrency
        tokens = int(flag_value(argv, "--max-num-batched-tokens"))
        assert 1024 <= tokens <= 4096, (role, tokens)  # TPOT bounded: the tutorial's low-latency row, 1024 to 4096
        assert tokens >= seqs, (role, tokens, seqs)  # one step holds the whole decode batch
        if role == "prefill":  # eager, as the PD tutorials run their prefillers (optkit/versions/pd_roles.py)
            assert "--enforce-eager" in argv and "--compilation-config" not in argv, shlex.join(argv)
            continue
        compilation = json.loads(flag_value(argv, "--compilation-config") or "{}")
        sizes = compilation.get("cudagraph_capture_sizes")
        assert sizes and max(sizes) >= seqs and sizes == sorted(set(sizes)), (role, sizes)
    paired_python(lock["versions"]["vllm"])
    check = CliRunner().invoke(cli, ["bundle", "check", str(out)])
    assert check.exit_code == 0, check.output
    vllm_line = next(line for line in check.output.splitlines() if line.split()[1:2] == ["vllm"])
    assert vllm_line.startswith("PASS"), check.output
    if shape == "pd1:1":
        assert "--kv-transfer-config included" in vllm_line
