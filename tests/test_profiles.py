"""Model and target profiles: catalog loading, lookup, facts, config.json derivation, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optkit.errors import UnknownName, ValidationFailed
from optkit.resolve.profile_catalog import find_checkpoint, find_model, find_target, load_models, load_targets
from optkit.resolve.profile_records import ModelProfileRecord
from optkit.resolve.hf_config import profile_from_hf_config
from optkit.resolve.profiles import ModelProfile

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
TARGETS = ROOT / "targets"
HF = Path(__file__).parent / "fixtures" / "hf"

# Fields that describe the architecture (not the catalog entry's names or provenance).
ARCHITECTURE = [
    "hf_model_type", "text_model_type", "architecture", "num_layers", "gdn_layers",
    "full_attention_layers", "hidden_size", "vocab_size", "num_attention_heads", "num_kv_heads",
    "head_dim", "is_moe", "num_experts", "experts_per_token", "shared_experts", "mtp_layers",
    "is_vl", "dtype",
]


@pytest.fixture(scope="module")
def models():
    return load_models(MODELS)


@pytest.fixture(scope="module")
def targets():
    return load_targets(TARGETS)


# --- catalog ----------------------------------------------------------------------------------


def test_catalogs_load(models, targets):
    assert sorted(models) == sorted(path.stem for path in (Path(__file__).parents[1] / "models").glob("*.yaml"))
    assert {"qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-397b-a17b", "deepseek-v3.2", "gpt-oss-120b"} <= set(models)
    assert sorted(targets) == ["300i-duo", "910b", "910c", "950"]
    assert all(m.source == "catalog" and m.sources for m in models.values())


@pytest.mark.parametrize(
    "name, expected",
    [
        ("qwen3.5-35b-a3b", "qwen3.5-35b-a3b"),
        ("qwen3.5-35b", "qwen3.5-35b-a3b"),
        ("Qwen3.5-35B", "qwen3.5-35b-a3b"),
        ("qwen3.6-27b", "qwen3.6-27b"),
        ("QWEN3.6-27B", "qwen3.6-27b"),
    ],
    ids=["id", "alias", "alias-mixed-case", "dense-id", "dense-upper"],
)
def test_find_model(models, name, expected):
    assert find_model(models, name).id == expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("910c", "910c"), ("910C", "910c"), ("a3", "910c"), ("910_93", "910c"),
        ("910b", "910b"), ("Ascend910B", "910b"),
    ],
    ids=["id", "upper", "alias-a3", "alias-soc-family", "910b", "910b-alias"],
)
def test_find_target(targets, name, expected):
    assert find_target(targets, name).id == expected


@pytest.mark.parametrize(
    "finder, catalog, name, fragment",
    [
        (find_model, "models", "qwen3.5-35b-a3", "unknown model 'qwen3.5-35b-a3'; did you mean 'qwen3.5-35b-a3b'"),
        (find_target, "targets", "910d", "unknown target '910d'; did you mean"),
    ],
    ids=["model-near-miss", "target-near-miss"],
)
def test_find_unknown(request, finder, catalog, name, fragment):
    with pytest.raises(UnknownName) as exc:
        finder(request.getfixturevalue(catalog), name)
    assert fragment in str(exc.value)


# --- facts ------------------------------------------------------------------------------------

MODEL_FACT_KEYS = {
    "model.id", "model.family", "model.hf_model_type", "model.architecture", "model.num_layers",
    "model.gdn_layers", "model.full_attention_layers", "model.hidden_size", "model.vocab_size",
    "model.is_moe", "model.num_experts", "model.moe.shared_experts", "model.mtp_head",
    "model.is_vl", "model.dtype", "model.text_model_type", "model.attention", "model.remote_code",
}


@pytest.mark.parametrize(
    "model_id, expected",
    [
        (
            "qwen3.5-35b-a3b",
            {
                "model.family": "qwen3.5-moe", "model.hf_model_type": "qwen3_5_moe",
                "model.architecture": "Qwen3_5MoeForConditionalGeneration", "model.num_layers": 40,
                "model.gdn_layers": 30, "model.full_attention_layers": 10, "model.hidden_size": 2048,
                "model.vocab_size": 248320, "model.is_moe": True, "model.num_experts": 256,
                "model.moe.shared_experts": True, "model.mtp_head": "present", "model.is_vl": True,
                "model.dtype": "bfloat16", "model.text_model_type": "qwen3_5_moe_text", "model.attention": "gdn-hybrid",
                "model.remote_code": False,
            },
        ),
        (
            "qwen3.6-27b",
            {
                "model.family": "qwen3.6-dense", "model.hf_model_type": "qwen3_5",
                "model.architecture": "Qwen3_5ForConditionalGeneration", "model.num_layers": 64,
                "model.gdn_layers": 48, "model.full_attention_layers": 16, "model.hidden_size": 5120,
                "model.vocab_size": 248320, "model.is_moe": False, "model.num_experts": 0,
                "model.moe.shared_experts": False, "model.mtp_head": "present", "model.is_vl": True,
                "model.dtype": "bfloat16", "model.text_model_type": "qwen3_5_text", "model.attention": "gdn-hybrid",
                "model.remote_code": False,
            },
        ),
    ],
    ids=["qwen3.5-35b-a3b", "qwen3.6-27b"],
)
def test_model_facts(models, model_id, expected):
    facts = models[model_id].facts()
    assert set(facts) == MODEL_FACT_KEYS
    assert facts == {"model.id": model_id, **expected}


@pytest.mark.parametrize(
    "target_id, variant, expected",
    [
        ("910c", "752t", ("ascend910_93", "ascend910_9391", "A3", 2, 16, "752t")),
        ("910c", "560T", ("ascend910_93", "ascend910_9391", "A3", 2, 16, "560t")),
        ("910c", None, ("ascend910_93", "ascend910_9391", "A3", 2, 16, "")),
        ("910b", None, ("ascend910b", "ascend910b1", "A2", 1, 8, "")),
    ],
    ids=["910c-752t", "910c-560t-upper", "910c-no-variant", "910b"],
)
def test_target_facts(targets, target_id, variant, expected):
    keys = ["target.soc_family", "target.soc_version", "target.generation", "target.dies_per_card",
            "target.devices_per_node", "target.variant"]
    facts = targets[target_id].facts(variant)
    assert set(facts) == {"target.id", *keys, "target.hbm_gib_per_device", "target.interconnect.within_node",
                          "target.interconnect.across_nodes"}  # tests/test_targets.py checks those three
    assert facts["target.id"] == target_id
    assert tuple(facts[k] for k in keys) == expected


def test_target_unknown_variant(targets):
    with pytest.raises(UnknownName, match="unknown variant of target 910c '750t'; did you mean '752t'"):
        targets["910c"].facts("750t")


def test_target_soc_versions(targets):
    assert targets["910c"].soc_versions == [
        "ascend910_9391", "ascend910_9381", "ascend910_9372", "ascend910_9392", "ascend910_9382", "ascend910_9362",
    ]
    assert [v.id for v in targets["910c"].variants] == ["752t", "560t"]


# --- config.json derivation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture, catalog_id",
    [("qwen3_5_moe", "qwen3.5-35b-a3b"), ("qwen3.6-27b", "qwen3.6-27b"), ("qwen3.5-27b", "qwen3.6-27b"),
     ("qwen3.5-27b", "qwen3.5-27b"), ("qwen3.6-35b-a3b", "qwen3.6-35b-a3b"), ("qwen3.6-35b-a3b", "qwen3.5-35b-a3b"),
     ("qwen3.5-397b-a17b", "qwen3.5-397b-a17b")],
    ids=["qwen3.5-35b-a3b", "qwen3.6-27b", "qwen3.5-27b-same-architecture", "qwen3.5-27b",
         "qwen3.6-35b-a3b", "qwen3.6-35b-a3b-same-architecture", "qwen3.5-397b-a17b"],
)
def test_published_config_matches_catalog_architecture(models, fixture, catalog_id):
    derived = profile_from_hf_config(HF / fixture / "config.json", "Qwen/Some-Checkpoint")
    catalog = models[catalog_id]
    assert {f: getattr(derived, f) for f in ARCHITECTURE} == {f: getattr(catalog, f) for f in ARCHITECTURE}
    assert (derived.id, derived.hf_id, derived.family, derived.source) == (
        "some-checkpoint", "Qwen/Some-Checkpoint", "custom", "config.json")


# Each catalog profile and the config.json fixture it is derived from (tests/fixtures/hf/README.md, or the
# folder's SOURCE.md, says where each came from): the whole profile but its names, family and provenance is
# the derivation. A fixture folder names the profile it derives in its CATALOG file (one catalog id).
CATALOG_DERIVATIONS = {
    "qwen3.5-27b": "qwen3.5-27b", "qwen3.5-35b-a3b": "qwen3_5_moe", "qwen3.5-397b-a17b": "qwen3.5-397b-a17b",
    "qwen3.6-27b": "qwen3.6-27b", "qwen3.6-35b-a3b": "qwen3.6-35b-a3b",
    **{(folder / "CATALOG").read_text().strip(): folder.name for folder in sorted(HF.iterdir())
       if (folder / "CATALOG").is_file()},
}


def test_every_fixture_says_where_it_came_from():
    listed = (HF / "README.md").read_text()
    for folder in sorted(d for d in HF.iterdir() if d.is_dir()):
        assert f"`{folder.name}/`" in listed or (folder / "SOURCE.md").is_file(), folder.name
NOT_DERIVED = {"id", "aliases", "family", "source", "sources", "params_b", "checkpoints", "tutorials"}


def test_every_catalog_profile_has_a_fixture(models):
    assert sorted(CATALOG_DERIVATIONS) == sorted(models)


@pytest.mark.parametrize("catalog_id", sorted(CATALOG_DERIVATIONS))
def test_catalog_profile_is_its_config_derivation(models, catalog_id):
    catalog = models[catalog_id]
    derived = profile_from_hf_config(HF / CATALOG_DERIVATIONS[catalog_id] / "config.json", catalog.hf_id)
    compared = sorted(set(ModelProfile.model_fields) - NOT_DERIVED)
    assert {f: getattr(derived, f) for f in compared} == {f: getattr(catalog, f) for f in compared}
    assert derived.id == catalog.id  # the hub name the config is published under gives the catalog id


@pytest.mark.parametrize(
    "fixture, expected",
    [
        (
            "qwen3_5_moe",
            dict(id="qwen3.5-35b-a3b", hf_id="Qwen/Qwen3.5-35B-A3B", text_model_type="qwen3_5_moe_text",
                 gdn_layers=30, is_vl=True, mtp_layers=1),
        ),
        (
            "qwen3-next-80b-a3b-instruct",
            dict(id="qwen3-next-80b-a3b-instruct", hf_model_type="qwen3_next", gdn_layers=36, full_attention_layers=12,
                 is_moe=True, num_experts=512, experts_per_token=10, shared_experts=True, mtp_layers=None),
        ),
        (
            "glm-5.3-flash",  # KDA layers from layer_types (0-based lists), head_dim 0 under MLA read as absent
            dict(id="glm-5.3-flash", hf_model_type="glm5_next", kda_layers=34, full_attention_layers=11,
                 gdn_layers=0, head_dim=256, kv_lora_rank=512, mtp_layers=1, is_vl=True, num_experts=288),
        ),
        (
            "internvl3.5-38b",  # the language model under llm_config (vLLM's _CONFIG_ATTRS_MAPPING)
            dict(id="internvl3_5-38b", hf_model_type="internvl_chat", text_model_type="qwen3", num_layers=64,
                 hidden_size=5120, num_kv_heads=8, is_vl=True, is_moe=False, max_position_embeddings=40960),
        ),
        (
            "qwen3-omni-30b-a3b-thinking",  # the thinker's text_config; its vision_config makes it multimodal
            dict(id="qwen3-omni-30b-a3b-thinking", hf_model_type="qwen3_omni_moe", num_layers=48, hidden_size=2048,
                 num_experts=128, experts_per_token=8, shared_experts=False, is_vl=True, mtp_layers=0),
        ),
        (
            "gemma-4-26b-a4b-it",  # top-k spelled top_k_experts
            dict(id="gemma-4-26b-a4b-it", num_experts=128, experts_per_token=8, intermediate_size=2112,
                 moe_intermediate_size=704, sliding_window=1024, sliding_window_layers=25, full_attention_layers=5),
        ),
        (
            "dots3-note",  # sliding_window_size; no MTP key: vLLM's dots3_note config class defaults it to 1
            dict(id="dots3-note-prev", hf_model_type="dots3_note", sliding_window=513, sliding_window_layers=33,
                 full_attention_layers=13, mtp_layers=1, kv_lora_rank=512, num_experts=256, shared_experts=True),
        ),
        (
            "llama_dense",
            dict(
                id="tinyllama-1.1b-chat-v1.0", hf_id="TinyLlama/TinyLlama-1.1B-Chat-v1.0", hf_model_type="llama",
                text_model_type="llama", architecture="LlamaForCausalLM", num_layers=22, gdn_layers=0,
                full_attention_layers=22, hidden_size=2048, vocab_size=32000, num_attention_heads=32,
                num_kv_heads=4, head_dim=64, is_moe=False, num_experts=0, experts_per_token=0,
                shared_experts=False, mtp_layers=0, is_vl=False, dtype="bfloat16",
            ),
        ),
    ],
    ids=["qwen3.5-moe-vl", "qwen3-next-mtp-unknown", "glm5-next-kda-mla", "internvl-llm-config",
         "qwen3-omni-thinker", "gemma4-moe-top-k-experts", "dots3-note-window-and-mtp-default", "llama-dense"],
)
def test_profile_from_fixture(fixture, expected):
    model_id = {"qwen3_5_moe": "Qwen/Qwen3.5-35B-A3B", "llama_dense": None,  # TinyLlama names itself
                "qwen3-next-80b-a3b-instruct": "Qwen/Qwen3-Next-80B-A3B-Instruct",
                "glm-5.3-flash": "zai-org/GLM-5.3-Flash", "internvl3.5-38b": "OpenGVLab/InternVL3_5-38B",
                "qwen3-omni-30b-a3b-thinking": "Qwen/Qwen3-Omni-30B-A3B-Thinking",
                "gemma-4-26b-a4b-it": "google/gemma-4-26B-A4B-it", "dots3-note": "dots-studio/dots3-note-prev"}[fixture]
    profile = profile_from_hf_config(HF / fixture, model_id)  # the directory works as well as the file
    assert {k: getattr(profile, k) for k in expected} == expected
    assert profile.family == "custom"


def _write_json(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ckpt" / "config.json"
    path.parent.mkdir()
    path.write_text(text)
    return path


def _config(**overrides) -> dict:
    base = {
        "_name_or_path": "org/some", "architectures": ["SomeForCausalLM"], "model_type": "some", "hidden_size": 1024,
        "num_hidden_layers": 8, "num_attention_heads": 8, "vocab_size": 1000,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize(
    "config, expected",
    [
        (_config(full_attention_interval=4), dict(gdn_layers=6, full_attention_layers=2)),
        (_config(), dict(gdn_layers=0, full_attention_layers=8, num_kv_heads=8, head_dim=128, dtype="unknown")),
        (
            _config(num_local_experts=8, num_experts_per_tok=2, torch_dtype="float16"),
            dict(is_moe=True, num_experts=8, experts_per_token=2, shared_experts=False, dtype="float16"),
        ),
        (
            _config(model_type="deepseek_v3", n_routed_experts=64, num_experts_per_tok=6, n_shared_experts=2,
                    num_nextn_predict_layers=1),
            dict(is_moe=True, num_experts=64, experts_per_token=6, shared_experts=True, mtp_layers=1),
        ),
        (
            _config(model_type="qwen3_5_moe_text", num_experts=4, num_experts_per_tok=2,
                    shared_expert_intermediate_size=0),
            dict(text_model_type="qwen3_5_moe_text", shared_experts=False, is_vl=False),
        ),
        (
            _config(_name_or_path="/some/dir/My_Model/"),
            dict(id="my_model", hf_id="/some/dir/My_Model/"),
        ),
        (_config(_name_or_path=None, name_or_path="tclf90/Qwen3-Coder-Next-E336"),
         dict(id="qwen3-coder-next-e336", hf_id="tclf90/Qwen3-Coder-Next-E336")),
        (_config(model_type="qwen3_5", mtp_num_hidden_layers=0), dict(mtp_layers=0)),
        (_config(model_type="qwen3_5", mtp_num_hidden_layers=2), dict(mtp_layers=2)),
        (_config(model_type="qwen3_5"), dict(mtp_layers=None)),
        (_config(model_type="llama", mtp_num_hidden_layers=1), dict(mtp_layers=0)),
    ],
    ids=["interval-no-layer-types", "plain-dense-defaults", "mixtral-style", "deepseek-style",
         "text-only-qwen", "local-name-or-path", "name-or-path-key", "mtp-zero", "mtp-two", "mtp-key-absent",
         "mtp-key-vllm-does-not-read"],
)
def test_profile_derivation_rules(tmp_path, config, expected):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(config, indent=2)))
    assert {k: getattr(profile, k) for k in expected} == expected


# --- bad files --------------------------------------------------------------------------------


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def _write_catalog(tmp_path: Path, source: Path, old: str = "", new: str = "") -> tuple[Path, Path, str]:
    """Copy one catalog file into tmp_path, with ``old`` replaced by ``new``."""
    text = source.read_text(encoding="utf-8")
    assert old in text
    text = text.replace(old, new, 1)
    path = tmp_path / source.name
    path.write_text(text, encoding="utf-8")
    return tmp_path, path, text


@pytest.mark.parametrize(
    "loader, source, old, new, field, message, hint",
    [
        (load_models, MODELS / "qwen3.5-35b-a3b.yaml", "num_layers: 40", "num_layrs: 40",
         "num_layrs", "unknown field 'num_layrs'", "did you mean 'num_layers'?"),
        (load_models, MODELS / "qwen3.5-35b-a3b.yaml", "hidden_size: 2048", "hidden_size: wide",
         "hidden_size", "Input should be a valid integer", ""),
        (load_models, MODELS / "qwen3.6-27b.yaml", "num_experts: 0", "num_experts: 16",
         "num_experts", "must be > 0 exactly when is_moe is true (is_moe is false)", ""),
        (load_models, MODELS / "qwen3.6-27b.yaml", "full_attention_layers: 16", "full_attention_layers: 17",
         "full_attention_layers", "gdn_layers + full_attention_layers = 65 exceeds num_layers 64", ""),
        (load_models, MODELS / "qwen3.5-35b-a3b.yaml", "experts_per_token: 8", "experts_per_token: 300",
         "experts_per_token", "exceeds num_experts (256)", ""),
        (load_targets, TARGETS / "910c.yaml", "    description: \"910C '752T'", "    descripton: \"910C '752T'",
         "variants[0].descripton", "unknown field 'descripton'", "did you mean 'description'?"),
        (load_targets, TARGETS / "910c.yaml", "default_soc_version: ascend910_9391",
         "default_soc_version: ascend910_93", "default_soc_version", "'ascend910_93' is not one of soc_versions",
         ""),
        (load_targets, TARGETS / "910c.yaml", "npu_smi_name_pattern: '", "npu_smi_name_pattern: '(",
         "npu_smi_name_pattern", "not a valid regular expression", ""),
        (load_targets, TARGETS / "910b.yaml", "aliases: [ascend910b, a2]", "aliases: [ascend910b, A2]",
         "aliases[1]", "String should match pattern", ""),
    ],
    ids=["unknown-key", "wrong-type", "experts-without-moe", "too-many-layers", "top-k-over-experts",
         "nested-unknown-key", "default-soc-not-listed", "bad-regex", "uppercase-alias"],
)
def test_bad_catalog_file(tmp_path, loader, source, old, new, field, message, hint):
    directory, path, text = _write_catalog(tmp_path, source, old, new)
    with pytest.raises(ValidationFailed) as exc:
        loader(directory)
    where = f"{path}:{_line_of(text, new.split(':')[0].strip())}: {field}: "
    found = [str(p) for p in exc.value.problems if str(p).startswith(where)]
    assert len(found) == 1, str(exc.value)
    assert found[0].startswith(where + message) and found[0].endswith(f"({hint})" if hint else ""), found[0]


def test_missing_field_names_file_and_field(tmp_path):
    directory, path, text = _write_catalog(tmp_path, MODELS / "qwen3.6-27b.yaml", "head_dim: 256\n", "")
    with pytest.raises(ValidationFailed) as exc:
        load_models(directory)
    assert str(exc.value) == f"{path}:{_line_of(text, 'id:')}: head_dim: missing required field 'head_dim'"


def test_duplicate_alias_names_both_files(tmp_path):
    _write_catalog(tmp_path, MODELS / "qwen3.5-35b-a3b.yaml")
    other = MODELS / "qwen3.6-27b.yaml"
    _, path, text = _write_catalog(tmp_path, other, "aliases: [qwen36-27b]", "aliases: [qwen36-27b, qwen3.5-35b]")
    first = tmp_path / "qwen3.5-35b-a3b.yaml"
    with pytest.raises(ValidationFailed) as exc:
        load_models(tmp_path)
    line, first_line = _line_of(text, "aliases:"), _line_of(first.read_text(), "aliases:")
    assert str(exc.value) == (
        f"{path}:{line}: aliases[1]: model name 'qwen3.5-35b' is already used by model 'qwen3.5-35b-a3b' "
        f"in {first}:{first_line} (names must be unique across the catalog)"
    )


def test_duplicate_id_across_files(tmp_path):
    _, first, text = _write_catalog(tmp_path, TARGETS / "910b.yaml")
    copy = tmp_path / "zz-copy.yaml"
    copy.write_text(text.replace("[ascend910b, a2]", "[]"))
    with pytest.raises(ValidationFailed) as exc:
        load_targets(tmp_path)
    line = _line_of(text, "id:")
    assert str(exc.value) == (
        f"{copy}:{line}: id: target name '910b' is already used by target '910b' in {first}:{line} "
        "(names must be unique across the catalog)"
    )


def test_missing_catalog_directory(tmp_path):
    with pytest.raises(ValidationFailed, match="model catalog directory not found"):
        load_models(tmp_path / "nope")


def _qwen_without(key: str) -> str:
    config = json.loads((HF / "qwen3_5_moe" / "config.json").read_text())
    del config["text_config"][key]
    return json.dumps(config, indent=2)


def _qwen_with(key: str, value) -> str:
    config = json.loads((HF / "qwen3_5_moe" / "config.json").read_text())
    config["text_config"][key] = value
    return json.dumps(config, indent=2)


@pytest.mark.parametrize(
    "text, needle, field, message",
    [
        (_qwen_without("hidden_size"), '"text_config"', "text_config.hidden_size", "required key is missing"),
        (_qwen_with("vocab_size", "248320"), '"vocab_size"', "text_config.vocab_size",
         "must be an integer (got '248320')"),
        (_qwen_without("num_experts_per_tok"), '"text_config"', "text_config.num_experts_per_tok",
         "required key is missing"),
        (_qwen_with("layer_types", ["linear_attention"] * 3), '"layer_types"', "text_config.layer_types",
         "has 3 entries but num_hidden_layers is 40"),
        (json.dumps(_config(architectures=None), indent=2), None, "architectures", "required key is missing"),
        # absurd but parseable: rejected with the allowed range, naming the key as written
        (_qwen_with("num_experts", -1), '"num_experts"', "text_config.num_experts",
         "must be between 0 and 1048576 (got -1)"),
        (_qwen_with("num_experts_per_tok", 0), '"num_experts_per_tok"', "text_config.num_experts_per_tok",
         "must be between 1 and 1048576 (got 0)"),
        (_qwen_with("hidden_size", 1e30), '"hidden_size"', "text_config.hidden_size",
         "must be an integer (got 1e+30)"),
        (_qwen_with("hidden_size", 10 ** 40), '"hidden_size"', "text_config.hidden_size",
         "must be between 1 and 1048576 (got an integer of about 41 digits)"),
        (_qwen_with("num_hidden_layers", 0), '"num_hidden_layers"', "text_config.num_hidden_layers",
         "must be between 1 and 10000 (got 0)"),
        (_qwen_with("mtp_num_hidden_layers", -3), '"mtp_num_hidden_layers"', "text_config.mtp_num_hidden_layers",
         "must be between 0 and 64 (got -3)"),
        (_qwen_with("num_key_value_heads", True), '"num_key_value_heads"', "text_config.num_key_value_heads",
         "must be an integer (got True)"),
        # cross-field problems name the config keys, not optkit's field names
        (_qwen_with("num_experts_per_tok", 300), '"num_experts_per_tok"', "text_config.num_experts_per_tok",
         "exceeds text_config.num_experts (256)"),
    ],
    ids=["missing-hidden-size", "wrong-type-vocab", "moe-without-top-k", "layer-types-length",
         "missing-architectures", "negative-experts", "zero-top-k", "float-hidden", "huge-hidden", "zero-layers",
         "negative-mtp", "bool-kv-heads", "top-k-over-experts"],
)
def test_bad_config_json(tmp_path, text, needle, field, message):
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path, "Qwen/Qwen3.5-35B-A3B")
    line = _line_of(text, needle) if needle else 1
    assert str(exc.value) == f"{path}:{line}: {field}: {message}"


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"a": 1,\n "a": 2}', ":2: a: key 'a' appears twice, at lines 1 and 2 (keep one of them)"),
        ("{\n  \"hidden_size\": " + "9" * 5000 + "\n}",
         ":2: an integer of 5000 digits; no number optkit reads has more than 100"),
        ("[" * 100_000 + "]" * 100_000, ":1: nested more than 64 levels deep"),
    ],
    ids=["duplicate-key", "5000-digit-integer", "deep-nesting"],
)
def test_unreadable_config_json(tmp_path, text, message):
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path, "org/x")
    assert str(exc.value).startswith(f"{path}{message}"), str(exc.value)


def test_non_utf8_config_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes('{"model_type": "llama"}'.encode("utf-16"))
    with pytest.raises(ValidationFailed, match=r"config.json:1: is UTF-16 encoded; optkit reads UTF-8"):
        profile_from_hf_config(path, "org/x")


def test_config_without_a_name_asks_for_model_id(tmp_path):
    """A config in a folder called configs/ is not the model 'configs': without a name field, --model-id."""
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "qwen3.6-27b" / "config.json").read_text())
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(folder / "config.json")
    assert str(exc.value) == (f"{folder / 'config.json'}: names no model (it has no _name_or_path) (give --model-id "
                              "NAME: the Hugging Face repo id or the path `vllm serve` loads, also used as the "
                              "served model name)")
    assert profile_from_hf_config(folder / "config.json", "Qwen/Qwen3.6-27B").id == "qwen3.6-27b"


def test_invalid_json_names_line_and_column():
    path = HF / "broken" / "config.json"
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path, "org/x")
    assert str(exc.value) == f"{path}:5: invalid JSON: Expecting ',' delimiter (line 5, column 3)"


def test_missing_config_file(tmp_path):
    with pytest.raises(ValidationFailed, match=rf"^{tmp_path / 'config.json'}: cannot read: No such file"):
        profile_from_hf_config(tmp_path)


def test_profiles_are_frozen(models):
    assert isinstance(models["qwen3.6-27b"], ModelProfileRecord)
    with pytest.raises(AttributeError, match="frozen"):
        models["qwen3.6-27b"].num_layers = 1


# --- other spellings: Hunyuan's per-layer lists (moe_topk, num_shared_expert), Hy3's num_shared_experts ---


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (dict(num_experts=64, moe_topk=[8] * 8, num_shared_expert=[1] * 8, moe_intermediate_size=[3072] * 8),
         dict(is_moe=True, experts_per_token=8, shared_experts=True, moe_intermediate_size=3072,
              shared_expert_intermediate_size=3072)),
        (dict(num_experts=64, moe_topk=[8] * 8, num_shared_expert=[0] * 8),
         dict(experts_per_token=8, shared_experts=False, shared_expert_intermediate_size=None)),
        (dict(num_experts=64, num_experts_per_tok=4, moe_topk=[8] * 8), dict(experts_per_token=4)),
        (dict(num_experts=192, num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=1536),
         dict(shared_experts=True, shared_expert_intermediate_size=1536)),
    ],
    ids=["uniform-lists", "no-shared-expert", "standard-key-wins", "hy3-num-shared-experts"],
)
def test_per_layer_lists_read_as_one_value(tmp_path, overrides, expected):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(_config(**overrides), indent=2)))
    assert {k: getattr(profile, k) for k in expected} == expected


def test_per_layer_list_that_varies_is_a_problem(tmp_path):
    text = json.dumps(_config(num_experts=64, moe_topk=[8] * 7 + [4]), indent=2)
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path)
    line = _line_of(text, '"moe_topk"')
    assert str(exc.value) == f"{path}:{line}: moe_topk: must be an integer (got [8, 8, 8, 8, 8, 8, 8, 4])"


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (dict(n_routed_experts=8, num_experts_per_tok=2, mlp_layer_types=["dense", "dense"] + ["sparse"] * 6),
         dict(first_dense_layers=2)),
        (dict(n_routed_experts=8, num_experts_per_tok=2, first_k_dense_replace=3, mlp_layer_types=["dense"] * 8),
         dict(first_dense_layers=3)),
        (dict(mlp_layer_types=["dense"] * 8), dict(first_dense_layers=0)),
        (dict(model_type="hy_v4", num_nextn_predict_layers=1), dict(mtp_layers=1)),
        (dict(model_type="minimax_m3_vl", num_mtp_modules=2), dict(mtp_layers=2)),
        (dict(model_type="minimax_m3_vl"), dict(mtp_layers=None)),
        (dict(num_local_experts=8, num_experts_per_tok=2, moe_layer_freq=[0, 0, 0] + [1] * 5),
         dict(first_dense_layers=3)),
        (dict(n_routed_experts=8, num_experts_per_tok=2, moe_layer_freq=1), dict(first_dense_layers=0)),
    ],
    ids=["mlp-layer-types", "first-k-dense-replace-wins", "dense-model", "hy-v4-mtp", "minimax-m3-mtp",
         "minimax-m3-mtp-unknown", "moe-layer-freq-list",
         "moe-layer-freq-stride"],
)
def test_first_dense_layers_and_vllm_030_mtp(tmp_path, overrides, expected):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(_config(**overrides), indent=2)))
    assert {k: getattr(profile, k) for k in expected} == expected


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (dict(num_local_experts=8, num_experts_per_tok=2, intermediate_size=14336),
         dict(intermediate_size=None, moe_intermediate_size=14336, shared_expert_intermediate_size=None)),
        (dict(num_local_experts=128, num_experts_per_tok=4, n_shared_experts=1, intermediate_size=3072,
              dense_intermediate_size=12288, shared_intermediate_size=3072),
         dict(intermediate_size=12288, moe_intermediate_size=3072, shared_expert_intermediate_size=3072)),
        (dict(n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2, intermediate_size=4096,
              moe_intermediate_size=512),
         dict(intermediate_size=4096, moe_intermediate_size=512, shared_expert_intermediate_size=1024)),
        (dict(intermediate_size=4096), dict(intermediate_size=4096, moe_intermediate_size=None)),
    ],
    ids=["mixtral-expert-width", "minimax-m3-dense-and-shared", "deepseek-style", "dense"],
)
def test_ffn_widths(tmp_path, overrides, expected):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(_config(**overrides), indent=2)))
    assert {k: getattr(profile, k) for k in expected} == expected


# --- MLA and DeepSeek-V4 derivation (DeepSeek-V3.x, Kimi-K2.x, DeepSeek-V4) -------------------------------

_MLA = dict(model_type="deepseek_v3", n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
            moe_intermediate_size=256, kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=32,
            num_nextn_predict_layers=1)


@pytest.mark.parametrize(
    "config, expected",
    [
        (_config(**_MLA), dict(kv_lora_rank=64, qk_rope_head_dim=16, head_dim=48, shared_expert_intermediate_size=256,
                               mtp_layers=1, index_head_dim=None, kv_compression_layers={})),
        (_config(**{**_MLA, "head_dim": 80}), dict(head_dim=80)),
        (_config(**{**_MLA, "qk_nope_head_dim": None, "qk_rope_head_dim": None}), dict(head_dim=128, qk_rope_head_dim=None)),
        (_config(**{**_MLA, "n_shared_experts": 2, "moe_intermediate_size": 1408}),
         dict(shared_expert_intermediate_size=2816)),
        (_config(**{**_MLA, "first_k_dense_replace": 3, "intermediate_size": 4096}),
         dict(first_dense_layers=3, intermediate_size=4096)),
        (_config(**{**_MLA, "kv_lora_rank": None}), dict(kv_lora_rank=None, qk_rope_head_dim=None, head_dim=128)),
        (_config(**{**_MLA, "model_type": "deepseek_v32", "index_head_dim": 128, "index_n_heads": 64,
                    "index_topk": 2048}), dict(index_head_dim=128, mtp_layers=1)),
        (_config(**{**_MLA, "model_type": "kimi_k2", "num_nextn_predict_layers": 0}), dict(mtp_layers=0)),
        (_config(**{**_MLA, "model_type": "kimi_k2", "num_nextn_predict_layers": 1}), dict(mtp_layers=0)),
        (_config(**{**_MLA, "model_type": "deepseek_v41"}), dict(mtp_layers=0)),
        (_config(model_type="kimi_k3", text_config={**_config(), "num_nextn_predict_layers": 2}), dict(mtp_layers=2)),
    ],
    ids=["mla-head-dim-is-nope-plus-rope", "explicit-head-dim-wins", "mla-without-head-widths", "two-shared-experts",
         "leading-dense-layers", "no-kv-lora-rank-no-mla", "v32-indexer", "kimi-k2-no-mtp-key",
         "kimi-k2-no-drafter", "v41-dspark-stages-are-not-mtp", "kimi-k3-mtp-under-text-config"],
)
def test_mla_derivation(tmp_path, config, expected):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(config, indent=2)))
    assert {k: getattr(profile, k) for k in expected} == expected


_V4 = dict(model_type="deepseek_v4", num_hidden_layers=6, head_dim=512, num_key_value_heads=1, sliding_window=128,
           n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=256,
           qk_rope_head_dim=64, index_head_dim=128, num_nextn_predict_layers=1)


@pytest.mark.parametrize(
    "ratios, expected",
    [
        ([0, 0, 4, 128, 4, 128], {0: 2, 4: 2, 128: 2}),
        ([128, 128, 4, 128, 4, 128, 4, 0, 0], {4: 2, 128: 4}),  # entries past the layers are MTP/DSpark stages
        ([4] * 6, {4: 6}),
    ],
    ids=["flash-layout", "tail-not-counted", "one-ratio"],
)
def test_v4_compressed_layers(tmp_path, ratios, expected):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(_config(**_V4, compress_ratios=ratios))))
    assert profile.kv_compression_layers == expected
    assert (profile.head_dim, profile.num_kv_heads, profile.sliding_window, profile.sliding_window_layers) == (
        512, 1, 128, 0)
    assert (profile.kv_lora_rank, profile.index_head_dim, profile.mtp_layers) == (None, 128, 1)
    assert profile.facts()["model.attention"] == "csa-hybrid"


@pytest.mark.parametrize(
    "ratios, message",
    [
        ([0, 4, 128], "has 3 entries but num_hidden_layers is 6"),
        ([0, 4, "128", 4, 128, 4], "must be a list of integers between 0 and 1048576 (got [0, 4, '128', 4, 128, 4])"),
        ([0, 4, -1, 4, 128, 4], "must be a list of integers between 0 and 1048576 (got [0, 4, -1, 4, 128, 4])"),
        ({"0": 2}, "must be a list of integers between 0 and 1048576 (got {'0': 2})"),
    ],
    ids=["shorter-than-layers", "string-entry", "negative-entry", "not-a-list"],
)
def test_v4_bad_compress_ratios(tmp_path, ratios, message):
    text = json.dumps(_config(**_V4, compress_ratios=ratios), indent=2)
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path)
    assert str(exc.value) == f"{path}:{_line_of(text, 'compress_ratios')}: compress_ratios: {message}"


@pytest.mark.parametrize(
    "model_id, attention",
    [("qwen3.5-35b-a3b", "gdn-hybrid"), ("qwen3.6-27b", "gdn-hybrid"), ("deepseek-r1", "mla"),
     ("deepseek-v3.2", "mla"), ("kimi-k2.5", "mla"), ("kimi-k2-thinking", "mla"), ("deepseek-v4-flash", "csa-hybrid"),
     ("deepseek-v4-pro", "csa-hybrid"), ("kimi-k3", "kda-hybrid")],
)
def test_catalog_attention_fact(models, model_id, attention):
    assert models[model_id].facts()["model.attention"] == attention


@pytest.mark.parametrize(
    "config, attention",
    [
        (_config(), "gqa"),
        (_config(num_key_value_heads=2, sliding_window=512,
                 layer_types=["sliding_attention"] * 6 + ["full_attention"] * 2), "sliding-hybrid"),
        (_config(sliding_window=4096), "gqa"),  # every layer windowed (Mistral-style): no hybrid
        (_config(**_MLA), "mla"),
        (_config(full_attention_interval=4), "gdn-hybrid"),
    ],
    ids=["gqa", "sliding-hybrid", "all-sliding", "mla", "gdn-hybrid"],
)
def test_attention_fact_of_config(tmp_path, config, attention):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(config, indent=2)))
    assert profile.facts()["model.attention"] == attention


def test_attention_fact_choices_are_the_kinds():
    from optkit.catalog.factspec import FACTS
    assert set(FACTS["model.attention"].choices) == {"gdn-hybrid", "kda-hybrid", "csa-hybrid", "mla", "sliding-hybrid",
                                                     "gqa"}


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("kv_compression_layers: {0: 2, 4: 21, 128: 20}", "kv_compression_layers: {0: 2, 4: 21, 128: 19}",
         "counts 42 layers but num_layers is 43"),
        ("kv_compression_layers: {0: 2, 4: 21, 128: 20}", "kv_compression_layers: {0: 2, 4: 41, 128: 0}",
         "ratios must be >= 0 and counts > 0"),
    ],
    ids=["layers-do-not-add-up", "zero-count"],
)
def test_bad_kv_compression_layers(tmp_path, old, new, message):
    directory, path, text = _write_catalog(tmp_path, MODELS / "deepseek-v4-flash.yaml", old, new)
    with pytest.raises(ValidationFailed) as exc:
        load_models(directory)
    assert str(exc.value) == f"{path}:{_line_of(text, 'kv_compression_layers')}: kv_compression_layers: {message}"


@pytest.mark.parametrize(
    "sources, expected",
    [
        ([2, 3], {0: 4, 4: 1, 128: 1}),  # V4.1: only the KV source layers keep a compressed cache
        ([], {0: 6}),
    ],
    ids=["v41-shared-kv-sources", "no-sources"],
)
def test_v41_shared_kv_sources(tmp_path, sources, expected):
    config = _config(**{**_V4, "model_type": "deepseek_v41"}, compress_ratios=[0, 0, 4, 128, 4, 128, 0],
                     kv_source_layer_ids=sources)
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(config)))
    assert profile.kv_compression_layers == expected
    assert profile.mtp_layers == 0  # V4.1's num_nextn_predict_layers counts DSpark stages: vLLM drafts no MTP


@pytest.mark.parametrize(
    "sources, message",
    [([2, 6], "must be a list of integers between 0 and 5 (got [2, 6])"),
     ("2,4", "must be a list of integers between 0 and 5 (got '2,4')")],
    ids=["id-past-the-layers", "not-a-list"],
)
def test_v41_bad_kv_sources(tmp_path, sources, message):
    text = json.dumps(_config(**_V4, compress_ratios=[0] * 6, kv_source_layer_ids=sources), indent=2)
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path)
    assert str(exc.value) == f"{path}:{_line_of(text, 'kv_source_layer_ids')}: kv_source_layer_ids: {message}"


def test_v41_catalog_profile_keeps_compressed_kv_on_four_layers(models):
    profile = models["deepseek-v4.1-flash"]
    assert profile.kv_compression_layers == {0: 36, 1: 1, 2: 3}
    # vLLM flattens V4.1's vision_config away, so vllm-ascend's is_vl_model() is False
    assert (profile.is_vl, profile.mtp_layers, profile.facts()["model.attention"]) == (False, 0, "csa-hybrid")


_KIMI_LINEAR = _config(model_type="kimi_k3", text_config=_config(
    model_type="kimi_linear", num_hidden_layers=8, kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=32,
    num_experts=16, num_experts_per_token=4, num_shared_experts=2, moe_intermediate_size=128, first_k_dense_replace=1,
    num_nextn_predict_layers=0, linear_attn_config={"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8]}))


def test_kimi_linear_derivation(tmp_path):
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(_KIMI_LINEAR, indent=2)))
    assert (profile.kda_layers, profile.full_attention_layers, profile.gdn_layers) == (6, 2, 0)
    assert (profile.num_experts, profile.experts_per_token, profile.shared_experts) == (16, 4, True)
    assert (profile.shared_expert_intermediate_size, profile.first_dense_layers, profile.mtp_layers) == (256, 1, 0)
    assert profile.facts()["model.attention"] == "kda-hybrid"


@pytest.mark.parametrize(
    "layers, message",
    [([0, 1, 2], "must be a list of layer numbers from 1 to 8 (got [0, 1, 2])"),
     ([1, 2, 9], "must be a list of layer numbers from 1 to 8 (got [1, 2, 9])"),
     (None, "must be a list of layer numbers from 1 to 8 (got None)")],
    ids=["numbered-from-one", "past-the-layers", "missing"],
)
def test_kimi_linear_bad_layer_lists(tmp_path, layers, message):
    config = json.loads(json.dumps(_KIMI_LINEAR))
    config["text_config"]["linear_attn_config"]["kda_layers"] = layers
    text = json.dumps(config, indent=2)
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path)
    line = _line_of(text, '"kda_layers"')
    assert str(exc.value) == f"{path}:{line}: text_config.linear_attn_config.kda_layers: {message}"


def test_kda_and_full_layers_cannot_exceed_the_model(tmp_path):
    config = json.loads(json.dumps(_KIMI_LINEAR))
    config["text_config"]["linear_attn_config"]["kda_layers"] = [1, 2, 3, 4, 5, 6, 7]
    text = json.dumps(config, indent=2)
    path = _write_json(tmp_path, text)
    with pytest.raises(ValidationFailed) as exc:
        profile_from_hf_config(path)
    line = _line_of(text, '"kda_layers"')
    assert str(exc.value) == (f"{path}:{line}: text_config.linear_attn_config.kda_layers: "
                              "gdn + full-attention + KDA layers = 9 exceed text_config.num_hidden_layers 8")


@pytest.mark.parametrize("model_type, is_vl", [("deepseek_v41", False), ("kimi_k25", True)],
                         ids=["v41-flattened-by-vllm", "kimi-k25-nested"])
def test_is_vl_is_vllm_ascends_answer(tmp_path, model_type, is_vl):
    config = _config(model_type=model_type, text_config=_config(**_MLA), vision_config={"num_hidden_layers": 2})
    profile = profile_from_hf_config(_write_json(tmp_path, json.dumps(config)))
    assert profile.is_vl is is_vl
    assert any(note.startswith("is_vl: ") for note in profile.sources) is not is_vl


# --- Hub ids: the profile's hf_id or any of its checkpoints' ids (issue 26, item 3) --------------------------------


@pytest.mark.parametrize(
    "name, expected, quantization",
    [
        ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", "bf16"),  # the hf_id is also the page's BF16 row
        ("qwen/qwen3-235b-a22b", "qwen3-235b-a22b", "bf16"),
        ("Modelers_Park/Qwen3-235B-A22B-w8a8", "qwen3-235b-a22b", "w8a8"),
        ("Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp", "qwen3.5-397b-a17b", "w8a8"),
        ("ECO-TECH/QWEN3.5-397B-A17B-W4A4-MXFP4", "qwen3.5-397b-a17b", "w4a4-mxfp4"),
        ("vllm-ascend/Qwen3-32B-W4A4", "qwen3-32b", "w4a4"),
        ("Eco-Tech/Qwen3-8B-w8a8sc-310-vllm", "qwen3-8b", "w8a8sc"),
        ("Qwen/Qwen3-8B", "qwen3-8b", None),  # the hf_id; the page's BF16 row is the Modelers mirror
        ("qwen3-235b", "qwen3-235b-a22b", None),
        ("Qwen3-Next", "qwen3-next-80b-a3b-instruct", None),
    ],
    ids=["hf-id-is-bf16-row", "hf-id-lowercase", "modelers-w8a8", "eco-tech-w8a8", "uppercase-mxfp4", "w4a4",
         "w8a8sc", "hf-id-without-row", "alias", "alias-mixed-case"],
)
def test_find_checkpoint(models, name, expected, quantization):
    profile, checkpoint = find_checkpoint(models, name)
    assert profile.id == expected
    assert (checkpoint.quantization if checkpoint else None) == quantization
    assert find_model(models, name) is profile


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("Eco-Tech/Qwen3.5-397B-A17B-w8a8-mpt", "did you mean 'Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp'"),
        ("Qwen/Qwen3-235B-A22", "did you mean 'Qwen/Qwen3-235B-A22B'"),
        ("Modelers_Park/Qwen3-32", "did you mean 'Modelers_Park/Qwen3-32B'"),
        ("qwen/qwen3-235b-a2", "did you mean 'Qwen/Qwen3-235B-A22B'"),  # compared case-insensitively
        ("QWEN3.5-35B-A3", "did you mean 'qwen3.5-35b-a3b'"),
        ("zephyr", "known: deepseek-r1, deepseek-v3, "),  # nothing close: the profiles, not the checkpoint ids
    ],
    ids=["checkpoint-typo", "hf-id-typo", "mirror-typo", "hf-id-typo-lowercase", "id-typo-uppercase",
         "nothing-close"],
)
def test_unknown_hub_id_lists_close_matches(models, name, fragment):
    with pytest.raises(UnknownName) as exc:
        find_checkpoint(models, name)
    assert str(exc.value).startswith(f"unknown model {name!r}; ") and fragment in str(exc.value)


def test_every_page_row_names_one_model(models):
    """A Hub id names one profile: no checkpoint id is listed under two models (the loader refuses it)."""
    owners: dict[str, str] = {}
    for profile in models.values():
        for hub_id in {profile.hf_id.lower(), *(c.id.lower() for c in profile.checkpoints)} - {""}:
            assert owners.setdefault(hub_id, profile.id) == profile.id, hub_id


def test_hub_id_of_two_models_is_refused(tmp_path):
    """The later file (catalog files load in name order) is told which model the Hub id already names."""
    _, first, first_text = _write_catalog(tmp_path, MODELS / "qwen3-14b.yaml", "  - {id: Eco-Tech/Qwen3-14B-w8a8sc-310-vllm,",
                                          "  - {id: vllm-ascend/Qwen3-32B-W8A8,")
    _, path, text = _write_catalog(tmp_path, MODELS / "qwen3-32b.yaml")
    with pytest.raises(ValidationFailed) as exc:
        load_models(tmp_path)
    assert str(exc.value) == (
        f"{path}:{_line_of(text, 'id: vllm-ascend/Qwen3-32B-W8A8')}: checkpoints[2].id: 'vllm-ascend/Qwen3-32B-W8A8' "
        f"already names model 'qwen3-14b' ({first}:{_line_of(first_text, 'id: qwen3-14b')}) (a Hub id must name one "
        "model of the catalog)")


# Each tutorial page of vllm-ascend 0.30.0rc2 this catalog covers, and the profiles that name it (issue 26, item 3):
# a profile for every LLM the page serves. Pages left out are in the report of the slice that added these.
TUTORIAL_PROFILES = {
    "Qwen3-235B-A22B.md": ["qwen3-235b-a22b"], "Qwen3-30B-A3B.md": ["qwen3-30b-a3b"],
    "Qwen3-Coder-30B-A3B.md": ["qwen3-coder-30b-a3b-instruct"],
    "Qwen3-Dense.md": ["qwen3-0.6b", "qwen3-1.7b", "qwen3-14b", "qwen3-32b", "qwen3-4b", "qwen3-8b"],
    "Qwen3-Next.md": ["qwen3-next-80b-a3b-instruct"],
    "Qwen3-VL-235B-A22B-Instruct.md": ["qwen3-vl-235b-a22b-instruct"],
    "Qwen3-VL-30B-A3B-Instruct.md": ["qwen3-vl-30b-a3b-instruct"],
    "Qwen-VL-Dense.md": ["qwen3-vl-32b-instruct", "qwen3-vl-8b-instruct"],
    "Qwen3.8-27B.md": ["qwen3.8-27b"], "Qwen3.8-2.4T-A95B.md": ["qwen3.8-2.4t-a95b"],
    "Qwen3.8-Flash-Next.md": ["qwen3.8-flash-next"],
    "Qwen3.5-27B-Qwen3.6-27B.md": ["qwen3.5-27b", "qwen3.6-27b"],
    "Gemma4.md": ["gemma-4-26b-a4b-it", "gemma-4-31b-it"], "Minitron-8B-Base.md": ["minitron-8b-base"],
    "InternVL3.5.md": ["internvl3_5-241b-a28b", "internvl3_5-38b"],
    "Qwen3-Omni-30B-A3B-Thinking.md": ["qwen3-omni-30b-a3b-thinking"],
    "LLaVA-OneVision-Qwen2-0.5B-OV.md": ["llava-onevision-qwen2-0.5b-ov-hf"],
    "DeepSeek-V4-Flash-Vision.md": ["deepseek-v4-flash-vision-exp"], "GLM5.3-Flash.md": ["glm-5.3-flash"],
}


@pytest.mark.parametrize("page", sorted(TUTORIAL_PROFILES))
def test_tutorial_page_has_its_profiles(models, page):
    assert sorted(m.id for m in models.values() if page in m.tutorials) == TUTORIAL_PROFILES[page]


# Profiles whose page lists no unquantized weights.
ONLY_QUANTIZED_ROWS = {"qwen3.8-flash-next": "Qwen3.8-Flash-Next.md:29 lists the W8A8 weights only",
                       "deepseek-v4-flash-vision-exp": "DeepSeek-V4-Flash-Vision.md:34 lists W8A8; :35, the "
                       "original FP8 weights with FP4 experts, is a format optkit does not name",
                       "glm-5.3-flash": "GLM5.3-Flash.md:39 and :43 list MXFP8 and W8A8 weights only",
                       "internvl3_5-38b": "InternVL3.5.md:23 lists the W8A8 weights only",
                       "internvl3_5-241b-a28b": "InternVL3.5.md:24 lists the W8A8 weights only"}


@pytest.mark.parametrize("model_id", sorted(m for pages in TUTORIAL_PROFILES.values() for m in pages))
def test_checkpoints_cite_their_pages_row(models, model_id):
    """Every checkpoint cites a row of a page the profile lists, and the page's BF16 row is a bf16 checkpoint."""
    profile = models[model_id]
    assert profile.checkpoints
    prefix = "vllm-ascend 0.30.0rc2 docs/source/tutorials/models/"
    for checkpoint in profile.checkpoints:
        page, _, line = checkpoint.source.removeprefix(prefix).partition(":")
        assert checkpoint.source.startswith(prefix) and page in profile.tutorials and line.isdigit(), checkpoint
    if model_id not in ONLY_QUANTIZED_ROWS:
        assert "bf16" in {c.quantization for c in profile.checkpoints}



@pytest.mark.parametrize(
    "model_type, expected",
    [("qwen3_5_text", 1), ("qwen3_5_moe_text", 1), ("qwen3_5_moe", 1), ("qwen4_exp", 1), ("llama", 0)],
    ids=["qwen3.5-text-only", "qwen3.5-moe-text-only", "qwen3.5-moe", "qwen4-exp", "not-an-mtp-model-type"],
)
def test_text_only_qwen35_config_counts_its_mtp_head(tmp_path, model_type, expected):
    """vLLM 0.30.0 reads mtp_num_hidden_layers of a text-only Qwen3.5 config too (speculative.py:904-919):
    Qwen3.8-2.4T-A95B ships that kind and its tutorial serves it with qwen3_5_mtp; and of a Qwen4-Exp config
    (speculative.py:832-840), Qwen3.8-Flash-Next's."""
    config = _config(model_type=model_type, mtp_num_hidden_layers=1)
    assert profile_from_hf_config(_write_json(tmp_path, json.dumps(config))).mtp_layers == expected
