"""A TP size (or, with expert parallelism, a TP × DP) the model cannot be split over is refused before a
bundle is written, naming the flag, the model's sizes and the sizes that work (optkit.resolve.sharding)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.resolve.plan import load_workspace
from optkit.resolve.sharding import tp_sizes

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = load_workspace()
QWEN35 = ("Qwen3.5-35B-A3B has 16 attention heads and 2 KV heads, and 16 key and 32 value heads in its Gated "
          "DeltaNet layers; --tp must divide 16: 1, 2, 4, 8, 16")
QWEN36 = ("Qwen3.6-27B has 24 attention heads and 4 KV heads, and 16 key and 48 value heads in its Gated DeltaNet "
          "layers; --tp must divide 8: 1, 2, 4, 8")
EP_2x3 = ("--tp 2 × --dp 3 (request fields tp, dp) with expert parallelism: Qwen3.5-35B-A3B has 256 routed experts, "
          "which the 6 EP ranks (TP × DP) must split evenly; with --tp 2, --dp 1, 2, 4, 8, 16, 32, 64, 128 work, or "
          "turn expert parallelism off (--no-ep, ep: false)")


def _config(tmp_path: Path, heads: int, kv: int) -> str:
    """A dense user checkpoint with ``heads`` query and ``kv`` KV heads (TinyLlama's other sizes)."""
    config = json.loads((ROOT / "tests/fixtures/hf/llama_dense/config.json").read_text())
    config.update(num_attention_heads=heads, num_key_value_heads=kv)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize("args, message", [
    pytest.param(["qwen3.5-35b", "--tp", "3"], "--tp 3 (request field tp): " + QWEN35, id="tp3"),
    pytest.param(["qwen3.5-35b", "--tp", "5"], "--tp 5 (request field tp): " + QWEN35, id="tp5"),
    pytest.param(["qwen3.5-35b", "--tp", "32"], "--tp 32 (request field tp): " + QWEN35, id="tp32-two-nodes"),
    pytest.param(["qwen3.5-35b", "--tp", "64"], "--tp 64 (request field tp): " + QWEN35, id="tp64-four-nodes"),
    pytest.param(["qwen3.6-27b", "--tp", "16"], "--tp 16 (request field tp): " + QWEN36, id="gdn-heads-27b"),
    pytest.param(["qwen3.6-27b", "--tp", "3"], "--tp 3 (request field tp): " + QWEN36, id="tp3-27b"),
    pytest.param(["qwen3.5-35b", "--tp", "2", "--dp", "3"], EP_2x3, id="experts-over-ep"),
    pytest.param(["--model-config", "{config:12:3}", "--tp", "4"],
                 "--tp 4 (request field tp): TinyLlama-1.1B-Chat-v1.0 has 12 attention heads and 3 KV heads; --tp must "
                 "divide 12 and divide, or be a multiple of, the 3 KV heads: 1, 3, 6, 12", id="kv-heads-user-config"),
])
def test_a_tp_the_model_cannot_split_over_is_refused(tmp_path, args, message):
    args = [_config(tmp_path, 12, 3) if a == "{config:12:3}" else a for a in args]
    result = CliRunner().invoke(cli, ["plan", *args, "-o", str(tmp_path / "bundle")])
    assert result.exit_code == 1, result.output
    assert result.output == f"optkit: error: {message}\n"
    assert not (tmp_path / "bundle").exists()  # nothing written


@pytest.mark.parametrize("args", [
    pytest.param(["qwen3.5-35b", "--tp", "16"], id="tp16"),
    pytest.param(["qwen3.5-35b", "--tp", "2", "--dp", "3", "--no-ep"], id="dp3-without-ep"),
    pytest.param(["qwen3.6-27b", "--tp", "8"], id="tp8-27b"),
    pytest.param(["qwen3.5-35b", "--tp", "16", "--target", "910b"], id="tp16-across-two-910b-nodes"),
])
def test_a_tp_the_model_splits_over_plans(args):
    result = CliRunner().invoke(cli, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("model, sizes", [
    ("qwen3.5-35b-a3b", [1, 2, 4, 8, 16]), ("qwen3.6-27b", [1, 2, 4, 8]),
], ids=["qwen3.5-35b", "qwen3.6-27b"])
def test_the_tp_sizes_of_the_catalog_models(model, sizes):
    assert tp_sizes(WORKSPACE.models[model]) == sizes


@pytest.mark.parametrize("source", ["request", "lock"])
def test_a_request_file_and_a_lock_get_the_same_check(tmp_path, source):
    runner = CliRunner()
    if source == "request":
        path = tmp_path / "request.yaml"
        path.write_text("model: qwen3.5-35b\ntp: 3\n")
        args = ["plan", "--request", str(path)]
    else:
        assert runner.invoke(cli, ["plan", "qwen3.5-35b", "-o", str(tmp_path / "b")]).exit_code == 0
        path = tmp_path / "b" / "optkit.lock.json"
        lock = json.loads(path.read_text())
        lock["request"]["tp"] = 3  # edited by hand
        path.write_text(json.dumps(lock))
        args = ["plan", "--from-lock", str(path)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 1 and "--tp 3 (request field tp): " + QWEN35 in result.output, result.output
