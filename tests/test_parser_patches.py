"""What a release's platform patches widen in vLLM's argument validation (``optkit.versions.parser_patches``),
read on the trees, applied by ``bundle check``'s probe; the dotted flags a page carries, written as vLLM reads
them; and the config.json the engine probe builds where the one at hand cannot speak for the served checkpoint."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from optkit.bundle import engine_probe
from optkit.bundle.probe import probe_request, run_probe
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.resolve.settings import _flag
from optkit.versions.parser_patches import PARSER_WIDENINGS, PATCH
from optkit.versions.releases import known_versions
from vllm_support import paired_python

WORKSPACE = load_workspace()
V4_FLASH = {"model": "deepseek-v4-flash", "target": "910c", "vllm_ascend_version": "0.30.0rc2", "tp": 8,
            "quantization": "w8a8", "concurrency": [32]}


def test_a_dotted_flag_keeps_its_fields_underscores():
    assert _flag("--attention-config.indexer-kv-dtype", "int8") == "--attention-config.indexer_kv_dtype int8"
    assert _flag("--max-num-seqs", 16) == "--max-num-seqs 16"
    assert _flag("--disable-hybrid-kv-cache-manager", False) == "--no-disable-hybrid-kv-cache-manager"


@pytest.mark.tree
@pytest.mark.parametrize("release", ["0.28.0rc1", *sorted(PARSER_WIDENINGS)])
def test_each_widening_is_the_releases_own_patch(release):
    from optkit.tree.fetch import fetch

    root = fetch(release).path
    if release not in PARSER_WIDENINGS:  # the release before the patch has none
        assert not (root / PATCH).exists()
        return
    for widening in PARSER_WIDENINGS[release]:
        text, cited = _cited(root, widening.source)
        assert all(f'"{value}",' in cited for value in widening.added), cited
        assert f"from {widening.module} import {widening.cls}" in text
        assert f'__annotations__["{widening.field}"]' in text and "rebuild_dataclass" in text
        platform = (root / "vllm_ascend/platform.py").read_text(encoding="utf-8")
        if widening.choices_source:  # the release appends the widened values to the option's argparse choices
            _, lines = _cited(root, widening.choices_source)
            assert f'get("{widening.option}")' in lines and "choices.append" in lines, lines
        else:
            assert f'get("{widening.option}")' not in platform  # 0.29.0rc1: vLLM's parser keeps refusing it


def _cited(root, source: str) -> tuple[str, str]:
    """(the whole file, the cited lines) of ``file:line`` or ``file:first-last`` in the tree ``root``."""
    path, _, span = source.rpartition(":")
    first, _, last = span.partition("-")
    text = (root / path).read_text(encoding="utf-8")
    return text, "\n".join(text.splitlines()[int(first) - 1:int(last or first)])


def test_every_release_optkit_knows_is_said_to_widen_or_not():
    """The widening runs from 0.29.0rc1 to the newest release optkit knows: a newer release must be added (and its
    tree read by the test above)."""
    from packaging.version import Version

    known = known_versions()
    assert {Version(r) for r in PARSER_WIDENINGS} == {v for v in known if v >= Version("0.29.0rc1")}


def test_the_probe_asks_for_a_widening_only_where_the_argv_sets_its_field():
    result = plan(Request(**V4_FLASH), WORKSPACE)
    from optkit.bundle.launch import Launch

    argv = Launch(result, WORKSPACE).argv
    if "--attention-config.indexer_kv_dtype" not in argv:
        pytest.skip("the page carries no indexer dtype for this layout")
    lock = {"launch": {"argv": ["vllm", "serve", *argv], "argv_sources": ["optkit"] * (len(argv) + 2),
                       "parameters": {}}, "versions": {"vllm": "0.30.0", "vllm_ascend": "0.30.0rc2"}}
    assert [w["field"] for w in probe_request(lock)["widen"]] == ["indexer_kv_dtype"]
    lock["launch"]["argv"] = ["vllm", "serve", "model"]
    assert "widen" not in probe_request(lock)


@pytest.mark.vllm
def test_vllms_parser_takes_the_widened_value_only_with_the_widening():
    python = paired_python("0.30.0")
    argv = ["model", "--attention-config.indexer_kv_dtype", "int8"]
    request = {"argv": argv, "labels": ["optkit", "page:X.md:1", "page:X.md:1"], "vllm": "0.30.0"}
    refused = run_probe(request, python)
    assert refused["status"] == "failed" and refused["problems"][0]["blame"] == ["page:X.md:1"]
    widened = run_probe({**request, "widen": [w.data() for w in PARSER_WIDENINGS["0.30.0rc2"]][:1]}, python)
    assert widened["status"] == "ok", widened["problems"]
    assert widened["widened"] == [f"AttentionConfig.indexer_kv_dtype + int8 ({PATCH}:60)"]


@pytest.mark.vllm
@pytest.mark.parametrize("release, accepted", [("0.30.0rc2", True), ("0.29.0rc1", False)])
def test_a_widened_choice_is_taken_only_where_the_release_widens_the_parsers_choices(release, accepted):
    """--kv-cache-dtype int8: 0.30.0rc2 widens CacheConfig and the option's argparse choices; 0.29.0rc1 widens the
    field only, so vLLM's parser still refuses the choice there, as it would with vllm-ascend installed."""
    argv = ["model", "--kv-cache-dtype", "int8"]
    request = {"argv": argv, "labels": ["optkit", "page:X.md:2", "page:X.md:2"], "vllm": "0.30.0",
               "widen": [w.data() for w in PARSER_WIDENINGS[release] if w.option == "--kv-cache-dtype"]}
    result = run_probe(request, paired_python("0.30.0"))
    assert (result["status"] == "ok") == accepted, result["problems"]


@pytest.mark.parametrize("config, args, kept, note", [
    ({"quantization_config": {"quant_method": "fp8"}, "max_position_embeddings": 8},
     {"quantization": "ascend", "max_model_len": 4}, {"max_position_embeddings": 8}, "quantization_config (fp8"),
    ({"quantization_config": {"quant_method": "fp8"}, "max_position_embeddings": 8},
     {"quantization": None, "max_model_len": 4}, {"quantization_config": {"quant_method": "fp8"},
                                                  "max_position_embeddings": 8}, None),
    ({"text_config": {"hidden_size": 1}}, {"quantization": None, "max_model_len": 32768},
     {"text_config": {"hidden_size": 1}}, "--max-model-len 32768 against the model's context"),
])
def test_the_engine_probes_config_speaks_only_for_what_it_knows(tmp_path, config, args, kept, note):
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    parsed, not_run = SimpleNamespace(**args), []
    with engine_probe._model_dir(str(tmp_path), parsed, not_run) as model_dir:
        written = json.loads((tmp_path.__class__(model_dir) / "config.json").read_text(encoding="utf-8"))
    assert written == kept
    assert [n for n in not_run if note and note in n] if note else not not_run
    assert (parsed.max_model_len is None) == (note is not None and note.startswith("--max-model-len"))
