"""Model and target profiles: catalog loading, lookup, facts, config.json derivation, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optkit.errors import UnknownName, ValidationFailed
from optkit.resolve.profile_catalog import find_model, find_target, load_models, load_targets
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
    assert sorted(models) == ["qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-397b-a17b", "qwen3.6-27b",
                              "qwen3.6-35b-a3b"]
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
    "model.is_vl", "model.dtype", "model.text_model_type",
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
                "model.dtype": "bfloat16", "model.text_model_type": "qwen3_5_moe_text",
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
                "model.dtype": "bfloat16", "model.text_model_type": "qwen3_5_text",
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
    ids=["qwen3.5-moe-vl", "qwen3-next-mtp-unknown", "llama-dense"],
)
def test_profile_from_fixture(fixture, expected):
    model_id = {"qwen3_5_moe": "Qwen/Qwen3.5-35B-A3B", "llama_dense": None,  # TinyLlama names itself
                "qwen3-next-80b-a3b-instruct": "Qwen/Qwen3-Next-80B-A3B-Instruct"}[fixture]
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
