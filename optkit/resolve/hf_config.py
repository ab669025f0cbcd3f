"""A model profile derived from a user's own Hugging Face ``config.json``.

``profile_from_hf_config`` reads the language-model fields (under ``text_config`` for multimodal
configs, ``llm_config`` or ``thinker_config.text_config`` where the file nests it there: ``LM_PATHS``, else the
top level) and validates a ``ModelProfile`` of family ``custom``, returned as a
record. Every missing, mistyped or impossible key becomes one located problem that names the key
as the file spells it (``text_config.num_hidden_layers``), all reported together.

The profile carries the architecture facts that recipes key on (model_type, GDN/full-attention
split, MoE shape, MTP head), never a name, so a checkpoint of a catalog architecture gets the
same decisions as the catalog's profile. Whether it ships an MTP head is read the way vLLM reads it
(``VLLM_MTP_LAYER_KEYS``: 0.23.0's map and the model types 0.30.0 adds); where the file cannot tell, the
profile says "unknown".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optkit.catalog.frozen import freeze
from optkit.catalog.jsonio import load_json_text
from optkit.catalog.textfile import read_text
from optkit.errors import Location, Problem, ValidationFailed
from optkit.resolve.hf_layers import LayerShapes, shown as _shown
from optkit.resolve.profile_records import ModelProfileRecord
from optkit.resolve.profiles import RECORDS, ModelProfile

VLLM_MTP_LAYER_KEYS: dict[str, str] = {
    **dict.fromkeys(("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"), "mtp_num_hidden_layers"),
    **dict.fromkeys(
        ("qwen3_next", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_mtp", "glm_moe_dsa", "glm4_moe",
         "glm4_moe_lite", "glm_ocr", "ernie4_5_moe", "pangu_ultra_moe", "mimo", "exaone_moe", "exaone4_5",
         "hy_v3", "hy_v4", "kimi_k3", "longcat_flash", "step3p5", "nemotron_h"),
        "num_nextn_predict_layers"),
    "minimax_m3_vl": "num_mtp_modules",
    "glm5_next": "num_nextn_predict_layers",
    "dots3_note": "num_nextn_predict_layers",
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), "mtp_num_hidden_layers"),
}
"""Top-level ``model_type`` → the config key vLLM takes the MTP layer count from
(``SpeculativeConfig.hf_config_override``: vLLM 0.23.0 vllm/config/speculative.py:300-522, vLLM 0.30.0
:647-1053; vllm-ascend 0.23.0 maps qwen3_5 / qwen3_5_moe the same way in
patch/platform/patch_speculative_config.py:104-113). A model_type not listed has no MTP drafter.
vLLM 0.30.0 adds kimi_k3 (its ``text_config.num_nextn_predict_layers``, :702-710; absent in 0.23.0) and
deepseek_v41, left out here: its ``num_nextn_predict_layers`` counts DSpark draft stages and
``method="mtp"`` is rejected for it (:682-693). DeepSeek-V3/V3.2/V4 read the same key in both releases
(0.30.0 drafts V3.2 with its own DeepseekV32MTPModel, 0.23.0 with DeepSeekMTPModel: the count is the same);
kimi_k2 and kimi_k25 (Kimi-K2.x) have no MTP drafter in either. vLLM 0.30.0 also reads ``hy_v4``
(-> hy_v4_mtp, from ``num_nextn_predict_layers``) and ``minimax_m3_vl`` (-> minimax_m3_mtp, from the language
model's ``num_mtp_modules``), the text-only Qwen3.5 model types qwen3_5_text / qwen3_5_moe_text
("checkpoints that ship only the text config", vllm/config/speculative.py:904-919; Qwen3.8-2.4T-A95B's config is
one), the Qwen4-Exp types of Qwen3.8-Flash-Next (speculative.py:832-840, text_config.mtp_num_hidden_layers) and
glm5_next (GLM-5.3-Flash: -> glm5_next_mtp, from ``num_nextn_predict_layers``, speculative.py:1046-1050) and
dots3_note (-> dots3_note_mtp, speculative.py:651-662; its default: ``MTP_DEFAULTS``)."""

FLATTENED_MULTIMODAL = {"deepseek_v41": "vLLM 0.30.0 transformers_utils/configs/deepseek_v41.py:10-16"}
"""Top-level ``model_type`` whose vLLM config class flattens ``text_config`` and ``vision_config`` onto
one object: vLLM's hf_config is then its hf_text_config and carries no vision_config, so vllm-ascend's
is_vl_model() (0.30.0rc2 vllm_ascend/utils.py:1066-1094) is False although the file has a vision tower."""

LM_PATHS = (("text_config",), ("llm_config",), ("thinker_config", "text_config"))
"""Where a multimodal config.json keeps its language model, first found wins: ``text_config``; ``llm_config``
(InternVL's ``internvl_chat``: vLLM 0.30.0 reads it as the text config, vllm/transformers_utils/config.py:174-176
``_CONFIG_ATTRS_MAPPING``); the thinker's ``text_config`` (Qwen3-Omni's ``qwen3_omni_moe``: vLLM serves its thinker,
vllm/model_executor/models/registry.py:583-586, whose language model is ``thinker_config.text_config``,
transformers_utils/config.py:637-641)."""

VISION_PATHS = (("vision_config",), ("thinker_config", "vision_config"))
"""Where a config.json keeps a vision tower: vllm-ascend 0.30.0rc2's is_vl_model() takes a config whose text
config is a sub-config as multimodal, and falls back to a top-level ``thinker_config`` or ``vision_config``
(vllm_ascend/utils.py:1066-1094)."""

MTP_DEFAULTS = {"dots3_note": 1}
"""Model types whose vLLM config class sets the MTP layer count the file leaves out: Dots3-Note's
``num_nextn_predict_layers`` defaults to 1 ("absent from existing Note config.json files", vLLM 0.30.0
vllm/transformers_utils/configs/dots3_note.py:12-24), drafted as dots3_note_mtp (vllm/config/speculative.py:651-662)."""

NAME_KEYS = ("_name_or_path", "name_or_path")
"""config.json keys that name the checkpoint (written by ``save_pretrained``; absent from most
hub configs)."""

# (lowest, highest) for each integer key: values outside cannot describe a real checkpoint.
_RANGES = {
    "num_hidden_layers": (1, 10_000), "hidden_size": (1, 1 << 20), "vocab_size": (1, 1 << 24),
    "num_attention_heads": (1, 1 << 14), "num_key_value_heads": (1, 1 << 14),
    "linear_num_key_heads": (1, 1 << 14), "linear_num_value_heads": (1, 1 << 14), "head_dim": (1, 1 << 16),
    "full_attention_interval": (0, 10_000), "experts": (0, 1 << 20), "num_experts_per_tok": (1, 1 << 20),
    "shared_expert_intermediate_size": (0, 1 << 24), "n_shared_experts": (0, 1 << 20), "mtp": (0, 64),
    "kv_lora_rank": (0, 1 << 16), "qk_rope_head_dim": (0, 1 << 16), "sliding_window": (0, 1 << 26),
    "intermediate_size": (0, 1 << 24), "moe_intermediate_size": (0, 1 << 24), "first_k_dense_replace": (0, 10_000),
    "routed_expert_hidden_size": (0, 1 << 24), "q_lora_rank": (0, 1 << 20), "o_lora_rank": (0, 1 << 20),
    "o_groups": (0, 1 << 16), "index_n_heads": (0, 1 << 16), "dspark_block_size": (0, 1 << 8),
    "ngram_size": (0, 64), "heads_per_ngram": (0, 1 << 10), "ngram_vocab_size_base": (0, 1 << 40),
    "ple_embed_dim": (0, 1 << 20),
    "max_position_embeddings": (0, 1 << 30), "moe_topk": (1, 1 << 20), "num_shared_expert": (0, 1 << 20),
    "num_shared_experts": (0, 1 << 20), "dense_intermediate_size": (0, 1 << 24),
    "shared_intermediate_size": (0, 1 << 24), "compress_ratios": (0, 1 << 20), "qk_nope_head_dim": (0, 1 << 16),
    "index_head_dim": (0, 1 << 16), "top_k_experts": (1, 1 << 20), "sliding_window_size": (0, 1 << 26),
}
# Other spellings of a key, read when the usual one is absent: Hunyuan-A13B's per-layer lists
# (moe_topk, num_shared_expert: a list whose entries are all one integer reads as that integer), Hy3's
# num_shared_experts, Gemma 4 MoE's top_k_experts (vLLM 0.30.0 vllm/model_executor/models/gemma4.py:365) and
# Dots3-Note's sliding_window_size (vLLM 0.30.0 vllm/models/dots3_note/nvidia/model.py:480).
KEY_ALIASES = {"num_experts_per_tok": ("moe_topk", "top_k_experts"),
               "n_shared_experts": ("num_shared_expert", "num_shared_experts"),
               "sliding_window": ("sliding_window_size",)}


def profile_from_hf_config(path: Path, model_id: str | None = None, text: str | None = None) -> ModelProfileRecord:
    """Derive a ModelProfile (family 'custom') from a Hugging Face ``config.json``.

    ``path`` is the file or the checkpoint directory holding it (``text``: the file's text, as a lock holds it). The model's name comes from
    ``model_id`` (``--model-id``) or the config's own name field; a config without one and no
    ``model_id`` is an error (a folder name says nothing about the model).
    """
    path = path / "config.json" if text is None and path.is_dir() else path
    text, config = _read_json(path, text)
    reader = _ConfigReader(str(path), text, config)
    fields = reader.profile_fields()
    name = model_id or reader.name()
    reader.raise_problems()
    fields.update(id=_profile_id(name), hf_id=name, family="custom", source="config.json")
    fields["sources"] = [f"derived from {path.name} of checkpoint {name}", *reader.notes]
    try:
        return freeze(ModelProfile(**fields), RECORDS)
    except ValidationError as exc:
        raise ValidationFailed([reader.field_problem(err) for err in exc.errors()]) from None


def _read_json(path: Path, text: str | None = None) -> tuple[str, dict]:
    """The text and object of a config.json, through optkit's one JSON reader (encodings, depth,
    duplicate keys with both lines, over-long numbers: ``optkit.catalog.jsonio``)."""
    text = read_text(path) if text is None else text  # text: a lock's copy of the file (--from-lock)
    config, _ = load_json_text(text, str(path))
    if not isinstance(config, dict):
        raise ValidationFailed([Problem(Location(str(path), 1), "config.json must hold a JSON object")])
    return text, config


def _profile_id(name: str) -> str:
    """A catalog-style id from a repo id or path: its last part, lowercase, [a-z0-9._-]."""
    raw = name.rstrip("/").split("/")[-1]
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", raw.lower()).strip("-._")
    return cleaned or "custom-model"


class _ConfigReader(LayerShapes):
    """Reads typed values from a config.json, collecting one Problem per bad or missing key.

    ``keys`` remembers, per ModelProfile field, the config key (as the file spells it) it was
    read from, so a later cross-field problem still names what the user wrote.
    """

    def __init__(self, file: str, text: str, config: dict):
        self.file, self.text, self.top = file, text, config
        self.lm, self.lm_path = config, ()
        for path in LM_PATHS:
            nested = _at(config, path)
            if isinstance(nested, dict):
                self.lm, self.lm_path = nested, path
                break
        self.prefix = "".join(f"{key}." for key in self.lm_path)
        self.problems: list[Problem] = []
        self.keys: dict[str, str] = {}
        self.notes: list[str] = []

    def raise_problems(self) -> None:
        """Raise every collected problem at once."""
        if self.problems:
            raise ValidationFailed(self.problems)

    def name(self) -> str:
        """The checkpoint's name from the config's own name field; a problem if there is none."""
        for key in NAME_KEYS:
            value = self.top.get(key)
            if isinstance(value, str) and value.strip("/ "):
                return value.strip()
        self.problems.append(Problem(
            Location(self.file), "names no model (it has no _name_or_path)",
            "give --model-id NAME: the Hugging Face repo id or the path `vllm serve` loads, also used as "
            "the served model name"))
        return ""

    def profile_fields(self) -> dict[str, Any]:
        """Every ModelProfile field that config.json determines."""
        hidden = self.integer("hidden_size", field="hidden_size")
        heads = self.integer("num_attention_heads", field="num_attention_heads")
        num_layers = self.integer("num_hidden_layers", field="num_layers")
        model_type = self.text_value("model_type", top=True)
        fields = dict(
            hf_model_type=model_type,
            text_model_type=self.text_value("model_type", default=""),
            architecture=self._architecture(),
            num_layers=num_layers,
            hidden_size=hidden,
            vocab_size=self.integer("vocab_size", field="vocab_size"),
            num_attention_heads=heads,
            num_kv_heads=self.integer("num_key_value_heads", default=heads, field="num_kv_heads"),
            head_dim=self._head_dim(hidden, heads),
            # 0 (absent) reads as None: a model without Gated DeltaNet layers has no linear heads
            linear_key_heads=self.integer("linear_num_key_heads", default=0, field="linear_key_heads") or None,
            linear_value_heads=self.integer("linear_num_value_heads", default=0, field="linear_value_heads") or None,
            mtp_layers=self._mtp_layers(model_type),
            is_vl=self._is_vl_model(model_type),
            dtype=self.text_value("dtype", "torch_dtype", default="unknown"),
        )
        fields.update(self._layer_split(num_layers))
        fields.update(self._moe())
        fields.update(self._shapes(fields))
        fields["native_weights"] = self._native_weights(fields)
        fields["config_code"] = self._config_code()
        return fields

    def _config_code(self) -> str | None:
        """The checkpoint's own config class (``auto_map.AutoConfig``; a list names the slow class first), or None."""
        auto_map = self.top.get("auto_map")
        named = auto_map.get("AutoConfig") if isinstance(auto_map, dict) else None
        named = named[0] if isinstance(named, list) and named else named
        if not isinstance(named, str) or not named.strip():
            return None
        self.keys["config_code"] = "auto_map.AutoConfig"
        return named.strip()

    def _native_weights(self, fields: dict[str, Any]) -> str | None:
        """The format the published checkpoint stores its weights in when it is not bf16: ``fp8`` for a
        ``quantization_config`` whose ``quant_method`` is fp8 (block-scaled e4m3, DeepSeek-V4's), ``fp8-fp4`` when
        its routed experts are fp4 besides (``expert_dtype``); None for bf16 weights or any other method (msModelSlim
        checkpoints carry no quantization_config: their format is their checkpoint's, ``checkpoints:``)."""
        config = self.value("quantization_config")[1]
        if not isinstance(config, dict) or str(config.get("quant_method", "")).lower() != "fp8":
            return None
        self.keys["native_weights"] = self._path("quantization_config")
        experts = str(self.value("expert_dtype")[1] or "").lower()
        return "fp8-fp4" if experts == "fp4" and fields.get("is_moe") else "fp8"

    def _is_vl_model(self, model_type: str) -> bool:
        """What vllm-ascend's is_vl_model() answers: the config carries ``vision_config``, unless vLLM
        flattens it away (``FLATTENED_MULTIMODAL``)."""
        vision = any(isinstance(_at(self.top, path), dict) for path in VISION_PATHS)
        if vision and model_type in FLATTENED_MULTIMODAL:
            self.notes.append(f"is_vl: {FLATTENED_MULTIMODAL[model_type]} flattens vision_config into the "
                              f"language model's config, so vllm-ascend's is_vl_model() is False")
            return False
        return vision

    def _head_dim(self, hidden: int, heads: int) -> int:
        """``head_dim``, or its default (``_default_head_dim``) when absent; an MLA config that writes 0 there
        (GLM-5.3-Flash: GLM's head_dim is the rope width, 0 with qk_rope_head_dim 0) reads as absent."""
        if self.value("kv_lora_rank")[1] and self.value("head_dim")[1] == 0:
            self.keys["head_dim"] = self._path("qk_nope_head_dim")
            self.notes.append("head_dim: 0 in an MLA config (the rope width): the query/key head is "
                              "qk_nope_head_dim + qk_rope_head_dim")
            return self._default_head_dim(hidden, heads)
        return self.integer("head_dim", default=self._default_head_dim(hidden, heads), field="head_dim")

    def _default_head_dim(self, hidden: int, heads: int) -> int:
        """The per-head width a config without ``head_dim`` implies: MLA's query/key head
        (``qk_nope_head_dim + qk_rope_head_dim``, transformers' DeepseekV3Config.qk_head_dim), else
        hidden_size / num_attention_heads."""
        if self.value("kv_lora_rank")[1]:
            nope = self.integer("qk_nope_head_dim", default=0)
            rope = self.integer("qk_rope_head_dim", default=0)
            if nope + rope:
                return nope + rope
        return hidden // heads if heads else 0

    def _compressed_kv_layers(self, num_layers: int) -> dict[int, int]:
        """Decoder layers per KV compression ratio, from DeepSeek-V4's ``compress_ratios`` (one entry a
        layer; entries past num_hidden_layers belong to the MTP/DSpark stages and are not counted; 0: the
        layer keeps only its sliding window). DeepSeek-V4.1 shares compressed KV: only its
        ``kv_source_layer_ids`` keep a compressed cache, the other layers read the nearest source below
        them (vLLM 0.30.0 models/deepseek_v41/attention.py:255-300), so they count as 0. {} for a config
        without ``compress_ratios``."""
        ratios = self._layer_list("compress_ratios", num_layers, num_layers, "entries")
        if ratios is None:
            return {}
        self.keys["kv_compression_layers"] = self._path("compress_ratios")
        sources = self._layer_list("kv_source_layer_ids", 0, num_layers, "ids")
        counted = [r if sources is None or layer in sources else 0 for layer, r in enumerate(ratios[:num_layers])]
        return {ratio: counted.count(ratio) for ratio in sorted(set(counted))}

    def _layer_list(self, key: str, least: int, layers: int, what: str) -> list[int] | None:
        """A per-layer integer list (``compress_ratios``: at least ``least`` entries; ``kv_source_layer_ids``:
        layer ids below num_hidden_layers); None when absent or bad (a problem is recorded)."""
        value = self.value(key)[1]
        if value is None:
            return None
        low, high = (0, layers - 1) if what == "ids" else _RANGES[key]
        if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value):
            self._bad(key, f"must be a list of integers between {low} and {high} (got {_shown(value)})")
            return None
        if layers and len(value) < least:
            self._bad(key, f"has {len(value)} {what} but num_hidden_layers is {layers}")
            return None
        return value

    def _shapes(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The widths and spans that size weights and KV cache (MLA rank, DSA indexer key, sliding window,
        FFN widths, context length, V4's compressed layers); an absent or 0 value reads as None (the model
        has no such part)."""
        def optional(key: str, field: str) -> int | None:
            value = self.integer(key, default=0, field=field)
            return value or None

        mla = optional("kv_lora_rank", "kv_lora_rank")
        dense_width, moe_width, shared_width = self._ffn_widths(fields, optional)
        window = self.integer("sliding_window", default=0, field="sliding_window") or None
        layer_types = self.lm.get("layer_types")
        sliding = layer_types.count("sliding_attention") if isinstance(layer_types, list) else 0
        tied = self.value("tie_word_embeddings")[1]
        return dict(
            kv_lora_rank=mla,
            qk_rope_head_dim=optional("qk_rope_head_dim", "qk_rope_head_dim") if mla else None,
            index_head_dim=optional("index_head_dim", "index_head_dim"),
            sliding_window=window if window and (sliding or not isinstance(layer_types, list)) else None,
            sliding_window_layers=sliding,
            intermediate_size=dense_width,
            moe_intermediate_size=moe_width,
            moe_latent_size=optional("routed_expert_hidden_size", "moe_latent_size") if fields.get("is_moe") else None,
            q_lora_rank=None if mla else optional("q_lora_rank", "q_lora_rank"),
            o_lora_rank=optional("o_lora_rank", "o_lora_rank"),
            o_groups=optional("o_groups", "o_groups"),
            index_n_heads=optional("index_n_heads", "index_n_heads"),
            dspark_block_size=optional("dspark_block_size", "dspark_block_size"),
            shared_expert_intermediate_size=shared_width,
            first_dense_layers=self._first_dense_layers() if fields.get("is_moe") else 0,
            max_position_embeddings=optional("max_position_embeddings", "max_position_embeddings"),
            tie_word_embeddings=tied is True,
            kv_compression_layers=self._compressed_kv_layers(fields["num_layers"]),
            ngram_embedding_params=self._ngram_embedding(fields),
        )

    def _ngram_embedding(self, fields: dict[str, Any]) -> int | None:
        """Parameters of Qwen4-Exp's n-gram (PLE) tables: per layer in ``ple_layer_ids``, (ngram_size - 1) x
        heads_per_ngram heads of ple_embed_dim / heads columns, each head's rows the next prime above
        ngram_vocab_size_base (vLLM 0.30.0 models/qwen4_exp/nvidia/ngram_embedding.py:612-630, 693), counted as
        the base: layers x base x ple_embed_dim (ple_embed_dim defaults to hidden_size, models/qwen4_exp/
        config.py:79-81). None without ``ple_layer_ids``."""
        layers = self.value("ple_layer_ids")[1]
        if not layers:
            return None
        if not isinstance(layers, list):
            self._bad("ple_layer_ids", f"must be a list of layer ids (got {_shown(layers)})")
            return None
        self.keys["ngram_embedding_params"] = self._path("ple_layer_ids")
        base = self.integer("ngram_vocab_size_base", default=20_000_000)
        width = self.integer("ple_embed_dim", default=0) or fields["hidden_size"]
        return len(layers) * base * width

    def value(self, *keys: str, top: bool = False) -> tuple[str, Any]:
        """The first of ``keys`` present (language-model config first, then top level)."""
        scopes = [self.top] if top else [self.lm, self.top]
        for scope in scopes:
            for key in keys:
                if scope.get(key) is not None:
                    return key, scope[key]
        return keys[0], None

    def integer(self, *keys: str, default: int | None = None, field: str = "", limits: str = "") -> int:
        """An integer within its plausible range (``_RANGES``); a missing key with no default, a
        non-integer or an impossible value is a problem (and reads as 0)."""
        key, value = self.value(*keys, *(alias for k in keys for alias in KEY_ALIASES.get(k, ())))
        if field:
            self.keys[field] = self._path(key)
        if value is None and default is not None:
            return default
        value = _one_per_layer(value)
        low, high = _RANGES[limits or key]
        if value is None:
            self._missing(key)
        elif isinstance(value, bool) or not isinstance(value, int):
            self._bad(key, f"must be an integer (got {_shown(value)})")
        elif not low <= value <= high:
            self._bad(key, f"must be between {low} and {high} (got {_shown(value)})")
        else:
            return value
        return 0

    def text_value(self, *keys: str, default: str | None = None, top: bool = False) -> str:
        """A string; a missing key with no default, or a non-string, is a problem (and reads as '')."""
        key, value = self.value(*keys, top=top)
        if value is None and default is not None:
            return default
        if value is None:
            self._missing(key, top)
        elif not isinstance(value, str):
            self._bad(key, f"must be a string (got {_shown(value)})", top)
        else:
            return value
        return ""

    def _architecture(self) -> str:
        architectures = self.top.get("architectures") or self.lm.get("architectures")
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
            return architectures[0]
        if architectures is None:
            self._missing("architectures", top=True)
        else:
            self._bad("architectures", "must be a non-empty list of class names", top=True)
        return ""

    def _mtp_layers(self, model_type: str) -> int | None:
        """MTP layers the way vLLM counts them (``VLLM_MTP_LAYER_KEYS``); None when the file cannot tell."""
        key = VLLM_MTP_LAYER_KEYS.get(model_type)
        if key is None:
            self.notes.append(f"mtp: vLLM (0.23.0, 0.30.0) has no MTP drafter for model_type {model_type!r}: no MTP head")
            return 0
        self.keys["mtp_layers"] = self._path(key)
        if self.value(key)[1] is None and model_type in MTP_DEFAULTS:
            self.notes.append(f"mtp: {key} is absent; vLLM's {model_type} config class sets it to "
                              f"{MTP_DEFAULTS[model_type]} (MTP_DEFAULTS)")
            return MTP_DEFAULTS[model_type]
        if self.value(key)[1] is None:
            self.notes.append(f"mtp: {key} is absent, so config.json does not say whether the checkpoint ships "
                              f"an MTP head (vLLM would build its default of 1 layer): unknown")
            return None
        return self.integer(key, limits="mtp")

    def field_problem(self, err: dict) -> Problem:
        """A ModelProfile validation error, located at the config key the field was read from."""
        field = str(err["loc"][0]) if err["loc"] else ""
        path = self.keys.get(field, field)
        message = err["msg"].removeprefix("Value error, ")
        for name, key in sorted(self.keys.items(), key=lambda item: -len(item[0])):
            message = re.sub(rf"\b{name}\b", key, message)
        return Problem(Location(self.file, self._line(*path.split(".")), path), message)

    def _path(self, key: str) -> str:
        """``key`` as the file spells it: under text_config when it is read from there."""
        return (self.prefix if self.prefix and key in self.lm else "") + key

    def _missing(self, key: str, top: bool = False) -> None:
        prefix = "" if top else self.prefix
        owner = self.lm_path if prefix else ()
        location = Location(self.file, self._line(*owner), prefix + key)
        self.problems.append(Problem(location, "required key is missing"))

    def _bad(self, key: str, message: str, top: bool = False) -> None:
        path = key if top else self._path(key)
        self.problems.append(Problem(Location(self.file, self._line(*path.split(".")), path), message))

    def _line(self, *keys: str) -> int:
        """Line of the JSON key path ``keys`` (each searched after the previous); 1 if not found."""
        position, line = 0, 1
        for key in keys:
            match = re.compile(rf'"{re.escape(key)}"\s*:').search(self.text, position)
            if not match:
                break
            position = match.end()
            line = self.text.count("\n", 0, match.start()) + 1
        return line


def _at(config: dict, path: tuple[str, ...]) -> Any:
    """The value at the key path ``path`` of ``config`` (None where a key is missing)."""
    node: Any = config
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _one_per_layer(value: Any) -> Any:
    """A per-layer list whose entries are all the same integer, as that integer (Hunyuan's
    ``moe_topk: [8, 8, …]``); any other value unchanged (a mixed list stays a list: a problem)."""
    if isinstance(value, list) and value and all(type(v) is int and v == value[0] for v in value):
        return value[0]
    return value
